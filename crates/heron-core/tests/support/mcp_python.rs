//! A Python with the `mcp` package, for tests against real MCP servers over HTTP
//! (`tests/fixtures/mcp_http_server.py`): `HERON_MCP_PYTHON` when set (CI's `.ci/run`
//! prepares one), else a venv under `target/` made on first use with the pinned version.
//! Only a machine without `python3` or its `venv` module skips those tests, loudly; where
//! `HERON_REQUIRE_CLIENTS` requires `HERON_MCP_PYTHON`, its absence fails them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The `mcp` release the fixtures are written for.
pub const MCP_VERSION: &str = "2.3.0";

/// The Python to run fixtures with, or `None` (after a loud message) where this machine
/// has no `python3 -m venv`.
pub fn python() -> Option<PathBuf> {
    static PYTHON: OnceLock<Option<PathBuf>> = OnceLock::new();
    let found = PYTHON.get_or_init(prepare).clone();
    if found.is_none() {
        // Counted for each test that asked, not once for the process.
        super::clients::skipped("python3 or its venv module is missing: this MCP-over-HTTP test cannot run");
    }
    found
}

fn prepare() -> Option<PathBuf> {
    if let Some(python) = std::env::var_os("HERON_MCP_PYTHON") {
        return Some(PathBuf::from(python));
    }
    // Required, it must be the one `.ci/run` installed, not one made here.
    if super::clients::required("HERON_MCP_PYTHON") {
        super::clients::skip("HERON_MCP_PYTHON", "a Python with the mcp package");
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|p| p.join("Cargo.lock").exists())?
        .join("target");
    let venv = target.join(format!("mcp-venv-{MCP_VERSION}"));
    let python = venv.join("bin/python");
    if python.exists() {
        return Some(python);
    }
    let has_venv = Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_venv {
        return None;
    }
    // Built beside its final place and renamed, so an interrupted setup is never taken
    // for a finished one.
    let building = target.join(format!("mcp-venv-{MCP_VERSION}.building-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    let made =
        Command::new("python3").arg("-m").arg("venv").arg(&building).status().expect("run python3 -m venv");
    assert!(made.success(), "python3 -m venv failed");
    let pip = Command::new(building.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            &format!("mcp=={MCP_VERSION}"),
        ])
        .status()
        .expect("run pip");
    assert!(pip.success(), "pip could not install mcp=={MCP_VERSION}");
    if std::fs::rename(&building, &venv).is_err() {
        // Another test process finished first: its venv serves.
        let _ = std::fs::remove_dir_all(&building);
    }
    Some(python)
}

/// A free port on loopback (free when asked; the fixture binds it a moment later).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    listener.local_addr().expect("address").port()
}

/// A running fixture server; stopped (by its own handle) when dropped.
pub struct HttpServer {
    child: std::process::Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl HttpServer {
    /// Starts `tests/fixtures/mcp_http_server.py` with `args` (after `--port`), or `None`
    /// where there is no Python for it.
    pub fn start(args: &[&str]) -> Option<HttpServer> {
        let python = python()?;
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .map(|p| p.join("tests/fixtures/mcp_http_server.py"))
            .find(|p| p.exists())
            .expect("the fixture");
        let port = free_port();
        let child = Command::new(python)
            .arg(fixture)
            .args(["--port", &port.to_string()])
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the fixture");
        Some(HttpServer { child, port })
    }

    /// The URL of `path` on it.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Waits until it accepts connections (at most 20 s).
    pub fn wait_listening(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "the fixture did not listen in time");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
