//! How the file tools read and write: through the editor when it offers it and the file is
//! plain UTF-8 (so unsaved buffers are seen and edits land in them), locally otherwise.
//! Invariants: a file's encoding survives a round trip; Latin-1 and BOM files never pass
//! through the editor for writing, because an editor may not keep their bytes; when the
//! editor cannot read a file it was asked for, its message reaches the model, and no change
//! is worked out against the disk copy in its place (the editor may hold unsaved text the
//! disk does not, which the write would silently overwrite). A file with other names (hard
//! links) is never written through the editor, which writes in place and so through every
//! name: it is replaced by a rename, and the other names keep the old text.

use std::path::Path;

use super::ToolEnv;
use super::fsio::{self, FileError};
use super::text::{self, Decoded, Encoding};

/// The largest file read whole into memory.
pub(crate) const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The largest file a tool writes: what the tools could not read back whole they do not
/// make either, and a change is refused before its text is built past it.
pub(crate) const MAX_WRITE_BYTES: u64 = MAX_FILE_BYTES;

/// A file's current text, from wherever it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loaded {
    /// The text; `None` when the file does not exist.
    pub text: Option<String>,
    /// The encoding to write it back in.
    pub encoding: Encoding,
    /// Whether reads and writes of this file go through the editor.
    pub via_editor: bool,
    /// How many names (hard links) the file had when read; 1 for a new file.
    pub links: u64,
}

/// A change worked out before it is made: what the file holds now and what it will hold,
/// so the user approves the exact text that will be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedChange {
    /// The file (resolved).
    pub(crate) path: std::path::PathBuf,
    /// What it held when the change was worked out.
    pub(crate) loaded: Loaded,
    /// What it will hold.
    pub(crate) new_text: String,
    /// What the model is told about how the text was adapted (line endings, encoding).
    pub(crate) notes: Vec<&'static str>,
}

impl PlannedChange {
    /// The change as the user sees it: whole while small, else its changed lines
    /// (`shown_diff`).
    pub(crate) fn shown(&self) -> super::shown_diff::Shown {
        super::shown_diff::show(&self.path.display().to_string(), self.loaded.text.as_deref(), &self.new_text)
    }

    /// `prepared`, now showing this change (scrubbed of keys) and carrying it to the run.
    /// A change whose changed lines are too many to show is not offered for approval: the
    /// user would approve what they could not see.
    pub(crate) fn shown_in(
        self,
        mut prepared: super::Prepared,
        env: &ToolEnv,
    ) -> Result<super::Prepared, String> {
        let shown = self.shown();
        if !shown.whole {
            return Err(format!(
                "The change to {} is too large to show for approval: {} changed lines ({} bytes with their \
                 context) are more than the {} bytes a permission request shows. Nothing was changed. Make \
                 the change in smaller steps (several edit_file calls, or the file written in parts).",
                super::call::shown(env, &self.path),
                shown.hidden_lines,
                shown.changed_bytes,
                super::shown_diff::MAX_SHOWN_DIFF_BYTES
            ));
        }
        prepared.content = shown.outputs;
        if self.loaded.links > 1 {
            // What the user approves must say that only this name changes.
            prepared.content.insert(
                0,
                crate::types::ToolOutput::Text {
                    text: format!(
                        "Note: {} has {} names (hard links). The write replaces this name only; the \
                     other names keep the old text.",
                        super::call::shown(env, &self.path),
                        self.loaded.links
                    ),
                },
            );
        }
        super::call::scrub_outputs(env, &mut prepared.content);
        prepared.planned = Some(self);
        Ok(prepared)
    }

    /// The change a write makes: the one its preview showed, if the file still holds what
    /// it was shown against; else (no preview ran) the one `fresh` works out now.
    pub(crate) async fn to_make(
        previewed: Option<PlannedChange>,
        env: &ToolEnv,
        fresh: impl std::future::Future<Output = Result<PlannedChange, String>>,
    ) -> Result<PlannedChange, String> {
        match previewed {
            Some(planned) => planned.still_current(env).await.map(|()| planned),
            None => fresh.await,
        }
    }

    /// Fails unless the file still holds what the user was shown the change against.
    pub(crate) async fn still_current(&self, env: &ToolEnv) -> Result<(), String> {
        let now = read_for_change(env, &self.path).await?;
        if now.text == self.loaded.text {
            return Ok(());
        }
        Err(format!(
            "{} changed after the change was shown for approval; nothing was written. Read it again \
             and make the change anew.",
            self.path.display()
        ))
    }
}

/// What the local disk holds at a path.
enum OnDisk {
    Missing,
    Text(Decoded),
}

async fn read_disk(env: &ToolEnv, path: &Path) -> Result<OnDisk, String> {
    read_disk_linked(env, path).await.map(|(disk, _)| disk)
}

/// [`read_disk`], with how many names (hard links) the opened file has.
async fn read_disk_linked(env: &ToolEnv, path: &Path) -> Result<(OnDisk, u64), String> {
    let owned = path.to_path_buf();
    let roots = env.roots.clone();
    let read = tokio::task::spawn_blocking(move || {
        let links = std::cell::Cell::new(1);
        let read = fsio::read_capped(&owned, MAX_FILE_BYTES, |meta| {
            links.set(std::os::unix::fs::MetadataExt::nlink(meta));
            fsio::other_name_refusal(roots.protected(), meta, &owned)
        });
        read.map(|bytes| (bytes, links.get()))
    })
    .await
    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let (bytes, links) = match read {
        Ok((Some(bytes), links)) => (bytes, links),
        Ok((None, _)) => return Ok((OnDisk::Missing, 1)),
        Err(FileError::Directory(shown)) => {
            return Err(format!("{shown} is a directory; use list_files to see what it holds"));
        }
        Err(err) => return Err(err.to_string()),
    };
    match text::decode(bytes) {
        Ok(decoded) => Ok((OnDisk::Text(decoded), links)),
        Err(text::Binary) => Err(format!(
            "{} is a binary file (it contains NUL bytes); tools only read and edit text",
            path.display()
        )),
    }
}

/// A file's text for showing, and what the model must be told about where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Viewed {
    /// The text and its encoding.
    pub decoded: Decoded,
    /// Set when the editor could not read the file and the disk copy is shown instead:
    /// the editor's message, and that an unsaved buffer may differ.
    pub note: Option<String>,
}

/// Reads a file for showing: through the editor when it reads files and the disk copy is
/// UTF-8 or missing; locally otherwise (Latin-1 decoded). `Ok(None)` when it does not exist.
/// When the editor fails the read, the disk copy is shown with a note saying so: it is
/// still the best view of the file there is, as long as the model knows what it is.
pub(crate) async fn read_for_view(env: &ToolEnv, path: &Path) -> Result<Option<Viewed>, String> {
    env.witness(path);
    let disk = read_disk(env, path).await?;
    // A file missing on disk is not asked of the editor: it would only answer "not found".
    let editor_may_read = match &disk {
        OnDisk::Missing => false,
        OnDisk::Text(decoded) => decoded.encoding != Encoding::Latin1,
    };
    if env.editor.reads_files() && editor_may_read {
        match env.editor.read_text_file(path).await {
            Ok(text) => {
                let text = text.strip_prefix('\u{feff}').map(str::to_owned).unwrap_or(text);
                let encoding = match &disk {
                    OnDisk::Text(decoded) => decoded.encoding,
                    OnDisk::Missing => Encoding::Utf8,
                };
                return Ok(Some(Viewed { decoded: Decoded { text, encoding }, note: None }));
            }
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "editor read failed; reading locally");
                let note = format!(
                    "the editor could not read {}: {e}. This is the copy saved on disk, which may differ \
                     from unsaved changes in the editor.",
                    path.display()
                );
                return Ok(match disk {
                    OnDisk::Missing => None,
                    OnDisk::Text(decoded) => Some(Viewed { decoded, note: Some(note) }),
                });
            }
        }
    }
    Ok(match disk {
        OnDisk::Missing => None,
        OnDisk::Text(decoded) => Some(Viewed { decoded, note: None }),
    })
}

/// Reads a file about to be changed and decides where the change goes: the editor when it
/// writes files and the disk copy is UTF-8 without a BOM (or missing); locally otherwise.
pub(crate) async fn read_for_change(env: &ToolEnv, path: &Path) -> Result<Loaded, String> {
    env.witness(path);
    let (disk, links) = read_disk_linked(env, path).await?;
    let via_editor = env.editor.writes_files()
        && links == 1
        && match &disk {
            OnDisk::Missing => true,
            OnDisk::Text(decoded) => decoded.encoding == Encoding::Utf8,
        };
    // A new file is not read through the editor first: there is nothing to read, and
    // editors report the miss as an error to the user.
    if via_editor && env.editor.reads_files() && matches!(disk, OnDisk::Text(_)) {
        return match env.editor.read_text_file(path).await {
            Ok(text) => Ok(Loaded { text: Some(text), encoding: Encoding::Utf8, via_editor, links }),
            // The change would be shown and written against the disk copy while the editor
            // may hold other, unsaved text, which the write would then replace unseen.
            Err(e) => Err(format!(
                "the editor could not read {}: {e}. Nothing was changed: the change cannot be \
                 worked out against the editor's copy of the file.",
                path.display()
            )),
        };
    }
    Ok(match disk {
        OnDisk::Missing => Loaded { text: None, encoding: Encoding::Utf8, via_editor, links },
        OnDisk::Text(decoded) => {
            Loaded { text: Some(decoded.text), encoding: decoded.encoding, via_editor, links }
        }
    })
}

/// Writes `content` where [`read_for_change`] decided, in `loaded`'s encoding. Says what a
/// local write replaced.
pub(crate) async fn write(
    env: &ToolEnv,
    path: &Path,
    loaded: &Loaded,
    content: &str,
) -> Result<fsio::Replaced, String> {
    let bytes = text::encode(content, loaded.encoding).map_err(|c| {
        format!(
            "{} is Latin-1 encoded and cannot hold {c:?}; keep to Latin-1 characters or rewrite the whole \
             file with write_file",
            path.display()
        )
    })?;
    if loaded.via_editor {
        // The editor writes in place, through every name the file has: a file that got
        // another name since it was read (a hard link made while the approval was pending)
        // is not written through it.
        let (_, links) = read_disk_linked(env, path).await?;
        if links > 1 {
            return Err(format!(
                "{} got another name (a hard link) after the change was shown; nothing was written, \
                 since writing it in the editor would change every name. Read it again and make the \
                 change anew.",
                path.display()
            ));
        }
        let text = String::from_utf8(bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        return env
            .editor
            .write_text_file(path, text)
            .await
            .map(|()| fsio::Replaced::default())
            .map_err(|e| format!("the editor could not write {}: {e}", path.display()));
    }
    let owned = path.to_path_buf();
    tokio::task::spawn_blocking(move || fsio::write_atomic(&owned, &bytes))
        .await
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?
        .map_err(|e| format!("cannot write: {e}"))
}
