//! The client side `heron run` serves to the agent: session updates to the view,
//! permission questions to the asker, `fs/*` and `terminal/*` to the confined workspace.
//! Requests naming another session than the one opened are refused (-32002); before the
//! session's id is known (while `session/new` runs) any id is taken, since only one
//! session is being opened.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use heron_protocol::{
    Client, CreateTerminalRequest, CreateTerminalResponse, KillTerminalRequest, KillTerminalResponse, Method,
    ReadTextFileRequest, ReadTextFileResponse, ReleaseTerminalRequest, ReleaseTerminalResponse,
    RequestPermissionRequest, RequestPermissionResponse, RpcError, SessionId, SessionNotification,
    TerminalOutputRequest, TerminalOutputResponse, WaitForTerminalExitRequest, WaitForTerminalExitResponse,
    WriteTextFileRequest, WriteTextFileResponse,
};
use heron_rpc::Policy;

use super::ask::Asker;
use super::files::{self, Workspace};
use super::terminals::Terminals;
use super::view::View;

/// Everything the client's handlers share.
pub struct Parts {
    pub view: View,
    pub asker: Asker,
    pub workspace: Workspace,
    pub terminals: Arc<Terminals>,
    /// Fired at the first Ctrl-C: open questions end `cancelled`.
    pub interrupted: CancellationToken,
    /// The session's id, once known.
    pub session: Mutex<Option<String>>,
}

/// The handle the connection serves; cheap to clone.
#[derive(Clone)]
pub struct RunClient(pub Arc<Parts>);

impl RunClient {
    fn check(&self, id: &SessionId) -> Result<(), RpcError> {
        let session = self.0.session.lock().unwrap_or_else(PoisonError::into_inner);
        match session.as_deref() {
            Some(known) if known != id.0 => {
                Err(heron_protocol::error::resource_not_found("sessionId", &id.0))
            }
            _ => Ok(()),
        }
    }

    /// Runs `work` on the parts once the session id checked out.
    fn checked<T, F, W>(
        &self,
        id: SessionId,
        work: W,
    ) -> impl Future<Output = Result<T, RpcError>> + Send + 'static + use<T, F, W>
    where
        W: FnOnce(Arc<Parts>) -> F + Send + 'static,
        F: Future<Output = Result<T, RpcError>> + Send + 'static,
        T: Send + 'static,
    {
        let checked = self.check(&id);
        let parts = Arc::clone(&self.0);
        async move {
            checked?;
            work(parts).await
        }
    }
}

/// Updates render in arrival order; every request may wait (on the user, a command, the
/// disk) without holding up the reader.
pub fn policy(method: Method) -> Policy {
    if method == Method::SessionUpdate { Policy::Inline } else { Policy::Concurrent }
}

// Each method names its concrete future and result, narrower than the generated trait's
// (which leaves room for an answer with what follows it): refined on purpose.
#[allow(refining_impl_trait)]
impl Client for RunClient {
    fn session_update(
        &self,
        params: SessionNotification,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static {
        if self.check(&params.session_id).is_ok() {
            self.0.view.update(params.update);
        } else {
            tracing::debug!(session = %params.session_id.0, "an update for another session was ignored");
        }
        std::future::ready(Ok(()))
    }

    fn session_request_permission(
        &self,
        params: RequestPermissionRequest,
    ) -> impl Future<Output = Result<RequestPermissionResponse, RpcError>> + Send + 'static {
        self.checked(params.session_id.clone(), move |parts| async move {
            let outcome = parts.asker.decide(&parts.view, &params, &parts.interrupted).await;
            // What the user answered went to stderr with the question; the turn's record
            // says it too. An answer `--approve` gave is the flag's, which the user knows.
            if parts.asker.asks() {
                parts.view.permission_answered(&params, &outcome);
            }
            Ok(RequestPermissionResponse { meta: None, outcome })
        })
    }

    fn fs_read_text_file(
        &self,
        params: ReadTextFileRequest,
    ) -> impl Future<Output = Result<ReadTextFileResponse, RpcError>> + Send + 'static {
        self.checked(params.session_id.clone(), move |parts| async move {
            files::read(&parts.workspace, params).await
        })
    }

    fn fs_write_text_file(
        &self,
        params: WriteTextFileRequest,
    ) -> impl Future<Output = Result<WriteTextFileResponse, RpcError>> + Send + 'static {
        self.checked(params.session_id.clone(), move |parts| async move {
            files::write(&parts.workspace, params).await
        })
    }

    fn terminal_create(
        &self,
        params: CreateTerminalRequest,
    ) -> impl Future<Output = Result<CreateTerminalResponse, RpcError>> + Send + 'static {
        self.checked(
            params.session_id.clone(),
            move |parts| async move { parts.terminals.create(params).await },
        )
    }

    fn terminal_output(
        &self,
        params: TerminalOutputRequest,
    ) -> impl Future<Output = Result<TerminalOutputResponse, RpcError>> + Send + 'static {
        self.checked(params.session_id.clone(), move |parts| async move {
            parts.terminals.output(&params.terminal_id)
        })
    }

    fn terminal_wait_for_exit(
        &self,
        params: WaitForTerminalExitRequest,
    ) -> impl Future<Output = Result<WaitForTerminalExitResponse, RpcError>> + Send + 'static {
        self.checked(params.session_id.clone(), move |parts| async move {
            parts.terminals.wait_for_exit(&params.terminal_id).await
        })
    }

    fn terminal_kill(
        &self,
        params: KillTerminalRequest,
    ) -> impl Future<Output = Result<KillTerminalResponse, RpcError>> + Send + 'static {
        self.checked(params.session_id.clone(), move |parts| async move {
            parts.terminals.kill(&params.terminal_id)
        })
    }

    fn terminal_release(
        &self,
        params: ReleaseTerminalRequest,
    ) -> impl Future<Output = Result<ReleaseTerminalResponse, RpcError>> + Send + 'static {
        self.checked(params.session_id.clone(), move |parts| async move {
            parts.terminals.release(&params.terminal_id)
        })
    }
}
