//! Serving: the accept loops on TCP and unix listeners, the connection limit, and the
//! dispatch of each client to SOCKS5 or to HTTP (forwarding and `CONNECT`) by its first byte.

use std::convert::Infallible;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};

use crate::proxy::Proxy;
use crate::stream::Rewind;

impl Proxy {
    /// Accept connections on a TCP listener until the task is dropped or accepting fails.
    pub async fn serve_tcp(self: Arc<Self>, listener: TcpListener) -> io::Result<()> {
        loop {
            let permit = self.slot().await?;
            if let Some((stream, _)) = accepted(listener.accept().await).await? {
                let _ = stream.set_nodelay(true);
                self.spawn_client(stream, permit);
            }
        }
    }

    /// Accept connections on a unix socket listener (the in-sandbox bridge's side).
    pub async fn serve_unix(self: Arc<Self>, listener: UnixListener) -> io::Result<()> {
        loop {
            let permit = self.slot().await?;
            if let Some((stream, _)) = accepted(listener.accept().await).await? {
                self.spawn_client(stream, permit);
            }
        }
    }

    /// A connection slot: at most `Limits::max_connections` clients are served at once; the
    /// rest wait in the listen queue.
    async fn slot(&self) -> io::Result<tokio::sync::OwnedSemaphorePermit> {
        self.slots
            .clone()
            .acquire_owned()
            .await
            .map_err(io::Error::other)
    }

    /// Serve one accepted client on a task of its own, holding its slot until it ends.
    fn spawn_client<S>(self: &Arc<Self>, stream: S, permit: tokio::sync::OwnedSemaphorePermit)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let this = self.clone();
        tokio::spawn(async move {
            this.serve_connection(stream).await;
            drop(permit);
        });
    }

    /// Bind a unix socket at `path` (which must not exist) and serve it.
    pub async fn serve_unix_path(self: Arc<Self>, path: &Path) -> io::Result<()> {
        let listener = UnixListener::bind(path)?;
        self.serve_unix(listener).await
    }

    /// Serve one client connection of any supported protocol.
    pub async fn serve_connection<S>(self: Arc<Self>, mut stream: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut first = [0u8; 1];
        let timeout = self.config.limits.handshake_timeout;
        match tokio::time::timeout(timeout, stream.read(&mut first)).await {
            Ok(Ok(1)) => {}
            _ => return,
        }
        if first[0] == 5 {
            crate::socks::serve(self, id, stream).await;
        } else {
            let stream = Rewind::new(first.to_vec(), stream);
            self.serve_http(id, stream).await;
        }
    }

    async fn serve_http<S>(self: Arc<Self>, id: u64, stream: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let limits = &self.config.limits;
        let this = self.clone();
        let service = hyper::service::service_fn(move |req| {
            let this = this.clone();
            async move { Ok::<_, Infallible>(this.handle(id, req).await) }
        });
        let _ = hyper::server::conn::http1::Builder::new()
            .max_buf_size(limits.max_header_bytes.max(8192))
            .header_read_timeout(limits.handshake_timeout)
            .timer(TokioTimer::new())
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades()
            .await;
    }
}

/// Sort accept errors: a client that went away, or a process out of file descriptors, must not
/// stop the proxy (the latter waits a moment for connections to close); anything else does.
pub(crate) async fn accepted<T>(r: io::Result<T>) -> io::Result<Option<T>> {
    match r {
        Ok(x) => Ok(Some(x)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(None)
        }
        // EMFILE, ENFILE (Linux numbers; the crate is Linux-only like the sandbox).
        Err(e) if matches!(e.raw_os_error(), Some(23 | 24)) => {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
