//! What a command writes and runs that its redirects do not show.
//!
//! `sort -o FILE`, `uniq IN OUT`, `gcc -o FILE` and `git diff --output=FILE` write files
//! named in their arguments; `go build -toolexec PROG` and `gcc -wrapper PROG` run programs;
//! a sed script writes files (`w FILE`) and runs commands (`e`). What each tool does is data
//! in its option table ([`crate::options::Io`]); [`scan`] reads one command's arguments with
//! it. The judge holds every file found to the test an output redirect meets (the command's
//! sandbox preset must be able to write it) and asks before anything runs unseen.
//!
//! Where pinfold cannot be sure how a tool reads its arguments, the reading that finds more
//! is taken, as deny and ask rules take any reading ([`crate::matcher`]):
//!
//! * a word that looks like an output option counts as one even where the option before it
//!   might have taken it as its value;
//! * an output option inside a cluster (`-uo`) takes its value from the rest of the word
//!   (GNU) and from the words after it (tree takes a cluster's values from the following
//!   arguments in turn);
//! * an argument known only at run time could be any option unless its first character is
//!   known and is not `-` (`"x$Y"`); one that bash may split could be several arguments, and
//!   leaves the positions after it uncertain.

mod sed;

use pinfold_shell::{SimpleCommand, Word};

use crate::options::{self, Arity, Io, Script, Split, Style, Table, Use};
use crate::pattern::basename;

/// A file a command writes, named by its arguments.
#[derive(Debug, Clone)]
pub struct Target {
    /// The path as the tool opens it: the argument, or the part of it that is the path. The
    /// judge resolves it as it resolves a redirect target.
    pub word: Word,
    /// How the command names it, for the reason shown: "`sort -o`", "`uniq`'s output
    /// argument", "the sed script's `w`".
    pub how: String,
}

/// A program or code a command runs that pinfold does not judge.
#[derive(Debug, Clone)]
pub struct Run {
    /// For a person: what runs, and why pinfold cannot judge it.
    pub why: String,
    /// The option that says so (`-toolexec`), when one does: an allow rule that names the
    /// option permits it.
    pub option: Option<&'static str>,
}

/// What [`scan`] found in one command.
#[derive(Debug, Default)]
pub struct Found {
    pub writes: Vec<Target>,
    /// Directories the tool moves to before its work (`git -C a -C b`), in order: relative
    /// targets land there.
    pub chdir: Vec<Word>,
    pub runs: Vec<Run>,
    /// Why the command may write a file pinfold cannot name: an argument known only at run
    /// time could be an option naming one.
    pub unknown_write: Option<String>,
}

/// Read what `c` (argv after unwrapping) writes and runs, by its tool's [`Io`].
pub fn scan(c: &SimpleCommand) -> Found {
    let mut found = Found::default();
    let Some(name) = c.words.first() else { return found };
    if name.dynamic {
        return found;
    }
    let base = basename(&name.text);
    let Some(table) = options::table(base) else { return found };
    if table.io.is_empty() {
        return found;
    }
    scan_args(base, table, &c.words[1..], &mut found);
    found
}

fn scan_args(cmd: &str, table: &'static Table, args: &[Word], found: &mut Found) {
    let mut s = Scan {
        cmd,
        io: table.io,
        tables: vec![table],
        args,
        found,
        positional: Vec::new(),
        uncertain_from: None,
        flags: Vec::new(),
        scripts: Vec::new(),
        script_file: None,
        linker: Vec::new(),
    };
    s.walk();
    s.finish();
}

/// A value of an option: part of a static word (`--output=FILE`, `-oFILE`), a whole word
/// (`-o FILE`), or none (the option ends the command).
#[derive(Debug, Clone, Copy)]
enum Val<'a> {
    Part(&'a Word, &'a str),
    Whole(&'a Word),
    Missing,
}

impl Val<'_> {
    /// The value as a word of its own. A part of a word is taken as written: bash expands
    /// `~` only at the start of a word (and after `NAME=`, see `keyed`).
    fn word(&self) -> Option<Word> {
        match *self {
            Val::Part(w, text) => Some(part(w, text, false)),
            Val::Whole(w) => Some(w.clone()),
            Val::Missing => None,
        }
    }

    /// The text, when it is known.
    fn text(&self) -> Option<&str> {
        match *self {
            Val::Part(_, t) => Some(t),
            Val::Whole(w) if !w.dynamic => Some(&w.text),
            _ => None,
        }
    }

    fn dynamic(&self) -> bool {
        matches!(self, Val::Whole(w) if w.dynamic && w.home_suffix.is_none())
    }
}

/// `text` (part of the static word `w`) as a word of its own.
fn part(w: &Word, text: &str, tilde: bool) -> Word {
    Word {
        span: w.span.clone(),
        text: text.to_string(),
        dynamic: false,
        splits: false,
        glob: w.glob,
        tilde,
        home_suffix: None,
    }
}

struct Scan<'a, 'f> {
    cmd: &'a str,
    io: &'static Io,
    /// The option tables in force: the tool's, then its subcommand's.
    tables: Vec<&'static Table>,
    args: &'a [Word],
    found: &'f mut Found,
    positional: Vec<&'a Word>,
    /// The position of the first dynamic argument that bash may split or that may be an
    /// option: the positions after it are uncertain (and its own, if it splits).
    uncertain_from: Option<usize>,
    /// Every option name seen.
    flags: Vec<String>,
    /// Script pieces given by options (`sed -e`).
    scripts: Vec<Word>,
    /// The option that named a script file (`sed -f`).
    script_file: Option<&'static str>,
    /// Arguments for the linker (`-Wl,…`, `-Xlinker`).
    linker: Vec<Word>,
}

impl<'a> Scan<'a, '_> {
    fn style(&self) -> Style {
        self.tables[0].style
    }

    fn walk(&mut self) {
        let args = self.args;
        let mut after_dashdash = false;
        let mut i = 0;
        while i < args.len() {
            let w = &args[i];
            let t = w.text.as_str();
            if w.dynamic && w.home_suffix.is_none() {
                // (A tool that takes option values only from the following arguments cannot
                // be told to write by one last argument, `tree "$DIR"`.)
                let last_alone = self.io.values_follow && !w.splits && i + 1 == args.len();
                let option = !after_dashdash && !last_alone && self.could_be_option(w);
                if option {
                    self.unknown_option(w);
                }
                if option || w.splits {
                    self.uncertain_from.get_or_insert(self.positional.len());
                }
                self.push_positional(w);
                i += 1;
                continue;
            }
            if after_dashdash || t == "-" || !t.starts_with('-') {
                if !after_dashdash && self.io.response_files && t.len() > 1 && t.starts_with('@') {
                    self.found.runs.push(Run {
                        why: format!("`{} {t}` reads more options from `{}`, which pinfold does not read", self.cmd, &t[1..]),
                        option: None,
                    });
                }
                self.push_positional(w);
                i += 1;
                continue;
            }
            if t == "--" {
                after_dashdash = true;
                i += 1;
                continue;
            }
            i = if t.starts_with("--") {
                self.long(i)
            } else if self.style() == Style::Single || options::listing(&self.tables, t).is_some() {
                self.single(i)
            } else {
                self.cluster(i)
            };
        }
    }

    /// Whether a dynamic argument could be an option: bash may split it, or its first
    /// character is not known to be other than `-` (or `@`, for tools reading `@FILE`).
    fn could_be_option(&self, w: &Word) -> bool {
        w.splits
            || match w.text.chars().next() {
                Some('-' | '$' | '`') | None => true,
                Some('@') => self.io.response_files,
                _ => false,
            }
    }

    /// A dynamic argument that could be an option of a tool with options that write or run.
    fn unknown_option(&mut self, w: &Word) {
        let runs = self.io.response_files
            || self.io.options.iter().any(|(_, u)| matches!(u, Use::Runs | Use::Script | Use::ScriptFile));
        let writes = self.io.options.iter().any(|(_, u)| matches!(u, Use::Writes | Use::WritesEach | Use::Linker(_)));
        if runs {
            self.found.runs.push(Run {
                why: format!("`{}` is known only at run time and could be an option of `{}` that runs other code", w.text, self.cmd),
                option: None,
            });
        } else if writes && self.found.unknown_write.is_none() {
            self.found.unknown_write = Some(format!(
                "`{}` is known only at run time and could be an option of `{}` naming a file it writes",
                w.text, self.cmd
            ));
        }
    }

    fn push_positional(&mut self, w: &'a Word) {
        let t0 = self.tables[0];
        if self.positional.is_empty()
            && self.tables.len() == 1
            && t0.subcommands
            && !w.dynamic
            && let Some(sub) = options::sub_table(t0.name, &w.text)
        {
            self.tables.push(sub);
        }
        self.positional.push(w);
    }

    /// The entries of the tool's [`Io`] for the option `name`: (option, value prefix, use).
    fn entries<'n>(&self, name: &'n str) -> impl Iterator<Item = (&'static str, &'static str, Use)> + use<'n> {
        self.io.options.iter().filter_map(move |&(entry, u)| {
            let (n, prefix) = entry.split_once(' ').unwrap_or((entry, ""));
            (n == name).then_some((n, prefix, u))
        })
    }

    fn is_io(&self, name: &str) -> bool {
        self.entries(name).next().is_some()
    }

    /// The Io option names `--name` may stand for: itself, the long options it abbreviates
    /// (getopt_long and git accept any unambiguous prefix; taking every one is the reading
    /// that finds more), and for single-dash tools (go) `-name`.
    fn long_names(&self, name: &str) -> Vec<&'static str> {
        let names = || self.io.options.iter().map(|&(entry, _)| entry.split_once(' ').map_or(entry, |(n, _)| n));
        let single = self.style() == Style::Single;
        if let Some(n) = names().find(|n| *n == name || (single && name.strip_prefix('-') == Some(n))) {
            return vec![n];
        }
        let mut out: Vec<&'static str> = Vec::new();
        for n in names() {
            if n.starts_with("--") && name.len() >= 3 && n.starts_with(name) && !out.contains(&n) {
                out.push(n);
            }
        }
        out
    }

    /// Whether `t`, read as an option, may be one of the tool's Io options.
    fn looks_io(&self, t: &str) -> bool {
        if !t.starts_with('-') || t == "-" {
            return false;
        }
        if t.starts_with("--") {
            let name = t.split_once('=').map_or(t, |(n, _)| n);
            return !self.long_names(name).is_empty();
        }
        let name = t.split_once('=').map_or(t, |(n, _)| n);
        if self.is_io(name) || (self.io.attached && self.attached_entry(t).is_some()) {
            return true;
        }
        self.style() == Style::Gnu && t[1..].chars().any(|c| self.is_io(&format!("-{c}")))
    }

    /// The longest single-dash Io option `t` starts with and goes beyond (`-ofile`).
    fn attached_entry(&self, t: &str) -> Option<&'static str> {
        self.io
            .options
            .iter()
            .map(|&(entry, _)| entry.split_once(' ').map_or(entry, |(n, _)| n))
            .filter(|n| !n.starts_with("--") && t.len() > n.len() && t.starts_with(n))
            .max_by_key(|n| n.len())
    }

    /// The option at `i` takes the word at `j` as its value (its arity is certain); returns
    /// the index after it. A value that looks like an Io option is read as an option too.
    fn take_value(&self, j: usize) -> usize {
        match self.args.get(j) {
            Some(v) if !v.dynamic && self.looks_io(&v.text) => j,
            Some(_) => j + 1,
            None => j,
        }
    }

    fn arity(&self, name: &str) -> Arity {
        options::arity(&self.tables, name)
    }

    /// `--name[=value]` at `i`.
    fn long(&mut self, i: usize) -> usize {
        let args = self.args;
        let w = &args[i];
        let (name, value) = match w.text.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (w.text.as_str(), None),
        };
        self.flags.push(name.to_string());
        let io = self.long_names(name);
        if !io.is_empty() {
            let val = match value {
                Some(v) => Val::Part(w, v),
                None => args.get(i + 1).map_or(Val::Missing, Val::Whole),
            };
            for n in io {
                self.option(n, val);
            }
            return if value.is_some() { i + 1 } else { self.take_value(i + 1) };
        }
        if value.is_none() && self.arity(name) == Arity::Value {
            return self.take_value(i + 1);
        }
        i + 1
    }

    /// A single-dash option read whole (`-name`, `-name=value`, and with [`Io::attached`]
    /// `-ofile`) at `i`.
    fn single(&mut self, i: usize) -> usize {
        let args = self.args;
        let w = &args[i];
        let t = w.text.as_str();
        let (name, value) = match t.split_once('=') {
            Some((n, v)) if self.style() == Style::Single => (n, Some(v)),
            _ => (t, None),
        };
        self.flags.push(name.to_string());
        if self.is_io(name) {
            let val = match value {
                Some(v) => Val::Part(w, v),
                None => args.get(i + 1).map_or(Val::Missing, Val::Whole),
            };
            let name = self.entries(name).next().map_or("", |(n, _, _)| n);
            self.option(name, val);
            return if value.is_some() { i + 1 } else { self.take_value(i + 1) };
        }
        if self.io.attached
            && let Some(n) = self.attached_entry(t)
        {
            let rest = &t[n.len()..];
            self.option(n, Val::Part(w, rest.strip_prefix('=').unwrap_or(rest)));
            return i + 1;
        }
        if value.is_none() && self.arity(name) == Arity::Value {
            return self.take_value(i + 1);
        }
        i + 1
    }

    /// A GNU cluster `-abc` at `i`: each character a flag until one takes a value.
    fn cluster(&mut self, i: usize) -> usize {
        let args = self.args;
        let w = &args[i];
        let t = w.text.as_str();
        if t[1..].bytes().all(|b| b.is_ascii_digit()) {
            // `-5`: a number, as `head -5` or `uniq -2` read it.
            return i + 1;
        }
        // Characters before the current one that may take a value, for tree's reading.
        let mut takers = 0;
        for (p, c) in t.char_indices().skip(1) {
            let name = format!("-{c}");
            let rest = &t[p + c.len_utf8()..];
            self.flags.push(name.clone());
            if self.is_io(&name) {
                let name: &'static str = self.entries(&name).next().map_or("", |(n, _, _)| n);
                if self.io.values_follow {
                    // The value is one of the arguments after the cluster: which one depends
                    // on how many options before this one take values.
                    for k in 1..=takers + 1 {
                        if let Some(v) = args.get(i + k) {
                            self.option(name, Val::Whole(v));
                        }
                    }
                    return i + 1;
                }
                if !rest.is_empty() {
                    self.option(name, Val::Part(w, rest));
                    return i + 1;
                }
                self.option(name, args.get(i + 1).map_or(Val::Missing, Val::Whole));
                return self.take_value(i + 1);
            }
            match self.arity(&name) {
                Arity::Value if self.io.values_follow => takers += 1,
                Arity::Value => {
                    return if rest.is_empty() { self.take_value(i + 1) } else { i + 1 };
                }
                Arity::Unknown => takers += 1,
                Arity::Flag => {}
            }
        }
        i + 1
    }

    /// The Io option `name` with `val`: record what it writes or runs.
    fn option(&mut self, name: &'static str, val: Val<'_>) {
        let entries: Vec<(&'static str, &'static str, Use)> = self.entries(name).collect();
        for (n, prefix, u) in entries {
            let shown = if prefix.is_empty() { n.to_string() } else { format!("{n} {prefix}") };
            if prefix.is_empty() {
                self.apply(n, &shown, u, val);
                continue;
            }
            // `-C linker=PROG`: only a value with the prefix counts; a dynamic one may have it.
            if val.dynamic() {
                self.apply(n, &shown, u, val);
            } else if let (Some(text), Val::Part(w, _) | Val::Whole(w)) = (val.text(), val)
                && let Some(rest) = text.strip_prefix(prefix)
            {
                self.apply(n, &shown, u, Val::Part(w, rest));
            }
        }
    }

    /// The command as messages name it: with its subcommand once one is seen (`go build`).
    fn shown_cmd(&self) -> String {
        match self.positional.first() {
            Some(w) if self.tables[0].subcommands && !w.dynamic => format!("{} {}", self.cmd, w.text),
            _ => self.cmd.to_string(),
        }
    }

    fn apply(&mut self, option: &'static str, shown: &str, u: Use, val: Val<'_>) {
        let cmd = self.shown_cmd();
        match u {
            Use::Writes => {
                // (An abbreviation may stand for two options naming the same word.)
                if let Some(word) = val.word().filter(|w| !self.found.writes.iter().any(|t| t.word == *w)) {
                    self.found.writes.push(Target { word, how: format!("`{cmd} {shown}`") });
                }
            }
            Use::WritesEach => match val.text() {
                Some(text) => {
                    for item in text.split(',') {
                        if let Some((_, path)) = item.split_once('=')
                            && let (false, Val::Part(w, _) | Val::Whole(w)) = (path.is_empty(), val)
                        {
                            self.found.writes.push(Target { word: part(w, path, false), how: format!("`{cmd} {shown}`") });
                        }
                    }
                }
                None if val.dynamic() => self.unknown_value(shown, val),
                None => {}
            },
            Use::Runs => {
                let what = match val {
                    Val::Part(_, t) => format!(" `{t}`"),
                    Val::Whole(w) => format!(" `{}`", w.text),
                    Val::Missing => String::new(),
                };
                self.found.runs.push(Run {
                    why: format!("`{cmd} {shown}` names a program or code for it to run{what}, which pinfold does not judge"),
                    option: Some(option),
                });
            }
            Use::Linker(split) => match val.text() {
                Some(text) => {
                    let (Val::Part(w, _) | Val::Whole(w)) = val else { return };
                    let pieces: Vec<&str> = match split {
                        Split::One => vec![text],
                        Split::Commas => text.split(',').collect(),
                        Split::Spaces => text.split_whitespace().collect(),
                    };
                    self.linker.extend(pieces.into_iter().map(|p| part(w, p, false)));
                }
                None if val.dynamic() => self.unknown_value(shown, val),
                None => {}
            },
            Use::Chdir => {
                // Only before the subcommand: after it the same letters may mean something
                // else (`git diff -C` finds copies).
                if self.positional.is_empty()
                    && let Some(word) = val.word()
                {
                    self.found.chdir.push(word);
                }
            }
            Use::Script => {
                if let Some(word) = val.word() {
                    self.scripts.push(word);
                }
            }
            Use::ScriptFile => {
                self.script_file.get_or_insert(option);
            }
        }
    }

    fn unknown_value(&mut self, shown: &str, val: Val<'_>) {
        if let Val::Whole(w) = val {
            self.found.unknown_write.get_or_insert_with(|| {
                format!("the value of `{} {shown}`, `{}`, is known only at run time", self.cmd, w.text)
            });
        }
    }

    fn finish(&mut self) {
        let io = self.io;
        // The script, when the tool has one.
        let mut positional = std::mem::take(&mut self.positional);
        let sandboxed = self.flags.iter().any(|f| f == "--sandbox");
        if let Some(Script::Sed) = io.script {
            let from_position = self.scripts.is_empty() && self.script_file.is_none();
            if from_position && !positional.is_empty() {
                let first = positional.remove(0);
                self.scripts.push(first.clone());
                self.uncertain_from = self.uncertain_from.map(|u| u.saturating_sub(1));
            }
            if let Some(opt) = self.script_file.filter(|_| !sandboxed) {
                self.found.runs.push(Run {
                    why: format!("`{} {opt}` reads a script pinfold does not read, which may run commands and write files", self.cmd),
                    option: Some(opt),
                });
            }
            if !sandboxed {
                self.sed_script();
            }
        }
        self.positional_writes(&positional);
        if !self.linker.is_empty()
            && let Some(ld) = options::table("ld")
        {
            let linker = std::mem::take(&mut self.linker);
            let mut inner = Found::default();
            scan_args("ld", ld, &linker, &mut inner);
            for mut t in inner.writes {
                t.how = format!("the linker's {} (from `{}`)", t.how, self.cmd);
                self.found.writes.push(t);
            }
        }
    }

    fn sed_script(&mut self) {
        if self.scripts.is_empty() {
            return;
        }
        if let Some(w) = self.scripts.iter().find(|w| w.dynamic && w.home_suffix.is_none()) {
            self.found.runs.push(Run {
                why: format!("the sed script `{}` is known only at run time, and a sed script can run commands and write files", w.text),
                option: None,
            });
            return;
        }
        let text = self.scripts.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join("\n");
        let anchor = self.scripts[0].clone();
        match sed::read(&text) {
            Ok(effects) => {
                for file in effects.writes {
                    self.found.writes.push(Target { word: part(&anchor, &file, false), how: "the sed script's `w`".into() });
                }
                for command in effects.runs {
                    let what = if command.trim().is_empty() { "the pattern space".to_string() } else { format!("`{}`", command.trim()) };
                    self.found.runs.push(Run { why: format!("the sed script runs {what} as a command (`e`)"), option: None });
                }
            }
            Err(e) => self.found.runs.push(Run {
                why: format!("pinfold cannot read this sed script ({e}), and a sed script can run commands and write files"),
                option: None,
            }),
        }
    }

    /// Positional arguments the tool writes ([`options::Positional`]).
    fn positional_writes(&mut self, positional: &[&Word]) {
        let p = self.io.positional;
        let active = p.when.is_empty()
            || self.flags.iter().any(|f| {
                p.when.iter().any(|w| w == f || (f.starts_with("--") && f.len() >= 4 && w.starts_with(f.as_str())))
            });
        if !active {
            return;
        }
        let cmd = self.cmd;
        let max_at = p.at.iter().copied().max();
        for (idx, w) in positional.iter().enumerate() {
            let dynamic = w.dynamic && w.home_suffix.is_none();
            // A word after an uncertain one may sit at any position from there on; the
            // uncertain word itself too when it may be several words.
            let uncertain = self.uncertain_from.is_some_and(|u| idx > u || (idx == u && dynamic && w.splits));
            let written = p.at.contains(&idx)
                || p.from.is_some_and(|f| idx >= f)
                || (uncertain && (p.from.is_some() || max_at.is_some_and(|m| m >= self.uncertain_from.unwrap_or(0))));
            if written {
                if dynamic && w.splits {
                    self.found.unknown_write.get_or_insert_with(|| {
                        format!("`{}` is known only at run time and could name a file `{cmd}` writes", w.text)
                    });
                } else {
                    self.found.writes.push(Target { word: (*w).clone(), how: format!("`{cmd}`'s output argument") });
                }
                continue;
            }
            for key in p.keyed {
                if dynamic && (w.splits || !w.text.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())) {
                    self.found.unknown_write.get_or_insert_with(|| {
                        format!("`{}` is known only at run time and could be `{key}FILE`", w.text)
                    });
                } else if let Some(path) = w.text.strip_prefix(key) {
                    if dynamic {
                        self.found.writes.push(Target { word: (*w).clone(), how: format!("`{cmd} {key}`") });
                    } else {
                        // bash expands `~` after `NAME=` in any argument.
                        self.found.writes.push(Target { word: part(w, path, path.starts_with('~')), how: format!("`{cmd} {key}`") });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `scan` finds in the last simple command of `text`: written paths (as the tool
    /// names them), `-C` directories, whether something runs, and the unknown write.
    fn found(text: &str) -> (Vec<String>, Vec<String>, Vec<String>, Option<String>) {
        found_in(text, text.split(' ').next().unwrap_or(""))
    }

    /// As [`found`], for the command named `name` in `text`.
    fn found_in(text: &str, name: &str) -> (Vec<String>, Vec<String>, Vec<String>, Option<String>) {
        let tree = pinfold_shell::parse(text).unwrap_or_else(|e| panic!("`{text}`: {e}"));
        let c = tree.commands.iter().rfind(|c| c.words.first().is_some_and(|w| w.text == name)).expect("the command");
        let f = scan(c);
        (
            f.writes.iter().map(|t| t.word.text.clone()).collect(),
            f.chdir.iter().map(|w| w.text.clone()).collect(),
            f.runs.iter().map(|r| r.why.clone()).collect(),
            f.unknown_write,
        )
    }

    fn writes(text: &str) -> Vec<String> {
        let (w, _, runs, unknown) = found(text);
        assert!(runs.is_empty(), "`{text}` runs: {runs:?}");
        assert!(unknown.is_none(), "`{text}`: {unknown:?}");
        w
    }

    fn runs(text: &str) -> Vec<String> {
        found(text).2
    }

    #[test]
    fn output_options() {
        for (cmd, want) in [
            ("sort -o out.txt f", vec!["out.txt"]),
            ("sort -uo /etc/x f", vec!["/etc/x"]),
            ("sort -o/etc/x f", vec!["/etc/x"]),
            ("sort --output=/etc/x f", vec!["/etc/x"]),
            ("sort --out /etc/x f", vec!["/etc/x"]),
            ("sort -k2 -t, -n f", vec![]),
            ("sort -- -o x", vec![]),
            ("tree -o /etc/x", vec!["/etc/x"]),
            ("tree -L 2 -o /etc/x", vec!["/etc/x"]),
            // tree takes a cluster's values from the following arguments in turn.
            ("tree -Lo 2 /etc/x", vec!["2", "/etc/x"]),
            ("git diff --no-index --output=/etc/x a b", vec!["/etc/x"]),
            ("git log -p --output /etc/x", vec!["/etc/x"]),
            ("git --no-pager show --outp=/etc/x HEAD", vec!["/etc/x"]),
            ("git stash show -p --output=/etc/x", vec!["/etc/x"]),
            ("git diff --stat", vec![]),
            ("gcc -O2 -o build/a a.c", vec!["build/a"]),
            ("gcc -o/etc/x a.c", vec!["/etc/x"]),
            ("cc --output=/etc/x a.c", vec!["/etc/x"]),
            ("clang -MD -MF /etc/x.d -c a.c", vec!["/etc/x.d"]),
            ("gcc -Wl,-o,/etc/x a.c", vec!["/etc/x"]),
            ("gcc -Wl,--output=/etc/x a.c", vec!["/etc/x"]),
            ("g++ -Xlinker -o -Xlinker /etc/x a.cc", vec!["-Xlinker", "/etc/x"]),
            ("rustc -o target/a a.rs", vec!["target/a"]),
            ("rustc --out-dir /etc a.rs", vec!["/etc"]),
            ("rustc --emit=asm,link=/etc/x a.rs", vec!["/etc/x"]),
            ("rustc -C link-arg=-o -C link-arg=/etc/x a.rs", vec!["/etc/x"]),
            ("rustc -C opt-level=3 a.rs", vec![]),
            ("go build -o bin/app .", vec!["bin/app"]),
            ("go build -o=/etc/x .", vec!["/etc/x"]),
            ("go build --o /etc/x .", vec!["/etc/x"]),
            ("go test -coverprofile=/etc/c.out ./...", vec!["/etc/c.out"]),
            ("go test -run TestX -v ./...", vec![]),
            ("npm install --prefix /etc x", vec!["/etc"]),
            ("npm --prefix=web ci", vec!["web"]),
            ("npm -C /etc i", vec!["/etc"]),
            ("pnpm --dir /etc install", vec!["/etc"]),
            ("yarn --cwd /etc install", vec!["/etc"]),
            ("yarn install --modules-folder /etc/nm", vec!["/etc/nm"]),
            ("npm install x", vec![]),
        ] {
            assert_eq!(writes(cmd), want, "`{cmd}`");
        }
    }

    #[test]
    fn output_arguments() {
        for (cmd, want) in [
            ("uniq in out", vec!["out"]),
            ("uniq -c -f 2 in /etc/x", vec!["/etc/x"]),
            ("uniq -f2 in /etc/x", vec!["/etc/x"]),
            ("uniq -c in", vec![]),
            ("uniq -2 in out", vec!["out"]),
            ("xxd -r dump out", vec!["out"]),
            ("xxd -c 8 -s 16 in /etc/x", vec!["/etc/x"]),
            ("xxd -o 16 in", vec![]),
            ("xxd -r -p dump", vec![]),
            ("tee a /etc/x", vec!["a", "/etc/x"]),
            ("dd if=a of=/etc/x bs=1M", vec!["/etc/x"]),
            ("dd if=/etc/x of=out", vec!["out"]),
            ("yq -i '.a = 1' /etc/x.yaml", vec![".a = 1", "/etc/x.yaml"]),
            ("yq '.a' /etc/x.yaml", vec![]),
        ] {
            assert_eq!(writes(cmd), want, "`{cmd}`");
        }
        // `of=~/x`: bash expands the `~` after `of=`.
        let tree = pinfold_shell::parse("dd if=a of=~/x").unwrap();
        let f = scan(&tree.commands[0]);
        assert!(f.writes[0].word.tilde, "{:?}", f.writes[0]);
    }

    #[test]
    fn sed_scripts() {
        for (cmd, want) in [
            ("sed -n 'w out' f", vec!["out"]),
            ("sed -n 'w /etc/x' f", vec!["/etc/x"]),
            ("sed -e p -e 's/a/b/w /etc/x' f", vec!["/etc/x"]),
            ("sed --expression='w /etc/x' f", vec!["/etc/x"]),
            ("sed -ne 'w /etc/x' f", vec!["/etc/x"]),
            // `-s` is `--separate`, a flag: the script is the next argument.
            ("sed -s 'w /etc/x' f", vec!["/etc/x"]),
            // `w ~/x` writes `./~/x`: sed expands no `~`.
            ("sed -n 'w ~/.bashrc' f", vec!["~/.bashrc"]),
            ("sed -n 's/a/b/p' f", vec![]),
            ("sed -n p /etc/passwd", vec![]),
            ("sed --sandbox -n 'w /etc/x' f", vec![]),
            // `-i` rewrites every input file.
            ("sed -i s/a/b/ /etc/x", vec!["/etc/x"]),
            ("sed -i.bak -e s/a/b/ /etc/x", vec!["/etc/x"]),
            ("sed --in-place=.bak s/a/b/ /etc/x", vec!["/etc/x"]),
        ] {
            assert_eq!(writes(cmd), want, "`{cmd}`");
        }
        for cmd in ["sed -n '1e id' f", "sed 's/.*/date/e' f", "sed -f script.sed f", "sed --file=s f", "sed -n \"$S\" f", "sed -n 's/a/b' f"] {
            assert!(!runs(cmd).is_empty(), "`{cmd}`: {:?}", found(cmd));
        }
        assert!(runs("sed --sandbox -f script.sed f").is_empty());
    }

    #[test]
    fn programs_run() {
        for cmd in [
            "go build -toolexec=/tmp/x .",
            "go build -toolexec /tmp/x .",
            "go test -exec ./wrap.sh ./...",
            "go vet -vettool=/tmp/v ./...",
            "gcc -wrapper gdb,--args a.c",
            "gcc -fplugin=./p.so a.c",
            "clang -fpass-plugin=./p.so a.c",
            "gcc -B/tmp/bin a.c",
            "gcc -specs=/tmp/s a.c",
            "gcc @opts a.c",
            "rustc -C linker=/tmp/x a.rs",
            "rustc -Clinker=/tmp/x a.rs",
            "rustc --codegen=linker=/tmp/x a.rs",
            "rustc @args",
        ] {
            assert_eq!(runs(cmd).len(), 1, "`{cmd}`: {:?}", found(cmd));
        }
        let (_, _, runs, _) = found("go build -toolexec=/tmp/x .");
        assert!(runs[0].contains("`go build -toolexec`") && runs[0].contains("/tmp/x"), "{runs:?}");
    }

    #[test]
    fn working_directories() {
        assert_eq!(found("git -C sub diff --output=x").1, vec!["sub"]);
        assert_eq!(found("git -C a -C b log --output=x").1, vec!["a", "b"]);
        // After the subcommand `-C` is `git diff`'s own (copies), and `--output` still counts.
        let (w, chdir, _, _) = found("git diff -C --output=/etc/x");
        assert_eq!((w, chdir), (vec!["/etc/x".to_string()], Vec::<String>::new()));
        assert_eq!(found("go -C /etc build -o x .").1, vec!["/etc"]);
    }

    #[test]
    fn arguments_known_only_at_run_time() {
        // The output file itself.
        let (w, _, _, _) = found("sort -o \"$OUT\" f");
        assert_eq!(w, vec!["$OUT"]);
        // An argument that could be an output option.
        assert!(found("sort $OPTS f").3.is_some());
        assert!(found("git log \"$(echo x)\"").3.is_some());
        // One whose first character is known: a file name, never an option.
        assert!(found("sort \"x$Y\"").3.is_none());
        assert!(found("git diff -- $FILES").3.is_none());
        // One that could be an option that runs code.
        assert_eq!(runs("gcc $CFLAGS -o app a.c").len(), 1);
        assert_eq!(found_in("ls | xargs gcc -c", "gcc").2.len(), 1);
        assert!(found_in("find . -name '*.c' -exec gcc -c {} ;", "gcc").2.is_empty());
        // Positions: `uniq "$A" B`: `$A` is the input (or an option), so B may be the output.
        assert_eq!(found("uniq \"$A\" out").0, vec!["out"]);
        assert!(found("uniq \"$A\"").0.is_empty());
        assert_eq!(found("uniq in \"$B\"").0, vec!["$B"]);
        // Unquoted, `$A` may be two words.
        assert!(found("uniq $A").3.is_some());
        // tree takes `-o`'s value from the next argument: one last argument alone cannot
        // name a file for it to write; with another after it, it could be `-o`.
        assert!(found("tree \"$DIR\"").3.is_none());
        assert!(found("tree \"$OPT\" x").3.is_some());
        assert!(found("tree $OPTS").3.is_some());
    }

    /// Every positional write by position is of a tool whose options pinfold knows all of:
    /// an unknown option could take the next argument as its value and move the positions.
    #[test]
    fn positions_only_for_tools_whose_options_are_all_known() {
        for t in options::TABLES {
            if !t.io.positional.at.is_empty() {
                assert!(t.closed, "{} writes by position but its table is not closed", t.name);
            }
        }
    }
}
