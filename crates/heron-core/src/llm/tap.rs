//! Watching a provider: [`Tapped`] wraps one and shows a [`ModelTap`] each model
//! request's events as they stream, and how the request ended. `heron acp --record` uses
//! it to keep the model turns a session ran on.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio_util::sync::CancellationToken;

use super::{ModelEvent, ModelRequest, ModelStream, Provider, ProviderError, TokenCount};

/// How a watched request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TapEnd {
    /// The stream finished.
    Finished,
    /// The request failed with this (already redacted) message.
    Failed(String),
    /// It was cancelled, or dropped before it finished.
    Cancelled,
}

/// Sees every model request of the providers it is attached to.
pub trait ModelTap: Send + Sync + 'static {
    /// A request starts; the answer is its place in request order.
    fn begin(&self) -> usize;
    /// Request `index` streamed `event`.
    fn event(&self, index: usize, event: &ModelEvent);
    /// Request `index` ended.
    fn end(&self, index: usize, end: TapEnd);
}

/// A provider whose requests a [`ModelTap`] sees.
pub struct Tapped {
    inner: Arc<dyn Provider>,
    tap: Arc<dyn ModelTap>,
}

impl Tapped {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Provider>, tap: Arc<dyn ModelTap>) -> Self {
        Self { inner, tap }
    }
}

impl Provider for Tapped {
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let index = self.tap.begin();
        let inner = self.inner.stream(request, cancel);
        Box::pin(TapStream { inner, tap: self.tap.clone(), index, done: false })
    }

    fn count_tokens(&self, text: String) -> TokenCount {
        self.inner.count_tokens(text)
    }
}

struct TapStream {
    inner: ModelStream,
    tap: Arc<dyn ModelTap>,
    index: usize,
    done: bool,
}

impl TapStream {
    fn finish(&mut self, end: TapEnd) {
        if !self.done {
            self.done = true;
            self.tap.end(self.index, end);
        }
    }
}

impl Stream for TapStream {
    type Item = Result<ModelEvent, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(event))) => {
                if !self.done {
                    self.tap.event(self.index, event);
                }
            }
            Poll::Ready(Some(Err(ProviderError::Cancelled))) => self.finish(TapEnd::Cancelled),
            Poll::Ready(Some(Err(error))) => self.finish(TapEnd::Failed(error.to_string())),
            Poll::Ready(None) => self.finish(TapEnd::Finished),
            Poll::Pending => {}
        }
        polled
    }
}

impl Drop for TapStream {
    fn drop(&mut self) {
        // A turn that stops reading mid-stream was cancelled from the model's point of view.
        self.finish(TapEnd::Cancelled);
    }
}
