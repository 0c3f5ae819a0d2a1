//! The pattern language: how a rule names the commands it applies to.
//!
//! A pattern is a list of tokens separated by spaces; quotes (`'…'`, `"…"`) group a token and
//! make it literal.
//!
//! | token | meaning |
//! |---|---|
//! | first token | the command: matched against argv\[0\] and its basename |
//! | `word`, `a*b`, `x?` | one argument; `*` and `?` are globs inside a token |
//! | `a\|b\|c` | one argument that is any of these |
//! | `!x` | one argument that is not `x` |
//! | `[ … ]` | an optional group |
//! | `*` alone | any number of arguments, including none; also permits any flags |
//! | `-f\|--force` | a flag, anywhere after the command, as `-f`, `--force`, `--force=v` or inside a cluster (`-rf`) |
//! | `-X\|--request POST` | a flag with a value (when the tool's option table says `-X` takes one) |
//! | `--request=POST` | a flag with a value, said explicitly |
//! | `!--dry-run` | the flag is absent |
//! | `<path:NAME>` | one argument that resolves to a path in or under the named path set |
//!
//! Without a lone `*`, a pattern matches only commands whose flags are all named in it
//! (required, or permitted inside `[ … ]`) and whose positional arguments it accounts for.

use crate::options::{self, Arity, Table};

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// The command token.
    pub command: Alts,
    /// Positional tokens, in order.
    pub positional: Vec<Pos>,
    /// Flags that must be present.
    pub required: Vec<FlagReq>,
    /// Flags that must be absent.
    pub negated: Vec<Vec<String>>,
    /// Flags that may be present without a lone `*` (written inside `[ … ]`).
    pub permitted: Vec<Vec<String>>,
    /// A lone `*` appears: any extra flags are permitted.
    pub has_star: bool,
    /// The literal command names, for indexing; `None` when the command token is a glob.
    pub literal_names: Option<Vec<String>>,
    /// With optional groups: the positional tokens read with and without each group (at most
    /// 64 ways), flattened once here rather than for every reading the matcher examines.
    /// Empty without optional groups: the tokens as written are the only way.
    pub(crate) variants: Vec<Vec<Pos>>,
}

/// A positional token.
#[derive(Debug, Clone)]
pub enum Pos {
    /// Lone `*`.
    Star,
    /// One argument matching any alternative.
    One(Alts),
    /// One argument matching no alternative.
    Not(Alts),
    /// One argument resolving into the named path set.
    Path(String),
    /// An optional group.
    Optional(Vec<Pos>),
}

/// A required flag: one of `names`, with a value matching `value` if given.
#[derive(Debug, Clone)]
pub struct FlagReq {
    pub names: Vec<String>,
    pub value: Option<Alts>,
}

/// Alternatives for one token.
#[derive(Debug, Clone)]
pub struct Alts(pub Vec<Glob>);

/// One glob: literal text with `*` and `?` (and `[…]` classes) when not quoted.
#[derive(Debug, Clone)]
pub struct Glob {
    pub text: String,
    /// Has unquoted glob characters.
    pub wild: bool,
}

/// A pattern that could not be compiled: where, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem} (at character {} of the pattern)", offset + 1)]
pub struct PatternError {
    /// Byte offset in the pattern text.
    pub offset: usize,
    pub problem: Problem,
}

/// What is wrong with a pattern: one variant per failure. [`PatternError::hint`] says what
/// to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("unterminated {0} quote")]
    UnterminatedQuote(char),
    #[error("empty pattern")]
    Empty,
    #[error("the first token `{0}` must be the command")]
    FirstNotCommand(String),
    #[error("malformed path reference `{0}`")]
    MalformedPathRef(String),
    #[error("unknown path set `{0}`")]
    UnknownPathSet(String),
    #[error("unknown placeholder `{0}`")]
    UnknownPlaceholder(String),
    #[error("`!` needs something to negate")]
    EmptyNegation,
    #[error("`]` without `[`")]
    StrayClose,
    #[error("`[` is never closed")]
    Unclosed,
    /// A GNU tool reads `flag` as the one-letter flags `separate`.
    #[error("`{command}` reads `{flag}` as the cluster `{separate}`, so this flag token never matches")]
    Cluster { command: String, flag: String, separate: String, hint: String },
    #[error("`{0}` is not a flag")]
    NotAFlag(String),
    #[error("empty alternative in `{0}`")]
    EmptyAlternative(String),
}

impl PatternError {
    /// What to write instead.
    pub fn hint(&self) -> Option<&str> {
        use Problem::*;
        Some(match &self.problem {
            UnterminatedQuote(_) => "close the quote",
            Empty => "write the command first, e.g. `git status *`",
            FirstNotCommand(_) => "start the pattern with the command name",
            MalformedPathRef(_) => "write `<path:NAME>`",
            UnknownPathSet(_) => "define it under [paths]",
            UnknownPlaceholder(_) => "the only placeholder is `<path:NAME>`",
            EmptyNegation => "write `!word` or `!--flag`",
            StrayClose => "quote it for a literal bracket",
            Unclosed => "close the optional group with `]`, or quote the bracket",
            Cluster { hint, .. } => hint,
            NotAFlag(_) => "every alternative of a flag token starts with `-`",
            EmptyAlternative(_) => "remove the extra `|`",
        })
    }
}

fn err(offset: usize, problem: Problem) -> PatternError {
    PatternError { offset, problem }
}

/// A raw token from the pattern text.
#[derive(Debug, Clone)]
struct Tok {
    text: String,
    quoted: bool,
    offset: usize,
}

fn tokenize(s: &str) -> Result<Vec<Tok>, PatternError> {
    let mut toks = Vec::new();
    let mut chars = s.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut text = String::new();
        let mut quoted = false;
        while let Some(&(i, c)) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            if c == '\'' || c == '"' {
                quoted = true;
                chars.next();
                let mut closed = false;
                for (_, d) in chars.by_ref() {
                    if d == c {
                        closed = true;
                        break;
                    }
                    text.push(d);
                }
                if !closed {
                    return Err(err(i, Problem::UnterminatedQuote(c)));
                }
                continue;
            }
            text.push(c);
            chars.next();
        }
        toks.push(Tok { text, quoted, offset: start });
    }
    Ok(toks)
}

impl Pattern {
    /// Compile pattern text. `known_sets` are the path sets `<path:NAME>` may name.
    pub fn parse(text: &str, known_sets: &dyn Fn(&str) -> bool) -> Result<Pattern, PatternError> {
        let toks = tokenize(text)?;
        let Some(first) = toks.first() else {
            return Err(err(0, Problem::Empty));
        };
        if !first.quoted && (first.text.starts_with('-') || first.text.starts_with('!') || first.text.starts_with('[') || first.text.starts_with('<')) {
            return Err(err(first.offset, Problem::FirstNotCommand(first.text.clone())));
        }
        let command = alts(first, first.offset)?;
        let literal_names = (!command.0.iter().any(|g| g.wild)).then(|| {
            command.0.iter().map(|g| basename(&g.text).to_string()).collect()
        });
        let cmd_name = command.0.first().map(|g| basename(&g.text).to_string()).unwrap_or_default();
        let mut p = Pattern {
            command,
            positional: Vec::new(),
            required: Vec::new(),
            negated: Vec::new(),
            permitted: Vec::new(),
            has_star: false,
            literal_names,
            variants: Vec::new(),
        };
        let mut stack: Vec<(Vec<Pos>, usize)> = Vec::new();
        let mut cur: Vec<Pos> = Vec::new();
        let mut i = 1;
        // Tables for flag-value knowledge: the command's, then the subcommand's once seen.
        let mut tables: Vec<&'static Table> = options::table(&cmd_name).into_iter().collect();
        while i < toks.len() {
            let mut tok = toks[i].clone();
            // Leading `[` opens a group, trailing `]` closes one (unquoted only).
            let mut closes = 0;
            if !tok.quoted {
                while tok.text.starts_with('[') {
                    stack.push((std::mem::take(&mut cur), tok.offset));
                    tok.text.remove(0);
                    tok.offset += 1;
                }
                while tok.text.ends_with(']') && !stack.is_empty() && !is_class_end(&tok.text) {
                    tok.text.pop();
                    closes += 1;
                }
            }
            let in_group = !stack.is_empty();
            if !tok.text.is_empty() || tok.quoted {
                if !tok.quoted && tok.text == "*" {
                    cur.push(Pos::Star);
                    p.has_star = true;
                } else if !tok.quoted && tok.text.starts_with("!-") && tok.text.len() > 2 {
                    let names = flag_names(&tok.text[1..], tok.offset + 1)?;
                    p.negated.push(names);
                } else if !tok.quoted && is_flag(&tok.text) {
                    let (names_part, value_part) = match tok.text.split_once('=') {
                        Some((n, v)) => (n, Some(v)),
                        None => (tok.text.as_str(), None),
                    };
                    let names = flag_names(names_part, tok.offset)?;
                    check_not_cluster(&names, &tables, &cmd_name, tok.offset)?;
                    let mut value = match value_part {
                        Some(v) => Some(alts(&Tok { text: v.into(), quoted: false, offset: tok.offset }, tok.offset)?),
                        None => None,
                    };
                    // `-X|--request POST`: the next token is the value when the tool's table
                    // says this option takes one.
                    if value.is_none()
                        && closes == 0
                        && names.iter().any(|n| options::arity(&tables, n) == Arity::Value)
                    {
                        if let Some(next) = toks.get(i + 1) {
                            if next.quoted || !(is_flag(&next.text) || next.text == "*" || next.text.starts_with('[') || next.text.starts_with('!')) {
                                let mut nt = next.clone();
                                let mut next_closes = 0;
                                if !nt.quoted {
                                    while nt.text.ends_with(']') && !stack.is_empty() {
                                        nt.text.pop();
                                        next_closes += 1;
                                    }
                                }
                                value = Some(alts(&nt, nt.offset)?);
                                i += 1;
                                closes = next_closes;
                            }
                        }
                    }
                    if in_group {
                        p.permitted.push(names);
                    } else {
                        p.required.push(FlagReq { names, value });
                    }
                } else if !tok.quoted && tok.text.starts_with("<path:") {
                    let Some(name) = tok.text.strip_prefix("<path:").and_then(|r| r.strip_suffix('>')) else {
                        return Err(err(tok.offset, Problem::MalformedPathRef(tok.text.clone())));
                    };
                    if !known_sets(name) {
                        return Err(err(tok.offset, Problem::UnknownPathSet(name.to_string())));
                    }
                    cur.push(Pos::Path(name.to_string()));
                } else if !tok.quoted && tok.text.starts_with('<') && tok.text.ends_with('>') {
                    return Err(err(tok.offset, Problem::UnknownPlaceholder(tok.text.clone())));
                } else if !tok.quoted && tok.text.starts_with('!') {
                    if tok.text.len() == 1 {
                        return Err(err(tok.offset, Problem::EmptyNegation));
                    }
                    let t = Tok { text: tok.text[1..].to_string(), quoted: false, offset: tok.offset + 1 };
                    cur.push(Pos::Not(alts(&t, t.offset)?));
                } else {
                    let a = alts(&tok, tok.offset)?;
                    if tables.len() == 1 && tables[0].subcommands && cur.is_empty() && stack.is_empty() && p.positional.is_empty() {
                        // The first positional of a tool with subcommands: its table applies
                        // to the flags that follow (only when the subcommand is unambiguous).
                        if let [g] = a.0.as_slice() {
                            if !g.wild {
                                if let Some(t) = options::sub_table(&cmd_name, &g.text) {
                                    tables.push(t);
                                }
                            }
                        }
                    }
                    cur.push(Pos::One(a));
                }
            }
            for _ in 0..closes {
                let Some((mut outer, _)) = stack.pop() else {
                    return Err(err(tok.offset, Problem::StrayClose));
                };
                outer.push(Pos::Optional(std::mem::take(&mut cur)));
                cur = outer;
            }
            i += 1;
        }
        if let Some((_, off)) = stack.last() {
            return Err(err(*off, Problem::Unclosed));
        }
        if cur.iter().any(|x| matches!(x, Pos::Optional(_))) {
            p.variants =
                variants(&cur).into_iter().map(|v| v.into_iter().cloned().collect()).collect();
        }
        p.positional = cur;
        Ok(p)
    }
}

/// `[a-z]` at the end of a token is a glob class, not a group close.
fn is_class_end(t: &str) -> bool {
    match (t.rfind('['), t.rfind(']')) {
        (Some(o), Some(c)) => o < c && c == t.len() - 1 && o + 1 < c,
        _ => false,
    }
}

fn is_flag(t: &str) -> bool {
    t.len() > 1 && t.starts_with('-') && t != "--" && t.split('|').all(|a| a.starts_with('-') && a.len() > 1)
}

/// `rm -rf` in a pattern would name an option rm does not have: rm reads `-rf` as `-r -f`,
/// so the token could never match. Say so instead of compiling a rule that never fires.
fn check_not_cluster(names: &[String], tables: &[&'static Table], cmd: &str, offset: usize) -> Result<(), PatternError> {
    let Some(first) = tables.first() else { return Ok(()) };
    if first.style != options::Style::Gnu {
        return Ok(());
    }
    for n in names {
        let body = &n[1..];
        if !n.starts_with("--") && body.chars().count() > 1 && body.chars().all(|c| c.is_ascii_alphabetic()) && !options::listed(tables, n) {
            let split: Vec<String> = body.chars().map(|c| format!("-{c}")).collect();
            let separate = split.join(" ");
            let hint = format!("write the flags as separate tokens: `{separate}`");
            return Err(err(offset, Problem::Cluster { command: cmd.to_string(), flag: n.clone(), separate, hint }));
        }
    }
    Ok(())
}

fn flag_names(t: &str, offset: usize) -> Result<Vec<String>, PatternError> {
    let names: Vec<String> = t.split('|').map(str::to_string).collect();
    for n in &names {
        if !n.starts_with('-') || n.len() < 2 || n == "--" {
            return Err(err(offset, Problem::NotAFlag(n.clone())));
        }
    }
    Ok(names)
}

fn alts(tok: &Tok, offset: usize) -> Result<Alts, PatternError> {
    if tok.quoted {
        return Ok(Alts(vec![Glob { text: tok.text.clone(), wild: false }]));
    }
    let mut v = Vec::new();
    for a in tok.text.split('|') {
        if a.is_empty() {
            return Err(err(offset, Problem::EmptyAlternative(tok.text.clone())));
        }
        v.push(Glob { text: a.to_string(), wild: a.contains(['*', '?', '[']) });
    }
    Ok(Alts(v))
}

/// Optional groups expanded into flat variants (with and without each group).
fn variants(pos: &[Pos]) -> Vec<Vec<&Pos>> {
    let mut out: Vec<Vec<&Pos>> = vec![Vec::new()];
    for p in pos {
        match p {
            Pos::Optional(inner) => {
                let inner_vs = variants(inner);
                let mut next = Vec::with_capacity(out.len() * (inner_vs.len() + 1));
                for v in &out {
                    next.push(v.clone());
                    for iv in &inner_vs {
                        let mut nv = v.clone();
                        nv.extend(iv.iter().copied());
                        next.push(nv);
                    }
                }
                out = next;
                if out.len() > 64 {
                    out.truncate(64);
                }
            }
            other => {
                for v in &mut out {
                    v.push(other);
                }
            }
        }
    }
    out
}

pub(crate) fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// Match `text` against a glob with `*`, `?` and `[…]` classes (`*` crosses `/`), read as
/// the shell reads them ([`pinfold_glob::Classes::Shell`]).
pub fn glob_match(pat: &str, text: &str) -> bool {
    pinfold_glob::is_match(pat, text, pinfold_glob::Syntax::SHELL)
}

/// Whether `pat` matches `text[..n]`, as [`glob_match`] would, for some `n` in `ends` (byte
/// offsets; those not on a character boundary are skipped), in one pass over `text`.
pub fn glob_match_prefix(pat: &str, text: &str, ends: &[usize]) -> bool {
    pinfold_glob::is_match_prefix(pat, text, ends, pinfold_glob::Syntax::SHELL)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Pattern {
        Pattern::parse(s, &|n| n == "secrets").unwrap()
    }

    #[test]
    fn prefix_matching_agrees_with_matching_each_prefix() {
        let pats = ["a*b", "*", "", "x?z", "f[0-9]", "f[!0-9]", "[]", "[", "a[", "*[a-c]*", "[!]x]", "[]x]", ".env*", "*/.env*", "a*b*c", "[^a]?*", "[a-]", "**", "/p/*/c", "?é*", "[é-ü]x", "*b"];
        let texts = ["", "ab", "axxb", "xyz", "f7", "fa", "[", "a[", "]", "x", "-", "b", ".env.local", "/p/.env", "aXbYbZc", "--", "/p/x/c/d/c", "éa/b", "üx", "a/b/ab/b"];
        for p in pats {
            for t in texts {
                let cuts: Vec<usize> = (0..=t.len()).collect();
                for &n in &cuts {
                    let want = t.is_char_boundary(n) && glob_match(p, &t[..n]);
                    assert_eq!(glob_match_prefix(p, t, &[n]), want, "{p:?} {t:?}[..{n}]");
                }
                let any = cuts.iter().any(|&n| t.is_char_boundary(n) && glob_match(p, &t[..n]));
                assert_eq!(glob_match_prefix(p, t, &cuts), any, "{p:?} {t:?} any prefix");
                assert!(!glob_match_prefix(p, t, &[]), "{p:?} {t:?} no prefix");
            }
        }
    }

    #[test]
    fn globs() {
        assert!(glob_match("a*b", "axxb"));
        assert!(glob_match("*", ""));
        assert!(glob_match("x?z", "xyz"));
        assert!(!glob_match("x?z", "xz"));
        assert!(glob_match("f[0-9]", "f7"));
        assert!(!glob_match("f[!0-9]", "f7"));
        assert!(glob_match(".env*", ".env.local"));
        assert!(glob_match("*/.env*", "/p/.env"));
        assert!(!glob_match("abc", "abcd"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
    }

    #[test]
    fn parses_the_example_rules() {
        let p = parse("rm -r|-R|--recursive * /|~|~/ *");
        assert_eq!(p.required.len(), 1);
        assert_eq!(p.required[0].names, ["-r", "-R", "--recursive"]);
        assert!(p.has_star);
        assert_eq!(p.positional.len(), 3);
        let p = parse("git push -f|--force|--force-with-lease *");
        assert_eq!(p.literal_names.as_deref(), Some(&["git".to_string()][..]));
        assert_eq!(p.required[0].names.len(), 3);
        let p = parse("curl -X|--request POST *");
        assert_eq!(p.required[0].value.as_ref().unwrap().0[0].text, "POST");
        assert_eq!(p.positional.len(), 1, "POST is the flag's value, not a positional");
        let p = parse("git push [origin] main");
        assert!(matches!(p.positional[1], Pos::Optional(_)));
        let p = parse("ls [-l|-a]");
        assert_eq!(p.permitted.len(), 1);
        let p = parse("cat <path:secrets>");
        assert!(matches!(p.positional[0], Pos::Path(_)));
        let p = parse("terraform apply !--dry-run *");
        assert_eq!(p.negated, vec![vec!["--dry-run".to_string()]]);
    }

    #[test]
    fn errors_point_at_the_token() {
        let e = Pattern::parse("git push [origin", &|_| true).unwrap_err();
        assert_eq!(e.offset, 9);
        let e = Pattern::parse("cat <path:nope>", &|_| false).unwrap_err();
        assert!(e.to_string().contains("unknown path set"));
        assert!(Pattern::parse("", &|_| true).is_err());
        assert!(Pattern::parse("  ", &|_| true).is_err());
        assert!(Pattern::parse("-f x", &|_| true).is_err());
        assert!(Pattern::parse("a b||c", &|_| true).is_err());
        assert!(Pattern::parse("a 'b", &|_| true).is_err());
        assert!(Pattern::parse("a ]", &|_| true).is_ok(), "a lone ] outside a group is literal");
        let e = Pattern::parse("rm -rf *", &|_| true).unwrap_err();
        assert_eq!(e.hint(), Some("write the flags as separate tokens: `-r -f`"));
        assert!(Pattern::parse("find . -delete", &|_| true).is_ok(), "find reads -delete whole");
        assert!(Pattern::parse("mytool -auto-approve", &|_| true).is_ok(), "no table: cannot tell");
    }
}
