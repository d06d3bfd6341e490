//! The walls around a command the model runs, tried as an attacker would, over the real
//! binary: a command (run without asking, `bypassPermissions`) that looks for root's
//! capabilities, makes a device node, opens a packet socket, signals, limits and looks for
//! Heron, and connects to an editor's control socket under `/tmp`. Run as the user the
//! tests run as, and, where that is root, again as an ordinary user the test makes, so both
//! ways a user meets Heron are tried. Each check is also run with `sandbox = "off"`, which
//! shows the test would see the difference.
//!
//! A wall this machine lacks is skipped loudly, unless `HERON_REQUIRE_WALLS` (set by
//! `.ci/run`) requires every wall, as on CI's machine.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::clients::walls_required;
use crate::support::{self, process::Launch, update_kind};

/// The account the test makes for the second way, when it runs as root.
const USER: &str = "heron-walls";

/// What the attacking command tries, one line per check, each saying what happened.
fn attack(socket: &Path) -> String {
    format!(
        r#"heron=$(cat heron.pid)
echo "caps $(grep CapEff /proc/self/status | cut -f2)"
mknod blk b 7 0 2>/dev/null && echo "mknod made" || echo "mknod refused"
python3 -c 'import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)' 2>/dev/null && echo "packet opened" || echo "packet refused"
kill -0 "$heron" 2>/dev/null && echo "heron signalled" || echo "heron unsignalled"
prlimit --pid "$heron" --core=0:0 2>/dev/null && echo "heron limited" || echo "heron unlimited"
test -e "/proc/$heron/stat" && echo "heron seen" || echo "heron unseen"
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' '{socket}' 2>/dev/null && echo "socket reached" || echo "socket unreachable"
echo checked"#,
        socket = socket.display()
    )
}

/// An editor's control socket under `/tmp`, as Emacs's server or Neovim's make, open to
/// everyone so that only the sandbox can keep a command from it.
struct EditorSocket {
    dir: PathBuf,
    _listener: std::os::unix::net::UnixListener,
}

impl EditorSocket {
    fn new() -> Self {
        let dir = PathBuf::from(format!("/tmp/heron-walls-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir(&dir).expect("socket folder");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let listener = std::os::unix::net::UnixListener::bind(dir.join("server")).expect("listen");
        std::fs::set_permissions(dir.join("server"), std::fs::Permissions::from_mode(0o777)).expect("chmod");
        EditorSocket { dir, _listener: listener }
    }

    fn path(&self) -> PathBuf {
        self.dir.join("server")
    }
}

impl Drop for EditorSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The ids of the ordinary account, made if it is not there yet.
fn ordinary_user() -> (u32, u32) {
    let made = Command::new("useradd")
        .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER])
        .output()
        .expect("useradd runs (root makes the test's ordinary account with it)");
    // 9: the account exists already (an earlier run).
    assert!(made.status.success() || made.status.code() == Some(9), "useradd: {made:?}");
    let id = |flag: &str| -> u32 {
        let out = Command::new("id").args([flag, USER]).output().expect("id");
        String::from_utf8_lossy(&out.stdout).trim().parse().expect("a numeric id")
    };
    (id("-u"), id("-g"))
}

/// Runs the attack once under `heron acp` with `config`, as `owner` (uid, gid) when given,
/// and returns what the command printed.
fn attacked(config: &str, owner: Option<(u32, u32)>, socket: &EditorSocket) -> String {
    let call =
        json!({ "tool_call": { "name": "run_command", "arguments": { "command": attack(&socket.path()) } } });
    let script = format!("{}\n{}\n", json!({ "steps": [call] }), json!({ "steps": [{ "text": "done" }] }));
    let dirs = support::scripted_home("s", config, &script);
    let user_home = dirs.path("user");
    std::fs::create_dir_all(&user_home).expect("the user's home");
    let mut command = Command::new(support::heron_bin());
    command
        .args(["acp", "--model", "s/m", "--permission-mode", "bypassPermissions"])
        .env("HERON_HOME", dirs.home())
        .env("HOME", &user_home)
        .env("HERON_LOG", "warn");
    if let Some((uid, gid)) = owner {
        for path in [dirs.home(), dirs.ws_path(), user_home.clone(), dirs.path("")] {
            chown_tree(&path, uid, gid);
        }
        command.uid(uid).gid(gid);
    }
    let mut heron = Launch::command(command).start();
    std::fs::write(dirs.ws_path().join("heron.pid"), heron.child.id().to_string()).expect("pid file");
    let session = heron.new_session(&dirs.ws());
    heron.send(json!({ "jsonrpc": "2.0", "id": "p", "method": "session/prompt",
        "params": { "sessionId": session, "prompt": [{ "type": "text", "text": "attack" }] } }));
    let mut output = String::new();
    loop {
        let message: Value = heron.next();
        if message["id"] == "p" {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            break;
        }
        let status = &message["params"]["update"]["status"];
        if update_kind(&message) == Some("tool_call_update") && (status == "completed" || status == "failed")
        {
            output = message["params"]["update"].to_string();
        }
    }
    heron.close_input();
    assert!(heron.exited_within(support::PROCESS_WAIT).is_some(), "heron exits on EOF");
    assert!(output.contains("checked"), "the attack ran to its end: {output}");
    output
}

fn chown_tree(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).expect("chown");
    if path.is_dir() {
        for entry in std::fs::read_dir(path).expect("read_dir").flatten() {
            chown_tree(&entry.path(), uid, gid);
        }
    }
}

/// The attack, confined and not, as `owner`; `root` says whether that is root.
fn attack_both_ways(owner: Option<(u32, u32)>, root: bool) {
    let support = heron_core::sandbox::support();
    let socket = EditorSocket::new();
    let open = attacked("sandbox = \"off\"\n", owner, &socket);
    assert!(open.contains("heron signalled") && open.contains("heron seen"), "the test would see it: {open}");
    assert!(open.contains("socket reached"), "the test would see the socket reached: {open}");
    if root {
        assert!(
            !open.contains("caps 0000000000000000"),
            "root keeps capabilities without the sandbox: {open}"
        );
        assert!(open.contains("packet opened"), "root opens packet sockets without the sandbox: {open}");
    }

    let confined = attacked("", owner, &socket);
    assert!(confined.contains("caps 0000000000000000"), "no capabilities: {confined}");
    assert!(confined.contains("mknod refused"), "{confined}");
    assert!(confined.contains("packet refused"), "{confined}");
    let walls = support.walls;
    if walls.pid_namespace || walls_required() {
        assert!(confined.contains("heron unsignalled") && confined.contains("heron unlimited"), "{confined}");
        assert!(confined.contains("heron unseen"), "Heron is out of sight: {confined}");
    } else {
        crate::support::clients::skip_wall(format!("(in part) no pid namespace here ({support:?})"));
    }
    if walls.mount_namespace || walls_required() {
        assert!(confined.contains("socket unreachable"), "no socket under /tmp: {confined}");
    } else {
        crate::support::clients::skip_wall(format!(
            "(in part) no mount namespace, so /tmp's sockets stay reachable ({support:?})"
        ));
    }
}

#[test]
fn a_command_holds_no_power_over_the_machine_heron_or_the_editor() {
    // SAFETY: geteuid takes nothing and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    attack_both_ways(None, root);
}

#[test]
fn an_ordinary_user_gets_the_same_walls() {
    // SAFETY: geteuid takes nothing and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        // The tests already run as an ordinary user: the test above is this one.
        crate::support::clients::skipped("not root, so the other test already runs as an ordinary user");
        return;
    }
    let owner = ordinary_user();
    attack_both_ways(Some(owner), false);
}
