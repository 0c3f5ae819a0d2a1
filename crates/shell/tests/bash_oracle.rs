//! Differential tests against the real `/bin/bash`, the final word on what shell text means.
//!
//! (a) Syntax: for every input, `bash -n` accepts it exactly when we parse it, except for the
//!     documented cases where we are stricter. We may refuse what bash accepts (the input is
//!     then never allowed); we must never accept what bash rejects.
//! (b) Execution: harmless scripts run under `bash -x`; every command name bash traced must be
//!     among the commands we found, after our variable resolution and function handling.
//!
//! These tests need bash and fail, not skip, without it.

use std::path::PathBuf;
use std::process::Command;

const BASH: &str = "/bin/bash";

fn bash_accepts(text: &str) -> bool {
    let out = Command::new(BASH)
        .args(["--norc", "--noprofile", "-n", "-c", text])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap_or_else(|e| panic!("{BASH} must be installed for these tests: {e}"));
    out.status.success()
}

/// Inputs both sides must agree on.
const AGREE: &[&str] = &[
    "ls -la",
    "echo 'a b' \"c d\" e\\ f",
    "a | b && c || d; e &",
    "if a; then b; elif c; then d; else e; fi",
    "while read l; do echo \"$l\"; done < f",
    "until false; do break; done",
    "for f in *.txt; do rm -- \"$f\"; done",
    "for ((i=0; i<3; i++)); do echo $i; done",
    "select x in a b; do echo $x; done",
    "case $x in a) echo a;; b|c) echo b;& *) echo z;; esac",
    "f() { echo \"$1\"; }; f x",
    "function g { ls; }",
    "{ a; b; } > out 2>&1",
    "cat - 2>&1",
    "echo x | sqlfluff lint - 2>/dev/null | head",
    "( cd /tmp && ls )",
    "echo $(date) `date` \"$(id -u)\"",
    "cat <(ls) >(wc -l)",
    "echo $(( 1 + 2 * 3 ))",
    "(( x++ ))",
    "[[ -n $x && $y == a* ]]",
    "[ -f x ] || touch x",
    "a=(1 2 3); echo \"${a[@]}\"",
    "declare -A m; m[k]=v",
    "export X=1; local 2>/dev/null; readonly Y=2",
    "echo ${x:-default} ${#x} ${x/a/b} ${x##*/}",
    "echo a # comment $(rm -rf /)",
    "# just a comment",
    "echo a \\\n b",
    "cat <<EOF\nhello $x\nEOF",
    "cat <<'EOF'\n$(not run)\nEOF",
    "cat <<-EOF\n\tx\n\tEOF",
    "cat <<EOF | sh\necho hi\nEOF",
    "cat <<< \"here\"",
    "echo > f >> g 2> h &> i &>> j",
    "exec 3>&-",
    "coproc cat",
    "time ls",
    "! true",
    "a |& b",
    "sudo -u x -- ls",
    "bash -c 'echo hi'",
    "eval 'echo hi'",
    "X=rm; $X -rf /tmp/x",
    "echo $'a\\tb'",
    "echo é 日本",
    "",
    "\n\n",
    // Rejected by both.
    "echo ok\nrm -rf ~\nfoo (",
    "echo 'unterminated",
    "echo \"unterminated",
    "echo $(",
    "if true; then echo",
    "rm x; )",
    "{ rm x",
    "case x in",
    "a && && b",
    "|",
    "&& a",
    "a |",
    "fi",
    "done",
    "then echo",
    "for in; do",
    "echo `",
    "f() }",
    "(( ",
    "[[ ",
    "while true; do",
    "echo ${",
    "cat <(",
];

/// Inputs bash accepts and we refuse, on purpose or for want of a better grammar.
const STRICTER: &[(&str, &str)] = &[
    ("cat <<'EOF'; echo done\nhi\nEOF", "tree-sitter-bash loses the command after the heredoc operator"),
    ("cat <<A; cat <<B\na\nA\nb\nB", "two heredocs on one line"),
    ("cmd 3<> rw", "tree-sitter-bash does not know `<>` with a file descriptor"),
    ("coproc NAME { cat; }", "tree-sitter-bash reads a named coproc as plain words"),
    ("time { ls; }", "tree-sitter-bash reads `time` before a compound command as a word"),
    ("time for i in 1; do ls; done", "same"),
    ("cat <<EOF\n`date`\nEOF", "backticks in a heredoc body: tree-sitter leaves them as text"),
    ("echo \"${x:-`date`}\"", "backticks in a ${…} operand: tree-sitter leaves them as text"),
    ("echo a\0b", "NUL byte: bash drops it, we refuse"),
    ("case x in x) echo a;;& esac", "tree-sitter-bash rejects `;;&` before `esac`"),
];

#[test]
fn syntax_agrees_with_bash() {
    assert!(AGREE.len() + STRICTER.len() >= 60);
    let mut failures = Vec::new();
    for text in AGREE {
        let bash = bash_accepts(text);
        let ours = pinfold_shell::parse(text);
        if bash != ours.is_ok() {
            failures.push(format!("{text:?}: bash {}, pinfold {:?}", if bash { "accepts" } else { "rejects" }, ours.map(|t| t.commands.len())));
        }
    }
    for (text, why) in STRICTER {
        // The NUL case cannot be passed to bash as an argument; everything else must be
        // accepted by bash, or it belongs in AGREE.
        if !text.contains('\0') && !bash_accepts(text) {
            failures.push(format!("{text:?} is listed as stricter ({why}) but bash rejects it too"));
        }
        if pinfold_shell::parse(text).is_ok() {
            failures.push(format!("{text:?} is listed as stricter ({why}) but now parses: move it to AGREE"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A fresh, empty directory for one test run.
fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pinfold-shell-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

/// Command names bash ran for `script`, from its `-x` trace.
fn traced_names(script: &str, dir: &std::path::Path) -> Vec<String> {
    let text = format!("PS4='+TRACE '\nset -x\n{script}");
    let out = Command::new(BASH)
        .args(["--norc", "--noprofile", "-c", &text])
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap_or_else(|e| panic!("{BASH} must be installed for these tests: {e}"));
    assert!(out.status.success(), "{script:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut names = Vec::new();
    for line in stderr.lines() {
        let rest = line.trim_start_matches('+');
        let Some(cmd) = rest.strip_prefix("TRACE ") else { continue };
        let first = cmd.split(' ').next().unwrap_or("");
        // Assignments and keywords bash traces too.
        if first.contains('=') || matches!(first, "[[" | "((" | "for" | "case" | "select" | "set" | "") {
            continue;
        }
        names.push(first.trim_matches('\'').to_string());
    }
    names
}

const SCRIPTS: &[&str] = &[
    "echo hi",
    "true; : ; printf '%s\\n' x",
    "X=echo; $X hi",
    "X=printf; Y='%s\\n'; $X \"$Y\" a",
    "export C=true; $C",
    "f() { echo in f; true; }; f; f",
    "function g { printf x; }; g",
    "f() { g; }; g() { echo deep; }; f",
    "echo $(echo inner) `printf back`",
    "echo \"$(true; echo q)\"",
    "cat <(echo ps) > /dev/null",
    "echo a | cat | true",
    "true && echo yes || echo no",
    "false || echo fallback",
    "if true; then echo t; else echo f; fi",
    "for i in 1 2 3; do echo $i; done",
    "for ((i=0; i<2; i++)); do printf '%d' $i; done",
    "i=0; while [ $i -lt 2 ]; do i=$((i+1)); echo $i; done",
    "until true; do echo never; done; echo after",
    "case b in a) echo a;; b) echo b;; esac",
    "case a in a) echo a;& b) echo fall;; esac",
    "{ echo g1; echo g2; } > /dev/null",
    "( echo sub; true )",
    "x=$(echo v); echo $x",
    "echo $(( $(echo 2) + 1 ))",
    "cat <<EOF\n$(echo heredoc)\nEOF",
    "cat <<'EOF'\n$(echo not-run)\nEOF",
    "eval 'echo evaluated'",
    "eval echo two words",
    "bash -c 'echo child'",
    "sh -c 'true; echo sh'",
    "timeout 5 echo timed",
    "env A=1 printf '%s' \"$A\"",
    "nice -n 1 true",
    "command echo cmd",
    "builtin echo bi",
    "echo x | xargs echo",
    "printf 'a\\nb\\n' | xargs -I{} echo {}",
    "X=true; [ -n \"$X\" ] && $X",
    "echo start\necho middle\n\necho end",
    "echo a \\\n  b",
    "! false",
    "time true",
    "declare -a d=(1 2); echo ${d[1]}",
    "[[ -n x ]] && echo test",
];

/// Every command name bash ran appears among the commands we parsed.
#[test]
fn traced_commands_are_all_found() {
    assert!(SCRIPTS.len() >= 30);
    let dir = temp_dir("trace");
    let mut failures = Vec::new();
    for script in SCRIPTS {
        let tree = match pinfold_shell::parse(script) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{script:?}: {e}"));
                continue;
            }
        };
        // A transparent wrapper (`timeout 5 cmd`) is replaced by what it runs and named in
        // `wrappers`.
        let ours: Vec<&str> = tree
            .commands
            .iter()
            .filter_map(|c| c.words.first().filter(|w| !w.dynamic).map(|w| w.text.as_str()))
            .chain(tree.commands.iter().flat_map(|c| c.wrappers.iter().map(String::as_str)))
            .collect();
        // Children of `bash -c` trace too only when they run with -x; the names bash itself
        // traced are enough.
        for name in traced_names(script, &dir) {
            if !ours.contains(&name.as_str()) {
                failures.push(format!("{script:?}: bash ran `{name}`, pinfold found {ours:?}"));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Scripts where the name bash ran is not statically known to us: we must say so.
const UNRESOLVED: &[&str] = &[
    "a=(echo arr); \"${a[0]}\" ok",
    // A function body runs with whatever the variables hold at call time.
    "Y=echo; f() { $Y inside; }; f",
    "if true; then X=echo; fi; $X conditional",
    "for X in echo; do :; done; $X loop",
    "read X <<< echo; $X read",
];

#[test]
fn names_we_cannot_know_are_unresolved() {
    let dir = temp_dir("unresolved");
    for script in UNRESOLVED {
        let tree = pinfold_shell::parse(script).unwrap_or_else(|e| panic!("{script:?}: {e}"));
        let names = traced_names(script, &dir);
        assert!(names.iter().any(|n| n == "echo"), "{script:?}: bash ran {names:?}");
        let unresolved: Vec<_> = tree.commands.iter().filter(|c| c.unresolved.is_some()).collect();
        assert!(!unresolved.is_empty(), "{script:?}: nothing unresolved");
        assert!(!tree.commands.iter().any(|c| c.words.first().is_some_and(|w| w.text == "echo" && !w.dynamic)));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
