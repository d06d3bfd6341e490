//! What a transcript may make the runner do. Transcripts are shared by other people, so they
//! are untrusted input: the header's arguments come from an allow-list, every session
//! directory a client message names lies in the scenario's sandbox, both checked before
//! anything is created or started, and the agent starts with its working directory, HOME,
//! TMPDIR and HERON_HOME in the sandbox and little else of the caller's environment,
//! confined by the OS sandbox to writing there, to reading only the system folders, its own
//! program and the sandbox, and to no TCP at all.

use std::path::{Path, PathBuf};

use heron_core::config::Home;
use heron_core::sandbox::{Policy, PrivateTemp, Withheld, confine_blocking};
use std::process::Command;

use serde_json::Value;

use super::{Failure, Sandbox};
use crate::format::{Item, Scenario};
use crate::matcher::{self, Paths};

/// Whether an allowed flag takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    Value,
    Nothing,
    /// `--validate` or `--validate=BOOL`, never a separate word.
    OptionalAttached,
}

/// The `heron acp` flags a transcript may pass: those that shape how Heron behaves (what a
/// recording keeps, plus `--validate`), never where it reads or writes. `--record` writes a
/// file, `--cwd` moves the agent out of the workspace and `--setup` asks the terminal for
/// keys, so they and any flag not listed here are refused.
const ALLOWED: &[(&str, Takes)] = &[
    ("--model", Takes::Value),
    ("--preset", Takes::Value),
    ("--profile", Takes::Value),
    ("--permission-mode", Takes::Value),
    ("--title", Takes::Value),
    ("--protocol", Takes::Value),
    ("--max-line-bytes", Takes::Value),
    ("--safe-mode", Takes::Nothing),
    ("--cwd-only", Takes::Nothing),
    ("--validate", Takes::OptionalAttached),
];

/// Why a refused flag is refused, where a reason helps more than "not allowed".
const REFUSED: &[(&str, &str)] = &[
    ("--record", "it writes a file wherever the transcript says"),
    ("--cwd", "it moves the agent out of the scenario's workspace"),
    ("--setup", "it asks the terminal for provider keys instead of serving"),
];

/// The variables of the caller's environment the agent still sees: what finding programs,
/// reading text and logging need. Anything else (tokens, cloud credentials, SSH agents) stays
/// with the caller, so a transcript's model config or commands cannot send it anywhere.
const PASSED_THROUGH: &[&str] =
    &["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "HERON_LOG", "RUST_LOG", "RUST_BACKTRACE"];

/// The folders of the system that the agent and its commands may read and run from, beside
/// its own program and the scenario: programs, libraries, `/etc` (its secrets hidden), the
/// kernel's views and the device files. Not `/home`, `/root`, `/tmp`, `/var` or `/run`.
const SYSTEM_FOLDERS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
    "/proc",
    "/sys",
    "/dev",
];

/// The header's arguments once checked: flag and value pairs, written back as `--flag=value`
/// so a value can never be read as another flag.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct CheckedArgs(Vec<(&'static str, Option<String>)>);

impl CheckedArgs {
    /// The arguments after `heron acp`, with `$WS` and `$HOME` expanded; `--validate` unless
    /// the header gave its own.
    pub(super) fn command_line(&self, paths: &Paths) -> Vec<String> {
        let mut line = Vec::new();
        if !self.0.iter().any(|(flag, _)| *flag == "--validate") {
            line.push("--validate".to_owned());
        }
        for (flag, value) in &self.0 {
            line.push(match value {
                Some(value) => format!("{flag}={}", matcher::expand_paths(value, paths)),
                None => (*flag).to_owned(),
            });
        }
        line
    }
}

/// Checks everything a transcript asks for before any of it happens: the header's
/// arguments, then the directories its messages open sessions in.
pub(super) fn check(scenario: &Scenario) -> Result<CheckedArgs, Failure> {
    let args = header_args(&scenario.header.args)
        .map_err(|reason| Failure::new(scenario.header_line(), format!("the header's args: {reason}"), ""))?;
    for item in &scenario.items {
        let (message, line) = match item {
            Item::Send { message, line } => (message.clone(), *line),
            // A raw line Heron can parse is as good as a sent message.
            Item::SendRaw { text, line } => match serde_json::from_str::<Value>(text) {
                Ok(message) => (message, *line),
                Err(_) => continue,
            },
            _ => continue,
        };
        session_paths(&message).map_err(|reason| Failure::new(line, reason, ""))?;
    }
    Ok(args)
}

/// The header's arguments, each checked against the allow-list.
fn header_args(args: &[String]) -> Result<CheckedArgs, String> {
    let mut checked = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let (name, attached) = match word.split_once('=') {
            Some((name, value)) => (name, Some(value.to_owned())),
            None => (word.as_str(), None),
        };
        if !name.starts_with("--") {
            return Err(format!("`{word}` is not a flag; a transcript passes only flags"));
        }
        if let Some((_, why)) = REFUSED.iter().find(|(flag, _)| *flag == name) {
            return Err(format!("`{name}` is refused: {why}"));
        }
        let Some(&(flag, takes)) = ALLOWED.iter().find(|(flag, _)| *flag == name) else {
            let allowed: Vec<&str> = ALLOWED.iter().map(|(flag, _)| *flag).collect();
            return Err(format!(
                "`{name}` is not a flag a transcript may pass (only {})",
                allowed.join(", ")
            ));
        };
        let value = match (takes, attached) {
            (Takes::Nothing, Some(_)) => return Err(format!("`{flag}` takes no value")),
            (Takes::Nothing | Takes::OptionalAttached, None) => None,
            (Takes::OptionalAttached, Some(value)) if value == "true" || value == "false" => Some(value),
            (Takes::OptionalAttached, Some(_)) => {
                return Err(format!("`{flag}` is `{flag}=true` or `=false`"));
            }
            (Takes::Value, Some(value)) => Some(value),
            (Takes::Value, None) => {
                Some(words.next().ok_or_else(|| format!("`{flag}` needs a value"))?.clone())
            }
        };
        if let Some(value) = &value {
            inside_sandbox(value).map_err(|why| format!("`{flag}` {why}"))?;
        }
        checked.push((flag, value));
    }
    Ok(CheckedArgs(checked))
}

/// Checks the session directories (`cwd`, `additionalDirectories`) a client message names:
/// Heron's file tools and commands work inside them, so they must be the sandbox's.
fn session_paths(message: &Value) -> Result<(), String> {
    if let Value::Array(batch) = message {
        return batch.iter().try_for_each(session_paths);
    }
    let Some(params) = message.get("params") else { return Ok(()) };
    let method = message.get("method").and_then(Value::as_str).unwrap_or("the message");
    if let Some(Value::String(cwd)) = params.get("cwd") {
        inside_sandbox(cwd).map_err(|why| format!("{method}'s params.cwd {why}"))?;
    }
    if let Some(Value::Array(dirs)) = params.get("additionalDirectories") {
        for (index, dir) in dirs.iter().enumerate() {
            if let Value::String(dir) = dir {
                inside_sandbox(dir)
                    .map_err(|why| format!("{method}'s params.additionalDirectories[{index}] {why}"))?;
            }
        }
    }
    Ok(())
}

/// A value that names a path must name one in the sandbox: `$WS` or `$HOME`, or below them
/// without `..`. Relative values other than `..` climbs are left alone: Heron refuses a
/// relative session directory itself, and the allowed flags take no paths.
fn inside_sandbox(value: &str) -> Result<(), String> {
    let climbs = |rest: &str| rest.split('/').any(|segment| segment == "..");
    let below = value.strip_prefix("$WS").or_else(|| value.strip_prefix("$HOME"));
    match below {
        Some(rest) if rest.is_empty() || (rest.starts_with('/') && !climbs(rest)) => Ok(()),
        Some(_) => Err(format!("`{value}` leaves the scenario's sandbox")),
        None if value.starts_with('/') || value.starts_with('~') || value.starts_with('$') => {
            Err(format!("`{value}` names a path outside the scenario's sandbox (use $WS or $HOME and below)"))
        }
        None if climbs(value) => Err(format!("`{value}` climbs out with `..`")),
        None => Ok(()),
    }
}

/// What a recipe adds to the agent's process: the model server's port, which the agent and
/// the server beside it may bind and connect to, the recipe's environment, and the ports
/// the agent serves itself on (granted only on its private loopback).
#[derive(Debug, Clone, Default)]
pub(super) struct Kit {
    pub(super) port: u16,
    pub(super) env: Vec<(String, String)>,
    pub(super) own_ports: Vec<u16>,
}

/// The one place the agent's process is set up: everything a transcript can make the agent
/// do, its tools' commands and its MCP servers included, runs below this command.
///
/// The agent runs in the OS sandbox (`heron_core::sandbox`, Landlock where the kernel has
/// it): it writes only inside the scenario's folder (not the temp folders); it reads only
/// there, in [`SYSTEM_FOLDERS`] and in `program_files` (its own program, its interpreter),
/// so a transcript's commands find none of the user's files to send; it may neither bind
/// nor connect TCP, since a replay talks to the scripted model and nothing else (but for a
/// recipe's one port, `kit`, where the kit's model server runs beside it, and the ports a
/// recipe names for the agent's own server, in its private network namespace only); and the
/// caller's own Heron home is hidden from it. It is also pointed at the sandbox: its
/// working directory is the workspace, HOME, TMPDIR and HERON_HOME are the sandbox's, and
/// it sees only [`PASSED_THROUGH`] of the caller's environment.
pub(super) fn agent_command(
    program: &Path,
    args: &[String],
    program_files: Vec<PathBuf>,
    sandbox: &Sandbox,
    kit: Option<&Kit>,
) -> Result<Command, String> {
    let mut command = Command::new(program);
    command.args(args).current_dir(sandbox.ws()).env_clear();
    for key in PASSED_THROUGH {
        if let Some(value) = std::env::var_os(key) {
            command.env(key, value);
        }
    }
    command.env("HOME", sandbox.user_home()).env("TMPDIR", sandbox.tmp()).env("HERON_HOME", sandbox.home());
    for (key, value) in kit.map(|kit| kit.env.as_slice()).unwrap_or_default() {
        command.env(key, value);
    }
    let callers_home = Home::from_env().map(|h| h.root().to_path_buf()).unwrap_or_default();
    // The runner itself: a wrapper script named by `--agent` may start this Heron.
    let runner = std::env::current_exe().ok();
    let readable = SYSTEM_FOLDERS.iter().map(PathBuf::from).chain(program_files).chain(runner).collect();
    let policy = Policy {
        enabled: true,
        home: callers_home,
        roots: vec![sandbox.root().to_path_buf()],
        writable: Vec::new(),
        credentials: Vec::new(),
        withheld: Withheld::default(),
        // The agent may sandbox its own tools (Heron does), which needs to list `/`.
        list_carved: true,
        readable: Some(readable),
        network: false,
        port: kit.map(|kit| kit.port),
        // A recipe's agent that serves itself (over HTTP on loopback): only where its
        // loopback is its own, so nothing outside reaches it and it reaches nothing.
        private_ports: kit.map(|kit| kit.own_ports.clone()).unwrap_or_default(),
        // Covered where the agent gets a mount namespace; its own children inherit it.
        host_sockets: heron_core::sandbox::host_sockets(),
        // The agent's TMPDIR is the scenario's own.
        temp: PrivateTemp::default(),
    };
    confine_blocking(&mut command, &policy).map_err(|e| e.to_string())?;
    Ok(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn allowed_flags_are_written_back_attached_to_their_values() {
        let checked = header_args(&words(&["--model", "script/m", "--title=--record", "--safe-mode"]))
            .expect("allowed");
        let paths = Paths { ws: "/s/ws".into(), home: "/s/home".into() };
        assert_eq!(
            checked.command_line(&paths),
            ["--validate", "--model=script/m", "--title=--record", "--safe-mode"]
        );
    }

    #[test]
    fn a_header_validate_replaces_the_runners() {
        let checked = header_args(&words(&["--validate=false"])).expect("allowed");
        assert_eq!(checked.command_line(&Paths::default()), ["--validate=false"]);
    }

    #[test]
    fn refused_and_unknown_flags_and_outside_paths_are_errors() {
        for (args, says) in [
            (&["--record", "/tmp/x"][..], "`--record` is refused"),
            (&["--cwd=/"], "`--cwd` is refused"),
            (&["--setup"], "`--setup` is refused"),
            (&["--verbose"], "not a flag a transcript may pass"),
            (&["acp"], "not a flag"),
            (&["--model"], "needs a value"),
            (&["--safe-mode=yes"], "takes no value"),
            (&["--title", "/etc/passwd"], "outside the scenario's sandbox"),
            (&["--title", "~/notes"], "outside the scenario's sandbox"),
            (&["--title", "$WS/../x"], "leaves the scenario's sandbox"),
            (&["--title", "a/../../b"], "climbs out"),
        ] {
            let err = header_args(&words(args)).expect_err("refused");
            assert!(err.contains(says), "{args:?}: {err}");
        }
    }

    #[test]
    fn session_directories_must_be_in_the_sandbox() {
        let new = |cwd: &str| serde_json::json!({ "method": "session/new", "params": { "cwd": cwd } });
        assert!(session_paths(&new("$WS")).is_ok());
        assert!(session_paths(&new("$WS/sub")).is_ok());
        assert!(session_paths(&new("relative")).is_ok(), "Heron refuses it itself");
        assert!(session_paths(&new("/home/someone")).is_err());
        assert!(session_paths(&new("$sid")).is_err());
        let load = serde_json::json!({
            "method": "session/load",
            "params": { "cwd": "$WS", "additionalDirectories": ["$HOME", "/etc"] },
        });
        let err = session_paths(&load).expect_err("refused");
        assert!(err.contains("additionalDirectories[1]"), "{err}");
    }
}
