//! The agent's `fs/read_text_file` and `fs/write_text_file`, answered inside the session's
//! cwd only, with the rules Heron's own tools follow: the path is resolved (symlinks
//! followed) before it is judged, Heron's home and the credential folders are refused, only
//! regular files are read or written, reads stop at a cap, writes are atomic (`heron_core::local`). Every
//! request is hostile input: a refusal is a JSON-RPC error naming the field, never a panic.

use std::path::{Path, PathBuf};

use serde_json::json;

use heron_core::local::{self, FileError};
use heron_core::paths::resolve_against;
use heron_core::tools::protected::Protected;
use heron_core::tools::roots::{ReadAccess, Roots};
use heron_protocol::error::RESOURCE_NOT_FOUND;
use heron_protocol::{
    ReadTextFileRequest, ReadTextFileResponse, RpcError, WriteTextFileRequest, WriteTextFileResponse,
};

/// The largest file read for the agent: the answer is one message line, and the agent's
/// line limit (64 MiB for Heron) must hold it, escaped.
pub const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

/// The session's cwd as the client confines the agent to it.
#[derive(Debug, Clone)]
pub struct Workspace {
    roots: Roots,
}

impl Workspace {
    /// The workspace `cwd` (already validated and canonical), with Heron's home at `home`
    /// kept out of reach even when the cwd contains it.
    pub fn new(cwd: PathBuf, home: &Path) -> Self {
        Self { roots: Roots::new(cwd, Vec::new()).protecting(Protected::for_home(home)) }
    }

    /// The cwd, resolved.
    pub fn cwd(&self) -> &Path {
        self.roots.cwd()
    }

    /// Resolves `path` (a field of the request named `field`) for reading or running in: it
    /// must be absolute and land inside the cwd, outside Heron's home and credential folders.
    pub fn inside(&self, field: &str, path: &str) -> Result<PathBuf, RpcError> {
        absolute(field, path)?;
        let resolved = resolve_against(self.cwd(), path);
        match self.roots.read_access(&resolved, path) {
            Err(refusal) => Err(RpcError::invalid_params(field, refusal)),
            Ok(ReadAccess::Inside) => Ok(resolved),
            Ok(ReadAccess::Ask | ReadAccess::Credentials) => Err(RpcError::invalid_params(
                field,
                format!(
                    "{path} resolves to {}, which is outside the session's cwd {} (or in a credential folder); \
                     heron run reaches files only inside it",
                    resolved.display(),
                    self.cwd().display()
                ),
            )),
        }
    }

    fn protected(&self) -> &Protected {
        self.roots.protected()
    }
}

fn absolute(field: &str, path: &str) -> Result<(), RpcError> {
    if Path::new(path).is_absolute() {
        Ok(())
    } else {
        Err(RpcError::invalid_params(field, format!("{path} is not an absolute path")))
    }
}

/// -32002 for a file that does not exist, naming it.
fn not_found(path: &str) -> RpcError {
    RpcError::new(RESOURCE_NOT_FOUND, "Resource not found").with_data(json!({ "path": path }))
}

/// The wire error of a file that could not be used. The system's own failures are
/// internal errors: logged, not sent; anything the request itself names wrongly (a NUL in
/// the path, a symlink loop, a socket) is the agent's to fix, so it says why.
fn file_error(path: &str, err: FileError) -> RpcError {
    match err {
        FileError::Missing(_) | FileError::Dangling { .. } => not_found(path),
        FileError::Io { .. } => RpcError::internal(&err),
        refused => RpcError::invalid_params("path", refused.to_string()),
    }
}

/// `fs/read_text_file`: the file's text, or the `limit` lines from line `line` (1-based).
pub async fn read(ws: &Workspace, request: ReadTextFileRequest) -> Result<ReadTextFileResponse, RpcError> {
    let path = ws.inside("path", &request.path)?;
    if request.line == Some(0) {
        return Err(RpcError::invalid_params("line", "lines are counted from 1"));
    }
    if request.limit == Some(0) {
        return Err(RpcError::invalid_params("limit", "limit must be at least 1"));
    }
    let protected = ws.protected().clone();
    let opened = path.clone();
    let read = tokio::task::spawn_blocking(move || {
        local::read_capped(&opened, MAX_READ_BYTES, |meta| {
            protected.is_home_file(meta).then(|| FileError::Protected(opened.display().to_string()))
        })
    })
    .await
    .map_err(|e| RpcError::internal(&e))?;
    let bytes = match read {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err(not_found(&request.path)),
        Err(err) => return Err(file_error(&request.path, err)),
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| RpcError::invalid_params("path", format!("{} is not UTF-8 text", request.path)))?;
    Ok(ReadTextFileResponse { content: window(&text, request.line, request.limit), meta: None })
}

/// The lines of `text` from `line` (1-based, default 1), at most `limit` of them, each
/// with its own line ending.
fn window(text: &str, line: Option<u32>, limit: Option<u32>) -> String {
    if line.is_none() && limit.is_none() {
        return text.to_owned();
    }
    let skip = line.map_or(0, |l| l.saturating_sub(1) as usize);
    let take = limit.map_or(usize::MAX, |l| l as usize);
    text.split_inclusive('\n').skip(skip).take(take).collect()
}

/// `fs/write_text_file`: replaces (or creates) the file atomically.
pub async fn write(ws: &Workspace, request: WriteTextFileRequest) -> Result<WriteTextFileResponse, RpcError> {
    absolute("path", &request.path)?;
    let path =
        ws.roots.check_write(&request.path).map_err(|refusal| RpcError::invalid_params("path", refusal))?;
    let WriteTextFileRequest { content, path: shown, .. } = request;
    let written = tokio::task::spawn_blocking(move || local::write_atomic(&path, content.as_bytes()))
        .await
        .map_err(|e| RpcError::internal(&e))?;
    match written {
        Ok(_) => Ok(WriteTextFileResponse { meta: None }),
        Err(err) => Err(file_error(&shown, err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_counts_lines_from_one_and_keeps_their_endings() {
        let text = "a\nb\r\nc\nd";
        assert_eq!(window(text, None, None), text);
        assert_eq!(window(text, Some(2), Some(2)), "b\r\nc\n");
        assert_eq!(window(text, Some(4), None), "d");
        assert_eq!(window(text, Some(9), Some(1)), "");
        assert_eq!(window(text, None, Some(1)), "a\n");
    }
}
