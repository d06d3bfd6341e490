//! How core failures become JSON-RPC errors: one place, with the field at fault in `data`,
//! secrets redacted, and internal causes logged rather than sent.

use serde::Serialize;
use serde_json::{Value, json};

use heron_core::config::Keys;
use heron_core::llm::registry::ModelError;
use heron_core::secret::{clip, redact};
use heron_core::session::attachments::AttachmentError;
use heron_core::session::goal::GoalError;
use heron_core::session::history_budget::HistoryFull;
use heron_core::session::settings::SettingError;
use heron_core::session::{Manager, OtherRoot, PromptError, SessionError};
use heron_core::tools::roots::RootProblem;
use heron_protocol::RpcError;
use heron_protocol::error::{INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND};
use heron_store::StoreErrorKind;

/// Declares an enum whose variants are each written once, and `ALL`, every variant in
/// order, for tests that must see them all: a list kept by hand beside the enum lets a new
/// variant escape them.
macro_rules! listed_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$variant_meta:meta])* $variant:ident,)+ }) => {
        $(#[$meta])*
        $vis enum $name {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $name {
            /// Every variant, in the order declared.
            #[cfg(test)]
            const ALL: &'static [$name] = &[$($name::$variant),+];
        }
    };
}

listed_enum! {
    /// Every `data.code` Heron sends. Heron's own follow one scheme, a dotted path of
    /// snake_case segments whose first names the area (`inbox.item_not_found`); the codes the
    /// seeds name (`turn_failed`, `workspace_roots.*`, `acp.*`) are their wire contract and
    /// keep the seeds' spelling, since clients key on them.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
    pub enum ErrorCode {
        /// A workspace root is not an absolute path.
        #[serde(rename = "workspace_roots.relative")]
        RootRelative,
        /// A workspace root is not an existing directory.
        #[serde(rename = "workspace_roots.missing")]
        RootMissing,
        /// A workspace root belongs to another user.
        #[serde(rename = "workspace_roots.not_owned")]
        RootNotOwned,
        /// A workspace root is or is inside a protected path.
        #[serde(rename = "workspace_roots.protected")]
        RootProtected,
        /// A workspace root overlaps another.
        #[serde(rename = "workspace_roots.overlap")]
        RootOverlap,
        /// More workspace roots than allowed.
        #[serde(rename = "workspace_roots.too_many")]
        RootTooMany,
        /// The session is open here with other additional directories.
        #[serde(rename = "acp.additional_directories.session_open")]
        OpenWithOtherRoots,
        /// Heron was started to work in the cwd only (`--no-additional-directories`).
        #[serde(rename = "acp.additional_directories.disabled")]
        AdditionalDirectoriesDisabled,
        /// A tool approval above the `--permission-mode` ceiling.
        #[serde(rename = "acp.tool_approval.above_ceiling")]
        AboveCeiling,
        /// A turn failed after it started (the Reasonix guide's "When a turn fails").
        #[serde(rename = "turn_failed")]
        TurnFailed,
        /// The session closed before the prompt ran.
        #[serde(rename = "session.closed")]
        SessionClosed,
        /// The session is open in another Heron process.
        #[serde(rename = "session.open_elsewhere")]
        OpenElsewhere,
        /// This process holds the most sessions it may open at once.
        #[serde(rename = "session.too_many_open")]
        TooManyOpen,
        /// The session's history, or that of every session open here, passes its budget:
        /// it does not open, or starts no more turns.
        #[serde(rename = "session.history_full")]
        HistoryFull,
        /// The session has no goal.
        #[serde(rename = "goal.none")]
        NoGoal,
        /// The session's goal has already ended.
        #[serde(rename = "goal.ended")]
        GoalEnded,
        /// Resume asked of a goal that is running.
        #[serde(rename = "goal.running")]
        GoalRunning,
        /// Pause asked of a goal that is paused.
        #[serde(rename = "goal.not_running")]
        GoalNotRunning,
        /// No inbox item has that id.
        #[serde(rename = "inbox.item_not_found")]
        ItemNotFound,
        /// The inbox item is not queued.
        #[serde(rename = "inbox.item_not_queued")]
        ItemNotQueued,
        /// The inbox item has not failed.
        #[serde(rename = "inbox.item_not_failed")]
        ItemNotFailed,
        /// The inbox is full and none of its items has finished.
        #[serde(rename = "inbox.full")]
        InboxFull,
        /// The inbox's stored prompts fill their byte budget and none has finished.
        #[serde(rename = "inbox.bytes_full")]
        InboxBytesFull,
        /// A provider cannot start (a bad script, a bad URL).
        #[serde(rename = "provider.unavailable")]
        ProviderUnavailable,
        /// The model asked for (`--model`, `default_model`) is not in `config.toml`.
        #[serde(rename = "provider.unknown_model")]
        UnknownModel,
        /// HERON_HOME cannot be used (a broken config, an unreadable store).
        #[serde(rename = "home.unusable")]
        HomeUnusable,
        /// The session store (`heron.db`) is damaged.
        #[serde(rename = "store.corrupt")]
        StoreCorrupt,
        /// The session store cannot be used now (busy, read-only, full, failing I/O).
        #[serde(rename = "store.unavailable")]
        StoreUnavailable,
        /// The session store failed otherwise.
        #[serde(rename = "store.failed")]
        StoreFailed,
        /// A reload of the extensions found a file it cannot use; nothing changed.
        #[serde(rename = "extensions.reload_failed")]
        ReloadFailed,
        /// The prompts waiting fill their byte budget (the session's, or all sessions').
        #[serde(rename = "prompt.queue_full")]
        PromptQueueFull,
        /// An attachment is larger than Heron keeps, or the workspace's attachments would
        /// pass their budget.
        #[serde(rename = "prompt.attachment_refused")]
        PromptAttachmentRefused,
    }
}

impl ErrorCode {
    /// The code of a store failure of `kind`.
    pub fn of_store(kind: StoreErrorKind) -> Self {
        match kind {
            StoreErrorKind::Corrupt => ErrorCode::StoreCorrupt,
            StoreErrorKind::Unavailable => ErrorCode::StoreUnavailable,
            StoreErrorKind::Other => ErrorCode::StoreFailed,
        }
    }

    /// The code of a workspace-root problem.
    pub fn of_root(problem: RootProblem) -> Self {
        match problem {
            RootProblem::Relative => ErrorCode::RootRelative,
            RootProblem::Missing => ErrorCode::RootMissing,
            RootProblem::NotOwned => ErrorCode::RootNotOwned,
            RootProblem::Protected => ErrorCode::RootProtected,
            RootProblem::Overlap => ErrorCode::RootOverlap,
            RootProblem::TooMany => ErrorCode::RootTooMany,
        }
    }
}

/// An error whose `data` carries `code` and the members of `rest` (an object).
pub fn coded(code: i32, message: impl Into<String>, data_code: ErrorCode, rest: Value) -> RpcError {
    let mut data = json!({ "code": data_code });
    if let (Some(data), Value::Object(rest)) = (data.as_object_mut(), rest) {
        data.extend(rest);
    }
    RpcError::new(code, message).with_data(data)
}

/// The longest turn-failure message sent, in bytes.
pub const MAX_FAILURE_MESSAGE: usize = 2048;

/// -32002 for a session id Heron does not know (or has not opened here).
pub fn unknown_session(id: &str) -> RpcError {
    RpcError::new(RESOURCE_NOT_FOUND, format!("Session not found: {id}"))
        .with_data(json!({ "sessionId": id }))
}

/// -32602 instead of -32002 for a session a method takes as a parameter to act on
/// (`_heron/session/steer`), with `data.path: "sessionId"` added and the rest of `data`
/// (`sessionId`, a `code`) kept; any other error passes through.
pub fn session_as_param(mut err: RpcError) -> RpcError {
    if err.code == RESOURCE_NOT_FOUND {
        err.code = INVALID_PARAMS;
        if let Some(data) = err.data.as_mut().and_then(Value::as_object_mut) {
            data.insert("path".to_owned(), json!("sessionId"));
        }
    }
    err
}

/// -32002 for a session another Heron process has open, with `data.sessionId`: it can be
/// opened here once it is closed there.
pub fn open_elsewhere(id: &str) -> RpcError {
    coded(
        RESOURCE_NOT_FOUND,
        format!("Session {id} is open in another Heron process; close it there first"),
        ErrorCode::OpenElsewhere,
        json!({ "sessionId": id }),
    )
}

/// The longest store failure reason sent, in bytes.
const MAX_STORE_REASON: usize = 512;

/// -32603 for a store failure, with `data.code` naming its kind and the store's own words,
/// redacted of keys and clipped, as `data.reason`.
pub fn store_error(kind: StoreErrorKind, reason: &str, keys: &Keys) -> RpcError {
    let reason = clip(&redact(reason, keys.all()), MAX_STORE_REASON);
    tracing::error!(?kind, %reason, "the session store failed");
    let what = match kind {
        StoreErrorKind::Corrupt => "The session store (heron.db) is damaged",
        StoreErrorKind::Unavailable => "The session store (heron.db) cannot be used right now",
        StoreErrorKind::Other => "The session store (heron.db) failed",
    };
    coded(INTERNAL_ERROR, format!("{what}: {reason}"), ErrorCode::of_store(kind), json!({ "reason": reason }))
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

/// Why a session needs authentication, as `data.reason` of a -32000 names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum AuthReason {
    /// No model is configured, or its provider's key is missing. (A model no provider
    /// offers is not a login matter: it is `provider.unknown_model`.)
    AuthRequired,
}

fn model_error(err: &ModelError, manager: &Manager) -> RpcError {
    model_rpc_error(err, manager.providers().keys())
}

/// The wire error for a model that cannot be used. No model at all, or a missing key, is
/// -32000 (authentication required): the `heron setup` auth method fixes both. Its message
/// is the reason itself, since editors show `message` and hide `data` (and some hide a
/// message that is only the code's default text). A model that
/// is not configured is not something logging in fixes, so it is not -32000 (which sends an
/// editor to its login screen); it is a clear -32603 naming the model in `data.model`, the
/// way a provider that cannot start is.
fn model_rpc_error(err: &ModelError, keys: &Keys) -> RpcError {
    let message = redact(&err.to_string(), keys.all());
    match err {
        ModelError::NoModel | ModelError::MissingKey { .. } => {
            RpcError::new(heron_protocol::error::AUTH_REQUIRED, message.clone())
                .with_data(json!({ "reason": AuthReason::AuthRequired, "message": message }))
        }
        ModelError::UnknownModel(model) => coded(
            INTERNAL_ERROR,
            format!("{message} (`heron models` lists the configured ones)"),
            ErrorCode::UnknownModel,
            json!({ "model": model }),
        ),
        ModelError::Broken { .. } => {
            coded(INTERNAL_ERROR, message, ErrorCode::ProviderUnavailable, json!({}))
        }
    }
}

/// The wire error for a bad additional directory.
pub fn root_error(err: &heron_core::tools::roots::RootError) -> RpcError {
    coded(
        INVALID_PARAMS,
        format!("additionalDirectories[{}]: {}", err.index, err.reason),
        ErrorCode::of_root(err.problem),
        json!({ "path": format!("additionalDirectories[{}]", err.index), "reason": err.reason }),
    )
}

/// -32602 for `additionalDirectories` given to a Heron started with `--cwd-only`.
pub fn additional_directories_disabled() -> RpcError {
    coded(
        INVALID_PARAMS,
        "additionalDirectories: Heron was started with --cwd-only, so sessions work in their cwd only",
        ErrorCode::AdditionalDirectoriesDisabled,
        json!({ "path": "additionalDirectories" }),
    )
}

/// The wire error for a working directory that cannot be a workspace.
pub fn cwd_error(problem: RootProblem, reason: String) -> RpcError {
    coded(
        INVALID_PARAMS,
        format!("cwd: {reason}"),
        ErrorCode::of_root(problem),
        json!({ "path": "cwd", "reason": reason }),
    )
}

/// The wire error for a session operation.
pub fn session_error(err: SessionError, manager: &Manager) -> RpcError {
    match err {
        SessionError::NotFound(id) => unknown_session(&id),
        SessionError::Model(model) => model_error(&model, manager),
        SessionError::Setting(setting) => setting_error(&setting),
        // Only pause and resume fail this way; pause maps its own (`vendor::change_goal`),
        // since the number depends on the operation.
        SessionError::Goal(goal) => goal_error(&goal, false),
        SessionError::BadCursor => RpcError::invalid_params("cursor", "not a cursor this agent issued"),
        SessionError::OpenWithOtherRoots(which) => {
            // The field that differs, as the request names it.
            let path = match which {
                OtherRoot::Cwd => "cwd",
                OtherRoot::AdditionalDirectories => "additionalDirectories",
            };
            coded(
                INVALID_PARAMS,
                SessionError::OpenWithOtherRoots(which).to_string(),
                ErrorCode::OpenWithOtherRoots,
                json!({ "path": path }),
            )
        }
        SessionError::BadPath(reason) => RpcError::invalid_params("cwd", reason),
        SessionError::OpenElsewhere(id) => open_elsewhere(&id),
        SessionError::Store { kind, reason } => store_error(kind, &reason, manager.providers().keys()),
        SessionError::TooManyOpen(most) => coded(
            INTERNAL_ERROR,
            SessionError::TooManyOpen(most).to_string(),
            ErrorCode::TooManyOpen,
            json!({ "max": most }),
        ),
        SessionError::HistoryFull(full) => history_full(full),
        SessionError::Home(err) => file_error(
            &err,
            manager.providers().keys(),
            "Heron's configuration changed and cannot be used",
            ErrorCode::HomeUnusable,
        ),
        SessionError::Internal(cause) => RpcError::internal(&cause),
    }
}

/// -32602 for a session whose history passes its budget (on opening it, or on its next
/// turn), with `data.code` `session.history_full`, the `limit` and the `size` that passed it
/// in bytes, and the `scope` (`session`, or `process` for every open session together). The
/// message says what the user can do; the stored history is untouched.
pub fn history_full(full: HistoryFull) -> RpcError {
    coded(
        INVALID_PARAMS,
        format!("Cannot continue this session here: {full}"),
        ErrorCode::HistoryFull,
        json!({ "limit": full.limit, "size": full.size, "scope": if full.process { "process" } else { "session" } }),
    )
}

/// -32602 for a goal that cannot be paused or resumed, with the reason in `data`.
/// The error `_heron/session/goal/resume` answers when there is no goal to resume (none,
/// ended, or running): the Reasonix guide's -32010.
pub const GOAL_NOT_RESUMABLE: i32 = -32010;

/// The error `_heron/session/goal/pause` answers when no goal is running: the guide's -32011.
pub const GOAL_NOT_RUNNING: i32 = -32011;

/// A goal that could not be paused (`pause`) or resumed: -32011 or -32010, with `data.code`
/// saying why.
pub fn goal_error(err: &GoalError, pause: bool) -> RpcError {
    let (code, rest) = match err {
        GoalError::NoGoal => (ErrorCode::NoGoal, json!({ "reason": err.to_string() })),
        GoalError::Ended { status } => {
            (ErrorCode::GoalEnded, json!({ "status": status, "reason": err.to_string() }))
        }
        GoalError::AlreadyRunning => (ErrorCode::GoalRunning, json!({ "reason": err.to_string() })),
        GoalError::NotRunning => (ErrorCode::GoalNotRunning, json!({ "reason": err.to_string() })),
    };
    let number = if pause { GOAL_NOT_RUNNING } else { GOAL_NOT_RESUMABLE };
    coded(number, err.to_string(), code, rest)
}

fn setting_error(err: &SettingError) -> RpcError {
    match err {
        SettingError::UnknownValue { .. } | SettingError::Refused(_) => {
            RpcError::invalid_params("value", err.to_string())
        }
        SettingError::AboveCeiling { asked, ceiling } => coded(
            INVALID_PARAMS,
            err.to_string(),
            ErrorCode::AboveCeiling,
            json!({ "path": "value", "value": asked.id(), "ceiling": ceiling.id() }),
        ),
    }
}

/// -32603 for a reload that kept what the session had: the request was fine, Heron's own
/// files were not. `data` names the file (`file`, and `line`/`column` when known) and
/// `reason`, redacted of keys.
pub fn reload_error(err: &heron_core::extensions::ReloadError, keys: &Keys) -> RpcError {
    file_error(err, keys, "Reload failed, nothing changed", ErrorCode::ReloadFailed)
}

/// -32603 naming a file of Heron's home that cannot be used (`file`, `line`, `column`,
/// `reason` in `data`), its message starting with `what`.
fn file_error(
    err: &heron_core::extensions::ReloadError,
    keys: &Keys,
    what: &str,
    code: ErrorCode,
) -> RpcError {
    let reason = clip(&redact(&err.reason, keys.all()), MAX_FAILURE_MESSAGE);
    let file = err.file.display().to_string();
    let mut data = json!({ "file": file, "reason": reason });
    if let Some(line) = err.line {
        data["line"] = json!(line);
    }
    if let Some(column) = err.column {
        data["column"] = json!(column);
    }
    let at = err.line.map(|l| format!(" line {l}")).unwrap_or_default();
    coded(INTERNAL_ERROR, format!("{what}: {file}{at}: {reason}"), code, data)
}

/// The wire error for a prompt that failed after it was accepted.
pub fn prompt_error(err: &PromptError, keys: &Keys) -> RpcError {
    match err {
        // As on session/new: only a missing model or key is a login matter (-32000).
        PromptError::Model(model) => model_rpc_error(model, keys),
        PromptError::Closed => coded(
            INTERNAL_ERROR,
            "The session was closed before the prompt ran",
            ErrorCode::SessionClosed,
            json!({}),
        ),
        PromptError::QueueFull(full) => coded(
            INVALID_PARAMS,
            err.to_string(),
            ErrorCode::PromptQueueFull,
            json!({ "limit": full.limit, "scope": if full.process { "process" } else { "session" } }),
        ),
        PromptError::HistoryFull(full) => history_full(*full),
        PromptError::Attachment(
            refused @ (AttachmentError::TooLarge { limit, .. } | AttachmentError::Full { limit }),
        ) => coded(
            INVALID_PARAMS,
            err.to_string(),
            ErrorCode::PromptAttachmentRefused,
            json!({ "limit": limit, "scope": if matches!(refused, AttachmentError::Full { .. }) { "workspace" } else { "attachment" } }),
        ),
        other => {
            let cause = clip(&redact(&other.to_string(), keys.all()), MAX_FAILURE_MESSAGE);
            tracing::warn!(%cause, "turn failed");
            // The seed bounds the whole message, which editors show, by the same 2048 bytes.
            coded(
                INTERNAL_ERROR,
                clip(&format!("Turn failed: {cause}"), MAX_FAILURE_MESSAGE),
                ErrorCode::TurnFailed,
                json!({ "cause": cause }),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `data.code` values the seeds name (`research/seed-contract.md`): clients key on
    /// them, so each is pinned here by variant and spelling.
    const SEED_CODES: &[(ErrorCode, &str)] = &[
        (ErrorCode::TurnFailed, "turn_failed"),
        (ErrorCode::AboveCeiling, "acp.tool_approval.above_ceiling"),
        (ErrorCode::OpenWithOtherRoots, "acp.additional_directories.session_open"),
        (ErrorCode::AdditionalDirectoriesDisabled, "acp.additional_directories.disabled"),
        (ErrorCode::RootRelative, "workspace_roots.relative"),
        (ErrorCode::RootMissing, "workspace_roots.missing"),
        (ErrorCode::RootNotOwned, "workspace_roots.not_owned"),
        (ErrorCode::RootProtected, "workspace_roots.protected"),
        (ErrorCode::RootOverlap, "workspace_roots.overlap"),
        (ErrorCode::RootTooMany, "workspace_roots.too_many"),
    ];

    fn wire(code: ErrorCode) -> String {
        serde_json::to_value(code).expect("encodes").as_str().expect("a string").to_owned()
    }

    #[test]
    fn the_seeds_codes_keep_the_seeds_spelling() {
        for (code, name) in SEED_CODES {
            assert_eq!(wire(*code), *name, "{code:?} was renamed: clients written from the seeds key on it");
        }
    }

    #[test]
    fn herons_own_codes_are_dotted_paths_of_snake_case_segments() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let name = wire(*code);
            assert!(seen.insert(name.clone()), "{name} is used twice");
            if SEED_CODES.iter().any(|(seed, _)| seed == code) {
                continue;
            }
            let segments: Vec<&str> = name.split('.').collect();
            assert!(segments.len() >= 2, "{name} names no area");
            assert!(
                segments.iter().all(|s| !s.is_empty()
                    && s.starts_with(|c: char| c.is_ascii_lowercase())
                    && s.chars().all(|c| c.is_ascii_lowercase() || c == '_')),
                "{name} is not snake_case segments"
            );
        }
    }

    #[test]
    fn coded_errors_carry_the_code_first_and_the_rest_beside_it() {
        let err = coded(-32602, "bad", ErrorCode::TurnFailed, json!({ "cause": "x" }));
        assert_eq!(err.data, Some(json!({ "code": "turn_failed", "cause": "x" })));
    }

    #[test]
    fn a_turns_failure_and_a_stores_reason_are_clipped_and_keep_no_key() {
        let keys = Keys::from_pairs([("OPENAI_API_KEY".to_owned(), "sk-secret-value-1".to_owned())]);
        let long = format!("sk-secret-value-1 {}", "x".repeat(10_000));
        let failed = prompt_error(&PromptError::Attachment(AttachmentError::Failed(long.clone())), &keys);
        assert!(failed.message.len() <= MAX_FAILURE_MESSAGE, "{}", failed.message.len());
        let data = failed.data.as_ref().expect("data").to_string();
        assert!(!failed.message.contains("sk-secret") && !data.contains("sk-secret"), "{}", failed.message);
        assert!(data.len() <= MAX_FAILURE_MESSAGE + 64, "{}", data.len());
        let stored = store_error(StoreErrorKind::Other, &long, &keys);
        let reason = stored.data.as_ref().and_then(|d| d["reason"].as_str()).expect("a reason").to_owned();
        assert!(reason.len() <= MAX_STORE_REASON && !reason.contains("sk-secret"), "{reason}");
    }
}
