//! The writer task: the only code that writes to the output. It takes encoded lines from a
//! bounded queue (`outbox`) and writes each as one line plus LF, flushing once the queue is drained.
//!
//! Stopping: when `stop` fires, the writer writes what is already queued and flushes,
//! giving up after `flush_timeout` so a peer that stopped reading cannot hold shutdown.
//! A write error ends the writer and fires `closed`, which closes the connection.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::outbox::Queued;

/// Writes queued lines until `stop` fires or every sender is gone.
pub(crate) async fn run<W: AsyncWrite + Unpin>(
    output: W,
    mut queue: mpsc::Receiver<Queued>,
    stop: CancellationToken,
    closed: CancellationToken,
    flush_timeout: Duration,
) -> io::Result<()> {
    let mut output = BufWriter::new(output);
    let result = write_until_stopped(&mut output, &mut queue, &stop, flush_timeout).await;
    let result = match result {
        Ok(()) => drain(&mut output, &mut queue, flush_timeout).await,
        Err(err) => Err(err),
    };
    if let Err(err) = &result {
        tracing::warn!(%err, "output failed; closing the connection");
    }
    // Either way nothing more will be written, so senders must fail from now on.
    queue.close();
    closed.cancel();
    result
}

async fn write_until_stopped<W: AsyncWrite + Unpin>(
    output: &mut BufWriter<W>,
    queue: &mut mpsc::Receiver<Queued>,
    stop: &CancellationToken,
    flush_timeout: Duration,
) -> io::Result<()> {
    loop {
        let line = tokio::select! {
            biased;
            line = queue.recv() => match line {
                Some(line) => line,
                None => return Ok(()),
            },
            () = stop.cancelled() => return Ok(()),
        };
        let batch = write_batch(output, queue, line);
        // A write in progress when `stop` fires gets `flush_timeout` more to finish.
        let deadline = async {
            stop.cancelled().await;
            tokio::time::sleep(flush_timeout).await;
        };
        tokio::select! {
            result = batch => result?,
            () = deadline => return Err(timed_out()),
        }
    }
}

/// Writes `first` and whatever else is queued, then flushes once.
async fn write_batch<W: AsyncWrite + Unpin>(
    output: &mut BufWriter<W>,
    queue: &mut mpsc::Receiver<Queued>,
    first: Queued,
) -> io::Result<()> {
    write_line(output, first).await?;
    while let Ok(line) = queue.try_recv() {
        write_line(output, line).await?;
    }
    output.flush().await
}

/// Writes one line; its share of the byte budget is given back once it is written.
async fn write_line<W: AsyncWrite + Unpin>(output: &mut BufWriter<W>, queued: Queued) -> io::Result<()> {
    output.write_all(queued.line.as_bytes()).await?;
    output.write_all(b"\n").await
}

/// Writes what is already queued, bounded by `flush_timeout`.
async fn drain<W: AsyncWrite + Unpin>(
    output: &mut BufWriter<W>,
    queue: &mut mpsc::Receiver<Queued>,
    flush_timeout: Duration,
) -> io::Result<()> {
    let work = async {
        while let Ok(line) = queue.try_recv() {
            write_line(output, line).await?;
        }
        output.flush().await
    };
    tokio::time::timeout(flush_timeout, work).await.unwrap_or_else(|_| Err(timed_out()))
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the peer stopped reading the output")
}
