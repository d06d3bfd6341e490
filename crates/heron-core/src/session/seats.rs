//! How many sessions one process holds open: at most [`max_open_sessions`], counting those
//! being opened, so a client that opens sessions without end (or thousands at once, before
//! any is ready) gets a clear refusal instead of growing memory and file descriptors (each
//! open session holds its lock file) until something else fails.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// The most sessions open in one process at once. An idle session costs about 16 KiB and
/// one descriptor; editors keep a handful open.
pub const MAX_OPEN_SESSIONS: usize = 4096;

/// The fewest the limit allows, however few descriptors the process may open.
const FEWEST: usize = 8;

/// The limit here: [`MAX_OPEN_SESSIONS`], or half the descriptors this process may open if
/// that is fewer (a soft limit of 1024 is common), so the sessions' locks leave the tools,
/// commands and MCP servers descriptors of their own. Read once.
pub fn max_open_sessions() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes the struct on this stack frame and nothing else.
        let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } == 0;
        let descriptors =
            if read { usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX) } else { usize::MAX };
        (descriptors / 2).clamp(FEWEST, MAX_OPEN_SESSIONS)
    })
}

/// The sessions being opened, not yet counted among the open ones.
#[derive(Debug, Default, Clone)]
pub(super) struct Seats {
    opening: Arc<AtomicUsize>,
}

/// A place taken for a session being opened; given back when dropped (the session is then
/// among the open ones, or its opening failed).
#[derive(Debug)]
pub(super) struct Seat {
    opening: Arc<AtomicUsize>,
}

impl Seats {
    /// A seat beside `open` sessions already open, if the limit leaves one.
    pub(super) fn take(&self, open: usize) -> Option<Seat> {
        self.take_within(open, max_open_sessions())
    }

    fn take_within(&self, open: usize, limit: usize) -> Option<Seat> {
        let opening = self.opening.fetch_add(1, Ordering::SeqCst);
        if open + opening >= limit {
            self.opening.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(Seat { opening: self.opening.clone() })
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.opening.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seats_being_taken_count_against_the_limit_until_given_back() {
        let seats = Seats::default();
        let held: Vec<Seat> = (0..10).filter_map(|_| seats.take_within(90, 100)).collect();
        assert_eq!(held.len(), 10);
        assert!(seats.take_within(90, 100).is_none(), "the ten being opened fill the limit");
        drop(held);
        assert!(seats.take_within(99, 100).is_some());
        assert!(seats.take_within(100, 100).is_none());
        assert!((FEWEST..=MAX_OPEN_SESSIONS).contains(&max_open_sessions()));
    }
}
