//! `heron model-server`: the conformance kit's scripted model served on 127.0.0.1 as the
//! OpenAI Chat Completions and Responses, Anthropic Messages and Gemini APIs, for pointing another agent at a
//! model that needs no network and no key (see docs/conformance.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use heron_core::llm::scripted::Script;

/// Arguments of `heron model-server`.
#[derive(Debug, Args)]
pub struct ModelServerArgs {
    /// The script to play (the scripted provider's format); the built-in demo without one.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Where to listen; a port of 0 picks a free one. Only loopback addresses are taken.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Stop once the process PID has ended: a recipe's agent, whose server this is, so the
    /// server never outlives it even where no pid namespace ends them together.
    #[arg(long, value_name = "PID")]
    pub exit_with: Option<u32>,
}

/// Serves until killed; prints `http://ADDR` on its first line once it listens.
pub fn run(args: ModelServerArgs) -> ExitCode {
    if !args.listen.ip().is_loopback() {
        eprintln!(
            "heron model-server: {} is not a loopback address; it serves 127.0.0.1 or ::1 only",
            args.listen
        );
        return ExitCode::from(2);
    }
    let script = match &args.script {
        Some(path) => Script::from_path(path),
        None => Script::parse(heron_core::llm::scripted::DEMO_SCRIPT),
    };
    let script = match script {
        Ok(script) => script,
        Err(error) => {
            eprintln!("heron model-server: {error}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("heron model-server: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(args.listen).await {
            Ok(listener) => listener,
            Err(error) => {
                eprintln!("heron model-server: cannot listen on {}: {error}", args.listen);
                return ExitCode::FAILURE;
            }
        };
        let address = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
        if super::write_stdout(&format!("http://{address}\n")).is_err() {
            return ExitCode::FAILURE;
        }
        let served = heron_conformance::model_server::serve(listener, script);
        match args.exit_with {
            Some(pid) => tokio::select! {
                () = served => {}
                () = ended(pid) => {}
            },
            None => served.await,
        }
        ExitCode::SUCCESS
    })
}

/// Resolves once process `pid` is gone (polled: it is not this process's child).
async fn ended(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return };
    loop {
        // SAFETY: signal 0 only asks whether the process exists; nothing is sent.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
