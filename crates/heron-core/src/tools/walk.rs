//! Walking a directory tree for the search tools the way a developer would: `.gitignore`
//! and friends respected (with or without a git repository), hidden files and `.git`
//! skipped, symlinks never followed (a walk cannot leave its root through one or loop on
//! one; a listing may show them as links), entries in sorted order. Heron's home is stepped around
//! when a walk contains it. Stops as soon as cancelled, and says what it could not see:
//! trees deeper than [`MAX_DEPTH`], entries it could not read.

use std::ops::ControlFlow;
use std::path::Path;

use globset::{Glob, GlobMatcher};
use tokio_util::sync::CancellationToken;

use super::FileWitness;
use super::protected::Protected;

/// How deep a walk goes below its root.
pub(crate) const MAX_DEPTH: usize = 64;

/// Compiles a glob pattern; the `Err` is a message for the model.
pub(crate) fn glob(pattern: &str) -> Result<GlobMatcher, String> {
    Glob::new(pattern)
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("invalid glob pattern {pattern:?}: {e}"))
}

/// What a walk saw besides the files it visited.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Walked {
    /// It ran to the end or `visit` stopped it (not cancelled).
    pub finished: bool,
    /// Directories at [`MAX_DEPTH`] that held more, not walked.
    pub too_deep: usize,
    /// Entries that could not be read, and the first reason.
    pub unreadable: usize,
    /// The first read failure.
    pub first_error: Option<String>,
}

impl Walked {
    /// A line for the model about what the walk could not see, if anything.
    pub(crate) fn note(&self) -> Option<String> {
        let mut notes = Vec::new();
        if self.too_deep > 0 {
            notes.push(format!(
                "{} directories deeper than {MAX_DEPTH} levels were not searched; start from a deeper path",
                self.too_deep
            ));
        }
        if self.unreadable > 0 {
            let first = self.first_error.as_deref().unwrap_or("unknown");
            notes.push(format!("{} entries could not be read (first: {first})", self.unreadable));
        }
        (!notes.is_empty()).then(|| format!("[{}]", notes.join("; ")))
    }
}

/// What a walk hands its visitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen<'a> {
    /// A regular file.
    File(&'a Path),
    /// A symlink (to a file, a directory or nothing), not followed, and what it names, as
    /// it names it.
    Link(&'a Path, &'a Path),
}

/// Whether a walk hands its visitor the symlinks it passes, or only files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Links {
    /// Files only: what is read (grep) is never reached through a link.
    Skip,
    /// Files and links: a listing shows that the link is there and where it points.
    Show,
}

/// Calls `visit` with every file under `root` (or `root` itself when it is a file) whose
/// path relative to `root` matches `filter`, and with every symlink when `links` says so,
/// in sorted order, until `visit` breaks or `cancel` fires; `witness` sees each file first.
/// Nothing inside `protected`'s Heron home is visited or listed.
pub(crate) fn files(
    root: &Path,
    filter: Option<&GlobMatcher>,
    cancel: &CancellationToken,
    witness: Option<&dyn FileWitness>,
    protected: &Protected,
    links: Links,
    mut visit: impl FnMut(Seen<'_>) -> ControlFlow<()>,
) -> Walked {
    let skip_home = protected.contains_home(root);
    let home = protected.clone();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .follow_links(false)
        .max_depth(Some(MAX_DEPTH))
        .filter_entry(move |entry| entry.file_name() != ".git" && !(skip_home && home.is_home(entry.path())))
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    let mut walked = Walked::default();
    for entry in walker {
        if cancel.is_cancelled() {
            return walked;
        }
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                walked.unreadable += 1;
                walked.first_error.get_or_insert_with(|| err.to_string());
                continue;
            }
        };
        let Some(kind) = entry.file_type() else { continue };
        if kind.is_dir() && entry.depth() == MAX_DEPTH && dir_has_entries(entry.path()) {
            walked.too_deep += 1;
            continue;
        }
        let link = kind.is_symlink() && links == Links::Show;
        if !kind.is_file() && !link {
            continue;
        }
        let path = entry.path();
        if let Some(filter) = filter {
            let relative = path.strip_prefix(root).ok().filter(|r| !r.as_os_str().is_empty());
            let name = relative.unwrap_or_else(|| Path::new(path.file_name().unwrap_or_default()));
            if !filter.is_match(name) {
                continue;
            }
        }
        let seen = if link {
            // Only the link itself is read, never what it points to.
            match std::fs::read_link(path) {
                Ok(target) => visit(Seen::Link(path, &target)),
                Err(err) => {
                    walked.unreadable += 1;
                    walked.first_error.get_or_insert_with(|| format!("{}: {err}", path.display()));
                    continue;
                }
            }
        } else {
            if let Some(witness) = witness {
                witness.before_use(path);
            }
            visit(Seen::File(path))
        };
        if seen.is_break() {
            break;
        }
    }
    walked.finished = true;
    walked
}

fn dir_has_entries(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
}

/// A path as a listing shows it: control characters escaped, so a name cannot fake the
/// lines around it, and so are the characters that move or reorder text without being
/// control characters: the line and paragraph separators (U+2028, U+2029, which some
/// readers take as line breaks) and the bidirectional marks, embeddings, overrides and
/// isolates (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), which make
/// `evil\u{202e}txt.exe` read as `evilexe.txt`.
pub(crate) fn shown_name(path: &str) -> String {
    if !path.chars().any(escaped) {
        return path.to_owned();
    }
    path.chars().map(|c| if escaped(c) { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// Whether a listing shows `c` escaped (see [`shown_name`]).
fn escaped(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{061c}' | '\u{200e}' | '\u{200f}')
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_in_names_are_escaped() {
        assert_eq!(shown_name("a\nb.txt: 1: fake"), "a\\nb.txt: 1: fake");
        assert_eq!(shown_name("plain/ünï.rs"), "plain/ünï.rs");
    }

    #[test]
    fn separators_and_bidi_controls_in_names_are_escaped() {
        assert_eq!(shown_name("ls\u{2028}sep"), "ls\\u{2028}sep");
        assert_eq!(shown_name("para\u{2029}x"), "para\\u{2029}x");
        assert_eq!(shown_name("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        for c in ['\u{202a}', '\u{202d}', '\u{2066}', '\u{2069}', '\u{200e}', '\u{200f}', '\u{061c}'] {
            let shown = shown_name(&format!("a{c}b"));
            assert!(!shown.contains(c) && shown.starts_with("a\\u{"), "{c:?} shown as {shown:?}");
        }
        // Neighbours of the ranges are ordinary text.
        assert_eq!(shown_name("a\u{2027}\u{202f}\u{2065}\u{206a}b"), "a\u{2027}\u{202f}\u{2065}\u{206a}b");
    }
}
