//! What goes to the editor about a session outside answers: a turn's updates as
//! `session/update` (status to the status feed), and what follows an answer that made a
//! session known (its slash commands, then its context use).

use heron_core::session::Session;
use heron_core::session::attachments::ReadBack;
use heron_core::session::update::TurnUpdate;
use heron_core::types::UsageReport;
use heron_protocol::runtime::{Outgoing, Then};

use super::{Inner, commands, convert, notices};

/// Sends one update of a turn to the editor: status to the status feed, the rest as
/// `session/update`.
pub(super) async fn forward<O: Outgoing>(inner: &Inner<O>, session_id: &str, mut update: TurnUpdate) {
    match &mut update {
        // Sent here, in its place: after the updates it refers to.
        TurnUpdate::Request(_) => {
            if let TurnUpdate::Request(request) = update {
                request.send().await;
            }
            return;
        }
        TurnUpdate::Status(seq, snapshot) => {
            inner.status.offer(&inner.client, session_id, *seq, snapshot).await;
            // What waited for this turn goes first in it.
            notices::turn_started(inner, session_id, snapshot.turn_started_at.as_deref()).await;
            return;
        }
        TurnUpdate::Notice(notice) => {
            notices::notify(inner, session_id, notice.clone()).await;
            return;
        }
        _ => {}
    }
    // The chunk's share of the turn's budget goes back once it is queued for the editor,
    // so a slow editor slows the turn down.
    let held = update.take_held();
    // An inbox item or steer echoed as a user message shows its images: they are read here,
    // on the blocking pool, not in the conversion.
    let files = match &update {
        TurnUpdate::Event(event) => convert::files_shown(event).await,
        _ => ReadBack::default(),
    };
    for update in convert::turn_updates(update, &files, inner.opted()) {
        // A client that stopped reading does not stop the turn.
        let _ = inner.send(session_id, update).await;
    }
    drop(held);
}

/// Advertises the slash commands right behind the answer that made the session known (a
/// client drops updates for a session it does not know yet), then `usage`, if given.
pub(super) fn advertise<O: Outgoing>(
    inner: &Inner<O>,
    then: &mut Then,
    session: &Session,
    usage: Option<UsageReport>,
) {
    inner.then_send(then, session.id(), commands::update(&session.commands(), session.mcp()));
    if let Some(update) = usage.as_ref().and_then(convert::usage_update) {
        inner.then_send(then, session.id(), update);
    }
}
