//! The editor side of a session over ACP v2: v2 clients serve no files and no terminals
//! (tools read, write and run commands here, under the same roots and sandbox), so what is
//! left is the permission question, `session/request_permission` in v2's shape, bracketed by
//! `state_update` `requires_action` and `running` so the client can tell the turn waits on
//! its user.

use std::path::Path;
use std::time::Duration;

use heron_core::BoxFuture;
use heron_core::tools::editor::{
    EditorError, EditorIo, ExitStatus, NoEditor, PermissionAnswer, PermissionAsk, QuestionAnswer,
    TerminalCommand, TerminalOutput,
};
use heron_protocol::RpcError;
use heron_protocol::runtime::Outgoing;
use heron_protocol::v2::{
    self as p, Client, ClientPeer, PermissionOption, PermissionOptionId, PermissionOptionKind,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse, RequestPermissionSubject,
    SessionId, ToolCallPermissionSubject, UpdateSessionNotification,
};

use super::convert;

/// The options every permission request offers, with the ids answers are read by.
const OPTIONS: [(&str, &str, PermissionOptionKind); 4] = [
    ("allow_once", "Allow once", PermissionOptionKind::AllowOnce),
    ("allow_always", "Always allow", PermissionOptionKind::AllowAlways),
    ("reject_once", "Reject", PermissionOptionKind::RejectOnce),
    ("reject_always", "Always reject", PermissionOptionKind::RejectAlways),
];

/// One session's view of a v2 editor.
#[derive(Debug, Clone)]
pub struct V2Editor<O> {
    client: ClientPeer<O>,
    session_id: String,
}

impl<O: Outgoing> V2Editor<O> {
    /// The editor of session `session_id`.
    pub fn new(client: ClientPeer<O>, session_id: String) -> Self {
        Self { client, session_id }
    }
}

fn answer_of(response: Result<RequestPermissionResponse, RpcError>) -> PermissionAnswer {
    match response {
        Ok(RequestPermissionResponse { outcome: RequestPermissionOutcome::Selected(selected), .. }) => {
            match selected.option_id.0.as_str() {
                "allow_once" => PermissionAnswer::AllowOnce,
                "allow_always" => PermissionAnswer::AllowAlways,
                "reject_always" => PermissionAnswer::RejectAlways,
                // An option Heron did not offer is a rejection.
                _ => PermissionAnswer::RejectOnce,
            }
        }
        Ok(RequestPermissionResponse { outcome: RequestPermissionOutcome::Cancelled(_), .. }) => {
            PermissionAnswer::Cancelled
        }
        // An outcome this version does not know, an error, a malformed reply or a timeout is
        // a rejection.
        Ok(_) => PermissionAnswer::RejectOnce,
        Err(err) => crate::acp::editor::unanswered(&err),
    }
}

impl<O: Outgoing> EditorIo for V2Editor<O> {
    fn reads_files(&self) -> bool {
        false
    }
    fn writes_files(&self) -> bool {
        false
    }
    fn has_terminals(&self) -> bool {
        false
    }
    fn asks_questions(&self) -> bool {
        false
    }
    fn read_text_file(&self, path: &Path) -> BoxFuture<Result<String, EditorError>> {
        NoEditor.read_text_file(path)
    }
    fn write_text_file(&self, path: &Path, content: String) -> BoxFuture<Result<(), EditorError>> {
        NoEditor.write_text_file(path, content)
    }
    fn terminal_create(&self, command: TerminalCommand) -> BoxFuture<Result<String, EditorError>> {
        NoEditor.terminal_create(command)
    }
    fn terminal_output(&self, id: &str) -> BoxFuture<Result<TerminalOutput, EditorError>> {
        NoEditor.terminal_output(id)
    }
    fn terminal_wait_for_exit(&self, id: &str) -> BoxFuture<Result<ExitStatus, EditorError>> {
        NoEditor.terminal_wait_for_exit(id)
    }
    fn terminal_kill(&self, id: &str) -> BoxFuture<Result<(), EditorError>> {
        NoEditor.terminal_kill(id)
    }
    fn terminal_release(&self, id: &str) -> BoxFuture<Result<(), EditorError>> {
        NoEditor.terminal_release(id)
    }

    fn request_permission(&self, ask: &PermissionAsk, timeout: Duration) -> BoxFuture<PermissionAnswer> {
        let request = RequestPermissionRequest {
            description: None,
            meta: None,
            options: OPTIONS
                .iter()
                .map(|(id, name, kind)| PermissionOption {
                    kind: kind.clone(),
                    meta: None,
                    name: (*name).to_owned(),
                    option_id: PermissionOptionId((*id).to_owned()),
                })
                .collect(),
            session_id: SessionId(self.session_id.clone()),
            subject: Some(RequestPermissionSubject::ToolCall(ToolCallPermissionSubject {
                meta: None,
                tool_call: convert::permission_call(ask),
            })),
            title: ask.title.clone(),
        };
        let client = self.client.clone();
        let session_id = self.session_id.clone();
        Box::pin(async move {
            let state = |update: p::SessionUpdate| UpdateSessionNotification {
                meta: None,
                session_id: SessionId(session_id.clone()),
                update,
            };
            // A client that stopped reading does not stop the question.
            let _ = client.session_update(state(convert::requires_action())).await;
            let call = client.0.call_with_timeout("session/request_permission", request, Some(timeout));
            let answer = answer_of(call.await);
            let _ = client.session_update(state(convert::running())).await;
            answer
        })
    }

    fn ask(&self, question: &str, options: &[String]) -> BoxFuture<Result<QuestionAnswer, EditorError>> {
        NoEditor.ask(question, options)
    }
}
