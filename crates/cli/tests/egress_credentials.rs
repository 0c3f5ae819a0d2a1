//! The credential broker through the sandbox: the secret is injected only for its endpoint,
//! never enters the sandbox, never reaches the ledger, and the broker fails closed. Fixture:
//! `support/egress.rs`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::support::egress::*;
use crate::support::*;

// ---------------------------------------------------------------------------------------------
// The credential broker through the sandbox
// ---------------------------------------------------------------------------------------------

/// A TLS server that logs, as JSON lines on stderr, each connection (`connection`), each TLS
/// failure or timeout (`error`) and each request with every header as sent (`request`), and
/// answers a body that holds no request content (so the secret can come back to the sandbox
/// only through a leak). `/redirect…` answers `302` to `argv[1]`; `…info/refs…` answers a
/// dumb-HTTP ref list (for `git ls-remote`). Keep-alive: one connection, many requests.
const BROKER_PY: &str = include_str!("programs/broker.py");

/// What a [`BROKER_PY`] server logged.
#[derive(Debug, Default)]
struct Seen {
    connections: usize,
    /// `(request line, headers)` in arrival order.
    requests: Vec<(String, Vec<(String, String)>)>,
    raw: String,
}

impl Seen {
    fn request(&self, path: &str) -> Option<&Vec<(String, String)>> {
        self.requests
            .iter()
            .find(|(l, _)| l.split(' ').nth(1).is_some_and(|p| p.starts_with(path)))
            .map(|(_, h)| h)
    }
    /// Every value of `name` (case-insensitive) in the request for `path`.
    fn header(&self, path: &str, name: &str) -> Option<Vec<String>> {
        self.request(path).map(|h| {
            h.iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
                .collect()
        })
    }
}

fn broker_seen(srv: &PyServer) -> Seen {
    thread::sleep(Duration::from_millis(150));
    let raw = fs::read_to_string(&srv.log).unwrap_or_default();
    let mut s = Seen {
        raw: raw.clone(),
        ..Seen::default()
    };
    for l in raw.lines() {
        let Ok(v) = serde_json::from_str::<Value>(l) else {
            continue;
        };
        match v["event"].as_str() {
            Some("connection") => s.connections += 1,
            Some("request") => s.requests.push((
                v["line"].as_str().unwrap_or("").to_string(),
                v["headers"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|p| {
                                (
                                    p[0].as_str().unwrap_or("").to_string(),
                                    p[1].as_str().unwrap_or("").to_string(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            )),
            _ => {}
        }
    }
    s
}

/// The test PKI of [`test_pki`] plus `lh.pem`/`lh.key`: a leaf for `localhost` (and 127.0.0.1)
/// from the same CA, since a credential endpoint must be a name.
fn broker_pki(base: &Path) -> PathBuf {
    let pki = test_pki(base);
    let ossl = |args: &[&str]| {
        let o = Command::new("openssl")
            .args(args)
            .current_dir(&pki)
            .output()
            .expect("run openssl");
        assert!(
            o.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    ossl(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "lh.key",
        "-out",
        "lh.csr",
        "-subj",
        "/CN=localhost",
    ]);
    fs::write(
        pki.join("lh.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write");
    ossl(&[
        "x509",
        "-req",
        "-in",
        "lh.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "lh.pem",
        "-days",
        "2",
        "-extfile",
        "lh.cnf",
    ]);
    pki
}

/// One [`BROKER_PY`] server with the `localhost` leaf; `redirect` is where `/redirect` sends.
fn broker_server(w: &World, pki: &Path, name: &str, redirect: &str) -> PyServer {
    PyServer::start_script(
        BROKER_PY,
        Path::new(redirect),
        Some((&pki.join("lh.pem"), &pki.join("lh.key"))),
        w.base.join(format!("{name}.log")),
    )
}

/// A secret nothing else here contains, different for every world.
fn fresh_secret(w: &World) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let salt = w.policies.load(Ordering::Relaxed);
    format!("pfs3cr3t{}x{nanos}q{salt}", std::process::id())
}

/// A policy: the `net` preset with `hosts`, `extra` lines in the preset (e.g. upstream_ca,
/// env.keep), one endpoint `localhost:PORT` for credential `demo`, and `[credentials.demo]`
/// with `source` (e.g. `env = "MY_PAT"`). `endpoint` `None` leaves the endpoint out.
fn broker_policy(
    w: &World,
    hosts: &[String],
    extra: &str,
    endpoint: Option<u16>,
    source: &str,
) -> PathBuf {
    let n = w.policies.fetch_add(1, Ordering::Relaxed);
    let list = hosts
        .iter()
        .map(|h| format!("{h:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut text = format!(
        "extends = [\"pinfold:default\"]\n[defaults]\naction = \"allow\"\nsandbox = \"net\"\n\
         [sandbox.net]\nfs.write.allow = [\".\"]\nnetwork.allow = true\nnetwork.hosts = [{list}]\n{extra}\n"
    );
    if let Some(p) = endpoint {
        text.push_str(&format!(
            "[[sandbox.net.network.endpoint]]\nhost = \"localhost:{p}\"\ncredential = \"demo\"\n"
        ));
    }
    text.push_str(&format!("[credentials.demo]\n{source}\n"));
    let p = w.base.join(format!("policy-{n}.toml"));
    w.put(&p, text.as_bytes());
    p
}

/// `pinfold exec [FLAGS] -c POLICY -- ARGV…` whatever its exit status (cases that must not
/// start are checked by the caller).
fn exec_raw(
    w: &World,
    flags: &[&str],
    policy: &Path,
    argv: &[String],
    env: &[(&str, &str)],
) -> Run {
    let mut full = vec![pinfold_bin(), "exec".into()];
    full.extend(w.backend_flags());
    full.extend(flags.iter().map(|s| s.to_string()));
    full.extend(["-c".into(), policy.display().to_string(), "--".into()]);
    full.extend(argv.iter().cloned());
    let r = run_cmd(w.cmd(&full, env), full.join(" "), None, TIMEOUT);
    if std::env::var_os("PINFOLD_TEST_SHOW").is_some() {
        eprintln!("{}:\n{}", w.label(), r.show());
    }
    r
}

/// Every file under the state dir holding `secret` (the ledger, its key, anything else).
fn files_holding(dir: &Path, secret: &str) -> Vec<String> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if fs::read(&p)
                .is_ok_and(|b| b.windows(secret.len()).any(|x| x == secret.as_bytes()))
            {
                hits.push(p.display().to_string());
            }
        }
    }
    hits
}

/// The ledger holds the credential's name for brokered requests and never its value.
fn assert_ledger_clean(w: &World, secret: &str) {
    let hits = files_holding(&w.state, secret);
    assert!(
        hits.is_empty() && w.state.join("ledger.jsonl").is_file(),
        "{}: SECRET IN THE STATE DIR: {hits:?}",
        w.label()
    );
}

both_users!(
    credential_injected_only_for_the_endpoint,
    credential_never_enters_the_sandbox
);
root_only!(credential_broker_fails_closed);

/// `localhost:E` is a credential endpoint (`[credentials.demo] env = "MY_PAT"`),
/// `localhost:O` another allowed host (same name, another port: a plain tunnel). Inside: curl
/// sends its own `Authorization` twice (two spellings) to E; python3 urllib and `git
/// ls-remote` send none; curl sends one to O; `curl -L` follows E's `302` to O; curl reaches E
/// by SOCKS5 (`socks5h://127.0.0.1:3128`) with its own header. On the host:
/// E saw exactly one `Authorization: Bearer SECRET` on each request; O saw the agent's header
/// untouched on the direct request, and the secret nowhere (in particular not on the redirect
/// target). The records for E name the credential `demo`, those for O none; no file of the
/// state dir and nothing the command printed holds the secret.
pub(crate) fn credential_injected_only_for_the_endpoint(u: User) {
    let w = World::new(u, "credential_injected_only_for_the_endpoint");
    let pki = broker_pki(&w.base);
    w.own();
    let other = broker_server(&w, &pki, "other", "-");
    let ep = broker_server(
        &w,
        &pki,
        "endpoint",
        &format!("https://localhost:{}/landed", other.port),
    );
    let (e, o) = (ep.port, other.port);
    let ca = pki.join("ca.pem").display().to_string();
    let policy = broker_policy(
        &w,
        &[format!("localhost:{e}"), format!("localhost:{o}")],
        &format!("network.upstream_ca = [{ca:?}]"),
        Some(e),
        "env = \"MY_PAT\"",
    );
    let secret = fresh_secret(&w);
    let py = w.script(
        "fetch.py",
        "import sys, urllib.request\nprint('py', urllib.request.urlopen(sys.argv[1], timeout=5).read().decode().strip())\n",
    );
    let script = w.bash(
        "inject",
        &format!(
            "c() {{ curl -sS -m 5 -w ' code=%{{http_code}}\\n' \"$@\"; }}\n\
             c -H 'Authorization: Bearer agent' -H 'authorization: Bearer agent-two' https://localhost:{e}/one\n\
             {PY} {py} https://localhost:{e}/py\n\
             git ls-remote https://localhost:{e}/repo.git\n\
             c -H 'Authorization: Bearer agent' https://localhost:{o}/direct\n\
             c -L -H 'Authorization: Bearer agent' https://localhost:{e}/redirect\n\
             c --proxy socks5h://127.0.0.1:{PROXY_PORT} -H 'Authorization: Bearer agent' https://localhost:{e}/socks\n"
        ),
    );
    // SSL_CERT_FILE: the bundle pinfold writes starts from it, so tools inside trust the test CA
    // (for the plain tunnel to O) as well as the per-run CA (for E).
    let r = exec_raw(
        &w,
        &[],
        &policy,
        &script,
        &[("MY_PAT", &secret), ("SSL_CERT_FILE", &ca)],
    );
    let (se, so) = (broker_seen(&ep), broker_seen(&other));
    let want = vec![format!("Bearer {secret}")];
    let mut why = Vec::new();
    if !(r.started() && r.code == Some(0)) {
        why.push("the script did not run to the end".to_string());
    }
    for (what, ok) in [
        (
            "curl to E and O: code=200",
            r.stdout.matches(" code=200").count() == 4,
        ),
        (
            "python3 urllib to E",
            r.stdout.contains("py broker-test-ok"),
        ),
        (
            "git ls-remote to E",
            r.stdout
                .contains(&format!("{}\trefs/heads/main", "5".repeat(40))),
        ),
    ] {
        if !ok {
            why.push(format!("{what} did not get the upstream's answer"));
        }
    }
    for p in ["/one", "/py", "/repo.git/info/refs", "/redirect", "/socks"] {
        let got = se.header(p, "authorization");
        if got.as_ref() != Some(&want) {
            why.push(format!(
                "E {p}: expected exactly [\"Bearer <secret>\"], saw {:?}",
                got.map(|v| v
                    .iter()
                    .map(|x| x.replace(&secret, "<SECRET>"))
                    .collect::<Vec<_>>())
            ));
        }
    }
    if so.header("/direct", "authorization") != Some(vec!["Bearer agent".to_string()]) {
        why.push(format!(
            "O /direct: the agent's header must pass untouched: {:?}",
            so.request("/direct")
        ));
    }
    if so.request("/landed").is_none() {
        why.push("O /landed: curl -L did not follow the redirect to O (proves nothing)".into());
    }
    if so.raw.contains(&secret) {
        why.push(format!(
            "SECRET SENT TO THE OTHER HOST: {}",
            so.raw.replace(&secret, "<SECRET>")
        ));
    }
    if r.stdout.contains(&secret) || r.stderr.contains(&secret) {
        why.push("the secret is in the command's output".into());
    }
    assert!(
        why.is_empty(),
        "{}: BROKER FAILED:\n  - {}\n  E saw: {:?}\n  O saw: {:?}\n{}",
        w.label(),
        why.join("\n  - "),
        se.requests,
        so.requests,
        r.show()
    );
    let (egress, _) = w.run_records();
    let port = |x: &Value| x["port"].as_u64().unwrap_or(0);
    let to_e: Vec<&Value> = egress.iter().filter(|x| port(x) == u64::from(e)).collect();
    let to_o: Vec<&Value> = egress.iter().filter(|x| port(x) == u64::from(o)).collect();
    assert!(
        to_e.len() >= 5
            && to_e
                .iter()
                .all(|x| x["credential"] == "demo" && x["outcome"] == "allowed")
            && to_e.iter().any(|x| x["protocol"] == "socks5")
            && to_o.len() == 2
            && to_o
                .iter()
                .all(|x| x["credential"].is_null() && x["outcome"] == "allowed"),
        "{}: records to E must name the credential `demo`, to O none: {egress:#?}",
        w.label()
    );
    assert_ledger_clean(&w, &secret);
}

/// Looks for the secret from inside, knowing it only as two halves on its command line (so
/// its own argv, and `/proc/*/cmdline`, never hold it whole): `os.environ`, the variables by
/// name, `env`, `cat /proc/self/environ`, `cat` of the credential file (also through
/// `/proc/self/root` and a hard link made inside), every readable `/proc/*/environ` and
/// `cmdline`, every file under `$TMPDIR`, `$HOME` and the project, and the CA bundle named by
/// `SSL_CERT_FILE` (which must hold certificates and no private key). `ESCAPED: …` for each
/// place the secret (or a key) is found.
const SECRET_PROBE_PY: &str = include_str!("attacks/secret_probe.py");

/// The secret never enters the sandbox. (a) `env = "MY_PAT"`, with `ALSO` holding a
/// copy and `ALSO_WRAPPED` holding it inside other text, all three kept by `env.keep` in the
/// preset and `--keep-env`: none is set inside, and [`SECRET_PROBE_PY`] finds the secret
/// nowhere; the CA bundle has certificates and no private key. (b) `file = "…"` with the file
/// in the project (a writable root): the file reads as nothing inside (hidden), directly,
/// through `/proc/self/root` or a hard link. In both runs curl to the endpoint gets the secret
/// injected (so the proxy held it while the command searched for it), and the ledger does not
/// hold it. The probe runs first on the host with the same variables and file: the control,
/// which must find the secret.
pub(crate) fn credential_never_enters_the_sandbox(u: User) {
    let w = World::new(u, "credential_never_enters_the_sandbox");
    let pki = broker_pki(&w.base);
    let secret = fresh_secret(&w);
    // The credential file, in the project: only the file-source run has it (in the env-source
    // run nothing hides it, and it is not the secret's source).
    let cred = w.proj.join("secrets/token");
    let put_cred = || {
        w.put(&cred, format!("{secret}\n").as_bytes());
        fs::set_permissions(&cred, fs::Permissions::from_mode(0o600)).expect("chmod");
    };
    put_cred();
    let ep = broker_server(&w, &pki, "endpoint", "-");
    let e = ep.port;
    let ca = pki.join("ca.pem").display().to_string();
    let cred_s = cred.display().to_string();
    let (h1, h2) = secret.split_at(secret.len() / 2);
    let mut probe = w.python("probe", SECRET_PROBE_PY);
    probe.extend([h1.to_string(), h2.to_string(), cred_s.clone()]);
    let wrapped = format!("prefix-{secret}-suffix");
    let env = [
        ("MY_PAT", secret.as_str()),
        ("ALSO", secret.as_str()),
        ("ALSO_WRAPPED", wrapped.as_str()),
        ("SSL_CERT_FILE", ca.as_str()),
    ];

    // The control: on the host the same probe finds the secret in each of these places.
    let c = run_cmd(w.cmd(&probe, &env), probe.join(" "), None, TIMEOUT);
    for place in [
        "ESCAPED: secret in os.environ",
        "ESCAPED: variable MY_PAT is set inside",
        "ESCAPED: variable ALSO is set inside",
        "ESCAPED: variable ALSO_WRAPPED is set inside",
        "ESCAPED: secret in env",
        "ESCAPED: secret in cat /proc/self/environ",
        &format!("ESCAPED: secret in cat {cred_s}"),
        "ESCAPED: secret in a hard link to the credential file",
    ] {
        assert!(
            c.stdout.lines().any(|l| l == place),
            "{}: CONTROL FAILED: on the host the probe must report `{place}`\n{}",
            w.label(),
            c.show()
        );
    }
    let _ = fs::remove_file(w.proj.join("linked-credential"));
    fs::remove_file(&cred).expect("remove the credential file");

    let script = |name: &str| {
        let mut s = w.bash(
            name,
            &format!(
                "\"$@\"\ncurl -sS -m 5 -w ' code=%{{http_code}}\\n' https://localhost:{e}/{name}\n"
            ),
        );
        s.extend(probe.iter().cloned());
        s
    };
    let hosts = [format!("localhost:{e}")];
    let upstream = format!("network.upstream_ca = [{ca:?}]\n");
    for (name, source, flags, extra) in [
        (
            "env-source",
            "env = \"MY_PAT\"".to_string(),
            &["--keep-env", "MY_PAT", "--keep-env", "ALSO"][..],
            format!("{upstream}env.keep = [\"MY_PAT\", \"ALSO\", \"ALSO_WRAPPED\"]\n"),
        ),
        (
            "file-source",
            format!("file = {cred_s:?}"),
            &[][..],
            upstream.clone(),
        ),
    ] {
        if name == "file-source" {
            put_cred();
        }
        let policy = broker_policy(&w, &hosts, &extra, Some(e), &source);
        let r = exec_raw(&w, flags, &policy, &script(name), &env);
        let seen = broker_seen(&ep);
        let injected = seen.header(&format!("/{name}"), "authorization");
        let mut why: Vec<String> = r
            .lines("ESCAPED")
            .iter()
            .map(|l| l.replace(&secret, "<SECRET>"))
            .collect();
        if !(r.started() && r.code == Some(0)) {
            why.push("the probe did not run to the end".into());
        }
        if injected != Some(vec![format!("Bearer {secret}")]) {
            why.push(format!(
                "curl to the endpoint in the same run did not get the secret injected \
                 (so the search proves nothing): {injected:?}"
            ));
        }
        if !r.stdout.lines().any(|l| {
            l.strip_prefix("bundle: ")
                .and_then(|x| x.split(' ').next())
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|n| n >= 2)
        }) {
            why.push("the CA bundle (SSL_CERT_FILE) must be readable and hold the test CA and the per-run CA".into());
        }
        if !r.stdout.contains("files read: ") || r.stdout.contains("files read: 0") {
            why.push("the probe read no file under $TMPDIR, $HOME and the project".into());
        }
        if name == "file-source" {
            if fs::read_to_string(&cred).ok().as_deref() != Some(&format!("{secret}\n")) {
                why.push("the credential file changed on the host".into());
            }
            if !r
                .stdout
                .contains(&format!("ran: cat {cred_s} rc=0 bytes=0"))
            {
                why.push("the credential file must read as empty inside (hidden)".into());
            }
        }
        assert!(
            why.is_empty(),
            "{}: {name}: SECRET REACHED THE SANDBOX:\n  - {}\n{}",
            w.label(),
            why.join("\n  - "),
            r.show().replace(&secret, "<SECRET>")
        );
        let (egress, _) = w.run_records();
        assert!(
            egress.len() == 1 && egress[0]["credential"] == "demo",
            "{}: {name}: one brokered record: {egress:#?}",
            w.label()
        );
        assert_ledger_clean(&w, &secret);
        let _ = fs::remove_file(w.proj.join("linked-credential"));
    }
}

/// What the broker refuses. With the endpoint `localhost:E` and its upstream trusted:
/// plain `http://localhost:E` → `403`, a WebSocket upgrade over HTTPS → `403`, a `Host` header
/// naming another port → `403`, the upstream seeing none of these requests. A credential that cannot be read (`env` unset; `command = "exit
/// 3"`) or an `upstream_ca` file with no certificate: pinfold exits 125 naming the problem, the
/// command (`touch MARKER`) never runs, the upstream sees nothing. Without `upstream_ca` the
/// upstream is not trusted: `CONNECT` gets `502` with the reason (read with bash `/dev/tcp`
/// from the proxy), curl fails, and the upstream sees no request (so no secret).
fn credential_broker_fails_closed(u: User) {
    let w = World::new(u, "credential_broker_fails_closed");
    let pki = broker_pki(&w.base);
    w.own();
    let ep = broker_server(&w, &pki, "endpoint", "-");
    let e = ep.port;
    let ca = pki.join("ca.pem").display().to_string();
    let secret = fresh_secret(&w);
    let hosts = [format!("localhost:{e}")];
    let trusted = format!("network.upstream_ca = [{ca:?}]\n");
    let env_src = "env = \"MY_PAT\"";
    let with_secret = [("MY_PAT", secret.as_str())];

    // Plain http:// and a WebSocket upgrade.
    let policy = broker_policy(&w, &hosts, &trusted, Some(e), env_src);
    let r = exec_raw(
        &w,
        &[],
        &policy,
        &w.bash(
            "refused",
            &format!(
                "curl -sS -m 5 -w ' plain=%{{http_code}}\\n' http://localhost:{e}/plain\n\
                 curl -sS -m 5 -w ' ws=%{{http_code}}\\n' -H 'Connection: Upgrade' -H 'Upgrade: websocket' \
                 -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' https://localhost:{e}/ws\n\
                 curl -sS -m 5 -w ' foreign=%{{http_code}}\\n' -H 'Host: localhost:1' https://localhost:{e}/foreign\n\
                 curl -sS -m 5 -w ' ok=%{{http_code}}\\n' https://localhost:{e}/ok\n"
            ),
        ),
        &with_secret,
    );
    let seen = broker_seen(&ep);
    assert!(
        r.started()
            && r.stdout.contains("plain=403")
            && r.stdout.contains("ws=403")
            && r.stdout.contains("foreign=403")
            && seen.request("/foreign").is_none()
            && r.stdout.contains("ok=200")
            && seen.request("/plain").is_none()
            && seen.request("/ws").is_none()
            && seen.header("/ok", "authorization") == Some(vec![format!("Bearer {secret}")]),
        "{}: plain http:// and an Upgrade to the endpoint must get 403 and reach nothing (and \
         the brokered request in the same run work)\n  upstream saw: {:?}\n{}",
        w.label(),
        seen.requests,
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        egress
            .iter()
            .any(|x| x["outcome"] == "refused" && x["protocol"] == "http")
            && egress.iter().all(|x| !x.to_string().contains(&secret)),
        "{}: {egress:#?}",
        w.label()
    );
    assert_ledger_clean(&w, &secret);

    // Nothing runs when the credential cannot be read or the upstream roots are unusable.
    let bad_ca = w.base.join("not-a-cert.pem");
    w.put(&bad_ca, b"this is not a certificate\n");
    let bad_ca = bad_ca.display().to_string();
    let marker = w.proj.join("MARKER");
    for (what, extra, source, env, needle) in [
        (
            "env unset",
            trusted.clone(),
            env_src.to_string(),
            &[][..],
            "demo",
        ),
        (
            "command exits 3",
            trusted.clone(),
            "command = \"exit 3\"".to_string(),
            &with_secret[..],
            "demo",
        ),
        (
            "upstream_ca without a certificate",
            format!("network.upstream_ca = [{bad_ca:?}]\n"),
            env_src.to_string(),
            &with_secret[..],
            "not-a-cert.pem",
        ),
    ] {
        let before = broker_seen(&ep).connections;
        let policy = broker_policy(&w, &hosts, &extra, Some(e), &source);
        let r = exec_raw(
            &w,
            &[],
            &policy,
            &argv(&[
                "bash",
                "-c",
                &format!("touch MARKER; curl -sS -m 5 https://localhost:{e}/never"),
            ]),
            env,
        );
        assert!(
            r.code == Some(125)
                && r.stderr.contains(needle)
                && !marker.exists()
                && broker_seen(&ep).connections == before
                && !r.stderr.contains(&secret),
            "{}: {what}: pinfold must exit 125 naming `{needle}`, and nothing run\n{}",
            w.label(),
            r.show()
        );
        w.skip_records();
    }
    assert_ledger_clean(&w, &secret);

    // The upstream's CA is not trusted.
    let before = broker_seen(&ep);
    let policy = broker_policy(&w, &hosts, "", Some(e), env_src);
    let r = exec_raw(
        &w,
        &[],
        &policy,
        &w.bash(
            "untrusted",
            &format!(
                "curl -sS -m 5 -w ' untrusted=%{{http_code}}\\n' https://localhost:{e}/untrusted\n\
                 exec 3<>/dev/tcp/127.0.0.1/{PROXY_PORT}\n\
                 printf 'CONNECT localhost:{e} HTTP/1.1\\r\\nHost: localhost:{e}\\r\\n\\r\\n' >&3\n\
                 timeout 5 cat <&3\n"
            ),
        ),
        &with_secret,
    );
    let seen = broker_seen(&ep);
    assert!(
        r.started()
            && r.stderr.contains("502")
            && r.stdout.contains("HTTP/1.1 502")
            && r.stdout.contains("pinfold egress: upstream TLS")
            && seen.requests.len() == before.requests.len()
            && !seen.raw[before.raw.len()..].contains(&secret),
        "{}: an untrusted upstream must get 502 with the reason and see no request\n  upstream saw: {:?}\n{}",
        w.label(),
        seen.requests,
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        egress.len() == 2 && egress.iter().all(|x| x["outcome"] != "allowed"),
        "{}: {egress:#?}",
        w.label()
    );
    assert_ledger_clean(&w, &secret);
}
