//! `heron sandbox-exec`: runs a program behind the walls a session's local commands get.
//! Heron asks an editor to run it in its terminal instead of the model's command itself
//! (`sandbox::launcher`), so the command the user watches there is still confined: keys
//! withheld, `HERON_HOME` unreadable, no capabilities, writes only in the roots.
//!
//! It builds the policy as a session does, from the home's `config.toml` and `.env` and the
//! roots it is given, starts the program under a keeper, hands it the terminal (its process
//! group becomes the foreground one, so Ctrl-C and reads from the terminal reach it), passes
//! on the signals it gets, and exits as the program did.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use heron_core::config::{Config, Home, Keys};
use heron_core::sandbox::{self, Policy};
use tokio::signal::unix::{SignalKind, signal};

/// Arguments of `heron sandbox-exec`.
#[derive(Debug, clap::Args)]
pub struct SandboxExecArgs {
    /// Heron's home (config and keys), which the program cannot see.
    #[arg(long, value_name = "DIR")]
    pub home: PathBuf,
    /// A folder the program may write: the session's cwd and additional directories.
    #[arg(long = "root", value_name = "DIR", required = true)]
    pub roots: Vec<PathBuf>,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    pub program: Vec<OsString>,
}

/// The exit code when the program could not be started, as a shell's for "cannot run".
const CANNOT_RUN: u8 = 126;

/// Runs `args.program` confined; exits as it did, or 126 saying why it could not start.
pub fn run(args: SandboxExecArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return cannot(&format!("cannot start the runtime: {e}")),
    };
    runtime.block_on(confined(args)).unwrap_or_else(|reason| cannot(&reason))
}

fn cannot(reason: &str) -> ExitCode {
    eprintln!("heron sandbox-exec: {reason}");
    ExitCode::from(CANNOT_RUN)
}

async fn confined(args: SandboxExecArgs) -> Result<ExitCode, String> {
    let home = Home::at(std::path::absolute(&args.home).map_err(|e| format!("--home: {e}"))?);
    let config = Config::load(&home).map_err(|e| e.to_string())?;
    let keys = Keys::load(&home).map_err(|e| e.to_string())?;
    let roots = args
        .roots
        .iter()
        .map(|root| std::path::absolute(root).map_err(|e| format!("--root {}: {e}", root.display())))
        .collect::<Result<Vec<_>, _>>()?;
    let policy = Arc::new(Policy::from_config(&config, &home, &keys, roots));
    let (program, rest) = args.program.split_first().ok_or("no program to run")?;
    let mut command = tokio::process::Command::new(program);
    command.args(rest).process_group(0);
    sandbox::confine_kept(&mut command, &policy).await.map_err(|e| e.to_string())?;
    let mut child =
        command.spawn().map_err(|e| format!("cannot start `{}`: {e}", program.to_string_lossy()))?;
    drop(command);
    let group = child.id().and_then(|id| libc::pid_t::try_from(id).ok());
    let terminal = group.and_then(Terminal::hand_to);
    let signals = |kind| signal(kind).map_err(|e| format!("cannot handle signals: {e}"));
    let (mut interrupt, mut terminate) =
        (signals(SignalKind::interrupt())?, signals(SignalKind::terminate())?);
    let (mut hangup, mut quit) = (signals(SignalKind::hangup())?, signals(SignalKind::quit())?);
    let status = loop {
        let kind = tokio::select! {
            status = child.wait() => break status.map_err(|e| format!("waiting for the program failed: {e}"))?,
            _ = interrupt.recv() => libc::SIGINT,
            _ = terminate.recv() => libc::SIGTERM,
            _ = hangup.recv() => libc::SIGHUP,
            _ = quit.recv() => libc::SIGQUIT,
        };
        if let Some(group) = group {
            // SAFETY: kill takes plain integers; the group is the program's own.
            unsafe { libc::kill(-group, kind) };
        }
    };
    drop(terminal);
    // The session's private temp folder goes with the policy.
    drop(policy);
    Ok(exit_code(status))
}

/// The code a shell reports for `status`: the program's, or 128 + its signal.
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        (None, Some(signal)) => ExitCode::from(u8::try_from(128 + signal).unwrap_or(1)),
        (None, None) => ExitCode::FAILURE,
    }
}

/// The terminal on stdin, lent to the program's group while it runs and taken back after:
/// a background group that reads from its terminal is stopped (SIGTTIN), and Ctrl-C goes to
/// the foreground group only.
struct Terminal {
    own_group: libc::pid_t,
}

impl Terminal {
    fn hand_to(group: libc::pid_t) -> Option<Self> {
        // SAFETY: isatty, getpgrp, tcsetpgrp and kill take plain integers and touch no memory.
        unsafe {
            if libc::isatty(0) != 1 {
                return None;
            }
            let own_group = libc::getpgrp();
            // Taking the terminal back from the background later raises SIGTTOU: ignored.
            libc::signal(libc::SIGTTOU, libc::SIG_IGN);
            if libc::tcsetpgrp(0, group) != 0 {
                return None;
            }
            // It may have read before it had the terminal, and been stopped for it.
            libc::kill(-group, libc::SIGCONT);
            Some(Self { own_group })
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // SAFETY: as in `hand_to`.
        unsafe {
            libc::tcsetpgrp(0, self.own_group);
        }
    }
}
