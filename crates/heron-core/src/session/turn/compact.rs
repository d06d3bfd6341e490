//! Keeping requests inside the model's context window. Before a request would fill more than
//! `compact_at` of `context_window`, older tool outputs are clipped (those of earlier turns,
//! then every one the model has answered, earlier steps of the running turn included); if
//! that is not enough, earlier turns, and earlier steps of a long running turn, are replaced
//! by a summary the model writes in a request of its own, streamed to the editor as a
//! thought. `/compact` writes one on demand.
//!
//! Each compaction is stored as an [`Event::Compacted`], so later requests send exactly the
//! same view (a prompt cache keeps hitting) and the store keeps the whole history. What is
//! never summarized: the system prompt, the goal, the plan, the prompt of the running turn
//! and its latest step. One request writes at most one summary; when even that does not
//! fit, the turn fails naming the window instead of summarizing again, and a prompt the
//! model never read because of that is left out of later requests (a `Dropped` compaction),
//! so it does not fail the next prompt too.
//!
//! Sizes are estimates (`tokens`); a request past half the limit is first counted by the
//! server's own tokenizer where it serves one, so the decision to compact rests on the
//! server's count rather than a guess.

use futures_util::StreamExt;

use super::context::{self, SUMMARY_HEADER, View};
use super::{Asking, Carried, Turn, TurnError};
use crate::llm::{ChatMessage, ModelEvent, ModelRequest, ProviderError, ToolSpec, UserPart};
use crate::secret::StreamRedactor;
use crate::session::event::{Compaction, CompactionStage, Event};
use crate::session::tokens;
use crate::session::update::TurnUpdate;
use crate::types::{PlanItem, StopReason};

/// The model's window and what one request may take of it.
#[derive(Debug, Clone, Copy)]
struct Window {
    size: u64,
    limit: u64,
}

/// A summary may take this fraction of the limit (and at most [`SUMMARY_MAX_BYTES`]), so the
/// turns it leaves verbatim keep their room.
const SUMMARY_SHARE: u64 = 8;
/// The longest summary kept, whatever the window.
const SUMMARY_MAX_BYTES: usize = 32 * 1024;
/// The shortest summary a small window still gets.
const SUMMARY_MIN_BYTES: usize = 1024;

impl Turn {
    fn window(&self) -> Option<Window> {
        let size = self.policy.provider.context_window?;
        // A float share of a token count: the product is within u64 for any real window.
        let limit = (size as f64 * self.policy.provider.compact_at).floor() as u64;
        Some(Window { size, limit: limit.max(1) })
    }

    fn tokens(&self, messages: &[ChatMessage], tools: &[ToolSpec]) -> u64 {
        self.carried.calibration.tokens(tokens::estimate(messages, tools))
    }

    fn sent(&self, asking: &Asking, view: &View) -> Vec<ChatMessage> {
        view.render(&asking.system, &self.carried.history, &self.carried.images)
    }

    /// The most bytes a summary may take.
    fn summary_cap(&self) -> usize {
        match self.window() {
            Some(window) => {
                let bytes = window.limit.saturating_mul(4) / SUMMARY_SHARE;
                usize::try_from(bytes).unwrap_or(usize::MAX).clamp(SUMMARY_MIN_BYTES, SUMMARY_MAX_BYTES)
            }
            None => SUMMARY_MAX_BYTES,
        }
    }

    fn full(window: Window, needed: u64) -> TurnError {
        TurnError::ContextFull { needed, window: window.size, limit: window.limit }
    }

    /// Has the server's own tokenizer count `messages` and `tools`, where it serves one, and
    /// scales estimates by its count from then on; `false` when no count came (none served,
    /// a failure, a cancel), and the estimate stands.
    async fn count(&mut self, messages: &[ChatMessage], tools: &[ToolSpec]) -> bool {
        let (text, apart) = tokens::counted_apart(messages, tools);
        let cancel = self.cancel().clone();
        let counted = tokio::select! {
            counted = self.policy.provider.provider.count_tokens(text) => counted,
            () = cancel.cancelled() => None,
        };
        match counted {
            Some(counted) => {
                let estimate = tokens::estimate(messages, tools);
                self.carried.calibration.counted(estimate, counted.saturating_add(apart));
                true
            }
            None => false,
        }
    }

    /// The messages of the next request, compacted first when they would not fit.
    pub(in crate::session) async fn fitted(
        &mut self,
        asking: &Asking,
        tools: &[ToolSpec],
    ) -> Result<Vec<ChatMessage>, TurnError> {
        self.carried.images.load(&self.carried.history).await;
        let current = View::of(&self.carried.history);
        let messages = self.sent(asking, &current);
        let Some(window) = self.window() else { return Ok(messages) };
        let mut before = self.tokens(&messages, tools);
        // Past half the limit a wrong estimate could cost a needless summary or a refused
        // request, so the server's own count is worth its round trip there.
        if before > window.limit / 2 && self.count(&messages, tools).await {
            before = self.tokens(&messages, tools);
        }
        if before <= window.limit {
            return Ok(messages);
        }
        match self.compact_to_fit(asking, tools, window, current, before).await {
            Err(full @ TurnError::ContextFull { needed, .. }) => {
                self.leave_unread_prompts_out(asking, tools, needed).await?;
                Err(full)
            }
            other => other,
        }
    }

    /// After a request could not be made to fit: the prompts at the end of the history that
    /// no model request has read (this turn's, and any steering with it) are left out of
    /// later requests, recorded as a `Dropped` compaction. Otherwise the next prompt's request
    /// would carry them and fail the same way. Nothing is left out once the turn has had a
    /// model step: its prompt was read, and what failed it came later.
    pub(in crate::session) async fn leave_unread_prompts_out(
        &mut self,
        asking: &Asking,
        tools: &[ToolSpec],
        needed: u64,
    ) -> Result<(), TurnError> {
        let history = &self.carried.history;
        let len = history.len();
        let from = history
            .iter()
            .rposition(|e| !matches!(e, Event::UserMessage { .. } | Event::Compacted(..)))
            .map_or(0, |at| at + 1);
        if !history[from..].iter().any(|e| matches!(e, Event::UserMessage { .. })) {
            return Ok(());
        }
        let current = View::of(history);
        let mut view = current.clone();
        view.unsent.push(from..len);
        let after = self.tokens(&self.sent(asking, &view), tools);
        let compaction = Compaction {
            message_id: uuid::Uuid::new_v4().to_string(),
            stage: CompactionStage::Dropped,
            kept: (len - current.cut.min(len)) as u64,
            unclipped: (len - current.clip_before.min(len)) as u64,
            clipped: current.clipped(history),
            unsent: view.unsent_back_from(len, view.cut),
            tokens_before: needed,
            tokens_after: after,
            ..inherited(&current)
        };
        self.record(Event::Compacted(compaction)).await
    }

    async fn compact_to_fit(
        &mut self,
        asking: &Asking,
        tools: &[ToolSpec],
        window: Window,
        current: View,
        before: u64,
    ) -> Result<Vec<ChatMessage>, TurnError> {
        let history = &self.carried.history;
        let len = history.len();
        let turn_start = context::turn_starts(history).last().unwrap_or(0);
        // First the outputs of earlier turns, then every output the model has answered.
        let mut clip_before = current.clip_before;
        let mut after = before;
        for level in [turn_start, context::answered_end(history)] {
            let view = View { clip_before: level, ..current.clone() };
            if level <= clip_before || view.clipped(history) == current.clipped(history) {
                continue;
            }
            clip_before = level;
            let messages = self.sent(asking, &view);
            after = self.tokens(&messages, tools);
            if after <= window.limit {
                let compaction = Compaction {
                    message_id: uuid::Uuid::new_v4().to_string(),
                    stage: CompactionStage::Clipped,
                    kept: (len - current.cut.min(len)) as u64,
                    unclipped: (len - level) as u64,
                    clipped: view.clipped(history),
                    unsent: current.unsent_back_from(len, current.cut),
                    tokens_before: before,
                    tokens_after: after,
                    ..inherited(&current)
                };
                self.record(Event::Compacted(compaction)).await?;
                return Ok(messages);
            }
        }

        // Then a summary of the earliest turns (or steps of the running turn), leaving
        // verbatim as many of the latest as fit half the limit, so that the next requests
        // have room before another summary.
        let starts = context::cut_points(history, current.cut);
        let Some(&latest) = starts.last() else { return Err(Self::full(window, after)) };
        let tail = |cut: usize| {
            let view = View { cut, clip_before, compaction: None, unsent: current.unsent.clone() };
            self.tokens(&self.sent(asking, &view), tools)
        };
        // The tail shrinks as the cut moves later: the first cut whose tail and a summary
        // of the longest kind fit the target.
        let allowance = self.carried.calibration.tokens(tokens::prose(self.summary_cap() as u64));
        let fitting = starts.partition_point(|&cut| tail(cut) + allowance > window.limit / 2);
        let cut = starts.get(fitting).copied().unwrap_or(latest);
        // When even no summary at all would leave it too big, no summary is asked for.
        let needed = tail(cut);
        if needed > window.limit {
            return Err(Self::full(window, needed));
        }
        let (message_id, summary) = self.summarize(asking, tools, &current, clip_before, cut, None).await?;
        let compaction = self.summarized(&current, message_id, summary, cut, clip_before, before);
        let view = View::at(len, compaction.clone());
        let messages = self.sent(asking, &view);
        let after = self.tokens(&messages, tools);
        self.record(Event::Compacted(Compaction { tokens_after: after, ..compaction })).await?;
        if after > window.limit {
            return Err(Self::full(window, after));
        }
        Ok(messages)
    }

    /// The compaction a new summary of the events before `cut` makes, stored next.
    fn summarized(
        &self,
        current: &View,
        message_id: String,
        summary: String,
        cut: usize,
        clip_before: usize,
        before: u64,
    ) -> Compaction {
        let history = &self.carried.history;
        let len = history.len();
        let (plan, goal) = self.pinned(current, cut);
        let mut compaction = Compaction {
            message_id,
            stage: CompactionStage::Summarized,
            kept: (len - cut) as u64,
            unclipped: (len - clip_before) as u64,
            replaced: history[..cut].iter().filter(|e| !matches!(e, Event::Compacted(..))).count() as u64,
            clipped: 0,
            summary: Some(summary),
            plan,
            goal,
            instructions: None,
            unsent: current.unsent_back_from(len, cut),
            tokens_before: before,
            tokens_after: 0,
        };
        compaction.clipped = View::at(len, compaction.clone()).clipped(history);
        compaction
    }

    /// What a summary of the events before `cut` must carry verbatim: the plan, when the
    /// event that set it is summarized away, and the goal while it is pursued.
    fn pinned(&self, current: &View, cut: usize) -> (Vec<PlanItem>, Option<String>) {
        let history = &self.carried.history;
        let plan = if context::latest_plan(&history[cut..]).is_some() {
            Vec::new()
        } else {
            context::latest_plan(&history[current.cut.min(cut)..cut])
                .map(<[PlanItem]>::to_vec)
                .or_else(|| current.compaction.as_ref().map(|c| c.plan.clone()))
                .unwrap_or_default()
        };
        let goal = self.shared.status.goal().filter(|g| !g.status.is_final()).map(|g| g.objective);
        (plan, goal)
    }

    /// `/compact`: summarizes the whole conversation now, whatever its size, with the
    /// user's `instructions` for the summary.
    pub(in crate::session) async fn compact(
        mut self,
        instructions: String,
    ) -> (Result<StopReason, TurnError>, Carried) {
        let outcome = match self.compact_asked(instructions).await {
            Err(TurnError::Provider(crate::llm::ProviderError::Cancelled)) => Ok(StopReason::Cancelled),
            _ if self.cancel().is_cancelled() => Ok(StopReason::Cancelled),
            other => other,
        };
        if let Err(err) = self.store_unstored().await {
            tracing::warn!(session = %self.shared.session_id, %err, "cannot store the summary's last message");
        }
        (outcome, self.carried)
    }

    async fn compact_asked(&mut self, instructions: String) -> Result<StopReason, TurnError> {
        let asking = Asking::of(
            &self.policy.settings,
            self.policy.append_system_prompt.as_deref(),
            self.policy.skills.as_deref(),
        );
        let tools = self.tool_specs(&asking);
        self.carried.images.load(&self.carried.history).await;
        let len = self.carried.history.len();
        let current = View::of(&self.carried.history);
        if !context::has_conversation(&self.carried.history[current.cut.min(len)..]) {
            self.reply("There is nothing to compact yet.");
            return Ok(StopReason::EndTurn);
        }
        let before = self.tokens(&self.sent(&asking, &current), &tools);
        let instructions = (!instructions.is_empty()).then_some(instructions);
        let (message_id, summary) =
            self.summarize(&asking, &tools, &current, len, len, instructions.as_deref()).await?;
        let mut compaction = self.summarized(&current, message_id, summary, len, len, before);
        compaction.instructions = instructions;
        let after = self.tokens(&self.sent(&asking, &View::at(len, compaction.clone())), &tools);
        compaction.tokens_after = after;
        self.record(Event::Compacted(compaction)).await?;
        self.reply(&format!(
            "Compacted the conversation: the next request starts from the summary, about {after} tokens instead \
             of {before}."
        ));
        Ok(StopReason::EndTurn)
    }

    /// Has the model summarize the events of `current` before `end`, streaming the summary
    /// as a thought; returns the thought's id and the summary as shown. The request repeats
    /// the conversation as the last requests sent it (what a prompt cache holds), then asks;
    /// when that alone is past the limit, its earliest turns are left out.
    async fn summarize(
        &mut self,
        asking: &Asking,
        tools: &[ToolSpec],
        current: &View,
        clip_before: usize,
        end: usize,
        instructions: Option<&str>,
    ) -> Result<(String, String), TurnError> {
        let cap = self.summary_cap();
        let ask =
            ChatMessage::User { parts: vec![UserPart::Text { text: summary_request(cap, instructions) }] };
        let starts = context::cut_points(&self.carried.history[..end], current.cut);
        let mut view = View { clip_before: clip_before.max(current.clip_before), ..current.clone() };
        let messages = loop {
            let mut messages =
                view.render(&asking.system, &self.carried.history[..end], &self.carried.images);
            messages.push(ask.clone());
            let Some(window) = self.window() else { break messages };
            let needed = self.tokens(&messages, tools);
            if needed <= window.limit {
                break messages;
            }
            match starts.iter().find(|&&at| at > view.cut) {
                Some(&later) => view.cut = later,
                None => return Err(Self::full(window, needed)),
            }
        };
        let request = ModelRequest {
            model: self.policy.provider.model.clone(),
            messages,
            tools: tools.to_vec(),
            effort: asking.effort.clone(),
            max_tokens: None,
        };
        self.carried.calibration.sending(tokens::estimate(&request.messages, &request.tools));
        let mut stream = self.policy.provider.provider.stream(request, self.cancel().child_token());
        let mut id = uuid::Uuid::new_v4().to_string();
        let mut summary = String::new();
        let mut redactor = StreamRedactor::new(self.io.env.secrets.iter());
        let mut usage_seen = false;
        self.live(TurnUpdate::CompactionStarted { id: id.clone() });
        self.show_summary(&id, SUMMARY_HEADER).await;
        let mut capped = false;
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(event) => event,
                Err(error) => {
                    let cancelled = matches!(error, ProviderError::Cancelled);
                    let reason = if cancelled { String::new() } else { error.to_string() };
                    self.live(TurnUpdate::CompactionEnded { id, cancelled, error: reason });
                    return Err(error.into());
                }
            };
            match event {
                ModelEvent::Attempt { number } if number > 1 => {
                    // A retry voids what the failed attempt streamed: that compaction ends,
                    // and the new attempt's starts.
                    let error = "its summary request failed and was tried again".to_owned();
                    self.live(TurnUpdate::CompactionEnded { id, cancelled: false, error });
                    id = uuid::Uuid::new_v4().to_string();
                    summary.clear();
                    redactor = StreamRedactor::new(self.io.env.secrets.iter());
                    self.live(TurnUpdate::CompactionStarted { id: id.clone() });
                    self.show_summary(&id, SUMMARY_HEADER).await;
                }
                ModelEvent::Retrying { next, of, wait_ms, reason } => {
                    self.live(TurnUpdate::Notice(super::response::retry_notice(next, of, wait_ms, &reason)));
                }
                ModelEvent::TextDelta { text } => {
                    let shown = redactor.push(&text);
                    if !self.add_to_summary(&id, &mut summary, &shown, cap).await {
                        capped = true;
                        break;
                    }
                }
                ModelEvent::Usage { usage } => {
                    usage_seen = true;
                    self.report_usage(usage);
                }
                // Its reasoning and any tool call are not part of the summary.
                _ => {}
            }
        }
        drop(stream);
        if !capped {
            let rest = redactor.finish();
            self.add_to_summary(&id, &mut summary, &rest, cap).await;
        }
        if usage_seen {
            self.shared
                .status
                .save(&self.shared.store, &self.shared.session_id)
                .await
                .map_err(|e| TurnError::Store(e.to_string()))?;
        }
        if self.cancel().is_cancelled() {
            return Err(crate::llm::ProviderError::Cancelled.into());
        }
        if summary.trim().is_empty() {
            return Err(TurnError::Compaction("the model answered with no summary".to_owned()));
        }
        Ok((id, summary))
    }

    /// Adds `piece` to the summary within `cap` bytes and shows it; `false` once full.
    async fn add_to_summary(&mut self, id: &str, summary: &mut String, piece: &str, cap: usize) -> bool {
        let mut room = cap.saturating_sub(summary.len()).min(piece.len());
        while !piece.is_char_boundary(room) {
            room -= 1;
        }
        let taken = &piece[..room];
        summary.push_str(taken);
        self.show_summary(id, taken).await;
        taken.len() == piece.len()
    }

    /// Streams a piece of compaction `id`'s summary (it is shown as it is written).
    async fn show_summary(&mut self, id: &str, text: &str) {
        if text.is_empty() {
            return;
        }
        let held = if self.io.updates.is_closed() {
            Default::default()
        } else {
            match self.io.budget.hold(text.len(), &self.io.env.cancel).await {
                Some(held) => held,
                None => return,
            }
        };
        self.live(TurnUpdate::CompactionChunk { id: id.to_owned(), text: text.to_owned(), held });
    }

    /// A short answer to `/compact`, shown but not stored, like other command replies.
    fn reply(&self, text: &str) {
        self.live(TurnUpdate::MessageChunk {
            message_id: uuid::Uuid::new_v4().to_string(),
            text: text.to_owned(),
            held: Default::default(),
        });
    }
}

/// What a compaction that adds no summary carries over from the one in effect.
fn inherited(current: &View) -> Compaction {
    let previous = current.compaction.as_ref();
    Compaction {
        message_id: String::new(),
        stage: CompactionStage::Clipped,
        kept: 0,
        unclipped: 0,
        replaced: previous.map_or(0, |c| c.replaced),
        clipped: 0,
        summary: previous.and_then(|c| c.summary.clone()),
        plan: previous.map(|c| c.plan.clone()).unwrap_or_default(),
        goal: previous.and_then(|c| c.goal.clone()),
        instructions: previous.and_then(|c| c.instructions.clone()),
        unsent: Vec::new(),
        tokens_before: 0,
        tokens_after: 0,
    }
}

/// What the model is asked for a summary of at most `cap` bytes (the reviewed text beside
/// the system prompt).
fn summary_request(cap: usize, instructions: Option<&str>) -> String {
    let words = cap / 7;
    let mut text =
        crate::session::working::COMPACTION_PROMPT.trim_end().replace("{words}", &words.to_string());
    if let Some(instructions) = instructions {
        text.push_str(&format!("\n\nThe user's instructions for this summary: {instructions}"));
    }
    text
}
