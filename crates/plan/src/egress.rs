//! `pinfold exec` with a host allowlist: the egress proxy (crates/egress) on threads of this
//! process, serving the listener the sandbox makes inside its own network namespace
//! (`pinfold_sandbox::Network::Proxy`), with every decision recorded in the audit ledger.
//!
//! The sandbox's namespace has nothing but loopback. Its listener (127.0.0.1:3128 there) is
//! passed out to this process before the command starts, so connections the command makes to
//! it are accepted here, outside, by the proxy — no relay process inside the sandbox and no
//! socket file to bind into it. Nothing else in the namespace leads anywhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pinfold_egress::{Event, Outcome, Protocol, Proxy, Secret};
use pinfold_policy::config::{Credential, CredentialSource, SandboxPreset};

use crate::record::Recorder;
use crate::Error;

/// The proxy for one run, and the thread writing its decisions to the ledger.
pub struct Egress {
    /// `None` once finished.
    runtime: Option<tokio::runtime::Runtime>,
    proxy: Option<Arc<Proxy>>,
    recording: Option<std::thread::JoinHandle<Result<u64, Error>>>,
    /// The CA bundle written for the sandbox (credential endpoints only), removed at the end.
    bundle: Option<PathBuf>,
    /// Where the secrets came from: variables to remove from the command's environment and
    /// files to hide from it.
    pub secret_vars: Vec<String>,
    pub secret_files: Vec<PathBuf>,
}

impl Egress {
    /// Start the proxy for `preset`'s allowlist and credential endpoints (nothing is listening
    /// yet: see [`Egress::serve`]). Secrets are read now, outside the sandbox. Decisions go
    /// to `recorder`.
    pub fn start(preset: &SandboxPreset, credentials: &BTreeMap<String, Credential>, recorder: Recorder) -> Result<Egress, Error> {
        let mut endpoints = Vec::new();
        let mut secret_vars = Vec::new();
        let mut secret_files = Vec::new();
        let mut values: Vec<String> = Vec::new();
        for ep in &preset.endpoints {
            let Some(cred) = credentials.get(&ep.credential) else {
                // The policy loader checks this; a config built otherwise still fails closed.
                return Err(Error::new(format!("the endpoint {} names the credential `{}`, which the policy does not define", ep.host, ep.credential)));
            };
            let value = read_secret(cred)?;
            match &cred.source {
                CredentialSource::Env(var) => secret_vars.push(var.clone()),
                CredentialSource::File(f) => secret_files.push(PathBuf::from(f)),
                CredentialSource::Command(_) => {}
            }
            values.push(value.clone());
            endpoints.push(pinfold_egress::Endpoint {
                host: ep.host.clone(),
                credential: ep.credential.clone(),
                header: ep.header.clone(),
                format: ep.format.clone(),
                secret: Secret::new(value),
            });
        }
        // Any other variable holding a secret goes too (`GH_TOKEN` beside `GITHUB_TOKEN`).
        for (k, v) in std::env::vars_os() {
            if let (Ok(k), Ok(v)) = (k.into_string(), v.into_string())
                && values.iter().any(|s| s.len() >= 4 && v.contains(s.as_str()))
                && !secret_vars.contains(&k)
            {
                secret_vars.push(k);
            }
        }
        let mut upstream_ca = Vec::new();
        for f in &preset.upstream_ca {
            let certs = pinfold_egress::certs_from_pem_file(Path::new(f))
                .map_err(|e| Error::new(format!("cannot use {f} from network.upstream_ca of the `{}` preset", preset.name)).cause(e))?;
            upstream_ca.extend(certs);
        }
        let brokered = !endpoints.is_empty();
        let config = pinfold_egress::Config { allow: preset.network_hosts.clone(), endpoints, upstream_ca, ..Default::default() };
        let (tx, rx) = std::sync::mpsc::channel::<Event>();
        // The sink must not block the proxy's tasks: records are written by a thread of their own.
        let sink: pinfold_egress::EventSink = Arc::new(move |e| {
            let _ = tx.send(e);
        });
        let proxy = Proxy::new(config, sink).map_err(|e| Error::new("cannot start the egress proxy").cause(e))?;
        // Tools in the sandbox must trust the per-run CA for brokered hosts: a bundle of the
        // roots they would use anyway ($SSL_CERT_FILE, else the system's) plus that CA.
        let bundle = if brokered {
            let base = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from).filter(|p| p.is_file());
            let text = proxy
                .ca_bundle(base.as_deref())
                .map_err(|e| Error::new("cannot build the CA bundle for the sandbox").cause(e))?;
            Some(write_bundle(&text)?)
        } else {
            None
        };
        let recording = std::thread::Builder::new()
            .name("egress-ledger".into())
            .spawn(move || {
                let mut n = 0;
                for e in rx {
                    recorder.record("egress", event_record(&e))?;
                    n += 1;
                }
                Ok(n)
            })
            .map_err(|e| Error::new("cannot start the egress recording thread").cause(e))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("egress")
            .enable_all()
            .build()
            .map_err(|e| Error::new("cannot start the egress proxy's runtime").cause(e))?;
        Ok(Egress { runtime: Some(runtime), proxy: Some(proxy), recording: Some(recording), bundle, secret_vars, secret_files })
    }

    /// Serve the listener the sandbox made: every connection the command makes to it.
    pub fn serve(&self, listener: std::net::TcpListener) {
        let (Some(proxy), Some(runtime)) = (self.proxy.clone(), &self.runtime) else { return };
        let _guard = runtime.enter();
        let listener = listener.set_nonblocking(true).and_then(|()| tokio::net::TcpListener::from_std(listener));
        match listener {
            Ok(l) => {
                runtime.spawn(async move {
                    let _ = proxy.serve_tcp(l).await;
                });
            }
            // The command then finds nothing listening: no network, never more.
            Err(e) => say!("pinfold: cannot serve the egress proxy: {e}"),
        }
    }

    /// The command's environment beside [`proxy_env`] (which the plan sets): with credential
    /// endpoints, the CA bundle in every variable tools read it from.
    pub fn ca_env(&self) -> Vec<(String, String)> {
        let mut v = Vec::new();
        if let Some(b) = &self.bundle {
            let b = b.display().to_string();
            for k in ["SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "PIP_CERT", "CARGO_HTTP_CAINFO"] {
                v.push((k.to_string(), b.clone()));
            }
        }
        v
    }

    /// Stop serving and wait until every decision is in the ledger; how many were recorded.
    pub fn finish(mut self) -> Result<u64, Error> {
        // Dropping the runtime ends every connection still open; their events go out as the
        // tasks are dropped, before the sink (inside the proxy) is.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(std::time::Duration::from_millis(200));
        }
        drop(self.proxy.take());
        match self.recording.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::new("the egress recording thread failed")),
            None => Ok(0),
        }
    }
}

/// Environment for a command whose network goes through the proxy at `127.0.0.1:port`: the
/// variables curl, git, pip, npm, cargo, Go, Node and Java read, in both cases where tools
/// differ. `NO_PROXY` is empty: inside the sandbox even `localhost` is only reachable through
/// the proxy (the namespace's own loopback has nothing else on it).
pub fn proxy_env(port: u16, inherited_java_options: Option<&str>) -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{port}");
    let socks = format!("socks5h://127.0.0.1:{port}");
    let mut v: Vec<(String, String)> = Vec::new();
    for (k, val) in [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
        ("FTP_PROXY", &http),
        // npm and yarn read these (npm's `proxy` / `https-proxy` settings).
        ("NPM_CONFIG_PROXY", &http),
        ("NPM_CONFIG_HTTPS_PROXY", &http),
        ("YARN_HTTP_PROXY", &http),
        ("YARN_HTTPS_PROXY", &http),
        // cargo's `http.proxy`.
        ("CARGO_HTTP_PROXY", &http),
        // pip's `--proxy`.
        ("PIP_PROXY", &http),
    ] {
        v.push((k.to_string(), val.clone()));
        v.push((k.to_lowercase(), val.clone()));
    }
    v.push(("NO_PROXY".into(), String::new()));
    v.push(("no_proxy".into(), String::new()));
    v.push(("NPM_CONFIG_NOPROXY".into(), String::new()));
    v.push(("npm_config_noproxy".into(), String::new()));
    // Node 24+ honours the variables above in its own fetch and http only when asked.
    v.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    // Java (and Gradle, sbt, …) read system properties, not the variables.
    let java = format!(
        "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort={port} -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort={port} -Dhttp.nonProxyHosts="
    );
    let java = match inherited_java_options.filter(|s| !s.trim().is_empty()) {
        Some(prev) => format!("{prev} {java}"),
        None => java,
    };
    v.push(("JAVA_TOOL_OPTIONS".into(), java));
    v
}

impl Drop for Egress {
    fn drop(&mut self) {
        if let Some(b) = self.bundle.take() {
            let _ = std::fs::remove_file(b);
        }
    }
}

/// Read a credential outside the sandbox. Errors name the credential and its source, never
/// a value.
fn read_secret(c: &Credential) -> Result<String, Error> {
    let what = |src: &str| format!("cannot read the credential `{}` from {src}", c.name);
    let value = match &c.source {
        CredentialSource::Env(var) => std::env::var(var).map_err(|_| {
            Error::new(what(&format!("the environment variable {var}"))).hint(format!("set {var} in the environment pinfold runs in"))
        })?,
        CredentialSource::File(f) => std::fs::read_to_string(f).map_err(|e| Error::new(what(f)).cause(e))?,
        CredentialSource::Command(cmd) => {
            let out = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(cmd)
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::inherit())
                .output()
                .map_err(|e| Error::new(what(&format!("the command `{cmd}`"))).cause(e))?;
            if !out.status.success() {
                return Err(Error::new(what(&format!("the command `{cmd}`"))).cause(format!("it exited with {}", out.status)));
            }
            String::from_utf8(out.stdout).map_err(|_| Error::new(what(&format!("the command `{cmd}`"))).cause("its output is not UTF-8"))?
        }
    };
    // A trailing newline is the file's or the command's, not the secret's.
    let value = value.trim_end_matches(['\n', '\r']).to_string();
    if value.is_empty() {
        return Err(Error::new(format!("the credential `{}` is empty", c.name)));
    }
    if value.contains(['\n', '\r', '\0']) {
        return Err(Error::new(format!("the credential `{}` holds a line break or NUL, which no header may carry", c.name)));
    }
    Ok(value)
}

/// Write the CA bundle where the sandbox can read it: a fresh file in the temp dir (the
/// certificates are public; the CA's key never leaves this process's memory).
fn write_bundle(text: &str) -> Result<PathBuf, Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::env::temp_dir();
    for i in 0..16u32 {
        let p = dir.join(format!("pinfold-ca-{}-{i}.pem", std::process::id()));
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o444).open(&p) {
            Ok(mut f) => {
                f.write_all(text.as_bytes()).map_err(|e| Error::new(format!("cannot write {}", p.display())).cause(e))?;
                return Ok(p);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::new(format!("cannot create {}", p.display())).cause(e)),
        }
    }
    Err(Error::new("cannot create the CA bundle file in the temp dir"))
}

/// One proxy decision as recorded: no header or body content, ever.
fn event_record(e: &Event) -> serde_json::Value {
    let (outcome, reason) = match &e.outcome {
        Outcome::Allowed => ("allowed", None),
        Outcome::Refused(r) => ("refused", Some(r.to_string())),
        Outcome::Failed(why) => ("failed", Some(why.clone())),
    };
    let protocol = match e.protocol {
        Protocol::Http => "http",
        Protocol::Connect => "connect",
        Protocol::Socks5 => "socks5",
    };
    let mut v = serde_json::json!({
        "connection": e.connection,
        "protocol": protocol,
        "host": e.host,
        "port": e.port,
        "addr": e.addr.map(|a| a.to_string()),
        "outcome": outcome,
        "bytes_up": e.bytes_up,
        "bytes_down": e.bytes_down,
    });
    if let Some(r) = reason {
        v["reason"] = r.into();
    }
    if let Some(c) = &e.credential {
        v["credential"] = c.as_str().into();
    }
    v
}
