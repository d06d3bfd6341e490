//! Binary prompt content (images, blobs) saved under `<cwd>/.heron/attachments/`, so the
//! history refers to it by path instead of carrying the bytes. Written off the async
//! threads, since an attachment can be large.

use std::path::{Path, PathBuf};

use crate::types::{PromptInput, UserContent};

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
    let dir = cwd.join(".heron").join("attachments");
    tokio::task::spawn_blocking(move || save_blocking(&dir, input))
        .await
        .map_err(|e| format!("saving attachments stopped: {e}"))?
}

fn save_blocking(dir: &PathBuf, input: Vec<PromptInput>) -> Result<Vec<UserContent>, String> {
    input
        .into_iter()
        .map(|item| match item {
            PromptInput::Content(content) => Ok(content),
            PromptInput::Attachment { image, mime_type, data, uri } => {
                std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
                let extension = mime_type.rsplit('/').next().filter(|e| e.chars().all(char::is_alphanumeric));
                let name = format!("{}.{}", uuid::Uuid::new_v4(), extension.unwrap_or("bin"));
                let path = dir.join(name);
                std::fs::write(&path, &data).map_err(|e| e.to_string())?;
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
