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

use super::{Inner, reload, updates};

/// Starts forwarding `session`'s runs once the answer that made it known is queued (`then`:
/// an editor drops updates for a session it does not know yet), and lets its inbox run.
/// A session this connection already serves keeps its sequencer.
pub(super) fn serve<O: Outgoing>(inner: &Arc<Inner<O>>, then: &mut Then, session: &Arc<Session>) {
    let (inner, id) = (inner.clone(), session.id().to_owned());
    // Weak: the session's life is its manager's, and this task ends with it.
    let session = Arc::downgrade(session);
    then.after(move || {
        // Taken here, not when the answer is built: an answer cancelled before it went out
        // leaves the session to be served by the next one that opens it.
        let Some((mut outbound, inbox)) =
            session.upgrade().and_then(|open| Some((open.outbound()?, open.inbox().clone())))
        else {
            return;
        };
        // Ends when the session closes: its actor holds the sending end. Each run is
        // forwarded boxed: an idle session's task holds only the wait for the next.
        tokio::spawn(async move {
            while let Some(run) = outbound.next().await {
                let Some(session) = session.upgrade() else { break };
                Box::pin(forward(&inner, &id, &session, run)).await;
            }
        });
        inbox.serve();
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
