//! Stream adapters that show every byte `heron acp` reads and writes to a [`Recorder`],
//! untouched, so the recording sees the traffic exactly as it crossed stdin and stdout.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{Recorder, Sender};

/// A reader whose bytes are recorded as the client's.
pub struct TeeReader<R> {
    inner: R,
    recorder: Arc<Recorder>,
}

impl<R> TeeReader<R> {
    /// Records what `inner` yields.
    pub fn new(inner: R, recorder: Arc<Recorder>) -> Self {
        Self { inner, recorder }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for TeeReader<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let read = &buf.filled()[before..];
            if read.is_empty() {
                self.recorder.end_of(Sender::Client);
            } else {
                self.recorder.bytes(Sender::Client, read);
            }
        }
        polled
    }
}

/// A writer whose bytes are recorded as the agent's.
pub struct TeeWriter<W> {
    inner: W,
    recorder: Arc<Recorder>,
}

impl<W> TeeWriter<W> {
    /// Records what goes to `inner`.
    pub fn new(inner: W, recorder: Arc<Recorder>) -> Self {
        Self { inner, recorder }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for TeeWriter<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = polled {
            self.recorder.bytes(Sender::Agent, &buf[..written]);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
