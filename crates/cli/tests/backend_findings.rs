//! What an outside attack on the backends found, each kept as the attack that found it and run
//! on every backend (process, gvisor, container), as root and as uid 65534: the command runs
//! in the sandbox, the test looks at the host afterwards.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::support::sandbox::{Fx, on_backend};
use crate::support::{TIMEOUT, User, run_cmd};

/// A test policy: the project writable (and `extra` roots), `~/.ssh` hidden.
fn with_policy(fx: &mut Fx, extra_write: &str) {
    use_policy(fx, &format!("[defaults]\naction = \"allow\"\nsandbox = \"c\"\n\n[sandbox.c]\nfs.write.allow = [\".\"{extra_write}]\nfs.read.deny = [\"~/.ssh\"]\n"));
}

/// The case runs under the policy `text` (`-c`).
fn use_policy(fx: &mut Fx, text: &str) {
    let p = fx.base.join("finding.toml");
    fx.put(&p, text);
    fx.own();
    fx.config = Some(p);
}

/// A writable root the policy names beneath the project (`build`) that a command made a link
/// to the home directory: the next run must not make the home directory writable. (Found on
/// all three backends: `build/PLANTED` landed in the home directory, and a hook written
/// there through it ran at the next `git commit` on the host.)
fn a_writable_root_made_a_link_is_not_followed(u: User) {
    let mut fx = Fx::new(u, "a_writable_root_made_a_link_is_not_followed");
    with_policy(&mut fx, ", \"build\"");
    let home = fx.home.clone();
    let plant = fx.sh_script("plant", &format!("ln -s {} build && echo planted", Fx::s(&home)));
    let r = fx.exec(&[], &plant);
    assert!(r.stdout.contains("planted"), "{}: the link could not be made, so the case proves nothing\n{}", fx.label(), r.show());
    let write = fx.sh_script("write", "echo pwn > build/PLANTED; echo wrote");
    let r = fx.exec(&[], &write);
    assert!(!home.join("PLANTED").exists(), "{}: a write through the planted link landed in the home directory\n{}", fx.label(), r.show());
    assert_eq!(r.code, Some(125), "{}: the run must be refused\n{}", fx.label(), r.show());
    assert!(r.stderr.contains("leads through a link"), "{}\n{}", fx.label(), r.show());
}

/// A preset whose only writable root is `out` in the project, after a run under another
/// preset made `out` a link to the home directory: the run is refused, the home directory not
/// written. (Found on all three backends, root and uid 65534: `out/evil.txt` landed in the
/// home directory.)
fn a_writable_root_beneath_the_project_made_a_link_is_not_followed(u: User) {
    let mut fx = Fx::new(u, "a_writable_root_beneath_the_project_made_a_link_is_not_followed");
    use_policy(&mut fx, "[defaults]\naction = \"allow\"\nsandbox = \"workspace\"\n\n[sandbox.workspace]\nfs.write.allow = [\".\"]\n\n[sandbox.outonly]\nfs.write.allow = [\"out\"]\n");
    let home = fx.home.clone();
    let plant = fx.sh_script("plant", &format!("ln -s {} out && echo planted", Fx::s(&home)));
    let r = fx.exec(&[], &plant);
    assert!(r.stdout.contains("planted"), "{}: the link could not be made, so the case proves nothing\n{}", fx.label(), r.show());
    let write = fx.sh_script("write", "echo pwn > out/EVIL; echo wrote");
    let r = fx.exec(&["--sandbox", "outonly"], &write);
    assert!(!home.join("EVIL").exists(), "{}: a write through the planted link landed in the home directory\n{}", fx.label(), r.show());
    assert_eq!(r.code, Some(125), "{}: the run must be refused\n{}", fx.label(), r.show());
    assert!(r.stderr.contains("leads through a link"), "{}\n{}", fx.label(), r.show());
}

/// A unix socket at `sock` open to every user, counting in `seen` the connections it gets.
fn counting_listener(sock: &std::path::Path, seen: &Arc<AtomicUsize>) {
    let listener = std::os::unix::net::UnixListener::bind(sock).expect("bind the socket");
    std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let seen = seen.clone();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { break };
            seen.fetch_add(1, Ordering::SeqCst);
            let mut b = [0u8; 16];
            let _ = s.read(&mut b);
        }
    });
}

/// An engine socket the caller's `DOCKER_HOST` (process, gvisor) or `CONTAINER_HOST`
/// (container: pinfold's own DOCKER_HOST is the engine it runs on) names, in the project:
/// reachable on the host (the control), never from inside. (Found: a command spoke the
/// Docker API over it and bound the home directory into a container of its own.)
fn the_engine_socket_the_caller_names_is_hidden(u: User) {
    let fx = Fx::new(u, "the_engine_socket_the_caller_names_is_hidden");
    let sock = fx.proj.join("engine.sock");
    let seen = Arc::new(AtomicUsize::new(0));
    counting_listener(&sock, &seen);
    let probe = fx.py_script(
        "probe",
        "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(sys.argv[1]); print('CONNECTED')\nexcept OSError as e:\n    print('refused', e)\n",
    );
    let mut argv = probe.clone();
    argv.push(Fx::s(&sock));
    let control = fx.control(&argv);
    assert!(control.stdout.contains("CONNECTED"), "{}: CONTROL FAILED: the socket must be reachable on the host\n{}", fx.label(), control.show());
    let before = seen.load(Ordering::SeqCst);
    let var = if fx.backend == Some("container") { "CONTAINER_HOST" } else { "DOCKER_HOST" };
    let full = fx.exec_argv(&[], &argv);
    let mut c = fx.cmd(&full);
    c.env(var, format!("unix://{}", sock.display()));
    let r = run_cmd(c, full.join(" "), None, TIMEOUT);
    fx.check_implemented(&r);
    assert!(r.stdout.contains("refused"), "{}: the probe did not run\n{}", fx.label(), r.show());
    assert!(!r.stdout.contains("CONNECTED"), "{}: the engine socket {var} names was reached from inside\n{}", fx.label(), r.show());
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(seen.load(Ordering::SeqCst), before, "{}: a connection reached the socket\n{}", fx.label(), r.show());
}

/// SSH agent sockets: the one the caller's `SSH_AUTH_SOCK` names (the variable itself is
/// removed) and one in OpenSSH's default place (`/tmp/ssh-*/agent.*`), reachable on the host
/// (the control), never from inside. (Found on the process backend: `ssh-keygen -Y sign`
/// through the agent, with `~/.ssh` hidden.)
fn agent_sockets_are_hidden(u: User) {
    let fx = Fx::new(u, "agent_sockets_are_hidden");
    let tmpdir = std::path::PathBuf::from(format!("/tmp/ssh-{}", fx.base.file_name().unwrap().to_string_lossy()));
    let _ = std::fs::remove_dir_all(&tmpdir);
    std::fs::create_dir(&tmpdir).expect("mkdir");
    std::fs::set_permissions(&tmpdir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let named = fx.base.join("named-agent.sock");
    let default = tmpdir.join(format!("agent.{}", std::process::id()));
    let seen = Arc::new(AtomicUsize::new(0));
    for sock in [&named, &default] {
        counting_listener(sock, &seen);
    }
    let probe = fx.py_script(
        "probe",
        "import socket, sys\nfor p in sys.argv[1:]:\n    s = socket.socket(socket.AF_UNIX)\n    try:\n        s.connect(p); print('CONNECTED', p)\n    except OSError as e:\n        print('refused', e)\n",
    );
    let mut argv = probe.clone();
    argv.extend([Fx::s(&named), Fx::s(&default)]);
    let control = fx.control(&argv);
    assert_eq!(control.stdout.matches("CONNECTED").count(), 2, "{}: CONTROL FAILED: the sockets must be reachable on the host\n{}", fx.label(), control.show());
    let before = seen.load(Ordering::SeqCst);
    let full = fx.exec_argv(&[], &argv);
    let mut c = fx.cmd(&full);
    c.env("SSH_AUTH_SOCK", &named);
    let r = run_cmd(c, full.join(" "), None, TIMEOUT);
    let _ = std::fs::remove_dir_all(&tmpdir);
    assert_eq!(r.stdout.matches("refused").count(), 2, "{}: the probe did not run\n{}", fx.label(), r.show());
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(seen.load(Ordering::SeqCst), before, "{}: a connection reached an agent socket\n{}", fx.label(), r.show());
}

/// The project swapped with a link to the home directory (`renameat2(RENAME_EXCHANGE)`, by a
/// command beside this run that may write the project's parent) while runs start: no run may
/// write in the home directory. (Found on all three backends: the working directory was
/// canonicalized through the link and the home directory became the writable project.)
fn a_project_swapped_for_a_link_never_becomes_writable(u: User) {
    let fx = Fx::new(u, "a_project_swapped_for_a_link_never_becomes_writable");
    let arena = fx.base.join("arena");
    let p = arena.join("p");
    std::fs::create_dir_all(&p).expect("mkdir");
    fx.init_repo(&p);
    std::os::unix::fs::symlink(&fx.home, arena.join("l")).expect("symlink");
    fx.own();
    // The swapper runs on the host as the case's user: the exchange needs no sandbox to be
    // possible, only a directory the attacker may write (here, the arena).
    let swapper = fx.py_script(
        "swap",
        &format!(
            "import ctypes, os, time\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             a, b = b{a:?}, b{b:?}\n\
             end = time.time() + 240\n\
             while time.time() < end and not os.path.exists({stop:?}):\n\
             \x20   libc.renameat2(-100, a, -100, b, 2); time.sleep(0.003)\n\
             \x20   libc.renameat2(-100, a, -100, b, 2); time.sleep(0.03)\n",
            a = Fx::s(&p),
            b = Fx::s(&arena.join("l")),
            stop = Fx::s(&fx.base.join("stop")),
        ),
    );
    // The victim: a shell that is in the project before the swapping starts (as an agent's
    // shell is), running pinfold there again and again.
    let go = fx.base.join("go");
    let mut script = vec![
        "bash".to_string(),
        "-c".into(),
        // Forty runs, and then more until three have started (a loaded machine's slow runs see
        // more swaps and are refused more often), at most 240 in all.
        format!(
            "cd {} || exit 1; while [ ! -e {} ]; do sleep 0.02; done; ok=0; for i in $(seq 240); do \"$@\" >/dev/null 2>&1; r=$?; echo rc=$r; [ $r = 0 ] && ok=$((ok+1)); [ $i -ge 40 ] && [ $ok -ge 3 ] && break; done",
            Fx::s(&p),
            Fx::s(&go)
        ),
        "-".into(),
    ];
    // (Inline: the test's scripts live in the test's project, which a container of this
    // project does not have.)
    script.extend(fx.exec_argv(&[], &["bash".to_string(), "-c".into(), "echo written > race-marker.txt".into()]));
    let victim = fx.cmd(&script).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null()).spawn().expect("start the victim");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut attacker = fx.cmd(&swapper).stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().expect("start the swapper");
    std::fs::write(&go, "").expect("go");
    let out = victim.wait_with_output().expect("the victim");
    std::fs::write(fx.base.join("stop"), "").ok();
    let _ = attacker.kill();
    let _ = attacker.wait();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!fx.home.join("race-marker.txt").exists(), "{}: a run wrote in the home directory: {text}", fx.label());
    let started = text.lines().filter(|l| *l == "rc=0").count();
    eprintln!("{}: {started} of {} runs started", fx.label(), text.lines().count());
    assert!(started > 0, "{}: no run started: the race proves nothing: {text}", fx.label());
}

/// Setuid and setgid bits on a file in the project, by every call that sets a mode: none may
/// be left on the host (a setuid-root program planted by a run as root). The control, on the
/// host as the case's user, shows each way works there. (Found on all three backends:
/// `chmod u+s` on a copy of a shell in the project.)
fn no_setuid_file_is_left_in_the_project(u: User) {
    let fx = Fx::new(u, "no_setuid_file_is_left_in_the_project");
    let script = fx.py_script(
        "setid",
        "import ctypes, os, stat, subprocess, sys\n\
         d = sys.argv[1]\n\
         os.makedirs(d, exist_ok=True)\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         def p(n):\n\
         \x20   return os.path.join(d, n)\n\
         def new(n):\n\
         \x20   open(p(n), 'w').write('#!/bin/sh\\n'); return p(n)\n\
         def sys_(nr, *a):\n\
         \x20   if libc.syscall(nr, *a) < 0: raise OSError(ctypes.get_errno(), 'syscall')\n\
         def fchmod(n, m):\n\
         \x20   fd = os.open(new(n), os.O_WRONLY); os.fchmod(fd, m); os.close(fd)\n\
         def cmd(*a):\n\
         \x20   if subprocess.run(a, stderr=subprocess.DEVNULL).returncode != 0: raise OSError(1, 'failed')\n\
         ways = [\n\
         \x20   ('chmod-u+s', lambda: cmd('chmod', 'u+s', new('a'))),\n\
         \x20   ('chmod-g+s', lambda: cmd('chmod', 'g+s', new('b'))),\n\
         \x20   ('install-4755', lambda: cmd('install', '-m', '4755', '/bin/true', p('c'))),\n\
         \x20   ('fchmod', lambda: fchmod('d', 0o4755)),\n\
         \x20   ('openat', lambda: os.close(os.open(p('e'), os.O_CREAT | os.O_WRONLY, 0o4755))),\n\
         \x20   ('mknodat', lambda: os.mknod(p('f'), stat.S_IFREG | 0o6755)),\n\
         \x20   ('chmod', lambda: sys_(90, new('g').encode(), 0o4755)),\n\
         \x20   ('open', lambda: sys_(2, p('h').encode(), os.O_CREAT | os.O_WRONLY, 0o4755)),\n\
         \x20   ('creat', lambda: sys_(85, p('i').encode(), 0o4755)),\n\
         \x20   ('mknod', lambda: sys_(133, p('j').encode(), stat.S_IFREG | 0o4755, 0)),\n\
         \x20   ('fchmodat2', lambda: sys_(452, -100, new('k').encode(), 0o4755, 0)),\n\
         ]\n\
         for name, f in ways:\n\
         \x20   try:\n\
         \x20       f(); print(name, 'ok')\n\
         \x20   except OSError as e:\n\
         \x20       print(name, 'refused', e.errno)\n\
         print('done')\n",
    );
    let setid = |dir: &std::path::Path| -> Vec<String> {
        let mut found = Vec::new();
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let mode = e.metadata().map(|m| m.permissions().mode()).unwrap_or(0);
            if mode & 0o6000 != 0 {
                found.push(format!("{} {mode:o}", e.file_name().to_string_lossy()));
            }
        }
        found.sort();
        found
    };
    let mut argv = script.clone();
    argv.push(Fx::s(&fx.proj.join("ctl")));
    let control = fx.control(&argv);
    assert!(control.stdout.contains("done"), "{}: CONTROL FAILED: the script did not run\n{}", fx.label(), control.show());
    // Every way but fchmodat2 (older kernels lack it) worked on the host.
    assert!(setid(&fx.proj.join("ctl")).len() >= 10, "{}: CONTROL FAILED: {:?}\n{}", fx.label(), setid(&fx.proj.join("ctl")), control.show());
    let mut argv = script;
    argv.push(Fx::s(&fx.proj.join("sb")));
    let r = fx.exec(&[], &argv);
    assert!(r.stdout.contains("done"), "{}: the script did not run in the sandbox\n{}", fx.label(), r.show());
    assert_eq!(setid(&fx.proj.join("sb")), Vec::<String>::new(), "{}: a setuid or setgid file was left in the project\n{}", fx.label(), r.show());
    assert!(!r.stdout.contains(" ok"), "{}: a way said it worked\n{}", fx.label(), r.show());
}

/// A write-deny directory that also holds another write-deny path (so it is bound over
/// itself writable, to pin it) and a write-deny directory whose subdirectory is pinned so:
/// neither may be written, and the run must go ahead (not be refused for two mounts on one
/// place). (Found on gVisor: runsc put the writable bind on top and `~/.config/git/config`
/// was written, which ran a command at the next `git status` on the host; the container
/// backend refused every such run.)
fn a_write_deny_directory_holding_another_stays_read_only(u: User) {
    let mut fx = Fx::new(u, "a_write_deny_directory_holding_another_stays_read_only");
    for f in ["conf/inner.toml", "data/sub/file"] {
        fx.put(&fx.proj.join(f), "x\n");
    }
    use_policy(&mut fx, "[defaults]\naction = \"allow\"\nsandbox = \"c\"\n\n[sandbox.c]\nfs.write.allow = [\".\"]\nfs.write.deny = [\"conf\", \"conf/inner.toml\", \"data\", \"data/sub/file\"]\n");
    let script = fx.sh_script("write", "for f in conf/new data/new data/sub/new conf/inner.toml; do (echo pwn >> $f) 2>/dev/null && echo \"WROTE $f\"; done; echo ok > free.txt; echo done");
    let r = fx.exec(&[], &script);
    assert_eq!(r.code, Some(0), "{}: the run must go ahead\n{}", fx.label(), r.show());
    assert!(r.stdout.contains("done") && !r.stdout.contains("WROTE"), "{}\n{}", fx.label(), r.show());
    for f in ["conf/new", "data/new", "data/sub/new"] {
        assert!(!fx.proj.join(f).exists(), "{}: {f} was written on the host\n{}", fx.label(), r.show());
    }
    assert_eq!(std::fs::read_to_string(fx.proj.join("conf/inner.toml")).unwrap(), "x\n");
    assert_eq!(std::fs::read_to_string(fx.proj.join("free.txt")).unwrap_or_default(), "ok\n", "{}: the project stays writable", fx.label());
}

macro_rules! on_each_backend {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            use super::*;
            #[test]
            fn process_root() { super::$case(User::Root) }
            #[test]
            fn process_nobody() { super::$case(User::Nobody) }
            #[test]
            fn gvisor_root() { on_backend("gvisor", || super::$case(User::Root)) }
            #[test]
            fn gvisor_nobody() { on_backend("gvisor", || super::$case(User::Nobody)) }
            #[test]
            fn container_root() { on_backend("container", || super::$case(User::Root)) }
            #[test]
            fn container_nobody() { on_backend("container", || super::$case(User::Nobody)) }
        }
    )*};
}

on_each_backend!(
    a_writable_root_made_a_link_is_not_followed,
    a_writable_root_beneath_the_project_made_a_link_is_not_followed,
    the_engine_socket_the_caller_names_is_hidden,
    agent_sockets_are_hidden,
    no_setuid_file_is_left_in_the_project,
    a_write_deny_directory_holding_another_stays_read_only,
);

// The project swapped for a link while runs start: on the process and gvisor backends only,
// which bind from descriptors. The container backend hands the engine paths, which it
// resolves again itself (docs/backends.md, "Bind sources are paths"): pinfold's check before
// it creates the container narrows the window but cannot close it, and with the victim
// running until three runs started (up to 240) a run as root did write in the home directory.
// The case stays out of the container runs until the engine is given sources it cannot be
// tricked on (a staging mount of pinfold's, as the gvisor helper makes).
mod a_project_swapped_for_a_link_never_becomes_writable {
    use super::*;
    #[test]
    fn process_root() { super::a_project_swapped_for_a_link_never_becomes_writable(User::Root) }
    #[test]
    fn process_nobody() { super::a_project_swapped_for_a_link_never_becomes_writable(User::Nobody) }
    #[test]
    fn gvisor_root() { on_backend("gvisor", || super::a_project_swapped_for_a_link_never_becomes_writable(User::Root)) }
    #[test]
    fn gvisor_nobody() { on_backend("gvisor", || super::a_project_swapped_for_a_link_never_becomes_writable(User::Nobody)) }
}
