//! `edit_file`: replaces an exact string in a file inside the write roots. Invariant: only
//! the matched text changes; every other byte (encoding, BOM, line endings) is kept.

use schemars::JsonSchema;
use serde::Deserialize;

use super::files::{self, PlannedChange};
use super::{Outcome, Prepared, Tool, ToolEnv, call};
use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::types::{ToolKind, ToolStatus};

const NAME: &str = "edit_file";

/// Arguments of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditFileArgs {
    /// The file, absolute or relative to the working directory.
    pub path: String,
    /// The exact text to replace, including indentation; it must appear exactly once unless
    /// replace_all is set.
    pub old_string: String,
    /// The text to put in its place.
    pub new_string: String,
    /// Replace every occurrence instead of exactly one (default false).
    #[serde(default)]
    pub replace_all: Option<bool>,
}

/// The `edit_file` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFile;

impl Tool for EditFile {
    fn spec(&self) -> ToolSpec {
        call::spec::<EditFileArgs>(
            NAME,
            "Replace an exact string in a file. old_string must match the file exactly (read it first) and \
             appear once, unless replace_all is true. Only files inside the workspace can be edited.",
        )
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn prepare(&self, arguments: &str, env: &ToolEnv) -> Result<Prepared, String> {
        let (args, raw_input): (EditFileArgs, _) = call::parse(NAME, arguments)?;
        if args.old_string.is_empty() {
            return Err("old_string must not be empty; use write_file to create a file".to_owned());
        }
        if args.old_string == args.new_string {
            return Err("old_string and new_string are the same; there is nothing to change".to_owned());
        }
        let path = call::resolve_for_write(env, &args.path)?;
        let (title, always_ask) = call::write_title(env, "Edit", &path);
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
        Box::pin(async move { call::guarded(&env, edit(prepared, &env)).await })
    }
}

/// Works out the edited text from the file as it is now.
async fn plan(prepared: &Prepared, env: &ToolEnv) -> Result<PlannedChange, String> {
    let args: EditFileArgs = call::reparse(NAME, &prepared.raw_input).map_err(|failed| failed.for_model)?;
    let path = call::resolve_for_write(env, &args.path).and_then(|p| call::still_approved(prepared, &p))?;
    let loaded = files::read_for_change(env, &path).await?;
    let Some(old_text) = &loaded.text else {
        return Err(format!("{} does not exist; use write_file to create it", path.display()));
    };
    let (new_text, _) =
        replace(old_text, &args.old_string, &args.new_string, args.replace_all.unwrap_or(false))
            .map_err(|message| format!("{}: {message}", call::shown(env, &path)))?;
    Ok(PlannedChange { path, loaded, new_text, notes: Vec::new() })
}

async fn edit(mut prepared: Prepared, env: &ToolEnv) -> Outcome {
    // A previewed edit makes the change the user saw, if the file is still as it was then.
    let previewed = prepared.planned.take();
    let planned = match PlannedChange::to_make(previewed, env, plan(&prepared, env)).await {
        Ok(planned) => planned,
        Err(message) => return Outcome::failed(message),
    };
    let replaced = match files::write(env, &planned.path, &planned.loaded, &planned.new_text).await {
        Ok(replaced) => replaced,
        Err(message) => return Outcome::failed(message),
    };
    let path = &planned.path;
    let line = first_changed_line(planned.loaded.text.as_deref().unwrap_or_default(), &planned.new_text);
    let mut for_model = format!("Edited {} (first change at line {line})", call::shown(env, path));
    if replaced.other_links > 0 {
        for_model.push_str(&format!("; {}", super::write_file::HARD_LINKS));
    }
    Outcome {
        status: ToolStatus::Completed,
        // Shown, stored and replayed within the diff cap.
        output: planned.shown().outputs,
        raw_output: Some(serde_json::json!({ "path": path.display().to_string(), "firstChangedLine": line })),
        for_model,
        plan: None,
    }
}

/// Replaces `old` with `new` in `text`: exactly one occurrence, or all of them with
/// `all`. When `old` is not found as written and the text uses CRLF, `old` and `new` are
/// tried again with their `\n` turned into `\r\n`. Returns the new text and the count.
/// The new text's size is worked out before it is built, and a result larger than
/// [`files::MAX_WRITE_BYTES`] is refused without building it: `replace_all` of one letter
/// by 256 turns a 2 MiB file into 512 MiB.
pub fn replace(text: &str, old: &str, new: &str, all: bool) -> Result<(String, usize), String> {
    let mut count = text.matches(old).count();
    let (mut old, mut new) = (old.to_owned(), new.to_owned());
    if count == 0 && old.contains('\n') && text.contains("\r\n") {
        let crlf_old = super::text::to_crlf(&old);
        count = text.matches(crlf_old.as_str()).count();
        if count > 0 {
            old = crlf_old;
            new = super::text::to_crlf(&new);
        }
    }
    let replaced = match count {
        0 => {
            return Err(
                "old_string was not found; read the file again and copy the text exactly, including \
                        whitespace"
                    .to_owned(),
            );
        }
        1 => 1,
        n if all => n,
        n => {
            return Err(format!(
                "old_string appears {n} times; include more surrounding lines to make it unique, or set \
                 replace_all to replace every occurrence"
            ));
        }
    };
    let size = edited_size(text.len(), old.len(), new.len(), replaced);
    if size.is_none_or(|size| size > files::MAX_WRITE_BYTES) {
        return Err(format!(
            "replacing {replaced} occurrence(s) would make the file {} bytes, more than the {} bytes a tool \
             writes; nothing was changed. Replace fewer occurrences at once, or with shorter text",
            size.map_or_else(|| "too many".to_owned(), |s| s.to_string()),
            files::MAX_WRITE_BYTES
        ));
    }
    let edited = if replaced == 1 { text.replacen(&old, &new, 1) } else { text.replace(&old, &new) };
    Ok((edited, replaced))
}

/// The size of a text of `len` bytes once `count` occurrences of `old` bytes are replaced
/// by `new` bytes; `None` past what a `u64` holds.
fn edited_size(len: usize, old: usize, new: usize, count: usize) -> Option<u64> {
    let (len, old, new, count) = (len as u64, old as u64, new as u64, count as u64);
    len.checked_sub(old.checked_mul(count)?)?.checked_add(new.checked_mul(count)?)
}

/// The 1-based line of the first difference between two texts.
fn first_changed_line(old: &str, new: &str) -> usize {
    let common = old.bytes().zip(new.bytes()).take_while(|(a, b)| a == b).count();
    old[..floor_char_boundary(old, common)].matches('\n').count() + 1
}

fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    while index > 0 && !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lf_old_string_matches_a_crlf_file_and_keeps_crlf() {
        let (text, n) = replace("a\r\nb\r\nc\r\n", "a\nb\n", "x\ny\n", false).expect("replaced");
        assert_eq!((text.as_str(), n), ("x\r\ny\r\nc\r\n", 1));
    }

    #[test]
    fn a_replace_all_whose_result_passes_the_write_cap_is_refused_before_it_is_built() {
        // 2 MiB of one letter, each replaced by 256: 512 MiB, were it built.
        let text = "a".repeat(2 << 20);
        let refused = replace(&text, "a", &"b".repeat(256), true).expect_err("refused");
        assert!(refused.contains("536870912 bytes") && refused.contains("nothing was changed"), "{refused}");
        // Just at the cap is fine; one byte more is not.
        let cap = usize::try_from(files::MAX_WRITE_BYTES).expect("fits");
        let base = format!("{}Y", "x".repeat(cap - 9));
        assert_eq!(replace(&base, "Y", &"Z".repeat(9), false).expect("at the cap").0.len(), cap);
        assert!(replace(&base, "Y", &"Z".repeat(10), false).is_err());
        assert_eq!(edited_size(usize::MAX, 1, 3, usize::MAX), None);
    }

    #[test]
    fn first_changed_line_counts_from_one() {
        assert_eq!(first_changed_line("a\nb\nc", "a\nB\nc"), 2);
        assert_eq!(first_changed_line("abc", "xbc"), 1);
    }
}
