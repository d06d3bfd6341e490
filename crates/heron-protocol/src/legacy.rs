//! Rewrites params of older clients into today's shape before validation and decoding:
//! `session/prompt` with `content` in place of `prompt`, and MCP servers whose `env` or
//! `headers` are an object of names to values (`{"X-Key": "v"}`) in place of a list of
//! `{"name", "value"}` (session/new, load, resume and fork).

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::types::Method;

/// The params as today's schema expects them; borrowed when nothing changes.
pub(crate) fn upgrade(method: Method, params: Option<&RawValue>) -> Option<Cow<'_, RawValue>> {
    let params = params?;
    let rewritten = match method {
        Method::SessionPrompt => prompt(params),
        Method::SessionNew | Method::SessionLoad | Method::SessionResume | Method::SessionFork => {
            mcp_servers(params)
        }
        _ => None,
    };
    match rewritten.and_then(|map| serde_json::value::to_raw_value(&map).ok()) {
        Some(raw) => Some(Cow::Owned(raw)),
        None => Some(Cow::Borrowed(params)),
    }
}

/// `content` renamed `prompt`, when only the old name is there.
fn prompt(params: &RawValue) -> Option<Map<String, Value>> {
    if params.get().contains("\"prompt\"") || !params.get().contains("\"content\"") {
        return None;
    }
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(params.get()) else { return None };
    let content = map.remove("content")?;
    map.insert("prompt".to_owned(), content);
    Some(map)
}

/// Each server's `env` and `headers` object made a list of `{"name", "value"}`, by name
/// (a JSON object promises no order); `None` when no server has one. Values are kept as sent, so one that is
/// not a string is still refused by validation, naming its field.
fn mcp_servers(params: &RawValue) -> Option<Map<String, Value>> {
    let text = params.get();
    if !text.contains("\"mcpServers\"") || !(text.contains("\"env\"") || text.contains("\"headers\"")) {
        return None;
    }
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(text) else { return None };
    let mut changed = false;
    for server in map.get_mut("mcpServers")?.as_array_mut()?.iter_mut().filter_map(Value::as_object_mut) {
        changed |= upgrade_mcp_server(server);
    }
    changed.then_some(map)
}

/// One MCP server of `mcpServers` as [`upgrade`] rewrites it: its `env` and `headers`
/// objects made lists of `{"name", "value"}`, by name; whether anything changed. Also for
/// a server read from elsewhere than a request (`heron doctor --mcp` reads a file).
pub fn upgrade_mcp_server(server: &mut Map<String, Value>) -> bool {
    let mut changed = false;
    for key in ["env", "headers"] {
        if let Some(Value::Object(pairs)) = server.get_mut(key) {
            let list = std::mem::take(pairs)
                .into_iter()
                .map(|(name, value)| serde_json::json!({ "name": name, "value": value }))
                .collect();
            server.insert(key.to_owned(), Value::Array(list));
            changed = true;
        }
    }
    changed
}
