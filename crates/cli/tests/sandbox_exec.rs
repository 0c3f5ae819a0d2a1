//! `pinfold exec` as a tool: exit statuses, stdin, signal dispositions, argv versus shell text,
//! its flags (`--report`, `--dry-run`, `--write`, `--deny-*`, `--cwd`, `--net on`), and
//! ordinary work (git, make, python, npm, cargo) succeeding under the embedded default preset.
//! Fixture: `support/sandbox.rs`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::support::sandbox::*;
use crate::support::*;

// ---------------------------------------------------------------------------------------------
// Exit codes, stdio, flags
// ---------------------------------------------------------------------------------------------

both_users!(
    exit_status_passthrough,
    exit_127_for_missing_command,
    command_search_as_bash_does,
    exit_126_for_denied_and_asked,
    stdin_passthrough,
    signal_dispositions_as_the_caller_left_them,
    one_argument_is_shell_several_are_argv,
    report_json_written,
    dry_run_runs_nothing,
    flag_write_grants_a_path,
    flag_deny_write_and_deny_read,
    flag_cwd,
    flag_net_on_reaches_loopback,
    nothing_runs_when_the_tree_cannot_be_built,
);

fn expect_code(fx: &Fx, r: &Run, want: i32, what: &str) {
    assert!(
        r.code == Some(want) && !r.timed_out,
        "{}: {what}: want exit {want}, got {:?}\n{}",
        fx.label(),
        r.code,
        r.show()
    );
}

/// The command's own exit status passes through; 128+N for a signal.
pub(crate) fn exit_status_passthrough(u: User) {
    let fx = Fx::new(u, "exit_status_passthrough");
    let r = fx.control(&["sh".into(), "-c".into(), "kill -TERM $$".into()]);
    assert_eq!(
        r.signal,
        Some(15),
        "{}: CONTROL FAILED: sh did not die of SIGTERM\n{}",
        fx.label(),
        r.show()
    );
    expect_code(&fx, &fx.exec(&[], &["exit 42".into()]), 42, "`exit 42`");
    expect_code(
        &fx,
        &fx.exec(&[], &["kill -TERM $$".into()]),
        143,
        "`kill -TERM $$` (128+15)",
    );
    expect_code(
        &fx,
        &fx.exec(&[], &["bash".into(), "-c".into(), "kill -KILL $$".into()]),
        137,
        "argv `bash -c 'kill -KILL $$'` (128+9)",
    );
    expect_code(&fx, &fx.exec(&[], &["true".into()]), 0, "`true`");
}

pub(crate) fn exit_127_for_missing_command(u: User) {
    let fx = Fx::new(u, "exit_127_for_missing_command");
    expect_code(
        &fx,
        &fx.exec(&[], &["pinfold-no-such-command-xyz".into(), "arg".into()]),
        127,
        "argv of a missing command",
    );
    expect_code(
        &fx,
        &fx.exec(&[], &["pinfold-no-such-command-xyz".into()]),
        127,
        "one-word missing command",
    );
}

/// A one-word command runs without a shell, so pinfold searches `PATH` itself: the same
/// file, exit status and message as bash, for each `PATH` below. `locked` is a
/// directory the user cannot search (root-owned, mode 0; root inside the sandbox has no
/// capability to pass that), `noexec/tool` a file without execute bits, `subdir/tool` a
/// directory, `exec/tool` an executable script. bash runs inside the same sandbox (`exec --
/// /bin/bash -c tool`); as uid 65534 also on the host, as the control.
fn command_search_as_bash_does(u: User) {
    let fx = Fx::new(u, "command_search_as_bash_does");
    let bin = fx.proj.join(".t/bin");
    let tool = "pinfold-probe-tool";
    for d in ["locked", "noexec", "subdir", "exec"] {
        fs::create_dir_all(bin.join(d)).expect("mkdir");
    }
    fs::write(bin.join("noexec").join(tool), "#!/bin/sh\necho ran noexec\n").expect("write");
    fs::create_dir_all(bin.join("subdir").join(tool)).expect("mkdir");
    fs::write(bin.join("exec").join(tool), "#!/bin/sh\necho ran exec\n").expect("write");
    fx.own();
    fs::set_permissions(bin.join("noexec").join(tool), fs::Permissions::from_mode(0o644)).expect("chmod");
    fs::set_permissions(bin.join("exec").join(tool), fs::Permissions::from_mode(0o755)).expect("chmod");
    // After `own`: root's, closed to everyone.
    let locked = bin.join("locked");
    std::os::unix::fs::chown(&locked, Some(0), Some(0)).expect("chown");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).expect("chmod");
    let dir = |d: &str| Fx::s(&bin.join(d));
    // (PATH, command, exit status, what stdout or stderr shows)
    let noexec_tool = format!("{}/{tool}", dir("noexec"));
    let subdir_tool = format!("{}/{tool}", dir("subdir"));
    let cases: [(String, &str, i32, String); 10] = [
        (format!("{}:/usr/bin:/bin", dir("locked")), "definitely-not-a-command", 127, "definitely-not-a-command: command not found".into()),
        (format!("{}:{}:{}", dir("locked"), dir("noexec"), dir("exec")), tool, 0, "ran exec".into()),
        (format!("{}:{}", dir("locked"), dir("noexec")), tool, 126, format!("{}/{tool}: Permission denied", dir("noexec"))),
        (format!("{}:{}:{}", dir("locked"), dir("subdir"), dir("exec")), tool, 0, "ran exec".into()),
        (format!("{}:{}", dir("locked"), dir("subdir")), tool, 127, format!("{tool}: command not found")),
        (format!("{}:{}", dir("noexec"), dir("subdir")), tool, 126, format!("{}/{tool}: Permission denied", dir("noexec"))),
        (format!("{}:{}", dir("subdir"), dir("noexec")), tool, 127, format!("{tool}: command not found")),
        (dir("locked"), &noexec_tool, 126, format!("{noexec_tool}: Permission denied")),
        (dir("locked"), &subdir_tool, 126, format!("{subdir_tool}: Is a directory")),
        (dir("locked"), "./no-such-file", 127, "./no-such-file: No such file or directory".into()),
    ];
    for (path, command, code, what) in &cases {
        // `env PATH=…` after setpriv, which is found with the fixture's PATH.
        let run = |argv: Vec<String>| {
            let mut full = vec!["/usr/bin/env".to_string(), format!("PATH={path}")];
            full.extend(argv);
            run_cmd(fx.cmd(&full), full.join(" "), None, TIMEOUT)
        };
        let label = format!("{}: PATH={path} {command}", fx.label());
        let ours = run(fx.exec_argv(&[], &[command.to_string()]));
        let bash_inside = run(fx.exec_argv(&[], &["/bin/bash".into(), "-c".into(), command.to_string()]));
        assert_eq!(bash_inside.code, Some(*code), "{label}: bash in the sandbox (the reference) did not exit {code}\n{}", bash_inside.show());
        assert!(bash_inside.all().contains(what.as_str()), "{label}: bash in the sandbox did not say {what:?}\n{}", bash_inside.show());
        if u == User::Nobody {
            let host = run(vec!["/bin/bash".into(), "-c".into(), command.to_string()]);
            assert_eq!(host.code, Some(*code), "{label}: CONTROL FAILED: bash on the host did not exit {code}\n{}", host.show());
        }
        assert_eq!(ours.code, Some(*code), "{label}: pinfold exec's status differs from bash's\n{}", ours.show());
        assert!(ours.all().contains(what.as_str()), "{label}: pinfold exec did not say {what:?}\n{}", ours.show());
    }
}

/// Denied (or asked, since exec cannot ask) → 126 with the reason; with no `-c` and
/// no config file at all, in a temp HOME, under the embedded default policy.
fn exit_126_for_denied_and_asked(u: User) {
    // Control: `rm -rf ~` really is destructive here (it deletes the temp HOME).
    let c = Fx::new(u, "exit_126_for_denied_and_asked");
    let h = Fx::s(&c.home);
    let r = c.control(&[
        "bash".into(),
        "-c".into(),
        format!("[ \"$HOME\" = {h} ] || exit 99; rm -rf ~"),
    ]);
    assert!(
        !c.home.exists(),
        "{}: CONTROL FAILED: `rm -rf ~` did not delete the temp HOME\n{}",
        c.label(),
        r.show()
    );
    let mut fx = Fx::new(u, "exit_126_for_denied_and_asked");
    fx.config = None;
    let _ = fs::remove_file(fx.proj.join("pinfold.toml"));
    let r = fx.exec(&[], &["rm -rf ~".into()]);
    expect_code(&fx, &r, 126, "`rm -rf ~` under the default policy (deny)");
    assert!(
        fx.home.join(".ssh/id_rsa").exists() && !r.stderr.trim().is_empty(),
        "{}: HOME must be intact and stderr must give the reason\n{}",
        fx.label(),
        r.show()
    );
    // An unknown command is `ask` under the default policy: exec cannot ask, so 126, not run.
    let marker = fx.proj.join("asked-ran");
    // (`fallocate` has no rule in the default policy; interpreters with a script are allowed.)
    let r = fx.exec(&[], &["fallocate".into(), "-l".into(), "1".into(), Fx::s(&marker)]);
    expect_code(
        &fx,
        &r,
        126,
        "an unknown command (ask) under the default policy",
    );
    assert!(
        !marker.exists(),
        "{}: the asked command ran anyway",
        fx.label()
    );
}

pub(crate) fn stdin_passthrough(u: User) {
    let fx = Fx::new(u, "stdin_passthrough");
    let r = fx.exec_stdin(&[], &["cat".into()], Some("hi\nthere\n"));
    assert!(
        r.code == Some(0) && r.stdout == "hi\nthere\n",
        "{}: `echo hi | pinfold exec -- cat` must print hi\n{}",
        fx.label(),
        r.show()
    );
}

/// pinfold ignores SIGPIPE for itself; the command must get the dispositions pinfold's
/// caller left: `yes | head -1` ends quietly as it does outside, and a signal the caller
/// ignores (`trap '' PIPE`, `nohup`-style) stays ignored.
fn signal_dispositions_as_the_caller_left_them(u: User) {
    let fx = Fx::new(u, "signal_dispositions_as_the_caller_left_them");
    let text = "yes | head -1; grep SigIgn /proc/self/status";
    let outside = fx.control(&["bash".into(), "-c".into(), text.into()]);
    assert!(
        outside.code == Some(0) && outside.stderr.is_empty() && outside.stdout.starts_with("y\n"),
        "{}: CONTROL FAILED: `yes | head -1` was not quiet outside the sandbox\n{}",
        fx.label(),
        outside.show()
    );
    let inside = fx.exec(&[], &[text.into()]);
    assert!(
        inside.code == Some(0) && inside.stderr.is_empty() && inside.stdout == outside.stdout,
        "{}: inside the sandbox the command must see the caller's dispositions (no SIGPIPE \
         ignored, no `yes: standard output: Broken pipe`)\n{}\noutside:\n{}",
        fx.label(),
        inside.show(),
        outside.show()
    );
    // A caller that ignores SIGPIPE and SIGINT: the command inherits both, as a command the
    // caller ran directly does (the control: whatever else the test's own environment ignores
    // shows on both sides).
    let caller = "trap '' PIPE INT; exec \"$@\"";
    let direct = fx.control(&["bash".into(), "-c".into(), caller.into(), "caller".into(), "grep".into(), "SigIgn".into(), "/proc/self/status".into()]);
    let bits = |r: &Run| u64::from_str_radix(r.stdout.trim().trim_start_matches("SigIgn:").trim(), 16).ok();
    assert!(
        bits(&direct).is_some_and(|b| b & 0x1002 == 0x1002),
        "{}: CONTROL FAILED: `trap '' PIPE INT` did not ignore both\n{}",
        fx.label(),
        direct.show()
    );
    let mut full = vec!["bash".to_string(), "-c".into(), caller.into(), "caller".into()];
    full.extend(fx.exec_argv(&[], &["grep SigIgn /proc/self/status".into()]));
    let r = run_cmd(fx.cmd(&full), full.join(" "), None, TIMEOUT);
    assert!(
        r.code == Some(0) && bits(&r) == bits(&direct),
        "{}: a caller's ignored signals must reach the command as they reach one run directly\n{}\ndirect:\n{}",
        fx.label(),
        r.show(),
        direct.show()
    );
}

fn one_argument_is_shell_several_are_argv(u: User) {
    let fx = Fx::new(u, "one_argument_is_shell_several_are_argv");
    let r = fx.exec(&[], &["echo a; echo b".into()]);
    assert!(
        r.code == Some(0) && r.stdout == "a\nb\n",
        "{}: one argument runs as sh -c\n{}",
        fx.label(),
        r.show()
    );
    let r = fx.exec(
        &[],
        &["printf".into(), "%s|".into(), "a b".into(), "$HOME;".into()],
    );
    assert!(
        r.code == Some(0) && r.stdout == "a b|$HOME;|",
        "{}: several arguments are an argv, no shell expansion\n{}",
        fx.label(),
        r.show()
    );
}

/// `--report FILE`: JSON naming the writable roots (the project), the layers, and a granted
/// path that does not exist ("grants nothing and must be reported, not silently dropped").
pub(crate) fn report_json_written(u: User) {
    let fx = Fx::new(u, "report_json_written");
    let report = fx.out.join("report.json");
    let missing = fx.out.join("does-not-exist");
    let r = fx.exec(
        &["--report", &Fx::s(&report), "--write", &Fx::s(&missing)],
        &["true".into()],
    );
    expect_code(&fx, &r, 0, "`true` with --report");
    let text = fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("{}: no report at {}: {e}", fx.label(), report.display()));
    let json: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: report is not JSON ({e}): {text}", fx.label()));
    let low = text.to_lowercase();
    for want in [
        Fx::s(&fx.proj).to_lowercase(),
        "landlock".into(),
        "seccomp".into(),
        Fx::s(&missing).to_lowercase(),
    ] {
        assert!(
            low.contains(&want),
            "{}: the report does not mention {want:?}: {json:#}",
            fx.label()
        );
    }
}

fn dry_run_runs_nothing(u: User) {
    let fx = Fx::new(u, "dry_run_runs_nothing");
    let marker = fx.proj.join("dry-ran");
    let r = fx.exec(&["--dry-run"], &["touch".into(), Fx::s(&marker)]);
    assert!(
        r.code == Some(0) && !marker.exists() && r.stdout.contains(&Fx::s(&fx.proj)),
        "{}: --dry-run must print the resolved policy (naming the project) and run nothing\n{}",
        fx.label(),
        r.show()
    );
    // It names the backend the command would run on.
    let r = fx.exec(&["--dry-run", "--backend=gvisor"], &["true".into()]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_else(|_| panic!("{}", r.show()));
    assert_eq!(v["backend"], "gvisor", "{}", r.show());
}

pub(crate) fn flag_write_grants_a_path(u: User) {
    let fx = Fx::new(u, "flag_write_grants_a_path");
    let extra = fx.out.join("extra");
    fs::create_dir_all(&extra).expect("mkdir");
    fx.own();
    let f = extra.join("f");
    // In a script file: the policy layer asks for a visible redirect outside the preset's roots
    // even with --write (seen: exit 126 "which the `workspace` sandbox cannot write"); this
    // case is about the sandbox honouring --write.
    let w = fx.sh_script("write_f", &format!("echo ok > {}", Fx::s(&f)));
    let r = fx.exec(&["--write", &Fx::s(&extra)], &w);
    let w = fx.sh_script("write_g", &format!("echo ok > {}", Fx::s(&extra.join("g"))));
    let r2 = fx.exec(&[], &w);
    assert!(
        r.code == Some(0)
            && fs::read_to_string(&f).ok().as_deref() == Some("ok\n")
            && !extra.join("g").exists(),
        "{}: --write DIR must make DIR writable for that run only\n{}\n{}",
        fx.label(),
        r.show(),
        r2.show()
    );
}

pub(crate) fn flag_deny_write_and_deny_read(u: User) {
    let fx = Fx::new(u, "flag_deny_write_and_deny_read");
    fx.put(&fx.proj.join("sub/keep.txt"), "keep\n");
    fx.put(&fx.proj.join("notes.txt"), &format!("{}\n", fx.token));
    fx.own();
    let r = fx.exec(
        &["--deny-write", "sub", "--deny-read", "notes.txt"],
        &[
            "bash".into(),
            "-c".into(),
            "echo x > sub/keep.txt; echo x > sub/new.txt; cat notes.txt; exit 0".into(),
        ],
    );
    let keep = fs::read_to_string(fx.proj.join("sub/keep.txt")).unwrap_or_default();
    assert!(
        r.code == Some(0)
            && keep == "keep\n"
            && !fx.proj.join("sub/new.txt").exists()
            && !r.all().contains(&fx.token),
        "{}: --deny-write sub / --deny-read notes.txt not enforced (keep.txt: {keep:?})\n{}",
        fx.label(),
        r.show()
    );
}

pub(crate) fn flag_cwd(u: User) {
    let fx = Fx::new(u, "flag_cwd");
    fs::create_dir_all(fx.proj.join("sub")).expect("mkdir");
    fx.own();
    let r = fx.exec(&["--cwd", &Fx::s(&fx.proj.join("sub"))], &["pwd".into()]);
    assert!(
        r.code == Some(0) && r.stdout.trim() == Fx::s(&fx.proj.join("sub")),
        "{}: --cwd DIR must run the command in DIR\n{}",
        fx.label(),
        r.show()
    );
}

/// The command process is forked before init builds the tree and confines itself meanwhile
/// (child.rs); it must still run nothing when init then fails. Here init's last step fails:
/// the working directory lies under a hidden directory, so it is missing from the tree. The
/// command would write a marker outside the project; exit 125, no marker. The control, the
/// same run without the hiding, writes it.
fn nothing_runs_when_the_tree_cannot_be_built(u: User) {
    let fx = Fx::new(u, "nothing_runs_when_the_tree_cannot_be_built");
    fs::create_dir_all(fx.proj.join("sub")).expect("mkdir");
    let out = fx.out.join("tree");
    fs::create_dir_all(&out).expect("mkdir");
    fx.own();
    let marker = out.join("ran");
    let argv = ["touch".to_string(), Fx::s(&marker)];
    let cwd = Fx::s(&fx.proj.join("sub"));
    let r = fx.exec(&["--cwd", &cwd, "--deny-read", &Fx::s(&fx.proj), "--write", &Fx::s(&out)], &argv);
    assert!(
        r.code == Some(125) && r.stderr.contains("chdir") && !marker.exists(),
        "{}: init failed to build the tree (the working directory is hidden): exit 125 naming the step, and nothing run\n{}",
        fx.label(),
        r.show()
    );
    let r = fx.exec(&["--cwd", &cwd, "--write", &Fx::s(&out)], &argv);
    assert!(r.code == Some(0) && marker.exists(), "{}: the control run must write the marker\n{}", fx.label(), r.show());
}

/// The positive side of `--net on`: a host loopback listener is reachable (so the network
/// attacks above fail because of `off`, not because networking is broken).
fn flag_net_on_reaches_loopback(u: User) {
    let fx = Fx::new(u, "flag_net_on_reaches_loopback");
    let l = Listeners::new();
    let r = fx.exec(
        &["--net", "on"],
        &[
            "curl".into(),
            "-sS".into(),
            "-m".into(),
            "5".into(),
            format!("http://127.0.0.1:{}/", l.tcp4),
        ],
    );
    assert!(
        r.code == Some(0) && r.stdout.contains("ok") && !l.arrivals().is_empty(),
        "{}: with --net on, a host loopback listener must be reachable\n{}",
        fx.label(),
        r.show()
    );
}

// ---------------------------------------------------------------------------------------------
// Positive side: ordinary work succeeds (under the embedded default preset)
// ---------------------------------------------------------------------------------------------

both_users!(
    work_git_commit_existing_repo,
    work_git_commit_in_worktree,
    work_make,
    work_python_pycache,
    work_npm_install_from_local_tarball,
    work_tmpdir_writable,
);
only_user!(root: work_cargo_build_offline);

/// Run `body` without pinfold (control: the work itself is sound here) and inside
/// `pinfold exec` under the default preset; `check` inspects the host after each.
fn work_case(
    u: User,
    name: &str,
    setup: &dyn Fn(&mut Fx),
    body: &str,
    check: &dyn Fn(&Fx) -> Result<(), String>,
) {
    for sandboxed in [false, true] {
        let mut fx = Fx::new(u, name);
        fx.use_default_preset();
        setup(&mut fx);
        let argv = fx.sh_script("work", &format!("set -e\n{body}"));
        let r = if sandboxed {
            fx.exec(&[], &argv)
        } else {
            fx.control(&argv)
        };
        let res = if r.code == Some(0) {
            check(&fx)
        } else {
            Err(format!("exit {:?}", r.code))
        };
        if let Err(e) = res {
            panic!(
                "{}: {}: {e}\n{}",
                fx.label(),
                if sandboxed {
                    "ORDINARY WORK FAILED inside pinfold exec"
                } else {
                    "CONTROL FAILED: this work does not succeed on the host even without pinfold"
                },
                r.show()
            );
        }
    }
}

fn has_commit(fx: &Fx, dir: &Path, msg: &str) -> Result<(), String> {
    let h = history(fx, dir)?;
    if h.contains(msg) {
        Ok(())
    } else {
        Err(format!("no commit {msg:?} in history: {h}"))
    }
}

/// `.git/objects`, `refs`, `index` stay writable: `git add` + `git commit` work.
pub(crate) fn work_git_commit_existing_repo(u: User) {
    work_case(
        u,
        "work_git_commit_existing_repo",
        &|_| {},
        &format!(
            "{GIT_ID}echo change >> README\necho new > new.txt\ngit add README new.txt\ngit commit -q -m sandboxed-commit\ngit log --oneline | head -3\n"
        ),
        &|fx| has_commit(fx, &fx.proj, "sandboxed-commit"),
    );
}

/// `git commit` inside a worktree: `.git` is a file; the common git dir lives outside
/// the project and must be writable (objects, refs) for the commit to land there.
fn work_git_commit_in_worktree(u: User) {
    work_case(
        u,
        "work_git_commit_in_worktree",
        &|fx| {
            make_worktree(fx);
            let _ = fs::remove_file(fx.cwd.join("pinfold.toml"));
            fx.use_default_preset();
            let _ = fs::remove_file(fx.cwd.join("pinfold.toml"));
        },
        &format!(
            "{GIT_ID}test -f .git\necho wt > wt.txt\ngit add wt.txt\ngit commit -q -m worktree-commit\n"
        ),
        &|fx| {
            let main = fx.out.join("main");
            let out = Command::new("git")
                .args(["-C", &Fx::s(&main), "log", "wt", "--format=%s"])
                .env_clear()
                .envs(&fx.env)
                .envs([
                    ("GIT_CONFIG_COUNT", "1"),
                    ("GIT_CONFIG_KEY_0", "safe.directory"),
                    ("GIT_CONFIG_VALUE_0", "*"),
                ])
                .output()
                .map_err(|e| e.to_string())?;
            let log = String::from_utf8_lossy(&out.stdout);
            if log.contains("worktree-commit") {
                Ok(())
            } else {
                Err(format!(
                    "branch wt in the main repo lacks the commit: {log}"
                ))
            }
        },
    );
}

pub(crate) fn work_make(u: User) {
    work_case(
        u,
        "work_make",
        &|fx| {
            fx.put(
                &fx.proj.join("Makefile"),
                "out.txt: in.txt\n\tcp in.txt out.txt\n\techo built >> out.txt\n",
            );
            fx.put(&fx.proj.join("in.txt"), "input\n");
            fx.own();
        },
        "make\n",
        &|fx| match fs::read_to_string(fx.proj.join("out.txt")) {
            Ok(s) if s == "input\nbuilt\n" => Ok(()),
            other => Err(format!("out.txt: {other:?}")),
        },
    );
}

pub(crate) fn work_python_pycache(u: User) {
    work_case(
        u,
        "work_python_pycache",
        &|fx| {
            fx.put(&fx.proj.join("mymod.py"), "VALUE = 41 + 1\n");
            fx.own();
        },
        "unset PYTHONDONTWRITEBYTECODE\n/usr/bin/python3 -c 'import mymod; print(mymod.VALUE)'\nls __pycache__\n",
        &|fx| {
            let found = fs::read_dir(fx.proj.join("__pycache__"))
                .map(|d| {
                    d.flatten()
                        .any(|e| e.file_name().to_string_lossy().starts_with("mymod."))
                })
                .unwrap_or(false);
            if found {
                Ok(())
            } else {
                Err("no __pycache__/mymod.*.pyc".into())
            }
        },
    );
}

/// `npm install` of a local tarball (made with `npm pack` on the host), offline, with the
/// npm cache at `~/.npm` (a toolchain cache the default preset should make writable).
fn work_npm_install_from_local_tarball(u: User) {
    work_case(
        u,
        "work_npm_install_from_local_tarball",
        &|fx| {
            let dep = fx.out.join("dep");
            fx.put(
                &dep.join("package.json"),
                r#"{"name":"pinfold-dep","version":"1.0.0","main":"index.js"}"#,
            );
            fx.put(&dep.join("index.js"), "module.exports = 42;\n");
            fx.put(
                &fx.proj.join("package.json"),
                r#"{"name":"proj","version":"1.0.0","private":true}"#,
            );
            fs::create_dir_all(fx.home.join(".npm")).expect("mkdir ~/.npm");
            let out = Command::new("npm")
                .args(["pack", "--silent", "--pack-destination", &Fx::s(&fx.out)])
                .current_dir(&dep)
                .env_clear()
                .envs(&fx.env)
                .output()
                .expect("run npm pack");
            assert!(
                out.status.success(),
                "npm pack failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            fx.own();
        },
        "npm install --offline --no-audit --no-fund ../outside/pinfold-dep-1.0.0.tgz\nnode -e 'console.log(require(\"pinfold-dep\"))'\n",
        &|fx| {
            if fx.proj.join("node_modules/pinfold-dep/index.js").exists() {
                Ok(())
            } else {
                Err("node_modules/pinfold-dep missing".into())
            }
        },
    );
}

pub(crate) fn work_tmpdir_writable(u: User) {
    work_case(
        u,
        "work_tmpdir_writable",
        &|_| {},
        "test -n \"$TMPDIR\"\necho scratch > \"$TMPDIR/scratch\"\ncat \"$TMPDIR/scratch\"\nf=$(mktemp)\necho x > \"$f\"\necho \"$TMPDIR\" > tmpdir-was\n",
        &|fx| {
            if fx.proj.join("tmpdir-was").exists() {
                Ok(())
            } else {
                Err("script did not finish".into())
            }
        },
    );
}

/// `cargo build --offline` of a crate without dependencies, CARGO_HOME an empty temp dir.
/// Root only: the toolchain lives under `/root` (mode 0700), which uid 65534 cannot reach even
/// without pinfold.
fn work_cargo_build_offline(u: User) {
    let sysroot = String::from_utf8(
        Command::new("rustc")
            .args(["--print", "sysroot"])
            .output()
            .expect("run rustc")
            .stdout,
    )
    .expect("utf8");
    let sysroot = sysroot.trim().to_string();
    work_case(
        u,
        "work_cargo_build_offline",
        &|fx| {
            fx.put(
                &fx.proj.join("Cargo.toml"),
                "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
            );
            fx.put(
                &fx.proj.join("src/main.rs"),
                "fn main() { println!(\"tiny\"); }\n",
            );
            fs::create_dir_all(fx.base.join("cargo-home")).expect("mkdir");
            fx.own();
        },
        &format!(
            "export CARGO_HOME={b}/cargo-home RUSTC={s}/bin/rustc PATH={s}/bin:$PATH\n{s}/bin/cargo build --offline -q\n./target/debug/tiny\n",
            b = "$(dirname \"$PWD\")",
            s = sysroot
        ),
        &|fx| {
            if fx.proj.join("target/debug/tiny").exists() {
                Ok(())
            } else {
                Err("target/debug/tiny missing".into())
            }
        },
    );
}
