//! One tool of an MCP server, offered to the model as `mcp__<server>__<tool>`: its
//! arguments are checked to be a JSON object, the call is gated like a command (kind
//! `other`), runs with the turn's cancellation and the MCP deadline (`mcp_timeout_s`), and its content becomes text
//! for the model and the editor, scrubbed of secrets.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::Peer;
use serde_json::{Map, Value};

use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::tools::deadline::Pace;
use crate::tools::{Outcome, Prepared, Tool, ToolEnv, call};
use crate::types::{ToolKind, ToolStatus};

/// The most text a call returns to the model.
const MAX_OUTPUT: usize = 64 * 1024;
/// Model APIs accept tool names of at most this many characters.
const MAX_NAME: usize = 64;
/// The longest description of a server's tool the model is given, in bytes.
const MAX_DESCRIPTION: usize = 4 * 1024;
/// The largest input schema of a server's tool offered, in bytes of JSON: every request
/// carries it, so a tool with a larger one is not offered.
pub(super) const MAX_SCHEMA: usize = 64 * 1024;

/// A tool of an MCP server.
pub struct McpTool {
    /// The name the model calls.
    name: String,
    /// The server's name.
    server: String,
    /// The tool's own name on the server.
    remote: String,
    title: String,
    description: String,
    parameters: Value,
    link: Link,
}

/// What every tool of one server shares: the connection, where its progress goes, and the
/// editor its pages are offered through.
#[derive(Clone)]
pub(super) struct Link {
    pub(super) peer: Peer<RoleClient>,
    pub(super) progress: Arc<super::progress::Routes>,
    pub(super) editor: super::EditorSlot,
}

impl McpTool {
    /// The tool `tool` of `server`, named so no other in `taken` has its name.
    pub(super) fn new(
        server: &str,
        tool: rmcp::model::Tool,
        link: Link,
        taken: &mut HashSet<String>,
    ) -> Self {
        let remote = tool.name.to_string();
        let base = model_name(server, &remote);
        let mut name = base.clone();
        let mut n = 1;
        while !taken.insert(name.clone()) {
            n += 1;
            let suffix = format!("_{n}");
            name = format!("{}{suffix}", truncate(&base, MAX_NAME - suffix.len()));
        }
        let title = tool.title.clone().unwrap_or_else(|| remote.clone());
        let description = match tool.description.as_deref() {
            // Every request carries every tool's description: each is held to a few KiB.
            Some(text) if !text.trim().is_empty() => {
                format!("{} (MCP server `{server}`)", crate::secret::clip(text.trim(), MAX_DESCRIPTION))
            }
            _ => format!("The `{remote}` tool of the MCP server `{server}`."),
        };
        let mut parameters = Value::Object((*tool.input_schema).clone());
        // Models need an object schema with properties, even for a tool without arguments.
        if let Some(schema) = parameters.as_object_mut() {
            schema.entry("type").or_insert_with(|| Value::String("object".into()));
            schema.entry("properties").or_insert_with(|| Value::Object(Map::new()));
        }
        Self { name, server: server.to_owned(), remote, title, description, parameters, link }
    }

    /// Whether the server's connection has closed.
    pub(super) fn is_closed(&self) -> bool {
        self.link.peer.is_transport_closed()
    }
}

/// `mcp__<server>__<tool>` with what model APIs refuse replaced by `_`, at most 64 chars.
fn model_name(server: &str, tool: &str) -> String {
    truncate(&format!("{}{}", model_prefix(server), clean(tool)), MAX_NAME)
}

/// `mcp__<server>__`, what every tool of `server` is named after.
pub(super) fn model_prefix(server: &str) -> String {
    format!("mcp__{}__", clean(server))
}

fn clean(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

fn truncate(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }

    fn pace(&self) -> Pace {
        Pace::External
    }

    fn kind(&self) -> ToolKind {
        // What a server's tool does is unknown (its hints are not to be trusted): it is
        // gated like a command.
        ToolKind::Other
    }

    fn prepare(&self, arguments: &str, env: &ToolEnv) -> Result<Prepared, String> {
        let text = if arguments.trim().is_empty() { "{}" } else { arguments };
        let value: Value = serde_json::from_str(text).map_err(|e| {
            format!("the arguments of {} are not valid JSON ({e}); send a JSON object", self.name)
        })?;
        if !value.is_object() {
            return Err(format!("the arguments of {} must be a JSON object", self.name));
        }
        Ok(Prepared {
            title: call::scrub_text(env, &format!("{}: {}", self.server, self.title)),
            kind: ToolKind::Other,
            locations: Vec::new(),
            raw_input: value,
            outside_roots: false,
            always_ask: None,
            content: Vec::new(),
            planned: None,
        })
    }

    fn run(&self, prepared: Prepared, env: ToolEnv) -> BoxFuture<Outcome> {
        let mut params = CallToolRequestParams::new(Cow::Owned(self.remote.clone()));
        params.arguments = prepared.raw_input.as_object().cloned();
        let (link, server) = (self.link.clone(), self.server.clone());
        Box::pin(async move {
            // The call's deadline (`mcp_timeout_s`) is kept by the turn (`run_within`).
            let outcome = tokio::select! {
                biased;
                () = env.cancel.cancelled() => Outcome::failed("cancelled"),
                outcome = call_opening_pages(&link, &server, params, &env) => outcome,
            };
            call::scrub(&env, outcome)
        })
    }
}

/// Calls a tool; a refusal until the user opens a page offers the page and, once the user
/// has opened it, tries the call once more.
async fn call_opening_pages(
    link: &Link,
    server: &str,
    params: CallToolRequestParams,
    env: &ToolEnv,
) -> Outcome {
    let mut retried = false;
    loop {
        match call_tool(&link.peer, params.clone(), &link.progress, &env.progress).await {
            Ok(result) => return outcome_of(result, &env.secrets),
            Err(rmcp::service::ServiceError::McpError(error))
                if error.code.0 == super::pages::URL_REQUIRED && !retried =>
            {
                match super::pages::offer(&link.editor, server, error.data.as_ref()).await {
                    super::pages::Pages::Opened => retried = true,
                    super::pages::Pages::NotOpened(why) => return Outcome::failed(why),
                }
            }
            Err(error) => return Outcome::failed(format!("the MCP server `{server}` failed: {error}")),
        }
    }
}

/// Calls a tool, showing the server's progress on the call while it runs: the library
/// gives each request a progress token of its own, which is routed to `progress` until
/// the answer. A call dropped before its answer (a cancel, the deadline) is cancelled at
/// the server, as the library's own `call_tool` does.
async fn call_tool(
    peer: &Peer<RoleClient>,
    params: CallToolRequestParams,
    routes: &Arc<super::progress::Routes>,
    progress: &crate::tools::Progress,
) -> Result<Value, rmcp::service::ServiceError> {
    use rmcp::model::{CallToolRequest, ClientRequest, ServerResult};
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle =
        peer.send_request_with_option(request, rmcp::service::PeerRequestOptions::no_options()).await?;
    let _routed = routes.register(handle.progress_token.clone(), progress.clone());
    let mut abandoned = Abandoned { peer: Some(peer.clone()), id: handle.id.clone() };
    let answer = handle.await_response().await;
    abandoned.peer = None;
    match answer? {
        ServerResult::CallToolResult(result) => Ok(serde_json::to_value(&result).unwrap_or_default()),
        // An empty answer is a call that returned nothing.
        ServerResult::EmptyResult(_) => Ok(serde_json::json!({ "content": [] })),
        _ => Err(rmcp::service::ServiceError::UnexpectedResponse),
    }
}

/// Cancels a request at the server when the call is dropped before its answer.
struct Abandoned {
    peer: Option<Peer<RoleClient>>,
    id: rmcp::model::RequestId,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else { return };
        let params = rmcp::model::CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some("the call was cancelled".to_owned()),
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer.notify_cancelled(params).await;
            });
        }
    }
}

/// A `tools/call` result as the model and the editor see it, with `secrets` redacted from
/// its text before the text is capped (a cap inside a key would leave a part no later
/// redaction recognises).
fn outcome_of(result: Value, secrets: &[crate::secret::Secret]) -> Outcome {
    let mut parts = Vec::new();
    for block in result.get("content").and_then(Value::as_array).into_iter().flatten() {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or_default();
        let text = |key: &str| block.pointer(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        parts.push(match kind {
            "text" => text("/text"),
            "image" => format!("[image {}]", text("/mimeType")),
            "audio" => format!("[audio {}]", text("/mimeType")),
            "resource" => match block.pointer("/resource/text").and_then(Value::as_str) {
                Some(body) => body.to_owned(),
                None => format!("[resource {}]", text("/resource/uri")),
            },
            "resource_link" => format!("[resource {}]", text("/uri")),
            other => format!("[{other} content]"),
        });
    }
    if parts.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        parts.push(structured.to_string());
    }
    let mut text = crate::secret::redact(&parts.join("\n"), secrets);
    if text.len() > MAX_OUTPUT {
        let cut = (0..=MAX_OUTPUT).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        text.truncate(cut);
        text.push_str("\n[output truncated]");
    }
    let failed = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let mut outcome = call::completed(if text.is_empty() { "(no output)".into() } else { text });
    if failed {
        outcome.status = ToolStatus::Failed;
    }
    outcome.raw_output = Some(result);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_what_model_apis_accept() {
        assert_eq!(model_name("git hub", "search.issues"), "mcp__git_hub__search_issues");
        let long = model_name("server", &"x".repeat(100));
        assert_eq!(long.chars().count(), MAX_NAME);
    }

    #[test]
    fn content_becomes_text_and_errors_fail() {
        let result = serde_json::json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
            {"type": "resource_link", "uri": "file:///b", "name": "b"}
        ], "isError": true});
        let outcome = outcome_of(result, &[]);
        assert_eq!(outcome.for_model, "one\n[image image/png]\nbody\n[resource file:///b]");
        assert_eq!(outcome.status, ToolStatus::Failed);
        let empty = outcome_of(serde_json::json!({"content": [], "structuredContent": {"n": 1}}), &[]);
        assert_eq!(empty.for_model, "{\"n\":1}");
        assert_eq!(empty.status, ToolStatus::Completed);
    }

    #[test]
    fn a_key_across_the_output_cap_is_masked_not_cut_in_two() {
        let key = crate::secret::Secret::new("sk-cut-0123456789abcdef");
        // The key starts 10 bytes before the cap, so capping first would keep its start.
        let text = format!("{}{}", "x".repeat(MAX_OUTPUT - 10), key.expose());
        let outcome = outcome_of(serde_json::json!({"content": [{"type": "text", "text": text}]}), &[key]);
        assert!(!outcome.for_model.contains("sk-cut-012"), "{}", &outcome.for_model[MAX_OUTPUT - 20..]);
        assert!(outcome.for_model.ends_with("x***"), "{}", &outcome.for_model[MAX_OUTPUT - 20..]);
    }
}
