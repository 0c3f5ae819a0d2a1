//! Matching a compiled [`Pattern`] against a parsed command, under ambiguity.
//!
//! pinfold often cannot know how a tool reads its arguments: whether an unknown option takes
//! the next argument as its value (`git --frob x push`), whether `-abc` is three flags or
//! `-a` with the value `bc`, or what a dynamic argument (`"$DIR"`) holds. Each way of reading
//! the command is a *reading*. **Deny and ask rules match if any reading matches; allow rules
//! only if every reading does** ([`Mode`]). A deny rule that matches only by assuming what a
//! dynamic argument holds gives [`Outcome::Dynamic`], which the judge turns into ask.
//!
//! Readings are enumerated depth-first and lazily, stopping as soon as the answer is known,
//! with a budget ([`MAX_READINGS`]); past it, the answer is the strict one for the mode.

use std::borrow::{Borrow, Cow};
use std::path::{Component, Path, PathBuf};

use pinfold_shell::{SimpleCommand, Word};

use crate::options::{self, Arity, Style, Table};
use crate::pattern::{basename, glob_match, glob_match_prefix, Alts, Pattern, Pos};

/// How many readings of one command are examined before giving the strict answer.
pub const MAX_READINGS: usize = 256;

/// Which quantifier over readings applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Deny and ask rules: some reading matches.
    Any,
    /// Allow rules: every reading matches.
    Every,
}

/// The result of matching one rule against one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// No reading matches (Any), or some reading does not (Every).
    No,
    /// Matches only if a dynamic argument holds the right value (Any mode only).
    Dynamic,
    /// Matches.
    Yes,
}

/// What the matcher needs besides the command: where relative paths and `~` point, and
/// the path sets.
#[derive(Debug, Clone, Copy)]
pub struct Env<'a> {
    pub cwd: &'a Path,
    pub home: Option<&'a Path>,
    pub paths: &'a std::collections::BTreeMap<String, Vec<String>>,
}

/// One argument as the matcher sees it.
#[derive(Debug, Clone, Copy)]
enum Item<'a> {
    Static(&'a Word),
    Dynamic { splits: bool },
}

/// A flag occurrence in one reading. Names and values borrow the argument they were read
/// from (a reading is built and dropped per rule, so copies showed up in the profile).
#[derive(Debug, Clone)]
struct Occ<'a> {
    name: Cow<'a, str>,
    value: Option<Val<'a>>,
}

#[derive(Debug, Clone)]
enum Val<'a> {
    Text(&'a str),
    Word(&'a Word),
}

/// The option tables in force: the command's and, once the first positional names it, the
/// subcommand's. Never more than two, so kept inline rather than in a `Vec` per rule.
#[derive(Debug, Clone, Copy)]
struct Tables {
    /// The first `len` entries are in force; the rest hold a filler that is never read.
    items: [&'static Table; 2],
    len: usize,
}

impl Tables {
    fn new(first: Option<&'static Table>) -> Tables {
        let filler = &options::TABLES[0];
        Tables { items: [first.unwrap_or(filler), filler], len: usize::from(first.is_some()) }
    }

    fn as_slice(&self) -> &[&'static Table] {
        &self.items[..self.len]
    }

    fn push(&mut self, t: &'static Table) {
        self.items[self.len] = t;
        self.len += 1;
    }

    fn pop(&mut self) {
        self.len -= 1;
    }
}

struct Reading<'a> {
    flags: Vec<Occ<'a>>,
    positional: Vec<Item<'a>>,
    dynamic: bool,
}

/// What matching needs of a command that does not depend on the rule: worked out once per
/// command, then matched against every candidate rule ([`matches_subject`]).
#[derive(Debug, Clone, Copy)]
pub struct Subject<'c> {
    cmd: &'c SimpleCommand,
    /// argv\[0\]'s basename.
    base: &'c str,
    /// The option table of the command, if pinfold has one.
    table: Option<&'static Table>,
}

impl<'c> Subject<'c> {
    pub fn new(cmd: &'c SimpleCommand) -> Subject<'c> {
        let base = cmd.words.first().map_or("", |w| basename(&w.text));
        Subject { cmd, base, table: options::table(base) }
    }
}

/// Match `pattern` against `cmd` (whose argv\[0\] is static) in `mode`.
pub fn matches(pattern: &Pattern, cmd: &SimpleCommand, mode: Mode, env: &Env<'_>) -> Outcome {
    matches_subject(pattern, &Subject::new(cmd), mode, env)
}

/// [`matches`], for a command prepared once for all rules.
pub fn matches_subject(pattern: &Pattern, subject: &Subject<'_>, mode: Mode, env: &Env<'_>) -> Outcome {
    let cmd = subject.cmd;
    let Some(name) = cmd.words.first() else { return Outcome::No };
    if name.dynamic {
        return if mode == Mode::Any { Outcome::Dynamic } else { Outcome::No };
    }
    let base = subject.base;
    if !pattern.command.0.iter().any(|g| glob_match(&g.text, &name.text) || glob_match(&g.text, base)) {
        return Outcome::No;
    }
    let args = &cmd.words[1..];
    let tables = Tables::new(subject.table);
    let cares_positional = !pattern.has_star
        || pattern.positional.iter().any(|p| !matches!(p, Pos::Star))
        || pattern.required.iter().any(|r| r.value.is_some());
    let cares_flags = !pattern.has_star
        || !pattern.required.is_empty()
        || !pattern.negated.is_empty();
    let mut st = Enum {
        args,
        tables,
        cares_positional,
        cares_flags,
        budget: MAX_READINGS,
        best: Outcome::No,
        all_yes: true,
        mode,
        pattern,
        env,
        exhausted: false,
    };
    let mut reading = Reading {
        flags: Vec::with_capacity(args.len()),
        positional: Vec::with_capacity(args.len()),
        dynamic: false,
    };
    st.enumerate(&mut reading);
    match mode {
        Mode::Any => {
            if st.exhausted && st.best == Outcome::No {
                // Too many readings to examine: the strict answer for a deny/ask rule is that
                // it may match.
                Outcome::Dynamic
            } else {
                st.best
            }
        }
        Mode::Every => {
            if st.all_yes && !st.exhausted { Outcome::Yes } else { Outcome::No }
        }
    }
}

struct Enum<'a, 'p, 'e> {
    args: &'a [Word],
    tables: Tables,
    cares_positional: bool,
    cares_flags: bool,
    budget: usize,
    best: Outcome,
    all_yes: bool,
    mode: Mode,
    pattern: &'p Pattern,
    env: &'p Env<'e>,
    exhausted: bool,
}

impl<'a> Enum<'a, '_, '_> {
    /// Whether the answer is settled and enumeration can stop.
    fn done(&self) -> bool {
        self.exhausted
            || match self.mode {
                Mode::Any => self.best == Outcome::Yes,
                Mode::Every => !self.all_yes,
            }
    }

    fn finish(&mut self, r: &Reading<'a>) {
        if self.budget == 0 {
            self.exhausted = true;
            return;
        }
        self.budget -= 1;
        let o = judge_reading(self.pattern, r, self.mode, self.env);
        match self.mode {
            Mode::Any => self.best = self.best.max(o),
            Mode::Every => self.all_yes &= o == Outcome::Yes,
        }
    }

    fn style(&self) -> Style {
        self.tables.as_slice().first().map_or(Style::Gnu, |t| t.style)
    }

    fn push_positional(&mut self, r: &mut Reading<'a>, item: Item<'a>) -> bool {
        // The first positional of a tool with subcommands selects the subcommand's table.
        let switched = r.positional.is_empty()
            && self.tables.len == 1
            && self.tables.items[0].subcommands
            && match item {
                Item::Static(w) => match options::sub_table(self.tables.items[0].name, &w.text) {
                    Some(t) => {
                        self.tables.push(t);
                        true
                    }
                    None => false,
                },
                Item::Dynamic { .. } => false,
            };
        r.positional.push(item);
        switched
    }

    fn pop_positional(&mut self, r: &mut Reading<'a>, switched: bool) {
        r.positional.pop();
        if switched {
            self.tables.pop();
        }
    }

    /// Enumerate the readings of the arguments depth-first, in the order a recursive descent
    /// over them would, but on a stack of [`Step`]s on the heap: one level per argument would
    /// overflow the thread's stack on a command of tens of thousands of arguments.
    fn enumerate(&mut self, r: &mut Reading<'a>) {
        let mut todo: Vec<Step<'a>> = vec![Step::Walk { i: 0, after_dashdash: false }];
        while let Some(step) = todo.pop() {
            // Once the answer is settled nothing left can change it (the reading is dropped,
            // so its undo steps need not run either).
            if self.done() {
                return;
            }
            match step {
                Step::Walk { i, after_dashdash } => self.walk(i, r, after_dashdash, &mut todo),
                Step::Cluster { i, pos } => self.cluster(r, i, pos, &mut todo),
                Step::TakeNext { name, i } => self.take_next_value(r, name, i, &mut todo),
                Step::ValueIn { name, i, rest } => self.value_in_cluster(r, name, i, rest, &mut todo),
                Step::WholeOption { i } => {
                    let t = Cow::Borrowed(self.args[i].text.as_str());
                    self.option_with_arity(r, t, Arity::Unknown, i, &mut todo);
                }
                Step::PopFlag => {
                    r.flags.pop();
                }
                Step::PopPositional { switched } => self.pop_positional(r, switched),
                Step::SetDynamic(was) => r.dynamic = was,
            }
        }
    }

    /// Read `args[i]` and queue what follows from each way of reading it.
    fn walk(&mut self, i: usize, r: &mut Reading<'a>, after_dashdash: bool, todo: &mut Vec<Step<'a>>) {
        let args: &'a [Word] = self.args;
        let Some(w) = args.get(i) else {
            self.finish(r);
            return;
        };
        if w.dynamic && w.home_suffix.is_none() {
            let was = r.dynamic;
            r.dynamic = true;
            let switched = self.push_positional(r, Item::Dynamic { splits: w.splits });
            todo.extend([Step::SetDynamic(was), Step::PopPositional { switched }, Step::Walk { i: i + 1, after_dashdash }]);
            return;
        }
        let t = w.text.as_str();
        if after_dashdash || t == "-" || !t.starts_with('-') || t.len() < 2 {
            let switched = self.push_positional(r, Item::Static(w));
            todo.extend([Step::PopPositional { switched }, Step::Walk { i: i + 1, after_dashdash }]);
            return;
        }
        if t == "--" {
            todo.push(Step::Walk { i: i + 1, after_dashdash: true });
            return;
        }
        if let Some(long) = t.strip_prefix("--") {
            if let Some((name, value)) = long.split_once('=') {
                // `--name`: the part of the word before the `=`.
                let name = &t[..2 + name.len()];
                self.flag(r, Cow::Borrowed(name), Some(Val::Text(value)), i + 1, todo);
                return;
            }
            let arity = options::arity(self.tables.as_slice(), t);
            self.option_with_arity(r, Cow::Borrowed(t), arity, i, todo);
            return;
        }
        // Single dash.
        let listing = options::listing(self.tables.as_slice(), t);
        let whole = listing.unwrap_or_else(|| options::unlisted(self.tables.as_slice()));
        if self.style() == Style::Single || listing.is_some() || is_number(&t[1..]) {
            let arity = if is_number(&t[1..]) { Arity::Flag } else { whole };
            self.option_with_arity(r, Cow::Borrowed(t), arity, i, todo);
            return;
        }
        // A tool we know nothing of may read `-auto-approve` as one option, not a cluster
        // (tools with a table here are GNU-style or listed as single-dash): that reading comes
        // after every reading as a cluster.
        let unknown_tool = self.tables.len == 0;
        if unknown_tool && t.chars().count() > 2 && self.cares_flags {
            todo.push(Step::WholeOption { i });
        }
        todo.push(Step::Cluster { i, pos: 1 });
    }

    /// `-abc` from byte `pos`: each character a flag until one takes a value.
    fn cluster(&mut self, r: &mut Reading<'a>, i: usize, pos: usize, todo: &mut Vec<Step<'a>>) {
        let args: &'a [Word] = self.args;
        let t = args[i].text.as_str();
        let Some(c) = t[pos..].chars().next() else {
            todo.push(Step::Walk { i: i + 1, after_dashdash: false });
            return;
        };
        let next = pos + c.len_utf8();
        let name = short_name(c);
        let rest = &t[next..];
        match options::arity(self.tables.as_slice(), &name) {
            Arity::Value => self.value_in_cluster(r, name, i, rest, todo),
            Arity::Flag => {
                r.flags.push(Occ { name, value: None });
                todo.extend([Step::PopFlag, Step::Cluster { i, pos: next }]);
            }
            Arity::Unknown => {
                // The other reading, after this one: this flag takes a value. It changes what
                // the pattern sees only if the pattern looks at flags (rest of cluster) or
                // positionals (next arg).
                let last = rest.is_empty();
                let matters = if last { self.next_can_be_value(i) && self.cares_positional } else { self.cares_flags };
                if matters {
                    todo.push(Step::ValueIn { name: name.clone(), i, rest });
                }
                r.flags.push(Occ { name, value: None });
                todo.extend([Step::PopFlag, Step::Cluster { i, pos: next }]);
            }
        }
    }

    /// The flag `name` of the cluster in `args[i]` takes a value: `rest` of the word, or the
    /// next argument when the flag ends the word.
    fn value_in_cluster(&mut self, r: &mut Reading<'a>, name: Cow<'a, str>, i: usize, rest: &'a str, todo: &mut Vec<Step<'a>>) {
        if rest.is_empty() {
            self.take_next_value(r, name, i, todo);
        } else {
            self.flag(r, name, Some(Val::Text(rest)), i + 1, todo);
        }
    }

    fn next_can_be_value(&self, i: usize) -> bool {
        self.args.get(i + 1).is_some_and(|n| n.dynamic || !n.text.starts_with('-') || n.text == "-")
    }

    fn option_with_arity(&mut self, r: &mut Reading<'a>, name: Cow<'a, str>, arity: Arity, i: usize, todo: &mut Vec<Step<'a>>) {
        match arity {
            Arity::Value => self.take_next_value(r, name, i, todo),
            Arity::Flag => self.flag(r, name, None, i + 1, todo),
            Arity::Unknown => {
                // First the reading as a flag, then (queued beneath it) as taking a value.
                if self.next_can_be_value(i) && self.cares_positional {
                    todo.push(Step::TakeNext { name: name.clone(), i });
                }
                self.flag(r, name, None, i + 1, todo);
            }
        }
    }

    /// The option at `i` takes `args[i + 1]` as its value.
    fn take_next_value(&mut self, r: &mut Reading<'a>, name: Cow<'a, str>, i: usize, todo: &mut Vec<Step<'a>>) {
        let args: &'a [Word] = self.args;
        match args.get(i + 1) {
            Some(v) => self.flag(r, name, Some(Val::Word(v)), i + 2, todo),
            None => self.flag(r, name, None, i + 1, todo),
        }
    }

    /// Add the flag occurrence to the reading and go on reading at `next`.
    fn flag(&mut self, r: &mut Reading<'a>, name: Cow<'a, str>, value: Option<Val<'a>>, next: usize, todo: &mut Vec<Step<'a>>) {
        r.flags.push(Occ { name, value });
        todo.extend([Step::PopFlag, Step::Walk { i: next, after_dashdash: false }]);
    }
}

/// One thing left to do in [`Enum::enumerate`]: a choice still to explore, or the undoing of
/// a choice made, so that the reading is as it was before the choice.
enum Step<'a> {
    /// Read the arguments from `i` on.
    Walk { i: usize, after_dashdash: bool },
    /// Read the rest of the cluster `args[i]` from byte `pos`.
    Cluster { i: usize, pos: usize },
    /// The option `name` at `i` takes the next argument as its value.
    TakeNext { name: Cow<'a, str>, i: usize },
    /// The flag `name` in the cluster `args[i]` takes `rest` (or, when empty, the next
    /// argument) as its value.
    ValueIn { name: Cow<'a, str>, i: usize, rest: &'a str },
    /// `args[i]` of a tool pinfold knows nothing of, read as one option of unknown arity.
    WholeOption { i: usize },
    /// Undo: drop the last flag occurrence.
    PopFlag,
    /// Undo: drop the last positional (and the subcommand's table it switched to).
    PopPositional { switched: bool },
    /// Undo: restore whether the reading holds a dynamic argument.
    SetDynamic(bool),
}

/// `-c` for every ASCII `c`, two bytes each, so a short flag's name is borrowed, not built.
static SHORT_NAMES: [u8; 256] = {
    let mut b = [0u8; 256];
    let mut i = 0;
    while i < 128 {
        b[2 * i] = b'-';
        b[2 * i + 1] = i as u8;
        i += 1;
    }
    b
};

/// The name of the short flag `c` (`-c`).
fn short_name(c: char) -> Cow<'static, str> {
    if c.is_ascii() {
        let at = 2 * c as usize;
        if let Ok(name) = std::str::from_utf8(&SHORT_NAMES[at..at + 2]) {
            return Cow::Borrowed(name);
        }
    }
    Cow::Owned(format!("-{c}"))
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Does a flag occurrence named `occ` match one of `names`? In Any mode an abbreviated long
/// option (`--recur` for `--recursive`, as getopt_long accepts) matches too.
fn flag_name_matches(occ: &str, names: &[String], mode: Mode) -> bool {
    names.iter().any(|n| {
        n == occ || (mode == Mode::Any && occ.starts_with("--") && occ.len() >= 4 && n.starts_with(occ))
    })
}

fn judge_reading(p: &Pattern, r: &Reading<'_>, mode: Mode, env: &Env<'_>) -> Outcome {
    let mut out = Outcome::Yes;
    // Required flags.
    for req in &p.required {
        let mut found = Outcome::No;
        for o in &r.flags {
            if !flag_name_matches(&o.name, &req.names, mode) {
                continue;
            }
            let v = match (&req.value, &o.value) {
                (None, _) => Outcome::Yes,
                (Some(_), None) => Outcome::No,
                (Some(a), Some(Val::Text(t))) => yes_no(alts_match_text(a, t)),
                (Some(a), Some(Val::Word(w))) => token_item(a, Item::Static(w), mode, env),
            };
            found = found.max(v);
            if found == Outcome::Yes {
                break;
            }
        }
        if found == Outcome::No && mode == Mode::Any && r.dynamic {
            // A dynamic argument could be this flag.
            found = Outcome::Dynamic;
        }
        out = out.min(found);
        if out == Outcome::No {
            return out;
        }
    }
    // Negated flags.
    for names in &p.negated {
        // An abbreviation (`--in-pl` for `--in-place`) counts as present in every mode: for
        // an allow rule that is the stricter reading.
        if r.flags.iter().any(|o| flag_name_matches(&o.name, names, Mode::Any)) {
            return Outcome::No;
        }
        if mode == Mode::Every && r.dynamic {
            return Outcome::No;
        }
    }
    // Without a lone `*`, every flag must be accounted for.
    if !p.has_star {
        for o in &r.flags {
            let known = p.required.iter().any(|q| flag_name_matches(&o.name, &q.names, Mode::Every))
                || p.permitted.iter().any(|q| flag_name_matches(&o.name, q, Mode::Every));
            if !known {
                return Outcome::No;
            }
        }
    }
    out.min(positional(p, &r.positional, mode, env))
}

fn yes_no(b: bool) -> Outcome {
    if b { Outcome::Yes } else { Outcome::No }
}

fn positional(p: &Pattern, items: &[Item<'_>], mode: Mode, env: &Env<'_>) -> Outcome {
    // Without an optional group the only variant is the tokens as written.
    if p.variants.is_empty() {
        return flat(&p.positional, items, mode, env);
    }
    let mut best = Outcome::No;
    for v in &p.variants {
        best = best.max(flat(v, items, mode, env));
        if best == Outcome::Yes {
            break;
        }
    }
    best
}

/// Dynamic programming over (pattern token, item): the best outcome reaching each state.
fn flat<P: Borrow<Pos>>(pats: &[P], items: &[Item<'_>], mode: Mode, env: &Env<'_>) -> Outcome {
    let (np, ni) = (pats.len(), items.len());
    let w = ni + 1;
    // The table lives on the stack for the usual sizes (it is built once per reading).
    let mut small = [Outcome::No; 64];
    let mut large = Vec::new();
    let reach: &mut [Outcome] = if (np + 1) * w <= small.len() {
        &mut small[..(np + 1) * w]
    } else {
        large.resize((np + 1) * w, Outcome::No);
        &mut large
    };
    reach[0] = Outcome::Yes;
    for pi in 0..=np {
        for ai in 0..=ni {
            let r = reach[pi * w + ai];
            if r == Outcome::No {
                continue;
            }
            let mut set = |pj: usize, aj: usize, o: Outcome| {
                let idx = pj * w + aj;
                if reach[idx] < o {
                    reach[idx] = o;
                }
            };
            // A dynamic item may vanish (split to nothing, or be a flag) in Any mode.
            if ai < ni {
                if let Item::Dynamic { .. } = items[ai] {
                    if mode == Mode::Any {
                        set(pi, ai + 1, r.min(Outcome::Dynamic));
                    }
                }
            }
            if pi == np {
                continue;
            }
            match pats[pi].borrow() {
                Pos::Star => {
                    set(pi + 1, ai, r);
                    if ai < ni {
                        set(pi, ai + 1, r);
                    }
                }
                tok => {
                    if ai < ni {
                        let o = pos_item(tok, items[ai], mode, env);
                        if o != Outcome::No {
                            set(pi + 1, ai + 1, r.min(o));
                            // A splitting dynamic item may yield several words.
                            if let Item::Dynamic { splits: true } = items[ai] {
                                set(pi + 1, ai, r.min(Outcome::Dynamic));
                            }
                        }
                    }
                }
            }
        }
    }
    reach[np * w + ni]
}

fn pos_item(tok: &Pos, item: Item<'_>, mode: Mode, env: &Env<'_>) -> Outcome {
    match tok {
        Pos::Star | Pos::Optional(_) => Outcome::Yes,
        Pos::One(a) => token_item(a, item, mode, env),
        Pos::Not(a) => match item {
            Item::Static(w) if w.home_suffix.is_none() => {
                yes_no(token_item(a, item, Mode::Every, env) == Outcome::No && !may_resolve_equal(a, w, env))
            }
            _ => dynamic_outcome(mode),
        },
        Pos::Path(name) => match resolve(item_word(item), env) {
            Some(path) => {
                let set = env.paths.get(name).map_or(&[][..], |v| v.as_slice());
                yes_no(set.iter().any(|e| in_or_under(&path, e)))
            }
            None => dynamic_outcome(mode),
        },
    }
}

fn dynamic_outcome(mode: Mode) -> Outcome {
    if mode == Mode::Any { Outcome::Dynamic } else { Outcome::No }
}

fn item_word<'a>(item: Item<'a>) -> Option<&'a Word> {
    match item {
        Item::Static(w) => Some(w),
        Item::Dynamic { .. } => None,
    }
}

/// `!x` must not be fooled by a tilde the matcher cannot resolve.
fn may_resolve_equal(a: &Alts, w: &Word, env: &Env<'_>) -> bool {
    w.tilde && env.home.is_none() && a.0.iter().any(|g| g.text.starts_with('~'))
}

fn alts_match_text(a: &Alts, t: &str) -> bool {
    a.0.iter().any(|g| if g.wild { glob_match(&g.text, t) } else { g.text == t })
}

/// One token against one item. Path-like tokens (`/`, `~`, `~/x`, `./x`) also match an
/// argument that resolves to the same place (`~/`, `$HOME`, `/root/..`).
fn token_item(a: &Alts, item: Item<'_>, mode: Mode, env: &Env<'_>) -> Outcome {
    let Item::Static(w) = item else { return dynamic_outcome(mode) };
    if w.dynamic && w.home_suffix.is_none() {
        return dynamic_outcome(mode);
    }
    if !w.dynamic && !w.tilde && alts_match_text(a, &w.text) {
        return Outcome::Yes;
    }
    // Resolving builds a path: only when a token is path-like or the word needs it below.
    let needs_path = a.0.iter().any(|g| is_path_like(&g.text));
    let resolved =
        if needs_path || w.tilde || w.home_suffix.is_some() { resolve(Some(w), env) } else { None };
    for g in &a.0 {
        if !is_path_like(&g.text) {
            continue;
        }
        let Some(tp) = resolve_text(&g.text, env) else { continue };
        if let Some(ref arg) = resolved {
            let (ts, as_) = (tp.to_string_lossy(), arg.to_string_lossy());
            let hit = if g.wild { glob_match(&ts, &as_) } else { ts == as_ };
            if hit {
                return Outcome::Yes;
            }
        }
    }
    if w.tilde && !w.dynamic && alts_match_text(a, &w.text) {
        return Outcome::Yes;
    }
    if resolved.is_none() && (w.tilde || w.home_suffix.is_some()) {
        // `~user/…` or no home known: cannot tell.
        return dynamic_outcome(mode);
    }
    Outcome::No
}

fn is_path_like(t: &str) -> bool {
    t.starts_with('/') || t.starts_with('~') || t.starts_with("./") || t.starts_with("../") || t == "." || t == ".."
}

/// Resolve pattern text (may hold globs) to an absolute, lexically normal path.
fn resolve_text(t: &str, env: &Env<'_>) -> Option<PathBuf> {
    let p = if t == "~" || t.starts_with("~/") {
        env.home?.join(t.trim_start_matches('~').trim_start_matches('/'))
    } else if t.starts_with('~') {
        return None;
    } else {
        env.cwd.join(t)
    };
    Some(normalize(&p))
}

/// Resolve an argument: tilde, `$HOME`, cwd, `..`. `None` when it cannot be known.
pub fn resolve(w: Option<&Word>, env: &Env<'_>) -> Option<PathBuf> {
    let w = w?;
    if let Some(suffix) = &w.home_suffix {
        return Some(normalize(&env.home?.join(suffix.trim_start_matches('/'))));
    }
    if w.dynamic {
        return None;
    }
    if w.tilde {
        return resolve_text(&w.text, env);
    }
    Some(normalize(&env.cwd.join(&w.text)))
}

/// Lexical normalisation: drop `.`, apply `..`, no trailing slash. No symlinks are followed
/// (the kernel sandbox, not the policy, is the boundary for those).
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(s) => out.push(s),
        }
    }
    out
}

/// Whether `path` is `entry` or lies under it; `entry` may hold globs (matched against the
/// path and each of its ancestors).
pub fn in_or_under(path: &Path, entry: &str) -> bool {
    let entry_path = normalize(Path::new(entry));
    let wild = entry.contains(['*', '?', '[']);
    let es = entry_path.to_string_lossy();
    // The path's ancestors are prefixes of its text (`Path::parent` borrows): compared as such,
    // in one pass, not each rendered anew, which cost the sum of their lengths (quadratic in
    // the depth of a path in a command or a hook payload).
    if let Some(text) = path.to_str() {
        let start = text.as_ptr();
        let ends: Option<Vec<usize>> = path
            .ancestors()
            .map(|a| std::ptr::eq(a.as_os_str().as_encoded_bytes().as_ptr(), start).then_some(a.as_os_str().len()))
            .collect();
        if let Some(ends) = ends {
            return if wild {
                glob_match_prefix(&es, text, &ends)
            } else {
                ends.iter().any(|&n| text.get(..n) == Some(&*es))
            };
        }
    }
    // A path that is not UTF-8 (only ever from the file system), each ancestor as a string.
    let mut cur = Some(path);
    while let Some(p) = cur {
        let ps = p.to_string_lossy();
        if if wild { glob_match(&es, &ps) } else { ps == es } {
            return true;
        }
        cur = p.parent();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_paths() {
        assert_eq!(normalize(Path::new("/a/./b/../c/")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../..")), PathBuf::from("/"));
        assert_eq!(normalize(Path::new("//x//y")), PathBuf::from("/x/y"));
    }

    /// [`in_or_under`] answers as rendering the path and each ancestor as a string does.
    #[test]
    fn under_agrees_with_each_ancestor_as_a_string() {
        use std::os::unix::ffi::OsStrExt;
        fn each(path: &Path, entry: &str) -> bool {
            let es = normalize(Path::new(entry)).to_string_lossy().into_owned();
            let wild = entry.contains(['*', '?', '[']);
            path.ancestors().any(|p| {
                let ps = p.to_string_lossy();
                if wild { glob_match(&es, &ps) } else { ps == es }
            })
        }
        let mut paths: Vec<PathBuf> = ["/", "", "a/b", "/h/.ssh/id_rsa", "/h/.ssh", "/h/.sshx", "/a/./b/", "//x//y/", "/a/b/..", "/a/b/.", "/p/.env/x",
            "/p/src/.env", "/dev/fd/3", "/é/ü/x", "/a/a/a/a/b", "./a"]
            .iter()
            .map(PathBuf::from)
            .collect();
        paths.push(PathBuf::from(std::ffi::OsStr::from_bytes(b"/h/\xff/.ssh/k")));
        let entries = ["/h/.ssh", "/", "/a", "/a/b", "/x/y", "/p/.env*", "/dev/fd", "/*/ü", "/a/*/b", "/a/**/c", "/[a-h]/?ssh*", "/é", "a", "/a/b/.."];
        for p in &paths {
            for e in entries {
                assert_eq!(in_or_under(p, e), each(p, e), "{p:?} {e:?}");
            }
        }
    }

    #[test]
    fn under() {
        assert!(in_or_under(Path::new("/h/.ssh/id_rsa"), "/h/.ssh"));
        assert!(in_or_under(Path::new("/h/.ssh"), "/h/.ssh"));
        assert!(!in_or_under(Path::new("/h/.sshx"), "/h/.ssh"));
        assert!(in_or_under(Path::new("/p/.env.local"), "/p/.env*"));
        assert!(in_or_under(Path::new("/p/.env/x"), "/p/.env*"));
        assert!(!in_or_under(Path::new("/p/src/.env"), "/p/.env*"));
    }
}
