//! Relaying a tunnel (`CONNECT`, or SOCKS5 to a host that is not a credential endpoint): the
//! upstream's bytes flow at once, the client's are held until its first bytes pass
//! [`Expect`], then both ways are copied until either side ends.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::decide::Expect;
use crate::event::{Event, Outcome, PendingEvent, Refusal};
use crate::proxy::Proxy;
use crate::stream::{AbortOnDrop, Counted};
use crate::tls::{Hello, MAX_HELLO, inspect};

impl Proxy {
    /// Relay bytes both ways after checking the client's first bytes. The upstream's bytes
    /// flow from the start (a server may speak first); the client's are held until checked.
    pub(crate) async fn tunnel<C>(
        &self,
        client: C,
        upstream: TcpStream,
        expect: Expect,
        mut event: Event,
    ) where
        C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (mut client_r, mut client_w) = tokio::io::split(client);
        let (up_r, up_w) = upstream.into_split();
        // Bytes are counted as they pass, and the event goes out when this guard is dropped:
        // at the end of the tunnel, or if the task is cancelled while the tunnel is open.
        let counters = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let mut up_r = Counted {
            inner: up_r,
            counters: counters.clone(),
        };
        let mut up_w = Counted {
            inner: up_w,
            counters: counters.clone(),
        };
        event.bytes_up = 0;
        event.bytes_down = 0;
        let mut pending = PendingEvent::new(self.sink.clone(), event, counters);
        let down = tokio::spawn(async move {
            let n = relay(&mut up_r, &mut client_w).await.unwrap_or(0);
            let _ = client_w.shutdown().await;
            n
        });
        // The copy toward the client runs in its own task: cancel it with the tunnel.
        let mut down = AbortOnDrop(down);
        let mut buf = Vec::new();
        let check = tokio::time::timeout(
            self.config.limits.handshake_timeout,
            read_hello(&mut client_r, &mut buf),
        )
        .await;
        let refusal = match (check, &expect) {
            (Err(_), _) => Some(Refusal::NotTls("no ClientHello in time".into())),
            // A SOCKS client may open a connection and send nothing (a server-first protocol
            // that ends early): nothing to check, nothing forwarded.
            (Ok(Err(e)), Expect::TlsIfAny { .. })
                if e.kind() == io::ErrorKind::UnexpectedEof && buf.is_empty() =>
            {
                None
            }
            (Ok(Err(e)), _) => Some(Refusal::NotTls(format!("read failed: {e}"))),
            (Ok(Ok(hello)), expect) => expect.check(&hello),
        };
        if let Some(r) = refusal {
            down.0.abort();
            if let Some(e) = pending.event.as_mut() {
                e.outcome = Outcome::Refused(r);
            }
            return;
        }
        let upward = async {
            up_w.write_all(&buf).await?;
            relay(&mut client_r, &mut up_w).await?;
            let _ = up_w.shutdown().await;
            Ok::<(), io::Error>(())
        };
        let _ = upward.await;
        let _ = (&mut down.0).await;
        drop(pending);
    }
}

/// Bytes a tunnel moves per read and write, each way. `tokio::io::copy` moves 8 KiB at a
/// time: a recv and a send per 8 KiB, whose per-call cost is a large share of the proxy's CPU on a
/// fast link (docs/performance.md, egress). 64 KiB, one loopback segment, cuts the calls
/// eightfold; two buffers per tunnel, 128 MiB at the 1024-connection limit.
const RELAY_BUF: usize = 64 * 1024;

/// Copy until end of file through one [`RELAY_BUF`] buffer; the count copied.
async fn relay<R, W>(r: &mut R, w: &mut W) -> io::Result<u64>
where
    R: AsyncRead + Unpin + ?Sized,
    W: AsyncWrite + Unpin + ?Sized,
{
    let mut buf = vec![0u8; RELAY_BUF];
    let mut total = 0u64;
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            w.flush().await?;
            return Ok(total);
        }
        w.write_all(&buf[..n]).await?;
        total += n as u64;
    }
}

/// Read until [`inspect`] can tell what the bytes are (at most [`MAX_HELLO`] plus records).
async fn read_hello<R: AsyncRead + Unpin>(r: &mut R, buf: &mut Vec<u8>) -> io::Result<Hello> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(h) = inspect(buf) {
            return Ok(h);
        }
        if buf.len() > MAX_HELLO + 1024 {
            return Ok(Hello::Malformed("ClientHello too large"));
        }
        let n = r.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "client closed before its first bytes",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
