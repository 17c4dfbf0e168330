//! The server's one limit on open connections. Every connection costs a file descriptor,
//! and a process out of descriptors cannot accept, open a database connection or call the
//! payment provider: its requests fail as transport errors. So `serve` accepts at most
//! [`Limited::permits`] connections at once; past that, new ones wait in the kernel's accept
//! queue (latency at the door, not errors) until one closes.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections kept free of the descriptor limit for the process's own use: database pools,
/// the payment provider's client, files.
pub const DESCRIPTORS_RESERVED_MIN: usize = 512;
/// The fewest connections a server accepts at once, whatever the descriptor limit.
pub const CONNECTIONS_MIN: usize = 64;
/// Used when the descriptor limit cannot be read.
pub const CONNECTIONS_DEFAULT: usize = 4_096;

/// A listener that holds one permit per open connection.
#[derive(Debug)]
pub struct Limited {
    inner: TcpListener,
    permits: Arc<Semaphore>,
    max: usize,
}

impl Limited {
    pub fn new(inner: TcpListener, max_connections: usize) -> Self {
        let max = max_connections.max(1);
        Self {
            inner,
            permits: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// Connections accepted at most at once.
    pub fn permits(&self) -> usize {
        self.max
    }
}

/// Three quarters of the process's open-file limit (leaving at least
/// [`DESCRIPTORS_RESERVED_MIN`]), read from `/proc/self/limits`; [`CONNECTIONS_DEFAULT`]
/// where that cannot be read.
pub fn default_max_connections() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| open_files_soft_limit(&limits))
        .map_or(CONNECTIONS_DEFAULT, connections_for_descriptors)
}

fn connections_for_descriptors(limit: usize) -> usize {
    let reserved = (limit / 4).max(DESCRIPTORS_RESERVED_MIN);
    limit.saturating_sub(reserved).max(CONNECTIONS_MIN)
}

/// The soft limit of the `Max open files` line ("unlimited" reads as none).
fn open_files_soft_limit(limits: &str) -> Option<usize> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl axum::serve::Listener for Limited {
    type Io = Connection;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let permit = match self.permits.clone().acquire_owned().await {
            Ok(permit) => permit,
            // The semaphore is never closed; should it be, stop limiting rather than stop.
            Err(_) => {
                let (stream, addr) = axum::serve::Listener::accept(&mut self.inner).await;
                return (
                    Connection {
                        stream,
                        _permit: None,
                    },
                    addr,
                );
            }
        };
        if self.permits.available_permits() == 0 {
            metrics::counter!("boxoffice_connections_at_limit_total").increment(1);
        }
        // `TcpListener`'s own accept logs and waits out errors (out of descriptors and the
        // like) and never returns one.
        let (stream, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        (
            Connection {
                stream,
                _permit: Some(permit),
            },
            addr,
        )
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// An accepted connection; its permit goes back when it closes.
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    _permit: Option<OwnedSemaphorePermit>,
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn the_limit_leaves_descriptors_for_the_process() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            20000                20000                files\n";
        assert_eq!(open_files_soft_limit(limits), Some(20_000));
        assert_eq!(connections_for_descriptors(20_000), 15_000);
        assert_eq!(connections_for_descriptors(1_024), 512);
        assert_eq!(connections_for_descriptors(100), CONNECTIONS_MIN);
        assert_eq!(
            open_files_soft_limit("Max open files  unlimited  unlimited  files\n"),
            None
        );
    }

    /// With one permit, a second connection is not accepted until the first closes.
    #[tokio::test]
    async fn a_connection_past_the_limit_waits_for_one_to_close() {
        let inner = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = inner.local_addr().unwrap();
        let mut limited = Limited::new(inner, 1);
        let mut first = TcpStream::connect(addr).await.unwrap();
        let (mut served, _) = axum::serve::Listener::accept(&mut limited).await;
        first.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        served.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        let _second = TcpStream::connect(addr).await.unwrap();
        let mut accepting = Box::pin(axum::serve::Listener::accept(&mut limited));
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(200), accepting.as_mut()).await;
        assert!(waited.is_err(), "accepted past the limit");
        drop(served);
        let accepted =
            tokio::time::timeout(std::time::Duration::from_secs(10), accepting.as_mut()).await;
        assert!(accepted.is_ok(), "not accepted after the first closed");
    }
}
