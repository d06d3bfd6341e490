//! What the editor can do for a tool call, in core terms: read and write its buffers, run
//! commands in its terminals, ask the user. The ACP adapter implements [`EditorIo`] per
//! session; [`NoEditor`] is the headless stand-in that can do none of it.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::BoxFuture;
use crate::types::{Location, ToolKind, ToolOutput};

/// A failed editor call, as a message for the model and the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EditorError(pub String);

/// How a command in an editor terminal ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExitStatus {
    /// The exit code, if it exited.
    pub code: Option<u32>,
    /// The signal that ended it, if any (e.g. `SIGKILL`).
    pub signal: Option<String>,
}

/// What an editor terminal has printed so far.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TerminalOutput {
    /// The output (the editor keeps the tail when it truncates).
    pub output: String,
    /// Whether the front was cut.
    pub truncated: bool,
    /// Set once the command has exited.
    pub exit: Option<ExitStatus>,
}

/// A command to run in an editor terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalCommand {
    /// The program (run through `sh -c` by the caller when it is a shell line).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its working directory (absolute).
    pub cwd: String,
    /// How much output the editor keeps, in bytes.
    pub output_byte_limit: u64,
}

/// A permission request: the whole call as the user will see it, so that what they approve
/// is what runs.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionAsk {
    /// The call's id (the card the editor already shows).
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The call's human title.
    pub title: String,
    /// What kind of action it is.
    pub kind: ToolKind,
    /// The files it touches, resolved (symlinks followed).
    pub locations: Vec<Location>,
    /// Its arguments.
    pub raw_input: serde_json::Value,
    /// What it will do: the diff of a write, the command line of a command.
    pub content: Vec<ToolOutput>,
    /// For a subagent's call, asked on its parent's card (`call_id`): the child's own call
    /// id, which the request carries in `_meta.heron` beside `parentToolCallId`.
    pub subagent_call_id: Option<String>,
}

/// What the user chose when asked for permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionAnswer {
    /// Run it this time.
    AllowOnce,
    /// Run it, and calls like it for the rest of the session.
    AllowAlways,
    /// Do not run it.
    RejectOnce,
    /// Do not run it, nor calls like it for the rest of the session.
    RejectAlways,
    /// The request was cancelled (the turn was, or the editor withdrew it).
    Cancelled,
    /// No answer came: the request timed out, or the editor answered it with an error.
    /// Nothing runs, and nothing is remembered.
    Unanswered(Unanswered),
}

/// The options every permission request offers, in the order shown: the id an answer names,
/// the label, and what choosing it means. Both protocol versions offer these, with the kind
/// each version's wire gives the answer.
pub const PERMISSION_OPTIONS: [(&str, &str, PermissionAnswer); 4] = [
    ("allow_once", "Allow once", PermissionAnswer::AllowOnce),
    ("allow_always", "Always allow", PermissionAnswer::AllowAlways),
    ("reject_once", "Reject", PermissionAnswer::RejectOnce),
    ("reject_always", "Always reject", PermissionAnswer::RejectAlways),
];

impl PermissionAnswer {
    /// What choosing the option `id` means; an option Heron did not offer is a rejection.
    pub fn of_option(id: &str) -> PermissionAnswer {
        PERMISSION_OPTIONS
            .iter()
            .find(|(offered, _, _)| *offered == id)
            .map_or(PermissionAnswer::RejectOnce, |(_, _, answer)| *answer)
    }
}

/// Why a permission request got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// Nobody answered within the request's timeout.
    TimedOut,
    /// The editor answered with an error (or something that is not an answer).
    Failed,
}

/// The answer to a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuestionAnswer {
    /// The user answered.
    Answer(String),
    /// The user declined to answer.
    Declined,
    /// The user dismissed the question.
    Cancelled,
}

/// A form field an MCP server asks for. Only flat forms are offered: text, a number, a
/// yes or no, one choice, or several choices of a fixed list.
#[derive(Debug, Clone, PartialEq)]
pub struct FormField {
    /// The key the answer goes under.
    pub name: String,
    /// A short label, if the server gave one.
    pub title: Option<String>,
    /// A longer explanation, if the server gave one.
    pub description: Option<String>,
    /// What the answer is.
    pub kind: FieldKind,
    /// Whether the form needs an answer for it.
    pub required: bool,
}

/// What a text answer must look like, as MCP and ACP forms name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    /// An email address (`email`).
    Email,
    /// An absolute URI (`uri`).
    Uri,
    /// A calendar date, `YYYY-MM-DD` (`date`).
    Date,
    /// An RFC 3339 date and time (`date-time`).
    DateTime,
}

/// One option of a choice: the value sent back, and what the user is shown, if the server
/// gave a title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldOption {
    /// The value the answer carries.
    pub value: String,
    /// The label shown instead of the value.
    pub title: Option<String>,
}

impl From<&str> for FieldOption {
    /// An option shown as its value.
    fn from(value: &str) -> Self {
        Self { value: value.to_owned(), title: None }
    }
}

/// The shape of a [`FormField`]'s answer. Every default is one the field accepts.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    /// Free text, between `min_length` and `max_length` characters.
    Text {
        /// The shortest answer taken.
        min_length: usize,
        /// The longest answer taken.
        max_length: usize,
        /// What the text must be, if anything in particular.
        format: Option<TextFormat>,
        /// The answer offered first.
        default: Option<String>,
    },
    /// A number within bounds; a whole one if `integer`.
    Number {
        /// Whether only whole numbers are taken.
        integer: bool,
        /// The least taken (inclusive).
        minimum: Option<f64>,
        /// The most taken (inclusive).
        maximum: Option<f64>,
        /// The answer offered first.
        default: Option<f64>,
    },
    /// Yes or no.
    Boolean {
        /// The answer offered first.
        default: Option<bool>,
    },
    /// One of `options`.
    Choice {
        /// The values offered.
        options: Vec<FieldOption>,
        /// The value offered first.
        default: Option<String>,
    },
    /// Some of `options`, each at most once.
    Choices {
        /// The values offered.
        options: Vec<FieldOption>,
        /// The fewest to pick.
        min: usize,
        /// The most to pick.
        max: usize,
        /// The values picked at first.
        default: Vec<String>,
    },
}

/// What an MCP server asks the user through the editor, already checked and cleaned:
/// the message starts "MCP server asks:", has no control characters and is capped.
#[derive(Debug, Clone, PartialEq)]
pub enum Elicitation {
    /// A form to fill in.
    Form {
        /// What the server says.
        message: String,
        /// The fields, in the server's order.
        fields: Vec<FormField>,
    },
    /// A page to open (an http or https URL).
    Url {
        /// What the server says.
        message: String,
        /// The page.
        url: String,
        /// The server's id for this request.
        id: String,
    },
}

/// How the user answered an [`Elicitation`]. An accepted form's values are checked against
/// the form before they reach the server.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAnswer {
    /// Accepted, with the form's values (empty for a page).
    Accept(serde_json::Map<String, serde_json::Value>),
    /// Declined.
    Decline,
    /// Dismissed.
    Cancel,
}

/// Which elicitation modes the editor advertised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ElicitationModes {
    /// Forms (`elicitation.form`).
    pub form: bool,
    /// Pages (`elicitation.url`).
    pub url: bool,
}

/// A request to the editor, in two halves: [`Call::queue`] puts it in the editor's
/// connection and gives back the wait for its answer, so whoever keeps requests in order
/// with other messages (the session's outbound sequencer) awaits only the first half in
/// that place. Awaiting a `Call` does both; nothing is sent before it is first polled.
pub struct Call<T> {
    state: Half<T>,
}

enum Half<T> {
    Queue(BoxFuture<Answer<T>>),
    Wait(BoxFuture<T>),
}

/// The second half of a [`Call`]: await it for the editor's answer. Dropping it gives the
/// request up.
pub struct Answer<T>(BoxFuture<T>);

impl<T: Send + 'static> Answer<T> {
    /// The wait `answer`.
    pub fn new(answer: impl Future<Output = T> + Send + 'static) -> Self {
        Self(Box::pin(answer))
    }

    /// An answer already here.
    pub fn ready(answer: T) -> Self {
        Self::new(std::future::ready(answer))
    }
}

// Not a `Future` itself: a wait handed on, to be awaited elsewhere, not where it was made.
impl<T> std::future::IntoFuture for Answer<T> {
    type Output = T;
    type IntoFuture = BoxFuture<T>;

    fn into_future(self) -> BoxFuture<T> {
        self.0
    }
}

impl<T: Send + 'static> Call<T> {
    /// A call whose first half is `queue`.
    pub fn new(queue: impl Future<Output = Answer<T>> + Send + 'static) -> Self {
        Self { state: Half::Queue(Box::pin(queue)) }
    }

    /// A call that sends nothing and answers `answer`.
    pub fn answered(answer: T) -> Self {
        Self { state: Half::Wait(Box::pin(std::future::ready(answer))) }
    }

    /// Sends the request, and gives back the wait for its answer.
    pub async fn queue(self) -> Answer<T> {
        match self.state {
            Half::Queue(queue) => queue.await,
            Half::Wait(wait) => Answer(wait),
        }
    }
}

impl<T> std::fmt::Debug for Call<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let half = match self.state {
            Half::Queue(_) => "unsent",
            Half::Wait(_) => "sent",
        };
        f.debug_tuple("Call").field(&half).finish()
    }
}

impl<T> Future for Call<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        loop {
            match &mut self.state {
                Half::Queue(queue) => {
                    let Answer(wait) = std::task::ready!(queue.as_mut().poll(cx));
                    self.state = Half::Wait(wait);
                }
                Half::Wait(wait) => return wait.as_mut().poll(cx),
            }
        }
    }
}

/// What a request comes to when it is never sent: the run it waited in was dropped, so the
/// editor's connection is gone.
pub trait Unsent {
    /// That answer.
    fn unsent() -> Self;
}

impl<T> Unsent for Result<T, EditorError> {
    fn unsent() -> Self {
        Err(EditorError("the editor's connection closed before the request went out".to_owned()))
    }
}

impl Unsent for PermissionAnswer {
    fn unsent() -> Self {
        PermissionAnswer::Unanswered(Unanswered::Failed)
    }
}

/// The editor side of a session. What an editor does not offer needs no method: each
/// capability is off, and each request fails as not offered, unless implemented. A
/// request sends nothing before its [`Call`] is first polled.
pub trait EditorIo: Send + Sync + 'static {
    /// Whether reads go through the editor (`fs.readTextFile`).
    fn reads_files(&self) -> bool {
        false
    }
    /// Whether writes go through the editor (`fs.writeTextFile`).
    fn writes_files(&self) -> bool {
        false
    }
    /// Whether commands run in editor terminals (`terminal`).
    fn has_terminals(&self) -> bool {
        false
    }
    /// Whether the client's terminals already run commands behind Heron's walls (`heron
    /// run` says so): then a command goes to them as it is, not through the launcher.
    fn confines_terminals(&self) -> bool {
        false
    }
    /// Whether questions can be asked (`elicitation.form`).
    fn asks_questions(&self) -> bool {
        false
    }

    /// Reads a text file, unsaved changes included.
    fn read_text_file(&self, path: &Path) -> Call<Result<String, EditorError>> {
        let _ = path;
        unavailable("file reads")
    }
    /// Writes a text file (the editor creates it when missing).
    fn write_text_file(&self, path: &Path, content: String) -> Call<Result<(), EditorError>> {
        let _ = (path, content);
        unavailable("file writes")
    }

    /// Starts a command; returns the terminal id at once.
    fn terminal_create(&self, command: TerminalCommand) -> Call<Result<String, EditorError>> {
        let _ = command;
        unavailable("terminals")
    }
    /// What the terminal printed so far.
    fn terminal_output(&self, id: &str) -> Call<Result<TerminalOutput, EditorError>> {
        let _ = id;
        unavailable("terminals")
    }
    /// Waits until the command exits.
    fn terminal_wait_for_exit(&self, id: &str) -> Call<Result<ExitStatus, EditorError>> {
        let _ = id;
        unavailable("terminals")
    }
    /// Kills the command; the terminal stays valid.
    fn terminal_kill(&self, id: &str) -> Call<Result<(), EditorError>> {
        let _ = id;
        unavailable("terminals")
    }
    /// Frees the terminal; the id is invalid afterwards.
    fn terminal_release(&self, id: &str) -> Call<Result<(), EditorError>> {
        let _ = id;
        unavailable("terminals")
    }

    /// Asks the user whether the call `ask` shows may run; `timeout` bounds the wait (no
    /// answer in time is a rejection). Every editor answers it, if only by rejecting.
    fn request_permission(&self, ask: &PermissionAsk, timeout: Duration) -> Call<PermissionAnswer>;
    /// Asks the user a question, optionally with fixed choices, for the tool call `call_id`
    /// when a call asks (so the editor can show it on that call's card).
    fn ask(
        &self,
        question: &str,
        options: &[String],
        call_id: Option<&str>,
    ) -> Call<Result<QuestionAnswer, EditorError>> {
        let _ = (question, options, call_id);
        unavailable("questions")
    }

    /// Which elicitation modes an MCP server's requests may use; none unless advertised.
    fn elicitation_modes(&self) -> ElicitationModes {
        ElicitationModes::default()
    }
    /// Shows an MCP server's request to the user (only in a mode [`Self::elicitation_modes`]
    /// allows).
    fn elicit(&self, request: Elicitation) -> Call<Result<ElicitationAnswer, EditorError>> {
        let _ = request;
        unavailable("elicitation")
    }
}

/// An editor that offers nothing: tools run locally, permission requests are rejected,
/// questions fail.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEditor;

fn unavailable<T: Send + 'static>(what: &str) -> Call<Result<T, EditorError>> {
    Call::answered(Err(EditorError(format!("the editor does not offer {what}"))))
}

impl EditorIo for NoEditor {
    fn request_permission(&self, _: &PermissionAsk, _: Duration) -> Call<PermissionAnswer> {
        Call::answered(PermissionAnswer::RejectOnce)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_offered_option_means_its_answer_and_any_other_id_rejects() {
        let ids: Vec<&str> = PERMISSION_OPTIONS.iter().map(|(id, _, _)| *id).collect();
        assert_eq!(ids, ["allow_once", "allow_always", "reject_once", "reject_always"]);
        for (id, _, answer) in PERMISSION_OPTIONS {
            assert_eq!(PermissionAnswer::of_option(id), answer);
        }
        for forged in ["", "ALLOW_ONCE", "allow_once ", "allow"] {
            assert_eq!(PermissionAnswer::of_option(forged), PermissionAnswer::RejectOnce, "{forged:?}");
        }
    }
}
