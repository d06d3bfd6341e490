//! `write_file`: creates or replaces a file inside the write roots. Invariant: an existing
//! file keeps its BOM, line endings and (when the new text allows) its Latin-1 encoding.

use schemars::JsonSchema;
use serde::Deserialize;

use super::files::{self, PlannedChange};
use super::text::{self, Encoding};
use super::{Outcome, Prepared, Tool, ToolEnv, call};
use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::types::{ToolKind, ToolStatus};

const NAME: &str = "write_file";

/// What the model is told when a write replaced a file that had other names.
pub(super) const HARD_LINKS: &str =
    "the file had other hard links; it was replaced, and its other names keep the old content";

/// Arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// The file, absolute or relative to the working directory; missing parent directories
    /// are created.
    pub path: String,
    /// The whole new content of the file.
    pub content: String,
}

/// The `write_file` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

impl Tool for WriteFile {
    fn spec(&self) -> ToolSpec {
        call::spec::<WriteFileArgs>(
            NAME,
            "Create a file or replace its whole content. Only files inside the workspace can be written. \
             Prefer edit_file for changing part of an existing file.",
        )
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn prepare(&self, arguments: &str, env: &ToolEnv) -> Result<Prepared, String> {
        let (args, raw_input): (WriteFileArgs, _) = call::parse(NAME, arguments)?;
        let path = call::resolve_for_write(env, &args.path)?;
        let verb = if path.exists() { "Write" } else { "Create" };
        let (title, always_ask) = call::write_title(env, verb, &path);
        Ok(Prepared {
            title,
            kind: ToolKind::Edit,
            locations: vec![call::location(&path, None)],
            raw_input,
            outside_roots: false,
            always_ask,
            content: Vec::new(),
            planned: None,
        })
    }

    fn preview(&self, prepared: Prepared, env: ToolEnv) -> BoxFuture<Result<Prepared, String>> {
        Box::pin(async move {
            let planned = plan(&prepared, &env).await?;
            planned.shown_in(prepared, &env)
        })
    }

    fn run(&self, prepared: Prepared, env: ToolEnv) -> BoxFuture<Outcome> {
        Box::pin(async move { call::guarded(&env, write(prepared, &env)).await })
    }
}

/// Works out what the file will hold: the model's content, kept in the file's line
/// endings and (when it can hold it) its encoding.
async fn plan(prepared: &Prepared, env: &ToolEnv) -> Result<PlannedChange, String> {
    let args: WriteFileArgs = call::reparse(NAME, &prepared.raw_input).map_err(|failed| failed.for_model)?;
    // Checked again: the tree may have changed while the call waited.
    let path = call::resolve_for_write(env, &args.path).and_then(|p| call::still_approved(prepared, &p))?;
    let mut loaded = files::read_for_change(env, &path).await?;
    let mut content = args.content.strip_prefix('\u{feff}').unwrap_or(&args.content).to_owned();
    let mut notes = Vec::new();
    if let Some(old) = &loaded.text
        && text::uses_crlf(old)
        && !text::uses_crlf(&content)
    {
        content = text::to_crlf(&content);
        notes.push("kept the file's CRLF line endings");
    }
    if loaded.encoding == Encoding::Latin1 && text::encode(&content, Encoding::Latin1).is_err() {
        loaded.encoding = Encoding::Utf8;
        notes.push("the file was Latin-1 but the new content is not, so it is now UTF-8");
    }
    Ok(PlannedChange { path, loaded, new_text: content, notes })
}

async fn write(mut prepared: Prepared, env: &ToolEnv) -> Outcome {
    // A previewed write makes the change the user saw, if the file is still as it was then.
    let previewed = prepared.planned.take();
    let planned = match PlannedChange::to_make(previewed, env, plan(&prepared, env)).await {
        Ok(planned) => planned,
        Err(message) => return Outcome::failed(message),
    };
    let mut notes = planned.notes.clone();
    match files::write(env, &planned.path, &planned.loaded, &planned.new_text).await {
        Ok(replaced) if replaced.other_links > 0 => notes.push(HARD_LINKS),
        Ok(_) => {}
        Err(message) => return Outcome::failed(message),
    }
    let shown = call::shown(env, &planned.path);
    let lines = planned.new_text.lines().count();
    let mut summary = match &planned.loaded.text {
        None => format!("Created {shown} ({lines} lines)"),
        Some(_) => format!("Wrote {shown} ({lines} lines)"),
    };
    if !notes.is_empty() {
        summary.push_str(&format!("; {}", notes.join("; ")));
    }
    Outcome {
        status: ToolStatus::Completed,
        // Shown, stored and replayed within the diff cap.
        output: planned.shown().outputs,
        raw_output: None,
        for_model: summary,
        plan: None,
    }
}
