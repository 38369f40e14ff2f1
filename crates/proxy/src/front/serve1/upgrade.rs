//! The client's side of a protocol upgrade on an HTTP/1 connection: the
//! request carries an [`OnUpgrade`] in its extensions, which resolves to
//! the connection ([`Upgraded`]) once its `101` has been written.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http::Request;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The client's side of a protocol upgrade, in the request's extensions
/// until the phases take it ([`on_upgrade`]); it resolves once the `101`
/// has been written.
#[derive(Clone)]
pub struct OnUpgrade(pub(super) Arc<Mutex<Option<tokio::sync::oneshot::Receiver<Upgraded>>>>);

/// Takes the client's side of an upgrade out of an HTTP/1 request.
pub fn on_upgrade<B>(req: &mut Request<B>) -> Option<OnUpgrade> {
    req.extensions_mut().remove::<OnUpgrade>()
}

impl OnUpgrade {
    /// The upgraded connection, once the `101` is out.
    pub async fn get(self) -> io::Result<Upgraded> {
        let rx = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        match rx {
            Some(rx) => rx.await.map_err(|_| {
                io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the connection ended before the upgrade",
                )
            }),
            None => Err(io::Error::other("upgrade already taken")),
        }
    }
}

/// An HTTP/1 connection after `101 Switching Protocols`: the client's
/// stream, and what it had sent after its request head.
pub struct Upgraded {
    pub(super) io: Box<dyn Stream>,
    pub(super) early: Bytes,
}

pub(super) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

impl AsyncRead for Upgraded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.early.is_empty() {
            let n = self.early.len().min(buf.remaining());
            buf.put_slice(&self.early[..n]);
            self.early.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Upgraded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
