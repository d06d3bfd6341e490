//! How many bytes of history open sessions hold in memory: an open session's actor keeps
//! its whole history, so one session may hold at most [`HistoryBudget::session`] and all
//! the sessions open in the process together [`HistoryBudget::process`], counted as the
//! bytes of their stored event rows (the JSON text the store keeps for each event).
//!
//! A stored session past either is refused before its history is read (load, resume,
//! fork: [`Ledger::reserve`]), its stored events untouched. A live session's recorded
//! events are added as they are recorded ([`HistoryUse::grow`]); one whose history has
//! grown past a budget refuses its next turn before anything is recorded
//! ([`HistoryUse::check`]), and a running turn that grows past it stops before its next
//! model request (a failed turn). So a session holds at most its budget plus one model
//! request's worth: the turn's prompt (the line, E1), one reply (`max_reply_bytes`,
//! 8 MiB) and that reply's tool results (`max_tool_result_bytes`, 4 MiB each). A session's
//! bytes are given back to the process when the session is closed, deleted or the manager
//! stops.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The most bytes of stored history one open session holds: twice the largest row the
/// store takes (`heron_store::MAX_ROW_BYTES`, 128 MiB), so that any history of one legal
/// row opens with room for the turns after it, and far above what months of ordinary work
/// write (tens of MiB). A decoded event holds about as many bytes as its text.
pub const SESSION_HISTORY_BYTES: u64 = 256 * 1024 * 1024;

/// The most bytes of stored history all sessions open in one process hold together: the
/// open-session seats (`max_open_sessions`, up to 4,096) would multiply the session's
/// budget to a terabyte; this holds four sessions at their budget, or hundreds of
/// ordinary ones.
pub const PROCESS_HISTORY_BYTES: u64 = 1024 * 1024 * 1024;

/// The budgets a manager holds its sessions' histories to; tests shrink them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryBudget {
    /// The most bytes one open session's history holds.
    pub session: u64,
    /// The most bytes the histories of all open sessions hold together.
    pub process: u64,
}

impl Default for HistoryBudget {
    fn default() -> Self {
        HistoryBudget { session: SESSION_HISTORY_BYTES, process: PROCESS_HISTORY_BYTES }
    }
}

impl HistoryBudget {
    /// A session budget of `session` bytes, and the process's default budget or, if that is
    /// less, the session's (so one session at its budget always opens).
    pub fn for_session(session: u64) -> Self {
        HistoryBudget { session, process: PROCESS_HISTORY_BYTES.max(session) }
    }
}

/// Why a session's history was refused: which budget, and the size that passed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryFull {
    /// The budget, in bytes.
    pub limit: u64,
    /// The bytes that would be held: the session's history, or with `process` that of
    /// every open session together.
    pub size: u64,
    /// Whether it is the process's budget (all open sessions) rather than the session's.
    pub process: bool,
}

impl std::fmt::Display for HistoryFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (size, limit) = (shown(self.size), shown(self.limit));
        if self.process {
            write!(
                f,
                "the sessions open in this process would hold {size} of history, past the {limit} they may \
             hold together; close another session first (every history stays stored, untouched)"
            )
        } else {
            write!(
                f,
                "the session's history holds {size}, past the {limit} one open session may hold; start a new \
                 session to go on (this one's history stays stored, untouched)"
            )
        }
    }
}

impl std::error::Error for HistoryFull {}

/// A byte count as people read it: whole bytes below a MiB, else MiB with one decimal.
fn shown(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes < MIB {
        format!("{bytes} bytes")
    } else {
        format!("{}.{} MiB", bytes / MIB, bytes % MIB * 10 / MIB)
    }
}

/// The bytes of history the sessions open in one manager hold, against its budget.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    budget: HistoryBudget,
    held: Arc<AtomicU64>,
}

impl Ledger {
    pub(super) fn new(budget: HistoryBudget) -> Self {
        Ledger { budget, held: Arc::default() }
    }

    /// Refuses a history of `bytes` that passes one session's budget, reserving nothing
    /// (a fork asks before it copies one).
    pub(super) fn fits_session(&self, bytes: u64) -> Result<(), HistoryFull> {
        if bytes > self.budget.session {
            return Err(HistoryFull { limit: self.budget.session, size: bytes, process: false });
        }
        Ok(())
    }

    /// A place for a session whose stored history holds `bytes`, or the budget it passes.
    /// A session with no history always gets one (its first turn is checked like any).
    pub(super) fn reserve(&self, bytes: u64) -> Result<Reserved, HistoryFull> {
        self.fits_session(bytes)?;
        let limit = self.budget.process;
        let taken = self.held.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
            let after = held.saturating_add(bytes);
            (bytes == 0 || after <= limit).then_some(after)
        });
        match taken {
            Ok(_) => Ok(Reserved(Arc::new(HistoryUse {
                held: Mutex::new(Held { bytes, released: false }),
                process: self.held.clone(),
                budget: self.budget,
            }))),
            Err(held) => Err(HistoryFull { limit, size: held.saturating_add(bytes), process: true }),
        }
    }
}

/// What one open session's history holds, counted into its manager's [`Ledger`].
#[derive(Debug)]
pub(super) struct HistoryUse {
    held: Mutex<Held>,
    process: Arc<AtomicU64>,
    budget: HistoryBudget,
}

#[derive(Debug)]
struct Held {
    bytes: u64,
    /// Given back to the process: later growth no longer counts there.
    released: bool,
}

impl HistoryUse {
    /// Counts a recorded event of `bytes` (its stored text).
    pub(super) fn grow(&self, bytes: usize) {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.bytes = held.bytes.saturating_add(bytes);
        if !held.released {
            self.process.fetch_add(bytes, Ordering::SeqCst);
        }
    }

    /// Whether the session may start another turn: not once its history, or that of all
    /// open sessions, has grown past its budget.
    pub(super) fn check(&self) -> Result<(), HistoryFull> {
        let bytes = self.held.lock().unwrap_or_else(PoisonError::into_inner).bytes;
        if bytes > self.budget.session {
            return Err(HistoryFull { limit: self.budget.session, size: bytes, process: false });
        }
        let all = self.process.load(Ordering::SeqCst);
        if all > self.budget.process {
            return Err(HistoryFull { limit: self.budget.process, size: all, process: true });
        }
        Ok(())
    }

    /// Gives the session's bytes back to the process, once.
    fn release(&self) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if !held.released {
            held.released = true;
            self.process.fetch_sub(held.bytes, Ordering::SeqCst);
        }
    }
}

/// A session's place in the ledger, given back when dropped (the manager forgets the
/// session, or its opening failed).
#[derive(Debug)]
pub(super) struct Reserved(Arc<HistoryUse>);

impl Reserved {
    /// The count the session's turns add to.
    pub(super) fn usage(&self) -> Arc<HistoryUse> {
        self.0.clone()
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.0.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(session: u64, process: u64) -> Ledger {
        Ledger::new(HistoryBudget { session, process })
    }

    #[test]
    fn a_session_past_its_budget_or_the_processs_is_refused_and_closing_gives_back() {
        let ledger = ledger(100, 150);
        assert_eq!(ledger.reserve(101).err(), Some(HistoryFull { limit: 100, size: 101, process: false }));
        let first = ledger.reserve(100).expect("fits exactly");
        assert_eq!(ledger.reserve(60).err(), Some(HistoryFull { limit: 150, size: 160, process: true }));
        let second = ledger.reserve(50).expect("fits beside it");
        drop(first);
        let third = ledger.reserve(60).expect("room was given back");
        drop((second, third));
        assert_eq!(ledger.held.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_live_session_that_grows_past_a_budget_is_refused_its_next_turn() {
        let ledger = ledger(100, 150);
        let small = ledger.reserve(10).expect("fits");
        let big = ledger.reserve(90).expect("fits");
        let usage = big.usage();
        usage.grow(10);
        assert!(usage.check().is_ok(), "at the budget is not past it");
        usage.grow(1);
        assert_eq!(usage.check(), Err(HistoryFull { limit: 100, size: 101, process: false }));
        small.usage().grow(50);
        assert_eq!(small.usage().check(), Err(HistoryFull { limit: 150, size: 161, process: true }));
        // Closed, the big one gives back all it grew to, and growth after is not counted.
        drop(big);
        usage.grow(1000);
        assert!(small.usage().check().is_ok());
        drop(small);
        assert_eq!(ledger.held.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn sizes_read_in_bytes_or_mib() {
        assert_eq!(shown(900), "900 bytes");
        assert_eq!(shown(256 * 1024 * 1024), "256.0 MiB");
        assert_eq!(shown(3 * 1024 * 1024 / 2), "1.5 MiB");
    }
}
