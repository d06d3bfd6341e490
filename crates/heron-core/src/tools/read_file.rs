//! `read_file`: shows a text file's lines, numbered, a window at a time. Invariant: the
//! output never exceeds its caps, and a cut output says how to read on.

use schemars::JsonSchema;
use serde::Deserialize;

use super::call::{self, completed};
use super::roots::ReadAccess;
use super::text::Encoding;
use super::{Outcome, Prepared, Tool, ToolEnv, files};
use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::types::ToolKind;

const NAME: &str = "read_file";

/// The most lines shown at once.
pub const MAX_LINES: usize = 2000;
/// The most bytes of file text shown at once.
pub const MAX_BYTES: usize = 256 * 1024;

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// The file, absolute or relative to the working directory.
    pub path: String,
    /// The first line to show, 1-based (default 1).
    #[serde(default)]
    pub offset: Option<u64>,
    /// How many lines to show (default and maximum 2000).
    #[serde(default)]
    pub limit: Option<u64>,
}

/// The `read_file` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        call::spec::<ReadFileArgs>(
            NAME,
            "Read a text file. Lines come numbered (`N\\ttext`); use offset and limit to read a long file \
             in parts. Unsaved editor changes are included.",
        )
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn prepare(&self, arguments: &str, env: &ToolEnv) -> Result<Prepared, String> {
        let (args, raw_input): (ReadFileArgs, _) = call::parse(NAME, arguments)?;
        if args.limit == Some(0) {
            return Err("limit must be at least 1".to_owned());
        }
        let (path, access) = call::resolve_for_read(env, &args.path)?;
        let line = args.offset.filter(|&o| o > 1).map(|o| u32::try_from(o).unwrap_or(u32::MAX));
        Ok(Prepared {
            title: call::scrub_text(env, &format!("Read {}", call::shown(env, &path))),
            kind: ToolKind::Read,
            locations: vec![call::location(&path, line)],
            raw_input,
            outside_roots: access == ReadAccess::Ask,
        })
    }

    fn run(&self, prepared: Prepared, env: ToolEnv) -> BoxFuture<Outcome> {
        Box::pin(async move { call::guarded(&env, read(&prepared, &env)).await })
    }
}

async fn read(prepared: &Prepared, env: &ToolEnv) -> Outcome {
    let args: ReadFileArgs = match call::reparse(NAME, &prepared.raw_input) {
        Ok(args) => args,
        Err(failed) => return failed,
    };
    // Checked again: the tree may have changed while the call waited for permission.
    let path =
        match call::resolve_for_read(env, &args.path).and_then(|(p, _)| call::still_approved(prepared, &p)) {
            Ok(path) => path,
            Err(refusal) => return Outcome::failed(refusal),
        };
    let decoded = match files::read_for_view(env, &path).await {
        Ok(Some(decoded)) => decoded,
        Ok(None) => return Outcome::failed(format!("{} does not exist", path.display())),
        Err(message) => return Outcome::failed(message),
    };
    let offset = usize::try_from(args.offset.unwrap_or(1).max(1)).unwrap_or(usize::MAX);
    let limit = usize::try_from(args.limit.unwrap_or(MAX_LINES as u64)).unwrap_or(MAX_LINES).min(MAX_LINES);
    let mut text = window(&decoded.text, offset, limit);
    if decoded.encoding == Encoding::Latin1 {
        text.insert_str(0, "[note: this file is not UTF-8; it is shown decoded as Latin-1]\n");
    }
    completed(text)
}

/// Numbers lines `offset..offset+limit` of `text`, capped at [`MAX_BYTES`], with a marker
/// saying where to go on when anything was left out.
pub fn window(text: &str, offset: usize, limit: usize) -> String {
    let total = text.lines().count();
    if total == 0 {
        return "[the file is empty]".to_owned();
    }
    if offset > total {
        return format!("[the file has {total} lines; offset {offset} is past its end]");
    }
    let mut out = String::new();
    let mut shown = 0usize;
    for (index, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
        let numbered = format!("{:>6}\t{}\n", index + 1, line.strip_suffix('\r').unwrap_or(line));
        if out.len() + numbered.len() > MAX_BYTES {
            if shown == 0 {
                // A single line longer than the cap: show its start rather than nothing.
                out.push_str(&crate::secret::clip(&numbered, MAX_BYTES));
                out.push('\n');
                shown = 1;
            }
            break;
        }
        out.push_str(&numbered);
        shown += 1;
    }
    let last = offset + shown - 1;
    if last < total {
        out.push_str(&format!(
            "[truncated: showing lines {offset}-{last} of {total}; call read_file with offset {} to read on]",
            last + 1
        ));
    }
    out
}
