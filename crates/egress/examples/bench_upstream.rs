//! A loopback origin server for `bench/egress.sh`: HTTPS (rustls, ring, a certificate for
//! 127.0.0.1 from a throw-away rcgen CA) and plain HTTP, each answering `GET /<size>` with
//! that many bytes as fast as it can write them. Sizes take a binary suffix: `/0`, `/1k`,
//! `/64m`, `/1g`.
//!
//! ```text
//! cargo run --release -p pinfold-egress --example bench_upstream -- DIR
//! ```
//!
//! Writes `DIR/ca.pem` (the CA for `curl --cacert`), then prints one line,
//! `https=PORT http=PORT`, and serves until killed. One request per connection
//! (`Connection: close`), which is what a benchmark client opening a fresh connection sees.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair,
    SanType,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// Bytes handed to one `write` call: large enough that the server's own loop is never what a
/// benchmark measures (rustls cuts it into 16 KiB records).
const CHUNK: usize = 256 * 1024;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir: PathBuf = std::env::args_os()
        .nth(1)
        .ok_or("usage: bench_upstream DIR (writes DIR/ca.pem)")?
        .into();
    let acceptor = tls_acceptor(&dir)?;
    let https = TcpListener::bind("127.0.0.1:0").await?;
    let http = TcpListener::bind("127.0.0.1:0").await?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "https={} http={}",
            https.local_addr()?.port(),
            http.local_addr()?.port()
        )?;
        out.flush()?;
    }
    let body: Arc<[u8]> = (0..CHUNK).map(|i| (i % 251) as u8).collect();

    let plain_body = body.clone();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = http.accept().await else {
                continue;
            };
            let _ = s.set_nodelay(true);
            let body = plain_body.clone();
            tokio::spawn(async move {
                let _ = respond(s, &body).await;
            });
        }
    });
    loop {
        let Ok((s, _)) = https.accept().await else {
            continue;
        };
        let _ = s.set_nodelay(true);
        let acceptor = acceptor.clone();
        let body = body.clone();
        tokio::spawn(async move {
            if let Ok(tls) = acceptor.accept(s).await {
                let _ = respond(tls, &body).await;
            }
        });
    }
}

/// Read one request head, answer with the size its path asks for, close.
async fn respond<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, body: &[u8]) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).await?;
        if n == 0 || head.len() > 64 * 1024 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let path = head
        .split(|&b| b == b' ')
        .nth(1)
        .and_then(|p| std::str::from_utf8(p).ok())
        .unwrap_or("/");
    let Some(mut left) = parse_size(path.trim_start_matches('/')) else {
        s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await?;
        return s.shutdown().await;
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {left}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await?;
    while left > 0 {
        let n = left.min(body.len() as u64) as usize;
        s.write_all(&body[..n]).await?;
        left -= n as u64;
    }
    s.flush().await?;
    s.shutdown().await
}

/// `123`, `4k`, `64m`, `1g` (binary multiples).
fn parse_size(s: &str) -> Option<u64> {
    let (digits, mult) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1 << 10),
        b'm' | b'M' => (&s[..s.len() - 1], 1 << 20),
        b'g' | b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

/// A CA written to `dir/ca.pem` and a server configuration for a leaf it signed, valid for
/// 127.0.0.1 and `localhost`.
fn tls_acceptor(
    dir: &std::path::Path,
) -> Result<tokio_rustls::TlsAcceptor, Box<dyn std::error::Error>> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name = DistinguishedName::new();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "pinfold egress bench CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()])?;
    leaf.subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    leaf.distinguished_name = DistinguishedName::new();
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    let leaf_key = KeyPair::generate()?;
    let cert = leaf.signed_by(&leaf_key, &ca)?;
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("ca.pem"), ca.pem())?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}
