//! Turns what a recording saw into a transcript: the header (arguments, providers, the
//! model turns as a script, the workspace files as first used), then every line in the
//! order it crossed stdio, the client's as sends and the agent's as expectations, with
//! paths, generated ids, timestamps and the agent's request ids made placeholders.

use serde_json::{Value, json};

use super::{Seen, Sender, Setup};
use crate::format::Header;
use crate::matcher::{Bindings, Paths, generalize, generalize_sent};
use heron_core::llm::scripted::{Deltas, ScriptedCall, Step, Turn, word_deltas};
use heron_core::llm::tap::TapEnd;
use heron_core::llm::{ModelEvent, ToolCallRequest};

/// How long a replayed turn that was cancelled waits, so the cancel arrives mid-turn again.
const CANCELLED_WAIT_MS: u64 = 60_000;

/// The script turn that replays a model request, and a note when it cannot replay exactly.
pub fn turn_of(events: &[ModelEvent], end: &TapEnd) -> (Turn, Option<String>) {
    let mut steps: Vec<Step> = Vec::new();
    let mut finish = None;
    let mut note = None;
    for event in events {
        match event {
            ModelEvent::Attempt { number } if *number > 1 => {
                // What the failed attempt streamed is void; the replay plays the last one.
                steps.clear();
                note = Some(format!("the model was retried ({number} attempts); only the last replays"));
            }
            ModelEvent::Attempt { .. } => {}
            // The wait before a retry is not replayed; the retried attempt is.
            ModelEvent::Retrying { .. } => {}
            ModelEvent::TextDelta { text } => push_delta(&mut steps, text, false),
            ModelEvent::ThoughtDelta { text } => push_delta(&mut steps, text, true),
            ModelEvent::ToolCall { call } => steps.push(Step::ToolCall(scripted_call(call))),
            ModelEvent::Usage { usage } => steps.push(Step::Usage((*usage).into())),
            // Scripts have no structured reasoning; the text of the thought replays.
            ModelEvent::ReasoningDetails { .. } => {}
            ModelEvent::Finish { reason } => finish = Some(*reason),
        }
    }
    for step in &mut steps {
        if let Step::Text(deltas) | Step::Thought(deltas) = step {
            *deltas = readable(std::mem::replace(deltas, Deltas::Exact(Vec::new())));
        }
    }
    match end {
        TapEnd::Finished => {}
        TapEnd::Failed(message) => steps.push(Step::Error(message.clone())),
        TapEnd::Cancelled => steps.push(Step::DelayMs(CANCELLED_WAIT_MS)),
    }
    (Turn { steps, finish }, note)
}

/// Appends a delta to the text (or thought) step it continues, or starts one.
fn push_delta(steps: &mut Vec<Step>, text: &str, thought: bool) {
    let last = match steps.last_mut() {
        Some(Step::Text(deltas)) if !thought => Some(deltas),
        Some(Step::Thought(deltas)) if thought => Some(deltas),
        _ => None,
    };
    match last {
        Some(Deltas::Exact(pieces)) => pieces.push(text.to_owned()),
        _ => {
            let deltas = Deltas::Exact(vec![text.to_owned()]);
            steps.push(if thought { Step::Thought(deltas) } else { Step::Text(deltas) });
        }
    }
}

/// Exact deltas written as one string when the scripted model would split it the same way.
fn readable(deltas: Deltas) -> Deltas {
    match deltas {
        Deltas::Exact(pieces) => {
            let joined = pieces.concat();
            if word_deltas(&joined) == pieces { Deltas::Words(joined) } else { Deltas::Exact(pieces) }
        }
        words => words,
    }
}

fn scripted_call(call: &ToolCallRequest) -> ScriptedCall {
    // Valid arguments are kept as JSON to stay readable (the editor sees them parsed, so
    // spacing and key order do not matter); anything else as the text the model wrote.
    let arguments = serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .filter(|value| !value.is_string())
        .unwrap_or_else(|| Value::String(call.arguments.clone()));
    ScriptedCall { name: call.name.clone(), arguments: Some(arguments), id: Some(call.id.clone()) }
}

/// The transcript text.
pub(super) fn write(setup: &Setup, seen: &Seen) -> String {
    let workspace = seen.workspace.as_ref();
    let paths = Paths {
        ws: workspace.map(|(_, resolved)| resolved.display().to_string()).unwrap_or_default(),
        home: setup.home.display().to_string(),
    };
    let mut notes = seen.notes.clone();
    let mut bindings = Bindings::default();
    let mut agent_requests: Vec<(Value, String)> = Vec::new();
    let mut steps = Vec::new();
    for (index, line) in seen.lines.iter().enumerate() {
        // What the agent said after the editor quit is expected after the input closes.
        if seen.closed_at == Some(index) {
            steps.push(json!({ "close_input": true }));
        }
        // The cwd as the editor gave it and as resolved are one workspace.
        let text = match workspace {
            Some((given, resolved)) if given != resolved => {
                line.text.replace(&escaped(&given.display().to_string()), &escaped(&paths.ws))
            }
            _ => line.text.clone(),
        };
        let Ok(mut message) = serde_json::from_str::<Value>(&text) else {
            match line.from {
                Sender::Client => steps.push(json!({ "send_raw": line.text })),
                Sender::Agent => notes.push("the agent wrote a line that is not JSON; it is left out".into()),
            }
            continue;
        };
        match line.from {
            Sender::Client => {
                let is_answer = message.get("method").is_none();
                if is_answer
                    && let Some(id) = message.get_mut("id")
                    && let Some((_, name)) = agent_requests.iter().find(|(value, _)| value == id)
                {
                    *id = Value::String(format!("${name}"));
                }
                note_unknown_session(&message, &bindings, &mut notes);
                steps.push(json!({ "send": generalize_sent(&message, &paths, &bindings) }));
            }
            Sender::Agent => {
                if message.get("method").is_some()
                    && let Some(id) = message.get_mut("id")
                {
                    let name = format!("req{}", agent_requests.len() + 1);
                    agent_requests.push((id.clone(), name.clone()));
                    bindings.bind(&name, id.clone());
                    *id = Value::String(format!("${name}"));
                }
                // The version changes with every release; the recording is not about it.
                if let Some(version) = message.pointer_mut("/result/agentInfo/version") {
                    *version = Value::String("$ANY_STRING".into());
                }
                // What the sandbox can do depends on the machine (and on whether the agent
                // itself runs confined, as it does on replay).
                if let Some(sandbox) = message.pointer_mut("/result/_meta/heron/sandbox") {
                    *sandbox = Value::String("{...}".into());
                }
                steps.push(json!({ "expect": generalize(&message, &paths, &mut bindings) }));
            }
        }
    }
    let mut script = Vec::new();
    for (index, (events, end)) in seen.turns.iter().enumerate() {
        // A request still streaming when the session ended never finished: as if cancelled.
        let (turn, note) = turn_of(events, end.as_ref().unwrap_or(&TapEnd::Cancelled));
        if let Some(note) = note {
            notes.push(format!("model request {index}: {note}"));
        }
        script.push(serde_json::to_value(&turn).unwrap_or_else(|_| json!({ "steps": [] })));
    }
    let header = Header {
        scenario: "Recorded from an editor session with `heron acp --record`: say here what it shows.".into(),
        args: setup.args.clone(),
        script,
        providers: setup.providers.clone(),
        config: setup.config.clone(),
        files: seen.files.iter().filter_map(|(path, text)| Some((path.clone(), text.clone()?))).collect(),
        ..Header::default()
    };
    let mut out = serde_json::to_string(&header).unwrap_or_default();
    out.push('\n');
    out.push_str("# Recorded by `heron acp --record`; replay with `heron conformance FILE`.\n");
    notes.dedup();
    for note in notes {
        out.push_str(&format!("# Note: {}\n", note.replace('\n', " ")));
    }
    for step in steps {
        out.push_str(&step.to_string());
        out.push('\n');
    }
    // A key the model repeated sits in the script and the files too, not only in traffic.
    heron_core::secret::redact(&out, &setup.secrets)
}

/// A string as it appears inside a JSON string literal.
fn escaped(text: &str) -> String {
    let quoted = Value::String(text.to_owned()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

/// Notes a request about a session this recording never saw created: its replay needs a
/// session that will not exist.
fn note_unknown_session(message: &Value, bindings: &Bindings, notes: &mut Vec<String>) {
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
    if !matches!(method, "session/load" | "session/resume" | "session/fork") {
        return;
    }
    let Some(id) = message.pointer("/params/sessionId").and_then(Value::as_str) else { return };
    let seen = generalize_sent(&Value::String(id.to_owned()), &Paths::default(), bindings);
    if seen.as_str() == Some(id) {
        notes.push(format!(
            "{method} of session {id}, made before the recording started: the replay has no such session"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_core::llm::{FinishReason, Usage};

    fn text(t: &str) -> ModelEvent {
        ModelEvent::TextDelta { text: t.into() }
    }

    #[test]
    fn deltas_the_scripted_model_would_make_are_one_string() {
        let events = [
            ModelEvent::Attempt { number: 1 },
            text("Hello "),
            text("world."),
            ModelEvent::Finish { reason: FinishReason::Stop },
        ];
        let (turn, note) = turn_of(&events, &TapEnd::Finished);
        assert_eq!(note, None);
        assert_eq!(turn.steps, [Step::Text(Deltas::Words("Hello world.".into()))]);
        assert_eq!(turn.finish, Some(FinishReason::Stop));
    }

    #[test]
    fn other_deltas_are_kept_exactly() {
        let events = [text("Hel"), text("lo"), ModelEvent::ThoughtDelta { text: "hm".into() }, text("!")];
        let (turn, _) = turn_of(&events, &TapEnd::Finished);
        assert_eq!(
            turn.steps,
            [
                Step::Text(Deltas::Exact(vec!["Hel".into(), "lo".into()])),
                Step::Thought(Deltas::Words("hm".into())),
                Step::Text(Deltas::Words("!".into())),
            ]
        );
    }

    #[test]
    fn tool_calls_usage_failures_and_cancels_replay() {
        let call = ToolCallRequest {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: "{\"path\":\"a\"}".into(),
        };
        let bad =
            ToolCallRequest { id: "c2".into(), name: "grep".into(), arguments: "{ \"pattern\": 1".into() };
        let usage = Usage { input_tokens: 3, output_tokens: 4, ..Usage::default() };
        let events =
            [ModelEvent::ToolCall { call }, ModelEvent::ToolCall { call: bad }, ModelEvent::Usage { usage }];
        let (turn, _) = turn_of(&events, &TapEnd::Failed("boom".into()));
        let value = serde_json::to_value(&turn).unwrap();
        assert_eq!(
            value,
            json!({"steps": [
                {"tool_call": {"name": "read_file", "arguments": {"path": "a"}, "id": "c1"}},
                {"tool_call": {"name": "grep", "arguments": "{ \"pattern\": 1", "id": "c2"}},
                {"usage": {"input": 3, "output": 4}},
                {"error": "boom"}
            ]})
        );
        let (cancelled, _) = turn_of(&[text("Working")], &TapEnd::Cancelled);
        assert_eq!(cancelled.steps.last(), Some(&Step::DelayMs(CANCELLED_WAIT_MS)));
    }

    #[test]
    fn a_retry_keeps_only_the_last_attempt() {
        let events = [
            ModelEvent::Attempt { number: 1 },
            text("lost "),
            ModelEvent::Attempt { number: 2 },
            text("kept"),
        ];
        let (turn, note) = turn_of(&events, &TapEnd::Finished);
        assert_eq!(turn.steps, [Step::Text(Deltas::Words("kept".into()))]);
        assert!(note.is_some_and(|n| n.contains("retried")));
    }
}
