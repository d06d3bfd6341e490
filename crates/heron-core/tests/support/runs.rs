//! Plays the editor's connection for a session driven directly: takes the session's runs
//! in order, sends the requests a turn makes to the editor, and answers each prompt as an adapter would.

use std::time::Duration;

use heron_core::session::outbound::{Outbound, Run};
use heron_core::session::update::TurnUpdate;
use heron_core::session::{PromptResult, Queued, Session};

/// A session's runs, taken from it.
pub struct Runs(Outbound);

impl Runs {
    /// Serves `session` (it must not be served yet).
    pub fn of(session: &Session) -> Runs {
        Runs(session.outbound().expect("the session is not served yet"))
    }

    /// The next run, once the actor starts it.
    pub async fn run(&mut self) -> Run {
        tokio::time::timeout(Duration::from_secs(10), self.0.next())
            .await
            .expect("a run starts")
            .expect("the session is open")
    }

    /// The next run, to its end: its updates (its requests sent), and how `queued` ended.
    pub async fn next(&mut self, queued: Queued) -> (Vec<TurnUpdate>, PromptResult) {
        let run = self.run().await;
        finish(run, queued).await
    }
}

/// Reads `run` to its end, sending its requests to the editor; hands its end to `queued` and answers it.
pub async fn finish(mut run: Run, queued: Queued) -> (Vec<TurnUpdate>, PromptResult) {
    drop(queued.accepted);
    let mut seen = Vec::new();
    while let Some(update) =
        tokio::time::timeout(Duration::from_secs(10), run.next()).await.expect("the turn streams")
    {
        match update {
            TurnUpdate::Request(request) => request.send().await,
            update => seen.push(update),
        }
    }
    let (result, ended) = run.end().await;
    let handing = tokio::spawn(ended.hand_on(result));
    let ending = queued.result.await.expect("answered");
    ending.sent.done();
    handing.await.expect("handed on");
    (seen, ending.result)
}
