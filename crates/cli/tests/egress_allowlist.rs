//! `pinfold exec` with a host allowlist: listed hosts are forwarded and recorded, others get
//! `403` and a `refused` record; going around the proxy, UDP and DNS reach nothing; inside,
//! Landlock lets the command connect only to the proxy; special addresses and names (cloud
//! metadata, other addresses of this host, wildcards versus the apex) are refused. Fixture:
//! `support/egress.rs`.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use pinfold_test_support::netns;

use crate::support::egress::*;
use crate::support::*;

// ---------------------------------------------------------------------------------------------
// Allowed and blocked hosts, each protocol the proxy speaks
// ---------------------------------------------------------------------------------------------

both_users!(
    allowed_host_is_forwarded_and_recorded,
    bypassing_the_proxy_reaches_nothing,
    udp_and_dns_reach_nothing,
    landlock_allows_only_connect_to_the_proxy
);
root_only!(
    tunnel_open_when_the_command_ends_is_recorded,
    blocked_host_gets_403_and_a_refused_record,
    special_addresses_and_names_refused
);

/// Curl to a listed host goes through the proxy (HTTP forward, and SOCKS5 when only
/// `ALL_PROXY` is left), reaches the host server, and each decision is an `egress` record
/// (allowed, host, port, the address connected to, bytes both ways) between `exec_start` and
/// `exec_end`; `pinfold audit verify` accepts the ledger and `audit tail` shows the records.
pub(crate) fn allowed_host_is_forwarded_and_recorded(u: User) {
    let w = World::new(u, "allowed_host_is_forwarded_and_recorded");
    let a = HostTcp::bind("127.0.0.1");
    let policy = w.policy(&[lo(a.port)]);

    let r = w.exec(
        &policy,
        &argv(&[
            "curl",
            "-sS",
            "-m",
            "5",
            &format!("http://127.0.0.1:{}/allowed-http", a.port),
        ]),
    );
    let seen = a.seen();
    assert!(
        r.code == Some(0)
            && r.stdout.contains(&a.body)
            && seen.len() == 1
            && seen[0].starts_with("GET /allowed-http "),
        "{}: curl to the listed host must work through the proxy\n  host saw: {seen:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, end) = w.run_records();
    let addr = lo(a.port);
    assert!(
        egress.len() == 1
            && egress[0]["outcome"] == "allowed"
            && egress[0]["protocol"] == "http"
            && egress[0]["host"] == "127.0.0.1"
            && egress[0]["port"] == a.port
            && egress[0]["addr"] == addr.as_str()
            && egress[0]["bytes_up"].as_u64().unwrap_or(0) > 0
            && egress[0]["bytes_down"].as_u64().unwrap_or(0) > a.body.len() as u64,
        "{}: expected one allowed http egress record for {addr} with bytes: {egress:#?}",
        w.label()
    );
    assert_eq!(
        end["sandbox"]["network"],
        "proxy",
        "{}: exec_end: {end:#}",
        w.label()
    );

    // Without the HTTP variables curl uses ALL_PROXY (socks5h://127.0.0.1:3128).
    a.clear();
    let r = w.exec(
        &policy,
        &argv(&[
            "env",
            "-u",
            "http_proxy",
            "-u",
            "HTTP_PROXY",
            "curl",
            "-sS",
            "-m",
            "5",
            &format!("http://127.0.0.1:{}/allowed-socks", a.port),
        ]),
    );
    let seen = a.seen();
    assert!(
        r.code == Some(0)
            && r.stdout.contains(&a.body)
            && seen.len() == 1
            && seen[0].starts_with("GET /allowed-socks "),
        "{}: curl through ALL_PROXY (SOCKS5) to the listed host must work\n  host saw: {seen:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        egress.len() == 1
            && egress[0]["outcome"] == "allowed"
            && egress[0]["protocol"] == "socks5"
            && egress[0]["addr"] == addr.as_str(),
        "{}: expected one allowed socks5 record: {egress:#?}",
        w.label()
    );

    let verify = run_cmd(
        w.cmd(&argv(&[&pinfold_bin(), "audit", "verify"]), &[]),
        "pinfold audit verify".into(),
        None,
        TIMEOUT,
    );
    assert_eq!(
        verify.code,
        Some(0),
        "{}: the ledger must verify\n{}",
        w.label(),
        verify.show()
    );
    let tail = run_cmd(
        w.cmd(&argv(&[&pinfold_bin(), "audit", "tail", "--json"]), &[]),
        "pinfold audit tail".into(),
        None,
        TIMEOUT,
    );
    let egress_lines = tail
        .stdout
        .lines()
        .filter(|l| l.contains("\"kind\":\"egress\""))
        .count();
    assert!(
        tail.code == Some(0) && egress_lines == 2,
        "{}: `pinfold audit tail --json` must show the two egress records\n{}",
        w.label(),
        tail.show()
    );
}

/// A tunnel still open when the command ends is a connection the command
/// made, and must be in the ledger like any other. The upstream (HOLD_PY) answers and then
/// keeps its side open, as slow or long-polling servers do; curl gives up after 1 s, having
/// received the answer. By SOCKS5 (plain) and by `CONNECT` (TLS, the openssl-made test CA):
/// the host served the request and curl got the body, so an `allowed` record with the address
/// and bytes must be between `exec_start` and `exec_end`.
fn tunnel_open_when_the_command_ends_is_recorded(u: User) {
    let w = World::new(u, "tunnel_open_when_the_command_ends_is_recorded");
    let pki = test_pki(&w.base);
    w.own();
    let (cert, key) = (pki.join("srv.pem"), pki.join("srv.key"));
    let plain = PyServer::start_script(HOLD_PY, &w.base, None, w.base.join("hold-plain.log"));
    let tls = PyServer::start_script(
        HOLD_PY,
        &w.base,
        Some((&cert, &key)),
        w.base.join("hold-tls.log"),
    );
    let policy = w.policy(&[lo(plain.port), lo(tls.port)]);
    let ca = pki.join("ca.pem").display().to_string();
    let mut missing = Vec::new();
    for (what, srv, args) in [
        (
            "socks5",
            &plain,
            vec![
                "--proxy".to_string(),
                format!("socks5h://127.0.0.1:{PROXY_PORT}"),
                format!("http://127.0.0.1:{}/held-socks", plain.port),
            ],
        ),
        (
            "connect",
            &tls,
            vec![
                "--cacert".to_string(),
                ca.clone(),
                format!("https://127.0.0.1:{}/held-connect", tls.port),
            ],
        ),
    ] {
        let mut a = argv(&["curl", "-sS", "-m", "1"]);
        a.extend(args);
        let r = w.exec(&policy, &a);
        let served = fs::read_to_string(&srv.log).unwrap_or_default();
        assert!(
            r.stdout.contains("held-open-body") && served.contains("served \"GET /held-"),
            "{}: {what}: the held upstream must have served curl through the proxy\n  server log: {served:?}\n{}",
            w.label(),
            r.show()
        );
        let (egress, _) = w.run_records();
        let addr = lo(srv.port);
        if !egress.iter().any(|e| {
            e["outcome"] == "allowed"
                && e["protocol"] == what
                && e["addr"] == addr.as_str()
                && e["bytes_down"].as_u64().unwrap_or(0) > 0
        }) {
            missing.push(format!(
                "a {what} tunnel to {addr} carried a request and its answer, but no allowed \
                 `egress` record for it is between exec_start and exec_end (records: {egress:?})\n{}",
                r.show()
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "{}: LEDGER INCOMPLETE:\n  - {}",
        w.label(),
        missing.join("\n  - ")
    );
}

/// A host:port not on the list, by HTTP forward, `CONNECT` and SOCKS5: `403` with the
/// body `pinfold egress: <reason>` (HTTP), curl failing (CONNECT, SOCKS5), one `refused` record
/// each, and the host listener never contacted. (The listed port of the same address works in
/// the same run, so the refusals are the allowlist's doing.)
fn blocked_host_gets_403_and_a_refused_record(u: User) {
    let w = World::new(u, "blocked_host_gets_403_and_a_refused_record");
    let (a, b) = (HostTcp::bind("127.0.0.1"), HostTcp::bind("127.0.0.1"));
    let policy = w.policy(&[lo(a.port)]);

    let r = w.exec(
        &policy,
        &argv(&[
            "curl",
            "-sS",
            "-m",
            "5",
            "-w",
            "\nstatus=%{http_code}\n",
            &format!("http://127.0.0.1:{}/blocked", b.port),
        ]),
    );
    let seen = b.seen();
    assert!(
        r.stdout.contains("status=403")
            && r.stdout
                .contains("pinfold egress: host and port are not on the allowlist")
            && seen.is_empty(),
        "{}: an unlisted port must get 403 with the reason, and the host nothing\n  host saw: {seen:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        egress.len() == 1
            && egress[0]["outcome"] == "refused"
            && egress[0]["host"] == "127.0.0.1"
            && egress[0]["port"] == b.port
            && egress[0]["addr"].is_null()
            && egress[0]["reason"]
                .as_str()
                .is_some_and(|s| s.contains("not on the allowlist")),
        "{}: expected one refused record without an address: {egress:#?}",
        w.label()
    );

    let r = w.exec(
        &policy,
        &w.bash(
            "blocked",
            &format!(
                "t connect curl -sS -m 5 -p http://127.0.0.1:{bp}/connect\n\
                 t socks5 curl -sS -m 5 --proxy socks5h://127.0.0.1:{PROXY_PORT} http://127.0.0.1:{bp}/socks\n\
                 curl -sS -m 5 -o /dev/null -w 'allowed=%{{http_code}}\\n' http://127.0.0.1:{ap}/allowed\n",
                bp = b.port,
                ap = a.port
            ),
        ),
    );
    assert_refused(&w, &r, &b.seen());
    assert!(
        r.stdout.contains("allowed=200"),
        "{}: the listed port must work in the same run\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    let d = decisions(&egress);
    let b_port = u64::from(b.port);
    let want = [
        ("127.0.0.1".to_string(), b_port, "refused".to_string()),
        ("127.0.0.1".to_string(), b_port, "refused".to_string()),
        (
            "127.0.0.1".to_string(),
            u64::from(a.port),
            "allowed".to_string(),
        ),
    ];
    let protocols: Vec<&str> = egress
        .iter()
        .map(|e| e["protocol"].as_str().unwrap_or("?"))
        .collect();
    assert!(
        d == want && protocols == ["connect", "socks5", "http"],
        "{}: expected refused connect, refused socks5, allowed http: {egress:#?}",
        w.label()
    );
}

// ---------------------------------------------------------------------------------------------
// Going around the proxy
// ---------------------------------------------------------------------------------------------

/// With `127.0.0.1:A` listed, a command that ignores the proxy reaches nothing: `curl
/// --noproxy '*'` to A, `env -u http_proxy -u HTTP_PROXY curl` to an unlisted port B (curl falls
/// back to `ALL_PROXY`, which refuses it), curl with every proxy variable removed to A, bash's
/// `/dev/tcp/127.0.0.1/A`, and python3 connecting straight to A on a non-loopback address of
/// the host ([`netns::PUBLIC`], in the case's own network namespace). The host listeners (bound
/// to 0.0.0.0, so every address reaches them) see nothing; the same script without pinfold
/// reaches them with every attempt.
pub(crate) fn bypassing_the_proxy_reaches_nothing(u: User) {
    let _net = netns::TestNet::enter();
    let script = |w: &World, a: &HostTcp, b: &HostTcp| {
        let tcp_py = w.script(
            "tcp.py",
            "import socket, sys\n\
             try:\n\
             \x20   s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)\n\
             except OSError as e:\n\
             \x20   print(e); sys.exit(1)\n\
             s.sendall(f'GET {sys.argv[3]} HTTP/1.0\\r\\n\\r\\n'.encode())\n\
             data = s.recv(4096)\n\
             print(data.decode(errors='replace'))\n\
             sys.exit(0 if data else 1)\n",
        );
        let body = format!(
            "t noproxy curl -sS -m 3 --noproxy '*' http://127.0.0.1:{ap}/noproxy\n\
             t env-u-http env -u http_proxy -u HTTP_PROXY curl -sS -f -m 3 http://127.0.0.1:{bp}/env-u-http\n\
             t env-u-all env -u http_proxy -u HTTP_PROXY -u https_proxy -u HTTPS_PROXY -u all_proxy -u ALL_PROXY curl -sS -m 3 http://127.0.0.1:{ap}/env-u-all\n\
             t dev-tcp bash -c 'exec 3<>/dev/tcp/127.0.0.1/{ap} && printf \"GET /dev-tcp HTTP/1.0\\r\\n\\r\\n\" >&3 && cat <&3'\n\
             t python-loopback {PY} {tcp_py} 127.0.0.1 {ap} /python-loopback\n\
             t python-direct-ip {PY} {tcp_py} {ip} {ap} /python-direct-ip\n",
            ap = a.port,
            bp = b.port,
            ip = netns::PUBLIC,
        );
        w.bash("bypass", &body)
    };
    let attempts = 6;

    let c = World::new(u, "bypassing_the_proxy_reaches_nothing (control)");
    let (a, b) = (HostTcp::bind("0.0.0.0"), HostTcp::bind("0.0.0.0"));
    let r = c.control(&script(&c, &a, &b));
    let mut seen = a.seen();
    seen.extend(b.seen());
    assert_control(&c, &r, &seen, attempts);
    assert_eq!(
        seen.len(),
        attempts,
        "{}: control: each attempt must reach the host once: {seen:?}\n{}",
        c.label(),
        r.show()
    );

    let w = World::new(u, "bypassing_the_proxy_reaches_nothing");
    let (a, b) = (HostTcp::bind("0.0.0.0"), HostTcp::bind("0.0.0.0"));
    let policy = w.policy(&[lo(a.port)]);
    let r = w.exec(&policy, &script(&w, &a, &b));
    let mut seen = a.seen();
    seen.extend(b.seen());
    assert_refused(&w, &r, &seen);
    // Direct connections die at Landlock (EACCES), not for want of a listener. On gVisor
    // and in a container there is no Landlock: the network namespace holds only the proxy's
    // listener, so they find nothing (refused, unreachable); `seen` above shows nothing
    // arrived.
    let expected: &[&str] = match w.backend {
        Some("gvisor" | "container") => &["Connection refused", "Network is unreachable"],
        _ => &["Permission denied"],
    };
    for what in ["dev-tcp", "python-loopback", "python-direct-ip"] {
        let l = r
            .lines("refused")
            .into_iter()
            .find(|l| l.starts_with(&format!("refused: {what}:")))
            .unwrap_or("");
        assert!(
            expected.iter().any(|e| l.contains(e)),
            "{}: {what} must fail with one of {expected:?}: {l:?}\n{}",
            w.label(),
            r.show()
        );
    }
    // The only decision the proxy made: the SOCKS5 fallback, refused.
    let (egress, _) = w.run_records();
    assert_eq!(
        decisions(&egress),
        [(
            "127.0.0.1".to_string(),
            u64::from(b.port),
            "refused".to_string()
        )],
        "{}: {egress:#?}",
        w.label()
    );
}

// ---------------------------------------------------------------------------------------------
// UDP and DNS
// ---------------------------------------------------------------------------------------------

/// The name the DNS attempts look up; the case's [`HostDns`] answers it with [`netns::PUBLIC`].
const EXFIL_NAME: &str = "exfil.pinfold-test.test";

/// In the case's own network namespace: UDP to a host socket on 127.0.0.1 and on a
/// non-loopback address ([`netns::PUBLIC`]; the host answers `pong`), a DNS query to the case's
/// resolver ([`netns::RESOLVER`], a [`HostDns`]), a lookup through the system resolver (the
/// case's own resolv.conf naming that resolver), and `dig @RESOLVER` where dig exists. The
/// control, without pinfold, gets every answer and the resolver logs its queries. Inside,
/// nothing reaches the host or the resolver, nothing answers, and datagrams to anything but
/// the sandbox's own loopback are refused by the kernel at `sendto` (no route): no packet
/// leaves. Each attempt waits at most 1 s.
pub(crate) fn udp_and_dns_reach_nothing(u: User) {
    let _net = netns::TestNet::enter();
    let public = netns::PUBLIC.to_string();
    let script = |w: &World, l: &HostUdp, g: &HostUdp| {
        w.python(
            "udp",
            &format!(
                "for addr in [('127.0.0.1', {lp}), ('{public}', {gp})]:\n\
                 \x20   try:\n\
                 \x20       s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)\n\
                 \x20       s.sendto(b'ping-from-sandbox', addr); data, frm = s.recvfrom(100)\n\
                 \x20       print(f'ESCAPED: udp {{addr}}: got {{data!r}} from {{frm}}')\n\
                 \x20   except OSError as e:\n\
                 \x20       print(f'refused: udp {{addr}}: errno={{ename(e.errno)}} {{e}}')\n",
                lp = l.port,
                gp = g.port,
            ),
        )
    };
    let seen = |l: &HostUdp, g: &HostUdp| {
        let mut v = l.seen();
        v.extend(g.seen());
        v
    };
    let dns = HostDns::start(netns::RESOLVER, &[(EXFIL_NAME, netns::PUBLIC)]);

    let c = World::new(u, "udp_and_dns_reach_nothing (control)").with_own_etc(&[]);
    let (l, g) = (HostUdp::bind("127.0.0.1"), HostUdp::bind(&public));
    let r = c.control(&script(&c, &l, &g));
    assert_control(&c, &r, &seen(&l, &g), 2);

    let w = World::new(u, "udp_and_dns_reach_nothing").with_own_etc(&[]);
    let (l, g) = (HostUdp::bind("127.0.0.1"), HostUdp::bind(&public));
    let policy = w.policy(&[lo(1)]);
    let r = w.exec(&policy, &script(&w, &l, &g));
    assert_refused(&w, &r, &seen(&l, &g));
    let (egress, _) = w.run_records();
    assert!(
        egress.is_empty(),
        "{}: UDP must not involve the proxy: {egress:#?}",
        w.label()
    );
    let line = r
        .lines("refused: udp")
        .into_iter()
        .find(|x| x.contains(public.as_str()))
        .unwrap_or("");
    assert!(
        kernel_refused(line),
        "{}: UDP to {public} must fail at sendto (no route), not merely go unanswered: {line:?}\n{}",
        w.label(),
        r.show()
    );

    // DNS: a query to the resolver by address, then the system resolver.
    let resolver = netns::RESOLVER;
    let dns_script = |w: &World| {
        let mut argv = w.python("dns", include_str!("attacks/dns_exfil.py"));
        argv.push(EXFIL_NAME.to_string());
        argv.push(resolver.to_string());
        argv
    };
    let r = c.control(&dns_script(&c));
    let asked = dns.seen();
    assert_control(&c, &r, &asked, 2);
    assert!(
        r.stdout.contains(&format!("'{public}'"))
            && asked
                .iter()
                .any(|q| q.starts_with(&format!("{EXFIL_NAME} 1 "))),
        "{}: CONTROL FAILED: the system resolver must answer {EXFIL_NAME} with {public} from the \
         case's own resolver\n  resolver saw: {asked:?}\n{}",
        c.label(),
        r.show()
    );
    dns.clear();
    let r = w.exec(&policy, &dns_script(&w));
    assert_refused(&w, &r, &dns.seen());
    assert!(
        !r.stdout.contains("sent: dns query")
            && r.lines(&format!("refused: dns {resolver}:53"))
                .iter()
                .any(|l| kernel_refused(l)),
        "{}: a DNS query to {resolver} must fail at sendto (no route), not merely go unanswered\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        egress.is_empty(),
        "{}: DNS must not involve the proxy: {egress:#?}",
        w.label()
    );
    if Path::new("/usr/bin/dig").exists() {
        let dig = |w: &World| {
            w.bash(
                "dig",
                &format!("t dig dig +time=1 +tries=1 +short @{resolver} {EXFIL_NAME}"),
            )
        };
        let r = c.control(&dig(&c));
        assert_control(&c, &r, &dns.seen(), 1);
        dns.clear();
        let r = w.exec(&policy, &dig(&w));
        assert_refused(&w, &r, &dns.seen());
        let (egress, _) = w.run_records();
        assert!(
            egress.is_empty(),
            "{}: dig must not involve the proxy: {egress:#?}",
            w.label()
        );
    } else {
        eprintln!(
            "udp_and_dns_reach_nothing: dig is not installed; the python3 query to {resolver}:53 stands in for it"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Landlock inside the namespace
// ---------------------------------------------------------------------------------------------

/// Inside, binding a TCP port (IPv4 and IPv6) fails with EACCES, and connecting to a
/// loopback port other than the proxy's is refused by Landlock (EACCES) rather than finding
/// nothing there (ECONNREFUSED). The proxy's port itself connects. `listen()` on an unbound
/// socket gets an ephemeral port from the kernel without `bind()` (Landlock does not see it);
/// connecting to that port from inside is still EACCES, so such a listener is unreachable.
/// The control shows the host's answers: bind works, a closed port is ECONNREFUSED.
fn landlock_allows_only_connect_to_the_proxy(u: User) {
    let body = include_str!("attacks/landlock_connect.py");
    let results = |r: &Run| -> BTreeMap<String, String> {
        r.lines("RESULT ")
            .iter()
            .filter_map(|l| {
                let mut p = l.split_whitespace().skip(1);
                Some((p.next()?.to_string(), p.next()?.to_string()))
            })
            .collect()
    };

    let c = World::new(u, "landlock_allows_only_connect_to_the_proxy (control)");
    let r = c.control(&c.python("landlock", body));
    let got = results(&r);
    assert!(
        got.get("bind4").map(String::as_str) == Some("OK")
            && got.get("connect4-closed").map(String::as_str) == Some("ECONNREFUSED")
            && got.get("connect-autobound").map(String::as_str) == Some("OK"),
        "{}: CONTROL FAILED: on the host, bind must work and a closed port be ECONNREFUSED: {got:?}\n{}",
        c.label(),
        r.show()
    );

    let w = World::new(u, "landlock_allows_only_connect_to_the_proxy");
    let policy = w.policy(&[lo(1)]);
    let mut a = w.python("landlock", body);
    a.push(PROXY_PORT.to_string());
    let r = w.exec(&policy, &a);
    let got = results(&r);
    let want = [
        ("bind4", "EACCES"),
        ("bind6", "EACCES"),
        ("connect4-closed", "EACCES"),
        ("connect6-closed", "EACCES"),
        ("connect-proxy", "OK"),
    ];
    let mut why: Vec<String> = want
        .iter()
        .filter(|(k, v)| got.get(*k).map(String::as_str) != Some(*v))
        .map(|(k, v)| format!("{k}: expected {v}, got {:?}", got.get(*k)))
        .collect();
    if got.get("autobind-listen").map(String::as_str) == Some("OK")
        && got.get("connect-autobound").map(String::as_str) != Some("EACCES")
    {
        why.push(format!(
            "an autobound listener was reachable from inside: {:?}",
            got.get("connect-autobound")
        ));
    }
    assert!(
        r.started() && why.is_empty(),
        "{}: LANDLOCK FAILED:\n  - {}\n{}",
        w.label(),
        why.join("\n  - "),
        r.show()
    );
    let (_, end) = w.run_records();
    let ll = &end["sandbox"]["landlock"];
    assert!(
        ll["tcp"] == true && ll["tcp_connect_port"] == PROXY_PORT,
        "{}: exec_end must report Landlock's TCP rules (connect only to {PROXY_PORT}): {end:#}",
        w.label()
    );
}

// ---------------------------------------------------------------------------------------------
// Special addresses, names, `*.x` versus the apex
// ---------------------------------------------------------------------------------------------

/// Names the case's own resolver answers in case 6: a "public" web server and, below a
/// wildcard, the metadata address.
const PUBLIC_NAME: &str = "public.pinfold-test.test";
const WILD_META_NAME: &str = "meta.wild.pinfold-test.test";
/// Another name for 127.0.0.1 in the case's own /etc/hosts.
const LOOPBACK_ALIAS: &str = "loopback-alias.pinfold-test.test";

/// In the case's own network namespace and name service: a host listener A on 0.0.0.0
/// (so every address of the namespace reaches it), a metadata-like listener on
/// 169.254.169.254:80 ([`netns::METADATA`], also the address of `metadata.google.internal` in
/// the case's hosts file) and a web server on [`netns::PUBLIC`]:80 (`public.pinfold-test.test`
/// in the case's resolver). A control without pinfold reaches each of them by every URL below.
/// Through the proxy, with only `127.0.0.1:A` listed: the metadata address, names not on the
/// list, other addresses of this host (127.0.0.2, 0.0.0.0, `::ffff:127.0.0.2`, the non-loopback
/// address) on A's port and `localhost` are all `403`, `refused` records without an address; no
/// listener sees anything and names not on the list are never even looked up. Then
/// `localhost:A` listed exactly works while `127.0.0.1:A` and another name for 127.0.0.1 (in
/// the case's hosts file) are refused. `*.localhost` is a configuration error (pinfold does
/// not start). `*.wild.pinfold-test.test` covers `meta.wild.pinfold-test.test`, which the
/// case's resolver answers with the metadata address: refused for that address (the control
/// reaches the metadata listener by it). `*.pinfold-test.invalid:A` does not cover the apex or
/// `evil-pinfold-test.invalid` (neither looked up), and its subdomain is refused because the
/// resolver answers NXDOMAIN.
fn special_addresses_and_names_refused(u: User) {
    let _net = netns::TestNet::enter();
    let dns = HostDns::start(
        netns::RESOLVER,
        &[
            (PUBLIC_NAME, netns::PUBLIC),
            (WILD_META_NAME, netns::METADATA),
        ],
    );
    let w = World::new(u, "special_addresses_and_names_refused").with_own_etc(&[
        (netns::METADATA_NAME, netns::METADATA.to_string()),
        (LOOPBACK_ALIAS, "127.0.0.1".to_string()),
    ]);
    let a = HostTcp::bind("0.0.0.0");
    let meta = HostTcp::bind_at(&netns::METADATA.to_string(), 80);
    let web = HostTcp::bind_at(&netns::PUBLIC.to_string(), 80);
    let p = a.port;
    let probe = |name: &str, urls: &[String], tail: &str| {
        let mut body: String = urls
            .iter()
            .map(|url| format!("t {url} curl -sS -f -m 5 {url}\n"))
            .collect();
        body.push_str(tail);
        w.bash(name, &body)
    };
    // What reached any listener, and the names the case's resolver was asked for.
    let seen_all = || {
        let mut v = a.seen();
        v.extend(
            meta.seen()
                .iter()
                .map(|s| format!("metadata listener: {s}")),
        );
        v.extend(web.seen().iter().map(|s| format!("web listener: {s}")));
        v
    };
    let asked = |v: &[String], name: &str| v.iter().any(|q| q.starts_with(&format!("{name} ")));
    let clear_all = || {
        a.clear();
        meta.clear();
        web.clear();
        dns.clear();
    };

    // Only the IP literal is listed.
    let (m, public) = (netns::METADATA, netns::PUBLIC);
    let urls = vec![
        format!("http://{m}/latest/meta-data/"),
        format!("http://{m}:{p}/metadata"),
        format!("http://{}/computeMetadata/v1/", netns::METADATA_NAME),
        format!("http://{PUBLIC_NAME}/"),
        format!("http://127.0.0.2:{p}/other-loopback"),
        format!("http://0.0.0.0:{p}/unspecified"),
        format!("http://[::ffff:127.0.0.2]:{p}/mapped"),
        format!("http://localhost:{p}/name-of-listed-ip"),
        format!("http://{public}:{p}/host-ip"),
    ];
    let r = w.control(&probe("ip-listed", &urls, ""));
    let (seen, resolved) = (seen_all(), dns.seen());
    assert_control(&w, &r, &seen, urls.len());
    assert!(
        meta.seen().len() == 2 && web.seen().len() == 1 && asked(&resolved, PUBLIC_NAME),
        "{}: CONTROL FAILED: the metadata listener must see 2 requests and the web server 1, \
         {PUBLIC_NAME} resolved by the case's resolver\n  seen: {seen:?}\n  resolver: {resolved:?}\n{}",
        w.label(),
        r.show()
    );
    clear_all();
    let policy = w.policy(&[lo(p)]);
    let r = w.exec(&policy, &probe("ip-listed", &urls, ""));
    let mut seen = seen_all();
    seen.extend(
        dns.seen()
            .iter()
            .map(|q| format!("the resolver was asked: {q}")),
    );
    assert_refused(&w, &r, &seen);
    let (egress, _) = w.run_records();
    let d = decisions(&egress);
    assert!(
        d.len() == urls.len()
            && d.iter().all(|(_, _, o)| o == "refused")
            && egress.iter().all(|e| e["addr"].is_null()),
        "{}: every one of {} requests must be a refused record with no address: {egress:#?}",
        w.label(),
        urls.len()
    );

    // The name listed exactly.
    let policy = w.policy(&[format!("localhost:{p}")]);
    let urls = [
        format!("http://127.0.0.1:{p}/ip-of-listed-name"),
        format!("http://{LOOPBACK_ALIAS}:{p}/other-name"),
    ];
    let exact_probe = format!(
        "curl -sS -m 5 -o /dev/null -w 'exact=%{{http_code}}\\n' http://localhost:{p}/exact\n"
    );
    let r = w.exec(&policy, &probe("name-listed", &urls, &exact_probe));
    let seen = seen_all();
    let exact: Vec<&String> = seen
        .iter()
        .filter(|s| s.starts_with("GET /exact "))
        .collect();
    let others: Vec<String> = seen
        .iter()
        .filter(|s| !s.starts_with("GET /exact "))
        .cloned()
        .collect();
    assert_refused(&w, &r, &others);
    assert!(
        r.stdout.contains("exact=200") && exact.len() == 1,
        "{}: `localhost:{p}` listed exactly must reach the host listener\n  host saw: {seen:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert_eq!(
        egress.iter().filter(|e| e["outcome"] == "allowed").count(),
        1,
        "{}: {egress:#?}",
        w.label()
    );
    clear_all();

    // A wildcard over a special-use name space is not a valid entry: pinfold does not start.
    let policy = w.policy(&[format!("*.localhost:{p}")]);
    let r = w.exec(
        &policy,
        &probe(
            "wildcard-localhost",
            &[format!("http://sub.localhost:{p}/sub")],
            "",
        ),
    );
    assert!(
        !r.started()
            && r.code == Some(2)
            && r.stderr.contains("invalid host")
            && seen_all().is_empty(),
        "{}: `*.localhost` must be a configuration error, nothing run\n{}",
        w.label(),
        r.show()
    );
    w.skip_records();

    // A listed wildcard whose subdomain resolves to the metadata address: refused for the
    // address, after the lookup; the control reaches the metadata listener by that name.
    let url = [format!("http://{WILD_META_NAME}/latest/meta-data/")];
    let r = w.control(&probe("wildcard-meta", &url, ""));
    assert_control(&w, &r, &meta.seen(), 1);
    clear_all();
    let policy = w.policy(&["*.wild.pinfold-test.test".to_string()]);
    let r = w.exec(&policy, &probe("wildcard-meta", &url, ""));
    assert_refused(&w, &r, &seen_all());
    let (egress, _) = w.run_records();
    let resolved = dns.seen();
    assert!(
        egress.len() == 1
            && egress[0]["outcome"] == "refused"
            && egress[0]["addr"].is_null()
            && egress[0]["reason"]
                .as_str()
                .is_some_and(|s| s.contains(&format!("resolves to {m}, a cloud metadata address")))
            && asked(&resolved, WILD_META_NAME),
        "{}: {WILD_META_NAME} must be looked up and refused for its metadata address\n  \
         resolver: {resolved:?}\n  records: {egress:#?}",
        w.label()
    );
    clear_all();

    // A wildcard covers subdomains only: not the apex, not a look-alike. `.invalid` names never
    // resolve (RFC 6761): the case's resolver answers NXDOMAIN, so the listed subdomain is
    // refused at resolution.
    let policy = w.policy(&[format!("*.pinfold-test.invalid:{p}")]);
    let urls = [
        format!("http://pinfold-test.invalid:{p}/apex"),
        format!("http://evil-pinfold-test.invalid:{p}/look-alike"),
        format!("http://sub.pinfold-test.invalid:{p}/sub"),
    ];
    let r = w.exec(&policy, &probe("wildcard", &urls, ""));
    assert_refused(&w, &r, &seen_all());
    let (egress, _) = w.run_records();
    let reasons: Vec<(&str, &str)> = egress
        .iter()
        .map(|e| {
            (
                e["host"].as_str().unwrap_or("?"),
                e["reason"].as_str().unwrap_or(""),
            )
        })
        .collect();
    let resolved = dns.seen();
    assert!(
        egress.len() == 3
            && egress.iter().all(|e| e["outcome"] == "refused")
            && reasons[0].1.contains("not on the allowlist")
            && reasons[1].1.contains("not on the allowlist")
            && reasons[2].1.contains("does not resolve")
            && asked(&resolved, "sub.pinfold-test.invalid")
            && resolved
                .iter()
                .all(|q| q.starts_with("sub.pinfold-test.invalid ")),
        "{}: the apex and the look-alike are not on the list (and not looked up); the subdomain \
         is, and fails to resolve\n  resolver: {resolved:?}\n  reasons: {reasons:#?}",
        w.label()
    );
}
