//! `pinfold_plan::plan` on real directories: every path the sandbox protects, hides or opens,
//! every way a preset is chosen and merged, the network, and the verdicts that stop a run.
//! Nothing here starts a sandbox or needs root.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use pinfold_plan::{protect, Context, Dirs, Net, Plan, PlanError, Sandbox, Step};
use pinfold_policy::config::{self, Action, LoadOptions};
use pinfold_policy::Policy;
use pinfold_sandbox::Network;

/// A home, a project with a git repository, a working directory two levels inside it, and
/// pinfold's directories in the home (the ledger in a state directory of its own, its key in
/// a directory of its own).
struct Fx {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    proj: PathBuf,
    cwd: PathBuf,
    dirs: Dirs,
}

const POLICY: &str = r#"
extends = ["pinfold:default"]

[[rules]]
allow = "buildtool *"
sandbox = "build"

[[rules]]
allow = "fetchtool *"
sandbox = "fetch"

[[rules]]
allow = "webtool *"
sandbox = "web"

[[rules]]
deny = "wipetool *"

[sandbox.build]
fs.write.allow = [".", "/tmp/build-out"]
fs.write.deny = ["dist"]
fs.read.deny = ["private"]
network.allow = false
env.keep = ["CARGO_HOME", "BUILD_FLAGS"]

[sandbox.fetch]
fs.write.allow = ["a"]
fs.read.deny = ["~/.netrc"]
network.allow = true
network.hosts = ["crates.io", "static.crates.io"]  # address-literal: never connected (planned, nothing runs)
env.keep = ["CARGO_HOME"]

[sandbox.web]
fs.write.allow = ["."]
network.allow = true
"#;

fn fx() -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let home = root.join("home");
    let proj = root.join("proj");
    let cwd = proj.join("a/b");
    fs::create_dir_all(&cwd).unwrap();
    fs::create_dir_all(home.join(".config/pinfold")).unwrap();
    fs::write(home.join(".config/pinfold/config.toml"), "[audit]\nenabled = true\n").unwrap();
    for d in [".git/objects/ab", ".git/objects/pack", ".git/refs/heads", ".git/hooks"] {
        fs::create_dir_all(proj.join(d)).unwrap();
    }
    fs::write(proj.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(proj.join(".git/config"), "").unwrap();
    fs::write(proj.join(".git/refs/heads/main"), "0123\n").unwrap();
    fs::write(proj.join(".git/objects/ab/cdef"), "x").unwrap();
    fs::write(proj.join("pinfold.toml"), POLICY).unwrap();
    let dirs = dirs_of(&[
        ("HOME", home.as_os_str()),
        ("XDG_RUNTIME_DIR", root.join("run").as_os_str()),
        ("PINFOLD_STATE_DIR", root.join("state").as_os_str()),
        ("PINFOLD_LEDGER_KEY", root.join("keys/ledger.key").as_os_str()),
    ]);
    Fx { _tmp: tmp, root, home, proj, cwd, dirs }
}

fn dirs_of(vars: &[(&str, &std::ffi::OsStr)]) -> Dirs {
    let vars: Vec<(String, OsString)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_os_string())).collect();
    Dirs::from_vars(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
}

impl Fx {
    fn policy(&self) -> Policy {
        let opts = LoadOptions { explicit: None, cwd: self.cwd.clone(), home: self.dirs.home.clone(), xdg_config_home: self.dirs.xdg_config_home.clone() };
        Policy::new(config::load(&opts).expect("the policy loads")).expect("the policy compiles")
    }

    fn cx(&self) -> Context {
        Context { cwd: self.cwd.clone(), ..Context::default() }
    }

    fn plan(&self, text: &str, cx: &Context) -> Result<Plan, PlanError> {
        pinfold_plan::plan(&[text.to_string()], cx, &self.policy(), &self.dirs)
    }

    /// The sandbox `text` runs in.
    fn sandbox(&self, text: &str, cx: &Context) -> Sandbox {
        match self.plan(text, cx).expect("a plan").step {
            Step::Run(r) => r.sandbox,
            Step::Show { sandbox, .. } => *sandbox,
            Step::Refuse { .. } => panic!("`{text}` was refused"),
        }
    }
}

fn has(list: &[PathBuf], p: impl AsRef<Path>) -> bool {
    list.iter().any(|x| x == p.as_ref())
}

#[test]
fn every_protected_write_path_is_in_the_sandbox() {
    let f = fx();
    let mut cx = f.cx();
    cx.deny_write = vec![PathBuf::from("generated")];
    let sp = f.sandbox("ls", &cx).policy;
    let w = &sp.write_deny;
    // Each policy file loaded: the user's and the project's.
    assert!(has(w, f.home.join(".config/pinfold/config.toml")), "{w:?}");
    assert!(has(w, f.proj.join("pinfold.toml")));
    // Every name a policy file may have, in the root and each directory down to cwd.
    for dir in [f.proj.clone(), f.proj.join("a"), f.proj.join("a/b")] {
        for stem in ["pinfold", "pinfold.local"] { // address-literal: never connected (a file name)
            for ext in ["toml", "yaml", "yml", "json"] {
                assert!(has(w, dir.join(format!("{stem}.{ext}"))), "{}/{stem}.{ext}", dir.display());
            }
        }
    }
    // Not below cwd, nor above the root.
    assert!(!has(w, f.proj.join("a/b/c/pinfold.toml")) && !has(w, f.root.join("pinfold.toml")));
    // pinfold's configuration directory and cache.
    assert!(has(w, f.home.join(".config/pinfold")));
    assert!(has(w, f.home.join(".cache/pinfold")));
    // The hook key's directory, and the ledger with its key.
    assert!(has(w, f.home.join(".local/state/pinfold")));
    assert!(has(w, f.root.join("state")));
    assert!(has(w, f.root.join("keys/ledger.key")));
    // The preset's own (the default `workspace`: git hooks and config, start-up files).
    assert!(has(w, f.proj.join(".git/hooks")) && has(w, f.proj.join(".git/config")));
    assert!(has(w, f.home.join(".bashrc")));
    // --deny-write, relative to cwd.
    assert!(has(w, f.cwd.join("generated")));
    // The git guard: each loose object, the packs.
    assert!(has(w, f.proj.join(".git/objects/ab/cdef")));
    assert!(has(w, f.proj.join(".git/objects/pack/pack-*")));
}

#[test]
fn every_hidden_path_is_in_the_sandbox() {
    let f = fx();
    let mut cx = f.cx();
    cx.deny_read = vec![PathBuf::from("notes")];
    let sp = f.sandbox("ls", &cx).policy;
    let r = &sp.read_deny;
    // The preset's (`<path:secrets>`), --deny-read relative to cwd.
    assert!(has(r, f.home.join(".ssh")) && has(r, f.home.join(".aws")), "{r:?}");
    assert!(has(r, f.cwd.join("notes")));
    // Container-engine sockets: system-wide, per user, in the home directory.
    for s in ["/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock", "/run/containerd/containerd.sock", "/var/run/crio/crio.sock"] {
        assert!(has(r, s), "{s}");
    }
    for s in ["docker.sock", "podman/podman.sock", "containerd/containerd.sock"] {
        assert!(has(r, f.root.join("run").join(s)), "{s}");
    }
    for s in [".docker/run/docker.sock", ".docker/desktop/docker.sock", ".colima/*/docker.sock", ".rd/docker.sock", ".orbstack/run/docker.sock"] {
        assert!(has(r, f.home.join(s)), "{s}");
    }
    // The hook key's directory, the ledger and its key.
    assert!(has(r, f.home.join(".local/state/pinfold")));
    assert!(has(r, f.root.join("state")) && has(r, f.root.join("keys/ledger.key")));
}

#[test]
fn the_ledger_inside_a_hidden_directory_is_not_listed_again() {
    // Without PINFOLD_STATE_DIR the ledger and its key live in the hook key's directory,
    // which is hidden already: listing them again would only add mounts.
    let f = fx();
    let dirs = dirs_of(&[("HOME", f.home.as_os_str())]);
    let cx = f.cx();
    let run = match pinfold_plan::plan(&["ls".to_string()], &cx, &f.policy(), &dirs).unwrap().step {
        Step::Run(r) => r,
        other => panic!("{other:?}"),
    };
    let state = f.home.join(".local/state/pinfold");
    let r = &run.sandbox.policy.read_deny;
    assert_eq!(r.iter().filter(|p| p.starts_with(&state)).collect::<Vec<_>>(), [&state]);
    assert!(has(&run.sandbox.policy.write_deny, &state));
}

#[test]
fn a_worktrees_real_git_directory_is_protected() {
    let f = fx();
    // A worktree of the repository in `proj`, checked out at `wt`.
    let wt = f.root.join("wt");
    let gitdir = f.proj.join(".git/worktrees/wt");
    fs::create_dir_all(&gitdir).unwrap();
    fs::create_dir_all(&wt).unwrap();
    fs::write(gitdir.join("HEAD"), "ref: refs/heads/x\n").unwrap();
    fs::write(gitdir.join("gitdir"), format!("{}\n", wt.join(".git").display())).unwrap();
    fs::write(gitdir.join("commondir"), "../..\n").unwrap();
    fs::write(wt.join(".git"), format!("gitdir: {}\n", gitdir.display())).unwrap();
    fs::write(wt.join("pinfold.toml"), POLICY).unwrap();
    let cx = Context { cwd: wt.clone(), ..Context::default() };
    let opts = LoadOptions { explicit: None, cwd: wt.clone(), home: f.dirs.home.clone(), xdg_config_home: None };
    let policy = Policy::new(config::load(&opts).unwrap()).unwrap();
    let run = match pinfold_plan::plan(&["ls".to_string()], &cx, &policy, &f.dirs).unwrap().step {
        Step::Run(r) => r,
        other => panic!("{other:?}"),
    };
    let sp = &run.sandbox.policy;
    // Writable so that `git commit` works: the worktree's git directory and the common one.
    assert!(has(&sp.writable, &wt) && has(&sp.writable, &gitdir) && has(&sp.writable, f.proj.join(".git")), "{:?}", sp.writable);
    // The hooks and config where they really are, in both.
    for d in [&gitdir, &f.proj.join(".git")] {
        assert!(has(&sp.write_deny, d.join("hooks")), "{}", d.display());
        assert!(has(&sp.write_deny, d.join("config")), "{}", d.display());
    }
    // The git guard looked at the common directory: its objects are protected.
    assert!(has(&sp.write_deny, f.proj.join(".git/objects/ab/cdef")));
}

#[test]
fn write_opens_a_root_and_reaches_the_judge() {
    let f = fx();
    let mut cx = f.cx();
    cx.write = vec![PathBuf::from("../../../out")];
    let sp = f.sandbox("ls", &cx).policy;
    assert!(has(&sp.writable, f.cwd.join("../../../out")));
    assert!(has(&sp.writable, &f.proj));
    // A preset that does not write the project gets only its own roots: no git directory,
    // no caches, no git guard.
    fs::create_dir_all(f.home.join(".cargo/registry")).unwrap();
    let s = f.sandbox("fetchtool x", &f.cx());
    assert_eq!(s.policy.writable, [f.proj.join("a")]);
    assert!(s.guard.protect.is_empty());
    // One that does gets the toolchain caches that exist.
    let s = f.sandbox("buildtool x", &f.cx());
    assert!(has(&s.policy.writable, f.home.join(".cargo/registry")) && has(&s.policy.writable, "/tmp/build-out"));
    assert!(!has(&s.policy.writable, f.home.join(".npm")));
}

#[test]
fn presets_one_named_default_and_asked() {
    let f = fx();
    // The one the rule names.
    let s = f.sandbox("buildtool all", &f.cx());
    assert_eq!(s.preset.name, "build");
    assert!(has(&s.policy.write_deny, f.proj.join("dist")) && has(&s.policy.read_deny, f.proj.join("private")));
    assert_eq!(s.policy.keep_env, ["CARGO_HOME", "BUILD_FLAGS"]);
    // None named: the default.
    assert_eq!(f.sandbox("ls -la", &f.cx()).preset.name, "workspace");
    // Asked for, over the one the rule names.
    let cx = Context { sandbox: Some("readonly".into()), ..f.cx() };
    let s = f.sandbox("buildtool all", &cx);
    assert_eq!(s.preset.name, "readonly");
    assert!(s.policy.writable.is_empty());
    // --keep-env adds to the preset's.
    let cx = Context { keep_env: vec!["EXTRA".into()], allow_degraded: true, ..f.cx() };
    let s = f.sandbox("buildtool all", &cx);
    assert_eq!(s.policy.keep_env, ["CARGO_HOME", "BUILD_FLAGS", "EXTRA"]);
    assert!(s.policy.allow_degraded);
}

#[test]
fn presets_merge_strictest_wins() {
    let f = fx();
    // Several named by the commands: merged, in name order.
    let s = f.sandbox("buildtool x && fetchtool y", &f.cx());
    assert_eq!(s.preset.name, "build+fetch");
    // Writable: only what both allow (the project's `a` lies in `build`'s `.`).
    assert_eq!(s.policy.writable, [f.proj.join("a")]);
    // Denied: what either denies.
    assert!(has(&s.policy.write_deny, f.proj.join("dist")) && has(&s.policy.read_deny, f.home.join(".netrc")));
    // Network: only if both allow it.
    assert_eq!(s.policy.network, Network::Off);
    // Variables: only those both keep.
    assert_eq!(s.policy.keep_env, ["CARGO_HOME"]);
    // `a+b` asked for: the same merge.
    let cx = Context { sandbox: Some("fetch+web".into()), ..f.cx() };
    let s = f.sandbox("ls", &cx);
    assert_eq!(s.preset.name, "fetch+web");
    assert_eq!(s.policy.network, Network::Proxy);
    assert_eq!(s.preset.network_hosts.len(), 2);
}

#[test]
fn preset_errors_name_what_is_wrong() {
    let f = fx();
    let cx = Context { sandbox: Some("build+nosuch".into()), ..f.cx() };
    match f.plan("ls", &cx) {
        Err(e @ PlanError::UnknownPreset { .. }) => {
            assert_eq!(e.to_string(), "no sandbox preset named `nosuch`");
            assert_eq!(e.hint(), "the policy defines: build, fetch, networked, readonly, web, workspace");
        }
        other => panic!("{other:?}"),
    }
    // No preset at all: a policy without a default, and a command naming none.
    let bare = f.root.join("bare.toml");
    fs::write(&bare, "[defaults]\naction = \"allow\"\n").unwrap();
    let opts = LoadOptions { explicit: Some(bare), cwd: f.cwd.clone(), home: f.dirs.home.clone(), xdg_config_home: None };
    let policy = Policy::new(config::load(&opts).unwrap()).unwrap();
    let e = pinfold_plan::plan(&["ls".to_string()], &f.cx(), &policy, &f.dirs).unwrap_err();
    assert_eq!(e, PlanError::NoPreset);
    assert_eq!(e.hint(), "set `defaults.sandbox`, or pass --sandbox PRESET");
    // A refused command does not get that far.
    assert!(matches!(f.plan("wipetool x", &cx).unwrap().step, Step::Refuse { .. }));
}

#[test]
fn the_network_follows_the_preset_unless_net_says_otherwise() {
    let f = fx();
    assert_eq!(f.sandbox("ls", &f.cx()).policy.network, Network::Off);
    assert_eq!(f.sandbox("webtool x", &f.cx()).policy.network, Network::On);
    let s = f.sandbox("fetchtool x", &f.cx());
    assert_eq!(s.policy.network, Network::Proxy);
    // Through the proxy: its address in the environment, the JAVA options kept before it.
    let cx = Context { java_tool_options: Some("-Xmx1g".into()), ..f.cx() };
    let sp = f.sandbox("fetchtool x", &cx).policy;
    let env = |k: &str| sp.set_env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(env("HTTPS_PROXY"), Some(format!("http://127.0.0.1:{}", sp.proxy_port)));
    assert!(env("JAVA_TOOL_OPTIONS").unwrap().starts_with("-Xmx1g -Dhttp.proxyHost=127.0.0.1"));
    // The credentials go to the run only when the proxy starts.
    let run = |text: &str, cx: &Context| match f.plan(text, cx).unwrap().step {
        Step::Run(r) => r,
        other => panic!("{other:?}"),
    };
    assert!(run("fetchtool x", &f.cx()).credentials.is_some());
    assert!(run("webtool x", &f.cx()).credentials.is_none());
    // --net overrides, both ways.
    let on = Context { net: Some(Net::On), ..f.cx() };
    let off = Context { net: Some(Net::Off), ..f.cx() };
    assert_eq!(f.sandbox("ls", &on).policy.network, Network::On);
    assert_eq!(f.sandbox("fetchtool x", &on).policy.network, Network::On);
    assert_eq!(f.sandbox("webtool x", &off).policy.network, Network::Off);
    let sp = f.sandbox("fetchtool x", &off).policy;
    assert_eq!(sp.network, Network::Off);
    assert!(sp.set_env.is_empty());
    assert!(run("fetchtool x", &off).credentials.is_none());
}

#[test]
fn refused_shown_and_run() {
    let f = fx();
    // Deny and ask are refused, recorded as such.
    for (text, decision) in [("wipetool x", Action::Deny), ("unknowntool x", Action::Ask)] {
        let p = f.plan(text, &f.cx()).unwrap();
        assert_eq!(p.judgement.decision, decision);
        let (kind, record) = p.step.record();
        assert_eq!(kind, "exec_refused");
        assert_eq!(record["command"], text);
        assert_eq!(record["cwd"], f.cwd.display().to_string());
        // The judgement alone: no sandbox was resolved.
        assert!(!record["sandbox"].is_object());
        assert!(record.get("argv").is_none());
    }
    // A dry run shows the sandbox even for a refused command, and records a check.
    let dry = Context { dry_run: true, ..f.cx() };
    let p = f.plan("wipetool x", &dry).unwrap();
    let (kind, record) = p.step.record();
    assert_eq!((kind, record["dry_run"].as_bool(), record["sandbox"]["preset"].as_str()), ("check", Some(true), Some("workspace")));
    assert!(matches!(p.step, Step::Show { .. }));
    // A run: the argv, the exec_start record with the sandbox in it.
    let p = f.plan("buildtool -j2", &f.cx()).unwrap();
    let Step::Run(run) = p.step else { panic!("not a run") };
    // A plain command runs directly, not through the shell.
    assert_eq!(run.argv, ["buildtool", "-j2"]);
    assert_eq!(run.record["argv"], serde_json::json!(["buildtool", "-j2"]));
    assert_eq!(run.record["sandbox"]["preset"], "build");
    assert_eq!(run.record["sandbox"]["network"], "off");
    assert_eq!(run.loaded, [f.home.join(".config/pinfold/config.toml"), f.proj.join("pinfold.toml")]);
    assert!(run.audit.enabled);
    // Shell text that needs the shell runs in it.
    let Step::Run(run) = f.plan("buildtool a; buildtool b", &f.cx()).unwrap().step else { panic!("not a run") };
    assert_eq!(run.argv[1..], ["-c", "buildtool a; buildtool b"]);
    // An argv of several words is judged quoted, run as it is.
    let argv = ["buildtool".to_string(), "my dir".to_string()];
    let p = pinfold_plan::plan(&argv, &f.cx(), &f.policy(), &f.dirs).unwrap();
    assert_eq!(p.text, "buildtool 'my dir'");
    let Step::Run(run) = p.step else { panic!("not a run") };
    assert_eq!(run.argv, argv);
}

#[test]
fn a_hook_token_runs_an_ask_and_nothing_else() {
    let f = fx();
    let token = format!("v1.9.{}", "ab".repeat(32));
    let cx = Context { hook_origin: Some(token), sandbox: Some("readonly".into()), ..f.cx() };
    let p = f.plan("unknowntool x", &cx).unwrap();
    assert!(p.hook_approved);
    let Step::Run(run) = p.step else { panic!("an approved ask runs") };
    assert_eq!(run.sandbox.preset.name, "readonly");
    assert_eq!(run.record["hook_origin"], "v1.9.abababababababab…");
    // Never a deny; and an allow needs none (and records none).
    let p = f.plan("wipetool x", &cx).unwrap();
    assert!(!p.hook_approved && matches!(p.step, Step::Refuse { .. }));
    let p = f.plan("buildtool x", &cx).unwrap();
    assert!(!p.hook_approved);
    let Step::Run(run) = p.step else { panic!("an allow runs") };
    assert!(run.record.get("hook_origin").is_none());
}

/// The agent file tools' lists of pinfold's own files (`pinfold hook`) and the sandbox of
/// `pinfold exec` come from the same directories: whatever a tool may not change or read, a
/// sandboxed command cannot either.
#[test]
fn file_tools_and_sandbox_agree_on_pinfolds_own_files() {
    let f = fx();
    for dirs in [f.dirs.clone(), dirs_of(&[("HOME", f.home.as_os_str())])] {
        let policy = f.policy();
        let run = match pinfold_plan::plan(&["ls".to_string()], &f.cx(), &policy, &dirs).unwrap().step {
            Step::Run(r) => r,
            other => panic!("{other:?}"),
        };
        let sp = &run.sandbox.policy;
        let covered = |list: &[PathBuf], p: &Path| list.iter().any(|d| p.starts_with(d));
        let own = protect::own_unwritable(&policy.config().files, &dirs);
        assert_eq!(own.len(), 7);
        for p in &own {
            assert!(covered(&sp.write_deny, p) || covered(&sp.read_deny, p), "{} is writable in the sandbox", p.display());
        }
        let hidden = protect::own_unreadable(&dirs);
        assert_eq!(hidden.len(), 3);
        for p in &hidden {
            assert!(covered(&sp.read_deny, p), "{} is readable in the sandbox", p.display());
        }
    }
}

/// A preset's `backend`, `--backend` over it, and undo only where the backend records
/// changes: a rule that holds only with undo does not allow a command on gVisor.
#[test]
fn the_backend_and_what_it_takes_away() {
    let f = fx();
    fs::write(
        f.proj.join("pinfold.toml"),
        r#"
[defaults]
action = "ask"
sandbox = "w"

[[rules]]
allow = "lstool *"

[[rules]]
allow = "rmtool *"
when = "undo"

[sandbox.w]
fs.write.allow = ["."]

[sandbox.g]
backend = "gvisor"
fs.write.allow = ["."]
"#,
    )
    .unwrap();
    let s = f.sandbox("lstool", &f.cx());
    assert_eq!(s.policy.backend, pinfold_sandbox::BackendKind::Process);
    assert!(s.undo.is_some() && !s.policy.watch.is_empty());
    assert!(matches!(f.plan("rmtool x", &f.cx()).unwrap().step, Step::Run(_)));
    // The preset's backend.
    let g = Context { sandbox: Some("g".into()), ..f.cx() };
    let s = f.sandbox("lstool", &g);
    assert_eq!(s.policy.backend, pinfold_sandbox::BackendKind::Gvisor);
    assert!(s.undo.is_none() && s.policy.watch.is_empty());
    assert!(matches!(f.plan("rmtool x", &g).unwrap().step, Step::Refuse { .. }));
    // --backend over the preset's.
    let over = Context { backend: Some(pinfold_sandbox::BackendKind::Gvisor), ..f.cx() };
    assert_eq!(f.sandbox("lstool", &over).policy.backend, pinfold_sandbox::BackendKind::Gvisor);
    let p = f.plan("rmtool x", &over).unwrap();
    assert!(matches!(p.step, Step::Refuse { .. }), "{:?}", p.judgement);
    let back = Context { backend: Some(pinfold_sandbox::BackendKind::Process), ..g };
    assert!(matches!(f.plan("rmtool x", &back).unwrap().step, Step::Run(_)));
    // Every name the policy accepts is a backend this build has, in the same order.
    let names: Vec<&str> = pinfold_sandbox::BackendKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names, config::BACKENDS);
}

/// A policy loaded for another directory than the command's (its project root neither the
/// working directory nor above it) is not planned: its project would be made writable.
#[test]
fn a_policy_loaded_for_elsewhere_is_not_planned() {
    let f = fx();
    let elsewhere = f.root.join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let cx = Context { cwd: elsewhere.clone(), ..Context::default() };
    match f.plan("ls", &cx) {
        Err(e @ PlanError::ElsewhereRoot { .. }) => {
            assert_eq!(e, PlanError::ElsewhereRoot { root: f.proj.clone(), cwd: elsewhere });
            assert!(e.hint().contains("swapped for a link"), "{}", e.hint());
        }
        other => panic!("{other:?}"),
    }
    // The control: the same policy, for a command in the project.
    assert!(matches!(f.plan("ls", &f.cx()).unwrap().step, Step::Run(_)));
}
