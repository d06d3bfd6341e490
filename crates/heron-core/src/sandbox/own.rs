//! What Heron does to its own process so that the processes it starts cannot read it: it
//! is not dumpable, so `/proc/<heron>/environ`, `mem` and the rest need `CAP_SYS_PTRACE`,
//! which no confined child keeps (`child` drops it). Landlock refuses a confined child the
//! memory of processes outside its domain, but on some kernels not their environment, and
//! an editor that exported a key hands it to Heron's environment.

/// Makes this process non-dumpable: other processes of the same user can no longer open
/// its `/proc` files that expose memory or environment, and it leaves no core dump. The
/// programs it starts are dumpable again after `exec`, as usual. Call it first in `main`.
pub fn keep_this_process_private() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with integer arguments touches no memory of ours.
    unsafe {
        if libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) != 0 {
            tracing::debug!(error = %std::io::Error::last_os_error(), "cannot make Heron non-dumpable");
        }
    }
}

/// The `/proc/PID/environ` files of this process, of every process it descends from (the
/// editor, the shell that started the editor, ...) and of the processes it started (the
/// agent `heron run` drives): the environments that may hold a key exported by the user,
/// which a child's private mount namespace covers. (Not being dumpable keeps a process's
/// `/proc` files from other users of its uid, but not from root.)
#[cfg(target_os = "linux")]
pub(super) fn lineage_environs() -> Vec<std::path::PathBuf> {
    let mut lineage = vec![std::process::id()];
    // Bounded: a process's ancestry ends at PID 1 (or 0, outside a PID namespace).
    while lineage.len() < 64 {
        let Some(parent) = lineage.last().and_then(|pid| parent_of(*pid)) else { break };
        if parent == 0 || lineage.contains(&parent) {
            break;
        }
        lineage.push(parent);
    }
    let mut pids = children();
    pids.extend(lineage);
    pids.into_iter().map(|pid| format!("/proc/{pid}/environ").into()).collect()
}

/// This process's pid and its ancestors' (the editor, the shell that started it, ...): the
/// processes a program without a pid namespace of its own must not signal.
#[cfg(target_os = "linux")]
pub(super) fn lineage_pids() -> Vec<i32> {
    let mut lineage = vec![std::process::id()];
    while lineage.len() < 64 {
        let Some(parent) = lineage.last().and_then(|pid| parent_of(*pid)) else { break };
        if parent <= 1 || lineage.contains(&parent) {
            break;
        }
        lineage.push(parent);
    }
    lineage.into_iter().filter_map(|pid| i32::try_from(pid).ok()).collect()
}

/// The processes this one started and that still run, from each thread's `children` file
/// (`fork` records the child under the thread that made it).
#[cfg(target_os = "linux")]
fn children() -> Vec<u32> {
    let Ok(threads) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    let mut pids = Vec::new();
    for thread in threads.flatten() {
        if let Ok(list) = std::fs::read_to_string(thread.path().join("children")) {
            pids.extend(list.split_whitespace().filter_map(|pid| pid.parse::<u32>().ok()));
        }
    }
    pids
}

/// The parent's PID, from `/proc/PID/stat`: the field after the state, after the command
/// name in parentheses (which may itself hold spaces and parentheses, so the last `)`).
#[cfg(target_os = "linux")]
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn the_lineage_starts_here_and_climbs_to_the_first_process() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().expect("sleep");
        let environs = lineage_environs();
        let _ = child.kill();
        let _ = child.wait();
        let own = std::path::PathBuf::from(format!("/proc/{}/environ", std::process::id()));
        assert!(environs.contains(&own), "{environs:?}");
        assert!(environs.contains(&format!("/proc/{}/environ", child.id()).into()), "{environs:?}");
        let parent = parent_of(std::process::id()).expect("this process has a parent");
        assert!(environs.contains(&format!("/proc/{parent}/environ").into()), "{environs:?}");
        assert!(parent_of(u32::MAX).is_none(), "no such process");
    }
}
