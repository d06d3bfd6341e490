//! What every built-in tool does the same way: one argument type gives both the schema the
//! model sees and the parser, paths are resolved through the confinement layer and shown
//! relative to the cwd, and everything a call returns is scrubbed of secrets.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::roots::ReadAccess;
use super::{AlwaysAsk, Outcome, Prepared, ToolEnv};
use crate::llm::ToolSpec;
use crate::paths::resolve_against;
use crate::types::{Location, ToolOutput, ToolStatus};

/// The spec of a tool whose arguments are `A`.
pub(crate) fn spec<A: JsonSchema>(name: &str, description: &str) -> ToolSpec {
    let generator = schemars::generate::SchemaSettings::draft07()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<A>();
    schema.remove("title");
    ToolSpec { name: name.to_owned(), description: description.to_owned(), parameters: schema.to_value() }
}

/// Parses the model's argument text into `A`, keeping the JSON as `raw_input`. Empty text
/// counts as `{}` (models send it for calls without arguments).
pub(crate) fn parse<A: DeserializeOwned>(tool: &str, arguments: &str) -> Result<(A, Value), String> {
    let text = if arguments.trim().is_empty() { "{}" } else { arguments };
    let value: Value = serde_json::from_str(text)
        .map_err(|e| format!("the arguments of {tool} are not valid JSON ({e}); send a JSON object"))?;
    if !value.is_object() {
        return Err(format!("the arguments of {tool} must be a JSON object"));
    }
    let args = A::deserialize(&value).map_err(|e| format!("invalid arguments for {tool}: {e}"))?;
    Ok((args, value))
}

/// Re-reads the arguments a call was prepared with.
pub(crate) fn reparse<A: DeserializeOwned>(tool: &str, raw_input: &Value) -> Result<A, Outcome> {
    A::deserialize(raw_input).map_err(|e| Outcome::failed(format!("invalid arguments for {tool}: {e}")))
}

/// Resolves a path argument against the call's cwd (absolute, symlinks followed).
pub(crate) fn resolve(env: &ToolEnv, path: &str) -> PathBuf {
    resolve_against(&env.cwd, path)
}

/// Resolves a path argument for reading and says whether the read must ask first; Heron's
/// home is refused.
pub(crate) fn resolve_for_read(env: &ToolEnv, path: &str) -> Result<(PathBuf, ReadAccess), String> {
    let resolved = resolve(env, path);
    let access = env.roots.read_access(&resolved, path)?;
    Ok((resolved, access))
}

/// The path a prepared call was approved for, checked against `fresh` (the same argument
/// resolved again right before the call runs): a tree changed in between (a directory
/// swapped for a symlink) fails the call instead of sending it somewhere else.
pub(crate) fn still_approved(prepared: &Prepared, fresh: &Path) -> Result<PathBuf, String> {
    let approved = prepared.locations.first().map(|l| PathBuf::from(&l.path));
    match approved {
        Some(approved) if approved == fresh => Ok(approved),
        Some(approved) => Err(format!(
            "{} changed since the call was checked (it now resolves to {}); refusing to follow it",
            approved.display(),
            fresh.display()
        )),
        None => Err("the call names no file".to_owned()),
    }
}

/// Resolves a path argument for writing and checks it against the write roots.
pub(crate) fn resolve_for_write(env: &ToolEnv, path: &str) -> Result<PathBuf, String> {
    env.roots.check_write_resolved(resolve(env, path), path)
}

/// The title of a write of `path` (resolved), and why it is always asked, if it is: a
/// write of a file another program runs later (`later`) says in its title why it asks.
pub(crate) fn write_title(env: &ToolEnv, verb: &str, path: &Path) -> (String, Option<AlwaysAsk>) {
    let why = super::later::why(path);
    let mut title = format!("{verb} {}", shown(env, path));
    if let Some(why) = why {
        title.push_str(&format!(" ({why})"));
    }
    (scrub_text(env, &title), why.map(AlwaysAsk::RunsLater))
}

/// How a path is shown in titles and listings: relative to the cwd when inside it.
pub(crate) fn shown(env: &ToolEnv, path: &Path) -> String {
    shown_from(&resolve_against(&env.cwd, "."), path)
}

/// [`shown`] with the cwd already resolved, for listings of many paths.
pub(crate) fn shown_from(cwd: &Path, path: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(relative) if relative.as_os_str().is_empty() => ".".to_owned(),
        Ok(relative) => relative.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

/// A location for the absolute path of a file.
pub(crate) fn location(path: &Path, line: Option<u32>) -> Location {
    Location { path: path.display().to_string(), line, folder: false }
}

/// A location for the absolute path of a folder.
pub(crate) fn folder(path: &Path) -> Location {
    Location { path: path.display().to_string(), line: None, folder: true }
}

/// A successful outcome showing `text` to both the user and the model.
pub(crate) fn completed(text: String) -> Outcome {
    Outcome {
        status: ToolStatus::Completed,
        output: vec![ToolOutput::Text { text: text.clone() }],
        raw_output: None,
        for_model: text,
        plan: None,
    }
}

/// Runs a file tool's body unless the call is cancelled first (a call cancelled before it
/// starts never touches the file), then scrubs secrets from what it reports.
pub(crate) async fn guarded(env: &ToolEnv, body: impl std::future::Future<Output = Outcome>) -> Outcome {
    let outcome = tokio::select! {
        biased;
        () = env.cancel.cancelled() => Outcome::failed("cancelled"),
        outcome = body => outcome,
    };
    scrub(env, outcome)
}

/// Scrubs every known secret from what a call returns.
pub(crate) fn scrub(env: &ToolEnv, mut outcome: Outcome) -> Outcome {
    let clean = |text: &str| crate::secret::redact(text, env.secrets.iter());
    outcome.for_model = clean(&outcome.for_model);
    scrub_outputs(env, &mut outcome.output);
    if let Some(raw) = &mut outcome.raw_output {
        scrub_value(raw, &clean);
    }
    if let Some(plan) = &mut outcome.plan {
        for item in plan {
            item.content = clean(&item.content);
        }
    }
    outcome
}

/// Scrubs every known secret from what a call shows the user.
pub(crate) fn scrub_outputs(env: &ToolEnv, outputs: &mut [ToolOutput]) {
    let clean = |text: &str| crate::secret::redact(text, env.secrets.iter());
    for output in outputs {
        match output {
            ToolOutput::Text { text } => *text = clean(text),
            ToolOutput::Diff { old_text, new_text, .. } => {
                *new_text = clean(new_text);
                if let Some(old) = old_text {
                    *old = clean(old);
                }
            }
            ToolOutput::Terminal { .. } => {}
        }
    }
}

/// Scrubs a title or other short text.
pub(crate) fn scrub_text(env: &ToolEnv, text: &str) -> String {
    crate::secret::redact(text, env.secrets.iter())
}

fn scrub_value(value: &mut Value, clean: &impl Fn(&str) -> String) {
    match value {
        Value::String(s) => *s = clean(s),
        Value::Array(items) => items.iter_mut().for_each(|v| scrub_value(v, clean)),
        Value::Object(map) => map.values_mut().for_each(|v| scrub_value(v, clean)),
        _ => {}
    }
}

/// Clips `text` to its first line of at most `max` characters, saying how many lines it
/// has when more, for titles (`title::first_line`).
pub(crate) fn one_line(text: &str, max: usize) -> String {
    super::title::first_line(text, max)
}
