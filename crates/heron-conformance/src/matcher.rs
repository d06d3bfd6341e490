//! Matches an agent's message against a transcript pattern, fills placeholders into the
//! client's messages, and renders a failure as expected and actual side by side.
//!
//! Pattern rules (also in `conformance/README.md`): `"{...}"` matches any value; `"$name"`
//! (lowercase first letter) binds any value on first sight and must equal it afterwards;
//! `"$ANY_STRING"` and `"$ANY_NUMBER"` match any string or number; `$WS` and `$HOME` inside
//! strings stand for the workspace and HERON_HOME paths; `[..]` inside a string matches any
//! substring; an object with the key `"..."` allows members the pattern does not name.
//! Everything else must be equal, objects member for member and arrays element for element.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// Matches any value.
pub const ANY: &str = "{...}";
/// Inside a string: any substring.
pub const ANY_SUBSTRING: &str = "[..]";
/// An object key allowing members the pattern does not name.
pub const MORE_MEMBERS: &str = "...";

/// The paths a scenario runs in, for `$WS` and `$HOME`.
#[derive(Debug, Clone, Default)]
pub struct Paths {
    /// The workspace (the session cwd).
    pub ws: String,
    /// HERON_HOME.
    pub home: String,
}

/// Values bound to `$name` placeholders, in order of first sight.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bindings(BTreeMap<String, Value>);

impl Bindings {
    /// The value bound to `name` (without `$`).
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }

    /// Binds `name` (without `$`) to `value`.
    pub fn bind(&mut self, name: &str, value: Value) {
        self.0.insert(name.to_owned(), value);
    }

    /// The name bound to this string value, for turning actual values back into placeholders.
    /// Only values long enough not to be a coincidence (generated ids) qualify.
    fn name_of(&self, text: &str) -> Option<&str> {
        if text.len() < 8 {
            return None;
        }
        self.0.iter().find(|(_, v)| v.as_str() == Some(text)).map(|(k, _)| k.as_str())
    }
}

/// Where and why a message did not match.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// A JSON path like `$.params.update.content`.
    pub path: String,
    /// What differs.
    pub reason: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at {}: {}", self.path, self.reason)
    }
}

/// The variable name of a `$name` placeholder.
fn variable(text: &str) -> Option<&str> {
    let name = text.strip_prefix('$')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    (first.is_ascii_lowercase() && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')).then_some(name)
}

/// `$WS` and `$HOME` replaced inside a string.
pub fn expand_paths(text: &str, paths: &Paths) -> String {
    text.replace("$WS", &paths.ws).replace("$HOME", &paths.home)
}

/// Matches `actual` against `pattern`, binding new variables only if the whole match succeeds.
pub fn matches(
    pattern: &Value,
    actual: &Value,
    paths: &Paths,
    bindings: &mut Bindings,
) -> Result<(), Mismatch> {
    let mut trial = bindings.clone();
    match_at(pattern, actual, "$", paths, &mut trial)?;
    *bindings = trial;
    Ok(())
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 80 { format!("{}…", text.chars().take(80).collect::<String>()) } else { text }
}

fn match_at(
    pattern: &Value,
    actual: &Value,
    path: &str,
    paths: &Paths,
    bindings: &mut Bindings,
) -> Result<(), Mismatch> {
    let fail = |reason: String| Err(Mismatch { path: path.to_owned(), reason });
    match pattern {
        Value::String(text) if text == ANY => Ok(()),
        Value::String(text) if text == "$ANY_STRING" => {
            if actual.is_string() {
                Ok(())
            } else {
                fail(format!("expected a string, got {}", short(actual)))
            }
        }
        Value::String(text) if text == "$ANY_NUMBER" => {
            if actual.is_number() {
                Ok(())
            } else {
                fail(format!("expected a number, got {}", short(actual)))
            }
        }
        Value::String(text) if variable(text).is_some() => {
            let name = variable(text).unwrap_or_default();
            match bindings.0.get(name) {
                Some(bound) if bound == actual => Ok(()),
                Some(bound) => {
                    fail(format!("{text} was bound to {} but this is {}", short(bound), short(actual)))
                }
                None => {
                    bindings.0.insert(name.to_owned(), actual.clone());
                    Ok(())
                }
            }
        }
        Value::String(text) => {
            let expected = expand_paths(text, paths);
            match actual.as_str() {
                Some(got) if wildcard_match(&expected, got) => Ok(()),
                _ => fail(format!("expected {}, got {}", short(&Value::String(expected)), short(actual))),
            }
        }
        Value::Object(want) => {
            let Some(got) = actual.as_object() else {
                return fail(format!("expected an object, got {}", short(actual)));
            };
            for (key, sub) in want {
                if key == MORE_MEMBERS {
                    continue;
                }
                match got.get(key) {
                    Some(value) => match_at(sub, value, &format!("{path}.{key}"), paths, bindings)?,
                    None => return fail(format!("member `{key}` is missing")),
                }
            }
            if !want.contains_key(MORE_MEMBERS)
                && let Some(extra) = got.keys().find(|k| !want.contains_key(*k))
            {
                return fail(format!("unexpected member `{extra}`: {}", short(&got[extra])));
            }
            Ok(())
        }
        Value::Array(want) => {
            let Some(got) = actual.as_array() else {
                return fail(format!("expected an array, got {}", short(actual)));
            };
            if want.len() != got.len() {
                return fail(format!("expected {} elements, got {}", want.len(), got.len()));
            }
            for (index, (sub, value)) in want.iter().zip(got).enumerate() {
                match_at(sub, value, &format!("{path}[{index}]"), paths, bindings)?;
            }
            Ok(())
        }
        _ => {
            if pattern == actual {
                Ok(())
            } else {
                fail(format!("expected {}, got {}", short(pattern), short(actual)))
            }
        }
    }
}

/// Whether `text` matches `pattern`, where `[..]` in the pattern matches any substring.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split(ANY_SUBSTRING);
    let Some(first) = parts.next() else { return pattern == text };
    let Some(mut rest) = text.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Why a client message could not be filled in.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0} is used before the agent sent a value for it")]
pub struct Unbound(pub String);

/// A client message with `$name` placeholders replaced by their bound values and `$WS` and
/// `$HOME` expanded inside strings.
pub fn fill(message: &Value, paths: &Paths, bindings: &Bindings) -> Result<Value, Unbound> {
    Ok(match message {
        Value::String(text) => match variable(text) {
            Some(name) => bindings.get(name).cloned().ok_or_else(|| Unbound(text.clone()))?,
            None => Value::String(expand_paths(text, paths)),
        },
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| fill(v, paths, bindings)).collect::<Result<_, _>>()?)
        }
        Value::Object(members) => {
            let mut filled = Map::new();
            for (key, value) in members {
                filled.insert(key.clone(), fill(value, paths, bindings)?);
            }
            Value::Object(filled)
        }
        other => other.clone(),
    })
}

/// Whether a string looks generated: a UUID-like id.
fn looks_generated(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// `text` with UUID-like ids inside it (file names, paths) replaced by `[..]`.
fn mask_embedded_ids(text: &str) -> String {
    const LEN: usize = 36;
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < text.len() {
        let window = text.get(at..at + LEN).filter(|w| looks_generated(w));
        match window {
            Some(_) => {
                out.push_str(ANY_SUBSTRING);
                at += LEN;
            }
            None => {
                let next = text[at..].chars().next().map_or(1, char::len_utf8);
                out.push_str(&text[at..at + next]);
                at += next;
            }
        }
    }
    out
}

/// Whether a string looks like a timestamp (`2025-01-31T12:00:00...`).
fn looks_like_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 19
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes[10] == b'T'
}

/// A fresh variable name for a generated id found under `key` (`messageId` -> `$message1`).
fn fresh_name(key: Option<&str>, bindings: &Bindings) -> String {
    let stem: String = key
        .map(|k| k.trim_end_matches("Id").chars().filter(char::is_ascii_alphanumeric).collect::<String>())
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| "id".to_owned())
        .to_ascii_lowercase();
    let stem = if stem.starts_with(|c: char| c.is_ascii_lowercase()) { stem } else { format!("v{stem}") };
    (1..).map(|n| format!("{stem}{n}")).find(|name| bindings.get(name).is_none()).unwrap_or(stem)
}

/// An actual message turned into a pattern: paths become `$WS`/`$HOME`, ids already bound
/// their placeholder, new generated ids a fresh variable (bound here), timestamps
/// `$ANY_STRING`.
pub fn generalize(actual: &Value, paths: &Paths, bindings: &mut Bindings) -> Value {
    generalize_at(actual, None, paths, bindings)
}

fn generalize_at(actual: &Value, key: Option<&str>, paths: &Paths, bindings: &mut Bindings) -> Value {
    match actual {
        Value::String(text) => {
            if let Some(name) = bindings.name_of(text) {
                return Value::String(format!("${name}"));
            }
            if looks_generated(text) {
                let name = fresh_name(key, bindings);
                bindings.0.insert(name.clone(), actual.clone());
                return Value::String(format!("${name}"));
            }
            if looks_like_time(text) {
                return Value::String("$ANY_STRING".to_owned());
            }
            Value::String(mask_embedded_ids(&replace_paths(text, paths)))
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| generalize_at(v, key, paths, bindings)).collect())
        }
        Value::Object(members) => Value::Object(
            members.iter().map(|(k, v)| (k.clone(), generalize_at(v, Some(k), paths, bindings))).collect(),
        ),
        other => other.clone(),
    }
}

/// A message the client sent, turned into a send line: values bound to a `$name` become
/// it again, paths `$WS`/`$HOME`. Nothing new is bound: a send can only use what the agent
/// said before it.
pub fn generalize_sent(message: &Value, paths: &Paths, bindings: &Bindings) -> Value {
    match message {
        Value::String(text) => match bindings.name_of(text) {
            Some(name) => Value::String(format!("${name}")),
            None => Value::String(replace_paths(text, paths)),
        },
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| generalize_sent(v, paths, bindings)).collect())
        }
        Value::Object(members) => Value::Object(
            members.iter().map(|(k, v)| (k.clone(), generalize_sent(v, paths, bindings))).collect(),
        ),
        other => other.clone(),
    }
}

/// `text` with the workspace and home paths replaced by `$WS` and `$HOME`.
fn replace_paths(text: &str, paths: &Paths) -> String {
    let mut text = text.to_owned();
    // The longer path first, in case one holds the other.
    let mut pairs = [(&paths.ws, "$WS"), (&paths.home, "$HOME")];
    pairs.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    for (path, name) in pairs {
        if !path.is_empty() {
            text = text.replace(path.as_str(), name);
        }
    }
    text
}

/// A new pattern for `actual` that keeps the old pattern's placeholders wherever they still
/// match, and takes the actual value (generalized) everywhere else.
pub fn merge(old: &Value, actual: &Value, paths: &Paths, bindings: &mut Bindings) -> Value {
    merge_at(old, actual, None, paths, bindings)
}

fn merge_at(old: &Value, actual: &Value, key: Option<&str>, paths: &Paths, bindings: &mut Bindings) -> Value {
    if matches(old, actual, paths, bindings).is_ok() {
        return old.clone();
    }
    match (old, actual) {
        (Value::Object(want), Value::Object(got)) => {
            let mut merged = Map::new();
            for (key, value) in got {
                let member = match want.get(key) {
                    Some(sub) => merge_at(sub, value, Some(key), paths, bindings),
                    None => generalize_at(value, Some(key), paths, bindings),
                };
                merged.insert(key.clone(), member);
            }
            if want.contains_key(MORE_MEMBERS) {
                merged.insert(MORE_MEMBERS.to_owned(), want[MORE_MEMBERS].clone());
            }
            Value::Object(merged)
        }
        (Value::Array(want), Value::Array(got)) if want.len() == got.len() => Value::Array(
            want.iter().zip(got).map(|(sub, value)| merge_at(sub, value, key, paths, bindings)).collect(),
        ),
        _ => generalize_at(actual, key, paths, bindings),
    }
}

/// A short signature of a message, to pair an actual message with the old expectation of
/// the same kind when refreshing: method and update kind, or `response`/`error`.
pub fn signature(message: &Value) -> String {
    let method = message.get("method").and_then(Value::as_str);
    let update = message.pointer("/params/update/sessionUpdate").and_then(Value::as_str);
    match (method, update) {
        (Some(method), Some(update)) => format!("{method}:{update}"),
        (Some(method), None) => method.to_owned(),
        (None, _) if message.get("error").is_some() => "error".to_owned(),
        (None, _) => "response".to_owned(),
    }
}

/// Expected and actual pretty-printed in two columns; differing lines are marked `|`, lines
/// only on one side `<` or `>`.
pub fn side_by_side(expected: &Value, actual: &Value) -> String {
    let left = serde_json::to_string_pretty(expected).unwrap_or_default();
    let right = serde_json::to_string_pretty(actual).unwrap_or_default();
    let diff = similar::TextDiff::from_lines(&left, &right);
    let mut rows: Vec<(String, char, String)> = Vec::new();
    let mut deleted: Vec<String> = Vec::new();
    let mut inserted: Vec<String> = Vec::new();
    let flush =
        |rows: &mut Vec<(String, char, String)>, deleted: &mut Vec<String>, inserted: &mut Vec<String>| {
            let count = deleted.len().max(inserted.len());
            for index in 0..count {
                let l = deleted.get(index).cloned();
                let r = inserted.get(index).cloned();
                let mark = match (&l, &r) {
                    (Some(_), Some(_)) => '|',
                    (Some(_), None) => '<',
                    _ => '>',
                };
                rows.push((l.unwrap_or_default(), mark, r.unwrap_or_default()));
            }
            deleted.clear();
            inserted.clear();
        };
    for change in diff.iter_all_changes() {
        let text = change.value().trim_end_matches('\n').to_owned();
        match change.tag() {
            similar::ChangeTag::Equal => {
                flush(&mut rows, &mut deleted, &mut inserted);
                rows.push((text.clone(), ' ', text));
            }
            similar::ChangeTag::Delete => deleted.push(text),
            similar::ChangeTag::Insert => inserted.push(text),
        }
    }
    flush(&mut rows, &mut deleted, &mut inserted);
    const WIDTH: usize = 60;
    let clip = |text: &str| -> String {
        if text.chars().count() > WIDTH {
            format!("{}…", text.chars().take(WIDTH - 1).collect::<String>())
        } else {
            text.to_owned()
        }
    };
    let mut out = format!("{:<WIDTH$}   {}\n", "expected", "actual");
    out.push_str(&format!("{:<WIDTH$}   {}\n", "-".repeat(8), "-".repeat(6)));
    for (l, mark, r) in rows {
        let line = format!("{:<WIDTH$} {mark} {}", clip(&l), clip(&r));
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths() -> Paths {
        Paths { ws: "/tmp/x/ws".into(), home: "/tmp/x/home".into() }
    }

    #[test]
    fn variables_bind_once_and_must_agree() {
        let mut b = Bindings::default();
        matches(&json!({"id": "$id", "s": "$sid"}), &json!({"id": 1, "s": "a"}), &paths(), &mut b).unwrap();
        assert!(matches(&json!({"s": "$sid"}), &json!({"s": "b"}), &paths(), &mut b).is_err());
        assert!(matches(&json!({"s": "$sid"}), &json!({"s": "a"}), &paths(), &mut b).is_ok());
    }

    #[test]
    fn a_failed_match_binds_nothing() {
        let mut b = Bindings::default();
        assert!(matches(&json!(["$a", 2]), &json!([1, 3]), &paths(), &mut b).is_err());
        assert_eq!(b, Bindings::default());
    }

    #[test]
    fn wildcards_and_paths_match_inside_strings() {
        let mut b = Bindings::default();
        let pattern = json!({"p": "$WS/[..].md", "t": "{...}", "n": "$ANY_NUMBER"});
        let actual = json!({"p": "/tmp/x/ws/NOTES.md", "t": [1, {"a": 2}], "n": 3});
        assert!(matches(&pattern, &actual, &paths(), &mut b).is_ok());
        assert!(wildcard_match("a[..]c[..]", "abcd"));
        assert!(!wildcard_match("a[..]c", "abcd"));
        assert!(wildcard_match("[..]", ""));
    }

    #[test]
    fn objects_are_exact_unless_they_allow_more() {
        let mut b = Bindings::default();
        let err = matches(&json!({"a": 1}), &json!({"a": 1, "b": 2}), &paths(), &mut b).unwrap_err();
        assert_eq!(err.path, "$");
        assert!(err.reason.contains("`b`"));
        assert!(matches(&json!({"a": 1, "...": "..."}), &json!({"a": 1, "b": 2}), &paths(), &mut b).is_ok());
    }

    #[test]
    fn fill_uses_bindings_and_refuses_unbound() {
        let mut b = Bindings::default();
        matches(&json!("$sid"), &json!("s-1"), &paths(), &mut b).unwrap();
        assert_eq!(
            fill(&json!({"s": "$sid", "cwd": "$WS"}), &paths(), &b).unwrap(),
            json!({"s": "s-1", "cwd": "/tmp/x/ws"})
        );
        assert!(fill(&json!("$other"), &paths(), &b).is_err());
    }

    #[test]
    fn merge_keeps_placeholders_that_still_match() {
        let mut b = Bindings::default();
        let old = json!({"id": "$id", "result": {"text": "old", "at": "$ANY_STRING"}});
        let actual = json!({"id": 4, "result": {"text": "new", "at": "2024", "path": "/tmp/x/ws/a",
            "messageId": "0b4e7c1e-8a65-4a57-9a3e-3d6f2b1c9e10", "updatedAt": "2025-01-31T12:00:00Z"}});
        let merged = merge(&old, &actual, &paths(), &mut b);
        assert_eq!(
            merged,
            json!({"id": "$id", "result": {"text": "new", "at": "$ANY_STRING", "path": "$WS/a",
                "messageId": "$message1", "updatedAt": "$ANY_STRING"}})
        );
    }

    #[test]
    fn side_by_side_marks_the_differing_line() {
        let table = side_by_side(&json!({"a": 1, "b": "x"}), &json!({"a": 1, "b": "y"}));
        assert!(
            table.lines().any(|l| l.contains("\"b\": \"x\"") && l.contains(" | ") && l.contains("\"y\""))
        );
    }
}
