//! Property tests: the parser never panics, every span slices the input, and a successful
//! parse is deterministic. Inputs are arbitrary strings and strings assembled from shell
//! tokens that tend to nest, quote and break things.

use pinfold_shell::CommandTree;
use proptest::prelude::*;

/// Spans of commands, words, assignments and redirects lie within the input on char
/// boundaries; parents point backwards at real commands.
fn check(src: &str, tree: &CommandTree) -> Result<(), TestCaseError> {
    prop_assert_eq!(&tree.source, src);
    let ok = |r: &std::ops::Range<usize>| {
        r.start <= r.end && r.end <= src.len() && src.is_char_boundary(r.start) && src.is_char_boundary(r.end)
    };
    for (i, c) in tree.commands.iter().enumerate() {
        prop_assert!(ok(&c.span), "command span {:?} in {:?}", c.span, src);
        for w in &c.words {
            prop_assert!(ok(&w.span), "word span {:?} in {:?}", w.span, src);
        }
        for a in &c.assignments {
            prop_assert!(ok(&a.span) && ok(&a.value.span), "assignment span in {:?}", src);
        }
        for r in &c.redirects {
            prop_assert!(ok(&r.span), "redirect span {:?} in {:?}", r.span, src);
            if let Some(t) = &r.target {
                prop_assert!(ok(&t.span), "redirect target span in {:?}", src);
            }
        }
        if let Some(p) = c.parent {
            prop_assert!(p < i, "parent {} of command {} in {:?}", p, i, src);
        }
    }
    for (_, r) in &tree.functions {
        prop_assert!(ok(r));
    }
    Ok(())
}

fn run(src: &str) -> Result<(), TestCaseError> {
    let first = pinfold_shell::parse(src);
    let second = pinfold_shell::parse(src);
    match (&first, &second) {
        (Ok(a), Ok(b)) => {
            check(src, a)?;
            prop_assert_eq!(serde_json::to_string(a).unwrap(), serde_json::to_string(b).unwrap());
        }
        (Err(a), Err(b)) => prop_assert_eq!(a, b),
        _ => prop_assert!(false, "parse of {:?} is not deterministic", src),
    }
    Ok(())
}

const TOKENS: &[&str] = &[
    "$(", ")", "`", "'", "\"", "<<EOF", "<<'EOF'", "<<-EOF", "\nEOF\n", "EOF", "\\", "\n", " ", ";", "&",
    "&&", "||", "|", "|&", "(", "{", "}", "((", "))", "$((", "<(", ">(", "${", "${x:-", "$x", "$@", "X=rm",
    "$X", "rm", "-rf", "/", "echo", "cat", "if", "then", "fi", "else", "while", "do", "done", "for", "in",
    "case", "esac", ";;", "f()", "function", "eval", "bash -c", "sh -c '", "sudo", "env", "xargs", "find . -exec",
    "{}", "\\;", "+", "timeout 5", "nice -n", "exec", "command", "watch", ">", ">>", "2>&1", "<", "<<<", "#",
    "~", "*", "?", "[", "]", "[[", "]]", "=", "a=(", "export", "local", "declare -a", "unset", "alias a=",
    "coproc", "time", "!", "select", "é", "日", "$'\\x41'", "\t", "\r\n", "\\\n",
];

fn shellish() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_strings(s in "\\PC{0,120}") {
        run(&s)?;
    }

    #[test]
    fn arbitrary_bytes_as_text(s in any::<String>()) {
        run(&s)?;
    }

    #[test]
    fn shell_token_soup(s in shellish()) {
        run(&s)?;
    }

    #[test]
    fn token_soup_spaced(v in prop::collection::vec(prop::sample::select(TOKENS), 0..30)) {
        run(&v.join(" "))?;
    }
}
