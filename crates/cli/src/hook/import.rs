//! `pinfold import claude-code`: Claude Code's `permissions.allow/ask/deny` `Bash(…)` entries
//! as pinfold rules, printed as TOML.
//!
//! Mapping (Claude Code specifier → pinfold pattern):
//!
//! * `Bash(git status)`: exactly that command → `git status` (those arguments, no others);
//! * `Bash(npm run test:*)`: the legacy prefix form, any command starting with `npm run test` →
//!   `npm run test* *` (the last word as a prefix glob, then any arguments): `npm run test`,
//!   `npm run test:unit --watch`, and also `npm run tests`, as in Claude Code. When the last
//!   word is a flag it stays one, and a cluster the command reads as separate flags is written as
//!   them: `Bash(rm -rf:*)` → `rm -r -f *` (also `rm -fr x`, `rm -r -f x`);
//! * `Bash(git push *)`, `Bash(git * main)`: `*` as a whole word is any number of arguments →
//!   the same; `*` inside a word globs within that word, and a last word ending in `*` also
//!   takes any arguments after it (`Bash(ls*)` → `ls* *`: `lsof`, `ls -la`), since Claude Code's
//!   `*` runs across spaces;
//! * quotes are removed (`Bash(git commit -m "x")` → `git commit -m x`).
//!
//! Not mapped, each listed as a comment with the reason: `Bash` and `Bash(*)` (every command:
//! that is `[defaults] action`), a specifier starting with `*`, one holding shell syntax
//! (`|`, `&&`, `;`, redirects, `$`, backticks, parentheses), an argument with spaces, or a
//! character that means something else in a pinfold pattern (`|`, `[`, `]`, `<`, `>`, `?`, a
//! leading `!`); every non-Bash entry (`Read(…)`, `Edit(…)`, `WebFetch(…)`, MCP tools).
//!
//! Claude Code applies deny, then ask, then allow; pinfold lets the strictest matching rule win,
//! which gives the same result. pinfold is stricter in one way: it matches each simple command
//! of a compound command, so `npm run test && rm -rf ~` is not allowed by the prefix rule.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::Value;

use pinfold_plan::Error;

#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(subcommand)]
    from: From,
}

#[derive(Debug, Subcommand)]
enum From {
    /// Claude Code's `permissions.allow/ask/deny` `Bash(…)` entries in `.claude/settings.json`
    /// and `.claude/settings.local.json` of the project, printed as pinfold rules (TOML).
    ///
    /// Review the output, then add it to pinfold.toml. Entries that cannot be expressed are
    /// listed as comments with the reason.
    #[command(name = "claude-code")]
    ClaudeCode {
        /// The project directory (default: the working directory; its git root is used).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
}

pub fn run(args: ImportArgs) -> Result<i32, Error> {
    let From::ClaudeCode { cwd } = args.from;
    let cwd = match cwd {
        Some(d) => crate::absolute(&d)?,
        None => std::env::current_dir().map_err(|e| Error::new("cannot read the working directory").cause(e))?,
    };
    let root = cwd.ancestors().find(|d| d.join(".git").exists()).unwrap_or(&cwd).to_path_buf();
    let mut sources = Vec::new();
    for name in ["settings.json", "settings.local.json"] {
        let p = root.join(".claude").join(name);
        match std::fs::read_to_string(&p) {
            Ok(t) => {
                let v: Value = serde_json::from_str(&t).map_err(|e| Error::new(format!("{} is not valid JSON", p.display())).cause(e))?;
                sources.push((format!(".claude/{name}"), v));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::new(format!("cannot read {}", p.display())).cause(e)),
        }
    }
    if sources.is_empty() {
        return Err(Error::new(format!("no .claude/settings.json or .claude/settings.local.json in {}", root.display())));
    }
    print!("{}", convert(&sources)?);
    Ok(crate::exit::OK)
}

/// The TOML for `sources` (file name, parsed settings).
pub fn convert(sources: &[(String, Value)]) -> Result<String, Error> {
    // (action, pattern) → the entries it came from.
    let mut rules: Vec<(&str, String, Vec<String>)> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    for (file, v) in sources {
        let Some(perms) = v.get("permissions") else { continue };
        for action in ["deny", "ask", "allow"] {
            let entries = match perms.get(action) {
                None | Some(Value::Null) => continue,
                Some(Value::Array(a)) => a,
                Some(_) => return Err(Error::new(format!("{file}: `permissions.{action}` is not an array"))),
            };
            for e in entries {
                let Some(e) = e.as_str() else {
                    return Err(Error::new(format!("{file}: `permissions.{action}` holds a non-string")));
                };
                let origin = format!("{action} {e} ({file})");
                match map_entry(e) {
                    Ok(p) => match rules.iter_mut().find(|(a, q, _)| *a == action && *q == p) {
                        Some(r) => r.2.push(origin),
                        None => rules.push((action, p, vec![origin])),
                    },
                    Err(why) => skipped.push(format!("{origin}: {why}")),
                }
            }
        }
    }
    let mut out = String::from("# Imported by `pinfold import claude-code` from ");
    out.push_str(&sources.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>().join(", "));
    out.push_str(
        ".\n# As in Claude Code, the strictest matching rule wins (deny, then ask, then allow).\n",
    );
    for (action, pattern, origins) in &rules {
        out.push_str("\n[[rules]]\n");
        for o in origins {
            out.push_str(&format!("# from {o}\n"));
        }
        out.push_str(&format!("{action} = {}\n", serde_json::to_string(pattern).expect("a string serialises")));
    }
    if !skipped.is_empty() {
        out.push_str("\n# Not imported:\n");
        for s in &skipped {
            out.push_str(&format!("#   {}\n", s.replace('\n', " ")));
        }
    }
    Ok(out)
}

/// The pinfold pattern for one Claude Code permission entry, or why there is none.
pub fn map_entry(entry: &str) -> Result<String, String> {
    let entry = entry.trim();
    let spec = match entry.strip_prefix("Bash") {
        Some("") => return Err("matches every command; that is pinfold's `[defaults] action`".into()),
        Some(rest) => rest.strip_prefix('(').and_then(|r| r.strip_suffix(')')).ok_or("not a `Bash(…)` specifier")?,
        None => return Err("not a shell command rule; pinfold rules judge shell commands (its sandbox presets' `fs` lists cover file access)".into()),
    };
    let spec = spec.trim();
    if spec.is_empty() || spec == "*" || spec == ":*" {
        return Err("matches every command; that is pinfold's `[defaults] action`".into());
    }
    let (body, prefix) = match spec.strip_suffix(":*") {
        Some(b) => (b.trim_end(), true),
        None => (spec, false),
    };
    let mut words = split_words(body)?;
    if words.first().is_none_or(|w| w.starts_with('*')) {
        return Err("starts with `*`; pinfold patterns start with the command's name".into());
    }
    let last = words.last_mut().expect("at least one word");
    if prefix {
        // A flag stays a flag (`rm -rf:*` → `rm -rf *`): `-rf*` would be no flag pinfold knows.
        if !last.ends_with('*') && !last.starts_with('-') {
            last.push('*');
        }
        words.push("*".into());
    } else if last.len() > 1 && last.ends_with('*') {
        // Claude Code's `*` runs across spaces: `Bash(ls*)` also matches `ls -la`.
        words.push("*".into());
    }
    // A pattern that pinfold would refuse is not imported; a flag cluster (`rm -rf`) that the
    // command reads as separate flags is written as them (`rm -r -f`).
    loop {
        let text = words.join(" ");
        match pinfold_policy::pattern::Pattern::parse(&text, &|_| true) {
            Ok(_) => return Ok(text),
            Err(e) => {
                let msg = e.to_string();
                let cluster = words.iter().position(|w| msg.contains(&format!("reads `{w}` as the cluster")));
                match cluster {
                    Some(i) => {
                        let w = words.remove(i);
                        for (k, c) in w[1..].chars().enumerate() {
                            words.insert(i + k, format!("-{c}"));
                        }
                    }
                    None => return Err(format!("pinfold refuses the pattern `{text}`: {msg}")),
                }
            }
        }
    }
}

/// Split a specifier into words the way the shell would, refusing what a pinfold pattern
/// cannot say.
fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut quoted_space = false;
    let mut started = false;
    for c in s.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {
                if c.is_whitespace() {
                    quoted_space = true;
                }
                cur.push(c);
            }
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                started = true;
            }
            None if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut cur));
                    started = false;
                }
            }
            None if "|&;<>()$`\\".contains(c) => {
                return Err(format!("holds shell syntax (`{c}`); pinfold judges each simple command on its own"));
            }
            None => {
                cur.push(c);
                started = true;
            }
        }
    }
    if quote.is_some() {
        return Err("has an unclosed quote".into());
    }
    if started {
        words.push(cur);
    }
    if quoted_space {
        return Err("has an argument with spaces, which a pinfold pattern cannot name".into());
    }
    for w in &words {
        if let Some(c) = w.chars().find(|c| "|[]<>?{}".contains(*c)) {
            return Err(format!("`{c}` means something else in a pinfold pattern"));
        }
        if w.starts_with('!') {
            return Err("a leading `!` means \"not\" in a pinfold pattern".into());
        }
    }
    Ok(words)
}
