//! The readable transcript of a session (`HERON_HOME/transcripts/<id>.jsonl`, one stored
//! event per line), named in every prompt answer. The first write in a process writes the
//! whole history (a temp file, then a rename); later turns append only their own events.
//! All of it runs off the async threads.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::event::Event;

/// Where a session's transcript is written.
pub fn transcript_path(dir: &Path, id: &str) -> PathBuf {
    // Session ids are Heron's own UUIDs, but never trust a name to stay inside the directory.
    let safe: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    dir.join(format!("{safe}.jsonl"))
}

/// Keeps one session's transcript in step with its history.
#[derive(Debug)]
pub(super) struct Transcript {
    path: PathBuf,
    /// How many events of the history the file holds; `None` until it was first written.
    written: Option<usize>,
}

impl Transcript {
    pub(super) fn new(dir: &Path, id: &str) -> Self {
        Self { path: transcript_path(dir, id), written: None }
    }

    /// Writes what the file lacks of `history`. A failure is logged: the store, not the
    /// transcript, is the record.
    pub(super) async fn sync(&mut self, history: &[Event]) {
        let from = self.written.unwrap_or(0).min(history.len());
        let whole = self.written.is_none();
        let mut text = String::new();
        for event in &history[from..] {
            if let Ok(line) = serde_json::to_string(event) {
                text.push_str(&line);
                text.push('\n');
            }
        }
        let path = self.path.clone();
        let written =
            tokio::task::spawn_blocking(
                move || {
                    if whole { replace(&path, &text) } else { append(&path, &text) }
                },
            )
            .await
            .map_err(std::io::Error::other)
            .and_then(|written| written);
        match written {
            Ok(()) => self.written = Some(history.len()),
            Err(err) => {
                // The next turn writes the whole file again.
                self.written = None;
                tracing::warn!(%err, path = %self.path.display(), "cannot write the transcript");
            }
        }
    }
}

fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let temp = path.with_extension("jsonl.tmp");
    std::fs::write(&temp, text)?;
    std::fs::rename(&temp, path)
}

fn append(path: &Path, text: &str) -> std::io::Result<()> {
    if text.is_empty() {
        return Ok(());
    }
    let mut file = std::fs::OpenOptions::new().append(true).create(true).open(path)?;
    file.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::StopReason;

    fn ended() -> Event {
        Event::TurnEnded { stop_reason: StopReason::EndTurn }
    }

    #[tokio::test]
    async fn the_first_write_is_whole_and_later_turns_append_their_events() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut transcript = Transcript::new(dir.path(), "s1");
        std::fs::write(transcript_path(dir.path(), "s1"), "stale\n").expect("an old file");
        let mut history = vec![ended()];
        transcript.sync(&history).await;
        history.push(ended());
        history.push(ended());
        transcript.sync(&history).await;
        let text = std::fs::read_to_string(transcript_path(dir.path(), "s1")).expect("written");
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(!text.contains("stale"));
    }

    #[test]
    fn an_id_cannot_leave_the_directory() {
        assert_eq!(transcript_path(Path::new("/t"), "../../etc/x"), PathBuf::from("/t/______etc_x.jsonl"));
    }
}
