//! `pinfold check`: judge a command and print the verdict.

use std::io::{Read, Write};

use pinfold_plan::record::{self, JsonJudgement, Recorder};
use pinfold_plan::Dirs;
use pinfold_policy::config::Action;
use pinfold_policy::Judgement;

use pinfold_plan::Error;
use crate::exit;
use crate::CheckArgs;

pub fn run(args: CheckArgs, dirs: &Dirs) -> Result<i32, Error> {
    let text = match args.command.len() {
        0 => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| Error::new("cannot read the command from standard input").cause(e))?;
            s
        }
        1 => args.command[0].clone(),
        _ => pinfold_shell::join(&args.command),
    };
    let cwd = match &args.cwd {
        Some(d) => crate::absolute(d)?,
        None => std::env::current_dir().map_err(|e| Error::new("cannot read the working directory").cause(e))?,
    };
    let policy = crate::load_policy(args.config.as_deref(), Some(&cwd), true, dirs)?;
    let j = policy.judge(&text, &cwd);
    // Recorded before the verdict is given: a verdict that cannot be recorded is not given.
    let recorder = Recorder::open(&policy.config().audit, dirs)?;
    let mut data = record::judgement(&j);
    data["command"] = text.as_str().into();
    data["cwd"] = cwd.display().to_string().into();
    recorder.record("check", data)?;
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        serde_json::to_writer(&mut out, &JsonJudgement::from(&j))
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(out))
    } else if args.explain {
        explain(&mut out, &j)
    } else {
        writeln!(out, "{}: {}", j.decision, crate::shown(&j.reason))
    };
    written.map_err(|e| Error::new("cannot write the verdict").cause(e))?;
    let code = code(j.decision);
    // The process exits next: freeing the policy one allocation at a time (its index, a cell
    // per rule, the configuration) would only cost time, about 3 % of a `check`'s
    // instructions with 1,000 rules. The kernel closes its files.
    std::mem::forget(policy);
    Ok(code)
}

fn code(a: Action) -> i32 {
    match a {
        Action::Allow => exit::OK,
        Action::Ask => exit::ASK,
        Action::Deny => exit::DENY,
    }
}

/// The tree for a person: each simple command, indented under the command it sits in.
fn explain(out: &mut impl Write, j: &Judgement) -> std::io::Result<()> {
    writeln!(out, "{}: {}", j.decision, crate::shown(&j.reason))?;
    if let Some(e) = &j.parse_error {
        writeln!(out, "  parse error: {e}")?;
    }
    let Some(tree) = &j.tree else { return Ok(()) };
    for (i, (c, v)) in tree.commands.iter().zip(&j.commands).enumerate() {
        let mut depth = 1;
        let mut p = c.parent;
        while let Some(pi) = p {
            depth += 1;
            p = tree.commands.get(pi).and_then(|x| x.parent);
            if depth > 64 {
                break;
            }
        }
        let indent = "  ".repeat(depth);
        // Wrappers are listed once, after `via`: a `run by sudo` context would repeat them,
        // and the wrapper of a `bash -c` string is already named by `in bash string`.
        let ctx: Vec<String> =
            c.context.iter().filter(|x| !matches!(x, pinfold_shell::Context::Wrapper(_))).map(context_name).collect();
        let mut via: Vec<&str> = c.wrappers.iter().map(String::as_str).collect();
        for x in &c.context {
            if let pinfold_shell::Context::ShellString(w) = x
                && let Some(k) = via.iter().rposition(|v| *v == w.as_str())
            {
                via.remove(k);
            }
        }
        writeln!(
            out,
            "{indent}[{i}] {:<5} {}  (bytes {}..{}{}{})",
            v.decision.as_str(),
            crate::shown(&show_argv(c)),
            c.span.start,
            c.span.end,
            if ctx.is_empty() { String::new() } else { format!(", in {}", ctx.join(" > ")) },
            if via.is_empty() { String::new() } else { format!(", via {}", via.join(" > ")) },
        )?;
        writeln!(out, "{indent}      {}", crate::shown(&v.reason))?;
        for r in &v.rules {
            writeln!(
                out,
                "{indent}      matched {} `{}` at {}{}",
                r.action,
                r.pattern,
                r.source,
                if r.through_dynamic { " (through a dynamic argument)" } else { "" }
            )?;
        }
        if let Some(m) = &v.message {
            writeln!(out, "{indent}      message: {m}")?;
        }
        if let Some(f) = &v.fix {
            writeln!(out, "{indent}      fix: {f}")?;
        }
        if let Some(s) = &v.sandbox {
            writeln!(out, "{indent}      sandbox: {s}")?;
        }
    }
    Ok(())
}

/// argv for a person, quoted for the shell, except that a `~` bash expands stays unquoted
/// (`'~'` would read as a file named `~`).
fn show_argv(c: &pinfold_shell::SimpleCommand) -> String {
    let words: Vec<String> = c
        .words
        .iter()
        .map(|w| match w.text.strip_prefix('~') {
            Some(rest) if w.tilde && !w.dynamic && (rest.is_empty() || pinfold_shell::quote(rest) == rest) => w.text.clone(),
            _ => pinfold_shell::quote(&w.text),
        })
        .collect();
    words.join(" ")
}

fn context_name(c: &pinfold_shell::Context) -> String {
    use pinfold_shell::Context as C;
    match c {
        C::Pipeline => "pipeline".into(),
        C::AndOr => "&&/|| list".into(),
        C::Background => "background".into(),
        C::Negated => "!".into(),
        C::Subshell => "( )".into(),
        C::Group => "{ }".into(),
        C::If => "if".into(),
        C::While => "while".into(),
        C::Until => "until".into(),
        C::For => "for".into(),
        C::Case => "case".into(),
        C::Function(n) => format!("function {n}"),
        C::CommandSubstitution => "$( )".into(),
        C::Backticks => "` `".into(),
        C::ProcessSubstitutionIn => "<( )".into(),
        C::ProcessSubstitutionOut => ">( )".into(),
        C::Arithmetic => "$(( ))".into(),
        C::Heredoc => "heredoc".into(),
        C::ShellString(w) => format!("{w} string"),
        C::Wrapper(w) => format!("run by {w}"),
    }
}
