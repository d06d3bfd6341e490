//! What this machine lets the sandbox do, probed once per process: Landlock's ABI version
//! (or why there is none), and which of the other walls stand, found by running the real
//! confinement once in a throwaway child and giving up, one at a time, the walls the kernel
//! refuses. What the probe found is what every child gets: a wall it found standing that
//! then fails for a child stops that child from starting. What is missing is said (the
//! `initialize` answer, `heron doctor`, a notice in each session), never silently dropped.

use std::path::{Path, PathBuf};
use std::sync::{Once, OnceLock};

use super::remembered;

/// The walls other than Landlock, as found on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walls {
    /// Every capability is cleared (as root too). Only false where clearing failed; then
    /// no confined program starts at all.
    pub no_capabilities: bool,
    /// A seccomp filter refuses mounts, device nodes, raw sockets and kernel calls.
    pub seccomp: bool,
    /// The namespaces below are made through a user namespace of the child's own (Heron
    /// does not hold `CAP_SYS_ADMIN`): a means, not a wall.
    pub user_namespace: bool,
    /// A mount namespace of its own: a private `/tmp` and `/dev`, the home and the host's
    /// control sockets covered.
    pub mount_namespace: bool,
    /// A pid namespace of its own: no process outside its own tree can be seen, signalled,
    /// limited or traced from inside.
    pub pid_namespace: bool,
    /// A `/proc` of its own pid namespace, with the kernel's settings read-only.
    pub private_proc: bool,
    /// A network namespace with loopback alone, for policies without network.
    pub network_namespace: bool,
}

impl Walls {
    /// Nothing but the capabilities: what stands where no probe could be made.
    const FLOOR: Walls = Walls {
        no_capabilities: true,
        seccomp: false,
        user_namespace: false,
        mount_namespace: false,
        pid_namespace: false,
        private_proc: false,
        network_namespace: false,
    };

    /// Each wall with its name and what it means, for reports.
    pub fn listed(&self) -> [(&'static str, bool, &'static str); 6] {
        [
            ("capabilities", self.no_capabilities, "none kept, as root too"),
            ("seccomp", self.seccomp, "no mounts, device nodes, raw sockets or kernel calls"),
            (
                "pidNamespace",
                self.pid_namespace,
                "Heron, the editor and other processes out of sight and reach",
            ),
            ("privateProc", self.private_proc, "a /proc of its own, kernel settings read-only"),
            (
                "mountNamespace",
                self.mount_namespace,
                "a private /tmp and /dev; HERON_HOME and host sockets covered",
            ),
            ("networkNamespace", self.network_namespace, "loopback only, where a run has no network"),
        ]
    }
}

/// What the sandbox can do on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// Landlock's ABI version (file rules, signal and socket scopes), or why it is missing.
    pub landlock: Result<u32, String>,
    /// The other walls.
    pub walls: Walls,
    /// Heron itself runs inside a sandbox of Heron's (the agent a conformance run tests, a
    /// Heron a command started): what it cannot make again, its commands have from the
    /// walls around it (a confined process may not mount, so a nested one never can).
    pub inside: bool,
}

/// Set in the environment of every confined program, so that a Heron among them knows
/// the walls around it hold for its own commands too. A program that sets it itself only
/// quiets the report of a Heron it starts inside its own walls.
pub const CONFINED_VARIABLE: &str = "HERON_CONFINED";

impl Support {
    /// Whether Landlock stands: files outside the write roots cannot be changed and the
    /// home cannot be read.
    pub fn has_landlock(&self) -> bool {
        self.landlock.is_ok()
    }

    /// The walls that do not stand here, named as in [`Walls::listed`] (with `landlock`):
    /// none inside a sandbox of Heron's, whose walls its commands inherit.
    pub fn missing(&self) -> Vec<&'static str> {
        if self.inside {
            return Vec::new();
        }
        let mut missing: Vec<&'static str> =
            self.landlock.is_err().then_some("landlock").into_iter().collect();
        missing.extend(self.walls.listed().iter().filter(|(_, stands, _)| !stands).map(|(name, _, _)| *name));
        missing
    }
}

impl Support {
    /// As the home remembers it (`remembered`).
    fn encode(&self) -> serde_json::Value {
        let walls = &self.walls;
        serde_json::json!({
            "landlock": match &self.landlock {
                Ok(abi) => serde_json::json!({ "abi": abi }),
                Err(reason) => serde_json::json!({ "reason": reason }),
            },
            "walls": [
                walls.no_capabilities, walls.seccomp, walls.user_namespace, walls.mount_namespace,
                walls.pid_namespace, walls.private_proc, walls.network_namespace,
            ],
            "inside": self.inside,
        })
    }

    /// Back from [`Support::encode`]; `None` for anything it does not write.
    fn decode(found: &serde_json::Value) -> Option<Support> {
        let landlock = &found["landlock"];
        let landlock = match (landlock["abi"].as_u64(), landlock["reason"].as_str()) {
            (Some(abi), None) => Ok(u32::try_from(abi).ok()?),
            (None, Some(reason)) => Err(reason.to_owned()),
            _ => return None,
        };
        let flags: Vec<bool> =
            found["walls"].as_array()?.iter().map(serde_json::Value::as_bool).collect::<Option<_>>()?;
        // In the order `encode` writes them.
        let [caps, seccomp, user, mount, pid, proc, network] = flags[..] else { return None };
        let walls = Walls {
            no_capabilities: caps,
            seccomp,
            user_namespace: user,
            mount_namespace: mount,
            pid_namespace: pid,
            private_proc: proc,
            network_namespace: network,
        };
        Some(Support { landlock, walls, inside: found["inside"].as_bool()? })
    }
}

/// The probe's result, once known.
static SUPPORT: OnceLock<Support> = OnceLock::new();

/// This machine's support, probed on the first call (or by [`probe_in_background`], whose
/// result this waits for if it is still running).
pub fn support() -> &'static Support {
    SUPPORT.get_or_init(probe)
}

/// Readies the sandbox report of a process that starts up (`heron acp`, which reports the
/// support in its `initialize` answer) and remembers what its probe finds in `home`. With a
/// record of this same state there ([`remembered`]) the report can use it, and the probe
/// waits for [`probe_in_background`] (after the first answer: a fork beside the start slows
/// it down); without one the probe starts now, on its own thread, overlapping the start.
pub fn prepare(home: Option<&Path>) {
    let _ = HOME.set(home.map(Path::to_path_buf));
    if remembered().is_none() {
        probe_in_background();
    }
}

/// Starts the probe on a thread of its own and returns at once, so a caller does not wait
/// on it unless it asks before the probe is done. A probe already made or running is not
/// repeated. What it finds is remembered in the home given to [`prepare`], if any.
pub fn probe_in_background() {
    if SUPPORT.get().is_some() || STARTED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let started = std::thread::Builder::new().name("heron-sandbox-probe".to_owned()).spawn(|| {
        let found = support();
        // Compared with what the start read, not read again.
        if let Some(record) = record()
            && remembered() != Some(found)
        {
            remembered::remember(&record.0, &record.1, found.encode());
        }
    });
    if let Err(error) = started {
        tracing::debug!(%error, "cannot probe the sandbox in the background; probing when asked");
    }
}

/// Whether the background probe was started.
static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The home this run remembers what its probe finds in.
static HOME: OnceLock<Option<PathBuf>> = OnceLock::new();

/// Where this run remembers what its probe finds, and the state it finds it in.
fn record() -> Option<&'static (PathBuf, String)> {
    static RECORD: OnceLock<Option<(PathBuf, String)>> = OnceLock::new();
    RECORD
        .get_or_init(|| {
            let home = HOME.get()?.as_ref()?;
            // Inside Heron's own confinement a probe finds otherwise: that is state too.
            let inside = std::env::var_os(CONFINED_VARIABLE).is_some();
            Some((remembered::path_in(home), format!("{}|{inside}", remembered::context()?)))
        })
        .as_ref()
}

/// What the probe found the last time it ran in this state, as this run started.
fn remembered() -> Option<&'static Support> {
    static REMEMBERED: OnceLock<Option<Support>> = OnceLock::new();
    REMEMBERED
        .get_or_init(|| {
            let (path, context) = record()?;
            Support::decode(&remembered::recall(path, context)?)
        })
        .as_ref()
}

/// What to report of the sandbox now, without waiting when it need not: the probe's result
/// once it is done; before that, what the probe found last time in this same state
/// ([`prepare`]); else the probe's result, waited for. Only reports read this: what a
/// command gets is [`support`].
pub fn reported() -> &'static Support {
    SUPPORT.get().or_else(remembered).unwrap_or_else(support)
}

/// Says once per process, on stderr, which walls are missing.
pub(super) fn warn_missing(support: &Support) {
    static SAID: Once = Once::new();
    let missing = support.missing();
    if missing.is_empty() {
        return;
    }
    SAID.call_once(|| {
        let reason = support.landlock.as_ref().err().map_or("", String::as_str);
        tracing::warn!(missing = %missing.join(", "), %reason, "some walls of the OS sandbox do not stand on this machine");
    });
}

#[cfg(not(target_os = "linux"))]
fn probe() -> Support {
    Support {
        landlock: Err("the sandbox uses Landlock, which only Linux has".to_owned()),
        walls: Walls { no_capabilities: false, ..Walls::FLOOR },
        inside: false,
    }
}

#[cfg(target_os = "linux")]
fn probe() -> Support {
    let landlock = landlock_abi();
    let walls = probe::walls(landlock.as_ref().ok().copied());
    Support { landlock, walls, inside: std::env::var_os(CONFINED_VARIABLE).is_some() }
}

/// `LANDLOCK_CREATE_RULESET_VERSION`: asks `landlock_create_ruleset` for the ABI version.
#[cfg(target_os = "linux")]
const CREATE_RULESET_VERSION: libc::c_uint = 1;

#[cfg(target_os = "linux")]
fn landlock_abi() -> Result<u32, String> {
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
    if let Some(abi) = u32::try_from(abi).ok().filter(|&abi| abi > 0) {
        return Ok(abi);
    }
    let error = std::io::Error::last_os_error();
    Err(match error.raw_os_error() {
        Some(libc::ENOSYS) => {
            "this kernel has no Landlock (it needs Linux 5.13 or later built with it)".to_owned()
        }
        Some(libc::EOPNOTSUPP) => {
            "Landlock is built into this kernel but not enabled (add it to the `lsm=` boot parameter)"
                .to_owned()
        }
        _ => format!("probing Landlock failed: {error}"),
    })
}

/// The probe proper: the real confinement, run in a forked child that exits where the
/// program would start.
#[cfg(target_os = "linux")]
mod probe {
    use super::Walls;
    use crate::sandbox::child::{Step, Steps};

    /// How many times the probe runs at most: once, plus once per wall given up.
    const ROUNDS: usize = 8;

    /// The walls that stand, starting from all of them.
    pub(super) fn walls(landlock: Option<u32>) -> Walls {
        let mut walls = Walls {
            no_capabilities: true,
            seccomp: true,
            user_namespace: !crate::sandbox::caps::holds_sys_admin(),
            mount_namespace: true,
            pid_namespace: true,
            private_proc: true,
            network_namespace: true,
        };
        let mut forks_failed = 0;
        for _ in 0..ROUNDS {
            let Ok(steps) = Steps::for_probe(&walls, landlock) else {
                walls.seccomp = false;
                continue;
            };
            match steps.probe() {
                Ok(()) => return walls,
                Err(Some(step)) => {
                    tracing::debug!(?step, ?walls, "a wall of the sandbox failed in the probe; giving it up");
                    if step == Step::Split && forks_failed == 0 {
                        forks_failed += 1;
                    } else if !give_up(&mut walls, step) {
                        break;
                    }
                }
                Err(None) => break,
            }
        }
        tracing::debug!(?walls, "the sandbox probe could not settle; keeping the floor");
        Walls::FLOOR
    }

    /// Gives up the wall `step` needs; false when there is none left to give up.
    fn give_up(walls: &mut Walls, step: Step) -> bool {
        let before = *walls;
        match step {
            Step::Unshare if walls.network_namespace => walls.network_namespace = false,
            Step::Unshare if walls.pid_namespace => {
                (walls.pid_namespace, walls.private_proc) = (false, false)
            }
            Step::Unshare | Step::UserMap => {
                *walls = Walls { seccomp: walls.seccomp, ..Walls::FLOOR };
            }
            Step::Network => walls.network_namespace = false,
            Step::Mount => (walls.mount_namespace, walls.private_proc) = (false, false),
            Step::Proc => walls.private_proc = false,
            Step::Split => (walls.pid_namespace, walls.private_proc) = (false, false),
            Step::Seccomp => walls.seccomp = false,
            Step::Capabilities => walls.no_capabilities = false,
            Step::Landlock => {}
        }
        // Nothing to make a namespace for: none is made, through a user one or not.
        if !walls.mount_namespace && !walls.pid_namespace && !walls.network_namespace {
            walls.user_namespace = false;
        }
        *walls != before && walls.no_capabilities
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_comes_back_as_it_was_kept_and_nothing_else_does() {
        let found = Support {
            landlock: Ok(6),
            walls: Walls {
                user_namespace: false,
                private_proc: false,
                ..Walls { seccomp: true, ..Walls::FLOOR }
            },
            inside: false,
        };
        assert_eq!(Support::decode(&found.encode()), Some(found.clone()));
        let without = Support { landlock: Err("no Landlock here".to_owned()), ..found.clone() };
        assert_eq!(Support::decode(&without.encode()), Some(without));
        let mut short = found.encode();
        short["walls"] = serde_json::json!([true, true]);
        let mut both = found.encode();
        both["landlock"] = serde_json::json!({ "abi": 6, "reason": "x" });
        let mut not_flags = found.encode();
        not_flags["walls"] = serde_json::json!([1, 1, 1, 1, 1, 1, 1]);
        for wrong in [short, both, not_flags, serde_json::json!("walls"), serde_json::Value::Null] {
            assert_eq!(Support::decode(&wrong), None, "{wrong}");
        }
    }

    #[test]
    fn a_probe_in_the_background_gives_what_asking_gives() {
        probe_in_background();
        let first = support();
        probe_in_background();
        assert!(std::ptr::eq(first, support()), "probed once, kept");
        assert_eq!(first, &probe(), "the background probe found what a probe on asking finds");
    }

    #[test]
    fn the_probe_explains_what_is_missing() {
        let found = support();
        match &found.landlock {
            Ok(abi) => assert!(*abi >= 1),
            Err(reason) => assert!(!reason.is_empty()),
        }
        assert!(found.walls.no_capabilities, "clearing capabilities works on every Linux kernel");
        let missing = found.missing();
        assert_eq!(missing.contains(&"landlock"), found.landlock.is_err(), "{missing:?}");
        assert_eq!(missing.contains(&"pidNamespace"), !found.walls.pid_namespace, "{missing:?}");
    }

    #[test]
    fn a_namespace_a_privileged_or_user_namespace_allows_is_found() {
        // Root with CAP_SYS_ADMIN, or a kernel that lets users make user namespaces (both
        // where CI runs): the pid and mount namespaces then stand.
        let userns = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
            .ok()
            .and_then(|n| n.trim().parse::<u64>().ok())
            .is_some_and(|n| n > 0);
        if crate::sandbox::caps::holds_sys_admin() || userns && !std::path::Path::new("/.dockerenv").exists()
        {
            let walls = support().walls;
            assert!(walls.pid_namespace && walls.mount_namespace, "{walls:?}");
        }
    }
}
