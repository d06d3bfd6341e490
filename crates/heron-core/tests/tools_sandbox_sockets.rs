//! The OS sandbox's walls around a command's sockets, against the real kernel: a confined
//! command cannot connect to a host's abstract or path Unix socket, and still reaches one
//! it made itself. Shares the layouts of `tools_sandbox`.

use std::sync::Arc;

use heron_core::sandbox::{Policy, support};

use crate::support::Dirs;
use crate::tools_sandbox::{dirs, env_with, policy_from, sandboxed, sandboxed_sh, sh};

/// A script that connects to each Unix socket address it is given (`@name` for an abstract
/// one) and says, per address, `connected` or `refused` with the error.
const CONNECT: &str = "import socket, sys\n\
for address in sys.argv[1:]:\n    \
    s = socket.socket(socket.AF_UNIX)\n    \
    try:\n        \
        s.connect('\\0' + address[1:] if address.startswith('@') else address)\n        \
        print('connected', address)\n    \
    except OSError as error:\n        \
        print('refused', address, error)\n";

/// Runs [`CONNECT`] under `policy` against `addresses`; what it printed.
async fn connect_under(dirs: &Dirs, policy: Arc<Policy>, addresses: &[String]) -> String {
    std::fs::write(dirs.ws().join("connect.py"), CONNECT).expect("script");
    let (ok, output) =
        sh(&env_with(dirs, policy), &format!("python3 connect.py {}", addresses.join(" "))).await;
    assert!(ok, "the script ran: {output}");
    output
}

/// A process of the host listening on an abstract Unix socket (a tmux or D-Bus server, an
/// X11 display) would run what a confined command sends it, outside the sandbox: Landlock's
/// scope (ABI 6) refuses the connection.
#[tokio::test]
async fn a_confined_command_cannot_connect_to_an_abstract_socket_of_the_host() {
    use std::os::linux::net::SocketAddrExt;
    if !sandboxed() {
        return;
    }
    if let Ok(abi) = &support().landlock
        && *abi < 6
    {
        crate::support::clients::skip_wall(format!(
            "Landlock ABI {abi} cannot scope abstract sockets (needs 6, Linux 6.12)"
        ));
        return;
    }
    let dirs = dirs();
    let name = format!("heron-test-{}", uuid::Uuid::new_v4().simple());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("address");
    let _host = std::os::unix::net::UnixListener::bind_addr(&address).expect("listen");
    let target = [format!("@{name}")];

    let confined = connect_under(&dirs, policy_from("", &dirs.home(), vec![dirs.ws()]), &target).await;
    assert!(confined.contains("refused") && confined.contains("not permitted"), "{confined}");
    let off = policy_from("sandbox = \"off\"\n", &dirs.home(), vec![dirs.ws()]);
    let unconfined = connect_under(&dirs, off, &target).await;
    assert!(unconfined.contains("connected"), "the test would see a connection: {unconfined}");
}

/// The abstract sockets a confined command makes itself still work between its processes.
#[tokio::test]
async fn a_confined_command_still_reaches_an_abstract_socket_it_made() {
    if !sandboxed() {
        return;
    }
    let dirs = dirs();
    let script = "import socket\n\
name = '\\0heron-own-' + str(__import__('os').getpid())\n\
server = socket.socket(socket.AF_UNIX); server.bind(name); server.listen(1)\n\
client = socket.socket(socket.AF_UNIX); client.connect(name); print('own socket works')\n";
    std::fs::write(dirs.ws().join("own.py"), script).expect("script");
    let (ok, output) = sandboxed_sh(&dirs, "python3 own.py").await;
    assert!(ok && output.contains("own socket works"), "{output}");
}

/// Connecting to a socket file is not a file access Landlock controls (before ABI 9), so a
/// host-control socket by path (tmux's, the session bus, docker's) is covered in the child's
/// mount namespace: a folder of them by an empty tmpfs, a single one by `/dev/null`.
#[tokio::test]
async fn a_confined_command_cannot_connect_to_a_host_socket_by_its_path() {
    if !support().walls.mount_namespace {
        crate::support::clients::skip_wall(format!(
            "no private mount namespace here, so sockets by path stay reachable: {:?}",
            support()
        ));
        return;
    }
    let dirs = dirs();
    let folder = dirs.outside().join("tmux-0");
    std::fs::create_dir(&folder).expect("socket folder");
    let in_folder = folder.join("default");
    let single = dirs.outside().join("docker.sock");
    let _servers =
        [&in_folder, &single].map(|path| std::os::unix::net::UnixListener::bind(path).expect("listen"));
    let targets = [in_folder.display().to_string(), single.display().to_string()];
    let base = policy_from("", &dirs.home(), vec![dirs.ws()]);

    let covered = Arc::new(Policy { host_sockets: vec![folder.clone(), single.clone()], ..(*base).clone() });
    let output = connect_under(&dirs, covered, &targets).await;
    let refused = output.lines().filter(|line| line.starts_with("refused ")).count();
    assert!(!output.contains("connected") && refused == 2, "{output}");
    let uncovered = Arc::new(Policy { host_sockets: Vec::new(), ..(*base).clone() });
    let output = connect_under(&dirs, uncovered, &targets).await;
    assert_eq!(output.matches("connected").count(), 2, "the test would see the connections: {output}");
    assert!(in_folder.exists() && single.exists(), "the covers are the child's alone");
}
