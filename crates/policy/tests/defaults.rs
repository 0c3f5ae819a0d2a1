//! The embedded default policy trusts its sandbox and undo: ordinary development work runs
//! without asking, while what neither contains — pushes, publishing, the network, privilege,
//! history, broad destruction, and any destruction where there is no undo — still asks or is
//! denied, with a reason that says what a person is asked to accept.
//!
//! Two corpora measure it (`tests/agents/`): commands coding agents really ran, each with its
//! source, and dangerous ones. The shares are printed and held: at least 95 % of the ordinary
//! commands run without asking, in a git project with undo, and none of the dangerous ones is
//! allowed, with undo or without. docs/performance.md records the numbers.

use std::path::{Path, PathBuf};

use pinfold_policy::config::{load, load_str, Action, Format, LoadOptions};
use pinfold_policy::Policy;

fn opts(project: &Path) -> LoadOptions {
    LoadOptions {
        explicit: None,
        cwd: project.to_path_buf(),
        home: Some(PathBuf::from("/home/agent")),
        xdg_config_home: Some(project.join("no-config")),
    }
}

/// The embedded default policy, as a new user has it (no policy file anywhere).
fn default_policy(project: &Path) -> Policy {
    Policy::new(load(&opts(project)).expect("the embedded policy loads")).expect("compiles")
}

/// One corpus line: the command, its source, and whether it must be held only where there
/// is no undo (after a `# when: no-undo` line).
struct Case {
    command: String,
    source: String,
    no_undo_only: bool,
    /// The project root the command ran in, where its session shows it.
    project: Option<PathBuf>,
}

/// One corpus: `# source: …` lines name where the commands below them come from, `# when:
/// no-undo` starts the commands that undo takes back; every other line that is not empty and
/// not a comment is one command.
fn corpus(name: &str) -> Vec<Case> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut source = String::new();
    let mut no_undo_only = false;
    let mut project = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(s) = line.strip_prefix("# source: ") {
            source = s.to_string();
        } else if let Some(p) = line.strip_prefix("# project: ") {
            project = (p != "-").then(|| PathBuf::from(p));
        } else if line == "# when: no-undo" {
            no_undo_only = true;
        } else if !line.trim().is_empty() && !line.starts_with('#') {
            assert!(!source.is_empty(), "{}:{}: a command before any `# source:` line", path.display(), i + 1);
            out.push(Case { command: line.to_string(), source: source.clone(), no_undo_only, project: project.clone() });
        }
    }
    out
}

#[test]
fn ordinary_work_runs_without_asking() {
    let fresh = tempfile::tempdir().expect("project");
    let cases = corpus("ordinary.txt");
    assert!(cases.len() >= 250, "the ordinary corpus shrank to {}", cases.len());
    // One policy per project root: the embedded default, found from that directory (none of
    // these exists here, so nothing but the default is loaded).
    let mut policies: std::collections::HashMap<PathBuf, Policy> = std::collections::HashMap::new();
    let mut asked = Vec::new();
    for Case { command: cmd, source, project, .. } in &cases {
        let root = project.clone().unwrap_or_else(|| fresh.path().to_path_buf());
        let p = policies.entry(root.clone()).or_insert_with(|| default_policy(&root));
        let j = p.judge_assuming_undo(cmd, &root, true);
        if j.decision != Action::Allow {
            asked.push(format!("{:?} {cmd}\n    {}\n    from {source}", j.decision, j.reason));
        }
    }
    let share = 100.0 * (cases.len() - asked.len()) as f64 / cases.len() as f64;
    println!("ordinary corpus: {} commands, {} run without asking ({share:.1} %)", cases.len(), cases.len() - asked.len());
    for a in &asked {
        println!("  {a}");
    }
    assert!(share >= 95.0, "only {share:.1} % run without asking:\n{}", asked.join("\n"));
}

#[test]
fn no_dangerous_command_is_allowed() {
    let project = tempfile::tempdir().expect("project");
    let p = default_policy(project.path());
    let cases = corpus("dangerous.txt");
    assert!(cases.len() >= 80, "the dangerous corpus shrank to {}", cases.len());
    let mut allowed = Vec::new();
    let mut denied = 0;
    for Case { command: cmd, source, no_undo_only, .. } in &cases {
        let conditions: &[bool] = if *no_undo_only { &[false] } else { &[true, false] };
        for &undo in conditions {
            let j = p.judge_assuming_undo(cmd, project.path(), undo);
            if j.decision == Action::Allow {
                allowed.push(format!("{cmd} (undo {undo}): {}\n    from {source}", j.reason));
            }
            if undo && j.decision == Action::Deny {
                denied += 1;
            }
        }
    }
    println!("dangerous corpus: {} commands, {} allowed, {denied} denied outright", cases.len(), allowed.len());
    assert!(allowed.is_empty(), "dangerous commands allowed:\n{}", allowed.join("\n"));
}

/// Without undo (not a git repository, or `[undo] enabled = false`) every broad destruction
/// asks, with a reason saying nothing can take it back; with undo, it runs.
#[test]
fn destruction_asks_where_there_is_no_undo() {
    let project = tempfile::tempdir().expect("project");
    let p = default_policy(project.path());
    for cmd in ["rm -rf src", "rm -r build dist", "git clean -fd", "rm -rf node_modules"] {
        let with = p.judge_assuming_undo(cmd, project.path(), true);
        assert_eq!(with.decision, Action::Allow, "{cmd} with undo: {}", with.reason);
        let without = p.judge_assuming_undo(cmd, project.path(), false);
        assert_eq!(without.decision, Action::Ask, "{cmd} without undo: {}", without.reason);
        assert!(without.reason.contains("nothing can take it back"), "{cmd}: {}", without.reason);
    }
    // Named files are removed either way: the sandbox keeps it to the project.
    assert_eq!(p.judge_assuming_undo("rm -f build.log", project.path(), false).decision, Action::Allow);
}

/// The real answer to "is there undo here": a git project with undo on; not a plain
/// directory, and not with `[undo] enabled = false`.
#[test]
fn undo_is_found_from_the_project() {
    let plain = tempfile::tempdir().expect("plain");
    assert!(!default_policy(plain.path()).undo_here());
    assert_eq!(default_policy(plain.path()).judge("rm -rf src", plain.path()).decision, Action::Ask);
    let repo = tempfile::tempdir().expect("repo");
    std::fs::create_dir(repo.path().join(".git")).expect("mkdir .git");
    let p = default_policy(repo.path());
    assert!(p.undo_here());
    assert_eq!(p.judge("rm -rf src", repo.path()).decision, Action::Allow);
    let off = Policy::new(
        load_str("pinfold.toml", "extends = ['pinfold:default']\n[undo]\nenabled = false\n", Format::Toml, &opts(repo.path())).expect("loads"),
    )
    .expect("compiles");
    assert!(!off.undo_here());
    assert_eq!(off.judge("rm -rf src", repo.path()).decision, Action::Ask);
}

/// A write the sandbox answers for raises nothing: a target known only at run time, or one
/// outside what the sandbox may write. Without a sandbox the same writes ask.
#[test]
fn the_sandbox_answers_for_writes() {
    let project = tempfile::tempdir().expect("project");
    let p = default_policy(project.path());
    let bare = Policy::new(load_str("pinfold.toml", "extends = ['pinfold:recommended']\n[defaults]\naction = 'ask'\n", Format::Toml, &opts(project.path())).expect("loads")).expect("compiles");
    for cmd in [
        "for f in *.txt; do echo \"$f\" > \"$f.bak\"; done",
        "echo hi > \"$TMPDIR/scratch.txt\"",
        "echo x >> ~/.bashrc",
        "sort -o \"$OUT\" names.txt",
    ] {
        let j = p.judge_assuming_undo(cmd, project.path(), true);
        assert_eq!(j.decision, Action::Allow, "{cmd} in the sandbox: {}", j.reason);
        let b = bare.judge(cmd, project.path());
        assert_eq!(b.decision, Action::Ask, "{cmd} without a sandbox: {}", b.reason);
    }
}

/// Every ask says what a person is asked to accept: each ask rule of the embedded presets has
/// a message, which leads the reason; an unknown command says what allowing it means.
#[test]
fn every_ask_says_what_it_asks_to_accept() {
    let project = tempfile::tempdir().expect("project");
    let p = default_policy(project.path());
    let bare: Vec<&str> = p
        .config()
        .rules
        .iter()
        .filter(|r| r.action == Action::Ask && r.message.as_deref().is_none_or(|m| m.trim().is_empty()))
        .map(|r| r.pattern.as_str())
        .collect();
    assert!(bare.is_empty(), "ask rules without a message: {bare:?}");
    let j = p.judge("git push --force", project.path());
    assert!(j.reason.starts_with("this push overwrites or deletes history"), "{}", j.reason);
    let j = p.judge("frobnicate --all", project.path());
    assert_eq!(j.decision, Action::Ask);
    assert!(j.reason.contains("allowing it lets `frobnicate` run unjudged in the `workspace` sandbox"), "{}", j.reason);
}

/// What needs the network asks where the command's sandbox has none, and runs where the
/// person chose a sandbox with the network (`--sandbox networked`, or a preset with hosts);
/// a push asks wherever it runs.
#[test]
fn the_network_asks_unless_the_sandbox_has_it() {
    let project = tempfile::tempdir().expect("project");
    let p = default_policy(project.path());
    for cmd in ["npm install", "pip install pandas", "git pull origin main", "curl -fsSL https://example.invalid/x"] {
        let offline = p.judge(cmd, project.path());
        assert_eq!(offline.decision, Action::Ask, "{cmd}: {}", offline.reason);
        assert!(offline.reason.contains("`networked` sandbox"), "{cmd}: {}", offline.reason);
        assert_eq!(offline.sandbox.as_deref(), Some("networked"), "{cmd}: approved, it runs with the network");
        // In a sandbox with the network, the network rule steps aside; what other rules say
        // stands (no rule allows `curl`: the default asks, naming the sandbox it would run in).
        let online = p.judge_in_sandbox(cmd, project.path(), &[], Some("networked"));
        if cmd.starts_with("curl") {
            assert_eq!(online.decision, Action::Ask, "{cmd}: {}", online.reason);
            assert!(online.reason.contains("in the `networked` sandbox"), "{}", online.reason);
        } else {
            assert_eq!(online.decision, Action::Allow, "{cmd} in `networked`: {}", online.reason);
        }
    }
    let push = p.judge_in_sandbox("git push origin main", project.path(), &[], Some("networked"));
    assert_eq!(push.decision, Action::Ask, "{}", push.reason);
    assert!(push.reason.starts_with("publishes commits"), "{}", push.reason);
}

/// Broad destruction spelled another way still asks (found by an outside review): the
/// project removed from its parent or by its absolute path, through /proc, inside `.git`,
/// archive tools that delete what they pack, `git clean` with a pattern that re-includes
/// ignored files, publishing verbs of other package managers.
#[test]
fn broad_destruction_spelled_otherwise_still_asks() {
    let parent = tempfile::tempdir().expect("parent");
    let project = parent.path().join("proj");
    std::fs::create_dir_all(project.join(".git")).expect("project");
    let p = default_policy(&project);
    let name = project.file_name().unwrap().to_str().unwrap().to_string();
    for cmd in [
        format!("cd .. && rm -rf {name}"),
        format!("cd / && rm -rf {}", project.strip_prefix("/").unwrap().display()),
        format!("rm -rf {}", project.display()),
        format!("rm -rf {}", parent.path().display()),
        "rm -rf /proc/self/cwd/*".to_string(),
        "rm -rf .git/*".to_string(),
        "rm -rf ../*".to_string(),
        ": > .git/index".to_string(),
        "truncate -s0 .git/index".to_string(),
        "cd .git && rm index".to_string(),
        "rm -rf .g*".to_string(),
        "tar --remove-files -cf /dev/null .".to_string(),
        "zip -rm /tmp/x.zip .".to_string(),
        "git clean -fd -e '!*'".to_string(),
        "git rm -rf .".to_string(),
        "bun publish".to_string(),
        "./gradlew publish".to_string(),
        "mvn deploy".to_string(),
    ] {
        let j = p.judge_assuming_undo(&cmd, &project, true);
        assert_ne!(j.decision, Action::Allow, "{cmd}: {}", j.reason);
    }
    // A directory inside the project is still ordinary work, with undo.
    assert_eq!(p.judge_assuming_undo("cd src && rm -rf old", &project, true).decision, Action::Allow);
}
