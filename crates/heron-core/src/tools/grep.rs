//! `grep`: lines matching a regular expression in the files under a path, as
//! `path:line: text`. Invariant: never more than [`MAX_MATCHES`] lines or [`MAX_BYTES`]
//! bytes, and a cut result says so.

use std::ops::ControlFlow;
use std::path::Path;

use regex::bytes::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::Deserialize;

use super::protected::Protected;
use super::roots::ReadAccess;
use super::walk::{Links, Seen};
use super::{AlwaysAsk, Outcome, Prepared, Tool, ToolEnv, call, files, fsio, walk};
use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::secret::Secret;
use crate::types::ToolKind;

const NAME: &str = "grep";

/// The most matching lines reported.
pub const MAX_MATCHES: usize = 500;
/// The most bytes reported.
pub const MAX_BYTES: usize = 128 * 1024;
/// The most characters of one matching line shown.
const MAX_LINE_CHARS: usize = 400;

/// Arguments of `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GrepArgs {
    /// A regular expression (Rust regex syntax), matched against each line.
    pub pattern: String,
    /// The file or directory to search, absolute or relative to the working directory
    /// (default: the working directory).
    #[serde(default)]
    pub path: Option<String>,
    /// A glob the file path (relative to the searched directory) must match, e.g. `*.rs`.
    #[serde(default)]
    pub glob: Option<String>,
}

/// The `grep` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Grep;

fn compile(pattern: &str) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .size_limit(10 * 1024 * 1024)
        .build()
        .map_err(|e| format!("invalid regular expression {pattern:?}: {e}"))
}

impl Tool for Grep {
    fn spec(&self) -> ToolSpec {
        call::spec::<GrepArgs>(
            NAME,
            "Search file contents with a regular expression. Prints `path:line: text` for each matching \
             line, skipping binary files, hidden files and what .gitignore ignores.",
        )
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn prepare(&self, arguments: &str, env: &ToolEnv) -> Result<Prepared, String> {
        let (args, raw_input): (GrepArgs, _) = call::parse(NAME, arguments)?;
        compile(&args.pattern)?;
        if let Some(glob) = &args.glob {
            walk::glob(glob)?;
        }
        let (path, access) = call::resolve_for_read(env, args.path.as_deref().unwrap_or("."))?;
        Ok(Prepared {
            title: call::scrub_text(
                env,
                &format!("Search {} for `{}`", call::shown(env, &path), call::one_line(&args.pattern, 60)),
            ),
            kind: ToolKind::Search,
            // A search of one file is that file; of a folder, the folder.
            locations: vec![if path.is_dir() { call::folder(&path) } else { call::location(&path, None) }],
            raw_input,
            outside_roots: access != ReadAccess::Inside,
            always_ask: AlwaysAsk::for_read(access),
            content: Vec::new(),
            planned: None,
        })
    }

    fn run(&self, prepared: Prepared, env: ToolEnv) -> BoxFuture<Outcome> {
        Box::pin(async move {
            let outcome = search(prepared, env.clone()).await;
            call::scrub(&env, outcome)
        })
    }
}

/// What a search found.
#[derive(Default)]
struct Found {
    text: String,
    matches: usize,
    cut: bool,
}

async fn search(prepared: Prepared, env: ToolEnv) -> Outcome {
    let args: GrepArgs = match call::reparse(NAME, &prepared.raw_input) {
        Ok(args) => args,
        Err(failed) => return failed,
    };
    let compiled =
        compile(&args.pattern).and_then(|r| Ok((r, args.glob.as_deref().map(walk::glob).transpose()?)));
    let (regex, filter) = match compiled {
        Ok(compiled) => compiled,
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
    let secrets = env.secrets.clone();
    let cwd = call::resolve(&env, ".");
    let searched = tokio::task::spawn_blocking(move || {
        let mut found = Found::default();
        let protected = roots.protected();
        let walked = walk::files(
            &root,
            filter.as_ref(),
            &cancel,
            witness.as_deref(),
            protected,
            Links::Skip,
            |seen| match seen {
                Seen::File(path) => search_file(&regex, &cwd, path, protected, &secrets, &mut found),
                Seen::Link(..) => ControlFlow::Continue(()),
            },
        );
        (found, walked)
    })
    .await;
    let Ok((found, walked)) = searched else {
        return Outcome::failed("the search stopped unexpectedly");
    };
    if !walked.finished {
        return Outcome::failed("cancelled");
    }
    let mut text = if found.matches == 0 { "[no matches]".to_owned() } else { found.text };
    if found.cut {
        text.push_str(&format!(
            "[truncated: showing the first {} matches; narrow the search with path, glob or a more specific \
             pattern]",
            found.matches
        ));
    }
    if let Some(note) = walked.note() {
        text.push('\n');
        text.push_str(&note);
    }
    call::completed(text)
}

fn search_file(
    regex: &Regex,
    cwd: &Path,
    path: &Path,
    protected: &Protected,
    secrets: &[Secret],
    found: &mut Found,
) -> ControlFlow<()> {
    // Regular files only, read within the cap; another name of a home or credential file
    // is skipped.
    let read = fsio::read_capped(path, files::MAX_FILE_BYTES, |meta| {
        fsio::other_name_refusal(protected, meta, path)
    });
    let Ok(Some(bytes)) = read else { return ControlFlow::Continue(()) };
    if super::text::is_binary(&bytes[..bytes.len().min(8192)]) {
        return ControlFlow::Continue(());
    }
    let shown = walk::shown_name(&call::shown_from(cwd, path));
    for (index, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if !regex.is_match(line) {
            continue;
        }
        let line = String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(line));
        // Redacted before it is clipped: a cut inside a key leaves a part that redaction of
        // the result could no longer recognise.
        let line = crate::secret::redact(&line, secrets);
        let mut clipped: String = line.chars().take(MAX_LINE_CHARS).collect();
        if clipped.len() < line.len() {
            clipped.push('…');
        }
        let entry = format!("{shown}:{}: {clipped}\n", index + 1);
        if found.matches == MAX_MATCHES || found.text.len() + entry.len() > MAX_BYTES {
            found.cut = true;
            return ControlFlow::Break(());
        }
        found.text.push_str(&entry);
        found.matches += 1;
    }
    ControlFlow::Continue(())
}
