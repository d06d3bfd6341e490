//! The OS sandbox of the processes Heron starts on the model's or a transcript's behalf
//! (`run_command`, the agent a conformance run tests, and MCP servers where the user asks
//! for it with `sandbox_mcp`). Who is trusted decides it (DESIGN.md): the model and the
//! files in the workspace are not, so such a process starts with nothing and gets what it
//! needs. Invariant: a child the policy confines either starts behind every wall this
//! machine has, or does not start.
//!
//! The walls, each where the kernel allows it (`support` probes which stand):
//!
//! - no capabilities at all, as root too, and `no_new_privs` (`caps`);
//! - its own pid namespace, under an init of its own, with a fresh `/proc`: Heron, the
//!   editor and every other process are out of sight and reach (`keeper`, `mounts`);
//! - its own mount namespace: a private `/tmp` (the session's temp folder), a private
//!   `/dev`, Heron's home and the host's control sockets covered (`mounts`, `sockets`);
//! - Landlock: reads everywhere but the home, writes only in the roots, the temp folder,
//!   the configured caches and a few devices; no abstract socket or signal outside its
//!   domain; no TCP where the policy has no network (`rules`);
//! - a seccomp filter refusing mounts, device nodes, raw sockets, kernel calls and, without
//!   a pid namespace, calls aimed at other processes (`seccomp`);
//! - its own network namespace (loopback only) where the policy has no network.
//!
//! Where a user namespace is needed to make the others (Heron is not root), the child
//! makes one with its own ids mapped to themselves. Keys leave every child's environment
//! whether it is confined or not (`env`).
//!
//! Parts, one file each: `support` (the probe), `policy` (what a session allows),
//! `launcher` (the command line an editor's terminal runs to get the same walls), `own`
//! (Heron's own process: not dumpable; its lineage), `env`, `temp` (the private temp
//! folder), `sockets`, and on Linux `rules`, `mounts`, `caps`, `seccomp`, `keeper`, and
//! `child`, which runs them in order.
//!
//! Why the work is split between parent and child: Heron is multi-threaded, and after
//! `fork` only the forking thread exists in the child, while the others may have held the
//! allocator's or a logger's lock at that instant. Until `exec`, the child may therefore
//! only make async-signal-safe calls: no allocation, no locks, no logging. Everything that
//! needs any of those (walking directories, opening the rule paths, creating the ruleset,
//! building the seccomp program, formatting path strings) happens in the parent; the child
//! only makes raw system calls on memory prepared before the fork. The ruleset's
//! descriptor belongs to the `pre_exec` closure stored in the command, so it is open in the
//! child while it runs and closes in the parent when the command is dropped after spawning;
//! the kernel opens it close-on-exec, so the program never inherits it.
//!
//! What it does not do: it does not restrict a session's network (only the conformance
//! runner's agent loses it); where a wall does not stand, what it would stop is possible,
//! and Heron says which walls are missing. Postures (tool approval) decide what is asked;
//! the sandbox is the boundary, and only `sandbox = "off"` in `config.toml` turns it off.

mod env;
pub mod launcher;
mod own;
mod policy;
mod remembered;
mod sockets;
mod support;
mod temp;

#[cfg(target_os = "linux")]
mod caps;
#[cfg(target_os = "linux")]
mod child;
#[cfg(target_os = "linux")]
mod keeper;
#[cfg(target_os = "linux")]
mod mounts;
#[cfg(target_os = "linux")]
mod rules;
#[cfg(target_os = "linux")]
mod seccomp;

use std::path::PathBuf;
use std::sync::Arc;

pub use self::env::Withheld;
pub use self::own::keep_this_process_private;
pub use self::policy::Policy;
pub use self::support::{CONFINED_VARIABLE, Support, Walls, prepare, probe_in_background, reported, support};
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
/// is on, the child puts up every wall this machine has before `exec`. Call it after the
/// command's own environment is set and just before spawning; the rules are built on the
/// blocking pool, since building them reads directories.
pub async fn confine(
    command: &mut tokio::process::Command,
    policy: &Arc<Policy>,
) -> Result<(), SandboxError> {
    confine_with(command, policy, support(), false).await
}

/// [`confine`], with a keeper (see `keeper`) that ends whatever the program leaves behind,
/// even what left its process group: for commands run on the model's behalf, which are
/// killed by their group (`process_group(0)`), never by their own pid.
pub async fn confine_kept(
    command: &mut tokio::process::Command,
    policy: &Arc<Policy>,
) -> Result<(), SandboxError> {
    confine_with(command, policy, support(), true).await
}

/// [`confine`] for a `std` command, from a thread that may block (it reads directories):
/// for callers outside the async runtime, such as the conformance runner starting the
/// agent it tests.
pub fn confine_blocking(command: &mut std::process::Command, policy: &Policy) -> Result<(), SandboxError> {
    policy.withheld.scrub(command);
    #[cfg(target_os = "linux")]
    {
        let support = support();
        if policy.enabled {
            support::warn_missing(support);
        }
        let (temp, own_temp) = temps(command, policy);
        let steps = child::Steps::prepare(policy, support, temp.as_deref(), own_temp.as_deref(), false)?;
        steps.install(command);
        give_temp(command, temp.as_deref(), policy.enabled && support.walls.mount_namespace);
        if policy.enabled {
            command.env(CONFINED_VARIABLE, "1");
        }
    }
    Ok(())
}

/// [`confine`] with the support given, so that what happens where a wall is missing can be
/// tested on a machine that has it.
async fn confine_with(
    command: &mut tokio::process::Command,
    policy: &Arc<Policy>,
    support: &Support,
    keeper: bool,
) -> Result<(), SandboxError> {
    let command = command.as_std_mut();
    policy.withheld.scrub(command);
    #[cfg(target_os = "linux")]
    {
        if policy.enabled {
            support::warn_missing(support);
        }
        let enabled = policy.enabled;
        let (policy, support_owned) = (Arc::clone(policy), support.clone());
        let own_temp = own_temp(command);
        let wants_temp = own_temp.is_none();
        let (steps, temp) = tokio::task::spawn_blocking(move || {
            let temp = wants_temp.then(|| policy.temp.path().map(std::path::Path::to_path_buf)).flatten();
            let temp = temp.filter(|_| policy.enabled);
            child::Steps::prepare(&policy, &support_owned, temp.as_deref(), own_temp.as_deref(), keeper)
                .map(|steps| (steps, temp))
        })
        .await
        .map_err(|e| SandboxError::Prepare(format!("the preparing task failed: {e}")))??;
        steps.install(command);
        give_temp(command, temp.as_deref(), enabled && support.walls.mount_namespace);
        if enabled {
            command.env(CONFINED_VARIABLE, "1");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (support, keeper);
    Ok(())
}

/// The temp folder `command` names itself (an MCP server's `env`, the conformance runner's
/// agent): then it keeps it.
#[cfg(target_os = "linux")]
fn own_temp(command: &std::process::Command) -> Option<PathBuf> {
    command
        .get_envs()
        .find(|(name, value)| value.is_some() && TEMP_VARIABLES.iter().any(|v| name == v))
        .and_then(|(_, value)| value.map(PathBuf::from))
        .filter(|path| path.is_absolute())
}

/// The policy's private temp folder for `command` (made if need be, blocking) unless the
/// command names its own, and the one it names.
#[cfg(target_os = "linux")]
fn temps(command: &std::process::Command, policy: &Policy) -> (Option<PathBuf>, Option<PathBuf>) {
    let own = own_temp(command);
    let private = if own.is_some() || !policy.enabled {
        None
    } else {
        policy.temp.path().map(std::path::Path::to_path_buf)
    };
    (private, own)
}

/// Points every temp variable of `command` at `temp`, the folder its rules grant: by its
/// name inside the child, which is `/tmp` where the child's `/tmp` is that folder.
#[cfg(target_os = "linux")]
fn give_temp(command: &mut std::process::Command, temp: Option<&std::path::Path>, private_tmp: bool) {
    if let Some(temp) = temp {
        let inside = if private_tmp { std::path::Path::new("/tmp") } else { temp };
        for name in TEMP_VARIABLES {
            command.env(name, inside);
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
            credentials: Vec::new(),
            withheld: Withheld::default(),
            list_carved: false,
            readable: None,
            network: true,
            port: None,
            private_ports: Vec::new(),
            host_sockets: Vec::new(),
            temp: PrivateTemp::default(),
        })
    }

    async fn run(command: &mut tokio::process::Command) -> (bool, String) {
        let output = command.output().await.expect("the command runs");
        (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Capabilities cleared and nothing else: what stands where no other wall does.
    fn floor() -> Walls {
        Walls {
            no_capabilities: true,
            seccomp: false,
            user_namespace: false,
            mount_namespace: false,
            pid_namespace: false,
            private_proc: false,
            network_namespace: false,
        }
    }

    #[tokio::test]
    async fn without_landlock_or_namespaces_commands_still_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (home, ws) = (dir.path().join("home"), dir.path().join("ws"));
        std::fs::create_dir_all(&home).expect("home");
        std::fs::create_dir_all(&ws).expect("ws");
        std::fs::write(home.join(".env"), "K=v\n").expect(".env");
        let bare =
            Support { landlock: Err("no Landlock in this test".to_owned()), walls: floor(), inside: false };
        let mut command = tokio::process::Command::new("cat");
        command.arg(home.join(".env"));
        confine_with(&mut command, &policy_hiding(&home, &ws), &bare, false).await.expect("no error");
        assert_eq!(run(&mut command).await, (true, "K=v\n".to_owned()));
    }

    /// Landlock alone, without the namespaces, when this machine has it.
    #[cfg(target_os = "linux")]
    fn landlock_only() -> Option<Support> {
        match &support().landlock {
            Ok(abi) => Some(Support { landlock: Ok(*abi), walls: floor(), inside: false }),
            Err(reason) => {
                let why = format!("Landlock is not available here: {reason}");
                // As the integration tests do (`support::clients::skip_wall`): where every wall
                // is required (CI), a missing one fails; elsewhere the skip is counted.
                let required = std::env::var_os("HERON_REQUIRE_WALLS").is_some_and(|v| !v.is_empty());
                assert!(!required, "{why}, and HERON_REQUIRE_WALLS requires every wall");
                eprintln!("SKIPPED: {why}");
                if let Some(log) = std::env::var_os("HERON_SKIP_LOG").filter(|log| !log.is_empty()) {
                    let test = std::thread::current().name().unwrap_or("a sandbox test").to_owned();
                    let line = format!("{test}: {why}\n");
                    let appended = std::fs::OpenOptions::new().create(true).append(true).open(log);
                    let _ =
                        appended.and_then(|mut file| std::io::Write::write_all(&mut file, line.as_bytes()));
                }
                None
            }
        }
    }

    /// Runs `sh -c script` in `ws` confined by Landlock alone; its status and stdout+stderr.
    #[cfg(target_os = "linux")]
    async fn landlocked(script: &str, policy: &Arc<Policy>, support: &Support) -> (bool, String) {
        let mut command = tokio::process::Command::new("sh");
        command.arg("-c").arg(format!("{{ {script}; }} 2>&1")).current_dir(&policy.roots[0]);
        confine_with(&mut command, policy, support, false).await.expect("confined");
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
        let refused =
            confine_with(&mut command, &policy_hiding(&home, &home.join("ws")), &support, false).await;
        assert!(matches!(refused, Err(SandboxError::RootInHome(_))), "{refused:?}");
    }
}
