//! The session's outbound sequencer over ACP v1: one task per served session forwards the
//! session's runs (`heron_core::session::outbound`) in the order the actor ran them, each
//! to its end, and hands each prompt's ending to the request waiting on it before it takes
//! the next run. So no update of a turn follows its prompt's answer, and none of the next
//! turn (nor what a reload queued behind it tells) precedes it, without the session's actor
//! ever waiting on this connection.

use std::sync::Arc;

use heron_core::session::Session;
use heron_core::session::outbound::{Kind, Run};
use heron_protocol::runtime::{Outgoing, Then};
use tokio::sync::oneshot;

use super::{Inner, reload, updates};

/// Starts forwarding `session`'s runs once the answer that made it known is queued (`then`:
/// an editor drops updates for a session it does not know yet), or once that answer will
/// never be (its request was cancelled: the session is open all the same, and a prompt to
/// it must not wait for nobody), and lets its inbox run then. A session this connection
/// already serves keeps its sequencer.
pub(super) fn serve<O: Outgoing>(inner: &Arc<Inner<O>>, then: &mut Then, session: &Arc<Session>) {
    let Some(mut outbound) = session.outbound() else { return };
    let (inner, id, inbox) = (inner.clone(), session.id().to_owned(), session.inbox().clone());
    let (known, answered) = oneshot::channel::<()>();
    then.after(move || {
        let _ = known.send(());
    });
    // Weak: the session's life is its manager's, and this task ends with it.
    let session = Arc::downgrade(session);
    // Ends when the session closes: its actor holds the sending end. Each run is forwarded
    // boxed: an idle session's task holds only the wait for the next.
    tokio::spawn(async move {
        let _ = answered.await;
        inbox.serve();
        drop(inbox);
        while let Some(run) = outbound.next().await {
            let Some(session) = session.upgrade() else { break };
            Box::pin(forward(&inner, &id, &session, run)).await;
        }
    });
}

/// Forwards one run to its end and hands its ending on; a queued reload's run tells what
/// the reload did.
async fn forward<O: Outgoing>(inner: &Arc<Inner<O>>, id: &str, session: &Arc<Session>, mut run: Run) {
    if run.kind() == Kind::Reload {
        return reload::tell(inner, id, session).await;
    }
    while let Some(update) = run.next().await {
        updates::forward(inner, id, update).await;
    }
    let (result, ended) = run.end().await;
    ended.hand_on(result).await;
}
