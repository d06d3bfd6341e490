//! The end of an MCP server's stderr, read within a budget: fixed-size chunks, each line cut
//! at [`MAX_LINE`] bytes (the cut marked), only the last [`KEPT_LINES`] lines kept. A server
//! that writes one endless line or floods its stderr costs Heron a few KiB, not its output.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt};

/// How much of the pipe one read takes.
const CHUNK: usize = 8 * 1024;
/// The longest line kept, in bytes; the rest of a longer line is dropped.
pub(super) const MAX_LINE: usize = 4 * 1024;
/// How many of the last lines are kept.
pub(super) const KEPT_LINES: usize = 20;
/// Ends a line that was cut at [`MAX_LINE`].
pub(super) const CUT: &str = " [cut]";

/// The last lines of a stream, and the line still being written.
#[derive(Debug, Default)]
pub(super) struct Tail {
    lines: VecDeque<String>,
    current: Vec<u8>,
    /// The current line passed [`MAX_LINE`]: what follows until its newline is dropped.
    cut: bool,
}

impl Tail {
    /// Takes the next bytes of the stream; returns the lines they finished.
    fn push(&mut self, mut bytes: &[u8]) -> Vec<String> {
        let mut finished = Vec::new();
        while !bytes.is_empty() {
            let (part, ended) = match bytes.iter().position(|b| *b == b'\n') {
                Some(at) => (&bytes[..at], true),
                None => (bytes, false),
            };
            let room = MAX_LINE.saturating_sub(self.current.len());
            if part.len() > room {
                self.cut = true;
            }
            self.current.extend_from_slice(&part[..part.len().min(room)]);
            bytes = if ended { &bytes[part.len() + 1..] } else { &[] };
            if ended {
                finished.push(self.finish());
            }
        }
        finished
    }

    /// Ends the current line and keeps it, dropping the oldest beyond [`KEPT_LINES`].
    fn finish(&mut self) -> String {
        let mut line = String::from_utf8_lossy(&self.current).trim_end_matches('\r').to_owned();
        if std::mem::take(&mut self.cut) {
            line.push_str(CUT);
        }
        self.current.clear();
        if self.lines.len() == KEPT_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line.clone());
        line
    }

    /// The stream ended: a last line without its newline still counts.
    fn end(&mut self) -> Option<String> {
        (!self.current.is_empty() || self.cut).then(|| self.finish())
    }

    /// The kept lines, oldest first.
    pub(super) fn lines(&self) -> Vec<String> {
        self.lines.iter().cloned().collect()
    }
}

/// Reads `stream` to its end into `tail`, logging each line at debug level.
pub(super) async fn read(mut stream: impl AsyncRead + Unpin, server: String, tail: Arc<Mutex<Tail>>) {
    let mut chunk = vec![0u8; CHUNK];
    let log = |lines: Vec<String>| lines.iter().for_each(|line| tracing::debug!(%server, "{line}"));
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let finished = tail.lock().unwrap_or_else(PoisonError::into_inner).push(&chunk[..n]);
        log(finished);
    }
    let last = tail.lock().unwrap_or_else(PoisonError::into_inner).end();
    log(last.into_iter().collect());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_chunks_are_joined() {
        let mut tail = Tail::default();
        assert!(tail.push(b"hel").is_empty());
        assert_eq!(tail.push(b"lo\r\nwor"), ["hello"]);
        assert_eq!(tail.end().as_deref(), Some("wor"));
        assert_eq!(tail.lines(), ["hello", "wor"]);
    }

    #[test]
    fn a_long_line_is_cut_and_marked_and_the_next_line_is_whole() {
        let mut tail = Tail::default();
        for _ in 0..100 {
            tail.push(&[b'x'; 1000]);
        }
        tail.push(b"\nnext\n");
        let lines = tail.lines();
        assert_eq!(lines[0], format!("{}{CUT}", "x".repeat(MAX_LINE)));
        assert_eq!(lines[1], "next");
    }

    #[test]
    fn only_the_last_lines_are_kept() {
        let mut tail = Tail::default();
        for i in 0..100 {
            tail.push(format!("line {i}\n").as_bytes());
        }
        let lines = tail.lines();
        assert_eq!(lines.len(), KEPT_LINES);
        assert_eq!(lines.first().map(String::as_str), Some("line 80"));
        assert_eq!(lines.last().map(String::as_str), Some("line 99"));
    }
}
