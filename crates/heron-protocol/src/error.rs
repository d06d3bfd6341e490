//! The error codes ACP adds to JSON-RPC's, with their constructors. The error object itself
//! is JSON-RPC's ([`heron_rpc::RpcError`]).

use heron_rpc::RpcError;
use serde_json::json;

/// Authentication is required before this call.
pub const AUTH_REQUIRED: i32 = -32000;
/// A named resource (session, file) does not exist.
pub const RESOURCE_NOT_FOUND: i32 = -32002;

pub use heron_rpc::error::{
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, REQUEST_CANCELLED,
};

/// -32000: the caller must authenticate first.
pub fn auth_required(reason: impl Into<String>) -> RpcError {
    RpcError::new(AUTH_REQUIRED, "Authentication required").with_data(json!({ "reason": reason.into() }))
}

/// -32002: the named resource does not exist; `data` names it (`{"sessionId": id}`).
pub fn resource_not_found(kind: &str, id: &str) -> RpcError {
    RpcError::new(RESOURCE_NOT_FOUND, format!("{kind} not found")).with_data(json!({ kind: id }))
}
