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

/// A script that exchanges `a` and `b` (`renameat2(RENAME_EXCHANGE)`) again and again, for
/// at most 240 s or until `stop` appears in the base: each pair of exchanges puts them back,
/// and `waits` are the pauses after the first (the link in place) and the second.
fn swapper(fx: &Fx, name: &str, a: &std::path::Path, b: &std::path::Path, waits: (f64, f64)) -> Vec<String> {
    fx.py_script(
        name,
        &format!(
            "import ctypes, os, time\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             a, b = b{a:?}, b{b:?}\n\
             end = time.time() + 240\n\
             while time.time() < end and not os.path.exists({stop:?}):\n\
             \x20   libc.renameat2(-100, a, -100, b, 2); time.sleep({w1})\n\
             \x20   libc.renameat2(-100, a, -100, b, 2); time.sleep({w2})\n",
            a = Fx::s(a),
            b = Fx::s(b),
            stop = Fx::s(&fx.base.join("stop")),
            w1 = waits.0,
            w2 = waits.1,
        ),
    )
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
/// through the agent, with `~/.ssh` hidden.) So are servers that run what a client asks:
/// tmux's socket in its default place and the one `$TMUX` names, the session bus (found:
/// `tmux run-shell` from an allowed `python3 build.py` ran outside the sandbox).
fn agent_sockets_are_hidden(u: User) {
    let fx = Fx::new(u, "agent_sockets_are_hidden");
    let tmpdir = std::path::PathBuf::from(format!("/tmp/ssh-{}", fx.base.file_name().unwrap().to_string_lossy()));
    let _ = std::fs::remove_dir_all(&tmpdir);
    std::fs::create_dir(&tmpdir).expect("mkdir");
    std::fs::set_permissions(&tmpdir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let named = fx.base.join("named-agent.sock");
    let default = tmpdir.join(format!("agent.{}", std::process::id()));
    // Servers that run what a client asks (found: a tmux server reached through its socket
    // ran a command outside the sandbox): tmux's default place and the one `$TMUX` names, and
    // the session bus `$DBUS_SESSION_BUS_ADDRESS` names.
    let tmux_dir = std::path::PathBuf::from(format!("/tmp/tmux-{}", fx.base.file_name().unwrap().to_string_lossy()));
    let _ = std::fs::remove_dir_all(&tmux_dir);
    std::fs::create_dir(&tmux_dir).expect("mkdir");
    std::fs::set_permissions(&tmux_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tmux_default = tmux_dir.join("default");
    let tmux_named = fx.base.join("tmux.sock");
    let bus = fx.base.join("bus");
    let seen = Arc::new(AtomicUsize::new(0));
    for sock in [&named, &default, &tmux_default, &tmux_named, &bus] {
        counting_listener(sock, &seen);
    }
    let probe = fx.py_script(
        "probe",
        "import socket, sys\nfor p in sys.argv[1:]:\n    s = socket.socket(socket.AF_UNIX)\n    try:\n        s.connect(p); print('CONNECTED', p)\n    except OSError as e:\n        print('refused', e)\n",
    );
    let mut argv = probe.clone();
    argv.extend([&named, &default, &tmux_default, &tmux_named, &bus].iter().map(|p| Fx::s(p)));
    let control = fx.control(&argv);
    assert_eq!(control.stdout.matches("CONNECTED").count(), 5, "{}: CONTROL FAILED: the sockets must be reachable on the host\n{}", fx.label(), control.show());
    let before = seen.load(Ordering::SeqCst);
    let full = fx.exec_argv(&[], &argv);
    let mut c = fx.cmd(&full);
    c.env("SSH_AUTH_SOCK", &named);
    c.env("TMUX", format!("{},1234,0", Fx::s(&tmux_named)));
    c.env("DBUS_SESSION_BUS_ADDRESS", format!("unix:path={}", Fx::s(&bus)));
    let r = run_cmd(c, full.join(" "), None, TIMEOUT);
    let _ = std::fs::remove_dir_all(&tmpdir);
    let _ = std::fs::remove_dir_all(&tmux_dir);
    assert_eq!(r.stdout.matches("refused").count(), 5, "{}: the probe did not run\n{}", fx.label(), r.show());
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(seen.load(Ordering::SeqCst), before, "{}: a connection reached an agent socket\n{}", fx.label(), r.show());
}

/// The project swapped with a link to the home directory (`renameat2(RENAME_EXCHANGE)`, by a
/// command beside this run that may write the project's parent) while runs start: no run may
/// write in the home directory. (Found on all three backends: the working directory was
/// canonicalized through the link and the home directory became the writable project. Found
/// again in CI, gVisor as uid 65534: the policy was loaded for the working directory looked up
/// once more through the link, so its project root, made writable, was the home directory;
/// now the policy is found through one descriptor of the working directory, and a root that
/// is not above the command's working directory is refused.)
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
    let swapper = swapper(&fx, "swap", &p, &arena.join("l"), (0.003, 0.03));
    // The victim: a shell that is in the project before the swapping starts (as an agent's
    // shell is), running pinfold there again and again.
    let go = fx.base.join("go");
    let mut script = vec![
        "bash".to_string(),
        "-c".into(),
        // Eighty runs, and then more until three have started (a loaded machine's slow runs see
        // more swaps and are refused more often), at most 240 in all.
        format!(
            "cd {} || exit 1; while [ ! -e {} ]; do sleep 0.02; done; ok=0; for i in $(seq 240); do e=$(\"$@\" 2>&1 >/dev/null); r=$?; echo rc=$r; case $e in *'while the command ran, where the sandbox'*) echo tripped; ok=$((ok+1));; esac; [ $r = 0 ] && ok=$((ok+1)); [ $i -ge 80 ] && [ $ok -ge 3 ] && break; done",
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
    // A run the tripwire stopped saw the project swapped while it ran: refused, as a run
    // that started through the link is.
    let tripped = text.lines().filter(|l| *l == "tripped").count();
    eprintln!("{}: {started} of {} runs started, {tripped} stopped by the tripwire", fx.label(), text.lines().filter(|l| l.starts_with("rc=")).count());
    assert!(started + tripped > 0, "{}: no run started: the race proves nothing: {text}", fx.label());
}

/// A directory above deny paths (`a` of `a/b/w.txt`, `a/b/s.txt`) exchanged with a link to
/// elsewhere (`renameat2(RENAME_EXCHANGE)`, by a process beside the runs that may write the
/// project) again and again while runs start: no run may write the write-deny file or read
/// the hidden one; each is refused or runs with both protections. (Found on the container
/// backend by an outside attack: a run that resolved the deny paths while `a` was the link
/// protected the link's target, `a` was the real directory again when its command ran, and
/// 19 of 30 runs wrote `w.txt` and read `s.txt`.)
fn a_deny_paths_directory_swapped_for_a_link_leaves_it_protected(u: User) {
    let mut fx = Fx::new(u, "a_deny_paths_directory_swapped_for_a_link_leaves_it_protected");
    fx.put(&fx.proj.join("a/b/w.txt"), "");
    fx.put(&fx.proj.join("a/b/s.txt"), "SECRET-S\n");
    let elsewhere = fx.base.join("elsewhere");
    fx.put(&elsewhere.join("b/w.txt"), "");
    std::os::unix::fs::symlink(&elsewhere, fx.proj.join("evil")).expect("symlink");
    use_policy(&mut fx, "[defaults]\naction = \"allow\"\nsandbox = \"c\"\n\n[sandbox.c]\nfs.write.allow = [\".\"]\nfs.write.deny = [\"a/b/w.txt\"]\nfs.read.deny = [\"a/b/s.txt\"]\n");
    let victim = fx.sh_script("victim", "(echo V >> a/b/w.txt) 2>/dev/null; cat a/b/s.txt 2>/dev/null; echo ran");
    let swapper = swapper(&fx, "swapdeny", &fx.proj.join("a"), &fx.proj.join("evil"), (0.002, 0.01));
    let mut attacker = fx.cmd(&swapper).stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().expect("start the swapper");
    let (mut started, mut out) = (0, String::new());
    for _ in 0..40 {
        let r = fx.exec(&[], &victim);
        // A run the tripwire stopped saw `a` swapped while it ran: refused, as it should be.
        if r.stdout.contains("ran") || r.stderr.contains("while the command ran, where the sandbox") {
            started += 1;
        }
        out.push_str(&r.stdout);
    }
    std::fs::write(fx.base.join("stop"), "").ok();
    let _ = attacker.kill();
    let _ = attacker.wait();
    // The real directory is under one of the two names, wherever the swapper left it.
    let real = if fx.proj.join("a").is_symlink() { fx.proj.join("evil") } else { fx.proj.join("a") };
    let written = std::fs::read_to_string(real.join("b/w.txt")).unwrap_or_default();
    eprintln!("{}: {started} of 40 runs started", fx.label());
    assert_eq!(written, "", "{}: the write-deny file was written", fx.label());
    assert!(!out.contains("SECRET-S"), "{}: the hidden file was read", fx.label());
    assert!(started > 0, "{}: no run started: the race proves nothing", fx.label());
}

/// A directory above deny paths renamed: by a run itself (`mv x x2`, then the next run writes
/// `x2/a/b/w.txt`), and on the host while a run is going (`mv x y` mid-run, the run then uses
/// `y/…`). The file stays read-only and the hidden directory hidden under any name. (Found by
/// an outside attack: on gVisor the protections did not follow a directory renamed mid-run,
/// and on gVisor and in containers a run could rename a directory above the deny paths, only
/// their parent being pinned.)
fn a_deny_paths_directory_renamed_keeps_it_protected(u: User) {
    let mut fx = Fx::new(u, "a_deny_paths_directory_renamed_keeps_it_protected");
    fx.put(&fx.proj.join("x/a/b/w.txt"), "ORIG\n");
    fx.put(&fx.proj.join("x/a/sec/key"), "TOPSECRET\n");
    use_policy(&mut fx, "[defaults]\naction = \"allow\"\nsandbox = \"c\"\n\n[undo]\nenabled = false\n\n[sandbox.c]\nfs.write.allow = [\".\"]\nfs.write.deny = [\"x/a/b/w.txt\"]\nfs.read.deny = [\"x/a/sec\"]\n");
    let rename = fx.sh_script("rename", "mv x x2 2>/dev/null && echo MOVED; mv x/a x/a2 2>/dev/null && echo MOVED2; echo done");
    let r = fx.exec(&[], &rename);
    assert!(r.stdout.contains("done"), "{}: the run did not run\n{}", fx.label(), r.show());
    let use_ = fx.sh_script("use", "for d in x x2 x/a2; do (echo P >> $d/a/b/w.txt; echo P >> $d/b/w.txt) 2>/dev/null; cat $d/a/sec/key $d/sec/key 2>/dev/null; done; echo used");
    let r = fx.exec(&[], &use_);
    assert!(r.stdout.contains("used"), "{}: the run did not run\n{}", fx.label(), r.show());
    assert!(!r.stdout.contains("TOPSECRET"), "{}: the hidden directory was read after a rename\n{}", fx.label(), r.show());
    let real = ["x/a/b/w.txt", "x2/a/b/w.txt", "x/a2/b/w.txt"].iter().map(|p| fx.proj.join(p)).find(|p| p.exists()).expect("the file");
    assert_eq!(std::fs::read_to_string(&real).unwrap(), "ORIG\n", "{}: the write-deny file was written after a rename", fx.label());
    // Put it back as it was, then rename on the host while a run is going.
    for (from, to) in [("x/a2", "x/a"), ("x2", "x")] {
        let _ = std::fs::rename(fx.proj.join(from), fx.proj.join(to));
    }
    let mid = fx.sh_script("mid", "cat x/a/sec/key 2>/dev/null; touch started; sleep 3; cat y/a/sec/key 2>/dev/null; (echo P >> y/a/b/w.txt) 2>/dev/null; echo used");
    let full = fx.exec_argv(&[], &mid);
    let child = fx.cmd(&full).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().expect("start the run");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !fx.proj.join("started").exists() {
        assert!(std::time::Instant::now() < deadline, "{}: the run never started", fx.label());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::rename(fx.proj.join("x"), fx.proj.join("y")).expect("rename on the host");
    let out = child.wait_with_output().expect("the run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("used"), "{}: the run did not finish: {stdout} {}", fx.label(), String::from_utf8_lossy(&out.stderr));
    assert!(!stdout.contains("TOPSECRET"), "{}: the hidden directory was read after a rename on the host: {stdout}", fx.label());
    assert_eq!(std::fs::read_to_string(fx.proj.join("y/a/b/w.txt")).unwrap(), "ORIG\n", "{}: the write-deny file was written after a rename on the host", fx.label());
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

/// A link a command planted in the project, to the home directory (`ln -s ~ sub`), and the
/// next run started in `sub`, by a shell's `cd sub` (`$PWD` names the link) or `--cwd sub`:
/// refused, and the home directory gets nothing. (Found by an outside attack on every
/// backend, as root and uid 65534: the home directory became the next run's project, and a
/// run wrote another repository's `.git/hooks/pre-commit` in it.)
fn a_link_planted_out_of_the_project_is_no_way_in(u: User) {
    let mut fx = Fx::new(u, "a_link_planted_out_of_the_project_is_no_way_in");
    use_policy(&mut fx, "[defaults]\naction = \"allow\"\nsandbox = \"c\"\n\n[undo]\nenabled = false\n\n[sandbox.c]\nfs.write.allow = [\".\"]\n");
    fx.put(&fx.home.join("otherproj/.git/hooks/.keep"), "");
    fx.own();
    let plant = fx.sh_script("plant", &format!("rm -rf sub && ln -s {} sub && echo planted", Fx::s(&fx.home)));
    let r = fx.exec(&[], &plant);
    assert!(r.stdout.contains("planted"), "{}: the link was not planted\n{}", fx.label(), r.show());
    let write: Vec<String> = vec!["bash".into(), "-c".into(), "echo PWN >> notes.txt; echo 'echo HOOK' > otherproj/.git/hooks/pre-commit; echo wrote".into()];
    let named = fx.proj.join("sub");
    let refused = |fx: &Fx, r: &crate::support::Run, how: &str| {
        assert!(!r.stdout.contains("wrote") && r.code != Some(0), "{}: {how}: the run in the link's target ran\n{}", fx.label(), r.show());
        assert!(r.stderr.contains("a link inside the project") || r.stderr.contains("the home directory or above it"), "{}: {how}: refused for another reason\n{}", fx.label(), r.show());
    };
    // A shell that did `cd sub`: in the home directory, its `$PWD` naming the link.
    let project_cwd = std::mem::replace(&mut fx.cwd, fx.home.clone());
    fx.env.insert("PWD".into(), Fx::s(&named));
    let r = fx.exec(&[], &write);
    fx.cwd = project_cwd;
    fx.env.remove("PWD");
    refused(&fx, &r, "cd sub");
    let r = fx.exec(&["--cwd", &Fx::s(&named)], &write);
    refused(&fx, &r, "--cwd sub");
    assert!(!fx.home.join("notes.txt").exists(), "{}: the home directory was written", fx.label());
    assert!(!fx.home.join("otherproj/.git/hooks/pre-commit").exists(), "{}: another repository's hook was written", fx.label());
    // The control: the same command from the project runs.
    let r = fx.exec(&[], &["bash".into(), "-c".into(), "echo ok > fine.txt; echo wrote".into()]);
    assert!(r.stdout.contains("wrote"), "{}: the control did not run\n{}", fx.label(), r.show());
}

/// `--report` in the project, where the command put a link to a file of the home directory
/// (`ln -sf ~/victim report.json`), or where a FIFO is: the report is not written to either, the
/// file keeps its content, and pinfold does not hang. (Found by an outside attack on every
/// backend, as root and uid 65534: the report overwrote `~/victim` after the run.)
fn a_report_is_never_written_through_what_the_command_planted(u: User) {
    let mut fx = Fx::new(u, "a_report_is_never_written_through_what_the_command_planted");
    use_policy(&mut fx, "[defaults]\naction = \"allow\"\nsandbox = \"c\"\n\n[undo]\nenabled = false\n\n[sandbox.c]\nfs.write.allow = [\".\"]\n");
    fx.put(&fx.home.join("victim"), "KEEP\n");
    fx.own();
    let report = fx.proj.join("report.json");
    let plant = fx.sh_script("plant", &format!("ln -sf {} report.json && echo planted", Fx::s(&fx.home.join("victim"))));
    let r = fx.exec(&["--report", &Fx::s(&report)], &plant);
    assert!(r.stdout.contains("planted"), "{}: the link was not planted\n{}", fx.label(), r.show());
    assert_ne!(r.code, Some(0), "{}: a report through a link counted as written\n{}", fx.label(), r.show());
    assert!(r.stderr.contains("never written through"), "{}\n{}", fx.label(), r.show());
    assert_eq!(std::fs::read_to_string(fx.home.join("victim")).unwrap(), "KEEP\n", "{}: the report was written through the link", fx.label());
    let _ = std::fs::remove_file(&report);
    // The report's directory a link an earlier run planted (`out -> ~`): refused too.
    std::os::unix::fs::symlink(&fx.home, fx.proj.join("out")).unwrap();
    fx.own();
    let r = fx.exec(&["--report", &Fx::s(&fx.proj.join("out/report.json"))], &["true".into()]);
    assert!(r.code != Some(0) && r.stderr.contains("a link inside a project"), "{}: the report's directory through a link\n{}", fx.label(), r.show());
    assert!(!fx.home.join("report.json").exists(), "{}: the report was written in the home directory", fx.label());
    std::fs::remove_file(fx.proj.join("out")).unwrap();
    // A FIFO at the name (one an earlier run on the process backend made: gVisor's and a
    // container's stay inside them): not opened to block, not written.
    assert!(std::process::Command::new("mkfifo").arg(&report).status().expect("mkfifo").success());
    fx.own();
    let r = fx.exec(&["--report", &Fx::s(&report)], &["true".into()]);
    assert!(!r.timed_out && r.code != Some(0), "{}: a FIFO took the report\n{}", fx.label(), r.show());
    assert!(r.stderr.contains("not a regular file"), "{}\n{}", fx.label(), r.show());
    let _ = std::fs::remove_file(&report);
    // The control: a plain run writes it.
    let r = fx.exec(&["--report", &Fx::s(&report)], &["true".into()]);
    assert_eq!(r.code, Some(0), "{}\n{}", fx.label(), r.show());
    assert!(std::fs::read_to_string(&report).unwrap_or_default().contains("\"backend\""), "{}: no report", fx.label());
}

/// The home directory as the next run's project by a detour (found by a second outside
/// attack, every backend, root and uid 65534): a shell that went `cd sub` while `sub` was a
/// link to the home directory, the link since put back (`$PWD` names the real `sub` again);
/// `sub` a link to the home directory in a plain directory (no `.git`, no policy file); and a
/// cache root the default preset writes (`~/.npm/_cacache`) made a link to the home
/// directory by a run there. Each is refused, and the home directory gets nothing.
fn the_home_directory_is_never_reached_by_a_detour(u: User) {
    let mut fx = Fx::new(u, "the_home_directory_is_never_reached_by_a_detour");
    use_policy(&mut fx, "extends = [\"pinfold:default\"]\n[defaults]\naction = \"allow\"\n\n[undo]\nenabled = false\n");
    let write: Vec<String> = vec!["bash".into(), "-c".into(), "echo PWN >> notes.txt; echo wrote".into()];
    let project_cwd = fx.cwd.clone();
    let in_home_named = |fx: &mut Fx, named: &std::path::Path, how: &str| {
        fx.cwd = fx.home.clone();
        fx.env.insert("PWD".into(), Fx::s(named));
        let r = fx.exec(&[], &write);
        fx.cwd = project_cwd.clone();
        fx.env.remove("PWD");
        assert!(!r.stdout.contains("wrote") && r.code != Some(0), "{}: {how}: ran in the home directory\n{}", fx.label(), r.show());
        assert!(r.stderr.contains("the home directory or above it"), "{}: {how}: refused for another reason\n{}", fx.label(), r.show());
    };
    // `$PWD` names the real `sub` again; the shell is in the home directory.
    std::fs::create_dir_all(fx.proj.join("sub")).unwrap();
    fx.own();
    let sub = fx.proj.join("sub");
    in_home_named(&mut fx, &sub, "a link put back");
    // A plain directory's `sub` as a link to the home directory, by `cd` and by `--cwd`.
    let plain = fx.base.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    std::os::unix::fs::symlink(&fx.home, plain.join("sub")).unwrap();
    fx.own();
    let plain_sub = plain.join("sub");
    in_home_named(&mut fx, &plain_sub, "cd plain/sub");
    let r = fx.exec(&["--cwd", &Fx::s(&plain.join("sub"))], &write);
    assert!(!r.stdout.contains("wrote") && r.code != Some(0), "{}: --cwd plain/sub ran\n{}", fx.label(), r.show());
    assert!(!fx.home.join("notes.txt").exists(), "{}: the home directory was written", fx.label());
    // The cache root made a link to the home directory (as a run in the home directory can):
    // the next run in the project does not get it as a writable root.
    std::fs::create_dir_all(fx.home.join(".npm")).unwrap();
    std::os::unix::fs::symlink(&fx.home, fx.home.join(".npm/_cacache")).unwrap();
    fx.own();
    let r = fx.exec(&[], &["bash".into(), "-c".into(), format!("echo PWN >> {}/notes.txt; echo PWN >> {}/.npm/_cacache/notes.txt; echo done", Fx::s(&fx.home), Fx::s(&fx.home))]);
    assert!(r.stdout.contains("done") || r.code == Some(125), "{}\n{}", fx.label(), r.show());
    assert!(!fx.home.join("notes.txt").exists(), "{}: the home directory was written through a cache root that is a link\n{}", fx.label(), r.show());
    // The same link to a directory below the home directory (`~/.local/bin`): the cache root
    // is not taken, and nothing lands there (found by a third attack: 8 of 8 wrote).
    std::fs::remove_file(fx.home.join(".npm/_cacache")).unwrap();
    std::fs::create_dir_all(fx.home.join(".local/bin")).unwrap();
    std::os::unix::fs::symlink(fx.home.join(".local/bin"), fx.home.join(".npm/_cacache")).unwrap();
    fx.own();
    let r = fx.exec(&[], &["bash".into(), "-c".into(), format!("echo evil > {}/.npm/_cacache/git; echo done", Fx::s(&fx.home))]);
    assert!(r.stdout.contains("done"), "{}\n{}", fx.label(), r.show());
    assert!(!fx.home.join(".local/bin/git").exists(), "{}: a program was planted in ~/.local/bin through the cache link\n{}", fx.label(), r.show());
    std::fs::remove_file(fx.home.join(".npm/_cacache")).unwrap();
    // A plain directory's link to the directory above the home directory.
    let up = fx.home.parent().unwrap().to_path_buf();
    std::os::unix::fs::symlink(&up, plain.join("up")).unwrap();
    fx.own();
    fx.cwd = up.clone();
    fx.env.insert("PWD".into(), Fx::s(&plain.join("up")));
    let r = fx.exec(&[], &write);
    fx.cwd = project_cwd.clone();
    fx.env.remove("PWD");
    assert!(!r.stdout.contains("wrote") && r.stderr.contains("the home directory or above it"), "{}: cd plain/up\n{}", fx.label(), r.show());
    // `--report` through a link below the working directory, in a plain directory.
    std::os::unix::fs::symlink(&fx.home, plain.join("out")).unwrap();
    fx.own();
    fx.cwd = plain.clone();
    let r = fx.exec(&["--report", "out/.bashrc"], &["true".into()]);
    fx.cwd = project_cwd.clone();
    assert!(r.code != Some(0) && r.stderr.contains("a link below the working directory"), "{}: --report out/.bashrc\n{}", fx.label(), r.show());
    assert_eq!(std::fs::read_to_string(fx.home.join(".bashrc")).unwrap(), "# original bashrc\n", "{}: the report overwrote ~/.bashrc", fx.label());
    // The control: with the links gone, the same run works.
    let r = fx.exec(&[], &["bash".into(), "-c".into(), "echo ok > fine.txt; echo wrote".into()]);
    assert!(r.stdout.contains("wrote"), "{}: the control did not run\n{}", fx.label(), r.show());
}

/// A read-deny file the project lacks, which a command makes a hard link to a file it keeps
/// (`ln leak .env`): a secret copied into `.env` later (`cp` writes into the file that is
/// there) would be readable through `leak`. The missing path holds a placeholder for the run,
/// so nothing can be made there; a secret file with another name (made on the host here, as
/// a run before the fix could have) is refused, with the secret never shown; with the other
/// name gone, the same run works and the secret stays hidden (the control).
fn a_secret_is_never_read_through_another_name(u: User) {
    let mut fx = Fx::new(u, "a_secret_is_never_read_through_another_name");
    use_policy(&mut fx, "[defaults]\naction = \"allow\"\nsandbox = \"c\"\n\n[sandbox.c]\nfs.write.allow = [\".\"]\nfs.read.deny = [\".env\", \"secrets\", \"~/.ssh\"]\n");
    let env = fx.proj.join(".env");
    let plant = fx.sh_script(
        "plant",
        "echo keep > leak; ln leak .env 2>/dev/null && echo LINKED; ln -s leak .env 2>/dev/null && echo SYMLINKED; \
         mkdir -p secrets 2>/dev/null && ln leak secrets/key 2>/dev/null && echo DIR-LINKED; echo planted",
    );
    let r = fx.exec(&[], &plant);
    assert!(r.stdout.contains("planted"), "{}: the plant did not run\n{}", fx.label(), r.show());
    assert!(!r.stdout.contains("LINKED"), "{}: a name was made where a secret is to be\n{}", fx.label(), r.show());
    assert!(std::fs::symlink_metadata(&env).is_err(), "{}: .env exists on the host after the run", fx.label());
    assert!(std::fs::symlink_metadata(fx.proj.join("secrets")).is_err(), "{}: secrets/ exists on the host after the run", fx.label());
    // A secret with a second name in the project, and one in a hidden directory.
    fx.put(&env, "TOKEN=hunter2-secret\n");
    std::fs::hard_link(&env, fx.proj.join("leak2")).unwrap();
    fx.own();
    let read = fx.sh_script("read", "cat leak2 .env 2>&1; echo read");
    let r = fx.exec(&[], &read);
    assert!(!r.stdout.contains("hunter2") && !r.stderr.contains("hunter2"), "{}: the secret was read through its other name\n{}", fx.label(), r.show());
    assert_eq!(r.code, Some(125), "{}: the run must be refused\n{}", fx.label(), r.show());
    assert!(r.stderr.contains("hard links"), "{}\n{}", fx.label(), r.show());
    std::fs::remove_file(fx.proj.join("leak2")).unwrap();
    fx.put(&fx.proj.join("secrets/key"), "KEY=swordfish-secret\n");
    std::fs::hard_link(fx.proj.join("secrets/key"), fx.proj.join("leak3")).unwrap();
    fx.own();
    let read = fx.sh_script("read3", "cat leak3 2>&1; echo read");
    let r = fx.exec(&[], &read);
    assert!(!r.stdout.contains("swordfish"), "{}: a file in a hidden directory was read through its other name\n{}", fx.label(), r.show());
    assert_eq!(r.code, Some(125), "{}: the run must be refused\n{}", fx.label(), r.show());
    std::fs::remove_file(fx.proj.join("leak3")).unwrap();
    // A file in a hidden directory outside the project with a second name (found:
    // `~/.ssh/id_rsa` read as `~/backup/id_rsa`).
    std::fs::hard_link(fx.home.join(".ssh/id_rsa"), fx.out.join("id_rsa.bak")).unwrap();
    let read = fx.sh_script("read5", &format!("cat {} 2>&1; echo read", Fx::s(&fx.out.join("id_rsa.bak"))));
    let r = fx.exec(&[], &read);
    assert!(!r.stdout.contains(&fx.token), "{}: a key in a hidden directory was read through its other name\n{}", fx.label(), r.show());
    assert_eq!(r.code, Some(125), "{}: the run must be refused\n{}", fx.label(), r.show());
    std::fs::remove_file(fx.out.join("id_rsa.bak")).unwrap();
    // The control: with the other names gone, the run works and the secrets stay hidden.
    let read = fx.sh_script("read4", "cat .env secrets/key 2>&1; echo read");
    let r = fx.exec(&[], &read);
    assert!(r.stdout.contains("read"), "{}: the control did not run\n{}", fx.label(), r.show());
    assert!(!r.stdout.contains("hunter2") && !r.stdout.contains("swordfish"), "{}: a hidden secret was read\n{}", fx.label(), r.show());
}

/// Run `script` in the sandbox while, once it has made `ready` in the project, `change` runs
/// on the host as the case's user (the user's own edit); `changed` is made in the project a
/// moment after the change. The sandbox's run.
fn run_while_the_host_changes(fx: &Fx, script: &[String], change: &str) -> crate::support::Run {
    let (ready, changed) = (fx.proj.join("ready"), fx.proj.join("changed"));
    let _ = std::fs::remove_file(&ready);
    let _ = std::fs::remove_file(&changed);
    std::thread::scope(|s| {
        let host = s.spawn(|| {
            let end = std::time::Instant::now() + std::time::Duration::from_secs(120);
            while !ready.exists() && std::time::Instant::now() < end {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            std::thread::sleep(std::time::Duration::from_millis(300));
            let argv: Vec<String> = vec!["bash".into(), "-c".into(), format!("{change} && sleep 0.3 && touch changed")];
            let r = run_cmd(fx.cmd(&argv), change.into(), None, TIMEOUT);
            assert_eq!(r.code, Some(0), "{}: the host's change failed\n{}", fx.label(), r.show());
        });
        let r = fx.exec(&[], script);
        host.join().expect("the host's change");
        r
    })
}

/// A protected path the user changes on the host while a command runs: the kernel detaches
/// a mount on a directory entry the host renames over or removes, in every other mount
/// namespace, so the sandbox's cover would be gone for the rest of the run (found: a secret
/// the user saved with `sed -i` read by the command still running; `.git/config` rewritten
/// by the user's `git config` then written by the command, its `core.fsmonitor` run by the
/// user's next `git status`; `~/.aws` made during the run read). The run is stopped (125)
/// before the command, told of the change a moment later, reads or writes anything; a run
/// that is not stopped ends 0 and shows what it got. (A command that happens to look within
/// the moment between the change and the stop can still reach the new file: see
/// docs/design/threat-model.md.)
fn a_protected_path_the_host_changes_stops_the_run(u: User) {
    let mut fx = Fx::new(u, "a_protected_path_the_host_changes_stops_the_run");
    use_policy(
        &mut fx,
        "[defaults]\naction = \"allow\"\nsandbox = \"c\"\n\n[sandbox.c]\nfs.write.allow = [\".\"]\nfs.write.deny = [\".git/config\", \".git/hooks\"]\nfs.read.deny = [\".env\", \"secrets\", \"~/.ssh\", \"~/.netrc\"]\n\n[undo]\nenabled = false\n",
    );
    fx.put(&fx.proj.join(".env"), "TOKEN=old-secret\n");
    fx.put(&fx.proj.join("secrets/k"), "KEY=old-key\n");
    fx.own();
    let mark = fx.out.join("fsmonitor-ran");
    fx.put(&fx.out.join("evil.sh"), &format!("#!/bin/sh\necho ran >> {}\n", Fx::s(&mark)));
    std::fs::set_permissions(fx.out.join("evil.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    fx.own();
    let watch = fx.sh_script(
        "watch",
        &format!(
            "cat .env secrets/k {netrc} >/dev/null 2>&1; touch ready\n\
             for i in $(seq 1 2000); do [ -e changed ] && break; sleep 0.01; done\n\
             for f in .env secrets/k {netrc}; do v=$(cat $f 2>/dev/null) && [ -n \"$v\" ] && echo \"GOT $f: $v\"; done\n\
             printf '[core]\\n\\tfsmonitor = {evil}\\n' >> .git/config 2>/dev/null && echo WROTE-CONFIG\n\
             echo looked",
            netrc = Fx::s(&fx.home.join(".netrc")),
            evil = Fx::s(&fx.out.join("evil.sh")),
        ),
    );
    let stopped = |r: &crate::support::Run, what: &str| {
        assert!(!r.stdout.contains("new-"), "{}: {what}: the command read what the host wrote\n{}", fx.label(), r.show());
        assert!(!r.stdout.contains("WROTE-CONFIG"), "{}: {what}: the command wrote .git/config\n{}", fx.label(), r.show());
        assert_eq!(r.code, Some(125), "{}: {what}: the run must be stopped\n{}", fx.label(), r.show());
        assert!(r.stderr.contains("while the command ran, where the sandbox"), "{}: {what}\n{}", fx.label(), r.show());
        let config = std::fs::read_to_string(fx.proj.join(".git/config")).unwrap_or_default();
        assert!(!config.contains("fsmonitor"), "{}: {what}: .git/config holds the command's line:\n{config}", fx.label());
    };
    // A secret saved the way editors and `sed -i` save: a new file renamed over it.
    let r = run_while_the_host_changes(&fx, &watch, "printf 'TOKEN=new-secret\\n' > .env.new && mv .env.new .env");
    stopped(&r, "a read-deny file replaced");
    // A read-deny directory replaced.
    let r = run_while_the_host_changes(&fx, &watch, "mkdir secrets.new && printf 'KEY=new-key\\n' > secrets.new/k && mv secrets secrets.old && mv secrets.new secrets");
    stopped(&r, "a read-deny directory replaced");
    // A write-deny control file rewritten by git (a lock file renamed over it); then the
    // user's next git command, which would run a planted fsmonitor.
    let r = run_while_the_host_changes(&fx, &watch, "git config user.name user-edit");
    stopped(&r, "a write-deny file replaced");
    let _ = fx.control(&["git".into(), "-c".into(), "safe.directory=*".into(), "status".into()]);
    assert!(!mark.exists(), "{}: the command's fsmonitor ran on the host", fx.label());
    // A read-deny path outside the writable roots, missing at the start, made by the user.
    let r = run_while_the_host_changes(&fx, &watch, &format!("printf 'machine x password new-netrc\\n' > {}", Fx::s(&fx.home.join(".netrc"))));
    if fx.backend == Some("container") {
        // A container has nothing of the host's home: the run goes on, and reads nothing.
        assert!(!r.stdout.contains("new-"), "{}: a container read the home directory\n{}", fx.label(), r.show());
        assert_eq!(r.code, Some(0), "{}: a change outside what a container has stopped it\n{}", fx.label(), r.show());
    } else {
        stopped(&r, "a missing read-deny path made");
    }
    // A second name of the control file, as a command could have made it in the moment
    // before a stop (found: `ln .git/config .git/x` once the cover was gone, then written
    // through `x` for good): every later run is refused until it is gone.
    let config = fx.proj.join(".git/config");
    if !config.exists() {
        // (Moved aside by the control-file check as the run was stopped.)
        std::fs::rename(fx.proj.join(".git/config.pinfold-planted"), &config).unwrap();
    }
    std::fs::hard_link(&config, fx.proj.join(".git/x")).unwrap();
    let r = fx.exec(&[], &["true".into()]);
    assert_eq!(r.code, Some(125), "{}: a control file with a second name must be refused\n{}", fx.label(), r.show());
    assert!(r.stderr.contains("hard links"), "{}\n{}", fx.label(), r.show());
    std::fs::remove_file(fx.proj.join(".git/x")).unwrap();
    // The control: with nothing changed on the host, the same command runs to its end.
    let _ = std::fs::remove_file(fx.home.join(".netrc"));
    let quick = fx.sh_script("quick", "cat .env secrets/k 2>&1 | grep -c old; touch ready; echo looked");
    let r = fx.exec(&[], &quick);
    assert_eq!(r.code, Some(0), "{}: the control did not run\n{}", fx.label(), r.show());
    assert!(r.stdout.contains("looked") && !r.stdout.contains("old-secret"), "{}: the control\n{}", fx.label(), r.show());
}

/// A symbolic link inside a hidden directory (`~/.ssh/id_ed25519 -> ~/dotfiles/ssh/id`,
/// `secrets/api.key -> /vault/api.key`): covering the directory hid the link, and the file
/// stayed readable at its real path. What such a link leads to is hidden with it; a file
/// beside it that no hidden link leads to stays readable (the control).
fn a_link_in_a_hidden_directory_hides_its_target(u: User) {
    let mut fx = Fx::new(u, "a_link_in_a_hidden_directory_hides_its_target");
    use_policy(&mut fx, "[defaults]\naction = \"allow\"\nsandbox = \"c\"\n\n[sandbox.c]\nfs.write.allow = [\".\"]\nfs.read.deny = [\"secrets\", \"~/.ssh\"]\n");
    // (In the project: a container has nothing else of the host.)
    let vault = fx.proj.join("vault");
    fx.put(&vault.join("api.key"), "API=vault-api-secret\n");
    fx.put(&vault.join("ssh/id"), "SSH=vault-ssh-secret\n");
    fx.put(&vault.join("plain.txt"), "PLAIN=readable\n");
    std::fs::create_dir_all(fx.proj.join("secrets")).unwrap();
    std::os::unix::fs::symlink(vault.join("api.key"), fx.proj.join("secrets/api.key")).unwrap();
    std::os::unix::fs::symlink(vault.join("ssh"), fx.home.join(".ssh/keys")).unwrap();
    fx.own();
    let read = fx.sh_script(
        "read",
        &format!("cat secrets/api.key {home}/.ssh/keys/id {v}/api.key {v}/ssh/id {v}/plain.txt 2>&1; echo read", home = Fx::s(&fx.home), v = Fx::s(&vault)),
    );
    let r = fx.exec(&[], &read);
    assert!(r.stdout.contains("read"), "{}: the command did not run\n{}", fx.label(), r.show());
    assert!(!r.stdout.contains("vault-api-secret"), "{}: a hidden link's file was read\n{}", fx.label(), r.show());
    assert!(!r.stdout.contains("vault-ssh-secret"), "{}: a hidden link's directory was read\n{}", fx.label(), r.show());
    assert!(r.stdout.contains("PLAIN=readable"), "{}: the control: a file no hidden link leads to\n{}", fx.label(), r.show());
    // A hidden link to a directory holding the project: refused, not hidden with the project.
    std::os::unix::fs::symlink(&fx.base, fx.proj.join("secrets/up")).unwrap();
    fx.own();
    let r = fx.exec(&[], &["true".into()]);
    assert_eq!(r.code, Some(125), "{}: a hidden link to the project's parent must refuse the run\n{}", fx.label(), r.show());
    assert!(r.stderr.contains("holds the project"), "{}\n{}", fx.label(), r.show());
}

/// What one run leaves in pinfold's run directory while it goes — a gVisor run's bundle (its
/// `config.json` holds the environment, a kept secret among it), a container run's staged bind
/// sources (the project itself, hidden files and all) — is out of reach of every other run,
/// on every backend. (Found by an outside attack: a process-backend run beside a container
/// run read a hidden file through `stage-*/0/`, and one beside a gVisor run read the kept
/// secret from the bundle.) The control: on the host, the neighbour's secret is in the run
/// directory while it runs.
fn another_runs_files_are_out_of_reach(u: User) {
    let mut fx = Fx::new(u, "another_runs_files_are_out_of_reach");
    use_policy(&mut fx, "[defaults]\naction = \"allow\"\nsandbox = \"c\"\n\n[sandbox.c]\nfs.write.allow = [\".\"]\nfs.read.deny = [\"~/.ssh\", \"secret.txt\"]\n");
    let base = fx.run_dir.join("pinfold");
    let probe = fx.sh_script("probe", &format!("grep -rsl -- {} {} ; echo probed", fx.token, Fx::s(&base)));
    let mut neighbours = vec!["gvisor"];
    if u == User::Root {
        neighbours.push("container");
    }
    let own = fx.backend;
    for n in neighbours {
        fx.backend = Some(n);
        let argv = fx.exec_argv(&["--keep-env", "NEIGHBOUR_SECRET"], &["sleep".into(), "4".into()]);
        let mut c = fx.cmd(&argv);
        c.env("NEIGHBOUR_SECRET", &fx.token);
        if n == "container" {
            c.env("DOCKER_HOST", &crate::support::container::engine_for(u).host);
        }
        let mut child = c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().expect("spawn the neighbour");
        // The control: the neighbour's secret lies in the run directory while it runs.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let seen = loop {
            let found = std::process::Command::new("grep").args(["-rsl", "--", &fx.token, &Fx::s(&base)]).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
            if !found.trim().is_empty() || std::time::Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        assert!(!seen.trim().is_empty(), "{}: CONTROL FAILED: the {n} neighbour's secret is not in the run directory", fx.label());
        fx.backend = own;
        let r = fx.exec(&[], &probe);
        let mut err = String::new();
        let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut err));
        let _ = child.wait();
        assert!(r.stdout.contains("probed"), "{}: the probe did not run\n{}", fx.label(), r.show());
        assert!(!r.stdout.contains(&Fx::s(&base)), "{}: a run read the {n} neighbour's files (host saw them at {seen})\n{}\nneighbour: {err}", fx.label(), r.show());
    }
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
    a_project_swapped_for_a_link_never_becomes_writable,
    a_deny_paths_directory_swapped_for_a_link_leaves_it_protected,
    a_deny_paths_directory_renamed_keeps_it_protected,
    a_link_planted_out_of_the_project_is_no_way_in,
    a_report_is_never_written_through_what_the_command_planted,
    the_home_directory_is_never_reached_by_a_detour,
    a_secret_is_never_read_through_another_name,
    a_protected_path_the_host_changes_stops_the_run,
    a_link_in_a_hidden_directory_hides_its_target,
    another_runs_files_are_out_of_reach,
);

