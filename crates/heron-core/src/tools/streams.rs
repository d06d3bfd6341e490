//! What reading a child process's output needs wherever the child runs (a tool's command, a
//! terminal `heron run` serves): each stream redacted as it arrives, into a sink that keeps
//! what it wants of it, and the names of the signals that end processes.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::secret::StreamRedactor;

/// Where a stream's redacted bytes go (it decides what to keep: a head and tail, a cap).
pub trait OutputSink: Send + 'static {
    /// Takes the next redacted bytes.
    fn push(&mut self, bytes: &[u8]);
}

/// Reads `stream` to its end into `output`, redacted as it comes. Each stream has its own
/// redactor, so a key printed whole on one of them is caught however the reads of stdout and
/// stderr interleave.
pub async fn collect_redacted<S: OutputSink>(
    mut stream: Box<dyn AsyncRead + Send + Unpin>,
    mut redactor: StreamRedactor,
    output: Arc<Mutex<S>>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    while let Ok(n) = stream.read(&mut buffer).await {
        if n == 0 {
            break;
        }
        let shown = redactor.push_bytes(&buffer[..n]);
        output.lock().unwrap_or_else(PoisonError::into_inner).push(&shown);
    }
    let rest = redactor.finish();
    output.lock().unwrap_or_else(PoisonError::into_inner).push(rest.as_bytes());
}

/// The usual name of a signal that ended a process (`SIGKILL`), else `signal N`.
pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => return format!("signal {signal}"),
    };
    name.to_owned()
}
