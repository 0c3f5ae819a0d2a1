//! Verdicts: a [`Policy`] judges command text and returns a [`Judgement`].
//!
//! For each simple command every matching rule counts, and the strictest wins: deny > ask >
//! allow; no match gives `defaults.action`. A compound command's verdict is the strictest of
//! its parts (powerful wrappers such as `sudo` count as parts). On top of rule matching:
//!
//! * a command whose name is only known at run time is at least **ask**;
//! * dangerous environment prefixes (`LD_PRELOAD=… ls`, `GIT_PAGER=… git log`) raise an
//!   allow to **ask** unless an allowing rule names the variable in `env`;
//! * an output redirect, or a file the command's arguments name for it to write (`sort -o
//!   FILE`, `uniq IN OUT`, a sed script's `w FILE`; see [`crate::writes`]), in a place the
//!   command's sandbox could not write — or, for a command no sandbox preset holds, outside
//!   the project and the temp directories — raises allow to **ask**;
//! * a program or script the command runs on the side, which pinfold cannot judge (`go build
//!   -toolexec PROG`, a sed script's `e`), raises allow to **ask**, whatever the sandbox,
//!   unless an allowing rule names the option;
//! * input that cannot be parsed gets `defaults.on_parse_error` (ask or deny, never allow).

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use pinfold_shell::{CommandKind, CommandTree, SimpleCommand, Unparseable, Word};
use serde::Serialize;

use crate::config::{Action, Config, Location, RuleSpec, SandboxPreset};
use crate::env::dangerous_env;
use crate::matcher::{self, Env, Mode, Outcome};
use crate::pattern::{Pattern, PatternError};
use crate::writes;

/// A rule's pattern that does not compile. `Display` is the headline; the pattern's
/// suggestion, if it has one, is [`PolicyError::hint`].
#[derive(Debug, thiserror::Error)]
#[error("{location}: invalid pattern `{pattern}`: {error}")]
pub struct PolicyError {
    /// Where the pattern is (its column adjusted to the offending token when possible).
    pub location: Location,
    pub pattern: String,
    #[source]
    pub error: PatternError,
}

impl PolicyError {
    /// A suggestion for fixing the pattern, if there is one.
    pub fn hint(&self) -> Option<&str> {
        self.error.hint()
    }
}

#[derive(Debug)]
pub(crate) struct Rule {
    pub(crate) spec: RuleSpec,
    pub(crate) pattern: Pattern,
}

/// A compiled policy, ready to judge.
#[derive(Debug)]
pub struct Policy {
    /// The configuration; when loaded from the cache its `rules` are empty (see `store`).
    pub(crate) config: Config,
    pub(crate) store: RuleStore,
    /// Rule indices by literal command basename (and subcommand, see `index_keys`).
    pub(crate) by_name: Index,
    /// Rules whose command token is a glob: checked for every command.
    pub(crate) wildcard: Vec<usize>,
    /// Whether the project has undo (see [`Policy::undo_here`]), found on first need.
    pub(crate) undo: std::sync::OnceLock<bool>,
}

/// Where compiled rules come from: compiled up front, or decoded from the cache on first use
/// (a check of `git status` then decodes only the rules that can match `git status`).
#[derive(Debug)]
pub(crate) enum RuleStore {
    Eager(Vec<Rule>),
    Lazy {
        /// The cache entry, read on demand.
        file: std::fs::File,
        /// Offset records: 16 hex digits per rule (start and end in the entry), in memory.
        records: Vec<u8>,
        /// One cell per rule, decoded on first use.
        cells: Cells,
    },
}

/// Rules decoded from a cache entry, one cell each, the cells made in blocks of
/// [`CELL_BLOCK`] when one of their rules is first needed. A check decodes a handful of a
/// policy's rules: cells for all of them up front were 16 KiB to allocate and write on every
/// `pinfold check` with 1,000 rules. (Boxed: a `Rule` is a few hundred bytes, and 1,000 of
/// them inline made a 360 KiB array that every check mapped, zeroed and unmapped.)
#[derive(Debug)]
pub(crate) struct Cells {
    len: usize,
    blocks: Vec<std::sync::OnceLock<Box<[RuleCell]>>>,
}

type RuleCell = std::sync::OnceLock<Option<Box<Rule>>>;

const CELL_BLOCK: usize = 64;

impl Cells {
    pub(crate) fn new(len: usize) -> Cells {
        let mut blocks = Vec::new();
        blocks.resize_with(len.div_ceil(CELL_BLOCK), std::sync::OnceLock::new);
        Cells { len, blocks }
    }

    fn get(&self, i: usize) -> Option<&RuleCell> {
        if i >= self.len {
            return None;
        }
        self.blocks[i / CELL_BLOCK].get_or_init(|| (0..CELL_BLOCK).map(|_| RuleCell::new()).collect()).get(i % CELL_BLOCK)
    }
}

/// Rule indices by key.
#[derive(Debug)]
pub(crate) enum Index {
    Map(HashMap<String, Vec<usize>>),
    /// Sorted `key\tN,N,…\n` lines from a cache entry, searched without parsing.
    Lines(Vec<u8>),
}

impl Index {
    /// Append the rule indices listed under `key` to `out`.
    pub(crate) fn extend_into(&self, key: &str, out: &mut Vec<usize>) {
        match self {
            Index::Map(m) => {
                if let Some(v) = m.get(key) {
                    out.extend_from_slice(v);
                }
            }
            Index::Lines(section) => {
                if let Some(v) = lookup_line(section, key) {
                    out.extend(v);
                }
            }
        }
    }
}

/// Binary search over sorted `key\tN,N\n` lines.
fn lookup_line(b: &[u8], key: &str) -> Option<Vec<usize>> {
    let key = key.as_bytes();
    let (mut lo, mut hi) = (0usize, b.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        // The line containing `mid`.
        let ls = b[..mid].iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1);
        let le = b[ls..].iter().position(|&c| c == b'\n').map_or(b.len(), |p| ls + p);
        let line = &b[ls..le];
        let tab = line.iter().position(|&c| c == b'\t')?;
        match line[..tab].cmp(key) {
            std::cmp::Ordering::Equal => {
                let v = std::str::from_utf8(&line[tab + 1..]).ok()?;
                return v.split(',').map(|n| n.parse().ok()).collect();
            }
            std::cmp::Ordering::Less => lo = le + 1,
            std::cmp::Ordering::Greater => hi = ls,
        }
    }
    None
}

impl RuleStore {
    pub(crate) fn len(&self) -> usize {
        match self {
            RuleStore::Eager(v) => v.len(),
            RuleStore::Lazy { cells, .. } => cells.len,
        }
    }

    /// Rule `i`; `None` only if a cached rule cannot be decoded (a damaged cache).
    pub(crate) fn get(&self, i: usize, paths: &dyn Fn(&str) -> bool) -> Option<&Rule> {
        match self {
            RuleStore::Eager(v) => v.get(i),
            RuleStore::Lazy { file, records, cells } => cells
                .get(i)?
                .get_or_init(|| {
                    use std::os::unix::fs::FileExt;
                    let rec = std::str::from_utf8(records.get(i * 16..i * 16 + 16)?).ok()?;
                    let a = u64::from_str_radix(&rec[..8], 16).ok()?;
                    let b = u64::from_str_radix(&rec[8..], 16).ok()?;
                    let mut buf = vec![0u8; usize::try_from(b.checked_sub(a)?).ok()?];
                    file.read_exact_at(&mut buf, a).ok()?;
                    let spec: RuleSpec = serde_json::from_slice(&buf).ok()?;
                    let pattern = Pattern::parse(&spec.pattern, paths).ok()?;
                    Some(Box::new(Rule { spec, pattern }))
                })
                .as_deref(),
        }
    }
}

/// The verdict on one input.
#[derive(Debug, Clone, Serialize)]
pub struct Judgement {
    pub decision: Action,
    /// One sentence for a person: the deciding command and why.
    pub reason: String,
    pub commands: Vec<CommandVerdict>,
    /// The sandbox preset the input runs in when allowed: the one preset all its commands
    /// name, or `None` when they name different ones or none.
    pub sandbox: Option<String>,
    /// Why the input could not be parsed, when it could not.
    pub parse_error: Option<Unparseable>,
    /// The parsed commands (absent when the input did not parse).
    #[serde(skip)]
    pub tree: Option<CommandTree>,
}

/// The verdict on one simple command.
#[derive(Debug, Clone, Serialize)]
pub struct CommandVerdict {
    /// The command's text in the input.
    pub text: String,
    /// Byte range in the input.
    pub span: Range<usize>,
    /// argv as judged (after unwrapping transparent wrappers).
    pub argv: Vec<String>,
    pub decision: Action,
    pub reason: String,
    /// Every rule that matched.
    pub rules: Vec<RuleMatch>,
    /// The sandbox preset this command runs in (not set when denied).
    pub sandbox: Option<String>,
    pub message: Option<String>,
    pub fix: Option<String>,
}

/// A rule that matched a command.
#[derive(Debug, Clone, Serialize)]
pub struct RuleMatch {
    pub action: Action,
    pub pattern: String,
    pub source: Location,
    /// Matched only through a dynamic argument (a deny rule then gives ask).
    pub through_dynamic: bool,
}

impl Policy {
    /// Compile every rule's pattern.
    pub fn new(config: Config) -> Result<Policy, PolicyError> {
        let mut rules = Vec::with_capacity(config.rules.len());
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::default();
        let mut wildcard = Vec::new();
        for spec in &config.rules {
            let known = |n: &str| config.paths.contains_key(n);
            let pattern = Pattern::parse(&spec.pattern, &known).map_err(|error| PolicyError {
                location: Location {
                    col: spec.location.col + 1 + error.offset as u32,
                    ..spec.location.clone()
                },
                pattern: spec.pattern.clone(),
                error,
            })?;
            let idx = rules.len();
            match &pattern.literal_names {
                // Names with control characters cannot be index keys; they are rare enough to
                // be checked against every command.
                Some(names) if names.iter().any(|n| n.contains(['\t', '\n', '\0'])) => wildcard.push(idx),
                Some(names) => {
                    for key in index_keys(names, &pattern) {
                        by_name.entry(key).or_default().push(idx);
                    }
                }
                None => wildcard.push(idx),
            }
            rules.push(Rule { spec: spec.clone(), pattern });
        }
        Ok(Policy { config, store: RuleStore::Eager(rules), by_name: Index::Map(by_name), wildcard, undo: std::sync::OnceLock::new() })
    }

    /// How many rules the policy has.
    pub fn rule_count(&self) -> usize {
        self.store.len()
    }

    fn rule(&self, i: usize) -> Option<&Rule> {
        let paths = &self.config.paths;
        self.store.get(i, &|n| paths.contains_key(n))
    }

    /// The configuration this policy was compiled from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether `pinfold undo` can take back what a sandboxed command changes in this project:
    /// `[undo] enabled` and the project in a git working tree. (Rules with `when` ask it; a
    /// command that runs without a sandbox never has undo.)
    pub fn undo_here(&self) -> bool {
        *self.undo.get_or_init(|| {
            self.config.undo_enabled && self.config.project_root.ancestors().any(|d| std::fs::symlink_metadata(d.join(".git")).is_ok())
        })
    }

    /// Judge as [`Policy::judge`], as if undo were (or were not) available, whatever the
    /// project is: for tests and corpora.
    pub fn judge_assuming_undo(&self, text: &str, cwd: &Path, undo: bool) -> Judgement {
        match pinfold_shell::parse(text) {
            Ok(tree) => self.judge_tree_in(tree, cwd, &[], Ctx { undo: Some(undo), sandbox: None, backend: None }),
            Err(_) => self.judge(text, cwd),
        }
    }

    /// Judge shell text run in `cwd`.
    pub fn judge(&self, text: &str, cwd: &Path) -> Judgement {
        self.judge_with_writable(text, cwd, &[])
    }

    /// Judge as [`Policy::judge`], with `extra` paths counted as writable by every preset
    /// when checking redirects (`pinfold exec --write PATH` grants them).
    pub fn judge_with_writable(&self, text: &str, cwd: &Path, extra: &[std::path::PathBuf]) -> Judgement {
        self.judge_in_sandbox(text, cwd, extra, None)
    }

    /// Judge as [`Policy::judge_with_writable`] for a command that runs in `sandbox` (a preset
    /// asked for on the command line, `a+b` for several), whatever the rules name.
    pub fn judge_in_sandbox(&self, text: &str, cwd: &Path, extra: &[std::path::PathBuf], sandbox: Option<&str>) -> Judgement {
        self.judge_in_sandbox_on(text, cwd, extra, sandbox, None)
    }

    /// Judge as [`Policy::judge_in_sandbox`] for a command that runs on `backend` (by name,
    /// `pinfold exec --backend`), whatever its preset says: undo exists only on a backend that
    /// records changes (`process`).
    pub fn judge_in_sandbox_on(
        &self,
        text: &str,
        cwd: &Path,
        extra: &[std::path::PathBuf],
        sandbox: Option<&str>,
        backend: Option<&str>,
    ) -> Judgement {
        match pinfold_shell::parse(text) {
            Ok(tree) => {
                let ctx = Ctx { undo: None, sandbox, backend };
                self.judge_tree_in(tree, cwd, extra, ctx)
            }
            Err(e) => {
                let decision = self.config.defaults.on_parse_error.max(Action::Ask);
                Judgement {
                    decision,
                    reason: format!("the command cannot be parsed ({e}), so it cannot be judged"),
                    commands: Vec::new(),
                    sandbox: None,
                    parse_error: Some(e),
                    tree: None,
                }
            }
        }
    }

    /// Judge an already parsed command tree.
    pub fn judge_tree(&self, tree: CommandTree, cwd: &Path) -> Judgement {
        self.judge_tree_with(tree, cwd, &[])
    }

    fn judge_tree_with(&self, tree: CommandTree, cwd: &Path, extra: &[std::path::PathBuf]) -> Judgement {
        self.judge_tree_in(tree, cwd, extra, Ctx::default())
    }

    fn judge_tree_in(&self, tree: CommandTree, cwd: &Path, extra: &[std::path::PathBuf], ctx: Ctx<'_>) -> Judgement {
        let env = Env { cwd, home: self.config.home.as_deref(), paths: &self.config.paths };
        let recursive = recursive_functions(&tree);
        let mut uses: HashMap<(usize, usize), u32> = HashMap::default();
        for c in &tree.commands {
            *uses.entry((c.span.start, c.span.end)).or_default() += 1;
        }
        let mut commands = Vec::with_capacity(tree.commands.len());
        for c in &tree.commands {
            let shared = uses.get(&(c.span.start, c.span.end)).is_some_and(|&n| n > 1);
            let mut v = self.judge_command(c, verdict_text(&tree.source, &c.span, shared), &env, extra, ctx);
            if c.kind == CommandKind::FunctionCall && v.decision == Action::Allow {
                let name = c.words.first().map_or("", |w| w.text.as_str());
                if recursive.contains(name) {
                    v.decision = Action::Ask;
                    v.reason = format!(
                        "calls `{name}`, a function that calls itself; unbounded recursion (a fork bomb) cannot be ruled out"
                    );
                }
            }
            commands.push(v);
        }
        let decision = commands.iter().map(|c| c.decision).max().unwrap_or(Action::Allow);
        let reason = match commands.iter().find(|c| c.decision == decision) {
            Some(c) if commands.len() > 1 => format!("`{}`: {}", c.text, c.reason),
            Some(c) => c.reason.clone(),
            None => "nothing to run".to_string(),
        };
        let mut sandboxes = commands.iter().filter_map(|c| c.sandbox.as_deref());
        let sandbox = match sandboxes.next() {
            Some(first) if sandboxes.all(|s| s == first) => Some(first.to_string()),
            _ => None,
        };
        Judgement { decision, reason, commands, sandbox, parse_error: None, tree: Some(tree) }
    }

    /// Rules that may match a command named `name`; `None` stands for a cached rule that
    /// could not be decoded.
    fn candidates(&self, c: &SimpleCommand) -> impl Iterator<Item = Option<&Rule>> {
        let name = c.words.first().map_or("", |w| w.text.as_str());
        let base = crate::pattern::basename(name);
        let mut idx: Vec<usize> = Vec::new();
        // Any argument may be the first positional in some reading (an unknown option may
        // have taken the words before it), so every static argument's subcommand bucket is
        // looked at; a dynamic argument could be anything, so then all of them are.
        let any_dynamic = c.words[1..].iter().any(|w| w.dynamic && w.home_suffix.is_none());
        let mut key = String::new();
        let names = [base, name];
        for n in if base == name { &names[..1] } else { &names[..] } {
            self.by_name.extend_into(n, &mut idx);
            let subs = if any_dynamic { &["*"][..] } else { &[][..] };
            let words = if any_dynamic { &[][..] } else { &c.words[1..] };
            for sub in subs.iter().copied().chain(words.iter().map(|w| w.text.as_str())) {
                key.clear();
                key.push_str(n);
                key.push('\0');
                key.push_str(sub);
                self.by_name.extend_into(&key, &mut idx);
            }
        }
        idx.extend(&self.wildcard);
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter().map(move |i| self.rule(i))
    }

    fn judge_command(&self, c: &SimpleCommand, text: String, env: &Env<'_>, extra: &[std::path::PathBuf], ctx: Ctx<'_>) -> CommandVerdict {
        let argv = c.argv();
        let mut v = CommandVerdict {
            text,
            span: c.span.clone(),
            argv,
            decision: Action::Allow,
            reason: String::new(),
            rules: Vec::new(),
            sandbox: None,
            message: None,
            fix: None,
        };
        let defaults = &self.config.defaults;
        let mut sandbox = defaults.sandbox.clone();
        // The sandbox the command runs in for `when`: the one asked for, or the default.
        let runs_in = ctx.sandbox.map(str::to_string).or_else(|| defaults.sandbox.clone());
        let network = match &runs_in {
            Some(names) => names.split('+').any(|n| self.config.sandboxes.get(n).is_some_and(|p| p.network_allow)),
            None => true,
        };
        // Undo keeps changes only on the process backend, whose filter sees them happen.
        let records = match ctx.backend {
            Some(b) => b == crate::config::BACKENDS[0],
            None => runs_in.as_deref().is_none_or(|names| {
                names.split('+').all(|n| self.config.sandboxes.get(n).is_none_or(|p| p.backend == crate::config::BACKENDS[0]))
            }),
        };
        let mut env_ok: Vec<&str> = Vec::new();
        // Options the matching allow rules name (required or permitted).
        let mut named: Vec<&str> = Vec::new();

        if c.kind == CommandKind::Evaluated {
            // Code bash runs from inside a word: no argv for a rule to match. Like any code
            // pinfold cannot see (`python3 -c "$x"`), it may run only where a sandbox holds it.
            let why = c.unresolved.as_deref().unwrap_or("bash may run code from this word");
            let quoted = format!("{why}; pinfold cannot see that code");
            (v.decision, v.reason) = match (defaults.action, &sandbox) {
                (Action::Deny, _) => (Action::Deny, format!("{quoted}, and the default is deny")),
                (_, Some(s)) => (Action::Allow, format!("{quoted}, so it runs only inside the `{s}` sandbox")),
                (_, None) => (Action::Ask, format!("{quoted}, and no sandbox would hold it")),
            };
        } else if let Some(why) = &c.unresolved {
            v.decision = Action::Ask;
            v.reason = format!("{why}; a command pinfold cannot name is never allowed");
        } else {
            match c.kind {
                CommandKind::Evaluated => unreachable!("judged above"),
                CommandKind::Assignment => {
                    v.reason = if c.assignments.is_empty() { "redirection only".into() } else { "assignment".into() };
                }
                CommandKind::Test => v.reason = "test expression".into(),
                CommandKind::Arithmetic => v.reason = "arithmetic".into(),
                CommandKind::FunctionCall => {
                    v.reason = "calls a function defined in this input; its body is judged command by command".into()
                }
                CommandKind::Simple | CommandKind::Declaration => {
                    let name = c.words.first().map(|w| w.text.as_str()).unwrap_or("");
                    let mut deny_hit: Option<&Rule> = None;
                    let mut ask_hit: Option<&Rule> = None;
                    let mut dyn_deny: Option<&Rule> = None;
                    let mut allow_hit: Option<&Rule> = None;
                    let mut damaged = false;
                    let subject = matcher::Subject::new(c);
                    for rule in self.candidates(c) {
                        let Some(rule) = rule else {
                            damaged = true;
                            continue;
                        };
                        // Undo exists only for a command in a sandbox.
                        if let Some(w) = rule.spec.when
                            && !w.holds(ctx.undo.unwrap_or_else(|| runs_in.is_some() && records && self.undo_here()), network)
                        {
                            continue;
                        }
                        let mode = if rule.spec.action == Action::Allow { Mode::Every } else { Mode::Any };
                        let o = matcher::matches_subject(&rule.pattern, &subject, mode, env);
                        if o == Outcome::No {
                            continue;
                        }
                        v.rules.push(RuleMatch {
                            action: rule.spec.action,
                            pattern: rule.spec.pattern.clone(),
                            source: rule.spec.location.clone(),
                            through_dynamic: o == Outcome::Dynamic,
                        });
                        match (rule.spec.action, o) {
                            (Action::Deny, Outcome::Yes) => { deny_hit.get_or_insert(rule); }
                            (Action::Deny, _) => { dyn_deny.get_or_insert(rule); }
                            (Action::Ask, _) => { ask_hit.get_or_insert(rule); }
                            (Action::Allow, _) => {
                                if allow_hit.is_none() {
                                    allow_hit = Some(rule);
                                }
                                env_ok.extend(rule.spec.env.iter().map(String::as_str));
                                named.extend(
                                    rule.pattern.required.iter().map(|r| &r.names).chain(&rule.pattern.permitted).flatten().map(String::as_str),
                                );
                            }
                        }
                    }
                    if let Some(r) = allow_hit {
                        if let Some(s) = &r.spec.sandbox {
                            sandbox = Some(s.clone());
                        }
                    }
                    let decided = if let Some(r) = deny_hit {
                        v.decision = Action::Deny;
                        v.reason = format!("denied by rule `{}` ({})", r.spec.pattern, r.spec.location);
                        Some(r)
                    } else if damaged {
                        v.decision = Action::Ask;
                        v.reason = "a rule in the policy cache cannot be read; delete the cache (or set PINFOLD_NO_CACHE=1)".into();
                        None
                    } else if let Some(r) = dyn_deny {
                        v.decision = Action::Ask;
                        v.reason = format!(
                            "rule `{}` ({}) denies this if an argument known only at run time holds a matching value",
                            r.spec.pattern, r.spec.location
                        );
                        Some(r)
                    } else if let Some(r) = ask_hit {
                        v.decision = Action::Ask;
                        // What the person is asked to accept comes first: the rule's message.
                        v.reason = match &r.spec.message {
                            Some(m) => format!("{m} (rule `{}`, {})", r.spec.pattern, r.spec.location),
                            None => format!("rule `{}` ({}) asks for confirmation", r.spec.pattern, r.spec.location),
                        };
                        Some(r)
                    } else if let Some(r) = allow_hit {
                        v.decision = Action::Allow;
                        v.reason = format!("allowed by rule `{}` ({})", r.spec.pattern, r.spec.location);
                        Some(r)
                    } else {
                        v.decision = defaults.action;
                        v.reason = match (defaults.action, runs_in.as_ref().or(sandbox.as_ref())) {
                            (Action::Ask, Some(s)) => format!(
                                "no rule matches `{name}`; the default is ask: allowing it lets `{name}` run unjudged in the `{s}` sandbox"
                            ),
                            (Action::Ask, None) => format!(
                                "no rule matches `{name}`; the default is ask: allowing it lets `{name}` run unjudged, with no sandbox"
                            ),
                            (a, _) => format!("no rule matches `{name}`; the default is {a}"),
                        };
                        None
                    };
                    if let Some(r) = decided {
                        v.message = r.spec.message.clone();
                        v.fix = r.spec.fix.clone();
                        // An ask rule that names a sandbox: what a person approves runs there.
                        if r.spec.action == Action::Ask
                            && let Some(s) = &r.spec.sandbox
                        {
                            sandbox = Some(s.clone());
                        }
                    }
                }
            }
        }

        let preset = sandbox.as_deref().and_then(|s| self.config.sandboxes.get(s));
        if v.decision == Action::Allow {
            self.raise_for_env(c, &env_ok, env, &mut v);
        }
        if v.decision == Action::Allow {
            self.raise_for_whole_project(c, env, &mut v);
        }
        // A redirect into the repository's own directory (`: > .git/index`) destroys what the
        // sandbox lets git write and undo does not keep: asked, sandbox or not.
        if v.decision == Action::Allow {
            let git = self.config.project_root.join(".git");
            for r in c.redirects.iter().filter(|r| r.writes_file()) {
                if let Some(p) = r.target.as_ref().and_then(|t| matcher::resolve(Some(t), env))
                    && p.starts_with(&git)
                {
                    v.decision = Action::Ask;
                    v.reason = format!("writes `{}` inside .git (the index, reflogs, stashes): history pinfold undo does not keep", p.display());
                    break;
                }
            }
        }
        let found = if v.decision == Action::Allow && c.unresolved.is_none() && matches!(c.kind, CommandKind::Simple) {
            writes::scan(c)
        } else {
            writes::Found::default()
        };
        if v.decision == Action::Allow {
            raise_for_runs(&found, &named, &mut v);
        }
        if v.decision == Action::Allow {
            match preset {
                // A sandbox that confines writes answers for every write the command makes: a
                // target known only at run time, or one outside the preset's roots, fails
                // there ("Read-only file system"), so it raises nothing here.
                Some(p) if confines_writes(p) => {}
                Some(p) => raise_for_writes(c, &found, p, env, extra, &mut v),
                // No sandbox will hold the command: it may write the project and the temp
                // directories, as a sandboxed command could, and nothing else unasked.
                None if c.redirects.iter().any(|r| r.writes_file()) || !found.writes.is_empty() || found.unknown_write.is_some() => {
                    raise_for_writes(c, &found, &self.unsandboxed_bounds(), env, extra, &mut v);
                }
                None => {}
            }
        }
        if v.decision != Action::Deny {
            v.sandbox = sandbox;
        }
        v
    }

    /// What a command with no sandbox preset may write without asking: the project and the
    /// temp directories. Named with the empty string, which [`unwritable`] words apart.
    fn unsandboxed_bounds(&self) -> SandboxPreset {
        SandboxPreset {
            name: String::new(),
            write_allow: vec![self.config.project_root.to_string_lossy().into_owned(), "/tmp".into(), "/var/tmp".into()],
            write_deny: Vec::new(),
            read_deny: Vec::new(),
            network_allow: false,
            network_hosts: Vec::new(),
            upstream_ca: Vec::new(),
            endpoints: Vec::new(),
            env_keep: Vec::new(),
            backend: "process".into(),
            container: Default::default(),
            location: Location { file: String::new(), line: 0, col: 0 },
        }
    }

    fn raise_for_env(&self, c: &SimpleCommand, env_ok: &[&str], env: &Env<'_>, v: &mut CommandVerdict) {
        let mut names: Vec<(&str, &str)> = c.assignments.iter().map(|a| (a.name.as_str(), a.value.text.as_str())).collect();
        if c.kind == CommandKind::Declaration {
            for w in c.words.iter().skip(1) {
                if let Some((n, value)) = w.text.split_once('=') {
                    names.push((n.trim_end_matches('+'), value));
                }
            }
        }
        for (n, value) in names {
            if env_ok.contains(&n) || self.search_path_within(n, value, env) {
                continue;
            }
            if let Some(why) = dangerous_env(n) {
                v.decision = Action::Ask;
                v.reason = format!("sets `{n}`, which {why}; a rule must name it in `env` to allow this");
                return;
            }
        }
    }

    /// Ask before `rm -r` of the project itself or a directory above it, however it is
    /// named (`cd .. && rm -rf proj`, an absolute path): it takes what undo does not keep,
    /// files git ignores among them, as `rm -rf .` does.
    fn raise_for_whole_project(&self, c: &SimpleCommand, env: &Env<'_>, v: &mut CommandVerdict) {
        let Some(name) = c.words.first() else { return };
        if name.dynamic || crate::pattern::basename(&name.text) != "rm" {
            return;
        }
        let mut recursive = false;
        let mut targets = Vec::new();
        let mut options = true;
        for w in &c.words[1..] {
            if options && w.text == "--" {
                options = false;
            } else if options && !w.dynamic && w.text.starts_with("--") {
                recursive |= w.text == "--recursive";
            } else if options && !w.dynamic && w.text.starts_with('-') && w.text.len() > 1 {
                recursive |= w.text[1..].contains(['r', 'R']);
            } else {
                targets.push(w);
            }
        }
        if !recursive {
            return;
        }
        let root = &self.config.project_root;
        // The judge does not follow `cd` from one command to the next: the project's own
        // name, alone, counts too (`cd .. && rm -rf proj`).
        let own_name = root.file_name().and_then(|n| n.to_str()).filter(|n| !n.is_empty());
        for t in targets {
            let named = !t.dynamic
                && own_name.is_some_and(|n| Path::new(t.text.trim_end_matches('/')).file_name().is_some_and(|f| f == n));
            // A glob reaches what its directory holds (`../*`: the project among them).
            let globbed = t.glob && !t.dynamic && {
                let cut = t.text.find(['*', '?', '[']).unwrap_or(t.text.len());
                let dir = t.text[..cut].rfind('/').map_or(".", |i| &t.text[..i.max(1)]);
                let w = pinfold_shell::Word { text: dir.to_string(), glob: false, ..t.clone() };
                matcher::resolve(Some(&w), env).is_some_and(|p| p != *root && root.starts_with(&p))
            };
            if named || globbed || matcher::resolve(Some(t), env).is_some_and(|p| root.starts_with(&p)) {
                v.decision = Action::Ask;
                v.reason = format!(
                    "removes `{}`, the whole project or a directory above it, files git ignores included (.env, local data), which pinfold undo does not keep",
                    t.text
                );
                return;
            }
        }
    }

    /// Whether `name=value` only points a search path at the project's own files (or a
    /// temp directory at a temp directory): `PYTHONPATH=src:$PYTHONPATH` makes Python import
    /// the project's modules, code the command runs anyway. Each `:`-separated part must be the
    /// variable's own earlier value (`$NAME`, `${NAME}`) or a plain path inside the project
    /// (for `TMPDIR`: inside the project or `/tmp`, `/var/tmp`).
    fn search_path_within(&self, name: &str, value: &str, env: &Env<'_>) -> bool {
        const PATH_LISTS: &[&str] = &["PYTHONPATH", "NODE_PATH", "PERL5LIB", "PERLLIB", "RUBYLIB", "TMPDIR"];
        if !PATH_LISTS.contains(&name) || value.is_empty() {
            return false;
        }
        let own = [format!("${name}"), format!("${{{name}}}")];
        let root = &self.config.project_root;
        value.split(':').all(|part| {
            if own.iter().any(|o| o == part) {
                return true;
            }
            if part.is_empty() || part.contains(['$', '`', '*', '?', '[', '~', '\\', '\'', '"']) {
                return false;
            }
            let path = matcher::normalize(&env.cwd.join(part));
            path.starts_with(root) || (name == "TMPDIR" && ["/tmp", "/var/tmp"].iter().any(|t| path.starts_with(t)))
        })
    }

    /// Run the `tests` of every rule and every `[[tests]]` case. Returns the failures.
    pub fn run_tests(&self) -> Vec<TestFailure> {
        let root = self.config.project_root.clone();
        let mut failures = Vec::new();
        let mut check = |command: &str, expect: Action, location: &Location, rule: Option<&RuleSpec>, cwd: &Path| {
            // A rule's own tests run where the rule applies: a rule with `when` under its
            // condition, any other where there is no undo (the same answer in every project);
            // `[[tests]]` cases in the project as it is.
            let j = match rule.map(|r| r.when) {
                Some(Some(w)) => self.judge_assuming_undo(command, cwd, w == crate::config::When::Undo),
                Some(None) => self.judge_assuming_undo(command, cwd, false),
                None => self.judge(command, cwd),
            };
            let rule = rule.map(|r| r.pattern.as_str());
            if j.decision != expect {
                failures.push(TestFailure {
                    location: location.clone(),
                    rule: rule.map(str::to_string),
                    command: command.to_string(),
                    expected: expect,
                    got: j.decision,
                    reason: j.reason,
                });
            }
        };
        for r in (0..self.rule_count()).filter_map(|i| self.rule(i)) {
            for (expect, cmd, loc) in &r.spec.tests {
                check(cmd, *expect, loc, Some(&r.spec), &root);
            }
        }
        for t in &self.config.tests {
            let cwd = t.cwd.as_ref().map_or_else(|| root.clone(), |c| root.join(c));
            check(&t.command, t.expect, &t.location, None, &cwd);
        }
        failures
    }

    /// How many tests [`Policy::run_tests`] runs.
    pub fn test_count(&self) -> usize {
        (0..self.rule_count()).filter_map(|i| self.rule(i)).map(|r| r.spec.tests.len()).sum::<usize>()
            + self.config.tests.len()
    }
}

/// What a judgement assumes beyond the command and its directory.
#[derive(Debug, Clone, Copy, Default)]
struct Ctx<'a> {
    /// Whether undo is available; `None` to find out (only if a rule asks).
    undo: Option<bool>,
    /// The preset the command runs in, when the caller chose it (`pinfold exec --sandbox`).
    sandbox: Option<&'a str>,
    /// The backend it runs on, when the caller chose it (`pinfold exec --backend`).
    backend: Option<&'a str>,
}

/// A policy test whose command got another verdict than expected.
#[derive(Debug, Clone, Serialize)]
pub struct TestFailure {
    pub location: Location,
    /// The pattern of the rule the test belongs to (`None` for `[[tests]]`).
    pub rule: Option<String>,
    pub command: String,
    pub expected: Action,
    pub got: Action,
    pub reason: String,
}

/// The most text a verdict holds of a span other commands share (see [`verdict_text`]).
const SHARED_TEXT: usize = 256;

/// A command's text for its verdict: its span's text, cut to [`SHARED_TEXT`] bytes when other
/// commands share the span. Those inside a wrapper (`find -exec`, `xargs`) or inside a string
/// that is not a single-quoted literal have the span of what holds them; thousands of them,
/// each with a copy, were quadratic in memory.
fn verdict_text(source: &str, span: &Range<usize>, shared: bool) -> String {
    let text = source.get(span.clone()).unwrap_or("");
    if !shared || text.len() <= SHARED_TEXT {
        return text.to_string();
    }
    let mut end = SHARED_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Paths any command may always write through a redirect.
const ALWAYS_WRITABLE: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd"];

/// Ask before a program or script runs that pinfold cannot judge, unless an allowing rule
/// names the option that runs it.
fn raise_for_runs(found: &writes::Found, named: &[&str], v: &mut CommandVerdict) {
    if let Some(run) = found.runs.iter().find(|r| !r.option.is_some_and(|o| named.contains(&o))) {
        v.decision = Action::Ask;
        v.reason = run.why.clone();
    }
}

/// Ask when the command writes where its sandbox preset could not: through an output
/// redirect, or a file its arguments name ([`writes::scan`]). Both are judged alike.
fn raise_for_writes(
    c: &SimpleCommand,
    found: &writes::Found,
    preset: &SandboxPreset,
    env: &Env<'_>,
    extra: &[std::path::PathBuf],
    v: &mut CommandVerdict,
) {
    for r in c.redirects.iter().filter(|r| r.writes_file()) {
        let Some(target) = &r.target else { continue };
        if let Some(why) = unwritable(target, "", preset, env, extra) {
            v.decision = Action::Ask;
            v.reason = why;
            return;
        }
    }
    if found.writes.is_empty() && found.unknown_write.is_none() {
        return;
    }
    // Relative paths the tool writes land where its `-C` options move it.
    let mut cwd = env.cwd.to_path_buf();
    for d in &found.chdir {
        let here = Env { cwd: &cwd, ..*env };
        match matcher::resolve(Some(d), &here) {
            Some(p) => cwd = p,
            None => {
                if found.writes.iter().any(|t| !(t.word.text.starts_with('/') || t.word.tilde || t.word.home_suffix.is_some())) {
                    v.decision = Action::Ask;
                    v.reason = format!("works in `{}`, a directory known only at run time, and writes files there", d.text);
                    return;
                }
            }
        }
    }
    let here = Env { cwd: &cwd, ..*env };
    for t in &found.writes {
        let how = format!(" ({})", t.how);
        if let Some(why) = unwritable(&t.word, &how, preset, &here, extra) {
            v.decision = Action::Ask;
            v.reason = why;
            return;
        }
    }
    if let Some(why) = &found.unknown_write {
        v.decision = Action::Ask;
        v.reason = why.clone();
    }
}

/// Why `target` is a place `preset` cannot write, or `None` when it can; `how` says how the
/// command names it.
fn unwritable(target: &Word, how: &str, preset: &SandboxPreset, env: &Env<'_>, extra: &[std::path::PathBuf]) -> Option<String> {
    let Some(path) = matcher::resolve(Some(target), env) else {
        return Some(format!("writes to `{}`{how}, a path known only at run time", target.text));
    };
    if ALWAYS_WRITABLE.iter().any(|a| matcher::in_or_under(&path, a)) {
        return None;
    }
    if !writable(&path, preset) && !extra.iter().any(|e| path.starts_with(e)) {
        if preset.name.is_empty() {
            return Some(format!(
                "writes to `{}`{how}, outside the project and the temp directories, and no sandbox preset holds this command",
                path.display()
            ));
        }
        return Some(format!("writes to `{}`{how}, which the `{}` sandbox cannot write", path.display(), preset.name));
    }
    None
}

/// Whether the preset holds writes to its roots: it does unless it lets the command write the
/// whole file system.
pub fn confines_writes(preset: &SandboxPreset) -> bool {
    !preset.write_allow.iter().any(|a| Path::new(a) == Path::new("/"))
}

/// Whether the preset lets a command write `path`.
pub fn writable(path: &Path, preset: &SandboxPreset) -> bool {
    preset.write_allow.iter().any(|a| matcher::in_or_under(path, a))
        && !preset.write_deny.iter().any(|d| matcher::in_or_under(path, d))
}

/// Functions defined in the input that can call themselves, directly or through others: the
/// functions in a cycle of the call graph (a strongly connected component of more than one,
/// or one that calls itself), found in linear time (Tarjan's algorithm, iteratively: an input
/// of tens of thousands of functions must not cost their square, nor a stack frame each).
fn recursive_functions(tree: &CommandTree) -> std::collections::HashSet<String> {
    use pinfold_shell::Context;
    use std::collections::{HashMap, HashSet};
    let mut out = HashSet::new();
    if tree.functions.is_empty() {
        return out;
    }
    // Nodes: function names; edges: innermost enclosing function -> called function.
    let mut ids: HashMap<&str, usize> = HashMap::new();
    let mut names: Vec<&str> = Vec::new();
    for (f, _) in &tree.functions {
        ids.entry(f.as_str()).or_insert_with(|| {
            names.push(f.as_str());
            names.len() - 1
        });
    }
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); names.len()];
    let mut self_loop = vec![false; names.len()];
    for c in &tree.commands {
        // bash looks a function up when it is called: a body may call one defined after it,
        // which the walker lists as a plain command.
        if !matches!(c.kind, CommandKind::FunctionCall | CommandKind::Simple) {
            continue;
        }
        let Some(callee) = c.words.first().filter(|w| !w.dynamic).map(|w| w.text.as_str()) else { continue };
        let caller = c.context.iter().rev().find_map(|x| match x {
            Context::Function(f) => Some(f.as_str()),
            _ => None,
        });
        if let (Some(a), Some(&b)) = (caller.and_then(|f| ids.get(f)), ids.get(callee)) {
            edges[*a].push(b);
            if *a == b {
                self_loop[b] = true;
            }
        }
    }
    let n = names.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut next = 0usize;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, position in its edge list): the recursion of Tarjan's algorithm, by hand.
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if *i == 0 {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = edges[v].get(*i) {
                *i += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(x) = stack.pop() {
                    on_stack[x] = false;
                    component.push(x);
                    if x == v {
                        break;
                    }
                }
                if component.len() > 1 || self_loop[v] {
                    out.extend(component.into_iter().map(|x| names[x].to_string()));
                }
            }
        }
    }
    out
}

/// Index keys for a rule: `name` for rules that may match any subcommand, `name\0sub` for
/// each literal first positional (`git push …` under `git\0push`), plus `name\0*` listing
/// every subcommand-indexed rule of `name` (used when an argument is dynamic).
fn index_keys(names: &[String], pattern: &Pattern) -> Vec<String> {
    use crate::pattern::Pos;
    let subs: Option<Vec<&str>> = match pattern.positional.first() {
        // Only plain words: path-like tokens (`/`, `~`, `./x`) also match by resolution.
        Some(Pos::One(alts))
            if alts.0.iter().all(|g| {
                !g.wild
                    && !matches!(g.text.chars().next(), Some('/' | '~' | '.') | None)
                    && !g.text.contains(['\t', '\n', '\0'])
            }) =>
        {
            Some(alts.0.iter().map(|g| g.text.as_str()).collect())
        }
        _ => None,
    };
    let mut keys = Vec::new();
    for n in names {
        match &subs {
            Some(subs) => {
                keys.extend(subs.iter().map(|s| format!("{n}\0{s}")));
                keys.push(format!("{n}\0*"));
            }
            None => keys.push(n.clone()),
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::lookup_line;

    #[test]
    fn sorted_line_index() {
        let section = "a\t1\ngit\t2,3\ngit\u{0}push\t4\nzz\t5\n".as_bytes();
        assert_eq!(lookup_line(section, "git"), Some(vec![2, 3]));
        assert_eq!(lookup_line(section, "git\u{0}push"), Some(vec![4]));
        assert_eq!(lookup_line(section, "a"), Some(vec![1]));
        assert_eq!(lookup_line(section, "zz"), Some(vec![5]));
        assert_eq!(lookup_line(section, "b"), None);
        assert_eq!(lookup_line(section, ""), None);
        assert_eq!(lookup_line(b"", "a"), None);
    }

    #[test]
    fn a_bad_pattern_keeps_its_hint_out_of_the_message() {
        use crate::config::{Format, LoadOptions, load_str};
        let opts = LoadOptions { explicit: None, cwd: "/p".into(), home: None, xdg_config_home: None };
        let config = load_str("pinfold.toml", "[[rules]]\ndeny = \"rm -rf *\"\n", Format::Toml, &opts).unwrap();
        let e = super::Policy::new(config).unwrap_err();
        assert_eq!(
            e.to_string(),
            "pinfold.toml:2:12: invalid pattern `rm -rf *`: `rm` reads `-rf` as the cluster `-r -f`, \
             so this flag token never matches (at character 4 of the pattern)"
        );
        assert_eq!(e.hint(), Some("write the flags as separate tokens: `-r -f`"));
        let source = std::error::Error::source(&e).expect("the pattern error is the source");
        assert!(source.downcast_ref::<crate::pattern::PatternError>().is_some_and(|p| p.offset == 3), "{source:?}");
        let load = crate::LoadError::Policy(e);
        assert_eq!(load.hint(), Some("write the flags as separate tokens: `-r -f`"));
    }

    #[test]
    fn an_ask_rule_names_the_sandbox_an_approved_command_runs_in() {
        use crate::config::{Format, LoadOptions, load_str};
        let text = "[defaults]\naction = 'allow'\nsandbox = 'wide'\n\
                    [sandbox.wide]\nfs.write.allow = ['.']\n[sandbox.narrow]\nfs.write.allow = ['out']\n\
                    [[rules]]\nask = 'deploy *'\nsandbox = 'narrow'\n\
                    [[rules]]\nask = 'publish *'\n\
                    [[rules]]\nallow = 'build *'\nsandbox = 'narrow'\n";
        let opts = LoadOptions { explicit: None, cwd: "/proj".into(), home: None, xdg_config_home: None };
        let policy = super::Policy::new(load_str("p.toml", text, Format::Toml, &opts).unwrap()).unwrap();
        let cwd = std::path::Path::new("/proj");
        let j = policy.judge("deploy prod", cwd);
        assert_eq!((j.decision, j.commands[0].sandbox.as_deref()), (crate::config::Action::Ask, Some("narrow")));
        // An ask rule without one: the default; an allow rule's own.
        assert_eq!(policy.judge("publish x", cwd).commands[0].sandbox.as_deref(), Some("wide"));
        assert_eq!(policy.judge("build x", cwd).commands[0].sandbox.as_deref(), Some("narrow"));
    }
}
