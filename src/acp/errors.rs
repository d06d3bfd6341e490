//! How core failures become JSON-RPC errors: one place, with the field at fault in `data`,
//! secrets redacted, and internal causes logged rather than sent.

use serde_json::json;

use heron_core::config::Keys;
use heron_core::llm::registry::ModelError;
use heron_core::secret::{clip, redact};
use heron_core::session::goal::GoalError;
use heron_core::session::settings::SettingError;
use heron_core::session::{Manager, PromptError, SessionError};
use heron_protocol::RpcError;
use heron_protocol::error::{INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND};

/// The longest turn-failure message sent, in bytes.
pub const MAX_FAILURE_MESSAGE: usize = 2048;

/// -32002 for a session id Heron does not know (or has not opened here).
pub fn unknown_session(id: &str) -> RpcError {
    RpcError::new(RESOURCE_NOT_FOUND, format!("Session not found: {id}"))
        .with_data(json!({ "sessionId": id }))
}

/// Names the wire field an invalid-params error is about.
pub trait WithField {
    /// Sets `data.path` to `field` (the method's own name for the value at fault).
    fn at_field(self, field: &str) -> Self;
}

impl WithField for RpcError {
    fn at_field(mut self, field: &str) -> Self {
        if self.code == INVALID_PARAMS
            && let Some(data) = self.data.as_mut().and_then(|d| d.as_object_mut())
        {
            data.insert("path".to_owned(), json!(field));
        }
        self
    }
}

fn model_error(err: &ModelError, manager: &Manager) -> RpcError {
    let message = redact(&err.to_string(), manager.providers().keys().all());
    match err {
        ModelError::NoModel | ModelError::MissingKey { .. } => heron_protocol::error::auth_required(message)
            .with_data(json!({ "reason": "auth_required", "message": err.to_string() })),
        ModelError::UnknownModel(model) => heron_protocol::error::auth_required(message)
            .with_data(json!({ "reason": "unknown_model", "model": model })),
        ModelError::Broken { .. } => RpcError::new(INTERNAL_ERROR, message.clone())
            .with_data(json!({ "code": "provider_unavailable" })),
    }
}

fn err_text(err: &SessionError) -> String {
    err.to_string()
}

/// The wire error for a bad additional directory.
pub fn root_error(err: &heron_core::tools::roots::RootError) -> RpcError {
    RpcError::new(INVALID_PARAMS, format!("additionalDirectories[{}]: {}", err.index, err.reason)).with_data(
        json!({
            "code": err.code,
            "path": format!("additionalDirectories[{}]", err.index),
            "reason": err.reason,
        }),
    )
}

/// The wire error for a session operation.
pub fn session_error(err: SessionError, manager: &Manager) -> RpcError {
    match err {
        SessionError::NotFound(id) => unknown_session(&id),
        SessionError::Model(model) => model_error(&model, manager),
        SessionError::Setting(setting) => setting_error(&setting),
        SessionError::Goal(goal) => goal_error(&goal),
        SessionError::BadCursor => RpcError::invalid_params("cursor", "not a cursor this agent issued"),
        SessionError::OpenWithOtherRoots => {
            RpcError::new(INVALID_PARAMS, err_text(&SessionError::OpenWithOtherRoots)).with_data(json!({
                "code": "acp.additional_directories.session_open",
                "path": "additionalDirectories",
            }))
        }
        SessionError::BadPath(reason) => RpcError::invalid_params("cwd", reason),
        SessionError::Internal(cause) => RpcError::internal(&cause),
    }
}

/// -32602 for a goal that cannot be paused or resumed, with the reason in `data`.
fn goal_error(err: &GoalError) -> RpcError {
    let data = match err {
        GoalError::NoGoal => json!({ "code": "no_goal", "reason": err.to_string() }),
        GoalError::Ended { status } => {
            json!({ "code": "goal_ended", "status": status, "reason": err.to_string() })
        }
    };
    RpcError::new(INVALID_PARAMS, err.to_string()).with_data(data)
}

fn setting_error(err: &SettingError) -> RpcError {
    match err {
        SettingError::UnknownValue { .. } | SettingError::Refused(_) => {
            RpcError::invalid_params("value", err.to_string())
        }
        SettingError::AboveCeiling { asked, ceiling } => RpcError::new(INVALID_PARAMS, err.to_string())
            .with_data(json!({
                "code": "acp.tool_approval.above_ceiling",
                "path": "value",
                "value": asked.id(),
                "ceiling": ceiling.id(),
            })),
    }
}

/// The wire error for a prompt that failed after it was accepted.
pub fn prompt_error(err: PromptError, keys: &Keys) -> RpcError {
    match err {
        PromptError::Model(model) => {
            let message = redact(&model.to_string(), keys.all());
            heron_protocol::error::auth_required(message)
        }
        PromptError::Closed => RpcError::new(INTERNAL_ERROR, "The session was closed before the prompt ran")
            .with_data(json!({ "code": "session_closed" })),
        other => {
            let cause = clip(&redact(&other.to_string(), keys.all()), MAX_FAILURE_MESSAGE);
            tracing::warn!(%cause, "turn failed");
            RpcError::new(INTERNAL_ERROR, format!("Turn failed: {cause}"))
                .with_data(json!({ "code": "turn_failed", "cause": cause }))
        }
    }
}
