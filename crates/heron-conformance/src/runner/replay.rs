//! Replaying a transcript: send the client's lines in order, match what the agent sends
//! against each expected segment, and fail on anything unexpected, including what arrives
//! after the last expectation. In refresh mode a differing segment is rewritten instead.
//! Messages the header's `ignore` patterns name are passed over wherever the expectation at
//! hand does not match them, and a scenario whose `requires` the agent's `initialize`
//! answer does not meet stops there, skipped, before anything more is sent; so does one
//! whose agent sends what a `skip_when` entry names, another answer the spec allows.
//!
//! In the acp profile the runner is also the client an agent may lean on during a turn:
//! a request the expectation at hand does not match is answered by the runner instead of
//! failing the scenario (`client`), and an agent that answers `session/new` with ACP's
//! auth_required (-32000) is reported as skipped, since nothing after it can be tested.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::client::{AUTH_REQUIRED, Client};
use super::refresh::rewrite_segment;
use super::transport::{Received, Transport};
use super::{DEFAULT_TIMEOUT, EOF_WAIT, Failure, GRACE, STARTUP_TIMEOUT};
use crate::format::{Expectation, Item, Profile, Scenario, SkipWhen, requirement_met};
use crate::matcher::{self, Bindings, Paths, fill, matches, merge, side_by_side, signature};

/// How a replay that did not fail ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Replayed {
    /// Every expectation held.
    Passed,
    /// Refresh rewrote expectations: the new text of the file.
    Rewritten(String),
    /// The agent's `initialize` answer does not meet the header's `requires`: why.
    Skipped(String),
}

/// One replay in progress: the bindings so far and the messages read.
struct Replay<'a> {
    transport: &'a mut dyn Transport,
    paths: &'a Paths,
    bindings: Bindings,
    timeout: Duration,
    /// Whether the agent has sent anything yet: until it has, it may still be starting.
    heard: bool,
    /// A message read ahead (after a repeated run) and not yet matched.
    pushed: Option<Value>,
    /// Every message read in the current segment, in order (for refresh).
    seen: Vec<Value>,
    /// Patterns of messages the agent may send anywhere.
    ignore: &'a [Value],
    /// Other allowed answers that leave the scenario nothing to check.
    skip_when: &'a [SkipWhen],
    /// The ids of the `initialize` requests sent, and the first result one of them got.
    initialize: (Vec<Value>, Option<Value>),
    /// In the acp profile, the client that answers the agent's own requests: what the
    /// scenario's `initialize` advertised. `None` in other profiles, whose transcripts say
    /// every answer themselves.
    client: Option<super::client::Client>,
    /// The ids of the requests an auth_required answer to skips the scenario (acp profile):
    /// every `session/new`, and every `session/*` request sent before the first
    /// `session/new` (an agent that wants credentials may say so to any session method).
    session_new: Vec<Value>,
    /// Whether a `session/new` went out.
    opened: bool,
    /// Why the scenario stopped short as skipped, once the agent said so mid-segment.
    skipped: Option<String>,
}

impl Replay<'_> {
    /// Whether `message` is one the header lets the agent send anywhere.
    fn ignorable(&self, message: &Value) -> bool {
        self.ignore.iter().any(|p| matches(p, message, self.paths, &mut self.bindings.clone()).is_ok())
    }

    /// Passes over the message just read: it is not part of the exchange.
    fn pass_over(&mut self) {
        self.seen.pop();
    }

    /// Answers `message` when it is a request of the agent the runner serves as the client
    /// (acp profile); `false` when it is not one, so it counts against the scenario.
    fn answered(&mut self, message: &Value, line: usize) -> Result<bool, Failure> {
        let Some(answer) = self.client.as_ref().and_then(|client| client.answer(message)) else {
            return Ok(false);
        };
        self.transport.send(&answer.to_string()).map_err(|e| Failure::new(line, e, ""))?;
        Ok(true)
    }

    /// Why the scenario is skipped when `message` is an agent's auth_required answer to a
    /// `session/new`, or to a session method before any session could exist (acp profile):
    /// it cannot open a session without credentials the runner does not have, and asking
    /// for them is not getting the session contract wrong.
    fn needs_auth(&self, message: &Value) -> Option<String> {
        let id = message.get("id")?;
        let code = message.get("error")?.get("code")?.as_i64()?;
        (self.client.is_some() && code == AUTH_REQUIRED && self.session_new.contains(id))
            .then(|| "the agent requires authentication".to_owned())
    }

    /// The reason of the first `skip_when` entry `message` matches: an answer the spec
    /// allows too, after which the scenario has nothing left to check.
    fn allowed_otherwise(&self, message: &Value) -> Option<String> {
        let mut trial = self.bindings.clone();
        let entry =
            self.skip_when.iter().find(|e| matches(&e.message, message, self.paths, &mut trial).is_ok());
        entry.map(|entry| entry.reason.clone())
    }

    /// Whether `message` is an extension notification (a `_`-prefixed method) in the acp
    /// profiles: ACP lets an agent send them anywhere, and a client that does not know one
    /// ignores it, as the runner does there.
    fn extension_note(&self, message: &Value) -> bool {
        let method = message.get("method").and_then(Value::as_str);
        self.client.is_some() && message.get("id").is_none() && method.is_some_and(|m| m.starts_with('_'))
    }

    /// Whether a message no expectation matched is passed over: ignored by the header,
    /// answered by the runner as the client, or the auth_required that skips the scenario.
    fn passed_over(&mut self, message: &Value, line: usize) -> Result<bool, Failure> {
        if let Some(reason) = self.needs_auth(message).or_else(|| self.allowed_otherwise(message)) {
            self.skipped = Some(reason);
            return Ok(true);
        }
        if self.ignorable(message) || self.extension_note(message) || self.answered(message, line)? {
            self.pass_over();
            return Ok(true);
        }
        Ok(false)
    }

    /// Keeps the first answer to an `initialize` request, for the header's `requires`.
    fn note_initialize(&mut self, message: &Value) {
        let (ids, result) = &mut self.initialize;
        if result.is_none()
            && let (Some(id), Some(answer)) = (message.get("id"), message.get("result"))
            && ids.contains(id)
        {
            *result = Some(answer.clone());
        }
    }

    /// The first of `requires` the agent's `initialize` answer does not meet, once it came.
    fn unmet<'r>(&self, requires: &'r [String]) -> Option<&'r str> {
        let init = self.initialize.1.as_ref()?;
        requires.iter().find(|r| !requirement_met(r, init)).map(String::as_str)
    }

    /// The next message, or `None` when nothing came within `wait`.
    fn next(&mut self, wait: Duration, line: usize) -> Result<Option<Value>, Failure> {
        if self.skipped.is_some() {
            return Ok(None);
        }
        if let Some(message) = self.pushed.take() {
            self.seen.push(message.clone());
            return Ok(Some(message));
        }
        match self.transport.recv(wait) {
            Received::Line(text) => match serde_json::from_str::<Value>(&text) {
                Ok(message) => {
                    self.heard = true;
                    self.note_initialize(&message);
                    self.seen.push(message.clone());
                    Ok(Some(message))
                }
                Err(err) => Err(Failure::new(
                    line,
                    "the agent wrote a line that is not JSON",
                    format!("{err}: {}", text.chars().take(200).collect::<String>()),
                )),
            },
            Received::Timeout => Ok(None),
            Received::Closed => Err(Failure::new(line, "the agent closed its output", "")),
        }
    }

    /// Expected beside actual, the actual shown through the pattern where it matches, so
    /// only real differences are marked.
    fn compare(&self, pattern: &Value, message: &Value) -> String {
        let shown = merge(pattern, message, self.paths, &mut self.bindings.clone());
        side_by_side(pattern, &shown)
    }

    fn push_back(&mut self, message: Value) {
        self.seen.pop();
        self.pushed = Some(message);
    }

    /// How long the next expected message may take: the scenario's timeout, or, while the
    /// agent has sent nothing, long enough for it to start too.
    fn wait(&self) -> Duration {
        if self.heard { self.timeout } else { self.timeout.max(STARTUP_TIMEOUT) }
    }

    fn required(&mut self, pattern: &Value, line: usize) -> Result<Value, Failure> {
        let wait = self.wait();
        match self.next(wait, line)? {
            Some(message) => Ok(message),
            None => Err(Failure::new(
                line,
                format!("nothing arrived within {wait:?}; expected:"),
                serde_json::to_string_pretty(pattern).unwrap_or_default(),
            )),
        }
    }

    /// After a repeated run: consumes further messages matching `patterns`.
    fn absorb(&mut self, patterns: &[&Value], followed: bool, line: usize) -> Result<(), Failure> {
        let wait = if followed { self.timeout } else { GRACE };
        while let Some(message) = self.next(wait, line)? {
            if !patterns.iter().any(|p| matches(p, &message, self.paths, &mut self.bindings).is_ok()) {
                self.push_back(message);
                break;
            }
        }
        Ok(())
    }

    fn expect(&mut self, e: &Expectation, followed: bool) -> Result<(), Failure> {
        loop {
            let message = self.required(&e.pattern, e.line)?;
            match matches(&e.pattern, &message, self.paths, &mut self.bindings) {
                Ok(()) => break,
                Err(_) if self.passed_over(&message, e.line)? => {
                    if self.skipped.is_some() {
                        return Ok(());
                    }
                }
                Err(mismatch) => {
                    return Err(Failure::new(
                        e.line,
                        format!("the agent's message does not match ({mismatch})"),
                        self.compare(&e.pattern, &message),
                    ));
                }
            }
        }
        if e.repeat { self.absorb(&[&e.pattern], followed, e.line) } else { Ok(()) }
    }

    fn unordered(&mut self, entries: &[Expectation], begin: usize, followed: bool) -> Result<(), Failure> {
        let mut used = vec![0usize; entries.len()];
        let done =
            |used: &[usize]| used.iter().zip(entries).all(|(n, e)| if e.repeat { *n >= 1 } else { *n == 1 });
        while !done(&used) {
            let open = entries.iter().zip(&used).find(|(e, n)| **n == 0 || e.repeat).map(|(e, _)| e);
            let pattern = open.map(|e| e.pattern.clone()).unwrap_or(Value::Null);
            let message = self.required(&pattern, begin)?;
            // A message goes to the first open entry it matches; specific entries before runs.
            let fits = |index: &usize| {
                matches(&entries[*index].pattern, &message, self.paths, &mut self.bindings.clone()).is_ok()
            };
            let single = (0..entries.len()).filter(|i| !entries[*i].repeat && used[*i] == 0).find(fits);
            let run = (0..entries.len()).filter(|i| entries[*i].repeat).find(fits);
            match single.or(run) {
                Some(index) => {
                    let _ = matches(&entries[index].pattern, &message, self.paths, &mut self.bindings);
                    used[index] += 1;
                }
                None if self.passed_over(&message, begin)? => {
                    if self.skipped.is_some() {
                        return Ok(());
                    }
                }
                None => {
                    let unmatched: Vec<&Expectation> = entries
                        .iter()
                        .zip(&used)
                        .filter(|(e, n)| **n == 0 || e.repeat)
                        .map(|(e, _)| e)
                        .collect();
                    let closest = unmatched
                        .iter()
                        .find(|e| signature(&e.pattern) == signature(&message))
                        .or(unmatched.first())
                        .copied();
                    let (line, detail) = match closest {
                        Some(e) => (e.line, self.compare(&e.pattern, &message)),
                        None => (begin, serde_json::to_string_pretty(&message).unwrap_or_default()),
                    };
                    return Err(Failure::new(
                        line,
                        format!(
                            "the agent's message matches none of the {} open entries of the unordered block at line {begin}; the closest:",
                            unmatched.len()
                        ),
                        detail,
                    ));
                }
            }
        }
        let runs: Vec<&Value> = entries.iter().filter(|e| e.repeat).map(|e| &e.pattern).collect();
        if runs.is_empty() { Ok(()) } else { self.absorb(&runs, followed, begin) }
    }

    fn send(&mut self, item: &Item) -> Result<(), Failure> {
        let (text, line) = match item {
            Item::Send { message, line } => {
                let filled = fill(message, self.paths, &self.bindings)
                    .map_err(|e| Failure::new(*line, e.to_string(), ""))?;
                (filled.to_string(), *line)
            }
            Item::SendRaw { text, line } => (matcher::expand_paths(text, self.paths), *line),
            Item::CloseInput { .. } => {
                self.transport.close_input();
                return Ok(());
            }
            _ => return Ok(()),
        };
        self.transport.send(&text).map_err(|e| Failure::new(line, e, ""))
    }

    /// Matches one segment (the expectations between two sends).
    fn segment(&mut self, items: &[&Item], followed_by_expectation_at_end: bool) -> Result<(), Failure> {
        for (index, item) in items.iter().enumerate() {
            if self.skipped.is_some() {
                break;
            }
            let followed = index + 1 < items.len() || followed_by_expectation_at_end;
            match item {
                Item::Expect(e) => self.expect(e, followed)?,
                Item::Unordered { entries, begin, .. } => self.unordered(entries, *begin, followed)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Reads whatever else arrives until the agent is quiet for `quiet`.
    fn drain(&mut self, quiet: Duration, line: usize) -> Result<(), Failure> {
        while let Some(message) = self.next(quiet, line)? {
            self.passed_over(&message, line)?;
        }
        Ok(())
    }
}

fn item_lines(item: &Item) -> (usize, usize) {
    match item {
        Item::Send { line, .. } | Item::SendRaw { line, .. } | Item::CloseInput { line } => (*line, *line),
        Item::Expect(e) => (e.line, e.line),
        Item::Unordered { begin, end, .. } => (*begin, *end),
    }
}

/// Replays `scenario` over `transport`. Without `refresh`, any difference is a failure.
/// With it, differing segments are rewritten and the new file text is returned.
pub fn replay(
    scenario: &Scenario,
    transport: &mut dyn Transport,
    paths: &Paths,
    refresh: bool,
) -> Result<Replayed, Failure> {
    let timeout = scenario.header.timeout_ms.map(Duration::from_millis).unwrap_or(DEFAULT_TIMEOUT);
    let mut replay = Replay {
        transport,
        paths,
        bindings: Bindings::default(),
        timeout,
        heard: false,
        pushed: None,
        seen: Vec::new(),
        ignore: &scenario.header.ignore,
        skip_when: &scenario.header.skip_when,
        initialize: (Vec::new(), None),
        client: (scenario.header.profile == Profile::Acp).then(|| Client::of(scenario)),
        session_new: Vec::new(),
        opened: false,
        skipped: None,
    };
    let outcome = replay_items(scenario, &mut replay, refresh);
    outcome.map_err(|mut failure| {
        failure.stderr = replay.transport.stderr_tail();
        failure
    })
}

/// Why the scenario is skipped, when the agent's `initialize` answer has come and does not
/// meet the header's `requires`.
fn skip_reason(scenario: &Scenario, replay: &Replay<'_>) -> Option<String> {
    let unmet = replay.unmet(&scenario.header.requires)?;
    Some(match unmet.strip_prefix('!') {
        Some(path) => format!("the agent advertises {path}"),
        None => format!("the agent does not advertise {unmet}"),
    })
}

fn replay_items(scenario: &Scenario, replay: &mut Replay<'_>, refresh: bool) -> Result<Replayed, Failure> {
    let mut replacements: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let items = &scenario.items;
    let mut index = 0;
    let last_line = scenario.lines.len();
    while index < items.len() {
        if !items[index].is_expectation() {
            // Before anything more goes out: a scenario the agent cannot serve stops here.
            if let Some(reason) = skip_reason(scenario, replay) {
                return Ok(Replayed::Skipped(reason));
            }
            if let Item::Send { message, .. } = &items[index]
                && let Some(id) = message.get("id")
            {
                match message.get("method").and_then(Value::as_str) {
                    Some("initialize") => replay.initialize.0.push(id.clone()),
                    Some("session/new") => {
                        replay.session_new.push(id.clone());
                        replay.opened = true;
                    }
                    Some(method) if method.starts_with("session/") && !replay.opened => {
                        replay.session_new.push(id.clone());
                    }
                    _ => {}
                }
            }
            replay.send(&items[index])?;
            index += 1;
            continue;
        }
        let start = index;
        while index < items.len() && items[index].is_expectation() {
            index += 1;
        }
        let segment: Vec<&Item> = items[start..index].iter().collect();
        let first_line = item_lines(segment[0]).0;
        let end_line = segment.last().map(|i| item_lines(i).1).unwrap_or(first_line);
        replay.seen.clear();
        if !refresh {
            replay.segment(&segment, false)?;
            if let Some(reason) = replay.skipped.take() {
                return Ok(Replayed::Skipped(reason));
            }
            continue;
        }
        let changed = match replay.segment(&segment, false) {
            Ok(()) => {
                let before = replay.seen.len();
                replay.drain(GRACE, end_line)?;
                replay.seen.len() > before
            }
            Err(_) => {
                replay.drain(Duration::from_millis(700), end_line)?;
                true
            }
        };
        if let Some(reason) = replay.skipped.take() {
            return Ok(Replayed::Skipped(reason));
        }
        if changed {
            let lines = rewrite_segment(&segment, &replay.seen, replay.paths, &mut replay.bindings);
            replacements.push((first_line, end_line, lines));
        }
    }
    if let Some(reason) = skip_reason(scenario, replay) {
        return Ok(Replayed::Skipped(reason));
    }
    if !scenario.header.requires.is_empty() && replay.initialize.1.is_none() {
        return Err(Failure::new(
            scenario.header_line(),
            "the header has `requires`, but no `initialize` request of the transcript was answered",
            "",
        ));
    }
    // Nothing may follow the last expectation: end the input and read to the end.
    let pushed = replay.pushed.take();
    let passed = match &pushed {
        Some(message) => replay.passed_over(message, last_line)?,
        None => false,
    };
    if let Some(reason) = replay.skipped.take() {
        return Ok(Replayed::Skipped(reason));
    }
    match pushed {
        Some(_) if passed => replay.seen.clear(),
        Some(message) if !refresh => return Err(unexpected(last_line, &message)),
        Some(message) => replay.seen = vec![message],
        None => replay.seen.clear(),
    }
    replay.transport.close_input();
    let deadline = Instant::now() + EOF_WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match replay.transport.recv(left) {
            Received::Line(text) => {
                let message = serde_json::from_str(&text).unwrap_or(Value::String(text));
                // A request of the agent's after the input closed has no one left to answer
                // it; in the acp profile it is the runner's as the client, so not a deviation.
                let clients = replay.client.as_ref().is_some_and(|c| c.answer(&message).is_some());
                if replay.ignorable(&message) || clients {
                    continue;
                }
                if !refresh {
                    return Err(unexpected(last_line, &message));
                }
                replay.seen.push(message);
            }
            Received::Timeout | Received::Closed => break,
        }
    }
    if refresh && !replay.seen.is_empty() {
        let lines = rewrite_segment(&[], &replay.seen, replay.paths, &mut replay.bindings);
        replacements.push((last_line + 1, last_line, lines));
    }
    if replacements.is_empty() {
        return Ok(Replayed::Passed);
    }
    let mut out: Vec<String> = Vec::new();
    let mut next = 1;
    for (first, last, lines) in replacements {
        out.extend((next..first).filter_map(|line| scenario.lines.get(line - 1).cloned()));
        out.extend(lines);
        next = last + 1;
    }
    out.extend(scenario.lines.iter().skip(next - 1).cloned());
    let mut text = out.join("\n");
    text.push('\n');
    Ok(Replayed::Rewritten(text))
}

fn unexpected(line: usize, message: &Value) -> Failure {
    Failure::new(
        line,
        "the agent sent a message the transcript does not expect",
        side_by_side(&Value::String("(nothing)".into()), message),
    )
}

#[cfg(test)]
mod tests;
