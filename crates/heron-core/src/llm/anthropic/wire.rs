//! The Anthropic Messages request body built from a [`ModelRequest`], with prompt-cache
//! breakpoints placed so the consecutive requests of a session reuse the cache. Pure data
//! handling; the stream's side is `events`.
//!
//! Invariants the body keeps:
//!
//! - The same request always gives byte-identical JSON, and a request that extends an
//!   earlier one (its reply and tool results appended) serializes its system, tools and
//!   earlier messages exactly as before, except where a `cache_control` breakpoint moved.
//! - Roles alternate user/assistant, as Anthropic requires: tool results travel as
//!   `tool_result` blocks of a user message, and adjacent messages of one role merge.
//! - No message and no text block is empty, which Anthropic refuses too.

use serde_json::{Map, Value, json};

use crate::llm::{ChatMessage, ModelRequest, Reasoning, ToolCallRequest, ToolSpec, UserPart};

/// The answer's token limit when the request sets none. Anthropic requires one; 8192 is
/// what every current Claude model can produce, so no model refuses it.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// Anthropic's smallest thinking budget; a smaller one is refused.
const MIN_THINKING_BUDGET: u32 = 1024;

/// The thinking budget of an effort level. `high` stays at 20480 so that with the default
/// answer room on top (28672 in all) it fits the 32000 output tokens of Claude Opus 4.
/// Levels other than these three send no thinking: the model's default.
fn thinking_budget(effort: &str) -> Option<u32> {
    match effort {
        "low" => Some(2048),
        "medium" => Some(8192),
        "high" => Some(20480),
        _ => None,
    }
}

/// Who said a message, in Anthropic's two roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    User,
    Assistant,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One message of the body while it is being built.
#[derive(Debug)]
struct Turn {
    role: Role,
    content: Vec<Value>,
}

/// The JSON body of a streamed Messages request.
pub(crate) fn request_body(request: &ModelRequest) -> Value {
    let mut system = system_blocks(&request.messages);
    let mut tools: Vec<Value> = request.tools.iter().map(tool).collect();
    let mut turns = conversation(&request.messages);
    let budget = request.effort.as_deref().and_then(thinking_budget).filter(|_| thinking_allowed(&turns));
    let (max_tokens, budget) = token_limits(request.max_tokens, budget);
    if budget.is_none() {
        strip_final_thinking(&mut turns);
    }
    place_breakpoints(&mut system, &mut tools, &mut turns);

    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    let messages =
        turns.into_iter().map(|turn| json!({ "role": turn.role.as_str(), "content": turn.content }));
    body.insert("messages".into(), messages.collect());
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(budget) = budget {
        body.insert("thinking".into(), json!({ "type": "enabled", "budget_tokens": budget }));
    }
    Value::Object(body)
}

/// `max_tokens` and the thinking budget. Without a limit from the request, thinking comes
/// on top of the default answer room. With one, the limit holds for thinking and answer
/// together, so thinking takes at most half of it (Anthropic wants `max_tokens` above the
/// budget), and none when that half is under Anthropic's minimum.
fn token_limits(max_tokens: Option<u32>, budget: Option<u32>) -> (u32, Option<u32>) {
    match (max_tokens, budget) {
        (None, None) => (DEFAULT_MAX_TOKENS, None),
        (None, Some(budget)) => (DEFAULT_MAX_TOKENS + budget, Some(budget)),
        // Anthropic refuses 0; the smallest answer is one token.
        (Some(limit), None) => (limit.max(1), None),
        (Some(limit), Some(budget)) => {
            let budget = budget.min(limit / 2);
            (limit, (budget >= MIN_THINKING_BUDGET).then_some(budget))
        }
    }
}

/// Every system message's text, in order, as text blocks.
fn system_blocks(messages: &[ChatMessage]) -> Vec<Value> {
    messages
        .iter()
        .filter_map(|message| match message {
            ChatMessage::System { text } => text_block(text),
            _ => None,
        })
        .collect()
}

/// The user and assistant messages, tool results as user content, same-role neighbours
/// merged and empty messages left out (an assistant message that only failed).
fn conversation(messages: &[ChatMessage]) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    for message in messages {
        let (role, content) = match message {
            ChatMessage::System { .. } => continue,
            ChatMessage::User { parts } => (Role::User, parts.iter().filter_map(user_block).collect()),
            ChatMessage::Assistant { text, tool_calls, reasoning } => {
                (Role::Assistant, assistant_blocks(text, tool_calls, reasoning.as_ref()))
            }
            ChatMessage::Tool { call_id, content } => (Role::User, vec![tool_result(call_id, content)]),
        };
        if content.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => last.content.extend(content),
            _ => turns.push(Turn { role, content }),
        }
    }
    for turn in turns.iter_mut().filter(|turn| turn.role == Role::User) {
        // Anthropic wants a user message's tool results before anything else in it; the
        // sort is stable, so each kind keeps its order.
        turn.content.sort_by_key(|block| block_type(block) != "tool_result");
    }
    turns
}

fn text_block(text: &str) -> Option<Value> {
    // Anthropic refuses text blocks without a visible character.
    (!text.trim().is_empty()).then(|| json!({ "type": "text", "text": text }))
}

fn user_block(part: &UserPart) -> Option<Value> {
    match part {
        UserPart::Text { text } => text_block(text),
        UserPart::Image { mime_type, data } => Some(json!({
            "type": "image",
            "source": { "type": "base64", "media_type": mime_type, "data": data },
        })),
    }
}

/// Thinking first (Anthropic wants it leading), then the text, then the tool calls.
fn assistant_blocks(text: &str, calls: &[ToolCallRequest], reasoning: Option<&Reasoning>) -> Vec<Value> {
    let mut blocks = reasoning.map(thinking_blocks).unwrap_or_default();
    blocks.extend(text_block(text));
    blocks.extend(calls.iter().map(|call| {
        json!({
            "type": "tool_use",
            "id": tool_id(&call.id),
            "name": call.name,
            "input": tool_input(&call.arguments),
        })
    }));
    blocks
}

/// The Anthropic thinking blocks among the reasoning's details, verbatim: their signature
/// proves them to Anthropic, so a block is sent as it came or not at all. Reasoning from
/// another provider has no such blocks (and no signature Anthropic would accept), so none
/// of it is sent.
fn thinking_blocks(reasoning: &Reasoning) -> Vec<Value> {
    let Some(Value::Array(details)) = &reasoning.details else { return Vec::new() };
    details.iter().filter(|detail| is_signed_thinking(detail)).cloned().collect()
}

fn is_signed_thinking(block: &Value) -> bool {
    let has_text = |field: &str| block.get(field).is_some_and(Value::is_string);
    match block_type(block) {
        "thinking" => has_text("thinking") && has_text("signature"),
        "redacted_thinking" => has_text("data"),
        _ => false,
    }
}

/// The stored arguments as the JSON object Anthropic requires in `input`. Arguments that
/// are not a JSON object were refused by the turn without running (its tool result says
/// why), so `{}` loses nothing the model needs, while sending the text would make Anthropic
/// refuse every later request of the session.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(object @ Value::Object(_)) => object,
        _ => json!({}),
    }
}

fn tool_result(call_id: &str, content: &str) -> Value {
    let mut block = json!({ "type": "tool_result", "tool_use_id": tool_id(call_id) });
    // `content` is optional, and an empty one reads as an empty text block.
    if !content.is_empty() {
        block["content"] = json!(content);
    }
    block
}

/// The call id in the characters Anthropic accepts (letters, digits, `_`, `-`): ids made by
/// another provider may hold others. The mapping is fixed, so a call and its result agree.
fn tool_id(id: &str) -> String {
    if id.is_empty() {
        return "call".to_owned();
    }
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}

fn tool(spec: &ToolSpec) -> Value {
    // Anthropic requires an object schema; a tool that declares none takes no arguments.
    let schema = match &spec.parameters {
        schema @ Value::Object(_) => schema.clone(),
        _ => json!({ "type": "object", "properties": {} }),
    };
    json!({ "name": spec.name, "description": spec.description, "input_schema": schema })
}

fn block_type(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or("")
}

fn is_thinking(block: &Value) -> bool {
    matches!(block_type(block), "thinking" | "redacted_thinking")
}

/// Whether Anthropic accepts thinking for this conversation. Anthropic counts a tool loop
/// (assistant messages and the tool results between them) as one assistant turn, and while
/// one runs it wants the turn's first message to open with thinking. A turn begun without
/// thinking (or by another provider) cannot, so thinking waits until the user speaks again.
/// A user message counts as tool results if it holds any, which errs towards no thinking.
fn thinking_allowed(turns: &[Turn]) -> bool {
    let has_results = |turn: &Turn| turn.content.iter().any(|block| block_type(block) == "tool_result");
    let in_loop = turns.last().is_some_and(|turn| turn.role == Role::User && has_results(turn));
    if !in_loop {
        return true;
    }
    let start =
        turns.iter().rposition(|turn| turn.role == Role::User && !has_results(turn)).map_or(0, |at| at + 1);
    let first = turns[start..].iter().find(|turn| turn.role == Role::Assistant);
    first.is_none_or(|turn| turn.content.first().is_some_and(is_thinking))
}

/// Without thinking, Anthropic refuses thinking blocks in an assistant message that ends
/// the conversation (earlier ones it ignores), so they go.
fn strip_final_thinking(turns: &mut Vec<Turn>) {
    if let Some(last) = turns.last_mut().filter(|turn| turn.role == Role::Assistant) {
        last.content.retain(|block| !is_thinking(block));
        if last.content.is_empty() {
            turns.pop();
        }
    }
}

/// Marks the cache breakpoints, at most four (Anthropic's limit): the last system block,
/// the last tool, the end of the conversation, and the end of the user message before it.
/// The first two never move within a session, so their prefix is reused by every request.
/// The last one moves with each request; the one before it sits where the previous
/// request's last one sat (a request ends with the user's message or tool results), so the
/// cache written then is read now even when many blocks came since, beyond the distance
/// Anthropic looks back from a breakpoint for an earlier entry.
fn place_breakpoints(system: &mut [Value], tools: &mut [Value], turns: &mut [Turn]) {
    for block in [system.last_mut(), tools.last_mut()].into_iter().flatten() {
        mark(block);
    }
    let Some((last, earlier)) = turns.split_last_mut() else { return };
    mark_end(last);
    if let Some(previous) = earlier.iter_mut().rev().find(|turn| turn.role == Role::User) {
        mark_end(previous);
    }
}

/// Marks a message's last block that can carry a breakpoint (thinking blocks cannot).
fn mark_end(turn: &mut Turn) {
    if let Some(block) = turn.content.iter_mut().rev().find(|block| !is_thinking(block)) {
        mark(block);
    }
}

fn mark(block: &mut Value) {
    if let Value::Object(fields) = block {
        fields.insert("cache_control".into(), json!({ "type": "ephemeral" }));
    }
}

#[cfg(test)]
mod tests;
