//! Fuzzes conformance transcripts, which `heron conformance FILE` reads from whoever shared
//! them: any text through `Scenario::parse`, and every scenario that parses through what the
//! runner does with it, short of starting a process and writing its sandbox: the header's
//! provider tables and script, the matcher over its expectations and over messages the
//! input also supplies, and whole replays, plain and in refresh mode, against a fake agent
//! that answers each send with the next burst of those messages.
//!
//! Must hold: nothing panics; a parse error names a line of the file; a parsed scenario's
//! items name its own step lines, in order; an expectation line as refresh writes it parses
//! back to the same expectation; a failed match binds nothing; the pattern refresh makes of
//! a message (generalized or merged with the old pattern) matches that message; the
//! providers' `config.toml` tables are valid TOML that say what the header says; every line
//! sent is one line; and a refreshed transcript parses, keeps the sends and header, and
//! passes a plain replay against the same agent, as the runner's proof run expects; and
//! refreshing a transcript that passes does not fail.
//!
//! Input layout: the transcript, then optionally a NUL byte and the agent's output: one
//! message per line, a blank line ending each burst. The first burst is there from the
//! start; each send releases the next; closing the input drops the rest.

#![no_main]

use std::collections::VecDeque;
use std::time::Duration;

use heron::conformance::format::{Expectation, Header, Item, Scenario, expect_line, is_comment};
use heron::conformance::matcher::{
    Bindings, Paths, expand_paths, fill, generalize, generalize_sent, matches, merge, side_by_side, signature,
};
use heron::conformance::runner::{Received, Transport};
use heron::conformance::{Replayed, replay};
use heron_core::llm::scripted::Script;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// How many expectations, and how many messages, the matcher pairs up.
const PAIRED: usize = 16;

/// A home that holds the workspace, so replacing paths must take the longer one first.
fn paths() -> Paths {
    Paths { ws: "/h/ws".to_owned(), home: "/h".to_owned() }
}

/// The agent under test, played from the input: each send releases the next burst.
struct FakeAgent {
    bursts: VecDeque<Vec<String>>,
    ready: VecDeque<String>,
    closed: bool,
}

impl FakeAgent {
    fn new(bursts: &[Vec<String>]) -> Self {
        let mut bursts: VecDeque<Vec<String>> = bursts.iter().cloned().collect();
        let ready = bursts.pop_front().unwrap_or_default().into();
        FakeAgent { bursts, ready, closed: false }
    }
}

impl Transport for FakeAgent {
    fn send(&mut self, line: &str) -> Result<(), String> {
        // The agent reads newline-delimited JSON-RPC: a line break would make two messages.
        assert!(!line.contains('\n'), "the runner sends a line break inside a line: {line:?}");
        if self.closed {
            return Err("the agent's input is closed".to_owned());
        }
        self.ready.extend(self.bursts.pop_front().unwrap_or_default());
        Ok(())
    }

    fn recv(&mut self, _wait: Duration) -> Received {
        match self.ready.pop_front() {
            Some(line) => Received::Line(line),
            None if self.closed => Received::Closed,
            None => Received::Timeout,
        }
    }

    fn close_input(&mut self) {
        self.closed = true;
        self.bursts.clear();
    }
}

fn item_lines(item: &Item) -> Vec<usize> {
    match item {
        Item::Send { line, .. } | Item::SendRaw { line, .. } | Item::CloseInput { line } => vec![*line],
        Item::Expect(e) => vec![e.line],
        Item::Unordered { entries, begin, end } => {
            let mut lines = vec![*begin];
            lines.extend(entries.iter().map(|e| e.line));
            lines.push(*end);
            lines
        }
    }
}

fn expectations(scenario: &Scenario) -> Vec<&Expectation> {
    scenario
        .items
        .iter()
        .flat_map(|item| match item {
            Item::Expect(e) => vec![e],
            Item::Unordered { entries, .. } => entries.iter().collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// The client's side of a scenario, which refresh must leave as it is.
fn sends(scenario: &Scenario) -> Vec<Item> {
    let line_free = |item: &Item| match item {
        Item::Send { message, .. } => Item::Send { message: message.clone(), line: 0 },
        Item::SendRaw { text, .. } => Item::SendRaw { text: text.clone(), line: 0 },
        Item::CloseInput { .. } => Item::CloseInput { line: 0 },
        other => other.clone(),
    };
    scenario.items.iter().filter(|item| !item.is_expectation()).map(line_free).collect()
}

/// Items name step lines of the file, in strictly increasing order, after the header.
fn assert_items_name_their_lines(scenario: &Scenario, text: &str) {
    assert_eq!(scenario.lines, text.lines().collect::<Vec<_>>(), "lines are not the file's");
    let header = scenario.lines.iter().position(|line| !is_comment(line)).expect("a header line") + 1;
    let mut previous = header;
    for item in &scenario.items {
        for line in item_lines(item) {
            assert!(line > previous, "item line {line} is not after line {previous}: {item:?}");
            let text =
                scenario.lines.get(line - 1).unwrap_or_else(|| panic!("item line {line} is past the end"));
            assert!(!is_comment(text), "item line {line} is a comment: {text:?}");
            previous = line;
        }
    }
}

/// An expectation written as refresh writes it reads back as the same expectation.
fn assert_expect_line_round_trips(e: &Expectation) {
    let line = expect_line(&e.pattern, e.repeat);
    assert!(!line.contains('\n'), "an expectation line spans lines: {line:?}");
    let text = format!("{{\"scenario\": \"x\"}}\n{line}");
    let reread = Scenario::parse("x", &text).unwrap_or_else(|err| panic!("refresh wrote {line:?}: {err}"));
    let want = Expectation { line: 2, ..e.clone() };
    assert_eq!(reread.items, [Item::Expect(want)], "{line:?} reads back differently");
}

fn toml_strings(value: Option<&toml::Value>) -> Vec<String> {
    let items = value.and_then(toml::Value::as_array).map(Vec::as_slice).unwrap_or_default();
    items.iter().map(|v| v.as_str().expect("a string list").to_owned()).collect()
}

/// Each provider's `config.toml` table is TOML and names what the header gave.
fn assert_provider_tables(header: &Header) {
    for (name, provider) in &header.providers {
        let text = provider.toml(name);
        let table: toml::Table = match toml::from_str(&text) {
            Ok(table) => table,
            Err(err) => panic!("provider {name:?} makes invalid TOML:\n{text}\n{err}"),
        };
        let entry = table
            .get("providers")
            .and_then(|p| p.get(name.as_str()))
            .unwrap_or_else(|| panic!("no table for provider {name:?} in\n{text}"));
        assert_eq!(entry.get("kind").and_then(toml::Value::as_str), Some("scripted"));
        assert_eq!(toml_strings(entry.get("models")), provider.models, "models of {name:?} in\n{text}");
        assert_eq!(toml_strings(entry.get("efforts")), provider.efforts, "efforts of {name:?} in\n{text}");
        let window = entry.get("context_window").and_then(toml::Value::as_integer);
        assert_eq!(window.map(|w| w as u64), provider.context_window, "context window of {name:?}");
        for (model, (input, output, currency)) in &provider.prices {
            let price = entry
                .get("prices")
                .and_then(|p| p.get(model.as_str()))
                .unwrap_or_else(|| panic!("no price for {model:?} in\n{text}"));
            assert_eq!(price.get("input").and_then(toml::Value::as_float), Some(*input));
            assert_eq!(price.get("output").and_then(toml::Value::as_float), Some(*output));
            assert_eq!(price.get("currency").and_then(toml::Value::as_str), Some(currency.as_str()));
        }
    }
}

/// Whether a message holds a `$`, which patterns read as a placeholder (the format has no
/// escape for it), so a pattern made of it cannot be expected to match it.
fn has_dollar(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('$'),
        Value::Array(items) => items.iter().any(has_dollar),
        Value::Object(members) => members.values().any(has_dollar),
        _ => false,
    }
}

/// The matcher over each expectation and each message the agent could send.
fn exercise_matcher(scenario: &Scenario, messages: &[Value]) {
    let paths = paths();
    let mut bindings = Bindings::default();
    for item in &scenario.items {
        if let Item::Send { message, .. } = item {
            let _ = fill(message, &paths, &bindings);
        }
    }
    // Every pair is a diff and a merge; a bound keeps large inputs fast.
    for e in expectations(scenario).into_iter().take(PAIRED) {
        let _ = signature(&e.pattern);
        for message in messages.iter().take(PAIRED) {
            let before = bindings.clone();
            match matches(&e.pattern, message, &paths, &mut bindings) {
                Ok(()) => {}
                Err(_) => assert_eq!(bindings, before, "a failed match bound a variable"),
            }
            let _ = side_by_side(&e.pattern, message);
            let merged = merge(&e.pattern, message, &paths, &mut bindings);
            if !has_dollar(message)
                && let Err(mismatch) = matches(&merged, message, &paths, &mut bindings)
            {
                panic!("refresh's merge of {} into {message} is {merged}, which fails {mismatch}", e.pattern);
            }
        }
    }
    for message in messages {
        let _ = signature(message);
        let _ = generalize_sent(message, &paths, &bindings);
        let pattern = generalize(message, &paths, &mut bindings);
        if !has_dollar(message)
            && let Err(mismatch) = matches(&pattern, message, &paths, &mut bindings)
        {
            panic!("{message} generalizes to {pattern}, which fails {mismatch}");
        }
    }
}

/// Replays the scenario against the fake agent, plainly and in refresh mode; a refreshed
/// text must parse, keep the client's side, and pass a plain replay of the same agent.
fn exercise_replay(scenario: &Scenario, bursts: &[Vec<String>], clean: bool) {
    let paths = paths();
    let plain = replay(scenario, &mut FakeAgent::new(bursts), &paths, false);
    let refreshed = replay(scenario, &mut FakeAgent::new(bursts), &paths, true);
    // A transcript that passes has nothing to rewrite, so refresh has no reason to fail.
    if let (Ok(_), Err(failure)) = (&plain, &refreshed) {
        panic!("the transcript passes, but refreshing it fails:\n{failure}");
    }
    let Ok(Replayed::Rewritten(text)) = refreshed else { return };
    let refreshed = match Scenario::parse(&scenario.name, &text) {
        Ok(refreshed) => refreshed,
        Err(err) => panic!("refresh wrote a transcript that does not parse ({err}):\n{text}"),
    };
    assert_eq!(sends(&refreshed), sends(scenario), "refresh changed the client's side:\n{text}");
    assert_eq!(
        serde_json::to_value(&refreshed.header).ok(),
        serde_json::to_value(&scenario.header).ok(),
        "refresh changed the header"
    );
    if clean && let Err(failure) = replay(&refreshed, &mut FakeAgent::new(bursts), &paths, false) {
        panic!("the refreshed transcript fails against the same agent:\n{text}\n{failure}");
    }
}

fuzz_target!(|data: &str| {
    let (transcript, agent) = data.split_once('\0').unwrap_or((data, ""));
    let scenario = match Scenario::parse("fuzz", transcript) {
        Ok(scenario) => scenario,
        Err(err) => {
            let lines = transcript.lines().count().max(1);
            assert!((1..=lines).contains(&err.line), "error at line {} of {lines}: {err}", err.line);
            return;
        }
    };
    assert_items_name_their_lines(&scenario, transcript);
    let _ = scenario.methods();

    // What the sandbox would write: the script (read by the agent's scripted model) and the
    // provider tables of its config.
    let script: String = scenario.header.script.iter().map(|turn| format!("{turn}\n")).collect();
    let _ = Script::parse(&script);
    assert_provider_tables(&scenario.header);
    for arg in &scenario.header.args {
        let _ = expand_paths(arg, &paths());
    }

    for e in expectations(&scenario) {
        assert_expect_line_round_trips(e);
    }

    let bursts: Vec<Vec<String>> =
        agent.split("\n\n").map(|burst| burst.lines().map(str::to_owned).collect()).collect();
    let messages: Vec<Value> =
        bursts.iter().flatten().filter_map(|line| serde_json::from_str(line).ok()).collect();
    exercise_matcher(&scenario, &messages);

    // The proof run is only owed an agent whose every line is a message the format can
    // state exactly: JSON without `$`.
    let lines = bursts.iter().map(Vec::len).sum::<usize>();
    let clean = messages.len() == lines && !messages.iter().any(has_dollar);
    exercise_replay(&scenario, &bursts, clean);
});
