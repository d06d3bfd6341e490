//! What a session lets its children do: whether the sandbox is on, the home they must not
//! see, the roots and extra paths they may write, what they may read and reach, and the
//! keys withheld from them. Built without touching the disk; paths are resolved when a
//! child's rules are prepared.

use std::path::PathBuf;

use super::{PrivateTemp, Withheld};
use crate::config::{Config, Home, Keys, SandboxSetting};

/// A session's sandbox policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Whether children are confined (`sandbox = "on"`); keys are withheld either way.
    pub enabled: bool,
    /// Heron's home: no read, write, listing or execution inside it.
    pub home: PathBuf,
    /// The session's write roots: its cwd and additional directories.
    pub roots: Vec<PathBuf>,
    /// More writable paths: the temp folders (`TMPDIR` and `/tmp`), then `sandbox_writable`
    /// expanded. The device files programs need are always writable and not listed here.
    pub writable: Vec<PathBuf>,
    /// The user's credential stores (`~/.ssh`, `~/.aws`, `~/.netrc`, ...): children may
    /// neither read, list nor write them, even inside a write root (an editor opened on
    /// `~`). What runs on the model's behalf starts without the user's credentials; the ssh
    /// agent's socket stays reachable, so signing in through it still works.
    pub credentials: Vec<PathBuf>,
    /// The key names and values no child inherits.
    pub withheld: Withheld,
    /// Whether the directories on the way to the home may be listed. Landlock grants
    /// listing for a whole hierarchy, so this lets the home's file names (never their
    /// contents) be listed too. Off for the model's commands; on where the confined
    /// program must confine its own children (the agent a conformance run tests), since
    /// building a carve needs to list what it carves.
    pub list_carved: bool,
    /// What children may read and run, when not everything: these hierarchies, the write
    /// roots and the writable paths, and nothing else (`None`: everything but the hidden
    /// paths). Then the system's own secrets (`/etc/shadow`, `/etc/ssh`, ...) are hidden
    /// too. Narrowed for the agent a conformance run tests, not for a session's commands.
    pub readable: Option<Vec<PathBuf>>,
    /// Whether children may bind and connect TCP sockets (refused from Landlock ABI 4,
    /// Linux 6.7). Off for the agent a conformance run tests; UDP is not covered.
    pub network: bool,
    /// Without `network`, the one TCP port children may still bind and connect to: the
    /// kit's model server, which runs beside the agent a conformance recipe tests (in its
    /// network namespace, where it gets one).
    pub port: Option<u16>,
    /// Without `network`, TCP ports the confined program may bind and connect to for a
    /// server of its own (an agent that serves itself over a local HTTP port), granted only
    /// where the child gets a private network namespace: there its loopback is its own, so
    /// nothing outside can reach what it binds and the port leads nowhere else. Where it
    /// gets none, they are not granted.
    pub private_ports: Vec<u16>,
    /// Host-control sockets and their folders (the session's D-Bus bus, tmux, X11, docker)
    /// covered in a child's private mount namespace, where it gets one.
    pub host_sockets: Vec<PathBuf>,
    /// The private temp folder children get as `TMPDIR`, made when one first needs it.
    pub temp: PrivateTemp,
}

impl Policy {
    /// The policy of a session with these roots under this home and config.
    pub fn from_config(config: &Config, home: &Home, keys: &Keys, roots: Vec<PathBuf>) -> Self {
        Self {
            enabled: config.sandbox == SandboxSetting::On,
            home: home.root().to_path_buf(),
            roots,
            writable: temp_folders().into_iter().chain(config.writable_paths()).collect(),
            credentials: crate::paths::user_home()
                .map(|home| crate::paths::credential_folders(&home))
                .unwrap_or_default(),
            withheld: Withheld::from_keys(keys, &config.sandbox_pass_env),
            list_carved: false,
            readable: None,
            network: true,
            port: None,
            private_ports: Vec::new(),
            host_sockets: super::sockets::host_control(),
            temp: PrivateTemp::default(),
        }
    }

    /// The policy of the MCP servers of a session with these roots. They are the user's own
    /// programs, chosen in the editor's settings, the config or a plugin (trusted,
    /// DESIGN.md), so they run as the user with the keys withheld, unless `sandbox_mcp =
    /// true` confines them like the model's commands. One function, so that what `heron
    /// doctor --mcp` starts runs exactly as a session's servers do.
    pub fn for_mcp_servers(config: &Config, home: &Home, keys: &Keys, roots: Vec<PathBuf>) -> Self {
        let mut policy = Self::from_config(config, home, keys, roots);
        policy.enabled &= config.sandbox_mcp;
        policy
    }
}

/// Where programs keep their temporary files: `TMPDIR` (or the platform's default) and
/// `/tmp`, which many programs use whatever `TMPDIR` says.
fn temp_folders() -> Vec<PathBuf> {
    let mut folders = vec![std::env::temp_dir()];
    if !folders.contains(&PathBuf::from("/tmp")) {
        folders.push(PathBuf::from("/tmp"));
    }
    folders
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_decides_on_off_and_the_extra_paths() {
        let home = Home::at("/srv/heron");
        let keys = Keys::from_pairs([("K".to_owned(), "v".to_owned())]);
        let on = Config::parse("sandbox_writable = [\"/opt/cache\"]\n").expect("parses");
        let policy = Policy::from_config(&on, &home, &keys, vec![PathBuf::from("/ws")]);
        assert!(policy.enabled);
        assert_eq!(policy.writable.last(), Some(&PathBuf::from("/opt/cache")));
        assert!(policy.writable.contains(&PathBuf::from("/tmp")), "{:?}", policy.writable);
        assert_eq!(
            (policy.home.as_path(), policy.roots.as_slice()),
            (home.root(), &[PathBuf::from("/ws")][..])
        );
        let off = Config::parse("sandbox = \"off\"\n").expect("parses");
        assert!(!Policy::from_config(&off, &home, &keys, Vec::new()).enabled);
    }

    #[test]
    fn mcp_servers_run_unconfined_unless_sandbox_mcp_asks() {
        let home = Home::at("/srv/heron");
        let keys = Keys::from_pairs([("K".to_owned(), "v".to_owned())]);
        let confined = |text: &str| {
            let config = Config::parse(text).expect("parses");
            Policy::for_mcp_servers(&config, &home, &keys, vec![PathBuf::from("/ws")]).enabled
        };
        assert!(!confined(""), "by default the user's servers run as the user");
        assert!(confined("sandbox_mcp = true\n"));
        assert!(!confined("sandbox = \"off\"\nsandbox_mcp = true\n"), "no sandbox, none for them either");
    }
}
