//! The `heron` binary.

use std::process::ExitCode;

use clap::Parser;
use heron::cli::{Cli, Command, init_logging};

fn main() -> ExitCode {
    malloc_settings();
    // Before any key is read: the commands Heron starts must not read its memory or its
    // environment through /proc.
    heron_core::sandbox::keep_this_process_private();
    // Commands sent to an editor's terminal run through this binary's `sandbox-exec`.
    if let Ok(program) = std::env::current_exe() {
        heron_core::sandbox::launcher::set(program);
    }
    let cli = Cli::parse_from(single_dash_cwd(std::env::args_os()));
    if let Command::SandboxExec(args) = cli.command {
        return heron::cli::sandbox_exec::run(args);
    }
    if let Command::Run(args) = cli.command {
        return run(args);
    }
    if let Command::Conformance(args) = cli.command {
        return heron::cli::conformance::run(args);
    }
    if let Command::Doctor(args) = cli.command {
        return heron::cli::doctor::run(args);
    }
    if let Command::Models(args) = cli.command {
        return heron::cli::models::run(args);
    }
    if let Command::ModelServer(args) = cli.command {
        return heron::cli::model_server::run(args);
    }
    if let Command::Manifest(args) = cli.command {
        return heron::cli::manifest::run(args);
    }
    acp_or_setup(cli)
}

/// Accepts `-cwd DIR` (and `-cwd=DIR`), the spelling other agents' launchers use, as
/// `--cwd`: clap takes long options with two dashes only.
fn single_dash_cwd(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    args.map(|arg| match arg.to_str() {
        Some("-cwd") => "--cwd".into(),
        Some(text) if text.starts_with("-cwd=") => format!("-{text}").into(),
        _ => arg,
    })
    .collect()
}

/// glibc gives each thread that allocates its own arena, up to eight per core, and memory
/// freed in one arena is not reused by another: a long reply streamed by one thread and
/// written by another left its peak at 50 to 58 MiB for 20 MiB of text, against 40 with one
/// arena (`BENCHMARKS.md`). Heron's threads mostly wait on I/O, and the per-thread caches in
/// front of the arena take the small allocations, so one arena costs no measurable speed.
///
/// Blocks of 128 KiB and more are mapped on their own and given back when freed. glibc
/// would otherwise raise that threshold to the size of the largest block freed so far (up
/// to 32 MiB), after which the 1 MiB pieces of a long reply and the copies made to store
/// them come from the heap, where what is freed between pieces that stay is kept, never
/// returned: 2 MiB more at the peak of a 20 MiB reply (`BENCHMARKS.md`). Fixing it also
/// keeps the heap's trim threshold at its 128 KiB default.
/// Called first, before any thread exists.
fn malloc_settings() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator settings; no thread has been started yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// The async runtime of `heron acp` and `heron run`, with two worker threads whatever the
/// machine: Heron's tasks mostly wait (on the editor, the model, child processes), and the
/// work that blocks (SQLite, file tools, stdin and stdout) runs on the blocking pool, so
/// more workers would only cost threads and start-up time on a large machine. Two, not
/// one, so that a handler busy on the CPU (encoding a long reply, a diff) never holds up
/// the reader: cancels and the editor's answers still get through (DESIGN.md, invariant 2).
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(|err| {
        eprintln!("heron: cannot start the async runtime: {err}");
        ExitCode::FAILURE
    })
}

fn run(args: heron::cli::run::RunArgs) -> ExitCode {
    init_logging();
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    // It says its own errors, then how to continue the session.
    let status = runtime.block_on(heron::cli::run::run(args));
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    ExitCode::from(status)
}

fn acp_or_setup(cli: Cli) -> ExitCode {
    if matches!(&cli.command, Command::Acp(args) if !args.setup) {
        // The `initialize` answer reports what the sandbox can do here: what the probe found
        // the last time in this same state, remembered in the home; else the probe, started
        // now on its own thread, overlapping the start and the request.
        let home = heron_core::config::Home::from_env().ok();
        heron_core::sandbox::prepare(home.as_ref().map(heron_core::config::Home::root));
    }
    init_logging();
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            // The terminal auth method relaunches `heron acp` with `--setup`.
            Command::Acp(args) if args.setup => setup(heron::cli::setup::SetupArgs::default()).map(|()| {
                // Run in the editor's terminal: the agent it started reads the new setup on its
                // next session, so nothing needs a restart.
                eprintln!("heron: setup is done; go back to your editor and continue (no restart needed)");
            }),
            Command::Acp(args) => heron::cli::acp::run(args).await.map_err(|e| e.to_string()),
            Command::Setup(args) => setup(args),
            Command::Run(_) => Err("unreachable: run is handled before".to_owned()),
            Command::Conformance(_) => Err("unreachable: conformance is handled before".to_owned()),
            Command::Doctor(_)
            | Command::Models(_)
            | Command::ModelServer(_)
            | Command::Manifest(_)
            | Command::SandboxExec(_) => {
                Err("unreachable: doctor, models, model-server, manifest and sandbox-exec are handled before"
                    .to_owned())
            }
        }
    });
    // Handler tasks still running at EOF are not waited for: stdin is gone.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(%err, "heron stopped");
            eprintln!("heron: {err}");
            ExitCode::FAILURE
        }
    }
}

fn setup(args: heron::cli::setup::SetupArgs) -> Result<(), String> {
    let home = heron_core::config::Home::from_env().map_err(|e| e.to_string())?;
    let stdin = std::io::stdin();
    heron::cli::setup::run(&home, args, &mut stdin.lock()).map_err(|e| e.to_string())
}
