//! The session manager of a connection, built in the background so `initialize` never
//! waits on the store or the config.

use std::sync::Arc;

use serde_json::json;

use super::errors::ErrorCode;
use heron_core::session::Manager;
use heron_protocol::RpcError;

/// The session manager, built in the background so that `initialize` is answered at once.
/// Until it is ready no session can exist, so lookups simply find none.
#[derive(Debug, Clone)]
pub struct ManagerSlot(tokio::sync::watch::Receiver<Built>);

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
    /// A slot and the sender that fills it.
    pub fn new() -> (tokio::sync::watch::Sender<Built>, Self) {
        let (fill, slot) = tokio::sync::watch::channel(None);
        (fill, Self(slot))
    }

    /// A slot that is already filled.
    pub fn ready_now(manager: Arc<Manager>) -> Self {
        Self(tokio::sync::watch::channel(Some(Ok(manager))).1)
    }

    /// The manager, if it is built.
    pub fn now(&self) -> Option<Arc<Manager>> {
        match &*self.0.borrow() {
            Some(Ok(manager)) => Some(manager.clone()),
            _ => None,
        }
    }

    /// Waits for the manager; a failed start (a broken config) is reported to the caller.
    pub async fn ready(&self) -> Result<Arc<Manager>, RpcError> {
        let mut slot = self.0.clone();
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
