//! A session's outbound order: every job the actor runs (a prompt, a compaction, a rewind,
//! an inbox item, a reload queued behind a turn) reaches whoever serves the session as one
//! [`Run`], in the order the actor runs them, on one stream ([`Outbound`]). A run is its
//! updates, then how it ended. The server forwards each run to its end before it takes the
//! next, so one run's updates can never follow the next run's, nor come after the answer
//! that ends their prompt; the actor never waits for the server to do it. What is answered
//! outside the turns (one of Heron's own commands, a refusal) takes a [`Place`] on the same
//! stream when it is asked, so its reply goes out between runs, never inside one.

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::DropGuard;

use super::PromptResult;
use super::update::TurnUpdate;
use crate::types::TurnOutcome;

/// The most text of a run's agent messages an asker that wants it is handed
/// ([`Ending::said`]): the messages themselves streamed whole.
pub const SAID_CAP: usize = 64 * 1024;

/// Where the actor sends runs. Boxed: a tokio channel allocates its first block of 32
/// messages when it is made, and every open session has one, idle or not.
pub(super) type Runs = mpsc::UnboundedSender<Box<Run>>;

/// The runs of one session, in the order they run. Ends when the session closes.
#[derive(Debug)]
pub struct Outbound(pub(super) mpsc::UnboundedReceiver<Box<Run>>);

impl Outbound {
    /// The next run, once the actor has started it; `None` once the session is closed.
    pub async fn next(&mut self) -> Option<Run> {
        self.0.recv().await.map(|run| *run)
    }
}

/// One job the actor ran or is running: its updates, in order, then how it ended.
#[derive(Debug)]
pub struct Run {
    pub(super) origin: Origin,
    pub(super) updates: mpsc::UnboundedReceiver<TurnUpdate>,
    pub(super) ended: oneshot::Receiver<PromptResult>,
    /// Taken when the run is done with: an inbox delete waits for it.
    pub(super) forwarded: Option<DropGuard>,
    seen: Seen,
}

/// Where a run came from.
#[derive(Debug)]
pub(super) enum Origin {
    /// A request of the editor's, waiting for how it ended.
    Asked(Asker),
    /// An item of the session's inbox: nobody waits on it.
    Inbox,
    /// A reload of the session's extensions that was queued behind a turn: its asker was
    /// answered at once, so its outcome is told to the editor when the run is reached.
    Reload,
    /// A place for a reply made outside the turns ([`Place`]): its asker sends it when the
    /// run is reached.
    Placed(oneshot::Sender<Ending>),
}

/// What a run is, for whoever forwards it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A prompt, a compaction or a rewind the editor asked for.
    Asked,
    /// An inbox item's turn.
    Inbox,
    /// A queued reload that ended: tell the editor its outcome (the session's status has it).
    Reload,
    /// A place for a reply made outside the turns: no updates, and nothing to say around
    /// them; its asker sends the reply once handed on.
    Placed,
}

/// What the serving side saw of a run on its way, for its asker.
#[derive(Debug, Default)]
struct Seen {
    outcome: Option<TurnOutcome>,
    said: String,
}

impl Run {
    /// A run with no updates that has already ended (a queued reload's).
    pub(super) fn ended(origin: Origin, result: PromptResult) -> Self {
        let (_, updates) = mpsc::unbounded_channel();
        let (ended, result_rx) = oneshot::channel();
        let _ = ended.send(result);
        Self::new(origin, updates, result_rx, None)
    }

    pub(super) fn new(
        origin: Origin,
        updates: mpsc::UnboundedReceiver<TurnUpdate>,
        ended: oneshot::Receiver<PromptResult>,
        forwarded: Option<DropGuard>,
    ) -> Self {
        Self { origin, updates, ended, forwarded, seen: Seen::default() }
    }

    /// For a run the editor asked for, the line to show as the user's message when the
    /// session records none (a `/compact`), with the id it was given (if it was).
    pub fn echo(&self) -> Option<(&str, Option<&str>)> {
        match &self.origin {
            Origin::Asked(asker) => asker.echo.as_deref().map(|line| (line, asker.shown.as_deref())),
            Origin::Inbox | Origin::Reload | Origin::Placed(_) => None,
        }
    }

    /// How many of the run's updates wait to be read (a slow editor's backlog).
    pub fn waiting(&self) -> usize {
        self.updates.len()
    }

    /// What the run is.
    pub fn kind(&self) -> Kind {
        match self.origin {
            Origin::Asked(_) => Kind::Asked,
            Origin::Inbox => Kind::Inbox,
            Origin::Reload => Kind::Reload,
            Origin::Placed(_) => Kind::Placed,
        }
    }

    /// The run's next update; `None` once it sent its last, or once its asker gave up on
    /// it (a cancelled request is answered already: nothing of its turn may follow).
    pub async fn next(&mut self) -> Option<TurnUpdate> {
        self.accepted().await;
        let update = self.updates.recv().await?;
        if matches!(&self.origin, Origin::Asked(asker) if asker.reply.is_closed()) {
            return None;
        }
        match &update {
            TurnUpdate::Outcome(outcome) => self.seen.outcome = Some(outcome.clone()),
            TurnUpdate::MessageChunk { text, .. } if self.wants_said() => {
                append_bounded(&mut self.seen.said, text);
            }
            _ => {}
        }
        Some(update)
    }

    /// Waits, the first time, until the asker has told the editor the prompt was accepted
    /// (when it is answered at once, as over ACP v2), or let that go.
    async fn accepted(&mut self) {
        if let Origin::Asked(asker) = &mut self.origin
            && let Some(accepted) = asker.accepted.take()
        {
            let _ = accepted.await;
        }
    }

    fn wants_said(&self) -> bool {
        matches!(&self.origin, Origin::Asked(asker) if asker.wants_said)
    }

    /// How the run ended, once its updates are through (what was not read is dropped),
    /// and who to tell.
    pub async fn end(mut self) -> (PromptResult, Ended) {
        self.accepted().await;
        self.updates.close();
        while self.updates.recv().await.is_some() {}
        let result = (&mut self.ended).await.unwrap_or(Err(super::PromptError::Closed));
        (result, Ended { run: self })
    }
}

/// A run that ended, and who to tell.
#[derive(Debug)]
pub struct Ended {
    run: Run,
}

impl Ended {
    /// Tells whoever asked for the run that it ended with `result`, and waits until they
    /// have answered the editor (or gave up), so what the next run sends cannot overtake
    /// that answer.
    pub async fn hand_on(self, result: PromptResult) {
        let Run { origin, seen, forwarded, .. } = self.run;
        let reply = match origin {
            Origin::Asked(asker) => Some(asker.reply),
            Origin::Placed(reply) => Some(reply),
            Origin::Inbox | Origin::Reload => None,
        };
        if let Some(reply) = reply {
            let (sent, answered) = oneshot::channel();
            let ending = Ending { result, outcome: seen.outcome, said: seen.said, sent: Sent(Some(sent)) };
            if reply.send(ending).is_ok() {
                let _ = answered.await;
            }
        }
        drop(forwarded);
    }
}

/// A reply's place in the session's outbound order, taken when it was asked for: reached
/// once every run before it is out. Send the reply then, and signal the [`Sent`] once its
/// answer is queued: the run after it waits for that.
/// While it waits, what the reply holds counts in the session's queue budget.
#[derive(Debug)]
pub struct Place {
    pub(super) reached: oneshot::Receiver<Ending>,
    pub(super) _held: super::queue_budget::Held,
}

impl Place {
    /// Waits until the runs before this place are out (at once if the session closed or
    /// nobody will ever serve it); what follows waits for the [`Sent`] returned.
    pub async fn reached(self) -> Sent {
        self.reached.await.map(|ending| ending.sent).unwrap_or_default()
    }
}

/// The asking side of a run: where its ending goes, and what the run shows for it.
#[derive(Debug)]
pub(super) struct Asker {
    pub(super) reply: oneshot::Sender<Ending>,
    /// The line echoed as the user's message (see [`Run::echo`]).
    pub(super) echo: Option<String>,
    /// The id the prompt's user message is shown under, when the client was given one.
    pub(super) shown: Option<String>,
    /// Whether the asker wants the run's agent text ([`Ending::said`]).
    pub(super) wants_said: bool,
    /// Resolves once the asker's acceptance of the prompt is out (or it let that go).
    pub(super) accepted: Option<oneshot::Receiver<()>>,
}

/// How an asked-for run ended, handed to its asker once its updates are out.
#[derive(Debug)]
pub struct Ending {
    /// How it ended.
    pub result: PromptResult,
    /// How the turn went, when it ended `end_turn`.
    pub outcome: Option<TurnOutcome>,
    /// Its agent text, up to [`SAID_CAP`] bytes, for an asker that wanted it (a rewind).
    pub said: String,
    /// Signal it once the answer is queued for the editor.
    pub sent: Sent,
}

impl Ending {
    /// An ending that never ran (its prompt was refused before it queued).
    pub(super) fn never_ran(result: PromptResult) -> Self {
        Self { result, outcome: None, said: String::new(), sent: Sent(None) }
    }

    /// True when the prompt never ran, so no run reported it: it was refused as it was
    /// queued (its queue was full, or the session was closed).
    pub fn refused(&self) -> bool {
        self.sent.0.is_none()
    }
}

/// An answer is queued for the editor: what waited for it may go out (a prompt's ending:
/// the session's next run; a v2 prompt's acceptance: its own run). The default waits for
/// nothing.
#[derive(Debug, Default)]
pub struct Sent(Option<oneshot::Sender<()>>);

impl Sent {
    /// The answer is queued for the editor.
    pub fn done(self) {
        if let Some(sent) = self.0 {
            let _ = sent.send(());
        }
    }

    pub(super) fn new() -> (Self, oneshot::Receiver<()>) {
        let (sent, done) = oneshot::channel();
        (Self(Some(sent)), done)
    }
}

/// Appends `text` to `said` up to [`SAID_CAP`] bytes, cut on a character boundary.
fn append_bounded(said: &mut String, text: &str) {
    let room = SAID_CAP.saturating_sub(said.len());
    let mut end = text.len().min(room);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    said.push_str(&text[..end]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_said_is_bounded_on_a_character_boundary() {
        let mut said = "a".repeat(SAID_CAP - 1);
        append_bounded(&mut said, "éé");
        assert_eq!(said.len(), SAID_CAP - 1, "a split character is left out whole");
        let mut short = String::from("Rewound");
        append_bounded(&mut short, " the files");
        assert_eq!(short, "Rewound the files");
    }

    #[tokio::test]
    async fn an_asker_hears_the_end_and_the_next_run_waits_for_its_answer() {
        let (updates, rx) = mpsc::unbounded_channel();
        let (ended_tx, ended) = oneshot::channel();
        let (reply, mut heard) = oneshot::channel();
        let asker = Asker { reply, echo: None, shown: None, wants_said: true, accepted: None };
        let mut run = Run::new(Origin::Asked(asker), rx, ended, None);
        let held = crate::session::update::Held::default();
        updates
            .send(TurnUpdate::MessageChunk { message_id: "m".into(), text: "done".into(), held })
            .expect("open");
        drop(updates);
        ended_tx.send(Ok(crate::types::StopReason::EndTurn)).expect("waiting");
        assert!(matches!(run.next().await, Some(TurnUpdate::MessageChunk { .. })));
        let (result, ended) = run.end().await;
        assert!(matches!(result, Ok(crate::types::StopReason::EndTurn)));
        let handing = tokio::spawn(ended.hand_on(result));
        let ending = (&mut heard).await.expect("told");
        assert_eq!(ending.said, "done");
        tokio::task::yield_now().await;
        assert!(!handing.is_finished(), "the run is handed on only once its answer is sent");
        ending.sent.done();
        handing.await.expect("handed on");
    }
}
