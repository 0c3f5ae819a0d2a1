//! Verdicts: a [`Policy`] judges command text and returns a [`Judgement`].
//!
//! For each simple command every matching rule counts, and the strictest wins: deny > ask >
//! allow; no match gives `defaults.action`. A compound command's verdict is the strictest of
//! its parts (powerful wrappers such as `sudo` count as parts). On top of rule matching:
//!
//! * a command whose name is only known at run time is at least **ask**;
//! * dangerous environment prefixes (`LD_PRELOAD=… ls`, `GIT_PAGER=… git log`) raise an
//!   allow to **ask** unless an allowing rule names the variable in `env`;
//! * an output redirect to a path the command's sandbox could not write raises allow to
//!   **ask**;
//! * input that cannot be parsed gets `defaults.on_parse_error` (ask or deny, never allow).

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use pinfold_shell::{CommandKind, CommandTree, SimpleCommand, Unparseable};
use serde::Serialize;

use crate::config::{Action, Config, Location, RuleSpec, SandboxPreset};
use crate::env::dangerous_env;
use crate::matcher::{self, Env, Mode, Outcome};
use crate::pattern::{Pattern, PatternError};

/// A rule's pattern that does not compile.
#[derive(Debug, thiserror::Error)]
#[error("{location}: invalid pattern `{pattern}`: {error}{}", error.hint.as_ref().map(|h| format!("\nhint: {h}")).unwrap_or_default())]
pub struct PolicyError {
    /// Where the pattern is (its column adjusted to the offending token when possible).
    pub location: Location,
    pub pattern: String,
    pub error: PatternError,
}

#[derive(Debug)]
struct Rule {
    spec: RuleSpec,
    pattern: Pattern,
}

/// A compiled policy, ready to judge.
#[derive(Debug)]
pub struct Policy {
    config: Config,
    rules: Vec<Rule>,
    /// Rule indices by literal command basename.
    by_name: HashMap<String, Vec<usize>>,
    /// Rules whose command token is a glob: checked for every command.
    wildcard: Vec<usize>,
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
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
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
                Some(names) => {
                    for n in names {
                        by_name.entry(n.clone()).or_default().push(idx);
                    }
                }
                None => wildcard.push(idx),
            }
            rules.push(Rule { spec: spec.clone(), pattern });
        }
        Ok(Policy { config, rules, by_name, wildcard })
    }

    /// The configuration this policy was compiled from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Judge shell text run in `cwd`.
    pub fn judge(&self, text: &str, cwd: &Path) -> Judgement {
        match pinfold_shell::parse(text) {
            Ok(tree) => self.judge_tree(tree, cwd),
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
        let home = self.config.home.clone();
        let env = Env { cwd, home: home.as_deref(), paths: &self.config.paths };
        let recursive = recursive_functions(&tree);
        let mut commands = Vec::with_capacity(tree.commands.len());
        for c in &tree.commands {
            let mut v = self.judge_command(c, &tree.source, &env);
            if c.kind == CommandKind::FunctionCall && v.decision == Action::Allow {
                let name = c.words.first().map_or("", |w| w.text.as_str());
                if recursive.iter().any(|r| r == name) {
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

    fn candidates(&self, name: &str) -> impl Iterator<Item = &Rule> {
        let base = crate::pattern::basename(name);
        let mut idx: Vec<usize> = self.by_name.get(base).cloned().unwrap_or_default();
        if base != name {
            if let Some(v) = self.by_name.get(name) {
                idx.extend(v);
            }
        }
        idx.extend(&self.wildcard);
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter().map(move |i| &self.rules[i])
    }

    fn judge_command(&self, c: &SimpleCommand, source: &str, env: &Env<'_>) -> CommandVerdict {
        let text = source.get(c.span.clone()).unwrap_or("").to_string();
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
        let mut env_ok: Vec<&str> = Vec::new();

        if let Some(why) = &c.unresolved {
            v.decision = Action::Ask;
            v.reason = format!("{why}; a command pinfold cannot name is never allowed");
        } else {
            match c.kind {
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
                    for rule in self.candidates(name) {
                        let mode = if rule.spec.action == Action::Allow { Mode::Every } else { Mode::Any };
                        let o = matcher::matches(&rule.pattern, c, mode, env);
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
                    } else if let Some(r) = dyn_deny {
                        v.decision = Action::Ask;
                        v.reason = format!(
                            "rule `{}` ({}) denies this if an argument known only at run time holds a matching value",
                            r.spec.pattern, r.spec.location
                        );
                        Some(r)
                    } else if let Some(r) = ask_hit {
                        v.decision = Action::Ask;
                        v.reason = format!("rule `{}` ({}) asks for confirmation", r.spec.pattern, r.spec.location);
                        Some(r)
                    } else if let Some(r) = allow_hit {
                        v.decision = Action::Allow;
                        v.reason = format!("allowed by rule `{}` ({})", r.spec.pattern, r.spec.location);
                        Some(r)
                    } else {
                        v.decision = defaults.action;
                        v.reason = format!("no rule matches `{name}`; the default is {}", defaults.action);
                        None
                    };
                    if let Some(r) = decided {
                        v.message = r.spec.message.clone();
                        v.fix = r.spec.fix.clone();
                    }
                }
            }
        }

        if v.decision == Action::Allow {
            self.raise_for_env(c, &env_ok, &mut v);
        }
        let preset = sandbox.as_deref().and_then(|s| self.config.sandboxes.get(s));
        if v.decision == Action::Allow {
            if let Some(p) = preset {
                raise_for_redirects(c, p, env, &mut v);
            }
        }
        if v.decision != Action::Deny {
            v.sandbox = sandbox;
        }
        v
    }

    fn raise_for_env(&self, c: &SimpleCommand, env_ok: &[&str], v: &mut CommandVerdict) {
        let mut names: Vec<&str> = c.assignments.iter().map(|a| a.name.as_str()).collect();
        if c.kind == CommandKind::Declaration {
            for w in c.words.iter().skip(1) {
                if let Some((n, _)) = w.text.split_once('=') {
                    names.push(n.trim_end_matches('+'));
                }
            }
        }
        for n in names {
            if env_ok.contains(&n) {
                continue;
            }
            if let Some(why) = dangerous_env(n) {
                v.decision = Action::Ask;
                v.reason = format!("sets `{n}`, which {why}; a rule must name it in `env` to allow this");
                return;
            }
        }
    }

    /// Run the `tests` of every rule and every `[[tests]]` case. Returns the failures.
    pub fn run_tests(&self) -> Vec<TestFailure> {
        let root = self.config.project_root.clone();
        let mut failures = Vec::new();
        let mut check = |command: &str, expect: Action, location: &Location, rule: Option<&str>, cwd: &Path| {
            let j = self.judge(command, cwd);
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
        for r in &self.rules {
            for (expect, cmd, loc) in &r.spec.tests {
                check(cmd, *expect, loc, Some(&r.spec.pattern), &root);
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
        self.rules.iter().map(|r| r.spec.tests.len()).sum::<usize>() + self.config.tests.len()
    }
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

/// Paths any command may always write through a redirect.
const ALWAYS_WRITABLE: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd"];

fn raise_for_redirects(c: &SimpleCommand, preset: &SandboxPreset, env: &Env<'_>, v: &mut CommandVerdict) {
    for r in c.redirects.iter().filter(|r| r.writes_file()) {
        let Some(target) = &r.target else { continue };
        let Some(path) = matcher::resolve(Some(target), env) else {
            v.decision = Action::Ask;
            v.reason = format!("writes to `{}`, a path known only at run time", target.text);
            return;
        };
        if ALWAYS_WRITABLE.iter().any(|a| matcher::in_or_under(&path, a)) {
            continue;
        }
        if !writable(&path, preset) {
            v.decision = Action::Ask;
            v.reason = format!(
                "writes to `{}`, which the `{}` sandbox cannot write",
                path.display(),
                preset.name
            );
            return;
        }
    }
}

/// Whether the preset lets a command write `path`.
pub fn writable(path: &Path, preset: &SandboxPreset) -> bool {
    preset.write_allow.iter().any(|a| matcher::in_or_under(path, a))
        && !preset.write_deny.iter().any(|d| matcher::in_or_under(path, d))
}

/// Functions defined in the input that can call themselves, directly or through others.
fn recursive_functions(tree: &CommandTree) -> Vec<String> {
    use pinfold_shell::Context;
    if tree.functions.is_empty() {
        return Vec::new();
    }
    // Edges: innermost enclosing function -> called function.
    let mut edges: Vec<(&str, &str)> = Vec::new();
    for c in &tree.commands {
        if c.kind != CommandKind::FunctionCall {
            continue;
        }
        let callee = c.words.first().map_or("", |w| w.text.as_str());
        let caller = c.context.iter().rev().find_map(|x| match x {
            Context::Function(f) => Some(f.as_str()),
            _ => None,
        });
        if let Some(caller) = caller {
            edges.push((caller, callee));
        }
    }
    let mut out = Vec::new();
    for (f, _) in &tree.functions {
        // Depth-first search from f's callees back to f.
        let mut stack: Vec<&str> = edges.iter().filter(|(a, _)| a == f).map(|(_, b)| *b).collect();
        let mut seen: Vec<&str> = Vec::new();
        while let Some(g) = stack.pop() {
            if g == f {
                out.push(f.clone());
                break;
            }
            if seen.contains(&g) {
                continue;
            }
            seen.push(g);
            stack.extend(edges.iter().filter(|(a, _)| *a == g).map(|(_, b)| *b));
        }
    }
    out
}
