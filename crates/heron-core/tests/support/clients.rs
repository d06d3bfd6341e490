//! Whether a test's real client or server (acpx, the TypeScript and Rust ACP clients, the
//! Python MCP package, llama-cpp-python's model server) must be there.
//! `HERON_REQUIRE_CLIENTS` names the variables of those `.ci/run` installed, or is `1` for
//! all of them: a required one that is missing fails its test instead of skipping it, so a
//! broken install cannot pass as a green run. Machines that lack what a client runs on
//! still skip, loudly. The walls of the OS sandbox are held to the same rule by
//! `HERON_REQUIRE_WALLS`.
//!
//! Every skip goes through [`skipped`]: it says so on stderr and, when `HERON_SKIP_LOG`
//! names a file (`.ci/run` sets one), adds a line there, so a run ends by counting what it
//! did not test rather than reporting it as passed.

/// Whether the client `var` names must be there.
pub fn required(var: &str) -> bool {
    let Some(list) = std::env::var_os("HERON_REQUIRE_CLIENTS") else { return false };
    let list = list.to_string_lossy();
    list.trim() == "1" || list.split(|c: char| c == ',' || c.is_whitespace()).any(|name| name == var)
}

/// Skips a test because `what` is missing (`var` does not name it), saying so loudly; fails
/// it when that client is required.
pub fn skip(var: &str, what: &str) {
    assert!(
        !required(var),
        "{what} is missing, and HERON_REQUIRE_CLIENTS requires it: set {var} to it (as .ci/run does)"
    );
    skipped(&format!("{what} is not installed (set {var}, as .ci/run does, to run this test)"));
}

/// Whether every wall of the OS sandbox must stand (`HERON_REQUIRE_WALLS`, set by `.ci/run`).
pub fn walls_required() -> bool {
    std::env::var_os("HERON_REQUIRE_WALLS").is_some_and(|value| !value.is_empty())
}

/// Skips (part of) a test because a wall of the OS sandbox does not stand here, saying so
/// loudly; fails it when the walls are required, so a machine that lost one cannot pass.
pub fn skip_wall(why: impl std::fmt::Display) {
    assert!(!walls_required(), "{why}, and HERON_REQUIRE_WALLS requires every wall");
    skipped(&why.to_string());
}

/// Records that the running test skips (all or part of) what it tests, and why: on stderr,
/// and as one line `test: why` in the file `HERON_SKIP_LOG` names, if it names one.
pub fn skipped(why: &str) {
    eprintln!("SKIPPED: {why}");
    let Some(log) = std::env::var_os("HERON_SKIP_LOG").filter(|log| !log.is_empty()) else { return };
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let line = format!("{test}: {}\n", why.replace('\n', " "));
    // One write in append mode: lines of tests running at once do not interleave.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .and_then(|mut file| std::io::Write::write_all(&mut file, line.as_bytes()));
    if let Err(error) = written {
        eprintln!("the skip could not be logged to {}: {error}", std::path::Path::new(&log).display());
    }
}
