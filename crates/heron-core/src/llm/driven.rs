//! A [`ModelStream`] driven by one async body: the body pushes events through an
//! [`Emitter`] and the stream yields them in order, then the body's error if it failed.
//! When the cancellation token fires, the stream yields `Cancelled` at once, drops the body
//! (and with it any HTTP request the body holds) and ends.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::{ModelEvent, ModelStream, ProviderError};

/// How many events a body may run ahead of its consumer.
const BUFFER: usize = 32;

/// Where a stream body sends its events.
pub(crate) struct Emitter {
    tx: mpsc::Sender<ModelEvent>,
}

impl Emitter {
    /// Sends one event, waiting while the consumer is [`BUFFER`] events behind.
    pub(crate) async fn emit(&self, event: ModelEvent) {
        // The receiver lives exactly as long as the body that owns this sender, so a send
        // can only fail while both are being dropped; there is nobody left to tell.
        let _ = self.tx.send(event).await;
    }
}

type Body = Pin<Box<dyn Future<Output = Result<(), ProviderError>> + Send>>;

/// Turns `body` into a model stream that `cancel` ends at once.
///
/// The body runs only while the stream is polled (nothing is spawned), so dropping the
/// stream drops the body too.
pub(crate) fn drive<F, Fut>(cancel: CancellationToken, body: F) -> ModelStream
where
    F: FnOnce(Emitter) -> Fut,
    Fut: Future<Output = Result<(), ProviderError>> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(BUFFER);
    Box::pin(Driven {
        body: Some(Box::pin(body(Emitter { tx }))),
        events: rx,
        failure: None,
        cancelled: Box::pin(cancel.cancelled_owned()),
        done: false,
    })
}

/// The stream [`drive`] returns.
struct Driven {
    /// The body, until it completes or the stream is cancelled.
    body: Option<Body>,
    /// Events the body emitted and the consumer has not taken yet.
    events: mpsc::Receiver<ModelEvent>,
    /// The body's error, yielded once the events before it are taken.
    failure: Option<ProviderError>,
    cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
    done: bool,
}

impl Stream for Driven {
    type Item = Result<ModelEvent, ProviderError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if this.cancelled.as_mut().poll(cx).is_ready() {
            this.done = true;
            this.body = None;
            this.events.close();
            return Poll::Ready(Some(Err(ProviderError::Cancelled)));
        }
        if let Some(body) = this.body.as_mut()
            && let Poll::Ready(result) = body.as_mut().poll(cx)
        {
            // Dropping the finished body drops its sender, so the receiver ends once drained.
            this.body = None;
            this.failure = result.err();
        }
        match this.events.poll_recv(cx) {
            Poll::Ready(Some(event)) => Poll::Ready(Some(Ok(event))),
            Poll::Ready(None) => {
                this.done = true;
                Poll::Ready(this.failure.take().map(Err))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
