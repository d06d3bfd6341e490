//! `read_file`: shows a text file's lines, numbered, a window at a time. Invariant: the
//! output never exceeds its caps, and a cut output says how to read on.

use schemars::JsonSchema;
use serde::Deserialize;

use super::call;
use super::roots::ReadAccess;
use super::text::Encoding;
use super::{AlwaysAsk, Outcome, Prepared, Tool, ToolEnv, files};
use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::types::{ToolKind, ToolOutput, ToolStatus};

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
            title: call::scrub_text(env, &title(&call::shown(env, &path), args.offset, args.limit)),
            kind: ToolKind::Read,
            locations: vec![call::location(&path, line)],
            raw_input,
            outside_roots: access != ReadAccess::Inside,
            always_ask: AlwaysAsk::for_read(access),
            content: Vec::new(),
            planned: None,
        })
    }

    fn run(&self, prepared: Prepared, env: ToolEnv) -> BoxFuture<Outcome> {
        Box::pin(async move { call::guarded(&env, read(&prepared, &env)).await })
    }
}

/// `Read src/main.rs`, `Read src/main.rs:10-40`, `Read src/main.rs from line 10`.
fn title(shown: &str, offset: Option<u64>, limit: Option<u64>) -> String {
    let first = offset.unwrap_or(1).max(1);
    match limit {
        Some(limit) => format!("Read {shown}:{first}-{}", first.saturating_add(limit.saturating_sub(1))),
        None if first > 1 => format!("Read {shown} from line {first}"),
        None => format!("Read {shown}"),
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
    let files::Viewed { decoded, note } = match files::read_for_view(env, &path).await {
        Ok(Some(viewed)) => viewed,
        Ok(None) => return Outcome::failed(format!("{} does not exist", path.display())),
        Err(message) => return Outcome::failed(message),
    };
    let offset = usize::try_from(args.offset.unwrap_or(1).max(1)).unwrap_or(usize::MAX);
    let limit = usize::try_from(args.limit.unwrap_or(MAX_LINES as u64)).unwrap_or(MAX_LINES).min(MAX_LINES);
    // Redacted before the window is cut from it: a single line longer than the cap is
    // clipped, and a clip inside a key would leave a part no later redaction recognises.
    let text = crate::secret::redact(&decoded.text, env.secrets.iter());
    let shown = window(&text, offset, limit);
    let mut for_model = shown.numbered;
    let mut for_user = shown.plain;
    if decoded.encoding == Encoding::Latin1 {
        let note = "[note: this file is not UTF-8; it is shown decoded as Latin-1]\n";
        for_model.insert_str(0, note);
        for_user.insert_str(0, note);
    }
    if let Some(note) = note {
        // The editor's message may quote anything; it is scrubbed like the text below it.
        let note = format!("[note: {}]\n", crate::secret::redact(&note, env.secrets.iter()));
        for_model.insert_str(0, &note);
        for_user.insert_str(0, &note);
    }
    Outcome {
        status: ToolStatus::Completed,
        // The editor shows the text as it is; the line numbers are for the model.
        output: vec![ToolOutput::Text { text: for_user }],
        raw_output: Some(serde_json::json!({
            "path": path.display().to_string(),
            "firstLine": shown.lines.map(|(first, _)| first),
            "lastLine": shown.lines.map(|(_, last)| last),
            "totalLines": shown.total,
            "truncated": shown.truncated,
        })),
        for_model,
        plan: None,
    }
}

/// A window of a file's lines, as the model and the user see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The lines numbered (`N\ttext`), with any marker: what the model reads.
    pub numbered: String,
    /// The same lines as they are in the file, with the same marker: what the user sees.
    pub plain: String,
    /// The first and last line shown (1-based), if any was.
    pub lines: Option<(usize, usize)>,
    /// How many lines the file has.
    pub total: usize,
    /// Whether lines after the window were left out.
    pub truncated: bool,
}

/// Lines `offset..offset+limit` of `text`, capped at [`MAX_BYTES`] (numbered), with a
/// marker saying where to go on when anything was left out.
pub fn window(text: &str, offset: usize, limit: usize) -> Window {
    let total = text.lines().count();
    let only = |marker: String| Window {
        numbered: marker.clone(),
        plain: marker,
        lines: None,
        total,
        truncated: false,
    };
    if total == 0 {
        return only("[the file is empty]".to_owned());
    }
    if offset > total {
        return only(format!("[the file has {total} lines; offset {offset} is past its end]"));
    }
    let (mut numbered, mut plain) = (String::new(), String::new());
    let mut shown = 0usize;
    let mut clipped = None;
    for (index, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let with_number = format!("{:>6}\t{line}\n", index + 1);
        if numbered.len() + with_number.len() > MAX_BYTES {
            if shown == 0 {
                // A single line longer than the cap: show its start rather than nothing.
                numbered.push_str(&crate::secret::clip(&with_number, MAX_BYTES));
                numbered.push('\n');
                plain.push_str(&crate::secret::clip(line, MAX_BYTES));
                plain.push('\n');
                shown = 1;
                clipped = Some((index + 1, line.len()));
            }
            break;
        }
        numbered.push_str(&with_number);
        plain.push_str(line);
        plain.push('\n');
        shown += 1;
    }
    let last = offset + shown - 1;
    if let Some((number, bytes)) = clipped {
        // The rest of such a line is out of this tool's reach: say so, and what reaches it.
        let marker = format!(
            "[truncated: line {number} is {bytes} bytes long and only its start is shown; search it with grep, \
             or read parts of it with run_command (e.g. `cut -c`)]\n"
        );
        numbered.push_str(&marker);
        plain.push_str(&marker);
    }
    let truncated = last < total || clipped.is_some();
    if last < total {
        let marker = format!(
            "[truncated: showing lines {offset}-{last} of {total}; call read_file with offset {} to read on]",
            last + 1
        );
        numbered.push_str(&marker);
        plain.push_str(&marker);
    }
    Window { numbered, plain, lines: Some((offset, last)), total, truncated }
}
