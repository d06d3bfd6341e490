//! The transcript file format: a header line, then one protocol step per line (see
//! `conformance/README.md`). Parsing keeps every line's text and number, so a refresh can
//! rewrite expectations in place and leave comments and sent messages untouched.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a scenario needs before the agent starts: its first JSON line.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// What the scenario shows, in a sentence.
    pub scenario: String,
    /// Arguments after `heron acp --validate` (ignored for other agents). `$WS` and `$HOME`
    /// are replaced by the workspace and HERON_HOME paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Scripted model turns, one JSON object each; written to `HERON_HOME/script.jsonl` and
    /// served as the model `script/m`, or under the names in `providers`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub script: Vec<Value>,
    /// Providers the script plays as, in request order (a recording keeps the provider and
    /// model names the session saw); when given, there is no `script/m`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, ScriptedAs>,
    /// More `config.toml` text, appended after the scripted providers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// Files to create in the workspace: relative path to text.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    /// Files to create in HERON_HOME (the user's command files, plugins): relative path to
    /// text. `config.toml` and `script.jsonl` are the header's `config` and `script`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub home_files: BTreeMap<String, String>,
    /// How long to wait for each expected message, in milliseconds (default 10 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Whose behaviour the scenario pins: any ACP agent's, or Heron's own (the default).
    #[serde(default, skip_serializing_if = "Profile::is_heron")]
    pub profile: Profile,
    /// Capabilities the agent must advertise in its `initialize` answer for the scenario to
    /// run (dotted paths into the result, `!` in front for must not); otherwise it is skipped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// What the scenario enforces: the spec page or schema definition (and the JSON-RPC 2.0
    /// section), shown in every report; the `acp` and `acp-v2` profiles name one for each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
    /// A check the spec recommends but does not require: not following it is reported as
    /// advice, never counted as a failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recommendation: bool,
    /// Patterns of messages the agent may send anywhere (an agent's own `session/update`s):
    /// one of them that the expectation at hand does not match is passed over.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<Value>,
    /// Answers the spec also allows that leave the scenario nothing to check: a message the
    /// expectation at hand does not match but one of these does ends it as skipped, with
    /// that entry's reason (an agent that speaks v1 too answers a v1 `initialize` with 1,
    /// so the refusal a v2-only agent owes cannot be tested on it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip_when: Vec<SkipWhen>,
}

/// One `skip_when` entry of a header.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SkipWhen {
    /// The pattern of the agent's message.
    pub message: Value,
    /// Why the scenario cannot be checked against such an agent, as the report shows it.
    pub reason: String,
}

/// Which agents a scenario holds for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Only what ACP v1 and JSON-RPC 2.0 ask of every agent; Heron's wording, `_meta`,
    /// titles and ids are never matched.
    Acp,
    /// The same for ACP v2 (a draft): what v2 asks of every agent that speaks it.
    #[serde(rename = "acp-v2")]
    AcpV2,
    /// Heron's own behaviour.
    #[default]
    Heron,
}

impl Profile {
    fn is_heron(&self) -> bool {
        *self == Profile::Heron
    }

    /// Its name in a header and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Acp => "acp",
            Profile::AcpV2 => "acp-v2",
            Profile::Heron => "heron",
        }
    }
}

impl std::str::FromStr for Profile {
    type Err = String;

    fn from_str(text: &str) -> Result<Profile, String> {
        match text {
            "acp" => Ok(Profile::Acp),
            "acp-v2" => Ok(Profile::AcpV2),
            "heron" => Ok(Profile::Heron),
            _ => Err(format!("`{text}` is not a profile (acp, acp-v2 or heron)")),
        }
    }
}

/// Whether the `initialize` result `init` meets `requirement` (`a.b.c`, or `!a.b.c` for
/// must not): a capability is advertised when its path is there and not `false` or `null`
/// (ACP advertises some capabilities as empty objects).
pub fn requirement_met(requirement: &str, init: &Value) -> bool {
    let (negated, path) = match requirement.strip_prefix('!') {
        Some(path) => (true, path),
        None => (false, requirement),
    };
    let found = path.split('.').try_fold(init, |value, key| value.get(key));
    let advertised = !matches!(found, None | Some(Value::Null) | Some(Value::Bool(false)));
    advertised != negated
}

/// A provider the scenario's script plays as: the names and settings the editor sees.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedAs {
    /// Its model names.
    pub models: Vec<String>,
    /// Its reasoning effort levels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub efforts: Vec<String>,
    /// Prices by model name: input and output per million tokens, and the currency.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prices: BTreeMap<String, (f64, f64, String)>,
    /// The context window in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// The share of the window a request may fill before it is compacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact_at: Option<f64>,
}

impl ScriptedAs {
    /// The `config.toml` table of provider `name`, playing `script.jsonl` in request order.
    pub fn toml(&self, name: &str) -> String {
        // Built as a table and printed by `toml`, so every name is quoted by TOML's own rules
        // (a key may not be a multi-line string; DEL and control characters are escaped).
        let strings =
            |items: &[String]| toml::Value::Array(items.iter().cloned().map(toml::Value::String).collect());
        let mut provider = toml::Table::new();
        provider.insert("kind".into(), "scripted".into());
        provider.insert("script".into(), "script.jsonl".into());
        provider.insert("playback".into(), "sequential".into());
        provider.insert("models".into(), strings(&self.models));
        if !self.efforts.is_empty() {
            provider.insert("efforts".into(), strings(&self.efforts));
        }
        if let Some(size) = self.context_window {
            // TOML integers are signed 64-bit; a larger window is as good as unlimited.
            provider.insert("context_window".into(), i64::try_from(size).unwrap_or(i64::MAX).into());
        }
        if let Some(share) = self.compact_at {
            provider.insert("compact_at".into(), share.into());
        }
        if !self.prices.is_empty() {
            let prices = self.prices.iter().map(|(model, (input, output, currency))| {
                let mut price = toml::Table::new();
                price.insert("input".into(), (*input).into());
                price.insert("output".into(), (*output).into());
                price.insert("currency".into(), currency.as_str().into());
                (model.clone(), toml::Value::Table(price))
            });
            provider.insert("prices".into(), toml::Value::Table(prices.collect()));
        }
        let mut providers = toml::Table::new();
        providers.insert(name.to_owned(), toml::Value::Table(provider));
        let mut root = toml::Table::new();
        root.insert("providers".into(), toml::Value::Table(providers));
        root.to_string()
    }
}

/// One expected message: a pattern, possibly standing for a run of one or more messages.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    /// The pattern the message must match (see the matcher).
    pub pattern: Value,
    /// Whether it matches one or more consecutive messages (`"repeat": true`).
    pub repeat: bool,
    /// The 1-based line number in the file.
    pub line: usize,
}

/// One step of a transcript, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// The client sends this message (placeholders are filled from bindings).
    Send {
        /// The message.
        message: Value,
        /// Its line number.
        line: usize,
    },
    /// The client sends this exact text as one line (for malformed input).
    SendRaw {
        /// The text, without its newline.
        text: String,
        /// Its line number.
        line: usize,
    },
    /// The client closes its output (the agent's stdin ends), as an editor that quits.
    CloseInput {
        /// Its line number.
        line: usize,
    },
    /// The agent's next message (or run of messages) must match.
    Expect(Expectation),
    /// The agent's next messages must match these, in any order.
    Unordered {
        /// The messages, each used once (a repeated one at least once).
        entries: Vec<Expectation>,
        /// The line of `{"unordered": "begin"}`.
        begin: usize,
        /// The line of `{"unordered": "end"}`.
        end: usize,
    },
}

impl Item {
    /// Whether the agent sends this (an expectation) rather than the client.
    pub fn is_expectation(&self) -> bool {
        matches!(self, Item::Expect(_) | Item::Unordered { .. })
    }
}

/// A parsed transcript.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file name without `.ndjson`.
    pub name: String,
    /// The header.
    pub header: Header,
    /// The steps, in order.
    pub items: Vec<Item>,
    /// Every line of the file, for rewriting.
    pub lines: Vec<String>,
}

/// Why a transcript could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{name}:{line}: {reason}")]
pub struct FormatError {
    /// The scenario.
    pub name: String,
    /// The 1-based line.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// A step line as written: exactly one of these keys (plus `repeat` with `expect`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepLine {
    #[serde(default, deserialize_with = "present")]
    send: Option<Value>,
    send_raw: Option<String>,
    #[serde(default, deserialize_with = "present")]
    expect: Option<Value>,
    #[serde(default)]
    repeat: bool,
    unordered: Option<String>,
    close_input: Option<bool>,
}

/// A message member that is there, even as `null`: `null` is a message like any other (an
/// agent may write the line `null`, and refresh and recording then expect it), where a plain
/// `Option<Value>` would read it as no member at all.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// Whether `text` is a requirement: `a.b.c`, `!` allowed in front, no empty segment.
fn is_requirement(text: &str) -> bool {
    let path = text.strip_prefix('!').unwrap_or(text);
    !path.is_empty() && path.split('.').all(|segment| !segment.is_empty())
}

/// Whether a line carries no step: blank, or a `#` comment.
pub fn is_comment(line: &str) -> bool {
    let trimmed = line.trim();
    trimmed.is_empty() || trimmed.starts_with('#')
}

/// The largest transcript read, in bytes: a shared transcript is hostile input, and it is
/// held whole, with each of its lines parsed, while it runs. Recorded sessions are far
/// smaller (a recording keeps at most 4 MiB of workspace files).
pub const MAX_TRANSCRIPT_BYTES: u64 = 32 * 1024 * 1024;

impl Scenario {
    /// Parses the text of `name.ndjson`.
    pub fn parse(name: &str, text: &str) -> Result<Scenario, FormatError> {
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let fail = |line: usize, reason: String| FormatError { name: name.to_owned(), line, reason };
        let mut header: Option<Header> = None;
        let mut items = Vec::new();
        let mut open: Option<(usize, Vec<Expectation>)> = None;
        for (index, text) in lines.iter().enumerate() {
            let line = index + 1;
            if is_comment(text) {
                continue;
            }
            if header.is_none() {
                let parsed: Header =
                    serde_json::from_str(text).map_err(|e| fail(line, format!("header: {e}")))?;
                if let Some(bad) = parsed.requires.iter().find(|r| !is_requirement(r)) {
                    return Err(fail(line, format!("header: `{bad}` in requires is not a dotted path")));
                }
                header = Some(parsed);
                continue;
            }
            let step: StepLine = serde_json::from_str(text).map_err(|e| fail(line, e.to_string()))?;
            let given = [
                step.send.is_some(),
                step.send_raw.is_some(),
                step.expect.is_some(),
                step.unordered.is_some(),
                step.close_input.is_some(),
            ];
            if given.iter().filter(|g| **g).count() != 1 {
                return Err(fail(
                    line,
                    "a step has exactly one of send, send_raw, expect, unordered, close_input".into(),
                ));
            }
            if step.close_input == Some(false) {
                return Err(fail(line, "`close_input` is only ever `true`".into()));
            }
            if step.repeat && step.expect.is_none() {
                return Err(fail(line, "`repeat` goes with `expect`".into()));
            }
            // The agent reads lines: a line feed would send two, and the second would go out
            // without waiting for what the agent says to the first.
            if step.send_raw.as_ref().is_some_and(|text| text.contains('\n')) {
                return Err(fail(line, "`send_raw` is one line; its text holds a line feed".into()));
            }
            if let Some(pattern) = step.expect {
                let expectation = Expectation { pattern, repeat: step.repeat, line };
                match &mut open {
                    Some((_, entries)) => entries.push(expectation),
                    None => items.push(Item::Expect(expectation)),
                }
                continue;
            }
            if open.is_some() && step.unordered.as_deref() != Some("end") {
                return Err(fail(line, "only expectations go inside an unordered block".into()));
            }
            if let Some(message) = step.send {
                items.push(Item::Send { message, line });
            } else if let Some(text) = step.send_raw {
                items.push(Item::SendRaw { text, line });
            } else if step.close_input.is_some() {
                items.push(Item::CloseInput { line });
            } else if let Some(marker) = step.unordered {
                match (marker.as_str(), open.take()) {
                    ("begin", None) => open = Some((line, Vec::new())),
                    ("end", Some((begin, entries))) if !entries.is_empty() => {
                        items.push(Item::Unordered { entries, begin, end: line })
                    }
                    ("end", Some(_)) => return Err(fail(line, "an empty unordered block".into())),
                    _ => return Err(fail(line, "`unordered` is `begin` or `end`, in pairs".into())),
                }
            }
        }
        if let Some((begin, _)) = open {
            return Err(fail(begin, "this unordered block has no end".into()));
        }
        let header = header.ok_or_else(|| fail(1, "no header line".into()))?;
        Ok(Scenario { name: name.to_owned(), header, items, lines })
    }

    /// Reads and parses a transcript file of at most [`MAX_TRANSCRIPT_BYTES`].
    pub fn load(path: &std::path::Path) -> Result<Scenario, FormatError> {
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let text = heron_core::whole_file::read_text(path, MAX_TRANSCRIPT_BYTES)
            .map_err(|e| FormatError { name: name.clone(), line: 0, reason: e.to_string() })?;
        Scenario::parse(&name, &text)
    }

    /// The 1-based line of the header: the first line that is not a comment.
    pub fn header_line(&self) -> usize {
        self.lines.iter().position(|line| !is_comment(line)).map_or(1, |index| index + 1)
    }

    /// Every method name the transcript sends or expects.
    pub fn methods(&self) -> Vec<String> {
        let mut found = Vec::new();
        let mut note = |message: &Value| {
            if let Some(method) = message.get("method").and_then(Value::as_str) {
                found.push(method.to_owned());
            }
        };
        for item in &self.items {
            match item {
                Item::Send { message, .. } => note(message),
                Item::SendRaw { .. } | Item::CloseInput { .. } => {}
                Item::Expect(e) => note(&e.pattern),
                Item::Unordered { entries, .. } => entries.iter().for_each(|e| note(&e.pattern)),
            }
        }
        found
    }
}

/// The text of an expectation line.
pub fn expect_line(pattern: &Value, repeat: bool) -> String {
    let mut line = serde_json::json!({ "expect": pattern });
    if repeat && let Some(map) = line.as_object_mut() {
        map.insert("repeat".into(), Value::Bool(true));
    }
    one_line(&line)
}

/// JSON on one line with a space after each `:` and `,`, as transcripts are written by hand.
pub fn one_line(value: &Value) -> String {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, Spaced);
    if serde::Serialize::serialize(value, &mut serializer).is_err() {
        return value.to_string();
    }
    String::from_utf8(out).unwrap_or_else(|_| value.to_string())
}

/// A `serde_json` formatter for [`one_line`].
struct Spaced;

impl serde_json::ser::Formatter for Spaced {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_past_its_bound_is_refused_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("big.ndjson");
        std::fs::File::create(&path).expect("create").set_len(MAX_TRANSCRIPT_BYTES + 1).expect("grow");
        let error = Scenario::load(&path).expect_err("refused");
        assert!(error.reason.contains(&format!("larger than {MAX_TRANSCRIPT_BYTES} bytes")), "{error:?}");
    }
}
