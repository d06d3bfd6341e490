//! The session manager of a connection, built in the background once something asks for
//! it, so `initialize` never waits on the store or the config: the build starts when the
//! `initialize` answer is queued, or earlier if a request that needs sessions comes first.

use std::sync::Arc;

use serde_json::json;

use super::errors::ErrorCode;
use heron_core::session::Manager;
use heron_protocol::RpcError;

/// The session manager, built in the background so that `initialize` is answered at once.
/// Until it is ready no session can exist, so lookups simply find none.
#[derive(Debug, Clone)]
pub struct ManagerSlot {
    built: tokio::sync::watch::Receiver<Built>,
    /// Whether the build may start: nothing of the home is read before it is set.
    wanted: Arc<tokio::sync::watch::Sender<bool>>,
}

/// What building the manager gave: nothing yet, the manager, or why it failed.
pub type Built = Option<Result<Arc<Manager>, Unusable>>;

/// Why the manager could not be built: the reason, and the kind of failure when it was the
/// store's (a damaged `heron.db` is named as such, not as a broken home).
#[derive(Debug, Clone)]
pub struct Unusable {
    /// What went wrong, in a sentence.
    pub reason: String,
    /// The store's kind of failure, when opening the store failed.
    pub store: Option<heron_store::StoreErrorKind>,
}

impl ManagerSlot {
    /// A slot and the sender that fills it; the builder waits for [`ManagerSlot::wanted`].
    pub fn new() -> (tokio::sync::watch::Sender<Built>, Self) {
        let (fill, built) = tokio::sync::watch::channel(None);
        (fill, Self { built, wanted: Arc::new(tokio::sync::watch::Sender::new(false)) })
    }

    /// A slot that is already filled.
    pub fn ready_now(manager: Arc<Manager>) -> Self {
        let slot = Self { built: tokio::sync::watch::channel(Some(Ok(manager))).1, ..Self::new().1 };
        slot.want();
        slot
    }

    /// Lets the build start (again and again: only the first call does anything).
    pub fn want(&self) {
        self.wanted.send_if_modified(|wanted| !std::mem::replace(wanted, true));
    }

    /// Whether the build was allowed to start.
    pub fn is_wanted(&self) -> bool {
        *self.wanted.borrow()
    }

    /// Resolves once the build may start.
    pub async fn wanted(&self) {
        // The sender lives in `self`, so the wait cannot fail for want of one.
        let _ = self.wanted.subscribe().wait_for(|wanted| *wanted).await;
    }

    /// The manager, if it is built. Does not start the build: before it there is no
    /// session to find.
    pub fn now(&self) -> Option<Arc<Manager>> {
        match &*self.built.borrow() {
            Some(Ok(manager)) => Some(manager.clone()),
            _ => None,
        }
    }

    /// Waits for the manager, starting its build if nothing has yet; a failed start (a
    /// broken config, a store that cannot be opened) is reported to the caller.
    pub async fn ready(&self) -> Result<Arc<Manager>, RpcError> {
        self.want();
        let mut slot = self.built.clone();
        let built = slot
            .wait_for(Option::is_some)
            .await
            .map_err(|_| RpcError::internal(&"the session manager was never built"))?;
        match &*built {
            Some(Ok(manager)) => Ok(manager.clone()),
            Some(Err(unusable)) => Err(super::errors::coded(
                heron_protocol::error::INTERNAL_ERROR,
                unusable.reason.clone(),
                unusable.store.map_or(ErrorCode::HomeUnusable, ErrorCode::of_store),
                json!({}),
            )),
            None => Err(RpcError::internal(&"the session manager was never built")),
        }
    }
}
