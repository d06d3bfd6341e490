//! What a submitted prompt becomes ([`Session::submit`]): a turn queued in the session, one
//! of Heron's own commands for the caller to run without the model, or a refusal. Both
//! protocol versions submit through here, so a slash command is recognised in one place
//! and the adapters only convert.

use std::sync::PoisonError;

use tokio::sync::oneshot;

use super::outbound::{Origin, Place, Run};
use super::{Queued, Session, Shown, Work, checkpoints, commands, mcp_commands, queue_budget};
use crate::extensions::Expansion;
use crate::types::{PromptInput, StopReason, UserContent};

/// What a submitted prompt became.
#[derive(Debug)]
pub enum Submitted {
    /// Queued as a turn: it streams on its run and answers like a prompt. Work that
    /// records no user message of its own (a compaction, a rewind) carries the line as typed
    /// on its run ([`super::outbound::Run::echo`]): a client that shows only what the agent
    /// reports needs it shown.
    Turn {
        /// The queued turn.
        queued: Queued,
    },
    /// One of Heron's own commands (`/mcp`, `/goal`, ...), for the caller to run without the
    /// model, at once; its reply goes out at its place, after what runs now.
    Local {
        /// The command and its argument.
        invocation: commands::Invocation,
        /// The line as typed.
        line: String,
        /// Where the reply goes among the session's runs.
        place: Place,
    },
    /// Refused at once (a custom command that cannot expand, a rewind target that does not
    /// parse): the line as typed, and the reply for the user, which goes out at its place.
    Refused {
        /// The line as typed.
        line: String,
        /// Why, for the user.
        reason: String,
        /// Where the reply goes among the session's runs.
        place: Place,
    },
}

/// What a prompt of one text block asks for.
enum Recognised {
    Local(commands::Invocation),
    Compact(String),
    Rewind(checkpoints::Target),
    Custom(Expansion),
    Refused(String),
    Prompt,
}

impl Session {
    /// Submits a prompt: one text block that names one of Heron's commands runs without the
    /// model (`Local`) or is refused; `/compact`, `/undo`, `/rewind N`, a custom command, a
    /// skill or an MCP server's prompt queue like a prompt; anything else is queued for the
    /// model. `shown`: for a client that shows only what the agent reports, the id the
    /// prompt's user message is sent back with when its turn starts (see
    /// the user message it records).
    pub fn submit(&self, input: Vec<PromptInput>, shown: Option<String>) -> Submitted {
        let as_shown = |echo: Option<String>| Shown { echo, id: shown.clone(), said: false };
        let line = match input.as_slice() {
            [PromptInput::Content(UserContent::Text { text })] => text.clone(),
            _ => return Submitted::Turn { queued: self.queue(Work::Prompt(input), as_shown(None)) },
        };
        let turn = |queued| Submitted::Turn { queued };
        match self.recognise(&line) {
            // Past the queue budget, a reply's place is refused like a prompt.
            Recognised::Local(invocation) => match self.place(&line) {
                Ok(place) => Submitted::Local { invocation, line, place },
                Err(full) => turn(Queued::refused(full)),
            },
            Recognised::Refused(reason) => match self.place(&line) {
                Ok(place) => Submitted::Refused { line, reason, place },
                Err(full) => turn(Queued::refused(full)),
            },
            // A compaction and a rewind record no user message: the line is echoed.
            Recognised::Compact(instructions) => {
                turn(self.queue(Work::Compact(instructions), as_shown(Some(line))))
            }
            Recognised::Rewind(target) => turn(self.queue(Work::Rewind(target), as_shown(Some(line)))),
            Recognised::Custom(expansion) => turn(self.queue(Self::command_work(expansion), as_shown(None))),
            Recognised::Prompt => turn(self.queue(Work::Prompt(input), as_shown(None))),
        }
    }

    /// A place for a reply among the session's runs, taken now: behind the runs already
    /// started (the one going out, usually), ahead of any started later, so it waits for
    /// the running turn but not for the prompts queued behind it. A reply made outside the
    /// turns so never lands inside one's stream, where a client without message ids shows
    /// it as part of the turn's text. What waits there counts in the queue budget, by its
    /// `line` (a reply names no more of it) and a share for the place.
    fn place(&self, line: &str) -> Result<Place, queue_budget::Full> {
        let held = queue_budget::admit_bytes(&self.queued_bytes, line.len() + queue_budget::PLACE_BYTES)?;
        let (reply, reached) = oneshot::channel();
        let run = Run::ended(Origin::Placed(reply), Ok(StopReason::EndTurn));
        // Closed, or nobody will ever read the stream: the run is dropped with its reply's
        // sender, and the place is reached at once.
        if let Some(places) = self.places.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            let _ = places.send(Box::new(run));
        }
        Ok(Place { reached, _held: held })
    }

    /// The work a custom command's expansion queues: its prompt, or the MCP prompt to fetch
    /// when its turn starts.
    fn command_work(expansion: Expansion) -> Work {
        match expansion.mcp {
            Some(call) => Work::McpPrompt { call, invoked: expansion.invoked },
            None => {
                let prompt = vec![PromptInput::Content(UserContent::Text { text: expansion.prompt })];
                Work::Command { prompt, invoked: expansion.invoked }
            }
        }
    }

    /// What a prompt of one text block, `text`, asks for.
    fn recognise(&self, text: &str) -> Recognised {
        if let Some(invocation) = commands::parse(text) {
            return match invocation.name.as_str() {
                commands::COMPACT => Recognised::Compact(invocation.argument),
                commands::UNDO | commands::REWIND => {
                    match checkpoints::Target::parse(&invocation.name, &invocation.argument) {
                        Ok(target) => Recognised::Rewind(target),
                        Err(reason) => Recognised::Refused(reason),
                    }
                }
                _ => Recognised::Local(invocation),
            };
        }
        match self.expand(text) {
            Some(Ok(expansion)) => Recognised::Custom(expansion),
            Some(Err(reason)) => Recognised::Refused(reason),
            None => Recognised::Prompt,
        }
    }

    /// The custom command, skill or MCP prompt `text` invokes, expanded, when it is exactly
    /// one (`/name rest`): `None` for anything else, an `Err` (a reply for the user) when it
    /// is refused.
    fn expand(&self, text: &str) -> Option<Result<Expansion, String>> {
        let invocation = commands::split(text)?;
        let catalog = self.catalog.get();
        if let Some(command) = catalog.find(&invocation.name) {
            return Some(command.expand(&invocation.argument));
        }
        if let Some(skill) = catalog.skill_command(&invocation.name) {
            return Some(skill.expand(&invocation.argument));
        }
        mcp_commands::expand(&self.mcp.prompts(), &invocation)
    }
}
