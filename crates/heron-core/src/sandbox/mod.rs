//! The OS sandbox of the processes Heron starts for the model (`run_command`, MCP stdio
//! servers): they may read and run anything except Heron's home, and write only inside the
//! session's roots, the temp folder (their own private one as `TMPDIR`), the configured
//! tool caches and a few device files; they reach no abstract Unix socket and signal no
//! process of the host, and where they get a mount namespace, no host-control socket.
//! Invariant: a child the policy confines either starts confined or does not start.
//!
//! Parts, one file each:
//!
//! - `support`: whether this kernel has Landlock (probed once per process) and whether a
//!   private mount namespace can also cover the home; said once on stderr when it cannot.
//! - `policy`: what a session allows, from its roots and `config.toml`.
//! - `own`: what Heron does to its own process (not dumpable), and the lineage whose
//!   environment files a child covers.
//! - `env`: the keys withheld from every child's environment (sandbox on or off).
//! - `temp`: the session's private temp folder, which children get as `TMPDIR`.
//! - `sockets`: the host's control sockets (D-Bus, tmux, X11, docker) children must not
//!   reach, and what of them to cover.
//! - `rules` (Linux): the Landlock ruleset, built in the parent, with the carve-out that
//!   keeps the home out of every granted hierarchy.
//! - `child` (Linux): what the child does between `fork` and `exec`.
//!
//! Why the work is split between parent and child: Heron is multi-threaded, and after
//! `fork` only the forking thread exists in the child, while the others may have held the
//! allocator's or a logger's lock at that instant. Until `exec`, the child may therefore
//! only make async-signal-safe calls: no allocation, no locks, no logging. Everything that
//! needs any of those (walking directories, opening the rule paths, creating the ruleset,
//! formatting path strings) happens in the parent; the child only makes raw system calls
//! on memory prepared before the fork: `unshare` and `mount` (optional), then
//! `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self` on the ruleset's descriptor.
//! The descriptor belongs to the `pre_exec` closure stored in the command, so it is open
//! in the child while it runs and closes in the parent when the command is dropped after
//! spawning; the kernel opens it close-on-exec, so the program never inherits it.
//!
//! Other processes' `/proc` files: Landlock refuses a confined child the memory of
//! processes outside its domain, but on some kernels not their start-up environment
//! (`/proc/PID/environ`), where a key the user exported would be. So Heron is not dumpable
//! (`own`), no child keeps `CAP_SYS_PTRACE` (which would let root read it anyway), and where
//! the child gets a mount namespace, the environment files of Heron and its ancestors (the
//! editor) are covered too.
//!
//! What it does not do: it does not restrict a session's network (only the conformance
//! runner's agent loses TCP), nor hide the environment of the user's processes outside
//! Heron's lineage (nor the lineage's own where no mount namespace can be made), nor cover
//! host-control sockets by path where no mount namespace can be made (connecting to a
//! socket file is not a file access Landlock controls before ABI 9).
//! Postures (tool approval) decide what is asked; the sandbox is the boundary, and only
//! `sandbox = "off"` in `config.toml` turns it off.

mod env;
mod own;
mod policy;
mod sockets;
mod support;
mod temp;

#[cfg(target_os = "linux")]
mod child;
#[cfg(target_os = "linux")]
mod rules;

use std::path::PathBuf;
use std::sync::Arc;

pub use self::env::Withheld;
pub use self::own::keep_this_process_private;
pub use self::policy::Policy;
pub use self::support::{Support, probe_in_background, support};
pub use self::temp::PrivateTemp;

/// The variables that name the temp folder, for the programs that read each.
#[cfg(target_os = "linux")]
const TEMP_VARIABLES: [&str; 3] = ["TMPDIR", "TMP", "TEMP"];

/// Why a child could not be confined (it is then not started).
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A write root lies inside Heron's home, which commands must not see.
    #[error("the workspace root {0} is inside HERON_HOME, which sandboxed commands cannot see")]
    RootInHome(PathBuf),
    /// Preparing the rules failed.
    #[error("cannot prepare the sandbox: {0}")]
    Prepare(String),
}

/// The host-control sockets of this user that a policy covers by default (see `sockets`):
/// for a policy built by hand, such as the conformance runner's.
pub fn host_sockets() -> Vec<PathBuf> {
    sockets::host_control()
}

/// Confines `command` by `policy`: keys leave its environment always, and when the policy
/// is on and the kernel supports it, the child confines itself before `exec`. Call it
/// after the command's own environment is set and just before spawning; the rules are
/// built on the blocking pool, since building them reads directories.
pub async fn confine(
    command: &mut tokio::process::Command,
    policy: &Arc<Policy>,
) -> Result<(), SandboxError> {
    confine_with(command, policy, support()).await
}

/// [`confine`] for a `std` command, from a thread that may block (it reads directories):
/// for callers outside the async runtime, such as the conformance runner starting the
/// agent it tests.
pub fn confine_blocking(command: &mut std::process::Command, policy: &Policy) -> Result<(), SandboxError> {
    policy.withheld.scrub(command);
    if !policy.enabled {
        return Ok(());
    }
    match support() {
        Support::Unavailable { reason } => {
            support::warn_unconfined(reason);
            Ok(())
        }
        #[cfg(target_os = "linux")]
        Support::Available { hides_home, .. } => {
            let temp = private_temp(command, policy);
            child::Steps::prepare(policy, *hides_home, temp.as_deref())?.install(command);
            give_temp(command, temp.as_deref());
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        Support::Available { .. } => Ok(()),
    }
}

/// [`confine`] with the support given, so that the branch taken where Landlock is missing
/// can be tested on a machine that has it.
async fn confine_with(
    command: &mut tokio::process::Command,
    policy: &Arc<Policy>,
    support: &Support,
) -> Result<(), SandboxError> {
    let command = command.as_std_mut();
    policy.withheld.scrub(command);
    if !policy.enabled {
        return Ok(());
    }
    match support {
        Support::Unavailable { reason } => {
            support::warn_unconfined(reason);
            Ok(())
        }
        #[cfg(target_os = "linux")]
        Support::Available { hides_home, .. } => {
            let (policy, hides_home, wants_temp) = (Arc::clone(policy), *hides_home, !sets_temp(command));
            let (steps, temp) = tokio::task::spawn_blocking(move || {
                let temp = wants_temp.then(|| policy.temp.path().map(std::path::Path::to_path_buf)).flatten();
                child::Steps::prepare(&policy, hides_home, temp.as_deref()).map(|steps| (steps, temp))
            })
            .await
            .map_err(|e| SandboxError::Prepare(format!("the preparing task failed: {e}")))??;
            steps.install(command);
            give_temp(command, temp.as_deref());
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        Support::Available { .. } => Ok(()),
    }
}

/// Whether `command` names its own temp folder (an MCP server's `env`, the conformance
/// runner's agent): then it keeps it.
#[cfg(target_os = "linux")]
fn sets_temp(command: &std::process::Command) -> bool {
    command.get_envs().any(|(name, value)| value.is_some() && TEMP_VARIABLES.iter().any(|v| name == *v))
}

/// The policy's private temp folder for `command`, made if need be (blocking), unless the
/// command names its own.
#[cfg(target_os = "linux")]
fn private_temp(command: &std::process::Command, policy: &Policy) -> Option<PathBuf> {
    if sets_temp(command) { None } else { policy.temp.path().map(std::path::Path::to_path_buf) }
}

/// Points every temp variable of `command` at `temp`, the folder its rules grant.
#[cfg(target_os = "linux")]
fn give_temp(command: &mut std::process::Command, temp: Option<&std::path::Path>) {
    if let Some(temp) = temp {
        for name in TEMP_VARIABLES {
            command.env(name, temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy_hiding(home: &std::path::Path, ws: &std::path::Path) -> Arc<Policy> {
        Arc::new(Policy {
            enabled: true,
            home: home.to_path_buf(),
            roots: vec![ws.to_path_buf()],
            writable: Vec::new(),
            read_only: Vec::new(),
            withheld: Withheld::default(),
            list_carved: false,
            readable: None,
            network: true,
            host_sockets: Vec::new(),
            temp: PrivateTemp::default(),
        })
    }

    async fn run(command: &mut tokio::process::Command) -> (bool, String) {
        let output = command.output().await.expect("the command runs");
        (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
    }

    #[tokio::test]
    async fn without_landlock_commands_still_run_unconfined() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (home, ws) = (dir.path().join("home"), dir.path().join("ws"));
        std::fs::create_dir_all(&home).expect("home");
        std::fs::create_dir_all(&ws).expect("ws");
        std::fs::write(home.join(".env"), "K=v\n").expect(".env");
        let unavailable = Support::Unavailable { reason: "no Landlock in this test".to_owned() };
        let mut command = tokio::process::Command::new("cat");
        command.arg(home.join(".env"));
        confine_with(&mut command, &policy_hiding(&home, &ws), &unavailable).await.expect("no error");
        assert_eq!(run(&mut command).await, (true, "K=v\n".to_owned()));
    }

    /// Landlock alone, without the mount layer, when this machine has it.
    #[cfg(target_os = "linux")]
    fn landlock_only() -> Option<Support> {
        match support() {
            Support::Available { abi, .. } => Some(Support::Available { abi: *abi, hides_home: false }),
            Support::Unavailable { reason } => {
                eprintln!("SKIPPED: Landlock is not available here: {reason}");
                None
            }
        }
    }

    /// Runs `sh -c script` in `ws` confined by Landlock alone; its status and stdout+stderr.
    #[cfg(target_os = "linux")]
    async fn landlocked(script: &str, policy: &Arc<Policy>, support: &Support) -> (bool, String) {
        let mut command = tokio::process::Command::new("sh");
        command.arg("-c").arg(format!("{{ {script}; }} 2>&1")).current_dir(&policy.roots[0]);
        confine_with(&mut command, policy, support).await.expect("confined");
        run(&mut command).await
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn landlock_alone_refuses_reading_listing_and_writing_the_home() {
        let Some(support) = landlock_only() else { return };
        let dir = tempfile::tempdir().expect("tempdir");
        let (home, ws) = (dir.path().join("home"), dir.path().join("ws"));
        std::fs::create_dir_all(&home).expect("home");
        std::fs::create_dir_all(&ws).expect("ws");
        std::fs::write(home.join(".env"), "K=sk-unit-123456\n").expect(".env");
        let policy = policy_hiding(&home, &ws);
        for script in [
            format!("cat '{}/.env'", home.display()),
            format!("ls '{}'", home.display()),
            format!("echo x > '{}/planted'", home.display()),
        ] {
            let (ok, output) = landlocked(&script, &policy, &support).await;
            assert!(
                !ok && output.contains("Permission denied") && !output.contains("sk-unit"),
                "{script}: {output}"
            );
        }
        assert!(!home.join("planted").exists());
        let (ok, output) = landlocked("echo fine > note && cat note", &policy, &support).await;
        assert_eq!((ok, output.as_str()), (true, "fine\n"));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn landlock_alone_hides_a_home_inside_the_workspace() {
        let Some(support) = landlock_only() else { return };
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = std::fs::canonicalize(dir.path()).expect("canonical");
        let home = ws.join(".heron");
        std::fs::create_dir_all(home.join("transcripts")).expect("home");
        std::fs::create_dir_all(ws.join("src")).expect("src");
        std::fs::write(home.join(".env"), "K=sk-unit-123456\n").expect(".env");
        let policy = policy_hiding(&home, &ws);
        for script in
            ["cat .heron/.env", "ls .heron", "echo x > .heron/planted", "echo x > .heron/transcripts/t"]
        {
            let (ok, output) = landlocked(script, &policy, &support).await;
            assert!(
                !ok && output.contains("Permission denied") && !output.contains("sk-unit"),
                "{script}: {output}"
            );
        }
        let (ok, output) = landlocked("echo fine > src/note && cat src/note", &policy, &support).await;
        assert_eq!((ok, output.as_str()), (true, "fine\n"));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_workspace_inside_the_home_is_refused_before_anything_runs() {
        let Some(support) = landlock_only() else { return };
        let dir = tempfile::tempdir().expect("tempdir");
        let home = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir_all(home.join("ws")).expect("ws");
        let mut command = tokio::process::Command::new("true");
        let refused = confine_with(&mut command, &policy_hiding(&home, &home.join("ws")), &support).await;
        assert!(matches!(refused, Err(SandboxError::RootInHome(_))), "{refused:?}");
    }
}
