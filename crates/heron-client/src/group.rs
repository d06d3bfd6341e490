//! The process groups `heron run` starts (the agent, and the commands of the agent's
//! terminals), each led by the child it spawned, and how they are ended. Invariant: a group
//! is signalled only while its leader is not yet reaped (running, or a zombie waiting for
//! us), so its id cannot have been given to anyone else; the leader is reaped only after
//! the last signal ([`Group::sweep`]).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// A process group and whether its leader may still be signalled.
#[derive(Debug)]
pub struct Group {
    leader: i32,
    /// Set once the group was swept and the leader handed over for reaping.
    swept: Mutex<bool>,
}

impl Group {
    /// The group led by `pid` (spawned with `process_group(0)`); `None` for an id that
    /// could name our own group or every process.
    pub fn led_by(pid: Option<u32>) -> Option<Group> {
        let leader = i32::try_from(pid?).ok().filter(|&p| p > 1)?;
        Some(Group { leader, swept: Mutex::new(false) })
    }

    /// Sends `signal` to the whole group, unless it was swept already.
    pub fn signal(&self, signal: libc::c_int) {
        let swept = self.swept.lock().unwrap_or_else(PoisonError::into_inner);
        if !*swept {
            // SAFETY: killpg takes plain integers and touches no memory of ours; a group with
            // no member left makes it fail with ESRCH, which is fine.
            unsafe {
                libc::killpg(self.leader, signal);
            }
        }
    }

    /// Kills whatever is left in the group, once, and marks it so that nothing signals it
    /// again: call it just before reaping the leader.
    pub fn sweep(&self) {
        let mut swept = self.swept.lock().unwrap_or_else(PoisonError::into_inner);
        if !*swept {
            // SAFETY: as in `signal`; the leader is not reaped yet, so the id is still ours.
            unsafe {
                libc::killpg(self.leader, libc::SIGKILL);
            }
            *swept = true;
        }
    }

    /// Whether the leader has exited, without reaping it.
    pub fn leader_exited(&self) -> bool {
        // SAFETY: an all-zero siginfo_t is a valid value; waitid writes into it and nothing else.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOWAIT | libc::WNOHANG;
        // SAFETY: `info` is a valid, writable siginfo_t for the duration of the call.
        let rc = unsafe { libc::waitid(libc::P_PID, self.leader as libc::id_t, &mut info, flags) };
        // An error (ECHILD) means there is nothing left to wait for.
        // SAFETY: waitid filled `info` (or left it zeroed); si_pid is valid for SIGCHLD data.
        rc != 0 || unsafe { info.si_pid() } != 0
    }

    /// Resolves when the leader has exited (not reaping it).
    pub async fn exited(&self) {
        while !self.exited_within(Duration::from_secs(3600)).await {}
    }

    /// Waits up to `limit` for the leader to exit (not reaping it); whether it did.
    pub async fn exited_within(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        let mut pause = Duration::from_millis(5);
        loop {
            if self.leader_exited() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }
}
