//! The editor as a turn's tools and the session's MCP servers see it: the one place a
//! request to the editor joins the running turn's run, to be sent by whoever forwards the
//! run in its place, so no request overtakes the updates it refers to (a tool's `fs/*` or
//! `terminal/*` after its call shows running, a release after the call's last update, a
//! question after its call). It also reports on the session's status board while the turn
//! waits for the user: `awaiting_permission` during a permission request, `awaiting_input`
//! during a question or an MCP server's elicitation; the editor sees the new status before
//! the request.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::error::SendError;
use tokio::sync::oneshot;

use super::snapshot::Activity;
use super::status::Board;
use super::update::{EditorRequest, TurnUpdate};
use crate::tools::editor::{
    Answer, Call, EditorError, EditorIo, Elicitation, ElicitationAnswer, ElicitationModes, ExitStatus,
    PermissionAnswer, PermissionAsk, QuestionAnswer, TerminalCommand, TerminalOutput, Unsent,
};

/// An editor whose waits on the user show on a status board.
pub(super) struct WatchedEditor {
    inner: Arc<dyn EditorIo>,
    board: Arc<Board>,
}

impl WatchedEditor {
    /// `inner`, reporting to `board`.
    pub(super) fn new(inner: Arc<dyn EditorIo>, board: Arc<Board>) -> Self {
        Self { inner, board }
    }

    /// `call`, sent in its place among the running turn's updates.
    fn behind<T: Unsent + Send + 'static>(&self, call: Call<T>) -> Call<T> {
        Call::new(in_place(self.board.clone(), call))
    }

    /// `call`, sent in its place, with the turn shown `activity` until it is answered.
    fn waiting<T: Unsent + Send + 'static>(&self, activity: Activity, call: Call<T>) -> Call<T> {
        let board = self.board.clone();
        Call::new(async move {
            let waiting = Waiting::start(board.clone(), activity);
            let answer = in_place(board, call).await;
            Answer::new(async move {
                let _waiting = waiting;
                answer.await
            })
        })
    }
}

/// Puts `call` on the running turn's stream for its forwarder to send there, and gives back
/// the wait for its answer; without a turn (or anyone forwarding it) the call is sent here.
async fn in_place<T: Unsent + Send + 'static>(board: Arc<Board>, call: Call<T>) -> Answer<T> {
    let (queued, wait) = oneshot::channel();
    let request = EditorRequest::new(async move {
        let _ = queued.send(call.queue().await);
    });
    let update = TurnUpdate::Request(request);
    let unsent = match board.route() {
        Some(route) => route.send(update).err().map(|SendError(update)| update),
        None => Some(update),
    };
    if let Some(TurnUpdate::Request(request)) = unsent {
        request.send().await;
    }
    wait.await.unwrap_or_else(|_| Answer::ready(T::unsent()))
}

/// Puts the turn back to running when the wait ends, however it ends (a cancelled turn
/// drops the wait).
struct Waiting(Arc<Board>);

impl Waiting {
    /// The status goes on the turn's stream, so the editor sees it before the request.
    fn start(board: Arc<Board>, activity: Activity) -> Self {
        board.set_activity(activity);
        Self(board)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.set_activity(Activity::Running);
    }
}

impl EditorIo for WatchedEditor {
    fn reads_files(&self) -> bool {
        self.inner.reads_files()
    }
    fn writes_files(&self) -> bool {
        self.inner.writes_files()
    }
    fn has_terminals(&self) -> bool {
        self.inner.has_terminals()
    }
    fn confines_terminals(&self) -> bool {
        self.inner.confines_terminals()
    }
    fn asks_questions(&self) -> bool {
        self.inner.asks_questions()
    }
    fn read_text_file(&self, path: &Path) -> Call<Result<String, EditorError>> {
        self.behind(self.inner.read_text_file(path))
    }
    fn write_text_file(&self, path: &Path, content: String) -> Call<Result<(), EditorError>> {
        self.behind(self.inner.write_text_file(path, content))
    }
    fn terminal_create(&self, command: TerminalCommand) -> Call<Result<String, EditorError>> {
        self.behind(self.inner.terminal_create(command))
    }
    fn terminal_output(&self, id: &str) -> Call<Result<TerminalOutput, EditorError>> {
        self.behind(self.inner.terminal_output(id))
    }
    fn terminal_wait_for_exit(&self, id: &str) -> Call<Result<ExitStatus, EditorError>> {
        self.behind(self.inner.terminal_wait_for_exit(id))
    }
    fn terminal_kill(&self, id: &str) -> Call<Result<(), EditorError>> {
        self.behind(self.inner.terminal_kill(id))
    }
    fn terminal_release(&self, id: &str) -> Call<Result<(), EditorError>> {
        self.behind(self.inner.terminal_release(id))
    }

    fn request_permission(&self, ask: &PermissionAsk, timeout: Duration) -> Call<PermissionAnswer> {
        self.waiting(Activity::AwaitingPermission, self.inner.request_permission(ask, timeout))
    }

    fn elicitation_modes(&self) -> ElicitationModes {
        self.inner.elicitation_modes()
    }

    fn elicit(&self, request: Elicitation) -> Call<Result<ElicitationAnswer, EditorError>> {
        self.waiting(Activity::AwaitingInput, self.inner.elicit(request))
    }

    fn ask(
        &self,
        question: &str,
        options: &[String],
        call_id: Option<&str>,
    ) -> Call<Result<QuestionAnswer, EditorError>> {
        self.waiting(Activity::AwaitingInput, self.inner.ask(question, options, call_id))
    }
}
