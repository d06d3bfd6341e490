//! Refresh mode (`UPDATE_TRANSCRIPTS=1`): the expectation lines that replace a segment
//! whose messages changed, keeping what the old lines generalised and where they repeated.

use serde_json::Value;

use crate::format::{Expectation, Item, expect_line};
use crate::matcher::{Bindings, Paths, generalize, matches, merge, signature};

/// The lines that replace a segment whose messages changed.
pub(super) fn rewrite_segment(
    items: &[&Item],
    seen: &[Value],
    paths: &Paths,
    bindings: &mut Bindings,
) -> Vec<String> {
    let olds: Vec<&Expectation> = items
        .iter()
        .flat_map(|item| match item {
            Item::Expect(e) => vec![e],
            Item::Unordered { entries, .. } => entries.iter().collect(),
            _ => Vec::new(),
        })
        .collect();
    let mut taken = vec![false; olds.len()];
    let mut out: Vec<(Value, bool)> = Vec::new();
    for message in seen {
        if let Some((pattern, true)) = out.last()
            && matches(pattern, message, paths, bindings).is_ok()
        {
            continue;
        }
        let old = (0..olds.len()).find(|i| !taken[*i] && signature(&olds[*i].pattern) == signature(message));
        let (pattern, repeat) = match old {
            Some(index) => {
                taken[index] = true;
                let old = olds[index];
                let still = matches(&old.pattern, message, paths, &mut bindings.clone()).is_ok();
                (merge(&old.pattern, message, paths, bindings), old.repeat && still)
            }
            None => (generalize(message, paths, bindings), false),
        };
        let _ = matches(&pattern, message, paths, bindings);
        out.push((pattern, repeat));
    }
    let unordered = items.iter().any(|i| matches!(i, Item::Unordered { .. })) && out.len() > 1;
    let mut lines = Vec::new();
    if unordered {
        lines.push(r#"{"unordered": "begin"}"#.to_owned());
    }
    lines.extend(out.iter().map(|(p, r)| expect_line(p, *r)));
    if unordered {
        lines.push(r#"{"unordered": "end"}"#.to_owned());
    }
    lines
}
