//! The Messages request body: roles, blocks, thinking and cache breakpoints.

use super::*;

fn user(text: &str) -> ChatMessage {
    ChatMessage::User { parts: vec![UserPart::Text { text: text.into() }] }
}

fn calling(id: &str, arguments: &str, reasoning: Option<Reasoning>) -> ChatMessage {
    ChatMessage::Assistant {
        text: String::new(),
        tool_calls: vec![ToolCallRequest {
            id: id.into(),
            name: "read_file".into(),
            arguments: arguments.into(),
        }],
        reasoning,
    }
}

fn result(id: &str, content: &str) -> ChatMessage {
    ChatMessage::Tool { call_id: id.into(), content: content.into() }
}

fn request(messages: Vec<ChatMessage>) -> ModelRequest {
    ModelRequest {
        model: "claude-test".into(),
        messages,
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            parameters: json!({ "type": "object", "properties": { "path": { "type": "string" } } }),
        }],
        effort: None,
        max_tokens: None,
    }
}

fn signed() -> Reasoning {
    Reasoning {
        text: "hm".into(),
        details: Some(json!([
            { "type": "thinking", "thinking": "hm", "signature": "sig" },
            { "type": "redacted_thinking", "data": "opaque" },
        ])),
    }
}

/// The body with every `cache_control` taken out.
fn without_breakpoints(mut value: Value) -> Value {
    match &mut value {
        Value::Object(fields) => {
            fields.remove("cache_control");
            for field in fields.values_mut() {
                *field = without_breakpoints(field.take());
            }
        }
        Value::Array(items) => {
            for item in items.iter_mut() {
                *item = without_breakpoints(item.take());
            }
        }
        _ => {}
    }
    value
}

fn breakpoints(value: &Value) -> usize {
    match value {
        Value::Object(fields) => {
            usize::from(fields.contains_key("cache_control"))
                + fields.values().map(breakpoints).sum::<usize>()
        }
        Value::Array(items) => items.iter().map(breakpoints).sum(),
        _ => 0,
    }
}

#[test]
fn a_plain_request_has_the_required_fields_and_system_blocks() {
    let body = request_body(&ModelRequest {
        tools: Vec::new(),
        ..request(vec![ChatMessage::System { text: "Be brief.".into() }, user("Hi")])
    });
    assert_eq!(
        body,
        json!({
            "model": "claude-test",
            "max_tokens": DEFAULT_MAX_TOKENS,
            "stream": true,
            "system": [{ "type": "text", "text": "Be brief.", "cache_control": { "type": "ephemeral" } }],
            "messages": [{ "role": "user", "content": [
                { "type": "text", "text": "Hi", "cache_control": { "type": "ephemeral" } },
            ] }],
        })
    );
}

#[test]
fn tool_results_and_a_following_user_message_merge_into_one_user_message() {
    let body = request_body(&request(vec![
        user("read a and b"),
        ChatMessage::Assistant {
            text: "Reading.".into(),
            tool_calls: vec![
                ToolCallRequest {
                    id: "a".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a"}"#.into(),
                },
                ToolCallRequest {
                    id: "b".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"b"}"#.into(),
                },
            ],
            reasoning: None,
        },
        result("a", "A"),
        result("b", ""),
        user("and stop"),
    ]));
    let body = without_breakpoints(body);
    let roles: Vec<&Value> =
        body["messages"].as_array().expect("messages").iter().map(|m| &m["role"]).collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            { "type": "text", "text": "Reading." },
            { "type": "tool_use", "id": "a", "name": "read_file", "input": { "path": "a" } },
            { "type": "tool_use", "id": "b", "name": "read_file", "input": { "path": "b" } },
        ])
    );
    assert_eq!(
        body["messages"][2]["content"],
        json!([
            { "type": "tool_result", "tool_use_id": "a", "content": "A" },
            { "type": "tool_result", "tool_use_id": "b" },
            { "type": "text", "text": "and stop" },
        ])
    );
}

#[test]
fn arguments_that_are_not_a_json_object_go_as_an_empty_input() {
    let body = without_breakpoints(request_body(&request(vec![
        user("go"),
        calling("x", "{\"path\": tru", None),
        result("x", "refused"),
    ])));
    assert_eq!(body["messages"][1]["content"][0]["input"], json!({}));
    let body = without_breakpoints(request_body(&request(vec![user("go"), calling("x", "[1]", None)])));
    assert_eq!(body["messages"][1]["content"][0]["input"], json!({}));
}

#[test]
fn call_ids_keep_to_the_characters_anthropic_accepts_on_both_sides() {
    let body = without_breakpoints(request_body(&request(vec![
        user("go"),
        calling("fc.1:x", "{}", None),
        result("fc.1:x", "ok"),
    ])));
    assert_eq!(body["messages"][1]["content"][0]["id"], "fc_1_x");
    assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "fc_1_x");
}

#[test]
fn images_go_as_base64_sources_and_blank_text_is_left_out() {
    let parts = vec![
        UserPart::Text { text: "  ".into() },
        UserPart::Image { mime_type: "image/png".into(), data: "iVBORw0=".into() },
    ];
    let body = without_breakpoints(request_body(&request(vec![ChatMessage::User { parts }])));
    assert_eq!(
        body["messages"][0]["content"],
        json!([{ "type": "image", "source": { "type": "base64", "media_type": "image/png", "data": "iVBORw0=" } }])
    );
}

#[test]
fn an_empty_assistant_message_is_left_out_so_roles_still_alternate() {
    let empty = ChatMessage::Assistant { text: String::new(), tool_calls: Vec::new(), reasoning: None };
    let body = without_breakpoints(request_body(&request(vec![user("a"), empty, user("b")])));
    assert_eq!(
        body["messages"],
        json!([{ "role": "user", "content": [{ "type": "text", "text": "a" }, { "type": "text", "text": "b" }] }])
    );
}

#[test]
fn signed_thinking_goes_back_first_and_foreign_reasoning_does_not() {
    let body = without_breakpoints(request_body(&request(vec![
        user("go"),
        calling("x", "{}", Some(signed())),
        result("x", "ok"),
    ])));
    let content = &body["messages"][1]["content"];
    assert_eq!(content[0], json!({ "type": "thinking", "thinking": "hm", "signature": "sig" }));
    assert_eq!(content[1], json!({ "type": "redacted_thinking", "data": "opaque" }));
    assert_eq!(content[2]["type"], "tool_use");

    let foreign = Reasoning {
        text: "hm".into(),
        details: Some(json!([{ "type": "reasoning.text", "text": "hm", "signature": "s" }])),
    };
    let unsigned = Reasoning { text: "hm".into(), details: None };
    for reasoning in [foreign, unsigned] {
        let body = without_breakpoints(request_body(&request(vec![
            user("go"),
            calling("x", "{}", Some(reasoning)),
        ])));
        assert_eq!(body["messages"][1]["content"].as_array().map(Vec::len), Some(1));
    }
}

#[test]
fn effort_turns_thinking_on_with_room_for_the_answer() {
    let mut asked = request(vec![user("go")]);
    asked.effort = Some("high".into());
    let body = request_body(&asked);
    assert_eq!(body["thinking"], json!({ "type": "enabled", "budget_tokens": 20480 }));
    assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS + 20480);

    asked.max_tokens = Some(10_000);
    let body = request_body(&asked);
    assert_eq!(body["thinking"]["budget_tokens"], 5000, "half of an explicit limit at most");
    assert_eq!(body["max_tokens"], 10_000);

    asked.max_tokens = Some(1500);
    assert!(request_body(&asked).get("thinking").is_none(), "too small a limit leaves no budget");
    asked.effort = Some("auto-ish".into());
    asked.max_tokens = None;
    assert!(request_body(&asked).get("thinking").is_none());
}

#[test]
fn thinking_waits_while_a_tool_loop_runs_that_began_without_it() {
    let mut unthinking = request(vec![user("go"), calling("x", "{}", None), result("x", "ok")]);
    unthinking.effort = Some("low".into());
    assert!(request_body(&unthinking).get("thinking").is_none());
    unthinking.messages.push(calling("y", "{}", Some(signed())));
    unthinking.messages.push(result("y", "ok"));
    assert!(request_body(&unthinking).get("thinking").is_none(), "the loop began without thinking");
    unthinking.messages.push(calling("z", "{}", None));
    unthinking.messages.push(result("z", "ok"));
    unthinking.messages.push(user("next"));
    assert!(request_body(&unthinking).get("thinking").is_none(), "results still in the last message");
    unthinking.messages.push(ChatMessage::Assistant {
        text: "done".into(),
        tool_calls: Vec::new(),
        reasoning: None,
    });
    unthinking.messages.push(user("again"));
    assert!(request_body(&unthinking).get("thinking").is_some(), "the user spoke after the loop");
}

#[test]
fn a_loop_that_began_with_thinking_keeps_it_on_later_unthinking_steps() {
    let mut thinking = request(vec![user("go"), calling("x", "{}", Some(signed())), result("x", "ok")]);
    thinking.effort = Some("medium".into());
    assert!(request_body(&thinking).get("thinking").is_some());
    // Without interleaved thinking, later steps of the loop carry no thinking of their own.
    thinking.messages.push(calling("y", "{}", None));
    thinking.messages.push(result("y", "ok"));
    assert!(request_body(&thinking).get("thinking").is_some());
}

#[test]
fn without_thinking_a_final_assistant_message_loses_its_thinking() {
    let prefill =
        ChatMessage::Assistant { text: "Sure".into(), tool_calls: Vec::new(), reasoning: Some(signed()) };
    let body = without_breakpoints(request_body(&request(vec![user("go"), prefill])));
    assert_eq!(body["messages"][1]["content"], json!([{ "type": "text", "text": "Sure" }]));
}

#[test]
fn the_same_request_gives_the_same_bytes() {
    let asked = request(vec![
        ChatMessage::System { text: "s".into() },
        user("go"),
        calling("x", r#"{"b":1,"a":2}"#, None),
    ]);
    let first = serde_json::to_vec(&request_body(&asked)).expect("encodes");
    let second = serde_json::to_vec(&request_body(&asked.clone())).expect("encodes");
    assert_eq!(first, second);
}

#[test]
fn the_next_request_of_a_session_keeps_the_cached_prefix() {
    let system = ChatMessage::System { text: "You are Heron.".into() };
    let first = request(vec![system, user("read a")]);
    let mut second = first.clone();
    second.messages.push(calling("x", r#"{"path":"a"}"#, Some(signed())));
    second.messages.push(result("x", "contents of a"));
    let (first, second) = (request_body(&first), request_body(&second));

    let bytes = |value: &Value| serde_json::to_string(value).expect("encodes");
    assert_eq!(bytes(&first["system"]), bytes(&second["system"]));
    assert_eq!(bytes(&first["tools"]), bytes(&second["tools"]));
    let earlier = first["messages"].as_array().expect("messages");
    let later = second["messages"].as_array().expect("messages");
    assert_eq!(later.len(), earlier.len() + 2);
    for (before, after) in earlier.iter().zip(later) {
        assert_eq!(bytes(&without_breakpoints(before.clone())), bytes(&without_breakpoints(after.clone())));
    }
    // The breakpoint the first request ended on is still there, and one more marks the end.
    assert_eq!(bytes(&earlier[0]), bytes(&later[0]));
    assert_eq!(later[2]["content"][0]["cache_control"], json!({ "type": "ephemeral" }));
    assert_eq!(breakpoints(&second), 4);
}

#[test]
fn breakpoints_never_exceed_four_and_skip_thinking_blocks() {
    let mut long =
        request(vec![ChatMessage::System { text: "a".into() }, ChatMessage::System { text: "b".into() }]);
    for n in 0..10 {
        long.messages.push(user(&format!("u{n}")));
        long.messages.push(calling(&format!("c{n}"), "{}", Some(signed())));
        long.messages.push(result(&format!("c{n}"), "r"));
    }
    let body = request_body(&long);
    assert_eq!(breakpoints(&body), 4);
    assert!(body["system"][0].get("cache_control").is_none());
    let only_thinking =
        ChatMessage::Assistant { text: String::new(), tool_calls: Vec::new(), reasoning: Some(signed()) };
    let mut thinking_last = request(vec![user("go"), only_thinking]);
    thinking_last.effort = Some("low".into());
    let body = request_body(&thinking_last);
    assert!(
        body["messages"][1]["content"]
            .as_array()
            .expect("content")
            .iter()
            .all(|b| b.get("cache_control").is_none())
    );
}
