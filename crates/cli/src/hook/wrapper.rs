//! The command line `pinfold init` installs: `pinfold hook <agent>` wrapped so that it fails
//! closed even when pinfold itself cannot run.
//!
//! An agent runs a hook's command through a shell. If the binary is gone (`cargo clean`, an
//! upgrade that moved it), not executable, or killed by a signal, the shell exits 127, 126 or
//! 128+N: a non-blocking error for Claude Code, Codex and Gemini CLI (only 2 blocks), a skipped
//! hook for Copilot CLI, so every call would run unguarded. The wrapper turns each of these,
//! and any other status the agent would not read as a block, into that agent's blocking
//! answer, and passes pinfold's own answers through unchanged:
//!
//! ```text
//! /bin/sh -c 'SCRIPT' pinfold-hook '/path/to/pinfold' ['DENY-JSON']
//! ```
//!
//! * exit-2 agents (Claude Code, Codex, Gemini CLI): `s=0; "$1" hook AGENT || s=$?` — pinfold
//!   reads stdin and writes stdout itself; statuses 0 and 2 are its answers and pass through;
//!   anything else reads what is left of stdin, says why on stderr and exits 2.
//! * deny-on-stdout agents (Cursor, Copilot CLI): pinfold's stdout is captured (`o=$(…)`) and
//!   printed only when it exited 0, so a pinfold killed halfway through writing never leaves
//!   half an answer; otherwise the deny in `$2` (a `printf` format whose `%s` is the status)
//!   is printed, and the shell exits 0.
//!
//! The outer line is one simple command, read the same by sh, bash, zsh and fish (Codex runs
//! hooks with the user's `$SHELL -lc`): the script contains neither `'` nor `\`, so single
//! quotes mean the same in all of them, and the binary's path is quoted by [`quote`], which
//! puts `'` and `\` in double quotes. The inner script is run by `/bin/sh` whatever the
//! agent's shell, without `set -e` and without depending on it (`|| s=$?`). The shell that
//! runs `/bin/sh` as its only command `exec`s it (sh, bash, zsh), so the wrapper costs one
//! `sh` start-up and one fork over running pinfold directly.
//!
//! A file of its own (a script beside the settings) would be one more thing to lose or to
//! leave stale; the line in the settings file carries everything.

use std::path::{Path, PathBuf};

use super::agent::AgentName;

/// `$0` of the wrapper's shell: names it in the shell's own messages (`pinfold-hook: 1:
/// /path: not found`) and marks the line as pinfold's.
const NAME: &str = "pinfold-hook";

/// What the wrapper says on stderr when pinfold gave no answer (after the shell's own line).
const WHY: &str = r#"printf %s "pinfold: the hook $1 did not answer (exit status $s), so the call is blocked; run pinfold doctor" >&2; echo >&2"#;

/// Drain the input pinfold did not read, so that the agent's write never meets a closed pipe
/// (the agent closes stdin: pinfold itself reads to the end).
const DRAIN: &str = "while read -r l; do :; done";

fn blocks_by_exit_2(agent: AgentName) -> bool {
    matches!(agent, AgentName::ClaudeCode | AgentName::Codex | AgentName::Gemini)
}

/// The script run by `/bin/sh -c`.
fn script(agent: AgentName) -> String {
    let a = agent.name();
    if blocks_by_exit_2(agent) {
        format!(r#"s=0; "$1" hook {a} || s=$?; case $s in 0|2) exit $s;; esac; {DRAIN}; {WHY}; exit 2"#)
    } else {
        // One argument for each `%s` of the deny.
        let n = deny_format(agent).map_or(0, |d| d.matches("%s").count());
        let status = r#" "$s""#.repeat(n);
        format!(
            r#"s=0; o=$("$1" hook {a}) || s=$?; case $s in 0) if [ -n "$o" ]; then printf %s "$o"; echo; fi; exit 0;; esac; {DRAIN}; {WHY}; printf "$2"{status}; echo"#
        )
    }
}

/// The deny the wrapper prints for Cursor and Copilot CLI: a `printf` format, `%s` the status.
fn deny_format(agent: AgentName) -> Option<String> {
    let line = "pinfold did not answer (exit status %s), so this call is blocked: pinfold is missing, not executable or was killed; run pinfold doctor";
    match agent {
        AgentName::Cursor => Some(format!(r#"{{"permission":"deny","user_message":"{line}","agent_message":"{line}"}}"#)),
        AgentName::Copilot => Some(format!(r#"{{"permissionDecision":"deny","permissionDecisionReason":"{line}"}}"#)),
        _ => None,
    }
}

/// Quote `s` as one word for sh, bash, zsh and fish alike: single quotes, with each `'` and
/// `\` in double quotes instead (inside single quotes fish reads `\'` and `\\` as escapes).
pub fn quote(s: &str) -> String {
    if s.is_empty() {
        return "''".into();
    }
    let mut out = String::with_capacity(s.len() + 2);
    let mut open = false;
    for c in s.chars() {
        if c == '\'' || c == '\\' {
            if open {
                out.push('\'');
                open = false;
            }
            out.push_str(if c == '\'' { r#""'""# } else { r#""\\""# });
        } else {
            if !open {
                out.push('\'');
                open = true;
            }
            out.push(c);
        }
    }
    if open {
        out.push('\'');
    }
    out
}

/// The command line that runs `exe hook <agent>` and fails closed.
pub fn command(agent: AgentName, exe: &Path) -> String {
    let mut line = format!("/bin/sh -c '{}' {NAME} {}", script(agent), quote(&exe.to_string_lossy()));
    if let Some(deny) = deny_format(agent) {
        line.push_str(&format!(" '{deny}'"));
    }
    line
}

/// How an installed command line runs pinfold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Form {
    /// The wrapper `init` writes now, exactly: fails closed.
    Wrapped,
    /// A wrapper of another shape (an older pinfold's, or edited by hand).
    OtherWrapper,
    /// `'/path/pinfold' hook <agent>` as earlier releases wrote it: a pinfold that cannot run
    /// lets every call through.
    Bare,
}

/// An installed command line recognised as pinfold's hook for one agent.
#[derive(Debug, Clone)]
pub struct Recognised {
    pub form: Form,
    /// The binary it runs, as written (`None` when the line is not plain enough to tell).
    pub binary: Option<String>,
}

/// The words of `line` when it is one simple command of literal words (quotes as sh reads
/// them; no expansion, operator or redirection).
fn words(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => out.extend(cur.take()),
            '\'' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '\'' => break,
                        x => w.push(x),
                    }
                }
            }
            '"' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.next()? {
                            x @ ('"' | '\\' | '$' | '`') => w.push(x),
                            '\n' => {}
                            x => {
                                w.push('\\');
                                w.push(x);
                            }
                        },
                        '$' | '`' => return None,
                        x => w.push(x),
                    }
                }
            }
            '\\' => match chars.next()? {
                '\n' => {}
                x => cur.get_or_insert_with(String::new).push(x),
            },
            '$' | '`' | ';' | '&' | '|' | '<' | '>' | '(' | ')' | '\n' | '*' | '?' | '[' | '#' | '~' => return None,
            x => cur.get_or_insert_with(String::new).push(x),
        }
    }
    out.extend(cur);
    Some(out)
}

/// Whether `line` runs `pinfold hook <agent>`, and how.
pub fn recognise(line: &str, agent: AgentName) -> Option<Recognised> {
    let a = agent.name();
    let w = words(line);
    if let Some(w) = &w
        && w.len() >= 5
        && w[0].ends_with("/sh")
        && w[1] == "-c"
        && w[3] == NAME
        && w[2].contains(&format!(r#""$1" hook {a}"#))
    {
        let form = if line == command(agent, Path::new(&w[4])) { Form::Wrapped } else { Form::OtherWrapper };
        return Some(Recognised { form, binary: Some(w[4].clone()) });
    }
    let trimmed = line.trim_end();
    if trimmed.ends_with(&format!(" hook {a}")) && trimmed.contains("pinfold") {
        let binary = w.filter(|w| w.len() == 3).map(|mut w| w.swap_remove(0));
        return Some(Recognised { form: Form::Bare, binary });
    }
    None
}

/// Why `exe` lies in a build directory that `cargo clean` or a cache cleaner empties, if it
/// does: under a directory holding `CACHEDIR.TAG` (cargo marks its target directory so), or
/// at `…/target/{debug,release}/` or `…/target/<triple>/{debug,release}/`.
pub fn build_dir(exe: &Path) -> Option<String> {
    if let Some(tagged) = exe.ancestors().skip(1).find(|d| d.join("CACHEDIR.TAG").is_file()) {
        return Some(format!("{} holds CACHEDIR.TAG: it is a build or cache directory, which `cargo clean` (or any cache cleaner) empties", tagged.display()));
    }
    let parts: Vec<&str> = exe.iter().filter_map(|p| p.to_str()).collect();
    let profile = |p: &str| p == "debug" || p == "release";
    let n = parts.len();
    let cargo = (n >= 3 && parts[n - 3] == "target" && profile(parts[n - 2])) || (n >= 4 && parts[n - 4] == "target" && profile(parts[n - 2]));
    cargo.then(|| format!("{} is in a cargo target directory, which `cargo clean` or a rebuild elsewhere takes away", exe.display()))
}

/// Whether `path` is a file the current user can execute; a name without a slash is looked up
/// in `PATH`. `Err` says why not.
#[allow(unsafe_code)]
pub fn runnable(path: &str) -> Result<PathBuf, String> {
    let full = if path.contains('/') {
        PathBuf::from(path)
    } else {
        let dirs = std::env::var_os("PATH").unwrap_or_default();
        match std::env::split_paths(&dirs).map(|d| d.join(path)).find(|p| p.is_file()) {
            Some(p) => p,
            None => return Err(format!("`{path}` is not found in PATH")),
        }
    };
    let meta = std::fs::metadata(&full).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{} is missing", full.display()),
        _ => format!("{} cannot be reached: {e}", full.display()),
    })?;
    if !meta.is_file() {
        return Err(format!("{} is not a file", full.display()));
    }
    let c = std::ffi::CString::new(full.as_os_str().as_encoded_bytes()).map_err(|_| format!("{} has a NUL byte", full.display()))?;
    // SAFETY: `c` is NUL-terminated.
    if unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::X_OK, libc::AT_EACCESS) } != 0 {
        return Err(format!("{} is not executable", full.display()));
    }
    Ok(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGENTS: [AgentName; 5] = [AgentName::ClaudeCode, AgentName::Codex, AgentName::Gemini, AgentName::Cursor, AgentName::Copilot];

    #[test]
    fn the_quoted_parts_hold_no_quote_or_backslash() {
        for a in AGENTS {
            let s = script(a);
            assert!(!s.contains(['\'', '\\']), "{s}");
            if let Some(d) = deny_format(a) {
                assert!(!d.contains(['\'', '\\']), "{d}");
                let v: serde_json::Value = serde_json::from_str(&d.replace("%s", "127")).expect("the deny is JSON");
                assert!(v.to_string().contains("deny"));
            }
        }
    }

    #[test]
    fn quote_words() {
        assert_eq!(quote("/usr/bin/pinfold"), "'/usr/bin/pinfold'");
        assert_eq!(quote("/o'k/a\\b"), r#"'/o'"'"'k/a'"\\"'b'"#);
        assert_eq!(quote("'"), r#""'""#);
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn recognises_every_form() {
        for a in AGENTS {
            for exe in ["/usr/local/bin/pinfold", "/home/x y/it's/pinfold", "/a\\b/pinfold"] {
                let line = command(a, Path::new(exe));
                let r = recognise(&line, a).unwrap_or_else(|| panic!("{line}"));
                assert_eq!((r.form, r.binary.as_deref()), (Form::Wrapped, Some(exe)), "{line}");
                for other in AGENTS.iter().filter(|o| **o != a) {
                    assert!(recognise(&line, *other).is_none(), "{line} taken for {}", other.name());
                }
                let bare = format!("{} hook {}", pinfold_shell::quote(exe), a.name());
                let r = recognise(&bare, a).unwrap_or_else(|| panic!("{bare}"));
                assert_eq!((r.form, r.binary.as_deref()), (Form::Bare, Some(exe)), "{bare}");
            }
            let edited = command(a, Path::new("/p/pinfold")).replace("run pinfold doctor", "see the docs");
            assert_eq!(recognise(&edited, a).map(|r| r.form), Some(Form::OtherWrapper));
        }
        assert!(recognise("./lint.sh", AgentName::ClaudeCode).is_none());
    }

    #[test]
    fn build_dirs() {
        let t = tempfile::tempdir().unwrap();
        let tagged = t.path().join("t/x86_64-unknown-linux-gnu/release");
        std::fs::create_dir_all(&tagged).unwrap();
        std::fs::write(t.path().join("t/CACHEDIR.TAG"), "Signature: 8a477f597d28d172789f06886806bc55\n").unwrap();
        assert!(build_dir(&tagged.join("pinfold")).is_some());
        assert!(build_dir(Path::new("/w/pinfold/target/release/pinfold")).is_some());
        assert!(build_dir(Path::new("/w/pinfold/target/debug/pinfold")).is_some());
        assert!(build_dir(Path::new("/w/target/x86_64-unknown-linux-gnu/release/pinfold")).is_some());
        assert!(build_dir(Path::new("/home/u/.cargo/bin/pinfold")).is_none());
        assert!(build_dir(Path::new("/srv/target/bin/pinfold")).is_none());
    }
}
