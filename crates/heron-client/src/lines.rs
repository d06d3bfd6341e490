//! Splits a byte stream from outside (the agent's stderr, answers typed or piped on stdin)
//! into lines of bounded length. Invariant: memory held is at most one line's cap, whatever
//! arrives; a longer line is cut and marked, never buffered whole.

/// Lines split from pieces of a stream, each at most `cap` bytes (then marked `…`).
#[derive(Debug)]
pub struct BoundedLines {
    cap: usize,
    line: Vec<u8>,
    cut: bool,
}

impl BoundedLines {
    /// A splitter keeping at most `cap` bytes of each line.
    pub fn new(cap: usize) -> Self {
        Self { cap, line: Vec::new(), cut: false }
    }

    /// Takes the next piece; returns the lines it completed, without their newline (a
    /// carriage return before it is dropped too).
    pub fn push(&mut self, piece: &[u8]) -> Vec<String> {
        let mut done = Vec::new();
        for part in piece.split_inclusive(|&b| b == b'\n') {
            let (body, ended) = match part.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (part, false),
            };
            let room = self.cap.saturating_sub(self.line.len());
            self.line.extend_from_slice(&body[..room.min(body.len())]);
            self.cut |= body.len() > room;
            if ended {
                done.push(self.take());
            }
        }
        done
    }

    /// The last line, when the stream ended without a newline.
    pub fn finish(&mut self) -> Option<String> {
        (!self.line.is_empty() || self.cut).then(|| self.take())
    }

    fn take(&mut self) -> String {
        let mut bytes = std::mem::take(&mut self.line);
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if std::mem::take(&mut self.cut) {
            text.push('…');
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_across_pieces_and_cut_at_the_cap() {
        let mut lines = BoundedLines::new(4);
        assert_eq!(lines.push(b"ab"), Vec::<String>::new());
        assert_eq!(lines.push(b"c\r\nabcdefgh\nx"), ["abc", "abcd…"]);
        assert_eq!(lines.finish().as_deref(), Some("x"));
        assert_eq!(lines.finish(), None);
    }
}
