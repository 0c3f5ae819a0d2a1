//! `pinfold exec` leaves no process behind: background jobs, daemons and double forks end with
//! it, the command dies with it, and signals sent to it reach the command. Fixture:
//! `support/sandbox.rs`.

use std::fs;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::sandbox::*;
use crate::support::*;

// ---------------------------------------------------------------------------------------------
// Processes left behind
// ---------------------------------------------------------------------------------------------

both_users!(no_orphans_after_exit, dies_with_parent, signals_forwarded);

fn pids_with(marker: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in fs::read_dir("/proc").expect("read /proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        {
            v.push(pid);
        }
    }
    v
}

fn kill_all(pids: &[u32]) {
    for p in pids {
        let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
    }
}

fn wait_gone(marker: &str, grace: Duration) -> Vec<u32> {
    let deadline = Instant::now() + grace;
    loop {
        let left = pids_with(marker);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// No orphans after exit: `sleep 1000 &`, a setsid'd daemon and a
/// double fork; none may remain once `pinfold exec` has exited.
pub(crate) fn no_orphans_after_exit(u: User) {
    let script = |fx: &Fx, m: &str| {
        fx.sh_script(
            "orphans",
            &format!(
                "(exec -a {m}-bg sleep 1000) </dev/null >/dev/null 2>&1 &\n\
                 setsid bash -c 'exec -a {m}-setsid sleep 1000' </dev/null >/dev/null 2>&1 &\n\
                 ( ( exec -a {m}-double sleep 1000 ) </dev/null >/dev/null 2>&1 & )\n\
                 nohup bash -c 'exec -a {m}-nohup sleep 1000' </dev/null >/dev/null 2>&1 &\n\
                 sleep 0.2; echo 'ESCAPED: left background processes'\n"
            ),
        )
    };
    let c = Fx::new(u, "no_orphans_after_exit");
    let m = unique("pinfold-orphan-");
    let r = c.control(&script(&c, &m));
    let left = pids_with(&m);
    kill_all(&left);
    assert!(
        left.len() == 4,
        "{}: CONTROL FAILED: expected 4 orphans to survive without pinfold, found {left:?}\n{}",
        c.label(),
        r.show()
    );
    let a = Fx::new(u, "no_orphans_after_exit");
    let m = unique("pinfold-orphan-");
    let r = a.exec(&[], &script(&a, &m));
    let left = wait_gone(&m, Duration::from_secs(1));
    kill_all(&left);
    let ch: Vec<String> = left
        .iter()
        .map(|p| format!("orphan pid {p} still running after exit"))
        .collect();
    // The script's own ESCAPED line only means "started them"; the host check decides.
    let r = Run {
        stdout: r.stdout.replace("ESCAPED: left", "started"),
        ..r
    };
    a.assert_refused(&r, &ch);
}

/// The sandbox dies with its parent: SIGKILL of `pinfold exec` must take the
/// command with it.
pub(crate) fn dies_with_parent(u: User) {
    let go = |fx: &Fx, sandboxed: bool, m: &str| -> (Vec<u32>, String) {
        let script = fx.sh_script(
            "dies",
            &format!("(exec -a {m} sleep 1000) </dev/null >/dev/null 2>&1 &\nwait\n"),
        );
        let argv = if sandboxed {
            fx.exec_argv(&[], &script)
        } else {
            script
        };
        let mut c = fx.cmd(&argv);
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn");
        let deadline = Instant::now() + Duration::from_secs(10);
        while pids_with(m).is_empty() && Instant::now() < deadline {
            if let Ok(Some(st)) = child.try_wait() {
                let mut e = String::new();
                let _ = child.stderr.take().map(|mut s| s.read_to_string(&mut e));
                return (vec![], format!("exited early with {st}: {e}"));
            }
            thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        let left = wait_gone(m, Duration::from_secs(1));
        kill_all(&left);
        (left, String::new())
    };
    let c = Fx::new(u, "dies_with_parent");
    let m = unique("pinfold-child-");
    let (left, err) = go(&c, false, &m);
    assert!(
        !left.is_empty(),
        "{}: CONTROL FAILED: the child did not survive its killed parent without pinfold {err}",
        c.label()
    );
    let a = Fx::new(u, "dies_with_parent");
    let m = unique("pinfold-child-");
    let (left, err) = go(&a, true, &m);
    assert!(
        err.is_empty(),
        "{}: SANDBOX FAILED: pinfold exec did not start the command: {err}",
        a.label()
    );
    assert!(
        left.is_empty(),
        "{}: SANDBOX FAILED: after SIGKILL of pinfold exec, the command's process(es) {left:?} \
         were still running a second later",
        a.label()
    );
}

/// Signals are forwarded: SIGTERM to `pinfold exec` reaches the command's trap.
pub(crate) fn signals_forwarded(u: User) {
    let a = Fx::new(u, "signals_forwarded");
    let script = a.sh_script(
        "trap",
        "trap 'echo got-TERM; exit 7' TERM\ntouch ready\nwhile :; do sleep 0.05; done\n",
    );
    let argv = a.exec_argv(&[], &script);
    let mut c = a.cmd(&argv);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let t0 = Instant::now();
    let mut child = c.spawn().expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !a.proj.join("ready").exists() && Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(5);
    while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let out = child.wait_with_output().expect("wait");
    let r = Run {
        what: argv.join(" "),
        code: out.status.code(),
        signal: out.status.signal(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
        timed_out: false,
        took: t0.elapsed(),
    };
    a.check_implemented(&r);
    assert!(
        r.code == Some(7) && r.stdout.contains("got-TERM"),
        "{}: SIGTERM to pinfold exec did not reach the command's trap (want exit 7 and got-TERM)\n{}",
        a.label(),
        r.show()
    );
}
