//! One prompt turn: model requests, streamed text and thought, tool calls, until the model
//! stops, the turn runs out of requests, or it is cancelled. In goal mode the turn goes on
//! with continuations until the goal ends, is paused, or the continuations run out
//! (`pursuit`). Steering accepted for the turn reaches the model before its next request,
//! recorded in the same store write that marks it applied (`super::inbox::steer`), and each
//! request is first fitted to the model's context window (`compact`).
//!
//! Every finished message, tool call and result is stored before the turn moves on, so a
//! crash loses at most the message still streaming. A cancelled turn ends `Cancelled`,
//! never as an error, after recording what it finished. The tool calls of one model step
//! run as a batch (`batch`).
//!
//! The turn's machinery lives in this room: the model's response (`response`), the
//! conversation as the model is sent it (`history`, `context`, `clip`), fitting it to the
//! window (`compact`), goal mode (`pursuit`), bounds on what the model sends (`limits`,
//! `reply_calls`), the permission gate (`permission`) and the readable transcript
//! (`transcript`).

mod batch;
pub(super) mod clip;
pub(super) mod compact;
pub(super) mod context;
pub(super) mod history;
pub(super) mod limits;
pub(super) mod permission;
pub(super) mod pursuit;
pub(super) mod reply_calls;
pub(super) mod response;
mod rewind;
pub(super) mod side_effects;
pub(super) mod transcript;
pub(crate) mod working;

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::history::Images;
use self::limits::{Limits, UNSTORED_BYTES};
use self::permission::Approvals;
use self::transcript::Transcript;
use super::event::Event;
use super::inbox::steer::{Pending, Steers};
use super::settings::{Mode, Settings};
use super::status::Board;
use super::tokens::{self, Calibration};
use super::update::{ChunkBudget, TurnUpdate};
use crate::llm::registry::ResolvedProvider;
use crate::llm::{ModelRequest, ProviderError, ToolCallRequest, Usage};
use crate::tools::{Registry, ToolEnv, finish_goal};
use crate::types::{StopReason, TurnOutcome, UsageReport, UserContent};
use heron_store::Store;

/// Why a turn failed after it started.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The model request failed for good.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The store refused a write; nothing more can be recorded.
    #[error("the session store failed: {0}")]
    Store(String),
    /// Even compacted, the next request would not fit the model's context window.
    #[error(
        "the conversation does not fit the model's context window even after compacting: the next request \
         needs about {needed} tokens, and a request may fill {limit} of the window's {window} (compact_at). \
         Start a new session, or switch to a model with a larger context window"
    )]
    ContextFull {
        /// The estimated tokens of the request.
        needed: u64,
        /// The model's context window, in tokens.
        window: u64,
        /// What one request may take of it.
        limit: u64,
    },
    /// The model did not write a usable summary.
    #[error("compacting the conversation failed: {0}")]
    Compaction(String),
    /// The session's history, or that of every open session, grew past its budget during
    /// the turn: it stops before its next model request (`history_budget`).
    #[error("{0}")]
    HistoryFull(super::history_budget::HistoryFull),
}

/// What a session's turns carry from one to the next: the conversation so far, what it
/// has cost, and the images it refers to (read once).
#[derive(Debug, Default)]
pub(super) struct Carried {
    /// Every stored event, in order.
    pub(super) history: Vec<Event>,
    /// Cost so far in the session.
    pub(super) cost: f64,
    /// Tokens so far in the session.
    pub(super) tokens: crate::types::TokenTotals,
    /// The currency of the cost, once a priced request counted.
    pub(super) currency: Option<String>,
    /// Whether every request so far had a price.
    pub(super) cost_complete: bool,
    /// The history's images, as read so far.
    pub(super) images: Images,
    /// The session's readable transcript, kept in step with the history.
    pub(super) transcript: Transcript,
    /// How request estimates turn into tokens for this session's model, as its server counted.
    pub(super) calibration: Calibration,
}

/// Everything a turn needs: what it is given, what it shares with its session, where its
/// output goes, and what it carries from turn to turn.
pub(super) struct Turn {
    /// What the turn is given: its model, tools, settings and bounds.
    pub(super) policy: TurnPolicy,
    /// What it shares with its session.
    pub(super) shared: TurnShared,
    /// Where its tools run and its updates go.
    pub(super) io: TurnIo,
    /// The conversation, its cost and its images; the turn appends to them.
    pub(super) carried: Carried,
    /// Events already in the history (and streamed to the editor) but not yet stored: a
    /// response's finished message and thought, which go to the store together with the
    /// event after them (a tool call, the turn's end) in one transaction and one
    /// transcript append. Nothing is answered before they are stored. Each is kept as its
    /// kind and encoded text only: the history holds the event itself.
    pub(super) unstored: Vec<(&'static str, Arc<str>)>,
    /// The workspace before the turn's first command, once one is about to run.
    pub(super) before_commands: Option<side_effects::BeforeCommands>,
}

/// What a turn is given when it starts, fixed for the turn.
pub(super) struct TurnPolicy {
    /// The model.
    pub(super) provider: ResolvedProvider,
    /// The tools.
    pub(super) tools: Arc<Registry>,
    /// The settings when the turn started.
    pub(super) settings: Settings,
    /// How long to wait for a permission answer.
    pub(super) permission_timeout: std::time::Duration,
    /// Continuations one goal-mode prompt may start.
    pub(super) max_goal_continuations: u32,
    /// Bounds on what the model may send.
    pub(super) limits: Limits,
    /// Whether the prompt is shown as a user message: not when the editor sent it (it shows
    /// it already), yes when it came from elsewhere (the inbox).
    pub(super) echo_prompt: bool,
    /// The id the prompt's user message takes, when the client was given one on accepting it.
    pub(super) prompt_message_id: Option<String>,
    /// Text the user appends to the system prompt (`--append-system-prompt`).
    pub(super) append_system_prompt: Option<Arc<str>>,
    /// What the system prompt says of the session's skills, when it has any.
    pub(super) skills: Option<Arc<str>>,
    /// The command whose success verifies changes (`verify_command`), if the config names one.
    pub(super) verify_command: Option<Arc<str>>,
    /// The custom command line the prompt is the expansion of, when it is one (stored with
    /// the user message, which the conversation then shows as typed).
    pub(super) command: Option<String>,
}

/// What a turn shares with its session: the store and the state the adapter also reads.
pub(super) struct TurnShared {
    /// The session.
    pub(super) session_id: String,
    /// Where events go.
    pub(super) store: Store,
    /// What the user said "always" to in this session.
    pub(super) approvals: Arc<std::sync::Mutex<Approvals>>,
    /// The session's status (its goal and usage live there).
    pub(super) status: Arc<Board>,
    /// Steering for this turn; the actor opens it before the turn runs and settles it after.
    pub(super) steers: Arc<Steers>,
    /// The session's cancellable calls; each of this turn's calls is registered from the moment
    /// the editor is shown it until its result is recorded.
    pub(super) calls: Arc<super::calls::RunningCalls>,
    /// What the session's history holds, which each recorded event adds to.
    pub(super) history: Arc<super::history_budget::HistoryUse>,
}

/// Where a turn's tools run and where its updates go.
pub(super) struct TurnIo {
    /// Where tools run.
    pub(super) env: ToolEnv,
    /// Where live updates go (the editor).
    pub(super) updates: mpsc::UnboundedSender<TurnUpdate>,
    /// Streamed text in flight to the editor.
    pub(super) budget: ChunkBudget,
}

/// How a turn asks the model, fixed when it starts.
pub(super) struct Asking {
    pub(super) system: String,
    pub(super) effort: Option<String>,
    read_only: bool,
    /// Whether the turn works toward the session's goal.
    pursuing: bool,
}

impl Asking {
    /// How a turn under `settings` asks; `skills` is what the session's skills say of
    /// themselves, fixed until a reload.
    pub(super) fn of(settings: &Settings, append: Option<&str>, skills: Option<&str>) -> Asking {
        let read_only = settings.mode == Mode::Plan;
        let pursuing = settings.mode == Mode::Goal;
        let mut system = super::working::SYSTEM_PROMPT.trim_end().to_owned();
        if let Some(skills) = skills {
            system.push_str("\n\n");
            system.push_str(skills);
        }
        // Before the mode's text, so that a mode change leaves more of the prefix cached.
        if let Some(extra) = append.filter(|t| !t.trim().is_empty()) {
            system.push_str("\n\n");
            system.push_str(extra);
        }
        for (on, text) in [(read_only, super::working::PLAN_PROMPT), (pursuing, super::working::GOAL_PROMPT)]
        {
            if on {
                system.push_str("\n\n");
                system.push_str(text.trim_end());
            }
        }
        let effort = settings.effort.level().map(str::to_owned);
        Asking { system, effort, read_only, pursuing }
    }
}

impl Turn {
    pub(super) fn cancel(&self) -> &CancellationToken {
        &self.io.env.cancel
    }

    pub(super) async fn record(&mut self, event: Event) -> Result<(), TurnError> {
        self.record_shown(event, true).await
    }

    /// Records `event`; `shown` says whether the editor is sent it too. The events not yet
    /// stored go first, in the same transaction.
    async fn record_shown(&mut self, event: Event, shown: bool) -> Result<(), TurnError> {
        let payload = encode(&event)?;
        self.store_with(Some((event.kind(), payload.clone()))).await?;
        self.recorded(event, payload, shown).await;
        Ok(())
    }

    /// Puts a finished message or thought into the history now and into the store with the
    /// next event (see [`Turn::unstored`]). The editor saw it already, as chunks.
    ///
    /// A long reply is not held encoded whole until that next event: once the waiting
    /// events hold [`UNSTORED_BYTES`], they are stored on their own, so the encoded text
    /// held at once stays a few pieces while the history holds the reply (a 20 MiB reply
    /// was held twice at the end). A crash between leaves the stored message without the
    /// turn's end, which a load reads as any turn cut short.
    pub(super) async fn record_with_next(&mut self, event: Event) -> Result<(), TurnError> {
        let payload = encode(&event)?;
        self.shared.history.grow(payload.len());
        self.unstored.push((event.kind(), payload));
        self.carried.history.push(event);
        let waiting: usize = self.unstored.iter().map(|(_, payload)| payload.len()).sum();
        if waiting >= UNSTORED_BYTES {
            self.store_with(None).await?;
        }
        Ok(())
    }

    /// Stores the events waiting for the next one, when the turn has no next event (it
    /// failed, or something else must be stored after them first).
    pub(super) async fn store_unstored(&mut self) -> Result<(), TurnError> {
        if self.unstored.is_empty() {
            return Ok(());
        }
        self.store_with(None).await
    }

    /// Stores the waiting events and then `next`, if any, in one transaction.
    async fn store_with(&mut self, next: Option<(&str, Arc<str>)>) -> Result<(), TurnError> {
        let waiting = self.unstored.iter().map(|(kind, payload)| (*kind, payload.clone()));
        let batch = waiting.chain(next).map(|(kind, payload)| (kind.to_owned(), payload)).collect();
        self.shared
            .store
            .append_events_json(&self.shared.session_id, batch)
            .await
            .map_err(|e| TurnError::Store(e.to_string()))?;
        self.stored_unstored().await;
        Ok(())
    }

    /// The waiting events were stored: they go to the transcript, which holds the history
    /// before them.
    async fn stored_unstored(&mut self) {
        if self.unstored.is_empty() {
            return;
        }
        let waiting = std::mem::take(&mut self.unstored);
        let before = self.carried.history.len() - waiting.len();
        let lines = waiting.into_iter().map(|(_, payload)| payload).collect();
        self.carried.transcript.append_all(&self.carried.history[..before], lines).await;
    }

    /// What follows an event's store write: the transcript, the editor, the history.
    async fn recorded(&mut self, event: Event, payload: Arc<str>, shown: bool) {
        self.shared.history.grow(payload.len());
        self.carried.transcript.append(&self.carried.history, payload).await;
        // Finished messages and thoughts already streamed as chunks; the rest shows as it is.
        if shown && !matches!(event, Event::AgentMessage { .. } | Event::AgentThought { .. }) {
            // The editor may be gone; the turn still finishes and records.
            let _ = self.io.updates.send(TurnUpdate::Event(event.clone()));
        }
        self.carried.history.push(event);
    }

    pub(super) fn live(&self, update: TurnUpdate) {
        let _ = self.io.updates.send(update);
    }

    /// Runs the turn for `prompt` and says how it ended.
    pub(super) async fn run(mut self, prompt: Vec<UserContent>) -> (Result<StopReason, TurnError>, Carried) {
        let outcome = self.run_inner(prompt).await;
        let outcome = match outcome {
            Err(TurnError::Provider(ProviderError::Cancelled)) => Ok(StopReason::Cancelled),
            _ if self.cancel().is_cancelled() => Ok(StopReason::Cancelled),
            other => other,
        };
        if let Ok(stop_reason) = outcome {
            self.record_command_changes().await;
            let _ = self.record(Event::TurnEnded { stop_reason }).await;
        }
        // A failed turn has no end event: what it streamed is stored on its own.
        if let Err(err) = self.store_unstored().await {
            tracing::warn!(session = %self.shared.session_id, %err, "cannot store the turn's last message");
        }
        (outcome, self.carried)
    }

    async fn run_inner(&mut self, prompt: Vec<UserContent>) -> Result<StopReason, TurnError> {
        let start = self.carried.history.len();
        let pursuing = self.policy.settings.mode == Mode::Goal;
        if pursuing {
            self.adopt_goal(&prompt).await?;
        }
        // What the model reads of its surroundings opens the prompt, when it is new or changed.
        self.refresh_context().await?;
        let message_id =
            self.policy.prompt_message_id.take().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let command = self.policy.command.take();
        self.record_shown(
            Event::UserMessage { message_id, content: prompt, command },
            self.policy.echo_prompt,
        )
        .await?;
        let asking = Asking::of(
            &self.policy.settings,
            self.policy.append_system_prompt.as_deref(),
            self.policy.skills.as_deref(),
        );

        let mut continuations = 0;
        loop {
            let stop = self.steps(&asking).await?;
            if stop != StopReason::EndTurn {
                return Ok(stop);
            }
            if pursuing && self.goal_wants_more() {
                if continuations >= self.policy.max_goal_continuations {
                    return Ok(StopReason::MaxTurnRequests);
                }
                continuations += 1;
                self.history_fits()?;
                self.continue_goal().await?;
                continue;
            }
            // Steering that arrived as the model finished still gets an answer.
            match self.shared.steers.close().await {
                Ok(()) => {
                    self.conclude(start).await?;
                    return Ok(StopReason::EndTurn);
                }
                Err(late) => {
                    self.history_fits()?;
                    for steer in late {
                        self.record_steer(steer).await?;
                    }
                }
            }
        }
    }

    /// With the `delivery` preset, reports how the turn whose events begin at `start`
    /// ended: `paused`, with a host-written line the user and the model both read, when it
    /// changed files nothing verified; else `completed`. Other presets report nothing.
    async fn conclude(&mut self, start: usize) -> Result<(), TurnError> {
        if self.policy.settings.preset != super::settings::Preset::Delivery {
            return Ok(());
        }
        let events = self.carried.history.get(start..).unwrap_or_default();
        let outcome = super::outcome::assess(events, self.policy.verify_command.as_deref());
        if let TurnOutcome::Paused { reason } = &outcome {
            let (message_id, text) = (uuid::Uuid::new_v4().to_string(), super::outcome::paused_note(reason));
            // Written by Heron, not streamed by the model: one chunk, small, outside the budget.
            let held = super::update::Held::default();
            self.live(TurnUpdate::MessageChunk { message_id: message_id.clone(), text: text.clone(), held });
            self.record(Event::AgentMessage { message_id, text }).await?;
        }
        self.live(TurnUpdate::Outcome(outcome));
        Ok(())
    }

    /// Model requests and their tool calls until the model stops, the requests run out, or
    /// the goal this turn pursues is paused (after the step that was running).
    async fn steps(&mut self, asking: &Asking) -> Result<StopReason, TurnError> {
        let max_requests = self.policy.settings.preset.max_turn_requests();
        for _ in 0..max_requests {
            if self.cancel().is_cancelled() {
                return Ok(StopReason::Cancelled);
            }
            let pending = self.shared.steers.pending().await.map_err(|e| TurnError::Store(e.to_string()))?;
            for steer in pending {
                self.record_steer(steer).await?;
            }
            let tools = self.tool_specs(asking);
            let mut refused = false;
            let response = loop {
                let request = ModelRequest {
                    model: self.policy.provider.model.clone(),
                    messages: self.fitted(asking, &tools).await?,
                    tools: tools.clone(),
                    effort: asking.effort.clone(),
                    max_tokens: self.policy.limits.max_reply_tokens,
                };
                let estimate = tokens::estimate(&request.messages, &request.tools);
                self.carried.calibration.sending(estimate);
                match self.stream_response(request).await {
                    // The server counts tokens differently than the estimate: knowing now what
                    // size it refused, the request is compacted and sent once more.
                    Err(TurnError::Provider(err))
                        if !refused
                            && err.is_context_overflow()
                            && self.carried.calibration.overflowed(self.policy.provider.context_window) =>
                    {
                        refused = true;
                    }
                    // Refused for what it holds (too long with no window configured to
                    // compact to, or compacting did not help; malformed for the server): a
                    // prompt no request has read is left out of later ones, or every later
                    // prompt would carry it and fail the same way.
                    Err(TurnError::Provider(err)) if err.refuses_the_request() => {
                        self.leave_unread_prompts_out(asking, &tools, estimate).await?;
                        return Err(TurnError::Provider(err));
                    }
                    other => break other?,
                }
            };
            if let Some(stop) = response.stop {
                return Ok(stop);
            }
            self.run_tools(response.tool_calls, &response.refused, asking).await?;
            if asking.pursuing && self.goal_paused() {
                return Ok(StopReason::EndTurn);
            }
            self.history_fits()?;
        }
        Ok(StopReason::MaxTurnRequests)
    }

    /// Whether the turn may ask the model again: not once the session's history, or that
    /// of every open session, has grown past its budget. The actor checks before a turn
    /// starts; this holds a running turn to the budget plus one request and its tools.
    fn history_fits(&self) -> Result<(), TurnError> {
        self.shared.history.check().map_err(TurnError::HistoryFull)
    }

    /// The tools a request of this turn offers.
    pub(super) fn tool_specs(&self, asking: &Asking) -> Vec<crate::llm::ToolSpec> {
        let mut tools = self.policy.tools.specs(asking.read_only);
        if !asking.pursuing {
            tools.retain(|t| t.name != finish_goal::NAME);
        }
        tools
    }

    /// Applies a steer: records it as a user message, which the model sees at its next
    /// request, in the store write that marks it applied. One withdrawn meanwhile (deleted
    /// from the inbox) is skipped.
    async fn record_steer(&mut self, steer: Pending) -> Result<(), TurnError> {
        let content = match steer.input {
            Ok(input) => super::attachments::save(&self.io.env.cwd, input).await.unwrap_or_else(|reason| {
                vec![UserContent::Text { text: format!("[an attachment could not be saved: {reason}]") }]
            }),
            Err(reason) => {
                vec![UserContent::Text { text: format!("[steering input cannot be read: {reason}]") }]
            }
        };
        let message_id = uuid::Uuid::new_v4().to_string();
        let event = Event::UserMessage { message_id, content, command: None };
        let payload = encode(&event)?;
        // Stored in its own transaction, with the inbox: what came before it goes first.
        self.store_unstored().await?;
        let applied = self
            .shared
            .steers
            .apply(&steer.id, event.kind(), payload.clone())
            .await
            .map_err(|e| TurnError::Store(e.to_string()))?;
        if applied {
            self.recorded(event, payload, true).await;
        }
        Ok(())
    }

    pub(super) fn report_usage(&mut self, usage: Usage) {
        // What MCP servers' sampling spent since the last request counts first.
        for (owed, price) in
            self.shared.status.take_owed().into_iter().chain([(usage, self.policy.provider.price.clone())])
        {
            match price {
                Some(price) => {
                    self.carried.cost += price.cost(&owed);
                    self.carried.currency = Some(price.currency);
                }
                None => self.carried.cost_complete = false,
            }
            self.carried.tokens = self.carried.tokens.plus(&owed);
        }
        self.carried.calibration.reported(usage.input_tokens);
        // Tokens and cost count whether or not the window is known; the edge decides what
        // a report without a window can be sent as.
        let report = UsageReport {
            used: usage.input_tokens + usage.output_tokens,
            size: self.policy.provider.context_window,
            cost: self.carried.currency.as_ref().map(|currency| (self.carried.cost, currency.clone())),
            tokens: self.carried.tokens,
            cost_complete: self.carried.cost_complete,
        };
        self.live(TurnUpdate::Usage(report.clone()));
        self.shared.status.change(|s| s.usage = Some(report));
    }
}

/// An event encoded straight to text, held once however often it is passed on (a long
/// message is held as few times as possible).
fn encode(event: &Event) -> Result<Arc<str>, TurnError> {
    event.to_shared_json().map_err(|e| TurnError::Store(e.to_string()))
}

pub(super) struct Response {
    pub(super) stop: Option<StopReason>,
    pub(super) tool_calls: Vec<ToolCallRequest>,
    /// The calls that fail without running (`reply_calls`).
    pub(super) refused: self::reply_calls::Refused,
}
