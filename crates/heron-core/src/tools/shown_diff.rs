//! What a file change shows the user (the pending card, the permission request, the
//! result, the store and every replay of it): the whole old and new text while they are
//! small, else only the changed lines with a few lines of context around each change.
//! Invariants:
//!
//! - A shown diff holds at most [`MAX_SHOWN_DIFF_BYTES`] of file text (old and new
//!   together): two one-word edits of a 30 MiB file used to send and store 60 MiB each.
//! - A clipped diff keeps ACP's meaning of `oldText`/`newText` (the text before and after,
//!   compared line by line): both hold the same excerpts, and each run of lines left out
//!   is one identical marker line on both sides, so a client renders it as unchanged
//!   context and every change in its place. A text notice beside it says it was clipped.
//! - [`Shown::whole`] says whether every changed line is shown. A change that cannot be
//!   shown whole is never offered for approval (`files::PlannedChange::shown_in`): what
//!   the user approves is all of what runs.

use std::ops::Range;

use crate::types::ToolOutput;

/// The most bytes of file text, old and new together, one shown diff holds.
pub const MAX_SHOWN_DIFF_BYTES: usize = 1024 * 1024;

/// How a clipped diff's marker line ends, after the count of lines it stands for: what
/// tells a stored diff that is not the whole file (a rewind cannot put one back).
pub const LEFT_OUT: &str = "unchanged lines not shown ⋯";

/// Unchanged lines shown before and after each change of a clipped diff.
const CONTEXT_LINES: usize = 3;

/// The most lines of each side between the first and the last difference that are diffed
/// line by line: listing them costs 16 bytes a line (a 64 MiB file of empty lines would
/// take a gigabyte). Past it, all of them are one change, too large to show.
const MAX_DIFFED_LINES: usize = 200_000;

/// How far past a difference the lines are searched for where the texts agree again
/// (see [`changes`]).
const RESYNC_WINDOW: usize = 128;

/// A change as shown.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shown {
    /// The diff, and a notice first when it was clipped.
    pub outputs: Vec<ToolOutput>,
    /// Whether every changed line is in it.
    pub whole: bool,
    /// Changed lines left out, when it is not whole.
    pub hidden_lines: usize,
    /// Bytes of the changed lines and their context, all of it, when it is not whole.
    pub changed_bytes: usize,
}

/// How the change of `path` from `old` (`None`: a new file) to `new` is shown.
pub(crate) fn show(path: &str, old: Option<&str>, new: &str) -> Shown {
    show_within(path, old, new, MAX_SHOWN_DIFF_BYTES)
}

fn show_within(path: &str, old: Option<&str>, new: &str, cap: usize) -> Shown {
    if old.map_or(0, str::len) + new.len() <= cap {
        let diff = ToolOutput::Diff {
            path: path.to_owned(),
            old_text: old.map(str::to_owned),
            new_text: new.to_owned(),
        };
        return Shown { outputs: vec![diff], whole: true, hidden_lines: 0, changed_bytes: 0 };
    }
    let before = old.unwrap_or("");
    let (start, old_end, new_end) = trimmed(before, new);
    let lines_before = memchr::memchr_iter(b'\n', &before.as_bytes()[..start]).count();
    let (old_middle, new_middle) = (&before[start..old_end], &new[start..new_end]);
    // Past the line bound the lines are not even listed: the middle is one change.
    let (old_lines, new_lines): (Vec<&str>, Vec<&str>) =
        if line_count(old_middle).max(line_count(new_middle)) <= MAX_DIFFED_LINES {
            (old_middle.split_inclusive('\n').collect(), new_middle.split_inclusive('\n').collect())
        } else {
            (vec![old_middle], vec![new_middle])
        };
    let total_lines = lines_before + line_count(old_middle) + line_count(&before[old_end..]);
    let mut excerpt = Excerpt::default();
    // The next line of the whole old text not yet shown or counted as left out.
    let mut next = 0;
    let (mut hidden_lines, mut changed_bytes, mut shown_all, mut shown_any) = (0, 0, true, false);
    for hunk in hunks(&changes(&old_lines, &new_lines), old_lines.len()) {
        let olds = &old_lines[hunk.old.clone()];
        let news = &new_lines[hunk.new.clone()];
        let size = olds.iter().chain(news).map(|l| l.len()).sum::<usize>();
        changed_bytes += size;
        if !shown_all || excerpt.len() + size + 2 * MARKER_BYTES > cap {
            shown_all = false;
            hidden_lines += hunk.changed;
            continue;
        }
        excerpt.skip(lines_before + hunk.old.start - next);
        excerpt.push(olds, news);
        shown_any = true;
        next = lines_before + hunk.old.end;
    }
    excerpt.skip(total_lines.saturating_sub(next));
    let whole = shown_all;
    let notice = if whole {
        format!(
            "{path} is too large to show whole here: only the changed lines are shown, with {CONTEXT_LINES} \
             lines around each change; the lines between are left out, as a marked line."
        )
    } else {
        format!(
            "The change to {path} is too large to show: {hidden_lines} changed lines ({changed_bytes} bytes with \
             their context) are past the {cap} bytes a diff shows, and are not in the diff below."
        )
    };
    let mut outputs = vec![ToolOutput::Text { text: notice }];
    // Markers alone would show nothing of the change.
    if shown_any {
        outputs.push(ToolOutput::Diff {
            path: path.to_owned(),
            old_text: old.map(|_| excerpt.old),
            new_text: excerpt.new,
        });
    }
    Shown { outputs, whole, hidden_lines, changed_bytes: if whole { 0 } else { changed_bytes } }
}

/// Where `old` and `new` (lines, each with its line feed) differ: pairs of ranges, in
/// order, with equal lines paired one to one between them. Linear for changes made in
/// place (an edit, a few): after a difference, the nearest place where both agree again
/// for a few lines is searched within [`RESYNC_WINDOW`] lines of each; with none, the rest
/// of both is one change. Not always the smallest diff (a general one can take minutes
/// on a large file, and had to be cut short under load, which made a two-line edit look
/// like a rewrite), but always a true one: every line it leaves out is the same on both
/// sides.
fn changes(old: &[&str], new: &[&str]) -> Vec<(Range<usize>, Range<usize>)> {
    // Lines `i` and `j` start a run where both agree for a few lines (or to an end).
    let agree = |i: usize, j: usize| {
        (0..3).all(|k| match (old.get(i + k), new.get(j + k)) {
            (Some(a), Some(b)) => a == b,
            (None, None) => true,
            _ => k > 0,
        })
    };
    let mut found = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < old.len() && j < new.len() {
        if old[i] == new[j] {
            (i, j) = (i + 1, j + 1);
            continue;
        }
        let resync = (1..=2 * RESYNC_WINDOW).find_map(|distance| {
            let from = distance.saturating_sub(RESYNC_WINDOW);
            (from..=distance.min(RESYNC_WINDOW))
                .map(|skip_old| (skip_old, distance - skip_old))
                .find(|&(a, b)| i + a < old.len() && j + b < new.len() && agree(i + a, j + b))
        });
        let Some((a, b)) = resync else { break };
        found.push((i..i + a, j..j + b));
        (i, j) = (i + a, j + b);
    }
    if i < old.len() || j < new.len() {
        found.push((i..old.len(), j..new.len()));
    }
    found
}

/// Changes near each other, shown as one piece with their context.
struct Hunk {
    old: Range<usize>,
    new: Range<usize>,
    /// Changed lines in it (the longer side of each change).
    changed: usize,
}

/// The hunks of `changes` in a text of `lines` old lines: changes closer than twice the
/// context share one, and each has up to [`CONTEXT_LINES`] equal lines before and after.
fn hunks(changes: &[(Range<usize>, Range<usize>)], lines: usize) -> Vec<Hunk> {
    let mut hunks: Vec<Hunk> = Vec::new();
    for (old, new) in changes {
        let changed = old.len().max(new.len());
        match hunks.last_mut() {
            Some(last) if old.start - last.old.end <= 2 * CONTEXT_LINES => {
                (last.old.end, last.new.end) = (old.end, new.end);
                last.changed += changed;
            }
            _ => hunks.push(Hunk { old: old.clone(), new: new.clone(), changed }),
        }
    }
    // The lines around each are equal on both sides, so both grow by the same count.
    let mut previous_end = 0;
    for index in 0..hunks.len() {
        let following = hunks.get(index + 1).map_or(lines, |h| h.old.start);
        let hunk = &mut hunks[index];
        let before = CONTEXT_LINES.min(hunk.old.start - previous_end);
        let after = CONTEXT_LINES.min(following - hunk.old.end);
        previous_end = hunk.old.end;
        hunk.old = hunk.old.start - before..hunk.old.end + after;
        hunk.new = hunk.new.start - before..hunk.new.end + after;
    }
    hunks
}

/// The most bytes of a marker line (see [`Excerpt::skip`]).
const MARKER_BYTES: usize = 64;

/// The old and new excerpts of a clipped diff.
#[derive(Default)]
struct Excerpt {
    old: String,
    new: String,
}

impl Excerpt {
    fn len(&self) -> usize {
        self.old.len() + self.new.len()
    }

    /// Marks `lines` unchanged lines as left out: one line, the same on both sides.
    fn skip(&mut self, lines: usize) {
        if lines == 0 {
            return;
        }
        let marker = format!("⋯ {lines} {LEFT_OUT}\n");
        self.old.push_str(&marker);
        self.new.push_str(&marker);
    }

    fn push(&mut self, olds: &[&str], news: &[&str]) {
        olds.iter().for_each(|line| self.old.push_str(line));
        news.iter().for_each(|line| self.new.push_str(line));
    }
}

/// Lines of `text`, the last counted even without its line feed.
fn line_count(text: &str) -> usize {
    let feeds = memchr::memchr_iter(b'\n', text.as_bytes()).count();
    feeds + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

/// Where the two texts differ, in whole lines and with [`CONTEXT_LINES`] of context on
/// each side kept in: the common part before `start` and after `old_end` (in `old`) and
/// `new_end` (in `new`) is the same in both and need not be diffed. Every bound is the
/// start of a line (or an end of the text), so a char boundary.
fn trimmed(old: &str, new: &str) -> (usize, usize, usize) {
    let (o, n) = (old.as_bytes(), new.as_bytes());
    let prefix = o.iter().zip(n).take_while(|(a, b)| a == b).count();
    // Back to the start of the line the first difference is on, then the context before it.
    let mut start = o[..prefix].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    for _ in 0..CONTEXT_LINES {
        start = match start.checked_sub(1).and_then(|end| o[..end].iter().rposition(|&b| b == b'\n')) {
            Some(i) => i + 1,
            None => 0,
        };
    }
    let room = o.len().min(n.len()) - prefix;
    let suffix = o.iter().rev().zip(n.iter().rev()).take(room).take_while(|(a, b)| a == b).count();
    // Forward to the start of the first whole line of the common end, then past the
    // context after the last difference.
    let mut old_end = o.len() - suffix;
    if old_end > 0 && o[old_end - 1] != b'\n' {
        old_end = o[old_end..].iter().position(|&b| b == b'\n').map_or(o.len(), |i| old_end + i + 1);
    }
    for _ in 0..CONTEXT_LINES {
        if old_end < o.len() {
            old_end = o[old_end..].iter().position(|&b| b == b'\n').map_or(o.len(), |i| old_end + i + 1);
        }
    }
    let new_end = n.len() - (o.len() - old_end);
    (start, old_end, new_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(lines: usize) -> String {
        (0..lines).map(|i| format!("line {i}\n")).collect()
    }

    fn texts(shown: &Shown) -> (Option<String>, String) {
        match shown.outputs.iter().find(|o| matches!(o, ToolOutput::Diff { .. })) {
            Some(ToolOutput::Diff { old_text, new_text, .. }) => (old_text.clone(), new_text.clone()),
            _ => (None, String::new()),
        }
    }

    #[test]
    fn a_small_change_is_shown_whole() {
        let shown = show("/w/a.txt", Some("a\nb\n"), "a\nc\n");
        assert!(shown.whole);
        assert_eq!(texts(&shown), (Some("a\nb\n".to_owned()), "a\nc\n".to_owned()));
        assert_eq!(shown.outputs.len(), 1, "no notice");
    }

    #[test]
    fn two_edits_of_a_large_file_show_only_their_lines_and_context() {
        let old = numbered(200_000);
        let new = old.replace("line 10\n", "LINE TEN\n").replace("line 150000\n", "LINE 150000\n");
        let shown = show("/w/big.txt", Some(&old), &new);
        assert!(shown.whole);
        let (before, after) = texts(&shown);
        let before = before.expect("an old text");
        assert!(before.len() + after.len() < 4096, "{} bytes", before.len() + after.len());
        assert!(
            matches!(&shown.outputs[0], ToolOutput::Text { text } if text.contains("only the changed lines"))
        );
        // The same excerpt on both sides but the changed lines: a line diff of the two
        // shows exactly the two changes.
        let (olds, news): (Vec<&str>, Vec<&str>) =
            (before.split_inclusive('\n').collect(), after.split_inclusive('\n').collect());
        let changed: Vec<(Vec<&str>, Vec<&str>)> =
            changes(&olds, &news).into_iter().map(|(o, n)| (olds[o].to_vec(), news[n].to_vec())).collect();
        assert_eq!(
            changed,
            [(vec!["line 10\n"], vec!["LINE TEN\n"]), (vec!["line 150000\n"], vec!["LINE 150000\n"])]
        );
        assert!(before.starts_with("⋯ 7 unchanged lines not shown ⋯\nline 7\n"), "{before}");
        assert!(before.contains("line 13\n⋯ 149983 unchanged lines not shown ⋯\nline 149997\n"), "{before}");
        assert!(before.ends_with("line 150003\n⋯ 49996 unchanged lines not shown ⋯\n"), "{before}");
    }

    #[test]
    fn a_change_too_large_to_show_says_so_and_is_not_whole() {
        let old = "a".repeat(100);
        let new = "b".repeat(5000);
        let shown = show_within("/w/f", Some(&old), &new, 1000);
        assert!(!shown.whole);
        assert_eq!(shown.hidden_lines, 1);
        assert!(
            matches!(&shown.outputs[..], [ToolOutput::Text { text }] if text.contains("too large to show"))
        );
        // A new file too large to show: the notice alone.
        let created = show_within("/w/new", None, &numbered(1000), 1000);
        assert!(!created.whole && created.outputs.len() == 1, "{created:?}");
    }

    #[test]
    fn changes_past_the_cap_are_left_out_and_counted() {
        let old = numbered(10_000);
        let new = old.replace("line 100\n", "A\n").replace("line 9000\n", &format!("{}\n", "B".repeat(2000)));
        let shown = show_within("/w/f", Some(&old), &new, 1500);
        assert!(!shown.whole);
        let (before, after) = texts(&shown);
        assert!(after.contains("A\n") && !after.contains('B'), "{after}");
        assert!(before.expect("old").len() + after.len() <= 1500);
        assert_eq!(shown.hidden_lines, 1);
    }

    #[test]
    fn lines_inserted_and_removed_are_found_in_their_place() {
        let old = ["a\n", "b\n", "c\n", "d\n", "e\n", "f\n", "g\n", "h\n", "i\n", "j\n"];
        let new = ["a\n", "X\n", "Y\n", "b\n", "c\n", "d\n", "f\n", "g\n", "h\n", "i\n", "j\n", "Z\n"];
        assert_eq!(changes(&old, &new), [(1..1, 1..3), (4..5, 6..6), (10..10, 11..12)]);
        // A rewrite has no place where both agree again: all of it is one change.
        let other = ["1\n", "2\n", "3\n"];
        assert_eq!(changes(&old, &other), [(0..10, 0..3)]);
    }

    #[test]
    fn trimming_keeps_whole_lines_and_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nX\n6\n7\n8\n9\n";
        let (start, old_end, new_end) = trimmed(old, new);
        assert_eq!(&old[start..old_end], "2\n3\n4\n5\n6\n7\n8\n");
        assert_eq!(&new[start..new_end], "2\n3\n4\nX\n6\n7\n8\n");
        // One text a prefix of the other, and texts without a final line feed.
        let (start, old_end, new_end) = trimmed("a\nb", "a\nb\nc");
        assert_eq!((&"a\nb"[start..old_end], &"a\nb\nc"[start..new_end]), ("a\nb", "a\nb\nc"));
        assert_eq!(trimmed("", "x"), (0, 0, 1));
    }
}
