//! Commands that run other commands.
//!
//! **Transparent** wrappers change how a command runs, not what it may do: `timeout 60 cargo
//! test` is judged as `cargo test`, and the wrapper disappears from the result
//! ([`TRANSPARENT`]). **Powerful** wrappers add power or hide what runs: `sudo`, `xargs`,
//! `find -exec`, `sh -c`, `eval`, `watch` are judged as themselves *and* by what they run
//! ([`POWERFUL`]). Strings given to `sh -c`, `eval`, `watch` and `env -S` are returned for
//! the walker to parse as shell text.
//!
//! When a wrapper's own options cannot be read (an option we do not know, a value only known
//! at run time), what it runs is [`Inner::Unresolved`]: a consumer must not allow it.

use std::ops::Range;

use crate::{Assignment, SimpleCommand, Word};

/// Wrappers judged only by what they run.
pub const TRANSPARENT: &[&str] = &[
    "env", "nice", "nohup", "timeout", "time", "stdbuf", "ionice", "command", "builtin", "exec",
    "setsid", "chrt", "taskset", "coproc",
];

/// Wrappers judged both as themselves and by what they run.
pub const POWERFUL: &[&str] = &[
    "sudo", "doas", "xargs", "find", "sh", "bash", "zsh", "dash", "ksh", "mksh", "eval", "watch",
];

/// What a wrapper runs.
#[derive(Debug, Clone)]
pub enum Inner {
    /// An argv (and env assignments the wrapper adds, as `env A=1 cmd` does).
    Argv {
        /// The command and its arguments.
        words: Vec<Word>,
        /// Assignments the wrapper puts in the command's environment.
        assignments: Vec<Assignment>,
    },
    /// Shell text to parse (`sh -c STRING`, `eval ARGS`, `watch CMD`).
    ShellString {
        /// The text.
        text: String,
        /// Where the text starts in the input, when it appears there verbatim (`'…'`).
        exact_base: Option<usize>,
        /// The range of the argument(s) holding the text.
        span: Range<usize>,
    },
    /// Something runs, but we cannot tell what.
    Unresolved {
        /// Why, for a person.
        reason: String,
        /// What we could read of it.
        words: Vec<Word>,
    },
}

/// The result of looking at a command as a possible wrapper.
#[derive(Debug, Clone)]
pub enum Unwrapped {
    /// Not a wrapper (or a wrapper used in a way that runs nothing, like `command -v x`).
    None,
    /// Replace the command by what it runs.
    Transparent {
        /// The wrapper's name.
        wrapper: String,
        /// What it runs.
        inner: Inner,
    },
    /// Keep the command and add what it runs.
    Powerful {
        /// The wrapper's name.
        wrapper: String,
        /// What it runs (`find` may run several).
        inner: Vec<Inner>,
    },
}

/// Look at `cmd` as a wrapper. `top` is the original input, used to tell whether a `-c`
/// string appears in it verbatim.
pub fn unwrap(cmd: &SimpleCommand, top: &str) -> Unwrapped {
    let Some(first) = cmd.words.first() else { return Unwrapped::None };
    if first.dynamic {
        return Unwrapped::None;
    }
    let name = basename(&first.text);
    let w = &cmd.words;
    let t = |inner| Unwrapped::Transparent { wrapper: name.to_string(), inner };
    let p = |inner| Unwrapped::Powerful { wrapper: name.to_string(), inner: vec![inner] };
    match name {
        "nohup" | "builtin" | "setsid" | "coproc" => {
            let spec = if name == "setsid" { Spec::flags("cfw", &["ctty", "fork", "wait"]) } else { Spec::none() };
            opt_then_argv(w, &spec, name).map_or(Unwrapped::None, t)
        }
        "exec" => match opt_then_argv(w, &Spec { short_val: "a", short_flag: "cl", ..Spec::none() }, name) {
            Some(i) => t(i),
            None => Unwrapped::None,
        },
        "command" => {
            // `command -v x` / `-V x` only describe x.
            if w.iter().skip(1).take_while(|x| x.text.starts_with('-')).any(|x| x.text.contains(['v', 'V'])) {
                return Unwrapped::None;
            }
            opt_then_argv(w, &Spec::flags("p", &[]), name).map_or(Unwrapped::None, t)
        }
        "time" => opt_then_argv(w, &Spec { short_val: "fo", short_flag: "pav", long_val: &["format", "output"], long_flag: &["append", "verbose", "portability"] }, name)
            .map_or(Unwrapped::None, t),
        "nice" => nice(w).map_or(Unwrapped::None, t),
        "timeout" => {
            let spec = Spec { short_val: "sk", short_flag: "v", long_val: &["signal", "kill-after"], long_flag: &["preserve-status", "foreground", "verbose"] };
            with_operands(w, &spec, 1, name).map_or(Unwrapped::None, t)
        }
        "stdbuf" => {
            let spec = Spec { short_val: "ioe", short_flag: "", long_val: &["input", "output", "error"], long_flag: &[] };
            opt_then_argv(w, &spec, name).map_or(Unwrapped::None, t)
        }
        "ionice" => {
            if w.iter().any(|x| matches!(x.text.as_str(), "-p" | "-P" | "-u" | "--pid" | "--pgid" | "--uid")) {
                return Unwrapped::None;
            }
            let spec = Spec { short_val: "cn", short_flag: "t", long_val: &["class", "classdata"], long_flag: &["ignore"] };
            opt_then_argv(w, &spec, name).map_or(Unwrapped::None, t)
        }
        "chrt" => {
            if w.iter().any(|x| matches!(x.text.as_str(), "-p" | "--pid" | "-m" | "--max")) {
                return Unwrapped::None;
            }
            let spec = Spec { short_val: "TPD", short_flag: "bdfiorRav", long_val: &["sched-runtime", "sched-period", "sched-deadline"], long_flag: &["batch", "deadline", "fifo", "idle", "other", "rr", "reset-on-fork", "all-tasks", "verbose"] };
            with_operands(w, &spec, 1, name).map_or(Unwrapped::None, t)
        }
        "taskset" => {
            if w.iter().any(|x| matches!(x.text.as_str(), "-p" | "--pid")) {
                return Unwrapped::None;
            }
            let spec = Spec { short_val: "", short_flag: "ac", long_val: &[], long_flag: &["all-tasks", "cpu-list"] };
            with_operands(w, &spec, 1, name).map_or(Unwrapped::None, t)
        }
        "env" => env(cmd, top),
        "sudo" => sudo(w).map_or(Unwrapped::None, |i| Unwrapped::Powerful { wrapper: name.into(), inner: vec![i] }),
        "doas" => {
            let spec = Spec { short_val: "uC", short_flag: "nsL", long_val: &[], long_flag: &[] };
            if w.iter().skip(1).any(|x| x.text == "-s" || x.text == "-L" || x.text.starts_with("-C")) {
                return Unwrapped::None;
            }
            opt_then_argv(w, &spec, name).map_or(Unwrapped::None, p)
        }
        "xargs" => p(xargs(cmd)),
        "find" => find(cmd),
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "mksh" => shell_c(cmd, top).map_or(Unwrapped::None, p),
        "eval" => p(joined(&w[1..], cmd, top, name)),
        "watch" => watch(cmd, top).map_or(Unwrapped::None, p),
        _ => Unwrapped::None,
    }
}

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// Options a wrapper accepts before the command it runs.
#[derive(Debug, Clone, Copy)]
struct Spec {
    short_val: &'static str,
    short_flag: &'static str,
    long_val: &'static [&'static str],
    long_flag: &'static [&'static str],
}

impl Spec {
    const fn none() -> Spec {
        Spec { short_val: "", short_flag: "", long_val: &[], long_flag: &[] }
    }
    const fn flags(short: &'static str, long: &'static [&'static str]) -> Spec {
        Spec { short_val: "", short_flag: short, long_val: &[], long_flag: long }
    }
}

/// Why a wrapper's options cannot be stepped over, so the command it runs is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum OptionsUnknown {
    /// An option or operand is only known at run time (`sudo $FLAGS cmd`).
    #[error("`{wrapper}` has an argument known only at run time: `{word}`")]
    Dynamic { wrapper: String, word: String },
    /// An option the wrapper's table does not list, so whether it takes a value is unknown.
    #[error("`{wrapper}` has an option pinfold does not know: `{option}`")]
    UnknownOption { wrapper: String, option: String },
}

/// Skip the options of `words[0]`; the index of the first operand (at most `words.len()`,
/// also when the last option lacks its value: then there is no operand), or why we cannot
/// tell.
fn skip_options(words: &[Word], spec: &Spec, name: &str) -> Result<usize, OptionsUnknown> {
    let mut i = 1;
    while i < words.len() {
        let w = &words[i];
        if w.dynamic {
            return Err(OptionsUnknown::Dynamic { wrapper: name.to_string(), word: w.text.clone() });
        }
        let s = w.text.as_str();
        if s == "--" {
            return Ok(i + 1);
        }
        if let Some(long) = s.strip_prefix("--") {
            let (key, has_eq) = match long.split_once('=') {
                Some((k, _)) => (k, true),
                None => (long, false),
            };
            if spec.long_val.contains(&key) {
                i += if has_eq { 1 } else { 2 };
                continue;
            }
            if spec.long_flag.contains(&key) && !has_eq {
                i += 1;
                continue;
            }
            return Err(OptionsUnknown::UnknownOption { wrapper: name.to_string(), option: s.to_string() });
        }
        if s.len() > 1 && s.starts_with('-') {
            let chars = s[1..].char_indices();
            let mut consumed_next = false;
            for (pos, c) in chars {
                if spec.short_flag.contains(c) {
                    continue;
                }
                if spec.short_val.contains(c) {
                    if pos + 1 + c.len_utf8() >= s.len() {
                        consumed_next = true;
                    }
                    break;
                }
                return Err(OptionsUnknown::UnknownOption { wrapper: name.to_string(), option: format!("-{c}") });
            }
            i += if consumed_next { 2 } else { 1 };
            continue;
        }
        return Ok(i);
    }
    // An option that takes a value, written last without one (`sudo -u`), stepped past the
    // end: callers slice `words[..i]`, which must not panic on such input.
    Ok(i.min(words.len()))
}

/// Options, then the command: `nohup cmd …`.
fn opt_then_argv(words: &[Word], spec: &Spec, name: &str) -> Option<Inner> {
    with_operands(words, spec, 0, name)
}

/// Options, then `skip` operands of the wrapper's own (timeout's duration), then the command.
/// `None` when nothing runs (no command given).
fn with_operands(words: &[Word], spec: &Spec, skip: usize, name: &str) -> Option<Inner> {
    match skip_options(words, spec, name) {
        Ok(i) => {
            let start = i + skip;
            if skip > 0 && words.get(i..start).is_some_and(|ops| ops.iter().any(|o| o.dynamic)) {
                // A dynamic duration may be several words; we cannot find the command.
                return Some(Inner::Unresolved {
                    reason: format!("`{name}` has an operand known only at run time"),
                    words: words[i..].to_vec(),
                });
            }
            if start >= words.len() {
                return None;
            }
            Some(Inner::Argv { words: words[start..].to_vec(), assignments: Vec::new() })
        }
        Err(why) => Some(Inner::Unresolved { reason: why.to_string(), words: words[1..].to_vec() }),
    }
}

fn nice(words: &[Word]) -> Option<Inner> {
    // `nice -5 cmd`, `nice -n 5 cmd`, `nice --adjustment=5 cmd`.
    let mut i = 1;
    if let Some(w) = words.get(1)
        && !w.dynamic && w.text.len() > 1 && w.text.starts_with('-') && w.text[1..].parse::<i32>().is_ok() {
            i = 2;
        }
    let spec = Spec { short_val: "n", short_flag: "", long_val: &["adjustment"], long_flag: &[] };
    let rest: Vec<Word> = std::iter::once(words[0].clone()).chain(words[i..].iter().cloned()).collect();
    opt_then_argv(&rest, &spec, "nice")
}

fn env(cmd: &SimpleCommand, top: &str) -> Unwrapped {
    let words = &cmd.words;
    let wrapper = "env".to_string();
    let mut i = 1;
    while i < words.len() {
        let w = &words[i];
        if w.dynamic {
            let inner = Inner::Unresolved {
                reason: format!("`env` has an argument known only at run time: `{}`", w.text),
                words: words[i..].to_vec(),
            };
            return Unwrapped::Transparent { wrapper, inner };
        }
        let s = w.text.as_str();
        match s {
            "--" => {
                i += 1;
                break;
            }
            "-i" | "-" | "--ignore-environment" | "-0" | "--null" | "-v" | "--debug" => i += 1,
            "-u" | "--unset" | "-C" | "--chdir" => i += 2,
            "-S" | "--split-string" => {
                // The rest of the command line is one string env splits into words and runs.
                let rest = &words[i + 1..];
                let inner = joined(rest, cmd, top, "env");
                return Unwrapped::Powerful { wrapper, inner: vec![inner] };
            }
            _ if s.starts_with("--unset=") || s.starts_with("--chdir=") => i += 1,
            _ if s.starts_with("-S") || s.starts_with("--split-string=") => {
                let inner = Inner::Unresolved {
                    reason: "`env -S` with an attached string is not parsed".into(),
                    words: words[i..].to_vec(),
                };
                return Unwrapped::Transparent { wrapper, inner };
            }
            _ if s.starts_with("-u") || s.starts_with("-C") => i += 1,
            _ if s.starts_with('-') => {
                let inner = Inner::Unresolved {
                    reason: format!("`env` has an option pinfold does not know: `{s}`"),
                    words: words[i..].to_vec(),
                };
                return Unwrapped::Transparent { wrapper, inner };
            }
            _ => break,
        }
    }
    let mut assignments = Vec::new();
    while let Some(w) = words.get(i) {
        match w.text.split_once('=') {
            Some((name, value)) if is_var_name(name) && !w.dynamic => {
                assignments.push(Assignment {
                    span: w.span.clone(),
                    name: name.to_string(),
                    value: Word { text: value.to_string(), ..w.clone() },
                    append: false,
                });
                i += 1;
            }
            _ => break,
        }
    }
    if i >= words.len() {
        // `env` alone prints the environment.
        return Unwrapped::None;
    }
    Unwrapped::Transparent { wrapper, inner: Inner::Argv { words: words[i..].to_vec(), assignments } }
}

fn is_var_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

fn sudo(words: &[Word]) -> Option<Inner> {
    // Modes that run no command of the caller's.
    let listing = |s: &str| {
        matches!(s, "-l" | "--list" | "-v" | "--validate" | "-k" | "-K" | "--reset-timestamp" | "--remove-timestamp" | "-V" | "--version" | "-h" | "--help" | "-e" | "--edit")
    };
    if words.iter().skip(1).take_while(|w| w.text.starts_with('-')).any(|w| listing(&w.text)) {
        return None;
    }
    let spec = Spec {
        short_val: "ugCDhprtTUR",
        short_flag: "AbEHiKknPSsBN",
        long_val: &["user", "group", "close-from", "chdir", "host", "prompt", "role", "type", "command-timeout", "other-user", "chroot"],
        long_flag: &["askpass", "background", "preserve-env", "set-home", "login", "non-interactive", "preserve-groups", "stdin", "shell", "bell", "no-update"],
    };
    let start = match skip_options(words, &spec, "sudo") {
        Ok(i) => i,
        Err(why) => {
            if words.iter().skip(1).any(|w| w.text.starts_with("--preserve-env=")) {
                // `--preserve-env=LIST` is a flag with a value; retry without it.
                let filtered: Vec<Word> = words.iter().filter(|w| !w.text.starts_with("--preserve-env=")).cloned().collect();
                return sudo(&filtered);
            }
            return Some(Inner::Unresolved { reason: why.to_string(), words: words[1..].to_vec() });
        }
    };
    let shell_mode = words[1..start].iter().any(|w| {
        !w.text.starts_with("--") && w.text.starts_with('-') && w.text[1..].chars().any(|c| c == 's' || c == 'i')
            || w.text == "--shell" || w.text == "--login"
    });
    let mut i = start;
    let mut assignments = Vec::new();
    while let Some(w) = words.get(i) {
        match w.text.split_once('=') {
            Some((name, value)) if is_var_name(name) && !w.dynamic => {
                assignments.push(Assignment {
                    span: w.span.clone(),
                    name: name.to_string(),
                    value: Word { text: value.to_string(), ..w.clone() },
                    append: false,
                });
                i += 1;
            }
            _ => break,
        }
    }
    if i >= words.len() {
        // `sudo -s` / `sudo -i`: an interactive root shell; judged as sudo itself.
        return None;
    }
    if shell_mode {
        // `sudo -s cmd args` runs `$SHELL -c 'cmd args'`: same words, judged as an argv.
        return Some(Inner::Argv { words: words[i..].to_vec(), assignments });
    }
    Some(Inner::Argv { words: words[i..].to_vec(), assignments })
}

fn xargs(cmd: &SimpleCommand) -> Inner {
    let words = &cmd.words;
    let spec = Spec {
        short_val: "adEILnPs",
        short_flag: "0oprtx",
        long_val: &["arg-file", "delimiter", "max-lines", "max-args", "max-procs", "max-chars", "process-slot-var", "replace", "eof"],
        long_flag: &["null", "open-tty", "interactive", "no-run-if-empty", "verbose", "exit", "show-limits"],
    };
    // `-i[R]`, `-e[E]`, `-l[N]` take optional attached values; strip them first.
    let filtered: Vec<Word> = words
        .iter()
        .enumerate()
        .filter(|(i, w)| !(*i > 0 && (w.text.starts_with("-i") || w.text.starts_with("-e") || w.text.starts_with("-l")) && !w.text.starts_with("--")))
        .map(|(_, w)| w.clone())
        .collect();
    let start = match skip_options(&filtered, &spec, "xargs") {
        Ok(i) => i,
        Err(why) => return Inner::Unresolved { reason: why.to_string(), words: words[1..].to_vec() },
    };
    let end = cmd.span.end;
    // Input lines become more arguments, known only at run time.
    let appended = Word {
        span: end..end,
        text: "<input>".into(),
        dynamic: true,
        splits: true,
        glob: false,
        tilde: false,
        home_suffix: None,
    };
    let mut argv: Vec<Word> = filtered[start..].to_vec();
    if argv.is_empty() {
        argv.push(Word { text: "echo".into(), dynamic: false, splits: false, ..appended.clone() });
    }
    argv.push(appended);
    Inner::Argv { words: argv, assignments: Vec::new() }
}

fn find(cmd: &SimpleCommand) -> Unwrapped {
    let words = &cmd.words;
    let mut inner = Vec::new();
    let mut i = 1;
    while i < words.len() {
        let w = &words[i];
        if w.dynamic && (w.splits || w.text.contains("exec") || w.text.contains("ok")) {
            // A dynamic word could be `-exec`.
            inner.push(Inner::Unresolved {
                reason: format!("`find` has an argument known only at run time: `{}`", w.text),
                words: Vec::new(),
            });
            i += 1;
            continue;
        }
        if matches!(w.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = i + 1;
            let mut end = start;
            while end < words.len() && !(words[end].text == ";" || words[end].text == "+") {
                end += 1;
            }
            let argv: Vec<Word> = words[start..end]
                .iter()
                .map(|a| {
                    if a.text.contains("{}") {
                        Word { dynamic: true, ..a.clone() }
                    } else {
                        a.clone()
                    }
                })
                .collect();
            if argv.is_empty() {
                inner.push(Inner::Unresolved { reason: "`find -exec` with no command".into(), words: Vec::new() });
            } else {
                inner.push(Inner::Argv { words: argv, assignments: Vec::new() });
            }
            i = end + 1;
            continue;
        }
        i += 1;
    }
    if inner.is_empty() {
        Unwrapped::None
    } else {
        Unwrapped::Powerful { wrapper: "find".into(), inner }
    }
}

/// `sh -c STRING [NAME [ARGS…]]`. `None` when no `-c` is given (a script or stdin runs:
/// judged as the shell itself).
fn shell_c(cmd: &SimpleCommand, top: &str) -> Option<Inner> {
    let words = &cmd.words;
    let mut i = 1;
    let mut has_c = false;
    while i < words.len() {
        let w = &words[i];
        if w.dynamic {
            return Some(Inner::Unresolved {
                reason: format!("the shell has an option known only at run time: `{}`", w.text),
                words: words[i..].to_vec(),
            });
        }
        let s = w.text.as_str();
        if s == "--" || s == "-" {
            i += 1;
            break;
        }
        if s.starts_with("--") {
            if matches!(s, "--rcfile" | "--init-file") {
                i += 2;
            } else {
                i += 1;
            }
            continue;
        }
        if (s.starts_with('-') || s.starts_with('+')) && s.len() > 1 {
            let body = &s[1..];
            if body.contains('c') {
                has_c = true;
            }
            // `-o opt`, `-O opt` take the next word.
            if body.ends_with('o') || body.ends_with('O') {
                i += 2;
            } else {
                i += 1;
            }
            continue;
        }
        break;
    }
    if !has_c {
        return None;
    }
    let Some(w) = words.get(i) else {
        return Some(Inner::Unresolved { reason: "`-c` without a command string".into(), words: Vec::new() });
    };
    if w.dynamic {
        return Some(Inner::Unresolved {
            reason: format!("the shell runs a string known only at run time: `{}`", w.text),
            words: vec![w.clone()],
        });
    }
    Some(Inner::ShellString { text: w.text.clone(), exact_base: exact_base(w, top), span: w.span.clone() })
}

/// Where a string argument's value starts in the input, if the argument is a single-quoted
/// literal (so offsets in the value are offsets in the input).
fn exact_base(w: &Word, top: &str) -> Option<usize> {
    let src = top.get(w.span.clone())?;
    (src.len() == w.text.len() + 2 && src.starts_with('\'') && src.ends_with('\'') && src[1..src.len() - 1] == *w.text)
        .then_some(w.span.start + 1)
}

/// Arguments joined with spaces and run as shell text (`eval`, `watch`, `env -S`).
fn joined(args: &[Word], cmd: &SimpleCommand, top: &str, name: &str) -> Inner {
    if args.is_empty() {
        return Inner::Unresolved { reason: format!("`{name}` with nothing to run"), words: Vec::new() };
    }
    if let Some(d) = args.iter().find(|a| a.dynamic) {
        return Inner::Unresolved {
            reason: format!("`{name}` runs text known only at run time: `{}`", d.text),
            words: args.to_vec(),
        };
    }
    if args.len() == 1 {
        return Inner::ShellString { text: args[0].text.clone(), exact_base: exact_base(&args[0], top), span: args[0].span.clone() };
    }
    let text = args.iter().map(|a| a.text.as_str()).collect::<Vec<_>>().join(" ");
    let span = args[0].span.start..args.last().map_or(cmd.span.end, |a| a.span.end);
    Inner::ShellString { text, exact_base: None, span }
}

fn watch(cmd: &SimpleCommand, top: &str) -> Option<Inner> {
    let words = &cmd.words;
    let spec = Spec {
        short_val: "nq",
        short_flag: "bcCdeghptwrx",
        long_val: &["interval", "equexit", "differences"],
        long_flag: &["beep", "color", "no-color", "errexit", "chgexit", "help", "precise", "no-title", "no-wrap", "no-rerun", "exec", "version"],
    };
    let start = match skip_options(words, &spec, "watch") {
        Ok(i) => i,
        Err(why) => return Some(Inner::Unresolved { reason: why.to_string(), words: words[1..].to_vec() }),
    };
    if start >= words.len() {
        return None;
    }
    let exec = words[1..start].iter().any(|w| w.text == "--exec" || (!w.text.starts_with("--") && w.text.starts_with('-') && w.text.contains('x')));
    if exec {
        return Some(Inner::Argv { words: words[start..].to_vec(), assignments: Vec::new() });
    }
    Some(joined(&words[start..], cmd, top, "watch"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Word {
        Word { span: 0..0, text: s.into(), dynamic: false, splits: false, glob: false, tilde: false, home_suffix: None }
    }

    #[test]
    fn skip_options_handles_clusters_values_and_double_dash() {
        let spec = Spec { short_val: "sk", short_flag: "v", long_val: &["signal"], long_flag: &["foreground"] };
        let words: Vec<Word> = ["timeout", "-v", "-sKILL", "-k", "5", "--signal=TERM", "--foreground", "10", "cmd"].map(w).to_vec();
        assert_eq!(skip_options(&words, &spec, "timeout"), Ok(7));
        let words: Vec<Word> = ["timeout", "--", "-x"].map(w).to_vec();
        assert_eq!(skip_options(&words, &spec, "timeout"), Ok(2));
        let words: Vec<Word> = ["timeout", "-z", "1", "x"].map(w).to_vec();
        assert!(skip_options(&words, &spec, "timeout").is_err());
        // A value option with no value: no operand, and an index callers can slice with.
        for last in ["-k", "-vs", "--signal"] {
            let words: Vec<Word> = ["timeout", last].map(w).to_vec();
            assert_eq!(skip_options(&words, &spec, "timeout"), Ok(2), "{last}");
        }
    }

    #[test]
    fn options_that_cannot_be_stepped_over_say_which_and_why() {
        let spec = Spec { short_val: "s", short_flag: "v", long_val: &["signal"], long_flag: &[] };
        let words: Vec<Word> = ["timeout", "-vz", "1", "x"].map(w).to_vec();
        let e = skip_options(&words, &spec, "timeout").unwrap_err();
        assert_eq!(e, OptionsUnknown::UnknownOption { wrapper: "timeout".into(), option: "-z".into() });
        assert_eq!(e.to_string(), "`timeout` has an option pinfold does not know: `-z`");
        let words: Vec<Word> = ["timeout", "--kill-after=5", "x"].map(w).to_vec();
        let e = skip_options(&words, &spec, "timeout").unwrap_err();
        assert_eq!(e, OptionsUnknown::UnknownOption { wrapper: "timeout".into(), option: "--kill-after=5".into() });
        let mut words: Vec<Word> = ["timeout", "$T", "x"].map(w).to_vec();
        words[1].dynamic = true;
        let e = skip_options(&words, &spec, "timeout").unwrap_err();
        assert_eq!(e, OptionsUnknown::Dynamic { wrapper: "timeout".into(), word: "$T".into() });
        assert_eq!(e.to_string(), "`timeout` has an argument known only at run time: `$T`");
    }
}
