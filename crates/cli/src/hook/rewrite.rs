//! Rewrite a judged command so that every part that needs a sandbox runs in one.
//!
//! Each simple command that is allowed or asked *and* whose verdict names a sandbox preset is
//! replaced, by its byte span, with
//!
//! ```text
//! PINFOLD_HOOK_ORIGIN=<token> '/abs/path/pinfold' exec --sandbox <preset> -- '<its text>'
//! ```
//!
//! The span holds the command's `KEY=VALUE` prefix and its own redirects, so those move into
//! the sandbox too (a `< secret.txt` is then opened inside it, where read-deny applies). Only
//! the operators joining the commands stay in the agent's shell.
//!
//! That is only sound when each such command can run as a process of its own. When one
//! cannot, the **whole input** runs as one in a single sandbox — the Strictest-Wins merge of
//! every preset its commands name (see `pinfold_policy::merge`) — whenever a command that
//! needs a sandbox:
//!
//! * (a) has no span of its own: the input did not parse;
//! * (b) sits inside another command's text: `$(…)`, backticks, `<(…)`, `>(…)`, `$((…))`,
//!   a heredoc, a `bash -c` string, a wrapper such as `sudo`/`xargs` (a plain `( … )`
//!   subshell or `{ …; }` group does not count);
//! * (c) changes the shell's state, or the input holds such a command anywhere (`cd build &&
//!   make` must run make in build): `cd`, `export`, `source`, `.`, `eval`, `exec`, `set`,
//!   `shift`, `unset`, `readonly`, `local`, `declare`, `typeset`, `alias`, `unalias`, `trap`,
//!   `read`, `umask`, `ulimit`, `shopt`, `pushd`, `popd`, and also bare assignments (`X=1`),
//!   `(( … ))`, `let`, `mapfile`, `readarray`, `printf -v`, `getopts`, `hash`, `exit`,
//!   `return`, `break`, `continue`, `wait`, `jobs`, `fg`, `bg`, `disown`, `command`, `builtin`;
//! * (d) calls a function defined in the same input;
//! * (e) expands anything at run time (`$…`, backticks): the agent shell's unexported
//!   variables, loop variables and positional parameters do not reach another process;
//! * (f) reads a heredoc, or inherits a file redirect from an enclosing `{ …; } > f` / loop
//!   (the outer shell would open that file outside the sandbox; `2>&1` does not count);
//! * (g) is a `[ … ]`/`[[ … ]]` test (shell syntax, not a program).
//!
//! * (h) is code bash runs from inside a word (`CommandKind::Evaluated`: `$((x))` with
//!   `x='a[$(…)]'`, `${!x}`, `${x@P}`, `test -v 'a[…]'`), which has no text of its own to wrap;
//!
//! and also when the input has more than [`MAX_PIECES`] commands to sandbox, or when the text
//! between the commands — what the agent's own shell runs: operators, keywords, `case` and
//! `for` headers, redirects of compound commands, comments — holds an expansion (`$…`,
//! backticks) or arithmetic (`((…))`). That text is never judged as a command, and bash may
//! assign and evaluate variables there (`case ${x:='a[$(…)]'}$((x)) in …`): only words, globs,
//! operators and keywords stay outside the sandbox. This holds even when no command needs a
//! sandbox; the whole input then runs in the default preset.
//!
//! When the merged sandbox can write nothing although a merged preset could, an allow becomes
//! ask: the commands would fail in a way the agent did not expect.

use std::path::Path;

use pinfold_policy::config::{Action, Config};
use pinfold_policy::Judgement;
use pinfold_shell::{CommandKind, Context, SimpleCommand};

/// Builtins that change the state of the shell running them: moved into a process of their
/// own, their effect would be lost.
pub const STATE_BUILTINS: &[&str] = &[
    "cd", "export", "source", ".", "eval", "exec", "set", "shift", "unset", "readonly", "local", "declare", "typeset",
    "alias", "unalias", "trap", "read", "umask", "ulimit", "shopt", "pushd", "popd",
    // Besides expansions: control flow, job control and other builtins that assign.
    "let", "mapfile", "readarray", "getopts", "hash", "exit", "return", "break", "continue", "wait", "jobs", "fg",
    "bg", "disown", "command", "builtin", "enable", "logout", "suspend", "dirs",
];

/// What the hook does with the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The decision after the rewrite's own checks.
    pub decision: Action,
    /// For a person: the verdict's reason, plus what was sandboxed.
    pub reason: String,
    /// The command to run (the original when nothing needs a sandbox); `None` on deny.
    pub command: Option<String>,
}

/// One sandboxed piece: its span in the input and its preset.
struct Piece {
    span: std::ops::Range<usize>,
    preset: String,
}

/// Rewrite `source`, judged as `j`. `exe` is the pinfold binary to call; `mint(text, preset)`
/// gives the token for one piece.
pub fn plan(config: &Config, j: &Judgement, source: &str, exe: &Path, mint: &dyn Fn(&str, &str) -> String) -> Plan {
    if j.decision == Action::Deny {
        return Plan { decision: Action::Deny, reason: j.reason.clone(), command: None };
    }
    let default = config.defaults.sandbox.clone();
    let Some(tree) = &j.tree else {
        // (a) Unparseable: never allowed; if a person approves, it runs in the default sandbox.
        let decision = j.decision.max(Action::Ask);
        return match default {
            Some(d) => Plan {
                decision,
                reason: format!("{}; if approved, it runs as one in sandbox `{d}`", j.reason),
                command: Some(wrap(exe, source, &d, mint)),
            },
            None => Plan { decision, reason: j.reason.clone(), command: Some(source.to_string()) },
        };
    };
    let needs: Vec<bool> = j.commands.iter().map(|v| v.decision != Action::Deny && v.sandbox.is_some()).collect();
    let cmds = &tree.commands;
    let mut fallback: Option<String> = None;
    // The agent's own shell runs the text between the commands (operators, keywords, the
    // words of `case` and `for` headers, redirects of compound commands): it must hold
    // nothing pinfold has not judged as a command (a `case ${x:=…}$((x))` header, say).
    let between = agent_shell_code(source, &covered(cmds.iter().map(|c| c.span.clone())));
    if !needs.iter().any(|&n| n) {
        // Nothing to wrap: the commands run there too, as the policy allowed.
        match between.clone() {
            None => return Plan { decision: j.decision, reason: j.reason.clone(), command: Some(source.to_string()) },
            Some(why) => fallback = Some(why),
        }
    }
    // (c) anywhere in the input.
    if fallback.is_none()
        && let Some(c) = cmds.iter().find(|c| state_changing(c))
    {
        fallback = Some(format!("`{}` changes the shell's state", snippet(source, c)));
    }
    let spans = Spans::new(cmds.iter().map(|c| c.span.clone()));
    let inside_another = spans.inside_another();
    let wrapped = needs.iter().filter(|&&n| n).count();
    if fallback.is_none() && wrapped > MAX_PIECES {
        fallback = Some(format!("{wrapped} commands are more than pinfold sandboxes one by one ({MAX_PIECES})"));
    }
    for (i, c) in cmds.iter().enumerate() {
        if fallback.is_some() {
            break;
        }
        if !needs[i] {
            continue;
        }
        let text = snippet(source, c);
        let nested = c.parent.is_some() || c.context.iter().any(nested_context) || inside_another[i];
        fallback = if c.kind == CommandKind::Evaluated {
            Some(format!("`{text}` may run code hidden in a word"))
        } else if nested {
            Some(format!("`{text}` runs inside another command"))
        } else if c.kind == CommandKind::FunctionCall {
            Some(format!("`{text}` calls a function defined in this input"))
        } else if c.kind == CommandKind::Test {
            Some(format!("`{text}` is a shell test, not a program"))
        } else if text.contains(['$', '`']) {
            Some(format!("`{text}` expands values known only to the shell running it"))
        } else if c.redirects.iter().any(|r| {
            // An inherited redirect whose text lies in some command's own span travels with
            // that command (the parser also attaches `a | b > f`'s `> f` to the pipeline).
            let stray = r.inherited
                && (r.writes_file() || r.op == "<")
                && !spans.covers(&r.span);
            stray || r.op == "<<" || r.op == "<<-"
        }) {
            Some(format!("`{text}` reads a heredoc or a redirect of an enclosing command"))
        } else if source.get(c.span.clone()).is_none() || c.span.is_empty() {
            Some("a command has no text of its own".into())
        } else {
            None
        };
    }

    let mut pieces: Vec<Piece> = cmds
        .iter()
        .zip(&j.commands)
        .zip(&needs)
        .filter(|(_, n)| **n)
        .map(|((c, v), _)| Piece { span: c.span.clone(), preset: v.sandbox.clone().unwrap_or_default() })
        .collect();
    pieces.sort_by_key(|p| p.span.start);
    if fallback.is_none() {
        fallback = between;
    }

    if let Some(why) = fallback {
        // Every preset the input's commands name; a command without one contributes the
        // default, and so does an input with no command at all.
        let mut names: Vec<String> = j
            .commands
            .iter()
            .filter(|v| v.decision != Action::Deny)
            .filter_map(|v| v.sandbox.clone().or_else(|| default.clone()))
            .collect();
        if names.is_empty() {
            names.extend(default.clone());
        }
        names.sort();
        names.dedup();
        let presets: Vec<_> = names.iter().filter_map(|n| config.sandboxes.get(n)).collect();
        let Some(merged) = pinfold_policy::merge_presets(&presets) else {
            return Plan { decision: j.decision.max(Action::Ask), reason: format!("{}; no sandbox preset to run it in", j.reason), command: Some(source.to_string()) };
        };
        let name = names.join("+");
        let mut decision = j.decision;
        let mut reason = format!("{}; runs as one in sandbox `{name}` because {why}", j.reason);
        if merged.write_allow.is_empty()
            && let Some(p) = presets.iter().find(|p| !p.write_allow.is_empty())
        {
            if decision == Action::Allow {
                decision = Action::Ask;
            }
            reason = format!(
                "runs as one in sandbox `{name}` (strictest wins) because {why}, which leaves nothing writable although `{}` may write; {}",
                p.name, j.reason
            );
        }
        return Plan { decision, reason, command: Some(wrap(exe, source, &name, mint)) };
    }

    let mut out = String::with_capacity(source.len() + pieces.len() * 200);
    let mut at = 0;
    let mut shown = Vec::new();
    for p in &pieces {
        let text = &source[p.span.clone()];
        out.push_str(&source[at..p.span.start]);
        out.push_str(&wrap(exe, text, &p.preset, mint));
        at = p.span.end;
        shown.push(format!("`{text}` ({})", p.preset));
    }
    out.push_str(&source[at..]);
    Plan { decision: j.decision, reason: format!("{}; sandboxed: {}", j.reason, shown.join(", ")), command: Some(out) }
}

/// The union of `spans`, as sorted ranges that do not overlap.
fn covered(spans: impl Iterator<Item = std::ops::Range<usize>>) -> Vec<std::ops::Range<usize>> {
    let mut v: Vec<std::ops::Range<usize>> = spans.collect();
    v.sort_by_key(|r| r.start);
    let mut out: Vec<std::ops::Range<usize>> = Vec::with_capacity(v.len());
    for r in v {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// Why the text between the commands — `source` without the `wrapped` spans (sorted, not
/// overlapping) — may run code pinfold did not judge as a command: an expansion (`$…`,
/// backticks), which can assign and evaluate variables (`${x:=…}`, `$((x))`, `${!x}`,
/// `${x@P}`), or arithmetic (`((…))`, a C-style `for`). `None` when it holds only words,
/// globs, operators and keywords.
fn agent_shell_code(source: &str, wrapped: &[std::ops::Range<usize>]) -> Option<String> {
    let mut at = 0;
    let gaps = wrapped.iter().map(|w| w.start..w.end).chain(std::iter::once(source.len()..source.len()));
    for w in gaps {
        let gap = source.get(at..w.start.max(at)).unwrap_or("");
        if let Some(k) = gap.find(['$', '`']).or_else(|| gap.find("((")) {
            let from = &gap[k..];
            let shown: String = from.chars().take(40).collect();
            return Some(format!("`{shown}` would be expanded by the agent's own shell, outside any sandbox"));
        }
        // A redirect of a compound command that holds no command to carry it (`case a in
        // esac > ~/.bashrc`): the agent's own shell would open the file (found by an outside
        // attack: left as it was, "nothing to run", it emptied a host file).
        if let Some(k) = gap.find(['<', '>']) {
            let shown: String = gap[k..].chars().take(40).collect();
            return Some(format!("`{shown}` would be opened by the agent's own shell, outside any sandbox"));
        }
        at = at.max(w.end);
    }
    None
}

/// The most commands wrapped one by one; an input with more runs as one (each wrapped command
/// costs a token and a copy of pinfold's path and grows the answer by about 200 bytes).
pub const MAX_PIECES: usize = 1000;

/// The commands' spans, sorted by start (and by end, longest first), to answer "is this range
/// inside a command's span" in logarithmic time: one pass over every pair of commands made
/// inputs of tens of thousands of commands take minutes.
struct Spans {
    /// `(start, end, index in the input)`, by start ascending, then end descending.
    sorted: Vec<(usize, usize, usize)>,
    /// `max_end[k]`: the largest end among `sorted[..=k]`.
    max_end: Vec<usize>,
}

impl Spans {
    fn new(spans: impl Iterator<Item = std::ops::Range<usize>>) -> Spans {
        let mut sorted: Vec<(usize, usize, usize)> = spans.enumerate().map(|(i, r)| (r.start, r.end, i)).collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut max_end = Vec::with_capacity(sorted.len());
        let mut m = 0;
        for &(_, end, _) in &sorted {
            m = m.max(end);
            max_end.push(m);
        }
        Spans { sorted, max_end }
    }

    /// Whether some span holds all of `r`.
    fn covers(&self, r: &std::ops::Range<usize>) -> bool {
        // The spans that start at or before `r`; one of them reaches its end if the
        // largest end among them does.
        let n = self.sorted.partition_point(|&(start, _, _)| start <= r.start);
        n > 0 && self.max_end[n - 1] >= r.end
    }

    /// For each command (by input index), whether another command's span holds its span.
    fn inside_another(&self) -> Vec<bool> {
        let mut out = vec![false; self.sorted.len()];
        for (k, &(start, end, i)) in self.sorted.iter().enumerate() {
            // An earlier span in this order starts no later and, when it starts at the same
            // byte, ends no earlier; a later span with the same range holds this one too.
            let before = k > 0 && self.max_end[k - 1] >= end;
            let twin = self.sorted.get(k + 1).is_some_and(|&(s, e, _)| s == start && e == end);
            out[i] = before || twin;
        }
        out
    }
}

/// `PINFOLD_HOOK_ORIGIN=<token> '<exe>' exec --sandbox <preset> -- '<text>'`.
fn wrap(exe: &Path, text: &str, preset: &str, mint: &dyn Fn(&str, &str) -> String) -> String {
    format!(
        "{}={} {} exec --sandbox {} -- {}",
        super::token::ENV,
        mint(text, preset),
        pinfold_shell::quote(&exe.to_string_lossy()),
        pinfold_shell::quote(preset),
        pinfold_shell::quote(text)
    )
}

fn snippet<'a>(source: &'a str, c: &SimpleCommand) -> &'a str {
    source.get(c.span.clone()).unwrap_or("")
}

fn nested_context(x: &Context) -> bool {
    matches!(
        x,
        Context::CommandSubstitution
            | Context::Backticks
            | Context::ProcessSubstitutionIn
            | Context::ProcessSubstitutionOut
            | Context::Arithmetic
            | Context::Heredoc
            | Context::ShellString(_)
            | Context::Wrapper(_)
    )
}

/// (c): a command whose effect is on the shell running it.
fn state_changing(c: &SimpleCommand) -> bool {
    match c.kind {
        // Handled on its own: it may run code, not only change the shell.
        CommandKind::Evaluated => false,
        CommandKind::Assignment => !c.assignments.is_empty(),
        CommandKind::Declaration | CommandKind::Arithmetic => true,
        CommandKind::Simple | CommandKind::FunctionCall | CommandKind::Test => {
            let Some(name) = c.words.first() else { return false };
            STATE_BUILTINS.contains(&name.text.as_str())
                || (name.text == "printf" && c.words.get(1).is_some_and(|w| w.text.starts_with("-v")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Spans;

    /// [`Spans`] answers as the pairwise definition does, on random spans with many ties.
    #[test]
    fn spans_agree_with_the_pairwise_definition() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |m: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % m as u64) as usize
        };
        for round in 0..2000 {
            let n = 1 + round % 12;
            let spans: Vec<std::ops::Range<usize>> = (0..n)
                .map(|_| {
                    let a = next(10);
                    a..a + next(6)
                })
                .collect();
            let s = Spans::new(spans.iter().cloned());
            let inside = s.inside_another();
            for (i, c) in spans.iter().enumerate() {
                let want = spans.iter().enumerate().any(|(k, d)| k != i && d.start <= c.start && c.end <= d.end);
                assert_eq!(inside[i], want, "{spans:?} #{i}");
            }
            for _ in 0..5 {
                let a = next(12);
                let r = a..a + next(4);
                let want = spans.iter().any(|d| d.start <= r.start && r.end <= d.end);
                assert_eq!(s.covers(&r), want, "{spans:?} {r:?}");
            }
        }
    }
}
