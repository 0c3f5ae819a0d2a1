//! `pinfold exec` keeps secrets out of the command's reach: read-denied files (directly, via
//! `/proc` paths, symlinks, hard links, inherited descriptors) and secret values in the
//! environment. Fixture: `support/sandbox.rs`.

use std::fs;
use std::os::unix::fs::symlink;

use crate::support::sandbox::*;
use crate::support::*;

// ---------------------------------------------------------------------------------------------
// Reading denied paths
// ---------------------------------------------------------------------------------------------

both_users!(
    read_secrets_direct,
    read_secrets_via_proc_paths,
    read_secrets_via_symlink,
    read_secrets_via_hardlink,
    read_secrets_via_inherited_fd,
);

/// A read attack: the token must appear in the control's output and nowhere in the sandbox's.
fn read_case(
    u: User,
    name: &str,
    setup: &dyn Fn(&mut Fx),
    script: &dyn Fn(&Fx) -> Vec<String>,
    wrap: bool,
) {
    let go = |fx: &Fx, sandboxed: bool| {
        let argv = script(fx);
        let argv = if sandboxed {
            fx.exec_argv(&[], &argv)
        } else {
            argv
        };
        let argv = if wrap {
            // Open the secrets as fds 3 and 4 on the host, then start the command with them.
            let mut w = vec![
                "bash".to_string(),
                "-c".into(),
                format!(
                    "exec 3<{} 4<{}; exec \"$@\"",
                    Fx::s(&fx.home.join(".ssh/id_rsa")),
                    Fx::s(&fx.proj.join("secret.txt"))
                ),
                "wrap".into(),
            ];
            w.extend(argv);
            w
        } else {
            argv
        };
        let r = run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT);
        if sandboxed {
            fx.check_implemented(&r);
        }
        r
    };
    let mut c = Fx::new(u, name);
    setup(&mut c);
    let r = go(&c, false);
    let leaks: Vec<String> = r
        .stdout
        .lines()
        .filter(|l| l.contains(&c.token))
        .map(String::from)
        .collect();
    c.assert_control(&r, &leaks, false);

    let mut a = Fx::new(u, name);
    setup(&mut a);
    let r = go(&a, true);
    let mut bad: Vec<String> = r
        .all()
        .lines()
        .filter(|l| l.contains(&a.token))
        .map(|l| format!("secret content visible inside: {l}"))
        .collect();
    // Reading is no host change, but a read attack must not have damaged the secrets either.
    if !fs::read_to_string(a.home.join(".ssh/id_rsa")).is_ok_and(|s| s.contains(&a.token)) {
        bad.push("~/.ssh/id_rsa damaged on the host".to_string());
    }
    a.assert_refused(&r, &bad);
}

/// Each path printed on its own line, prefixed by the path, so a leak names its route.
fn cat_each(paths: &[String]) -> String {
    paths
        .iter()
        .map(|p| format!("echo \"[{p}]: $(cat {p} 2>&1 | head -c 300)\"\n"))
        .collect()
}

/// Direct reads of read-denied paths (`~/.ssh/id_*`, `~/.aws/credentials`, `secret.txt`).
pub(crate) fn read_secrets_direct(u: User) {
    read_case(
        u,
        "read_secrets_direct",
        &|_| {},
        &|fx| {
            let h = Fx::s(&fx.home);
            fx.sh_script(
                "read_direct",
                &(cat_each(&[
                    format!("{h}/.ssh/id_rsa"),
                    "~/.ssh/id_rsa".into(),
                    format!("{h}/.aws/credentials"),
                    "secret.txt".into(),
                    format!("{}/secret.txt", Fx::s(&fx.proj)),
                ]) + "grep -r . ~/.ssh ~/.aws 2>&1 | head -5\n"),
            )
        },
        false,
    );
}

/// Via `/proc/self/root`, `/proc/1/root`, `/proc/1/cwd`, `/proc/$$/cwd`.
pub(crate) fn read_secrets_via_proc_paths(u: User) {
    read_case(
        u,
        "read_secrets_via_proc_paths",
        &|_| {},
        &|fx| {
            let h = Fx::s(&fx.home);
            let p = Fx::s(&fx.proj);
            fx.sh_script(
                "read_proc",
                &cat_each(&[
                    format!("/proc/self/root{h}/.ssh/id_rsa"),
                    format!("/proc/self/root{p}/secret.txt"),
                    format!("/proc/1/root{h}/.ssh/id_rsa"),
                    "/proc/1/cwd/secret.txt".into(),
                    "/proc/$$/cwd/secret.txt".into(),
                    "/proc/self/cwd/secret.txt".into(),
                    format!("/proc/$$/root{h}/.ssh/id_rsa"),
                ]),
            )
        },
        false,
    );
}

/// Symlinks to read-denied files, planted before start and made inside.
pub(crate) fn read_secrets_via_symlink(u: User) {
    read_case(
        u,
        "read_secrets_via_symlink",
        &|fx| {
            symlink(fx.home.join(".ssh/id_rsa"), fx.proj.join("pre-ssh-link")).expect("symlink");
            symlink(fx.home.join(".ssh"), fx.proj.join("pre-ssh-dir")).expect("symlink");
            symlink(fx.proj.join("secret.txt"), fx.proj.join("pre-secret-link")).expect("symlink");
            fx.own();
        },
        &|fx| {
            fx.sh_script(
                "read_symlink",
                &(format!(
                    "ln -s {}/.ssh/id_rsa in-link; ln -s secret.txt in-secret\n",
                    Fx::s(&fx.home)
                ) + &cat_each(&[
                    "pre-ssh-link".into(),
                    "pre-ssh-dir/id_rsa".into(),
                    "pre-secret-link".into(),
                    "in-link".into(),
                    "in-secret".into(),
                ])),
            )
        },
        false,
    );
}

/// Hard links to read-denied files made from inside (if creatable at all).
pub(crate) fn read_secrets_via_hardlink(u: User) {
    read_case(
        u,
        "read_secrets_via_hardlink",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "read_hardlink",
                &(format!(
                    "ln {}/.ssh/id_rsa hl-ssh 2>&1; ln secret.txt hl-secret 2>&1\n",
                    Fx::s(&fx.home)
                ) + &cat_each(&["hl-ssh".into(), "hl-secret".into()])),
            )
        },
        false,
    );
}

/// Inherited descriptors: fds 3 and 4 opened on the secrets by the caller before
/// `pinfold exec` starts must not be readable inside.
pub(crate) fn read_secrets_via_inherited_fd(u: User) {
    read_case(
        u,
        "read_secrets_via_inherited_fd",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "read_fd",
                &(cat_each(&["/proc/self/fd/3".into(), "/proc/self/fd/4".into()])
                    + "echo \"[fd3]: $(head -c 300 <&3 2>&1)\"\necho \"[fd4]: $(head -c 300 <&4 2>&1)\"\n"),
            )
        },
        true,
    );
}

// ---------------------------------------------------------------------------------------------
// Environment
// ---------------------------------------------------------------------------------------------

both_users!(secrets_scrubbed_from_environment);

/// Secrets in the environment: the values of `GITHUB_TOKEN`,
/// `AWS_SECRET_ACCESS_KEY`, `MY_API_KEY`, `DB_PASSWORD`, … appear nowhere inside (`env`,
/// `/proc/1/environ`, any visible `/proc/*/environ`); `--keep-env` keeps the one it names.
pub(crate) fn secrets_scrubbed_from_environment(u: User) {
    let vars = [
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SESSION_TOKEN",
        "MY_API_KEY",
        "DB_PASSWORD",
        "CLIENT_SECRET",
    ];
    let setup = |fx: &mut Fx| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = vars
            .iter()
            .map(|k| (k.to_string(), unique(&format!("val-{k}-"))))
            .collect();
        v.push(("KEEP_ME_TOKEN".into(), unique("val-KEEP_ME_TOKEN-")));
        for (k, val) in &v {
            fx.env.insert(k.clone(), val.clone());
        }
        v
    };
    let script = |fx: &Fx| {
        fx.sh_script(
            "env",
            "echo '--- env'; env\necho '--- /proc/1/environ'; tr '\\0' '\\n' < /proc/1/environ\n\
             echo '--- all environ'; for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null; done\n",
        )
    };
    let mut c = Fx::new(u, "secrets_scrubbed_from_environment");
    let vals = setup(&mut c);
    let r = c.control(&script(&c));
    let seen: Vec<String> = vals
        .iter()
        .filter(|(_, v)| r.stdout.contains(v.as_str()))
        .map(|(k, _)| k.clone())
        .collect();
    c.assert_control(&r, &seen, false);

    let mut a = Fx::new(u, "secrets_scrubbed_from_environment");
    let vals = setup(&mut a);
    let r = a.exec(&["--keep-env", "KEEP_ME_TOKEN"], &script(&a));
    let mut bad: Vec<String> = vals
        .iter()
        .filter(|(k, v)| k != "KEEP_ME_TOKEN" && r.all().contains(v.as_str()))
        .map(|(k, _)| format!("${k}'s value is visible inside"))
        .collect();
    let keep = &vals
        .iter()
        .find(|(k, _)| k == "KEEP_ME_TOKEN")
        .expect("kept var")
        .1;
    if r.started() && !r.stdout.contains(&format!("KEEP_ME_TOKEN={keep}")) {
        bad.push("--keep-env KEEP_ME_TOKEN did not keep it".into());
    }
    a.assert_refused(&r, &bad);
}
