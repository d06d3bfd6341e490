//! The OpenAI Chat Completions request body built from a [`ModelRequest`], shaped for the
//! server by a [`RequestShape`]. Pure data handling; the stream's side is `chunks`.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use crate::config::flavor::{
    CallIds, DropField, MaxTokensField, ReasoningField, RequestShape, ToolCallContent, ToolChoice,
};
use crate::llm::{ChatMessage, ModelRequest, Reasoning, UserPart};

/// The JSON body of a streamed chat completion request.
pub(crate) fn request_body(request: &ModelRequest, shape: &RequestShape) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    let messages = alternating(&request.messages).into_iter().map(|m| message(&m, shape));
    body.insert("messages".into(), messages.collect());
    body.insert("stream".into(), json!(true));
    if shape.stream_options {
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    if !request.tools.is_empty() {
        let tools = request.tools.iter().map(|tool| {
            json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            })
        });
        body.insert("tools".into(), tools.collect());
        if let Some(choice) = tool_choice(request, shape.tool_choice.as_ref()) {
            body.insert("tool_choice".into(), choice);
        }
    }
    if let Some(effort) = request.effort.as_ref().filter(|_| shape.reasoning_effort) {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    if let Some(max_tokens) = request.max_tokens {
        let field = match shape.max_tokens_field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        body.insert(field.into(), json!(max_tokens));
    }
    drop_fields(&mut body, &shape.drop_fields);
    // Last, so that a field set here is sent as written, whatever Heron or a preset put
    // under its key (the config refuses the keys no request works without).
    for (key, value) in &shape.body.0 {
        body.insert(key.clone(), value.clone());
    }
    Value::Object(body)
}

/// The `tool_choice` of a request that offers tools. A choice that forces a call is sent
/// until the turn's first tool call (an assistant message with calls after the last user
/// message), then left out, so the model can answer and the turn end; a named tool the
/// request does not offer (plan mode's read-only set) is never asked for.
fn tool_choice(request: &ModelRequest, choice: Option<&ToolChoice>) -> Option<Value> {
    let choice = choice?;
    if choice.forces_a_call() {
        let called = request
            .messages
            .iter()
            .rev()
            .take_while(|m| !matches!(m, ChatMessage::User { .. }))
            .any(|m| matches!(m, ChatMessage::Assistant { tool_calls, .. } if !tool_calls.is_empty()));
        if called {
            return None;
        }
    }
    Some(match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::Required => json!("required"),
        ToolChoice::None => json!("none"),
        ToolChoice::Function(name) => {
            if !request.tools.iter().any(|tool| &tool.name == name) {
                return None;
            }
            json!({ "type": "function", "function": { "name": name } })
        }
    })
}

/// The messages with each run of user messages sent as one, its parts in order. A turn
/// that failed before the model answered leaves its prompt in the history, and the next
/// prompt would follow it directly; strict chat templates refuse two user messages in a
/// row ("roles must alternate"), so both go as one message, and the model still reads
/// the prompt it never answered. Anthropic's wire merges the same way.
fn alternating(messages: &[ChatMessage]) -> Vec<Cow<'_, ChatMessage>> {
    let mut out: Vec<Cow<'_, ChatMessage>> = Vec::with_capacity(messages.len());
    for message in messages {
        if let ChatMessage::User { parts: more } = message
            && let Some(last) = out.last_mut()
            && matches!(**last, ChatMessage::User { .. })
            && let ChatMessage::User { parts } = last.to_mut()
        {
            parts.extend(more.iter().cloned());
            continue;
        }
        out.push(Cow::Borrowed(message));
    }
    out
}

/// Removes the configured fields: last, so that they go whichever part of the body (or
/// preset) added them.
fn drop_fields(body: &mut Map<String, Value>, fields: &[DropField]) {
    for field in fields {
        match field {
            DropField::Body(key) => {
                body.remove(key);
            }
            DropField::Message(key) => {
                let messages = body.get_mut("messages").and_then(Value::as_array_mut);
                for message in messages.into_iter().flatten() {
                    if let Value::Object(message) = message {
                        message.remove(key);
                    }
                }
            }
        }
    }
}

fn message(message: &ChatMessage, shape: &RequestShape) -> Value {
    match message {
        ChatMessage::System { text } => json!({ "role": "system", "content": text }),
        ChatMessage::User { parts } => json!({ "role": "user", "content": user_content(parts) }),
        ChatMessage::Assistant { text, tool_calls, reasoning } => {
            let mut value = assistant(text, tool_calls, shape);
            if let Value::Object(fields) = &mut value {
                add_reasoning(fields, reasoning.as_ref(), !tool_calls.is_empty(), shape.reasoning_field);
            }
            value
        }
        ChatMessage::Tool { call_id: id, content } => {
            json!({ "role": "tool", "tool_call_id": call_id(id, shape.call_ids), "content": content })
        }
    }
}

/// A tool-call id as the server accepts it. Mistral's own ids (9 letters and digits) stay
/// as they are; any other becomes 9 letters and digits drawn from a hash of it, so a call
/// and its result still agree, and every request sends the same id.
fn call_id(id: &str, ids: CallIds) -> Cow<'_, str> {
    match ids {
        CallIds::AsRecorded => Cow::Borrowed(id),
        CallIds::NineAlphanumeric if id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()) => {
            Cow::Borrowed(id)
        }
        CallIds::NineAlphanumeric => {
            const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
            // FNV-1a: fixed across processes and versions, unlike the standard library's
            // hasher, so a session resumed later maps its ids the same way.
            let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
            for byte in id.bytes() {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
            }
            let mapped = (0..9)
                .map(|_| {
                    let digit = DIGITS[(hash % 62) as usize];
                    hash /= 62;
                    char::from(digit)
                })
                .collect();
            Cow::Owned(mapped)
        }
    }
}

/// Passes an assistant message's reasoning back the way the server wants it, if at all.
/// DeepSeek's thinking mode refuses (400 "Missing reasoning_content") a message with tool
/// calls that lacks the field, even when the model thought nothing before them, so such a
/// message always carries it, empty if need be.
fn add_reasoning(
    fields: &mut Map<String, Value>,
    reasoning: Option<&Reasoning>,
    has_calls: bool,
    field: ReasoningField,
) {
    match field {
        ReasoningField::None => {}
        ReasoningField::ReasoningContent => {
            let text = reasoning.map_or("", |r| r.text.as_str());
            if has_calls || !text.is_empty() {
                fields.insert("reasoning_content".into(), json!(text));
            }
        }
        ReasoningField::ReasoningDetails => {
            let entries = match reasoning.and_then(|r| r.details.as_ref()) {
                Some(Value::Array(entries)) => entries.as_slice(),
                Some(entry @ Value::Object(_)) => std::slice::from_ref(entry),
                _ => &[],
            };
            // Only OpenRouter's own entries (`reasoning.text`, `reasoning.summary`,
            // `reasoning.encrypted`) go back: a session that switched models may hold
            // Anthropic thinking blocks or Responses reasoning items, which OpenRouter would
            // refuse or pass to a model that cannot read them.
            let own: Vec<Value> = entries
                .iter()
                .filter(|entry| {
                    entry.get("type").and_then(Value::as_str).is_some_and(|t| t.starts_with("reasoning."))
                })
                .cloned()
                .collect();
            if !own.is_empty() {
                fields.insert("reasoning_details".into(), Value::Array(own));
            }
        }
    }
}

fn assistant(text: &str, tool_calls: &[crate::llm::ToolCallRequest], shape: &RequestShape) -> Value {
    match tool_calls {
        [] => json!({ "role": "assistant", "content": text }),
        _ => {
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call_id(&call.id, shape.call_ids),
                        "type": "function",
                        "function": { "name": call.name, "arguments": call.arguments },
                    })
                })
                .collect();
            let mut message = Map::new();
            message.insert("role".into(), json!("assistant"));
            // Servers disagree on the content of a message that only calls tools; the shape
            // says what this one accepts.
            let content = match shape.tool_call_content {
                _ if !text.is_empty() => Some(json!(text)),
                ToolCallContent::Null => Some(Value::Null),
                ToolCallContent::Empty => Some(json!("")),
                ToolCallContent::Omitted => None,
            };
            if let Some(content) = content {
                message.insert("content".into(), content);
            }
            message.insert("tool_calls".into(), Value::Array(calls));
            Value::Object(message)
        }
    }
}

/// Text-only content goes as one string, which every compatible server accepts; content
/// with images goes as the array of typed parts.
fn user_content(parts: &[UserPart]) -> Value {
    let has_image = parts.iter().any(|part| matches!(part, UserPart::Image { .. }));
    if !has_image {
        let texts: Vec<&str> = parts
            .iter()
            .filter_map(|part| match part {
                UserPart::Text { text } => Some(text.as_str()),
                UserPart::Image { .. } => None,
            })
            .collect();
        return json!(texts.join("\n\n"));
    }
    parts
        .iter()
        .map(|part| match part {
            UserPart::Text { text } => json!({ "type": "text", "text": text }),
            UserPart::Image { mime_type, data } => json!({
                "type": "image_url",
                "image_url": { "url": format!("data:{mime_type};base64,{data}") },
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shaped(reasoning_field: ReasoningField) -> RequestShape {
        RequestShape { reasoning_field, ..RequestShape::default() }
    }

    fn with_reasoning(field: ReasoningField) -> Value {
        let reasoning =
            Reasoning { text: "think".into(), details: Some(json!([{ "type": "reasoning.text" }])) };
        let message =
            ChatMessage::Assistant { text: "a".into(), tool_calls: Vec::new(), reasoning: Some(reasoning) };
        super::message(&message, &shaped(field))
    }

    #[test]
    fn reasoning_goes_back_only_in_the_field_the_server_wants() {
        let none = with_reasoning(ReasoningField::None);
        assert!(none.get("reasoning_content").is_none() && none.get("reasoning_details").is_none());
        let content = with_reasoning(ReasoningField::ReasoningContent);
        assert_eq!(content["reasoning_content"], "think");
        assert!(content.get("reasoning_details").is_none());
        let details = with_reasoning(ReasoningField::ReasoningDetails);
        assert_eq!(details["reasoning_details"], json!([{ "type": "reasoning.text" }]));
        assert!(details.get("reasoning_content").is_none());
    }

    #[test]
    fn a_tool_call_without_thoughts_still_carries_reasoning_content_for_deepseek() {
        let call = crate::llm::ToolCallRequest { id: "c".into(), name: "t".into(), arguments: "{}".into() };
        let calls = ChatMessage::Assistant { text: String::new(), tool_calls: vec![call], reasoning: None };
        let content = shaped(ReasoningField::ReasoningContent);
        assert_eq!(super::message(&calls, &content)["reasoning_content"], "");
        assert!(super::message(&calls, &shaped(ReasoningField::None)).get("reasoning_content").is_none());
        let plain = ChatMessage::Assistant { text: "a".into(), tool_calls: Vec::new(), reasoning: None };
        assert!(super::message(&plain, &content).get("reasoning_content").is_none());
    }

    #[test]
    fn stream_options_and_the_token_field_follow_the_shape() {
        let request = ModelRequest {
            model: "m".into(),
            messages: Vec::new(),
            tools: Vec::new(),
            effort: None,
            max_tokens: Some(10),
        };
        let common = request_body(&request, &RequestShape::default());
        assert_eq!(common["max_tokens"], 10);
        assert!(common.get("stream_options").is_some());
        let shape = RequestShape {
            stream_options: false,
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            ..RequestShape::default()
        };
        let shaped = request_body(&request, &shape);
        assert_eq!(shaped["max_completion_tokens"], 10);
        assert!(shaped.get("max_tokens").is_none() && shaped.get("stream_options").is_none());
    }

    #[test]
    fn dropped_fields_leave_the_body_and_every_message_whatever_added_them() {
        let request = ModelRequest {
            model: "m".into(),
            messages: vec![ChatMessage::Assistant {
                text: String::new(),
                tool_calls: vec![crate::llm::ToolCallRequest {
                    id: "c".into(),
                    name: "t".into(),
                    arguments: "{}".into(),
                }],
                reasoning: None,
            }],
            tools: Vec::new(),
            effort: Some("high".into()),
            max_tokens: None,
        };
        let shape = RequestShape {
            reasoning_field: ReasoningField::ReasoningContent,
            drop_fields: vec![
                DropField::Body("reasoning_effort".into()),
                DropField::Body("stream_options".into()),
                DropField::Message("reasoning_content".into()),
            ],
            ..RequestShape::default()
        };
        let body = request_body(&request, &shape);
        for gone in ["reasoning_effort", "stream_options"] {
            assert!(body.get(gone).is_none(), "{gone} was sent: {body}");
        }
        let message = &body["messages"][0];
        assert!(message.get("reasoning_content").is_none(), "{message}");
        assert_eq!(message["tool_calls"][0]["id"], "c", "the rest of the message stays");
        assert_eq!(body["model"], "m");
    }

    fn call_then_result(id: &str) -> [ChatMessage; 2] {
        let call =
            crate::llm::ToolCallRequest { id: id.into(), name: "read_file".into(), arguments: "{}".into() };
        [
            ChatMessage::Assistant { text: String::new(), tool_calls: vec![call], reasoning: None },
            ChatMessage::Tool { call_id: id.into(), content: "hello".into() },
        ]
    }

    /// The id of the call, and the id its result answers, as sent with `shape`.
    fn sent_ids(id: &str, shape: &RequestShape) -> (String, String) {
        let [call, result] = call_then_result(id).map(|m| super::message(&m, shape));
        let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
        (text(&call["tool_calls"][0]["id"]), text(&result["tool_call_id"]))
    }

    #[test]
    fn a_foreign_call_id_becomes_nine_alphanumerics_for_mistral_alike_in_the_call_and_its_result() {
        let mistral = crate::config::flavor::Flavor::Mistral.shape();
        let mut seen = Vec::new();
        for foreign in
            ["call_9f1c2d3e4b5a6f7081928374", "toolu_01A09q90qw90lq917835lq9", "fc_1", "aB3dE5fG7-"]
        {
            let (call, result) = sent_ids(foreign, &mistral);
            assert_eq!(call, result, "a call and its result agree");
            assert!(
                call.len() == 9 && call.bytes().all(|b| b.is_ascii_alphanumeric()),
                "{foreign} -> {call}"
            );
            assert_eq!(sent_ids(foreign, &mistral).0, call, "every request maps it alike");
            seen.push(call);
        }
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 4, "different ids stay different: {seen:?}");
    }

    #[test]
    fn mistral_ids_stay_and_other_flavors_send_every_id_as_recorded() {
        let mistral = crate::config::flavor::Flavor::Mistral.shape();
        assert_eq!(sent_ids("aB3dE5fG7", &mistral), ("aB3dE5fG7".into(), "aB3dE5fG7".into()));
        let openai = crate::config::flavor::Flavor::Openai.shape();
        let foreign = "toolu_01A09q90qw90lq917835lq9";
        assert_eq!(sent_ids(foreign, &openai), (foreign.into(), foreign.into()));
    }

    #[test]
    fn openrouter_gets_back_only_its_own_reasoning_entries() {
        let details = json!([
            { "type": "thinking", "thinking": "from Anthropic", "signature": "sig" },
            { "type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA" },
            { "type": "reasoning.encrypted", "data": "opaque", "format": "google-gemini-v1", "index": 0 },
            { "type": "reasoning.text", "text": "mine", "index": 1 },
        ]);
        let message = ChatMessage::Assistant {
            text: "a".into(),
            tool_calls: Vec::new(),
            reasoning: Some(Reasoning { text: String::new(), details: Some(details) }),
        };
        let sent = super::message(&message, &shaped(ReasoningField::ReasoningDetails));
        assert_eq!(
            sent["reasoning_details"],
            json!([
                { "type": "reasoning.encrypted", "data": "opaque", "format": "google-gemini-v1", "index": 0 },
                { "type": "reasoning.text", "text": "mine", "index": 1 },
            ])
        );
        let foreign = ChatMessage::Assistant {
            text: "a".into(),
            tool_calls: Vec::new(),
            reasoning: Some(Reasoning {
                text: "t".into(),
                details: Some(json!([{ "type": "thinking", "thinking": "t", "signature": "s" }])),
            }),
        };
        let sent = super::message(&foreign, &shaped(ReasoningField::ReasoningDetails));
        assert!(sent.get("reasoning_details").is_none(), "none of it was OpenRouter's: {sent}");
    }

    #[test]
    fn mistral_gets_no_reasoning_effort_even_with_an_effort_chosen() {
        let request = ModelRequest {
            model: "m".into(),
            messages: Vec::new(),
            tools: Vec::new(),
            effort: Some("high".into()),
            max_tokens: None,
        };
        let mistral = request_body(&request, &crate::config::flavor::Flavor::Mistral.shape());
        assert!(mistral.get("reasoning_effort").is_none(), "{mistral}");
        let openai = request_body(&request, &crate::config::flavor::Flavor::Openai.shape());
        assert_eq!(openai["reasoning_effort"], "high");
    }

    fn tool_only(shape: &RequestShape) -> Value {
        let [call, _] = call_then_result("c");
        super::message(&call, shape)
    }

    #[test]
    fn a_tool_only_message_carries_the_content_its_server_accepts() {
        let with = |tool_call_content| RequestShape { tool_call_content, ..RequestShape::default() };
        assert_eq!(tool_only(&with(ToolCallContent::Null)).get("content"), Some(&Value::Null));
        assert_eq!(tool_only(&with(ToolCallContent::Empty))["content"], "");
        let omitted = tool_only(&with(ToolCallContent::Omitted));
        assert!(omitted.get("content").is_none() && omitted["tool_calls"][0]["id"] == "c", "{omitted}");
        let llamacpp = crate::config::flavor::Flavor::Llamacpp.shape();
        assert_eq!(tool_only(&llamacpp)["content"], "", "llama-cpp-python refuses null");
        let call = crate::llm::ToolCallRequest { id: "c".into(), name: "t".into(), arguments: "{}".into() };
        let said =
            ChatMessage::Assistant { text: "Reading.".into(), tool_calls: vec![call], reasoning: None };
        assert_eq!(super::message(&said, &with(ToolCallContent::Omitted))["content"], "Reading.");
    }

    fn asking(messages: Vec<ChatMessage>, tools: &[&str]) -> ModelRequest {
        let spec = |name: &&str| crate::llm::ToolSpec {
            name: (*name).to_owned(),
            description: String::new(),
            parameters: json!({ "type": "object" }),
        };
        ModelRequest {
            model: "m".into(),
            messages,
            tools: tools.iter().map(spec).collect(),
            effort: None,
            max_tokens: None,
        }
    }

    #[test]
    fn a_forcing_tool_choice_holds_until_the_first_call_since_the_user_spoke() {
        let user = |text: &str| ChatMessage::User { parts: vec![UserPart::Text { text: text.into() }] };
        let named = ToolChoice::Function("read_file".into());
        let shape = |choice: &ToolChoice| RequestShape {
            tool_choice: Some(choice.clone()),
            ..RequestShape::default()
        };
        let first = asking(vec![user("read it")], &["read_file"]);
        assert_eq!(
            request_body(&first, &shape(&named))["tool_choice"],
            json!({ "type": "function", "function": { "name": "read_file" } })
        );
        assert_eq!(request_body(&first, &shape(&ToolChoice::Required))["tool_choice"], "required");
        let [call, result] = call_then_result("c");
        let after = asking(vec![user("read it"), call.clone(), result.clone()], &["read_file"]);
        for forcing in [&named, &ToolChoice::Required] {
            assert!(request_body(&after, &shape(forcing)).get("tool_choice").is_none(), "{forcing:?}");
        }
        assert_eq!(request_body(&after, &shape(&ToolChoice::Auto))["tool_choice"], "auto");
        let next = asking(vec![user("read it"), call, result, user("again")], &["read_file"]);
        assert!(
            request_body(&next, &shape(&named)).get("tool_choice").is_some(),
            "a new prompt forces again"
        );
        let elsewhere = asking(vec![user("read it")], &["search"]);
        assert!(request_body(&elsewhere, &shape(&named)).get("tool_choice").is_none(), "not offered");
        let no_tools = asking(vec![user("summarize")], &[]);
        assert!(request_body(&no_tools, &shape(&ToolChoice::Auto)).get("tool_choice").is_none());
    }

    #[test]
    fn body_fields_are_set_last_over_what_heron_and_drop_fields_did() {
        let request = asking(Vec::new(), &[]);
        let shape = RequestShape {
            drop_fields: vec![DropField::Body("temperature".into())],
            body: crate::config::flavor::BodyFields(vec![
                ("temperature".into(), json!(0.2)),
                ("stream_options".into(), json!({ "include_usage": false })),
                ("chat_template_kwargs".into(), json!({ "enable_thinking": false })),
            ]),
            ..RequestShape::default()
        };
        let body = request_body(&request, &shape);
        assert_eq!(body["temperature"], 0.2);
        assert_eq!(body["stream_options"], json!({ "include_usage": false }));
        assert_eq!(body["chat_template_kwargs"]["enable_thinking"], false);
        assert_eq!((body["model"].as_str(), body["stream"].as_bool()), (Some("m"), Some(true)));
    }

    #[test]
    fn consecutive_user_messages_go_as_one_and_others_stay_apart() {
        let user = |text: &str| ChatMessage::User { parts: vec![UserPart::Text { text: text.into() }] };
        let [call, result] = call_then_result("c");
        let request = asking(vec![user("failed"), user("again"), call, result, user("thanks")], &[]);
        let body = request_body(&request, &RequestShape::default());
        let roles: Vec<&str> =
            body["messages"].as_array().into_iter().flatten().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "user"]);
        assert_eq!(body["messages"][0]["content"], "failed\n\nagain", "the unanswered prompt is still read");
    }

    #[test]
    fn user_text_parts_join_into_one_string_without_images() {
        let parts = [UserPart::Text { text: "a".into() }, UserPart::Text { text: "b".into() }];
        assert_eq!(user_content(&parts), json!("a\n\nb"));
    }
}
