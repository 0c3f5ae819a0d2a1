//! `pinfold exec` with the network off: nothing reaches a host listener (TCP, UDP, IPv4, IPv6,
//! DNS), no internet socket can be made, no host abstract unix socket or container-engine
//! socket answers; with `--net on` loopback is reachable. Fixture: `support/sandbox.rs`.

use std::fs;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::PathBuf;

use crate::support::sandbox::*;
use crate::support::*;

// ---------------------------------------------------------------------------------------------
// Network (loopback only)
// ---------------------------------------------------------------------------------------------

both_users!(
    net_curl_and_dev_tcp,
    net_udp_sendto_and_ipv6,
    net_dns_query,
    net_inet_sockets_refused,
    abstract_unix_socket,
    container_engine_sockets_hidden,
);

/// A network attack: the control must reach a host listener; inside, nothing may arrive.
fn net_case(u: User, name: &str, script: &dyn Fn(&Fx, &Listeners) -> Vec<String>) {
    let c = Fx::new(u, name);
    let l = Listeners::new();
    let r = c.control(&script(&c, &l));
    c.assert_control(&r, &l.arrivals(), false);
    let a = Fx::new(u, name);
    let l = Listeners::new();
    let r = a.exec(&[], &script(&a, &l));
    a.assert_refused(&r, &l.arrivals());
}

/// curl and bash's `/dev/tcp` reach no host listener.
pub(crate) fn net_curl_and_dev_tcp(u: User) {
    net_case(u, "net_curl_and_dev_tcp", &|fx, l| {
        fx.sh_script(
            "curl",
            &format!(
                "curl -sS -m 3 http://127.0.0.1:{p}/ 2>&1; echo curl=$?\n\
                 curl -sS -m 3 --noproxy '*' http://localhost:{p}/ 2>&1; echo curl-localhost=$?\n\
                 (exec 3<>/dev/tcp/127.0.0.1/{p} && echo hi >&3) 2>&1; echo devtcp=$?\n\
                 (exec 3<>/dev/tcp/::1/{p6} && echo hi >&3) 2>&1; echo devtcp6=$?\n",
                p = l.tcp4,
                p6 = l.tcp6
            ),
        )
    });
}

/// UDP `sendto`: raw AF_INET/AF_INET6 datagrams, and TCP to ::1, reach no host listener.
pub(crate) fn net_udp_sendto_and_ipv6(u: User) {
    net_case(u, "net_udp_sendto_and_ipv6", &|fx, l| {
        let mut argv = fx.py_script("udp", include_str!("attacks/udp_and_ipv6.py"));
        argv.push(l.udp4.local_addr().expect("addr").port().to_string());
        argv.push(l.udp6.local_addr().expect("addr").port().to_string());
        argv.push(l.tcp6.to_string());
        argv
    });
}

/// DNS lookups: a DNS query (UDP and TCP) to a resolver on loopback gets no answer.
pub(crate) fn net_dns_query(u: User) {
    net_case(u, "net_dns_query", &|fx, l| {
        let mut argv = fx.py_script("dns", include_str!("attacks/dns_query.py"));
        argv.push(unique("q"));
        argv.push(l.udp4.local_addr().expect("addr").port().to_string());
        argv.push(l.tcp4.to_string());
        argv
    });
}

/// With network off, `socket(AF_INET/AF_INET6)` itself is refused by seccomp
/// (AF_UNIX stays allowed). The control: creating them works on the host.
fn net_inet_sockets_refused(u: User) {
    syscall_case(u, "net_inet_sockets_refused", &|fx| {
        fx.py_script("inet", include_str!("attacks/inet_sockets.py"))
    });
}

/// Connecting to a host abstract unix socket fails.
pub(crate) fn abstract_unix_socket(u: User) {
    let go = |fx: &Fx, sandboxed: bool| {
        let name = unique("pinfold-abstract-");
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract name");
        let l = UnixListener::bind_addr(&addr).expect("bind an abstract socket");
        l.set_nonblocking(true).expect("nonblocking");
        let script = fx.py_script(
            "abstract",
            &format!(
                r#"s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\0{name}"); s.sendall(b"hi"); verdict("connect to the host abstract socket", True, "connected")
except OSError as e:
    verdict("connect to the host abstract socket", False, ename(e.errno))
"#
            ),
        );
        let r = if sandboxed {
            fx.exec(&[], &script)
        } else {
            fx.control(&script)
        };
        let ch: Vec<String> = match l.accept() {
            Ok(_) => vec!["a connection reached the host's abstract socket".into()],
            Err(_) => vec![],
        };
        (r, ch)
    };
    let c = Fx::new(u, "abstract_unix_socket");
    let (r, ch) = go(&c, false);
    c.assert_control(&r, &ch, true);
    let a = Fx::new(u, "abstract_unix_socket");
    let (r, ch) = go(&a, true);
    a.assert_refused(&r, &ch);
}

/// Container-engine sockets (docker.sock, podman's) are hidden by the default preset. Fake
/// engine sockets (listeners made by the test) at the places engines use: `/run/docker.sock`,
/// rootless docker and podman under `$XDG_RUNTIME_DIR`, Docker Desktop's
/// `~/.docker/run/docker.sock`. Under the embedded default preset, connecting to any of them
/// must fail and reach no listener. `/run` is the test's own directory, bound over `/run` in a
/// mount namespace of the run's (`unshare -m`): a socket made at the host's `/run/docker.sock`
/// would be an engine starting for every run beside this one, which each would have to stop.
pub(crate) fn container_engine_sockets_hidden(u: User) {
    let go = |fx: &mut Fx, sandboxed: bool| {
        fx.use_default_preset();
        let run = fx.base.join("run-dir");
        let system = PathBuf::from("/run/docker.sock");
        let paths = vec![
            system.clone(),
            fx.run_dir.join("docker.sock"),
            fx.run_dir.join("podman/podman.sock"),
            fx.home.join(".docker/run/docker.sock"),
        ];
        let mut ls = Vec::new();
        for p in &paths {
            let at = if *p == system { run.join("docker.sock") } else { p.clone() };
            fs::create_dir_all(at.parent().expect("parent")).expect("mkdir");
            let l = UnixListener::bind(&at).unwrap_or_else(|e| panic!("bind {}: {e}", at.display()));
            l.set_nonblocking(true).expect("nonblocking");
            fs::set_permissions(&at, fs::Permissions::from_mode(0o666)).expect("chmod socket");
            ls.push(l);
        }
        fx.own();
        let body: String = paths
            .iter()
            .map(|p| {
                format!(
                    "try:\n    s = socket.socket(socket.AF_UNIX); s.connect('{p}'); verdict('connect {p}', True, 'connected')\nexcept OSError as e:\n    verdict('connect {p}', False, ename(e.errno))\n",
                    p = p.display()
                )
            })
            .collect();
        let script = fx.py_script("engines", &body);
        let inner = if sandboxed { fx.exec_argv(&[], &script) } else { script.clone() };
        // As root: a mount namespace with the test's `/run`; then the case's user.
        let mut argv: Vec<String> = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", "mount --bind \"$0\" /run && exec \"$@\""].iter().map(|s| s.to_string()).collect();
        argv.push(Fx::s(&run));
        if u == User::Nobody {
            argv.extend(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--"].iter().map(|s| s.to_string()));
        }
        argv.extend(inner);
        let mut c = std::process::Command::new(&argv[0]);
        c.args(&argv[1..]).env_clear().envs(&fx.env).current_dir(&fx.cwd);
        let r = run_cmd(c, argv.join(" "), None, TIMEOUT);
        let ch: Vec<String> = ls
            .iter()
            .zip(&paths)
            .filter(|(l, _)| l.accept().is_ok())
            .map(|(_, p)| format!("a connection reached the engine socket {}", p.display()))
            .collect();
        (r, ch)
    };
    let mut c = Fx::new(u, "container_engine_sockets_hidden");
    let (r, ch) = go(&mut c, false);
    c.assert_control(&r, &ch, true);
    let mut a = Fx::new(u, "container_engine_sockets_hidden");
    let (r, ch) = go(&mut a, true);
    a.assert_refused(&r, &ch);
}
