//! The editor as a turn's tools and the session's MCP servers see it: the one place a
//! request to the editor waits for the running turn's run to be forwarded up to it, so no
//! request overtakes the updates it refers to (a tool's `fs/*` or `terminal/*` after its
//! call shows running, a release after the call's last update, a question after its
//! call). It also reports on the session's status board while the turn waits for the
//! user: `awaiting_permission` during a permission request, `awaiting_input` during a
//! question or an MCP server's elicitation; the editor sees the new status before the
//! request.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::snapshot::Activity;
use super::status::Board;
use crate::BoxFuture;
use crate::tools::editor::{
    EditorError, EditorIo, Elicitation, ElicitationAnswer, ElicitationModes, ExitStatus, PermissionAnswer,
    PermissionAsk, QuestionAnswer, TerminalCommand, TerminalOutput,
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

    /// `request`, sent once what the running turn sent before it is out. The adapter's
    /// request future sends nothing before it is first polled.
    fn behind<T: Send + 'static>(&self, request: BoxFuture<T>) -> BoxFuture<T> {
        let board = self.board.clone();
        Box::pin(async move {
            board.flushed().await;
            request.await
        })
    }
}

/// Puts the turn back to running when the wait ends, however it ends (a cancelled turn
/// drops the wait).
struct Waiting(Arc<Board>);

impl Waiting {
    async fn start(board: Arc<Board>, activity: Activity) -> Self {
        board.set_activity(activity);
        board.flushed().await;
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
    fn read_text_file(&self, path: &Path) -> BoxFuture<Result<String, EditorError>> {
        self.behind(self.inner.read_text_file(path))
    }
    fn write_text_file(&self, path: &Path, content: String) -> BoxFuture<Result<(), EditorError>> {
        self.behind(self.inner.write_text_file(path, content))
    }
    fn terminal_create(&self, command: TerminalCommand) -> BoxFuture<Result<String, EditorError>> {
        self.behind(self.inner.terminal_create(command))
    }
    fn terminal_output(&self, id: &str) -> BoxFuture<Result<TerminalOutput, EditorError>> {
        self.behind(self.inner.terminal_output(id))
    }
    fn terminal_wait_for_exit(&self, id: &str) -> BoxFuture<Result<ExitStatus, EditorError>> {
        self.behind(self.inner.terminal_wait_for_exit(id))
    }
    fn terminal_kill(&self, id: &str) -> BoxFuture<Result<(), EditorError>> {
        self.behind(self.inner.terminal_kill(id))
    }
    fn terminal_release(&self, id: &str) -> BoxFuture<Result<(), EditorError>> {
        self.behind(self.inner.terminal_release(id))
    }

    fn request_permission(&self, ask: &PermissionAsk, timeout: Duration) -> BoxFuture<PermissionAnswer> {
        let (inner, board, ask) = (self.inner.clone(), self.board.clone(), ask.clone());
        Box::pin(async move {
            let _waiting = Waiting::start(board, Activity::AwaitingPermission).await;
            inner.request_permission(&ask, timeout).await
        })
    }

    fn elicitation_modes(&self) -> ElicitationModes {
        self.inner.elicitation_modes()
    }

    fn elicit(&self, request: Elicitation) -> BoxFuture<Result<ElicitationAnswer, EditorError>> {
        let (inner, board) = (self.inner.clone(), self.board.clone());
        Box::pin(async move {
            let _waiting = Waiting::start(board, Activity::AwaitingInput).await;
            inner.elicit(request).await
        })
    }

    fn ask(
        &self,
        question: &str,
        options: &[String],
        call_id: Option<&str>,
    ) -> BoxFuture<Result<QuestionAnswer, EditorError>> {
        let (inner, board) = (self.inner.clone(), self.board.clone());
        let (question, options, call_id) =
            (question.to_owned(), options.to_vec(), call_id.map(str::to_owned));
        Box::pin(async move {
            let _waiting = Waiting::start(board, Activity::AwaitingInput).await;
            inner.ask(&question, &options, call_id.as_deref()).await
        })
    }
}
