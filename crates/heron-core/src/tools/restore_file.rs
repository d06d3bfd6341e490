//! `restore_file`: puts one file back as it was before a turn changed it, for `/undo` and
//! `/rewind` (never offered to the model). It is a file change like any other: the user is
//! shown the diff the restore makes and approves it, and it runs only if the file still
//! holds what the user was shown. A file someone changed since Heron last wrote it is asked
//! about in every posture: a rewind never overwrites another's work unseen. A file the turn
//! created is removed.

use schemars::JsonSchema;
use serde::Deserialize;

use super::files::{self, PlannedChange};
use super::{AlwaysAsk, Outcome, Prepared, Tool, ToolEnv, call};
use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::types::{ToolKind, ToolStatus};

/// The tool's name, as its calls are stored.
pub const NAME: &str = "restore_file";

/// Arguments of `restore_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RestoreFileArgs {
    /// The file, absolute.
    pub path: String,
    /// What it held at the end of `turn`; `None`: it did not exist then, and is removed.
    pub content: Option<String>,
    /// The turn it goes back to.
    pub turn: usize,
    /// Whether it changed since Heron last wrote it (someone else's edit is overwritten).
    #[serde(default)]
    pub changed_since: bool,
}

/// The `restore_file` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct RestoreFile;

impl Tool for RestoreFile {
    fn spec(&self) -> ToolSpec {
        call::spec::<RestoreFileArgs>(NAME, "Put a file back as it was at the end of an earlier turn.")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn prepare(&self, arguments: &str, env: &ToolEnv) -> Result<Prepared, String> {
        let (args, raw_input): (RestoreFileArgs, _) = call::parse(NAME, arguments)?;
        let path = call::resolve_for_write(env, &args.path)?;
        let (verb, when) = match (&args.content, args.turn) {
            (Some(_), 0) => ("Restore", " to before the first turn".to_owned()),
            (Some(_), turn) => ("Restore", format!(" to the end of turn {turn}")),
            (None, 0) => ("Remove", " (made during the session)".to_owned()),
            (None, turn) => ("Remove", format!(" (made after turn {turn})")),
        };
        let (mut title, runs_later) = call::write_title(env, verb, &path);
        title.push_str(&when);
        if args.changed_since {
            title.push_str(", changed since Heron wrote it");
        }
        Ok(Prepared {
            title,
            kind: ToolKind::Edit,
            locations: vec![call::location(&path, None)],
            raw_input,
            outside_roots: false,
            always_ask: runs_later.or(args.changed_since.then_some(AlwaysAsk::ChangedSince)),
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
        Box::pin(async move { call::guarded(&env, restore(prepared, &env)).await })
    }
}

/// What the file at `path` holds now, read as the file tools read it (through the editor
/// where it writes files); `None` when it does not exist or cannot be read.
pub(crate) async fn current_text(env: &ToolEnv, path: &std::path::Path) -> Option<String> {
    files::read_for_change(env, path).await.ok().and_then(|loaded| loaded.text)
}

/// The change the restore makes: the file as it is now, to what it held (a removal shows
/// as the file emptied).
async fn plan(prepared: &Prepared, env: &ToolEnv) -> Result<PlannedChange, String> {
    let args: RestoreFileArgs =
        call::reparse(NAME, &prepared.raw_input).map_err(|failed| failed.for_model)?;
    let path = call::resolve_for_write(env, &args.path).and_then(|p| call::still_approved(prepared, &p))?;
    let loaded = files::read_for_change(env, &path).await?;
    Ok(PlannedChange { path, loaded, new_text: args.content.unwrap_or_default(), notes: Vec::new() })
}

async fn restore(mut prepared: Prepared, env: &ToolEnv) -> Outcome {
    let removing =
        matches!(call::reparse::<RestoreFileArgs>(NAME, &prepared.raw_input), Ok(a) if a.content.is_none());
    let previewed = prepared.planned.take();
    let planned = match PlannedChange::to_make(previewed, env, plan(&prepared, env)).await {
        Ok(planned) => planned,
        Err(message) => return Outcome::failed(message),
    };
    let shown = call::shown(env, &planned.path);
    let summary = if removing {
        match remove(&planned.path).await {
            Ok(()) => format!("Removed {shown}"),
            Err(message) => return Outcome::failed(message),
        }
    } else {
        match files::write(env, &planned.path, &planned.loaded, &planned.new_text).await {
            Ok(_) => format!("Restored {shown}"),
            Err(message) => return Outcome::failed(message),
        }
    };
    Outcome {
        status: ToolStatus::Completed,
        output: planned.shown().outputs,
        raw_output: None,
        for_model: summary,
        plan: None,
    }
}

/// Removes the regular file at `path` (resolved inside the write roots); anything else
/// there (a link swapped in, a folder) is left alone.
async fn remove(path: &std::path::Path) -> Result<(), String> {
    let owned = path.to_path_buf();
    let removed = tokio::task::spawn_blocking(move || match std::fs::symlink_metadata(&owned) {
        Ok(meta) if meta.is_file() => std::fs::remove_file(&owned).map_err(|e| e.to_string()),
        Ok(_) => Err("it is no longer a regular file".to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.to_string()),
    });
    match removed.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(why)) => Err(format!("cannot remove {}: {why}", path.display())),
        Err(e) => Err(format!("cannot remove {}: {e}", path.display())),
    }
}
