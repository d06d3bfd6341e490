//! The readable transcript of a session (`HERON_HOME/transcripts/<id>.jsonl`, one stored
//! event per line), named in every prompt answer. The first write in a process writes the
//! whole history (a temp file, then a rename); after that each recorded event is appended,
//! from the same JSON text the store was given, so a long message is not encoded twice.
//! All of it runs off the async threads.

use std::sync::Arc;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::session::event::Event;

/// Where a session's transcript is written.
pub fn transcript_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{}.jsonl", safe_name(id)))
}

/// `id` made fit for a file name: session and call ids are Heron's own or a model's, but a
/// name is never trusted to stay inside its directory.
pub(in crate::session) fn safe_name(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}

/// Keeps one session's transcript in step with its history. The default writes nowhere.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    path: Option<PathBuf>,
    /// How many events of the history the file holds; `None` until it was first written.
    written: Option<usize>,
}

impl Transcript {
    pub(in crate::session) fn new(dir: &Path, id: &str) -> Self {
        Self { path: Some(transcript_path(dir, id)), written: None }
    }

    /// Where the transcript is written, when it is.
    pub(in crate::session) fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Adds the event `line` (its JSON) that follows `history`. A failure is logged: the
    /// store, not the transcript, is the record.
    pub(in crate::session) async fn append(&mut self, history: &[Event], line: Arc<str>) {
        if self.written == Some(history.len()) {
            let text = line;
            self.write(
                false,
                move |file| {
                    file.write_all(text.as_bytes())?;
                    file.write_all(b"\n")
                },
                history.len() + 1,
            )
            .await;
        } else {
            let mut text = whole(history);
            text.push_str(&line);
            text.push('\n');
            self.write(true, move |file| file.write_all(text.as_bytes()), history.len() + 1).await;
        }
    }

    /// Adds the event `lines` (their JSON, in order) that follow `history`. Each line is
    /// written from the text the store was given, never joined into one: a long message
    /// is stored as many 1 MiB pieces, and joining them held the whole message once more
    /// (twice while the joined text grew) at the end of the turn.
    pub(in crate::session) async fn append_all(&mut self, history: &[Event], lines: Vec<Arc<str>>) {
        let holds = history.len() + lines.len();
        let before = if self.written == Some(history.len()) { String::new() } else { whole(history) };
        let replace_file = self.written != Some(history.len());
        let body = move |file: &mut std::fs::File| {
            // Small lines go out together; a large one passes the buffer and is written as is.
            let mut out = std::io::BufWriter::with_capacity(64 * 1024, file);
            out.write_all(before.as_bytes())?;
            for line in &lines {
                out.write_all(line.as_bytes())?;
                out.write_all(b"\n")?;
            }
            out.flush()
        };
        self.write(replace_file, body, holds).await;
    }

    /// Writes the whole of `history` if the file does not hold it yet.
    pub(in crate::session) async fn sync(&mut self, history: &[Event]) {
        if self.written == Some(history.len()) {
            return;
        }
        let text = whole(history);
        self.write(true, move |file| file.write_all(text.as_bytes()), history.len()).await;
    }

    async fn write(
        &mut self,
        replace_file: bool,
        body: impl FnOnce(&mut std::fs::File) -> std::io::Result<()> + Send + 'static,
        holds: usize,
    ) {
        let Some(path) = self.path.clone() else { return };
        let written = tokio::task::spawn_blocking(move || {
            if replace_file { replace(&path, body) } else { append(&path, body) }
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|written| written);
        match written {
            Ok(()) => self.written = Some(holds),
            Err(err) => {
                // The next event writes the whole file again.
                self.written = None;
                let shown = self.path.as_deref().map(Path::display);
                tracing::warn!(%err, path = ?shown, "cannot write the transcript");
            }
        }
    }
}

/// Every event of `history`, one JSON line each.
fn whole(history: &[Event]) -> String {
    let mut text = String::new();
    for event in history {
        if let Ok(line) = serde_json::to_string(event) {
            text.push_str(&line);
            text.push('\n');
        }
    }
    text
}

fn replace(path: &Path, body: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let temp = path.with_extension("jsonl.tmp");
    let mut file = std::fs::File::create(&temp)?;
    body(&mut file)?;
    drop(file);
    std::fs::rename(&temp, path)
}

fn append(path: &Path, body: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().append(true).create(true).open(path)?;
    body(&mut file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::StopReason;

    fn ended() -> Event {
        Event::TurnEnded { stop_reason: StopReason::EndTurn }
    }

    fn line(event: &Event) -> Arc<str> {
        serde_json::to_string(event).expect("encodes").into()
    }

    #[tokio::test]
    async fn the_first_write_is_whole_and_later_events_are_appended() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = transcript_path(dir.path(), "s1");
        let mut transcript = Transcript::new(dir.path(), "s1");
        std::fs::write(&path, "stale\n").expect("an old file");
        let mut history = vec![ended()];
        transcript.append(&history, line(&ended())).await;
        history.push(ended());
        // A line no event wrote: a write that rewrote the file from the history would lose it.
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).expect("open");
        file.write_all(b"sentinel\n").expect("sentinel");
        drop(file);
        transcript.append(&history, line(&ended())).await;
        history.push(ended());
        transcript.append_all(&history, vec![line(&ended()), line(&ended())]).await;
        history.extend([ended(), ended()]);
        transcript.sync(&history).await;
        let text = std::fs::read_to_string(&path).expect("written");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6, "five events and the sentinel: {text}");
        assert_eq!(lines[2], "sentinel", "later events are appended after what the file holds: {text}");
        assert!(!text.contains("stale"), "the first write replaces an old file: {text}");
    }

    #[test]
    fn an_id_cannot_leave_the_directory() {
        assert_eq!(transcript_path(Path::new("/t"), "../../etc/x"), PathBuf::from("/t/______etc_x.jsonl"));
    }
}
