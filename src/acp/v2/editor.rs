//! The editor side of a session over ACP v2: v2 clients serve no files and no terminals
//! (tools read, write and run commands here, under the same roots and sandbox), so what is
//! left is the permission question, `session/request_permission` in v2's shape, bracketed by
//! `state_update` `requires_action` and `running` so the client can tell the turn waits on
//! its user. A question dropped unanswered (its call or its turn was cancelled) cannot say
//! `running` any more; it leaves that to the turn's forwarder ([`Abandoned`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use heron_core::tools::editor::{
    Answer, Call, EditorIo, PERMISSION_OPTIONS, PermissionAnswer, PermissionAsk,
};
use heron_protocol::RpcError;
use heron_protocol::runtime::Outgoing;
use heron_protocol::v2::{
    self as p, Client, ClientPeer, PermissionOption, PermissionOptionId, PermissionOptionKind,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse, RequestPermissionSubject,
    SessionId, ToolCallPermissionSubject, UpdateSessionNotification,
};

use super::convert;

/// The wire kind of an option Heron offers.
fn option_kind(answer: PermissionAnswer) -> PermissionOptionKind {
    match answer {
        PermissionAnswer::AllowOnce => PermissionOptionKind::AllowOnce,
        PermissionAnswer::AllowAlways => PermissionOptionKind::AllowAlways,
        PermissionAnswer::RejectAlways => PermissionOptionKind::RejectAlways,
        _ => PermissionOptionKind::RejectOnce,
    }
}

/// One session's view of a v2 editor.
#[derive(Debug, Clone)]
pub struct V2Editor<O> {
    client: ClientPeer<O>,
    session_id: String,
    abandoned: Arc<Abandoned>,
}

impl<O: Outgoing> V2Editor<O> {
    /// The editor of session `session_id`; questions dropped unanswered are noted in
    /// `abandoned`, which the connection's turn forwarders read.
    pub fn new(client: ClientPeer<O>, session_id: String, abandoned: Arc<Abandoned>) -> Self {
        Self { client, session_id, abandoned }
    }
}

/// The sessions of a connection left at `requires_action` by a permission question that was
/// dropped before it could report `running` again. v2 requires `running` when the work
/// resumes; the turn's forwarder sends it before the turn's next output.
#[derive(Debug, Default)]
pub struct Abandoned(Mutex<HashSet<String>>);

impl Abandoned {
    fn note(&self, session_id: &str) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).insert(session_id.to_owned());
    }

    /// Whether `session_id` was left at `requires_action`; it is not noted any more.
    pub fn take(&self, session_id: &str) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).remove(session_id)
    }
}

/// A question in flight: dropped before it reported `running` again, it notes its session
/// in [`Abandoned`].
struct Asking {
    abandoned: Arc<Abandoned>,
    session_id: String,
    settled: bool,
}

impl Drop for Asking {
    fn drop(&mut self) {
        if !self.settled {
            self.abandoned.note(&self.session_id);
        }
    }
}

fn answer_of(response: Result<RequestPermissionResponse, RpcError>) -> PermissionAnswer {
    match response {
        Ok(RequestPermissionResponse { outcome: RequestPermissionOutcome::Selected(selected), .. }) => {
            PermissionAnswer::of_option(&selected.option_id.0)
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

/// Over v2 Heron offers the client no file or terminal methods and asks no questions:
/// those are off (the trait's defaults); only permission is asked.
impl<O: Outgoing> EditorIo for V2Editor<O> {
    fn request_permission(&self, ask: &PermissionAsk, timeout: Duration) -> Call<PermissionAnswer> {
        let request = RequestPermissionRequest {
            description: None,
            meta: None,
            options: PERMISSION_OPTIONS
                .iter()
                .map(|(id, name, answer)| PermissionOption {
                    kind: option_kind(*answer),
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
        // Before `requires_action` goes out: from then on, a drop leaves the state to mend.
        let asking =
            Asking { abandoned: self.abandoned.clone(), session_id: self.session_id.clone(), settled: false };
        Call::new(async move {
            let state = move |update: p::SessionUpdate| UpdateSessionNotification {
                meta: None,
                session_id: SessionId(session_id.clone()),
                update,
            };
            // A client that stopped reading does not stop the question.
            let _ = client.session_update(state(convert::requires_action())).await;
            let reply = client.0.queue_call("session/request_permission", request, Some(timeout)).await;
            Answer::new(async move {
                // The whole guard moves into the wait (not a copy of its flag), and drops with it.
                let mut asking = asking;
                let answer = answer_of(reply.await);
                let _ = client.session_update(state(convert::running())).await;
                asking.settled = true;
                answer
            })
        })
    }
}
