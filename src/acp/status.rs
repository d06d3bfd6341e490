//! Session status on the wire: the `HeronSessionStatus` and `HeronGoal` shapes (with the
//! extension files that could not be used and the last reload's outcome), and the
//! `_heron/session/status_update` feed. The feed sends only to a client that asked for it
//! in `initialize` (`clientCapabilities._meta.heron.statusUpdates: {"supported": true}`, or
//! the older `statusUpdates: true`), sends each change
//! once, and never sends an older snapshot after a newer one, whichever path offers it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use heron_core::secret::clip;
use heron_core::session::Session;
use heron_core::session::goal::{Goal, GoalStatus};
use heron_core::session::settings::Posture;
use heron_core::session::snapshot::{ExtensionsReport, SessionState, Snapshot};
use heron_protocol::runtime::{ClientPeer, Outgoing};
use heron_protocol::{
    Client, ClientCapabilities, HeronApprovalPosture, HeronContextUsage, HeronCostQuote,
    HeronExtensionsStatus, HeronGoal, HeronGoalStatus, HeronInboxCounts, HeronModelId, HeronReloadFailure,
    HeronReloadOutcome, HeronReloadOutcomeKind, HeronSessionState, HeronSessionStatus,
    HeronSessionStatusUpdateNotification, SessionId, SessionModeId,
};

use super::errors::MAX_FAILURE_MESSAGE;

/// Whether the client asked for status updates.
pub fn wants_updates(capabilities: &ClientCapabilities) -> bool {
    capabilities
        .meta
        .as_ref()
        .and_then(|meta| meta.get("heron"))
        .and_then(|heron| heron.get("statusUpdates"))
        .and_then(|asked| asked.as_bool().or_else(|| asked.get("supported")?.as_bool()))
        .unwrap_or(false)
}

/// A goal as the wire shows it.
pub fn goal(goal: &Goal) -> HeronGoal {
    HeronGoal {
        continuation_count: goal.continuation_count,
        meta: None,
        objective: goal.objective.clone(),
        started_at: goal.started_at.clone(),
        status: match goal.status {
            GoalStatus::Active => HeronGoalStatus::Active,
            GoalStatus::Paused => HeronGoalStatus::Paused,
            GoalStatus::Completed => HeronGoalStatus::Completed,
            GoalStatus::Failed => HeronGoalStatus::Failed,
        },
        updated_at: goal.updated_at.clone(),
    }
}

/// A snapshot as the wire shows it.
pub fn status(snapshot: &Snapshot) -> HeronSessionStatus {
    HeronSessionStatus {
        approval_posture: match snapshot.posture {
            Posture::ReadOnly => HeronApprovalPosture::ReadOnly,
            Posture::DontAsk => HeronApprovalPosture::DontAsk,
            Posture::Ask => HeronApprovalPosture::Ask,
            Posture::Auto => HeronApprovalPosture::Auto,
            Posture::Yolo => HeronApprovalPosture::Yolo,
        },
        // The meter needs the window; the cost below does not.
        context_usage: snapshot
            .usage
            .as_ref()
            .and_then(|u| Some(HeronContextUsage { meta: None, size: u.size?, used: u.used })),
        cost_quote: snapshot.usage.as_ref().map(|u| HeronCostQuote {
            total_cost: u.cost.as_ref().map_or(0.0, |(amount, _)| *amount),
            currency: u.cost.as_ref().map(|(_, currency)| currency.clone()),
            cost_complete: u.cost_complete && u.cost.is_some(),
            tokens: crate::acp::convert::token_usage(&u.tokens),
        }),
        current_mode_id: Some(SessionModeId(snapshot.mode.id().to_owned())),
        extensions: extensions(&snapshot.extensions),
        instructions: (!snapshot.instructions.is_empty()).then(|| snapshot.instructions.clone()),
        goal: snapshot.goal.as_ref().map(goal),
        inbox: HeronInboxCounts {
            failed: snapshot.inbox.failed,
            meta: None,
            paused: snapshot.inbox.paused,
            queued: snapshot.inbox.queued,
            running: snapshot.inbox.running,
        },
        meta: None,
        model_id: Some(snapshot.model.clone()).filter(|m| !m.is_empty()).map(HeronModelId),
        state: match snapshot.state() {
            SessionState::Idle => HeronSessionState::Idle,
            SessionState::Running => HeronSessionState::Running,
            SessionState::AwaitingPermission => HeronSessionState::AwaitingPermission,
            SessionState::AwaitingInput => HeronSessionState::AwaitingInput,
            SessionState::Paused => HeronSessionState::Paused,
        },
        turn_started_at: snapshot.turn_started_at.clone(),
        updated_at: snapshot.updated_at.clone(),
    }
}

/// The session's extensions as the status shows them; `None` when there is nothing to tell,
/// so a session whose files all loaded keeps its small status.
fn extensions(report: &ExtensionsReport) -> Option<HeronExtensionsStatus> {
    if report.is_empty() {
        return None;
    }
    let number = |n: Option<usize>| n.map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    let last_reload = report.last_reload.as_ref().map(|reload| HeronReloadOutcome {
        outcome: match reload.error {
            None => HeronReloadOutcomeKind::Succeeded,
            Some(_) => HeronReloadOutcomeKind::Failed,
        },
        queued: reload.queued,
        finished_at: reload.finished_at.clone(),
        // The core redacted the reason of keys already; the cap is the wire's.
        error: reload.error.as_ref().map(|error| HeronReloadFailure {
            file: error.file.display().to_string(),
            line: number(error.line),
            column: number(error.column),
            reason: clip(&error.reason, MAX_FAILURE_MESSAGE),
        }),
    });
    Some(HeronExtensionsStatus {
        problems: super::commands::wire_problems(&report.problems),
        last_reload,
        meta: None,
    })
}

/// One connection's status updates.
#[derive(Debug, Default)]
pub struct StatusFeed {
    wanted: AtomicBool,
    /// The last sequence number sent, per session. Held across the send, so two paths
    /// offering snapshots cannot overtake each other.
    sent: tokio::sync::Mutex<HashMap<String, u64>>,
}

impl StatusFeed {
    /// Records whether the client wants updates.
    pub fn want(&self, wanted: bool) {
        self.wanted.store(wanted, Ordering::SeqCst);
    }

    /// Whether the client wants updates.
    pub fn is_wanted(&self) -> bool {
        self.wanted.load(Ordering::SeqCst)
    }

    /// Sends `snapshot` unless the client does not want updates or already has it or a
    /// newer one.
    pub async fn offer<O: Outgoing>(
        &self,
        client: &ClientPeer<O>,
        session_id: &str,
        seq: u64,
        snapshot: &Snapshot,
    ) {
        self.offer_about(client, session_id, seq, snapshot, None).await;
    }

    /// [`Self::offer`], saying what caused the change (`event`).
    async fn offer_about<O: Outgoing>(
        &self,
        client: &ClientPeer<O>,
        session_id: &str,
        seq: u64,
        snapshot: &Snapshot,
        event: Option<&str>,
    ) {
        if !self.wanted.load(Ordering::SeqCst) {
            return;
        }
        let mut sent = self.sent.lock().await;
        let last = sent.entry(session_id.to_owned()).or_insert(0);
        // An update that names its cause goes out even when the turn's own feed already sent
        // this snapshot, so the client hears the event; never an older one.
        if seq < *last || (seq == *last && event.is_none()) {
            return;
        }
        *last = seq;
        let note = HeronSessionStatusUpdateNotification {
            event: event.map(str::to_owned),
            meta: None,
            session_id: SessionId(session_id.to_owned()),
            status: status(snapshot),
        };
        // A client that stopped reading does not stop the session.
        if let Err(err) = client.heron_session_status_update(note).await {
            tracing::debug!(%err, "could not send a status update");
        }
    }

    /// Sends the session's current status if it changed since the last one sent.
    pub async fn sync<O: Outgoing>(&self, client: &ClientPeer<O>, session: &Session) {
        let (seq, snapshot) = session.status();
        self.offer(client, session.id(), seq, &snapshot).await;
    }

    /// [`Self::sync`] after a change to the goal: the update says `event: "goal"`.
    pub async fn sync_goal<O: Outgoing>(&self, client: &ClientPeer<O>, session: &Session) {
        let (seq, snapshot) = session.status();
        self.offer_about(client, session.id(), seq, &snapshot, Some("goal")).await;
    }
}
