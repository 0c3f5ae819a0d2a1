//! The egress proxy on a loopback port, for `bench/egress.sh`:
//!
//! ```text
//! cargo run --release -p pinfold-egress --example bench_proxy -- 127.0.0.1:0 127.0.0.1:8443 ...
//! ```
//!
//! The first argument is the address to listen on, the rest are allowlist entries
//! ([`HostPattern`] syntax). A loopback upstream must be listed exactly, address and port
//! (`127.0.0.1:8443`): the proxy drops loopback addresses otherwise. Prints `port=PORT` once
//! listening, then one line per [`Event`] on stderr, and serves until killed. The resolver
//! is the system's and the limits are the defaults, as `pinfold` will run it.

use std::io::Write;
use std::sync::Arc;

use pinfold_egress::{Config, Event, HostPattern, Proxy};
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let listen = args
        .next()
        .ok_or("usage: bench_proxy LISTEN_ADDR ALLOW...")?;
    let allow = args
        .map(|a| a.parse::<HostPattern>().map_err(|e| format!("{a}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let config = Config {
        allow,
        ..Config::default()
    };
    let proxy = built(Proxy::new(
        config,
        Arc::new(|e: Event| {
            let _ = writeln!(
                std::io::stderr().lock(),
                "{} {:?} {}:{} {:?} up={} down={}",
                e.connection,
                e.protocol,
                e.host,
                e.port,
                e.outcome,
                e.bytes_up,
                e.bytes_down
            );
        }),
    ))?;
    let listener = TcpListener::bind(&listen).await?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "port={}", listener.local_addr()?.port())?;
        out.flush()?;
    }
    proxy.serve_tcp(listener).await?;
    Ok(())
}

/// `Proxy::new` returns the proxy; with the credential broker being written it returns a
/// `Result`. This takes either, so the benchmark builds on both sides of that change (drop it
/// once the broker has landed).
fn built<P: Built>(p: P) -> Result<Arc<Proxy>, String> {
    p.built()
}

trait Built {
    fn built(self) -> Result<Arc<Proxy>, String>;
}

impl Built for Arc<Proxy> {
    fn built(self) -> Result<Arc<Proxy>, String> {
        Ok(self)
    }
}

impl<E: std::fmt::Debug> Built for Result<Arc<Proxy>, E> {
    fn built(self) -> Result<Arc<Proxy>, String> {
        self.map_err(|e| format!("building the proxy: {e:?}"))
    }
}
