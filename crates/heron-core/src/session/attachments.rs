//! Binary prompt content (images, blobs) saved under `<cwd>/.heron/attachments/`, so the
//! history refers to it by path instead of carrying the bytes, and read back for the model
//! and for replays. Both go through the tools' file layer: the folder must resolve inside
//! the session's cwd (a `.heron` symlink pointing elsewhere is refused, not followed), files
//! are created and opened without following symlinks, and only regular files within a cap
//! are read back, so a tool that swaps an attachment for a link, a FIFO or a device cannot
//! make the next request carry another file or hang. Runs off the async threads.
//!
//! A client shown a stored message again (a replay, the echo of an inbox item or a steer)
//! gets its files through [`read_back`], which reads them on the blocking pool.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::paths::resolve_against;
use crate::tools::fsio;
use crate::types::{PromptInput, UserContent};

/// The largest attachment read back, in bytes (a stored one that grew past it is refused).
const MAX_ATTACHMENT_BYTES: u64 = 20 * 1024 * 1024;

/// Where a session's attachments go, relative to its cwd.
const FOLDER: &str = ".heron/attachments";

/// The most bytes the attachment folder of one workspace holds. Each prompt's content is
/// bounded by its line, but what is saved stays: without a total, a client could fill the
/// disk one prompt at a time. Deleting old attachments makes room.
pub const MAX_FOLDER_BYTES: u64 = 512 * 1024 * 1024;

/// The most entries of the folder looked at to count what it holds; a folder with more is
/// full whatever their size.
const MAX_FOLDER_ENTRIES: usize = 10_000;

/// Why an attachment was not saved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachmentError {
    /// One attachment is larger than Heron keeps (it could not be read back).
    #[error("an attachment of {size} bytes is larger than the {limit} bytes Heron keeps")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The most kept, in bytes.
        limit: u64,
    },
    /// The workspace's attachment folder would pass its budget.
    #[error("the workspace's attachments ({FOLDER}) would pass {limit} bytes; delete old ones to make room")]
    Full {
        /// The folder's budget, in bytes.
        limit: u64,
    },
    /// The folder or the file could not be written.
    #[error("{0}")]
    Failed(String),
}

/// Saves the binary items of `input` and refers to each by its new path.
pub(super) async fn save(cwd: &Path, input: Vec<PromptInput>) -> Result<Vec<UserContent>, AttachmentError> {
    if !input.iter().any(|item| matches!(item, PromptInput::Attachment { .. })) {
        return Ok(input
            .into_iter()
            .filter_map(|item| match item {
                PromptInput::Content(content) => Some(content),
                PromptInput::Attachment { .. } => None,
            })
            .collect());
    }
    let cwd = cwd.to_path_buf();
    tokio::task::spawn_blocking(move || save_blocking(&cwd, input))
        .await
        .map_err(|e| AttachmentError::Failed(format!("saving attachments stopped: {e}")))?
}

/// The attachment folder of `cwd`, resolved; refused when it leads outside `cwd`.
fn folder(cwd: &Path) -> Result<PathBuf, String> {
    let cwd = std::fs::canonicalize(cwd).map_err(|e| format!("the session folder {}: {e}", cwd.display()))?;
    let dir = resolve_against(&cwd, FOLDER);
    if !dir.starts_with(&cwd) {
        return Err(format!(
            "{FOLDER} in {} leads to {}, outside the session folder; attachments are not saved through a link",
            cwd.display(),
            dir.display()
        ));
    }
    Ok(dir)
}

fn save_blocking(cwd: &Path, input: Vec<PromptInput>) -> Result<Vec<UserContent>, AttachmentError> {
    let dir = folder(cwd).map_err(AttachmentError::Failed)?;
    let mut adding = 0u64;
    for item in &input {
        if let PromptInput::Attachment { data, .. } = item {
            let size = data.len() as u64;
            if size > MAX_ATTACHMENT_BYTES {
                return Err(AttachmentError::TooLarge { size, limit: MAX_ATTACHMENT_BYTES });
            }
            adding += size;
        }
    }
    if held(&dir).is_none_or(|held| held + adding > MAX_FOLDER_BYTES) {
        return Err(AttachmentError::Full { limit: MAX_FOLDER_BYTES });
    }
    input
        .into_iter()
        .map(|item| match item {
            PromptInput::Content(content) => Ok(content),
            PromptInput::Attachment { image, mime_type, data, uri } => {
                let extension = mime_type.rsplit('/').next().filter(|e| e.chars().all(char::is_alphanumeric));
                let name = format!("{}.{}", uuid::Uuid::new_v4(), extension.unwrap_or("bin"));
                let path = dir.join(name);
                fsio::write_atomic(&path, &data).map_err(|e| AttachmentError::Failed(e.to_string()))?;
                let path = path.display().to_string();
                Ok(if image {
                    UserContent::Image { mime_type, path, uri }
                } else {
                    UserContent::Blob { uri: uri.unwrap_or_default(), mime_type: Some(mime_type), path }
                })
            }
        })
        .collect()
}

/// The bytes the folder `dir` holds in regular files; `None` when it has more than
/// [`MAX_FOLDER_ENTRIES`] entries. A folder not made yet holds nothing.
fn held(dir: &Path) -> Option<u64> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Some(0) };
    let mut total = 0u64;
    for (count, entry) in entries.enumerate() {
        if count == MAX_FOLDER_ENTRIES {
            return None;
        }
        let size = entry
            .ok()
            .and_then(|e| e.metadata().ok())
            .filter(std::fs::Metadata::is_file)
            .map_or(0, |m| m.len());
        total = total.saturating_add(size);
    }
    Some(total)
}

/// The saved files a stored user message refers to (its images and blobs), read back for
/// a client to be shown the message again: the bytes of each file that could be read, by
/// its path.
#[derive(Debug, Default)]
pub struct ReadBack(HashMap<String, Vec<u8>>);

impl ReadBack {
    /// The bytes saved at `path`; `None` when they could not be read back (the file was
    /// deleted, grew past the cap or is no longer a regular file), which the client is told.
    pub fn get(&self, path: &str) -> Option<&[u8]> {
        self.0.get(path).map(Vec::as_slice)
    }
}

/// The saved files `content` refers to.
fn saved_files(content: &[UserContent]) -> impl Iterator<Item = &str> {
    content.iter().filter_map(|item| match item {
        UserContent::Image { path, .. } | UserContent::Blob { path, .. } => Some(path.as_str()),
        UserContent::Text { .. } | UserContent::Resource { .. } | UserContent::Link { .. } => None,
    })
}

/// Whether showing `content` again reads files (an image or blob the prompt attached).
pub fn reads_files(content: &[UserContent]) -> bool {
    saved_files(content).next().is_some()
}

/// Reads back the files `content` refers to, on the blocking pool: attachments of up to
/// 20 MiB each must not hold an async thread. Content that refers to none reads nothing.
pub async fn read_back(content: &[UserContent]) -> ReadBack {
    let paths: Vec<String> = saved_files(content).map(str::to_owned).collect();
    if paths.is_empty() {
        return ReadBack::default();
    }
    let read = tokio::task::spawn_blocking(move || {
        paths
            .into_iter()
            .filter_map(|path| match read(&path) {
                Ok(bytes) => Some((path, bytes)),
                Err(reason) => {
                    tracing::debug!(%path, %reason, "an attachment cannot be read back");
                    None
                }
            })
            .collect()
    })
    .await;
    match read {
        Ok(files) => ReadBack(files),
        Err(err) => {
            tracing::warn!(%err, "reading attachments back stopped");
            ReadBack::default()
        }
    }
}

/// Reads a saved attachment back: a regular file at `path`, reached without following a
/// symlink, at most [`MAX_ATTACHMENT_BYTES`]. Blocks.
pub(super) fn read(path: &str) -> Result<Vec<u8>, String> {
    let path = Path::new(path);
    if !path.is_absolute() {
        return Err(format!("{} is not an absolute path", path.display()));
    }
    match fsio::read_capped(path, MAX_ATTACHMENT_BYTES, |_| None) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(format!("{} no longer exists", path.display())),
        Err(fsio::FileError::TooLarge { cap, .. }) => Err(format!("it is larger than {cap} bytes")),
        Err(err) => Err(err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn read_back_gives_the_saved_bytes_and_leaves_out_a_file_that_is_gone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let input = vec![
            PromptInput::Content(UserContent::Text { text: "look".into() }),
            PromptInput::Attachment {
                image: true,
                mime_type: "image/png".into(),
                data: b"png".to_vec(),
                uri: None,
            },
            PromptInput::Attachment {
                image: false,
                mime_type: "text/csv".into(),
                data: b"a,b".to_vec(),
                uri: None,
            },
        ];
        let saved = save(dir.path(), input).await.expect("saved");
        let [_, UserContent::Image { path: image, .. }, UserContent::Blob { path: blob, .. }] =
            saved.as_slice()
        else {
            panic!("text, image, blob: {saved:?}");
        };
        std::fs::remove_file(blob).expect("the blob is deleted");
        assert!(reads_files(&saved));
        let files = read_back(&saved).await;
        assert_eq!(files.get(image), Some(&b"png"[..]));
        assert_eq!(files.get(blob), None, "a deleted file is not shown");
    }

    #[tokio::test]
    async fn content_without_files_reads_nothing() {
        let content = vec![UserContent::Text { text: "hi".into() }];
        assert!(!reads_files(&content));
        assert_eq!(read_back(&content).await.0.len(), 0);
    }

    #[tokio::test]
    async fn an_attachment_grown_past_the_cap_is_not_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let input = vec![PromptInput::Attachment {
            image: true,
            mime_type: "image/png".into(),
            data: b"png".to_vec(),
            uri: None,
        }];
        let saved = save(dir.path(), input).await.expect("saved");
        let [UserContent::Image { path, .. }] = saved.as_slice() else { panic!("an image: {saved:?}") };
        let file = std::fs::OpenOptions::new().write(true).open(path).expect("open");
        // Sparse: the size is what the cap is about, not what is on the disk.
        file.set_len(MAX_ATTACHMENT_BYTES).expect("grow");
        assert_eq!(read(path).map(|bytes| bytes.len() as u64), Ok(MAX_ATTACHMENT_BYTES), "at the cap");
        file.set_len(MAX_ATTACHMENT_BYTES + 1).expect("grow");
        let refused = read(path).expect_err("past the cap");
        assert!(refused.contains("larger than 20971520 bytes"), "{refused}");
        assert_eq!(read_back(&saved).await.get(path), None, "the client is told it is missing");
    }
}
