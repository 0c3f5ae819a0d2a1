//! The matchers pinfold had before this crate (kept verbatim in `old/`) as oracles: on a
//! generated table of patterns and texts, each caller's syntax answers exactly as that
//! caller's own matcher did (the audit query matcher excepted where documented below).

use pinfold_glob::{is_match, is_match_prefix, Syntax};

mod old;

use old::{audit, policy, sandbox_env, sandbox_paths};

/// Every string of up to `max` symbols from `alphabet`.
fn strings(alphabet: &[&str], max: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut last = vec![String::new()];
    for _ in 0..max {
        let mut next = Vec::new();
        for s in &last {
            for a in alphabet {
                next.push(format!("{s}{a}"));
            }
        }
        out.extend(next.iter().cloned());
        last = next;
    }
    out
}

/// A small deterministic generator (xorshift) for longer random strings.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn string(&mut self, alphabet: &[&str], max: usize) -> String {
        let len = (self.next() % (max as u64 + 1)) as usize;
        (0..len).map(|_| alphabet[(self.next() % alphabet.len() as u64) as usize]).collect()
    }
}

const PATTERN_SYMBOLS: &[&str] = &["a", "b", "*", "?", "[", "]", "!", "^", "-", "é"];
const TEXT_SYMBOLS: &[&str] = &["a", "b", "[", "]", "!", "-", "*", "?", "é", "^"];

/// Exhaustive short strings, then longer random ones: (pattern, text) pairs to compare on,
/// made once for all the tests.
fn table() -> &'static [(String, String)] {
    static TABLE: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    TABLE.get_or_init(make_table)
}

fn make_table() -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let pats = strings(&PATTERN_SYMBOLS[..8], 4);
    let texts = strings(&TEXT_SYMBOLS[..6], 3);
    for p in &pats {
        for t in &texts {
            pairs.push((p.clone(), t.clone()));
        }
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..200_000 {
        pairs.push((rng.string(PATTERN_SYMBOLS, 10), rng.string(TEXT_SYMBOLS, 12)));
    }
    // Realistic shapes: rule tokens, path components, variable names, audit queries.
    for p in ["git *", "*rm -rf*", "l?", ".env*", "id_*", "f[0-9]", "f[!0-9]", "*.pem", "[!.]*", "*TOKEN*", "*_KEY", "AWS_*", "/h/*/.ssh", "/[a-h]/?ssh*", "[]x]*", "[^a]*"] {
        for t in ["git push --force", "sudo rm -rf /", "ls", ".env.local", "id_rsa", "known_hosts", "f1", "fx", "key.pem", ".bashrc", "GITHUB_TOKEN", "MY_API_KEY", "AWS_PROFILE", "/h/me/.ssh", "/b/.sshx", "]x", "b", "rm *.txt"] {
            pairs.push((p.to_string(), t.to_string()));
        }
    }
    pairs
}

#[test]
fn the_rule_matcher_answers_as_before() {
    for (p, t) in table() {
        assert_eq!(is_match(p, t, Syntax::SHELL), policy::glob_match(p, t), "{p:?} {t:?}");
    }
}

#[test]
fn prefix_matching_answers_as_before() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let path_symbols = ["a", "b", "/", "*", "?", "[", "]", "!", "é", "-"];
    for _ in 0..100_000 {
        let p = rng.string(&path_symbols, 8);
        let t = rng.string(&path_symbols[..3], 12);
        let mut ends: Vec<usize> = t.match_indices('/').map(|(i, _)| i).collect();
        ends.push(t.len());
        for e in [&ends[..], &ends[..1], &[][..], &[t.len()][..]] {
            assert_eq!(is_match_prefix(&p, &t, e, Syntax::SHELL), policy::glob_match_prefix(&p, &t, e), "{p:?} {t:?} {e:?}");
        }
    }
}

#[test]
fn the_sandbox_path_matcher_answers_as_before() {
    // The recursive matcher is exponential in the stars: the random patterns stay short enough.
    for (p, t) in table() {
        assert_eq!(is_match(p, t, Syntax::FIRST_BRACKET), sandbox_paths(p, t), "{p:?} {t:?}");
    }
}

#[test]
fn the_secret_name_matcher_answers_as_before() {
    for (p, t) in table() {
        assert_eq!(is_match(p, t, Syntax::STAR), sandbox_env::matches(p, t), "{p:?} {t:?}");
    }
}

/// The old audit matcher compared a pattern's `*` with a `*` in the text as a literal first,
/// and then could not let it stand for more: `rm *` did not find `rm *.txt`. That is the only
/// difference: wherever the two disagree, the text holds a `*`, the old answer was no, and the
/// recursive reading of the same syntax (the sandbox's matcher without classes) says yes.
#[test]
fn the_audit_matcher_answers_as_before_but_for_a_star_in_the_text() {
    let mut differ = 0;
    for (p, t) in table() {
        let (old, new) = (audit(p, t), is_match(p, t, Syntax::STAR_QUESTION));
        if old != new {
            differ += 1;
            assert!(!old && new && t.contains('*'), "{p:?} {t:?}: was {old}, now {new}");
            // The reading of `*` and `?` the old matcher meant: classes never open here.
            if !p.contains('[') {
                assert!(sandbox_paths(p, t), "{p:?} {t:?}");
            }
        }
    }
    assert!(differ > 0, "the table holds the case the old matcher got wrong");
    assert!(!audit("rm *", "rm *.txt"));
    assert!(is_match("rm *", "rm *.txt", Syntax::STAR_QUESTION));
}

/// The secret-name matcher's shortcut (`*` only at the ends) agreed with its recursive glob on
/// these; the one matcher agrees with both.
#[test]
fn the_secret_name_table_agrees_with_the_recursive_glob() {
    let names = ["A_TOKEN", "TOKEN", "MY_KEY", "KEYRING", "AWS_X", "XAWS_", "SSH_AUTH_SOCK", "SSH_AUTH_SOCKS", "NPM_CONFIG__AUTH", "PATH", "", "*", "A*B"];
    let secret_patterns = ["*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*_KEY", "*_KEY_ID", "*APIKEY*", "*API_KEY*", "*CREDENTIAL*", "*PRIVATE_KEY*", "AWS_*", "AZURE_*", "GOOGLE_APPLICATION_CREDENTIALS", "GCP_*", "CLOUDSDK_*", "DIGITALOCEAN_*", "HEROKU_API_*", "NPM_CONFIG__AUTH*", "*_AUTH", "*_AUTH_TOKEN", "SSH_AUTH_SOCK", "KUBECONFIG", "VAULT_*", "DOCKER_AUTH_CONFIG"];
    for p in secret_patterns.into_iter().chain(["*", "**", "A*B", "*A*B*", "X", ""]) {
        for n in names {
            let old = sandbox_env::glob(p.as_bytes(), n.as_bytes());
            assert_eq!(sandbox_env::matches(p, n), old, "pattern {p:?}, name {n:?}");
            assert_eq!(is_match(p, n, Syntax::STAR), old, "pattern {p:?}, name {n:?}");
        }
    }
}
