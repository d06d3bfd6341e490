//! A session's status board: the live [`Snapshot`] shared by its actor, its turn and the
//! adapter. Its sequence number moves only when something other than the timestamp
//! changed, so whoever forwards snapshots sends each change once and never spams.
//!
//! While a turn runs, every new snapshot also goes into that turn's update stream, so the
//! editor sees it in order with the turn's own updates and before the prompt's answer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::sync::mpsc::UnboundedSender;

use super::goal::{Goal, now};
use super::settings::Settings;
use super::snapshot::{Activity, InboxCounts, Snapshot};
use super::update::TurnUpdate;
use crate::config::Price;
use crate::types::{Usage, UsageReport};
use heron_store::{SessionPatch, Store, StoreError};

/// Sequence numbers are process-wide, so a session closed and opened again never reuses
/// one a client has already seen.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

struct Current {
    snapshot: Snapshot,
    seq: u64,
    /// The running turn's update stream.
    route: Option<UnboundedSender<TurnUpdate>>,
}

/// The live status of one session, shared by its actor, its turn and the adapter.
pub(super) struct Board {
    current: Mutex<Current>,
    /// Usage spent outside a turn's own requests (an MCP server's sampling), with its
    /// price: counted into the session's totals at the next request of a turn.
    owed: Mutex<Vec<(Usage, Option<Price>)>>,
    /// Serialises store writes, so the last write always carries the latest goal and usage.
    saving: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Board").field("current", &self.current().1).finish_non_exhaustive()
    }
}

impl Board {
    /// The status of an idle session.
    pub(super) fn new(
        settings: &Settings,
        goal: Option<Goal>,
        usage: Option<UsageReport>,
        inbox: InboxCounts,
    ) -> Self {
        let snapshot = Snapshot {
            activity: Activity::Idle,
            mode: settings.mode,
            model: settings.model.clone(),
            posture: settings.posture,
            goal,
            usage,
            inbox,
            extensions: Default::default(),
            turn_started_at: None,
            instructions: Vec::new(),
            updated_at: now(),
        };
        Self {
            current: Mutex::new(Current { snapshot, seq: 0, route: None }),
            owed: Mutex::default(),
            saving: tokio::sync::Mutex::new(()),
        }
    }

    /// Adds usage spent outside a turn's requests, to be counted by the next one.
    pub(super) fn owe(&self, usage: Usage, price: Option<Price>) {
        self.owed.lock().unwrap_or_else(PoisonError::into_inner).push((usage, price));
    }

    /// The usage owed since the last call.
    pub(super) fn take_owed(&self) -> Vec<(Usage, Option<Price>)> {
        std::mem::take(&mut *self.owed.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The snapshot and its sequence number.
    pub(super) fn current(&self) -> (u64, Snapshot) {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        (current.seq, current.snapshot.clone())
    }

    /// Applies `change`; a real change gets a new sequence number and timestamp and goes to
    /// the running turn's stream.
    pub(super) fn change<R>(&self, change: impl FnOnce(&mut Snapshot) -> R) -> R {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let before = current.snapshot.clone();
        let result = change(&mut current.snapshot);
        current.snapshot.updated_at.clone_from(&before.updated_at);
        if current.snapshot != before {
            current.seq = SEQUENCE.fetch_add(1, Ordering::SeqCst) + 1;
            current.snapshot.updated_at = now();
            if let Some(route) = &current.route {
                let _ = route.send(TurnUpdate::Status(current.seq, Box::new(current.snapshot.clone())));
            }
        }
        result
    }

    /// Mirrors the settings.
    pub(super) fn set_settings(&self, settings: &Settings) {
        self.change(|s| {
            s.mode = settings.mode;
            s.model.clone_from(&settings.model);
            s.posture = settings.posture;
        });
    }

    /// A turn starts; its updates go to `route` until it ends.
    pub(super) fn begin_turn(&self, route: UnboundedSender<TurnUpdate>) {
        self.current.lock().unwrap_or_else(PoisonError::into_inner).route = Some(route);
        self.change(|s| {
            s.activity = Activity::Running;
            s.turn_started_at = Some(now());
        });
    }

    /// The turn ended: the idle status is the last thing its stream carries.
    pub(super) fn end_turn(&self) {
        self.end_turn_with(None);
    }

    /// The turn ended, changing the inbox counts (an inbox item's turn): one idle status
    /// carries both, last on its stream.
    pub(super) fn end_turn_with(&self, inbox: Option<InboxCounts>) {
        self.change(|s| {
            s.activity = Activity::Idle;
            s.turn_started_at = None;
            if let Some(inbox) = inbox {
                s.inbox = inbox;
            }
        });
        self.current.lock().unwrap_or_else(PoisonError::into_inner).route = None;
    }

    /// What the running turn is doing.
    pub(super) fn set_activity(&self, activity: Activity) {
        self.change(|s| {
            // Only a running turn waits; an idle session stays idle.
            if s.activity != Activity::Idle {
                s.activity = activity;
            }
        });
    }

    /// The running turn's update stream, if a turn runs.
    pub(super) fn route(&self) -> Option<UnboundedSender<TurnUpdate>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner).route.clone()
    }

    /// The goal.
    pub(super) fn goal(&self) -> Option<Goal> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner).snapshot.goal.clone()
    }

    /// Stores the current goal and usage with the session.
    pub(super) async fn save(&self, store: &Store, session_id: &str) -> Result<(), StoreError> {
        let _one_at_a_time = self.saving.lock().await;
        let (_, snapshot) = self.current();
        let encode = |value: serde_json::Value| Some(value).filter(|v| !v.is_null());
        let patch = SessionPatch {
            goal: Some(encode(serde_json::to_value(&snapshot.goal).unwrap_or_default())),
            usage: Some(encode(serde_json::to_value(&snapshot.usage).unwrap_or_default())),
            ..Default::default()
        };
        store.update_session(session_id, patch).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::settings::{Effort, Mode, Posture, Preset};
    use crate::session::snapshot::SessionState;

    fn board() -> Board {
        let settings = Settings {
            mode: Mode::Normal,
            model: "demo/demo".into(),
            effort: Effort::Auto,
            preset: Preset::Balanced,
            posture: Posture::Ask,
        };
        Board::new(&settings, None, None, InboxCounts::default())
    }

    #[test]
    fn only_a_real_change_moves_the_sequence() {
        let board = board();
        board.change(|s| s.posture = Posture::Ask);
        assert_eq!(board.current().0, 0);
        board.change(|s| s.posture = Posture::Auto);
        let moved = board.current().0;
        assert!(moved > 0);
        board.change(|s| s.posture = Posture::Auto);
        assert_eq!(board.current().0, moved);
    }

    #[test]
    fn a_turn_streams_its_status_changes_and_ends_idle() {
        let board = board();
        let (route, mut stream) = tokio::sync::mpsc::unbounded_channel();
        board.begin_turn(route);
        board.set_activity(Activity::AwaitingPermission);
        board.set_activity(Activity::AwaitingPermission);
        board.end_turn();
        let mut seen = Vec::new();
        while let Ok(TurnUpdate::Status(seq, snapshot)) = stream.try_recv() {
            seen.push((seq, snapshot.state()));
        }
        let states: Vec<SessionState> = seen.iter().map(|(_, state)| *state).collect();
        assert_eq!(states, [SessionState::Running, SessionState::AwaitingPermission, SessionState::Idle]);
        assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "sequence numbers increase: {seen:?}");
        assert!(stream.try_recv().is_err(), "the stream closes with the turn");
    }

    #[test]
    fn an_idle_session_with_a_paused_goal_shows_paused() {
        let board = board();
        board.change(|s| {
            let mut goal = Some(Goal::new("x".into()));
            let _ = crate::session::goal::pause(&mut goal);
            s.goal = goal;
        });
        assert_eq!(board.current().1.state(), SessionState::Paused);
        board.set_activity(Activity::Running);
        assert_eq!(board.current().1.state(), SessionState::Paused, "set_activity does not start a turn");
    }
}
