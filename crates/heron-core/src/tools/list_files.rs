//! `list_files`: the files under a directory, as a developer sees them (ignored and hidden
//! files left out), sorted, with symlinks shown as `name -> target` and never followed (a
//! linked directory is not descended into). Invariant: never more than [`MAX_FILES`]
//! entries, and a cut list says so.

use std::ops::ControlFlow;

use schemars::JsonSchema;
use serde::Deserialize;

use super::roots::ReadAccess;
use super::walk::{Links, Seen};
use super::{AlwaysAsk, Outcome, Prepared, Tool, ToolEnv, call, fsio, walk};
use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::types::ToolKind;

const NAME: &str = "list_files";

/// The most files listed at once.
pub const MAX_FILES: usize = 1000;

/// Arguments of `list_files`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListFilesArgs {
    /// The directory to list, absolute or relative to the working directory (default: the
    /// working directory).
    #[serde(default)]
    pub path: Option<String>,
    /// A glob the path (relative to the listed directory) must match, e.g. `*.rs` or
    /// `src/**/mod.rs`.
    #[serde(default)]
    pub pattern: Option<String>,
}

/// The `list_files` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListFiles;

impl Tool for ListFiles {
    fn spec(&self) -> ToolSpec {
        call::spec::<ListFilesArgs>(
            NAME,
            "List the files under a directory recursively, sorted, skipping hidden files and what \
             .gitignore ignores. Filter with a glob pattern. Symlinks are shown as `name -> target` \
             and not followed; list a linked directory by its own path.",
        )
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn prepare(&self, arguments: &str, env: &ToolEnv) -> Result<Prepared, String> {
        let (args, raw_input): (ListFilesArgs, _) = call::parse(NAME, arguments)?;
        if let Some(pattern) = &args.pattern {
            walk::glob(pattern)?;
        }
        let (path, access) = call::resolve_for_read(env, args.path.as_deref().unwrap_or("."))?;
        let mut title = match call::shown(env, &path).as_str() {
            "." => "List the workspace".to_owned(),
            shown => format!("List {}/", shown.trim_end_matches('/')),
        };
        if let Some(pattern) = &args.pattern {
            title.push_str(&format!(" ({pattern})"));
        }
        Ok(Prepared {
            title: call::scrub_text(env, &title),
            kind: ToolKind::Search,
            locations: vec![call::folder(&path)],
            raw_input,
            outside_roots: access != ReadAccess::Inside,
            always_ask: AlwaysAsk::for_read(access),
            content: Vec::new(),
            planned: None,
        })
    }

    fn run(&self, prepared: Prepared, env: ToolEnv) -> BoxFuture<Outcome> {
        Box::pin(async move {
            let outcome = list(prepared, env.clone()).await;
            call::scrub(&env, outcome)
        })
    }
}

async fn list(prepared: Prepared, env: ToolEnv) -> Outcome {
    let args: ListFilesArgs = match call::reparse(NAME, &prepared.raw_input) {
        Ok(args) => args,
        Err(failed) => return failed,
    };
    let filter = match args.pattern.as_deref().map(walk::glob).transpose() {
        Ok(filter) => filter,
        Err(message) => return Outcome::failed(message),
    };
    let fresh = call::resolve_for_read(&env, args.path.as_deref().unwrap_or("."));
    let root = match fresh.and_then(|(root, _)| call::still_approved(&prepared, &root)) {
        Ok(root) => root,
        Err(refusal) => return Outcome::failed(refusal),
    };
    // Missing, a symlink loop or a dangling link: each said as what it is.
    if let Err(unusable) = fsio::must_exist(&root) {
        return Outcome::failed(unusable.to_string());
    }
    let (cancel, witness, roots) = (env.cancel.clone(), env.witness.clone(), env.roots.clone());
    let cwd = call::resolve(&env, ".");
    let walked = tokio::task::spawn_blocking(move || {
        let mut found = Vec::new();
        let mut more = false;
        let protected = roots.protected();
        let walked = walk::files(
            &root,
            filter.as_ref(),
            &cancel,
            witness.as_deref(),
            protected,
            Links::Show,
            |seen| {
                if found.len() == MAX_FILES {
                    more = true;
                    return ControlFlow::Break(());
                }
                found.push(match seen {
                    Seen::File(path) => walk::shown_name(&call::shown_from(&cwd, path)),
                    // The target as the link names it: the listing says where it points
                    // without following it.
                    Seen::Link(path, target) => format!(
                        "{} -> {}",
                        walk::shown_name(&call::shown_from(&cwd, path)),
                        walk::shown_name(&target.display().to_string())
                    ),
                });
                ControlFlow::Continue(())
            },
        );
        (found, more, walked)
    })
    .await;
    let Ok((found, more, walked)) = walked else {
        return Outcome::failed("the file walk stopped unexpectedly");
    };
    if !walked.finished {
        return Outcome::failed("cancelled");
    }
    let mut text = if found.is_empty() { "[no files found]".to_owned() } else { found.join("\n") };
    if more {
        text.push_str(&format!(
            "\n[truncated: showing the first {MAX_FILES} files; narrow the listing with path or pattern]"
        ));
    }
    if let Some(note) = walked.note() {
        text.push('\n');
        text.push_str(&note);
    }
    call::completed(text)
}
