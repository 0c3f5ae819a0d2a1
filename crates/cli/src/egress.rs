//! `pinfold exec` with a host allowlist: the egress proxy (crates/egress) on threads of this
//! process, serving the listener the sandbox makes inside its own network namespace
//! (`pinfold_sandbox::Network::Proxy`), with every decision recorded in the audit ledger.
//!
//! The sandbox's namespace has nothing but loopback. Its listener (127.0.0.1:3128 there) is
//! passed out to this process before the command starts, so connections the command makes to
//! it are accepted here, outside, by the proxy — no relay process inside the sandbox and no
//! socket file to bind into it. Nothing else in the namespace leads anywhere.

use std::sync::Arc;

use pinfold_egress::{Event, Outcome, Protocol, Proxy};
use pinfold_policy::config::SandboxPreset;

use crate::anyhow_lite::Error;
use crate::record::Recorder;

/// The proxy for one run, and the thread writing its decisions to the ledger.
pub struct Egress {
    runtime: tokio::runtime::Runtime,
    proxy: Arc<Proxy>,
    recording: Option<std::thread::JoinHandle<Result<u64, Error>>>,
}

impl Egress {
    /// Start the proxy for `preset`'s allowlist (nothing is listening yet: see
    /// [`Egress::serve`]). Decisions go to `recorder`.
    pub fn start(preset: &SandboxPreset, recorder: Recorder) -> Result<Egress, Error> {
        if !preset.endpoints.is_empty() {
            return Err(Error::new(format!(
                "the `{}` preset names credential endpoints, and this pinfold cannot inject credentials yet",
                preset.name
            ))
            .hint("remove the [[sandbox.X.network.endpoint]] tables, or run without them (docs/egress.md)"));
        }
        let config = pinfold_egress::Config { allow: preset.network_hosts.clone(), ..Default::default() };
        let (tx, rx) = std::sync::mpsc::channel::<Event>();
        // The sink must not block the proxy's tasks: records are written by a thread of their own.
        let sink: pinfold_egress::EventSink = Arc::new(move |e| {
            let _ = tx.send(e);
        });
        let proxy = Proxy::new(config, sink).map_err(|e| Error::new("cannot start the egress proxy").cause(e))?;
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
        Ok(Egress { runtime, proxy, recording: Some(recording) })
    }

    /// Serve the listener the sandbox made: every connection the command makes to it.
    pub fn serve(&self, listener: std::net::TcpListener) {
        let proxy = self.proxy.clone();
        let _guard = self.runtime.enter();
        let listener = listener.set_nonblocking(true).and_then(|()| tokio::net::TcpListener::from_std(listener));
        match listener {
            Ok(l) => {
                self.runtime.spawn(async move {
                    let _ = proxy.serve_tcp(l).await;
                });
            }
            // The command then finds nothing listening: no network, never more.
            Err(e) => eprintln!("pinfold: cannot serve the egress proxy: {e}"),
        }
    }

    /// Stop serving and wait until every decision is in the ledger; how many were recorded.
    pub fn finish(mut self) -> Result<u64, Error> {
        // Dropping the runtime ends every connection still open; their events go out as the
        // tasks are dropped, before the sink (inside the proxy) is.
        self.runtime.shutdown_timeout(std::time::Duration::from_millis(200));
        drop(self.proxy);
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
    v
}
