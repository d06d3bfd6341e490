//! The stored history `session/load` is measured on: turns shaped like real work, written
//! as the store holds them.

use heron_core::session::event::Event;
use heron_core::types::{
    Location, PlanItem, PlanPriority, PlanStatus, StopReason, ToolKind, ToolOutput, ToolStatus, UserContent,
};
use serde_json::{Value, json};

/// The events of prompt turn `n`, shaped like real work: a prompt, a thought, a file read
/// (40 numbered lines), a search, an edit with its diff, every fourth turn a `todo_write`
/// plan, the agent's messages between, and the turn's end. 14 or 17 events.
pub fn turn_events(n: usize, ws: &str) -> Vec<Event> {
    let path = format!("{ws}/src/module_{}.rs", n % 37);
    let call = |k: usize| format!("call_{n}_{k}");
    let listing: String = (1..=40)
        .map(|line| format!("{line:>6}\tlet value_{line} = compute(&input[{line}..], options.turn_{n})?;\n"))
        .collect();
    let hits = (1..=6)
        .map(|k| format!("{ws}/src/module_{k}.rs:{}: fn parse_header(input: &str) -> Result<Header>", k * 17))
        .collect::<Vec<_>>()
        .join("\n");
    let old_text = format!("    let header = parse_header(input)?;\n    let body = &input[{n}..];\n");
    let new_text = format!(
        "    let header = parse_header(input).context(\"turn {n}\")?;\n    let body = &input[header.len..];\n"
    );
    let message = |k: usize, text: String| Event::AgentMessage { message_id: format!("msg_{n}_{k}"), text };
    let mut events = vec![
        Event::UserMessage {
            message_id: format!("user_{n}"),
            content: vec![UserContent::Text {
                text: format!(
                    "Request {n}: the parser rejects headers with trailing spaces; find where and fix it."
                ),
            }],
            command: None,
        },
        Event::AgentThought {
            message_id: format!("thought_{n}"),
            text: "The user reports a parser bug. I should read the module, search for the header \
                   parser's callers, then make the smallest fix and explain it."
                .repeat(2),
            details: None,
        },
        message(0, "I'll start by reading the module that parses headers.".to_owned()),
        Event::ToolCall {
            call_id: call(0),
            name: "read_file".to_owned(),
            title: format!("Read src/module_{}.rs", n % 37),
            tool_kind: ToolKind::Read,
            arguments: json!({ "path": path }).to_string(),
            raw_input: json!({ "path": path }),
            locations: vec![Location { path: path.clone(), line: None, folder: false }],
        },
        Event::ToolResult {
            call_id: call(0),
            status: ToolStatus::Completed,
            output: vec![ToolOutput::Text { text: listing.clone() }],
            raw_output: None,
            for_model: listing,
            instructions: Vec::new(),
        },
        Event::ToolCall {
            call_id: call(1),
            name: "grep".to_owned(),
            title: "Search for `fn parse_header`".to_owned(),
            tool_kind: ToolKind::Search,
            arguments: json!({ "pattern": "fn parse_header" }).to_string(),
            raw_input: json!({ "pattern": "fn parse_header" }),
            locations: Vec::new(),
        },
        Event::ToolResult {
            call_id: call(1),
            status: ToolStatus::Completed,
            output: vec![ToolOutput::Text { text: hits.clone() }],
            raw_output: Some(json!({ "matches": 6 })),
            for_model: hits,
            instructions: Vec::new(),
        },
        message(1, "The header parser does not trim before comparing. I'll fix that.".to_owned()),
        Event::ToolCall {
            call_id: call(2),
            name: "edit_file".to_owned(),
            title: format!("Edit src/module_{}.rs", n % 37),
            tool_kind: ToolKind::Edit,
            arguments: json!({ "path": path, "old": old_text, "new": new_text }).to_string(),
            raw_input: json!({ "path": path, "old": old_text, "new": new_text }),
            locations: vec![Location { path: path.clone(), line: Some(42), folder: false }],
        },
        Event::ToolResult {
            call_id: call(2),
            status: ToolStatus::Completed,
            output: vec![ToolOutput::Diff { path: path.clone(), old_text: Some(old_text), new_text }],
            raw_output: Some(json!({ "line": 42 })),
            for_model: format!("Edited src/module_{}.rs (first change at line 42)", n % 37),
            instructions: Vec::new(),
        },
    ];
    if n.is_multiple_of(4) {
        let entries = ["Read the parser", "Fix the trailing-space case", "Run the tests"]
            .iter()
            .enumerate()
            .map(|(k, content)| PlanItem {
                content: (*content).to_owned(),
                priority: PlanPriority::Medium,
                status: if k == 0 { PlanStatus::Completed } else { PlanStatus::Pending },
            })
            .collect::<Vec<_>>();
        let todos: Vec<Value> =
            entries.iter().map(|e| json!({ "content": e.content, "status": e.status })).collect();
        let raw_input = json!({ "todos": todos });
        events.push(Event::ToolCall {
            call_id: call(3),
            name: "todo_write".to_owned(),
            title: "Update the plan (3 items)".to_owned(),
            tool_kind: ToolKind::Think,
            arguments: raw_input.to_string(),
            raw_input,
            locations: Vec::new(),
        });
        events.push(Event::Plan { entries });
        events.push(Event::ToolResult {
            call_id: call(3),
            status: ToolStatus::Completed,
            output: Vec::new(),
            raw_output: None,
            for_model: "The plan has 3 items.".to_owned(),
            instructions: Vec::new(),
        });
    }
    events.push(message(
        2,
        format!(
            "Fixed in src/module_{}.rs: the header is trimmed before it is compared, so trailing \
             spaces no longer fail the parse. The other five callers go through the same function.",
            n % 37
        ),
    ));
    events.push(message(3, "Run the tests when you are ready; I changed nothing else.".to_owned()));
    events.push(Event::TurnEnded { stop_reason: StopReason::EndTurn });
    events
}
