//! `pinfold exec` closes the kernel's doors: no privileges (no_new_privs, no capabilities,
//! devices, setuid binaries), no namespaces, mounts, io_uring, ptrace or foreign memory, no
//! signals to host processes, no terminal injection; and without a kernel feature it needs it
//! refuses to start, clearly. Fixture: `support/sandbox.rs`.

use std::fs;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::sandbox::*;
use crate::support::*;

// ---------------------------------------------------------------------------------------------
// Devices, setuid, privileges
// ---------------------------------------------------------------------------------------------

both_users!(privileges_no_new_privs_no_caps);
only_user!(root: mknod_device);
only_user!(nobody: setuid_root_binary);

/// A setuid binary gains nothing: inside, NoNewPrivs is 1 and CapEff 0. The control's "escape" is a
/// host process without no_new_privs (and, for root, with capabilities).
pub(crate) fn privileges_no_new_privs_no_caps(u: User) {
    let script = |fx: &Fx| {
        fx.sh_script(
            "privs",
            "grep -E '^(NoNewPrivs|CapEff|CapPrm|CapAmb):' /proc/self/status\n\
             nnp=$(awk '/^NoNewPrivs:/{print $2}' /proc/self/status)\n\
             # gVisor's /proc/self/status has no NoNewPrivs line: ask prctl(PR_GET_NO_NEW_PRIVS).\n\
             [ -n \"$nnp\" ] || nnp=$(/usr/bin/python3 -c 'import ctypes; print(ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))')\n\
             eff=$(awk '/^CapEff:/{print $2}' /proc/self/status)\n\
             [ \"$nnp\" = 1 ] && echo 'refused: no_new_privs is set' || echo 'ESCAPED: no_new_privs is not set'\n\
             [ \"$eff\" = 0000000000000000 ] && echo 'refused: no effective capabilities' || echo \"ESCAPED: effective capabilities $eff\"\n",
        )
    };
    let c = Fx::new(u, "privileges_no_new_privs_no_caps");
    let r = c.control(&script(&c));
    // uid 65534 has no capabilities on the host either; its control needs only NoNewPrivs 0.
    let host: Vec<String> = r.escaped().iter().map(|s| s.to_string()).collect();
    assert!(
        r.stdout.contains("ESCAPED: no_new_privs is not set"),
        "{}: CONTROL FAILED: host processes already have no_new_privs set\n{}",
        c.label(),
        r.show()
    );
    assert!(!host.is_empty());
    let a = Fx::new(u, "privileges_no_new_privs_no_caps");
    let r = a.exec(&[], &script(&a));
    a.assert_refused(&r, &[]);
}

/// `mknod` of devices. Root only: uid 65534 cannot mknod on the host, so its control
/// cannot succeed; inside the sandbox neither user may.
fn mknod_device(u: User) {
    attack_case(
        u,
        "mknod_device",
        &|_| {},
        &|fx| {
            fx.sh_script(
                "mknod",
                "t 'mknod a char device (mem)' 'mknod memdev c 1 1'\n\
                 t 'mknod a block device' 'mknod blkdev b 7 0'\n",
            )
        },
        &|fx| {
            ["memdev", "blkdev"]
                .iter()
                .filter(|n| {
                    fs::symlink_metadata(fx.proj.join(n)).is_ok_and(|m| {
                        use std::os::unix::fs::FileTypeExt;
                        m.file_type().is_char_device() || m.file_type().is_block_device()
                    })
                })
                .map(|n| format!("device node {n} exists on the host"))
                .collect()
        },
    );
}

/// A setuid-root binary in the project (placed by root before start) must not
/// raise uid 65534 to euid 0 inside. Nobody only: for root the binary grants nothing.
fn setuid_root_binary(u: User) {
    let setup = |fx: &mut Fx| {
        let p = fx.proj.join("suid-id");
        fs::copy("/usr/bin/id", &p).expect("copy /usr/bin/id");
        fx.own();
        fx.host_ok(&["chown", "0:0", &Fx::s(&p)]);
        fx.host_ok(&["chmod", "4755", &Fx::s(&p)]);
    };
    let script = |fx: &Fx| {
        fx.sh_script(
            "suid",
            "e=$(./suid-id -u); echo \"euid=$e\"; [ \"$e\" = 0 ] && echo 'ESCAPED: setuid root gave euid 0' || echo 'refused: euid stayed non-zero'\n\
             t 'chmod u+s on an own copy' 'cp /usr/bin/id myid && chmod u+s myid && test -u myid && ./myid -u'\n",
        )
    };
    let mut c = Fx::new(u, "setuid_root_binary");
    setup(&mut c);
    let r = c.control(&script(&c));
    assert!(
        r.stdout.contains("ESCAPED: setuid root gave euid 0"),
        "{}: CONTROL FAILED: the setuid-root binary does not give euid 0 on the host\n{}",
        c.label(),
        r.show()
    );
    let mut a = Fx::new(u, "setuid_root_binary");
    setup(&mut a);
    let r = a.exec(&[], &script(&a));
    // Making an own file setuid is harmless in itself; what matters is euid 0.
    let euid0: Vec<String> = r
        .stdout
        .lines()
        .filter(|l| *l == "euid=0")
        .map(String::from)
        .collect();
    if !r.started() || !euid0.is_empty() || r.timed_out || matches!(r.code, Some(125 | 126)) {
        a.assert_refused(&r, &euid0);
    }
}

// ---------------------------------------------------------------------------------------------
// Kernel surface
// ---------------------------------------------------------------------------------------------

both_users!(
    nested_user_namespace,
    mount_family_syscalls,
    setns_refused,
    io_uring_refused,
    ptrace_refused,
    process_vm_writev_refused,
    proc_mem_of_parent_and_host,
    kill_host_pid,
    tiocsti_injection,
);

/// `unshare -U`: a new user namespace inside is refused.
pub(crate) fn nested_user_namespace(u: User) {
    syscall_case(u, "nested_user_namespace", &|fx| {
        fx.sh_script(
            "unshare",
            "t 'unshare -U' 'unshare -U true'\n\
             t 'unshare -r' 'unshare -r true'\n\
             t 'unshare -Urm mount tmpfs' 'mkdir -p m && unshare -Urm mount -t tmpfs none m'\n",
        )
    });
}

/// The mount family: mount, umount2, pivot_root, open_tree, move_mount, fsopen,
/// mount_setattr. Each is tried in a child that first attempts a private user+mount namespace
/// (so on the host the control cannot change real mounts); reaching the kernel past the
/// permission check counts as an escape; inside, each must be EPERM/EACCES/ENOSYS.
pub(crate) fn mount_family_syscalls(u: User) {
    syscall_case(u, "mount_family_syscalls", &|fx| {
        let m = Fx::s(&fx.cwd.join(".t/mnt"));
        fs::create_dir_all(fx.cwd.join(".t/mnt")).expect("mkdir");
        fx.own();
        let mut argv = fx.py_script("mounts", include_str!("attacks/mount_family.py"));
        argv.push(m);
        argv
    });
}

/// `setns` into another namespace is refused.
pub(crate) fn setns_refused(u: User) {
    syscall_case(u, "setns_refused", &|fx| {
        fx.py_script("setns", include_str!("attacks/setns.py"))
    });
}

/// `io_uring_setup` must be EPERM or ENOSYS (not EFAULT: the filter must stop it, not
/// a bad pointer).
fn io_uring_refused(u: User) {
    syscall_case(u, "io_uring_refused", &|fx| {
        fx.py_script("io_uring", include_str!("attacks/io_uring.py"))
    });
}

/// ptrace: attach to an own child (seccomp must say EPERM),
/// to the parent, and to a host process of the same user (must not be reachable).
fn ptrace_refused(u: User) {
    let c = Fx::new(u, "ptrace_refused");
    let a = Fx::new(u, "ptrace_refused");
    let script = |fx: &Fx, host_pid: u32| {
        let mut argv = fx.py_script("ptrace", include_str!("attacks/ptrace.py"));
        argv.push(host_pid.to_string());
        argv
    };
    let hp = c.spawn_host_sleeper(&unique("pinfold-target-"));
    let r = c.control(&script(&c, hp));
    let esc: Vec<String> = r
        .escaped()
        .iter()
        .filter(|l| l.contains("own child") || l.contains("host pid"))
        .map(|s| s.to_string())
        .collect();
    // The parent of the control is the test binary (root): uid 65534 cannot trace it on the
    // host either, which is fine; the own child and the host pid must be traceable.
    assert!(
        esc.len() == 2,
        "{}: CONTROL FAILED: ptrace of an own child and of a same-user host process must work \
         on the host\n{}",
        c.label(),
        r.show()
    );
    let hp = a.spawn_host_sleeper(&unique("pinfold-target-"));
    let r = a.exec(&[], &script(&a, hp));
    let status = fs::read_to_string(format!("/proc/{hp}/status")).unwrap_or_default();
    let mut ch = Vec::new();
    if !a.host_pid_alive(hp) {
        ch.push(format!("host process {hp} died"));
    }
    if !status.contains("TracerPid:\t0") {
        ch.push(format!("host process {hp} is being traced: {status}"));
    }
    a.assert_refused(&r, &ch);
}

/// `process_vm_writev` (into an own child: the syscall itself must be filtered).
pub(crate) fn process_vm_writev_refused(u: User) {
    syscall_case(u, "process_vm_writev_refused", &|fx| {
        fx.py_script("vm_writev", include_str!("attacks/process_vm_writev.py"))
    });
}

/// `/proc/<pid>/mem`: read memory of the parent and of a
/// same-user host process through /proc/<pid>/mem.
pub(crate) fn proc_mem_of_parent_and_host(u: User) {
    let script = |fx: &Fx, host_pid: u32| {
        let mut argv = fx.py_script("proc_mem", include_str!("attacks/proc_mem.py"));
        argv.push(host_pid.to_string());
        argv
    };
    let c = Fx::new(u, "proc_mem_of_parent_and_host");
    let hp = c.spawn_host_sleeper(&unique("pinfold-target-"));
    let r = c.control(&script(&c, hp));
    assert!(
        r.stdout.contains(&format!("ESCAPED: read /proc/{hp}/mem")),
        "{}: CONTROL FAILED: reading a same-user host process's memory does not work here\n{}",
        c.label(),
        r.show()
    );
    let a = Fx::new(u, "proc_mem_of_parent_and_host");
    let hp = a.spawn_host_sleeper(&unique("pinfold-target-"));
    let r = a.exec(&[], &script(&a, hp));
    a.assert_refused(&r, &[]);
}

/// Killing a host pid: a same-user host process must survive.
pub(crate) fn kill_host_pid(u: User) {
    let script = |fx: &Fx, pid: u32| {
        fx.sh_script(
            "kill",
            &format!("t 'kill -9 host pid {pid}' 'kill -9 {pid}'\nt 'kill -STOP host pid' 'kill -STOP {pid}'\n"),
        )
    };
    let c = Fx::new(u, "kill_host_pid");
    let pid = c.spawn_host_sleeper(&unique("pinfold-victim-"));
    let r = c.control(&script(&c, pid));
    let deadline = Instant::now() + Duration::from_secs(2);
    while c.host_pid_alive(pid) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    let ch: Vec<String> = if c.host_pid_alive(pid) {
        vec![]
    } else {
        vec![format!("{pid} killed")]
    };
    assert!(
        !ch.is_empty() && r.stdout.contains("ESCAPED: kill -9"),
        "{}: CONTROL FAILED: could not kill a same-user host process without pinfold\n{}",
        c.label(),
        r.show()
    );
    let a = Fx::new(u, "kill_host_pid");
    let pid = a.spawn_host_sleeper(&unique("pinfold-victim-"));
    let r = a.exec(&[], &script(&a, pid));
    thread::sleep(Duration::from_millis(100));
    let mut ch = Vec::new();
    if !a.host_pid_alive(pid) {
        ch.push(format!("host process {pid} was killed"));
    }
    let st = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    if st.split_whitespace().nth(2) == Some("T") {
        ch.push(format!("host process {pid} was stopped"));
        let _ = Command::new("kill")
            .args(["-CONT", &pid.to_string()])
            .status();
    }
    a.assert_refused(&r, &ch);
}

/// Runs argv with a fresh pty as its controlling terminal and stdio; afterwards prints what
/// waits in the terminal's input queue (what the user's shell would read next).
const PTY_HARNESS: &str = include_str!("programs/pty_harness.py");

/// TIOCSTI: injecting characters into the inherited terminal's input is refused.
fn tiocsti_injection(u: User) {
    let go = |fx: &Fx, sandboxed: bool| {
        let h = fx.base.join("pty_harness.py");
        fx.put(&h, PTY_HARNESS);
        let script = fx.py_script("tiocsti", include_str!("attacks/tiocsti.py"));
        let mut argv = vec![PY.to_string(), Fx::s(&h)];
        argv.extend(if sandboxed {
            fx.exec_argv(&[], &script)
        } else {
            script
        });
        let r = run_cmd(fx.cmd(&argv), argv.join(" "), None, TIMEOUT);
        if sandboxed {
            let code = r
                .stdout
                .lines()
                .find_map(|l| l.strip_prefix("EXIT: "))
                .unwrap_or("");
            if code == "2" && r.stdout.contains("unrecognized subcommand") {
                fx.check_implemented(&Run {
                    code: Some(2),
                    stderr: r.stdout.clone(),
                    ..r
                });
                unreachable!();
            }
        }
        let injected: Vec<String> = r
            .stdout
            .lines()
            .filter(|l| l.starts_with("PENDING-INPUT:") && l.contains("PWNED"))
            .map(|l| format!("the terminal's input queue holds injected text: {l}"))
            .collect();
        (r, injected)
    };
    let c = Fx::new(u, "tiocsti_injection");
    let (r, inj) = go(&c, false);
    c.assert_control(&r, &inj, true);
    let a = Fx::new(u, "tiocsti_injection");
    let (r, inj) = go(&a, true);
    a.assert_refused(&r, &inj);
}

// ---------------------------------------------------------------------------------------------
// Missing kernel features
// ---------------------------------------------------------------------------------------------

/// Runs argv under a seccomp filter that makes a kernel feature look absent, the way a
/// container runtime's profile or an old kernel would: `landlock` (landlock_* → ENOSYS) or
/// `userns` (unshare/clone with CLONE_NEWUSER → EPERM, clone3 → ENOSYS so libc falls back).
const FEATURE_HIDER: &str = include_str!("programs/feature_hider.py");

both_users!(missing_landlock_refuses_clearly);
only_user!(nobody: missing_user_namespaces_refuses_clearly);

fn feature_case(
    u: User,
    name: &str,
    mode: &str,
    probe: &str,
    layer_words: &[&str],
    degraded_ok: bool,
) {
    let fx = Fx::new(u, name);
    let hider = fx.base.join("hide_feature.py");
    fx.put(&hider, FEATURE_HIDER);
    let probe = fx.sh_script("probe", probe);
    let wrap = |argv: Vec<String>| {
        let mut v = vec![PY.to_string(), Fx::s(&hider), mode.to_string()];
        v.extend(argv);
        v
    };
    // Control: the feature really is gone under the hider (and present without it).
    let r = fx.control(&wrap(probe.clone()));
    assert!(
        r.stdout.contains("refused:") && r.escaped().is_empty(),
        "{}: CONTROL FAILED: the {mode} hider does not hide {mode}\n{}",
        fx.label(),
        r.show()
    );
    let r = fx.control(&probe);
    assert!(
        r.stdout.contains("ESCAPED:"),
        "{}: CONTROL FAILED: this host lacks {mode} even without the hider; the test cannot show \
         pinfold's reaction to losing it\n{}",
        fx.label(),
        r.show()
    );
    // Without --allow-degraded: exit 125, an error naming the layer, the command never runs.
    let cmd = vec!["touch".to_string(), Fx::s(&fx.proj.join("ran"))];
    let full = wrap(fx.exec_argv(&[], &cmd));
    let r = run_cmd(fx.cmd(&full), full.join(" "), None, TIMEOUT);
    fx.check_implemented(&r);
    let named = layer_words
        .iter()
        .any(|w| r.stderr.to_lowercase().contains(w));
    let ran = fx.proj.join("ran").exists();
    assert!(
        r.code == Some(125) && named && !ran,
        "{}: with {mode} unavailable, `pinfold exec` must exit 125 with an error naming the \
         missing layer ({layer_words:?}) and not run the command. exit {:?}, named: {named}, \
         command ran: {ran}\n{}",
        fx.label(),
        r.code,
        r.show()
    );
    if degraded_ok {
        // With --allow-degraded it may run, and then the report must say what is missing.
        let report = fx.out.join("report.json");
        let rp = Fx::s(&report);
        let full = wrap(fx.exec_argv(&["--allow-degraded", "--report", &rp], &cmd));
        let r = run_cmd(fx.cmd(&full), full.join(" "), None, TIMEOUT);
        let text = fs::read_to_string(&report)
            .unwrap_or_default()
            .to_lowercase();
        assert!(
            r.code == Some(0)
                && fx.proj.join("ran").exists()
                && layer_words.iter().any(|w| text.contains(w)),
            "{}: with {mode} unavailable and --allow-degraded, the command should run (exit 0) and \
             --report should name the missing layer; report: {text:?}\n{}",
            fx.label(),
            r.show()
        );
        assert!(
            serde_json::from_str::<serde_json::Value>(&text).is_ok(),
            "{}: --report is not JSON: {text:?}",
            fx.label()
        );
    }
}

/// No Landlock (landlock_create_ruleset → ENOSYS).
fn missing_landlock_refuses_clearly(u: User) {
    feature_case(
        u,
        "missing_landlock_refuses_clearly",
        "landlock",
        "r=$(/usr/bin/python3 -c 'import ctypes; l=ctypes.CDLL(None, use_errno=True); print(l.syscall(444, None, 0, 1), ctypes.get_errno())')\n\
         case $r in -1*) echo \"refused: no landlock ($r)\";; *) echo \"ESCAPED: landlock ABI $r\";; esac\n",
        &["landlock"],
        true,
    );
}

/// No unprivileged user namespaces. uid 65534 only: root can build mount and pid
/// namespaces without a user namespace, so pinfold need not refuse there.
fn missing_user_namespaces_refuses_clearly(u: User) {
    feature_case(
        u,
        "missing_user_namespaces_refuses_clearly",
        "userns",
        "t 'unshare -U' 'unshare -U true'\n",
        &["namespace", "userns"],
        false,
    );
}
