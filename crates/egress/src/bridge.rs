//! The relay that runs inside the sandbox's network namespace: tools there connect to a TCP
//! port on loopback (the only interface they have), and each connection is passed unchanged to
//! the proxy's unix socket outside. It makes no decision: the proxy judges everything.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::{TcpListener, UnixStream};
use tokio::sync::Semaphore;

/// Relay every connection accepted on `listener` to the unix socket at `proxy`, at most
/// `max_connections` at once. Runs until accepting fails.
pub async fn bridge(
    listener: TcpListener,
    proxy: PathBuf,
    max_connections: usize,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(max_connections));
    let proxy = Arc::new(proxy);
    loop {
        let permit = slots
            .clone()
            .acquire_owned()
            .await
            .map_err(io::Error::other)?;
        let Some((mut client, _)) = crate::server::accepted(listener.accept().await).await? else {
            continue;
        };
        let proxy = proxy.clone();
        tokio::spawn(async move {
            // A proxy that is gone closes the client's connection: nothing else to reach.
            if let Ok(mut upstream) = UnixStream::connect(proxy.as_path()).await {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
            drop(permit);
        });
    }
}
