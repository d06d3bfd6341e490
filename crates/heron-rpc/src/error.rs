//! The JSON-RPC 2.0 error object sent on the wire, with one constructor per code the
//! JSON-RPC layer itself uses. Protocols on top add their own codes (ACP's live in
//! `heron-protocol`).
//!
//! Local failures are `thiserror` enums in their own modules; they become an `RpcError`
//! in exactly one place (`RpcError::internal`), which logs the cause and leaks nothing.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Invalid JSON was received.
pub const PARSE_ERROR: i32 = -32700;
/// The JSON sent is not a valid request object.
pub const INVALID_REQUEST: i32 = -32600;
/// The method does not exist or is not available.
pub const METHOD_NOT_FOUND: i32 = -32601;
/// Invalid method parameters.
pub const INVALID_PARAMS: i32 = -32602;
/// Internal JSON-RPC error.
pub const INTERNAL_ERROR: i32 = -32603;
/// The request was cancelled (`$/cancel_request`, a timeout or shutdown).
pub const REQUEST_CANCELLED: i32 = -32800;

/// A JSON-RPC 2.0 error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    /// The error code.
    pub code: i32,
    /// A short, single-sentence description.
    pub message: String,
    /// Structured detail: the offending field, a machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with an explicit code and message.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    /// Attaches structured detail.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// -32700: the line was not valid JSON.
    pub fn parse_error(reason: impl Into<String>) -> Self {
        Self::new(PARSE_ERROR, "Parse error").with_data(json!({ "reason": reason.into() }))
    }

    /// -32600: the message is not a valid JSON-RPC 2.0 request.
    pub fn invalid_request(reason: impl Into<String>) -> Self {
        Self::new(INVALID_REQUEST, "Invalid request").with_data(json!({ "reason": reason.into() }))
    }

    /// -32601: no such method, or a method this side does not serve.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, "Method not found").with_data(json!({ "method": method }))
    }

    /// -32602: the params failed to decode; `path` is the JSON path of the offending field.
    pub fn invalid_params(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, "Invalid params")
            .with_data(json!({ "path": path.into(), "reason": reason.into() }))
    }

    /// -32602: the params break the protocol schema; `pointer` is the JSON pointer of the
    /// violation inside the params .
    pub fn schema_violation(pointer: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, "Invalid params")
            .with_data(json!({ "pointer": pointer.into(), "reason": reason.into() }))
    }

    /// -32603: something failed inside Heron. The cause is logged to stderr, never sent.
    pub fn internal(cause: &dyn std::fmt::Display) -> Self {
        tracing::error!(%cause, "internal error");
        Self::new(INTERNAL_ERROR, "Internal error")
    }

    /// -32800: the request was cancelled before it finished.
    pub fn request_cancelled() -> Self {
        Self::new(REQUEST_CANCELLED, "Request cancelled")
    }
}
