//! What this machine lets the sandbox do, probed once per process: Landlock's ABI version
//! (or why there is none) and whether a private mount namespace can also cover Heron's
//! home. Where Landlock is missing, commands run unconfined and Heron says so once.

use std::sync::{Once, OnceLock};

/// What the sandbox can do on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Landlock works: confined children start confined.
    Available {
        /// The kernel's Landlock ABI version.
        abi: u32,
        /// Whether each child also gets a private mount namespace in which the home is an
        /// empty read-only tmpfs (needs `CAP_SYS_ADMIN`, e.g. running as root).
        hides_home: bool,
    },
    /// Children run with Heron's rights, for this reason.
    Unavailable {
        /// Why, in a sentence.
        reason: String,
    },
}

impl Support {
    /// Whether children are confined.
    pub fn is_available(&self) -> bool {
        matches!(self, Support::Available { .. })
    }
}

/// The probe's result, once known.
static SUPPORT: OnceLock<Support> = OnceLock::new();

/// This machine's support, probed on the first call (or by [`probe_in_background`], whose
/// result this waits for if it is still running).
pub fn support() -> &'static Support {
    SUPPORT.get_or_init(probe)
}

/// Starts the probe on a thread of its own and returns at once, so a caller that starts up
/// (`heron acp`, which reports the support in its `initialize` answer) does not wait on it
/// unless it asks before the probe is done. A probe already made or running is not repeated.
pub fn probe_in_background() {
    if SUPPORT.get().is_some() {
        return;
    }
    let started = std::thread::Builder::new().name("heron-sandbox-probe".to_owned()).spawn(|| {
        // This thread is a throwaway, so the mount test may run on it directly.
        SUPPORT.get_or_init(|| probe_on(ThisThread));
    });
    if let Err(error) = started {
        tracing::debug!(%error, "cannot probe the sandbox in the background; probing when asked");
    }
}

/// Says once per process, on stderr, that commands are not confined.
pub(super) fn warn_unconfined(reason: &str) {
    static SAID: Once = Once::new();
    SAID.call_once(|| {
        tracing::warn!(%reason, "the OS sandbox is unavailable: commands and MCP servers run with Heron's own rights");
    });
}

/// Where the mount-namespace test may run: on a thread made for it, or on the calling
/// thread when that is itself a throwaway.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
enum Thread {
    Throwaway,
    ThisThread,
}
use Thread::ThisThread;

fn probe() -> Support {
    probe_on(Thread::Throwaway)
}

#[cfg(not(target_os = "linux"))]
fn probe_on(_: Thread) -> Support {
    Support::Unavailable { reason: "the sandbox uses Landlock, which only Linux has".to_owned() }
}

/// `LANDLOCK_CREATE_RULESET_VERSION`: asks `landlock_create_ruleset` for the ABI version.
#[cfg(target_os = "linux")]
const CREATE_RULESET_VERSION: libc::c_uint = 1;

#[cfg(target_os = "linux")]
fn probe_on(thread: Thread) -> Support {
    // SAFETY: with a null attribute, a size of 0 and the version flag, the call reads no
    // memory and only returns the ABI version (or -1 with errno).
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    let Some(abi) = u32::try_from(abi).ok().filter(|&abi| abi > 0) else {
        let error = std::io::Error::last_os_error();
        let reason = match error.raw_os_error() {
            Some(libc::ENOSYS) => {
                "this kernel has no Landlock (it needs Linux 5.13 or later built with it)".to_owned()
            }
            Some(libc::EOPNOTSUPP) => {
                "Landlock is built into this kernel but not enabled (add it to the `lsm=` boot parameter)"
                    .to_owned()
            }
            _ => format!("probing Landlock failed: {error}"),
        };
        return Support::Unavailable { reason };
    };
    let hides_home = match thread {
        Thread::ThisThread => mount_namespace_works(),
        Thread::Throwaway => {
            let probe = std::thread::Builder::new()
                .name("heron-sandbox-probe".to_owned())
                .spawn(mount_namespace_works);
            probe.ok().and_then(|thread| thread.join().ok()).unwrap_or(false)
        }
    };
    Support::Available { abi, hides_home }
}

/// Whether a child could make its mounts private and mount over the home: tried on a
/// throwaway thread (the caller's), whose new mount namespace ends with it.
/// `unshare(CLONE_NEWNS)` is allowed in a multi-threaded process (it unshares only the
/// calling thread's filesystem context), and making `/` private there changes nothing
/// outside that namespace.
#[cfg(target_os = "linux")]
fn mount_namespace_works() -> bool {
    // SAFETY: both calls take flags and NUL-terminated strings that outlive them; they
    // change only this thread's view of the mounts, which is dropped when it ends.
    unsafe {
        libc::unshare(libc::CLONE_NEWNS) == 0
            && libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_in_the_background_gives_what_asking_gives() {
        probe_in_background();
        let first = support();
        probe_in_background();
        assert!(std::ptr::eq(first, support()), "probed once, kept");
        assert_eq!(first, &probe(), "the background probe found what a probe on asking finds");
    }

    #[test]
    fn the_probe_runs_once_and_explains_a_missing_sandbox() {
        assert!(std::ptr::eq(support(), support()), "probed once, kept");
        match support() {
            Support::Available { abi, .. } => assert!(*abi >= 1),
            Support::Unavailable { reason } => assert!(!reason.is_empty()),
        }
    }
}
