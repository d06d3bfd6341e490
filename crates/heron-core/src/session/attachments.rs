//! Binary prompt content (images, blobs) saved under `<cwd>/.heron/attachments/`, so the
//! history refers to it by path instead of carrying the bytes, and read back for the model
//! and for replays. Both go through the tools' file layer: the folder must resolve inside
//! the session's cwd (a `.heron` symlink pointing elsewhere is refused, not followed), files
//! are created and opened without following symlinks, and only regular files within a cap
//! are read back, so a tool that swaps an attachment for a link, a FIFO or a device cannot
//! make the next request carry another file or hang. Runs off the async threads.

use std::path::{Path, PathBuf};

use crate::tools::fsio;
use crate::tools::roots::resolve_against;
use crate::types::{PromptInput, UserContent};

/// The largest attachment read back, in bytes (a stored one that grew past it is refused).
pub const MAX_ATTACHMENT_BYTES: u64 = 20 * 1024 * 1024;

/// Where a session's attachments go, relative to its cwd.
const FOLDER: &str = ".heron/attachments";

/// Saves the binary items of `input` and refers to each by its new path.
pub(super) async fn save(cwd: &Path, input: Vec<PromptInput>) -> Result<Vec<UserContent>, String> {
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
        .map_err(|e| format!("saving attachments stopped: {e}"))?
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

fn save_blocking(cwd: &Path, input: Vec<PromptInput>) -> Result<Vec<UserContent>, String> {
    let dir = folder(cwd)?;
    input
        .into_iter()
        .map(|item| match item {
            PromptInput::Content(content) => Ok(content),
            PromptInput::Attachment { image, mime_type, data, uri } => {
                let extension = mime_type.rsplit('/').next().filter(|e| e.chars().all(char::is_alphanumeric));
                let name = format!("{}.{}", uuid::Uuid::new_v4(), extension.unwrap_or("bin"));
                let path = dir.join(name);
                fsio::write_atomic(&path, &data).map_err(|e| e.to_string())?;
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

/// Reads a saved attachment back: a regular file at `path`, reached without following a
/// symlink, at most [`MAX_ATTACHMENT_BYTES`]. Blocks.
pub fn read(path: &str) -> Result<Vec<u8>, String> {
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
