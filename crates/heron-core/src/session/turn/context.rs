//! What a request sends of a session's history once it has been compacted: the view after
//! the latest [`Compaction`] (its summary opening the first kept user message, the events
//! from its cut on, tool outputs before its clip point cut to head and tail, prompts no
//! request could hold left out). How many tokens a request holds is `tokens`' to say.
//!
//! A cut falls where a user turn starts or, inside the turn in progress, where one of its
//! model steps starts (after the results of the step before), never between a tool call and
//! its result. A view cut inside a turn sends that turn's prompt first, verbatim, so the
//! model still reads what it was asked while its earlier steps are summarized.
//!
//! A view depends only on the stored events, never on the request being built, so every
//! request after a compaction starts with the same bytes and a provider's prompt cache
//! keeps hitting. The policy that decides when to compact lives in `compact`.

use std::ops::Range;

use super::clip::clippable;
use super::history::{Images, Shaping, shaped_messages};
use crate::llm::ChatMessage;
use crate::session::event::{Compaction, CompactionStage, Event};
use crate::types::{PlanItem, PlanStatus};

/// What requests send of a history: events from `cut` on (after the prompt of the turn the
/// cut falls in, when it falls inside one), tool outputs before `clip_before` clipped, the
/// compaction's summary first, and nothing of the `unsent` runs. Indices are the history's.
#[derive(Debug, Clone, Default)]
pub(in crate::session) struct View {
    /// The first event sent as it is.
    pub(in crate::session) cut: usize,
    /// Tool outputs of events before this are clipped.
    pub(in crate::session) clip_before: usize,
    /// The compaction in effect.
    pub(in crate::session) compaction: Option<Compaction>,
    /// Runs of events never sent: prompts no request could hold.
    pub(in crate::session) unsent: Vec<Range<usize>>,
}

impl View {
    /// The view after the latest compaction of `history` (all of it when there is none).
    pub(in crate::session) fn of(history: &[Event]) -> View {
        let latest = history.iter().enumerate().rev().find_map(|(at, event)| match event {
            Event::Compacted(compaction) => Some((at, compaction)),
            _ => None,
        });
        match latest {
            Some((at, compaction)) => View::at(at, compaction.clone()),
            None => View::default(),
        }
    }

    /// The view `compaction` makes, stored at index `at` of the history.
    pub(in crate::session) fn at(at: usize, compaction: Compaction) -> View {
        let back = |count: u64| at.saturating_sub(usize::try_from(count).unwrap_or(usize::MAX));
        View {
            cut: back(compaction.kept),
            clip_before: back(compaction.unclipped),
            unsent: compaction.unsent.iter().map(|[from, to]| back(*from)..back(*to)).collect(),
            compaction: Some(compaction),
        }
    }

    /// The runs of `unsent` a compaction stored at index `at` carries on (those not wholly
    /// before `cut`), counted back from `at`.
    pub(in crate::session) fn unsent_back_from(&self, at: usize, cut: usize) -> Vec<[u64; 2]> {
        let back = |index: usize| at.saturating_sub(index) as u64;
        self.unsent.iter().filter(|run| run.end > cut).map(|run| [back(run.start), back(run.end)]).collect()
    }

    /// Whether the event at `at` is left out as unsent.
    fn is_unsent(&self, at: usize) -> bool {
        self.unsent.iter().any(|run| run.contains(&at))
    }

    /// The messages this view sends of `events` (the history, or a start of it), after
    /// `system`.
    pub(in crate::session) fn render(
        &self,
        system: &str,
        events: &[Event],
        images: &Images,
    ) -> Vec<ChatMessage> {
        let cut = self.cut.min(events.len());
        let preamble = self.compaction.as_ref().and_then(preamble);
        // A cut inside a turn keeps the turn's prompt: the latest user message before it.
        let anchor = opens_a_step(&events[cut..])
            .then(|| (0..cut).rev().find(|&at| is_turn_start(&events[at]) && !self.is_unsent(at)))
            .flatten()
            .map(|at| &events[at]);
        let unsent: Vec<Range<usize>> = self
            .unsent
            .iter()
            .filter(|run| run.end > cut)
            .map(|run| run.start.saturating_sub(cut)..run.end - cut)
            .collect();
        // The working context the cut left behind is still the model's: it opens the view.
        let context = events[..cut].iter().rev().find_map(|event| match event {
            Event::Context(context) => Some(context),
            _ => None,
        });
        let shaping = Shaping {
            clip_before: self.clip_before.saturating_sub(cut),
            preamble: preamble.as_deref(),
            anchor,
            unsent: &unsent,
            context,
        };
        shaped_messages(system, &events[cut..], images, &shaping)
    }

    /// How many tool outputs of `history` this view sends clipped.
    pub(in crate::session) fn clipped(&self, history: &[Event]) -> u64 {
        let end = self.clip_before.min(history.len());
        let start = self.cut.min(end);
        history[start..end]
            .iter()
            .filter(|event| matches!(event, Event::ToolResult { for_model, .. } if clippable(for_model)))
            .count() as u64
    }
}

/// Whether `event` starts a user turn: a prompt (or steering), or a goal's continuation.
fn is_turn_start(event: &Event) -> bool {
    matches!(event, Event::UserMessage { .. } | Event::GoalContinuation { .. })
}

/// Whether `event` is a piece of a model response: its thought, message or tool calls.
fn is_response(event: &Event) -> bool {
    matches!(event, Event::AgentThought { .. } | Event::AgentMessage { .. } | Event::ToolCall { .. })
}

/// Whether `events` open with a model step (past markers a compaction or a plan left): what
/// a view cut inside a turn starts with.
fn opens_a_step(events: &[Event]) -> bool {
    events.iter().find(|e| !matches!(e, Event::Compacted(..) | Event::Plan { .. })).is_some_and(is_response)
}

/// Where each user turn starts: the cut points a summary may end at, since a user message
/// never falls between a tool call and its result.
pub(in crate::session) fn turn_starts(history: &[Event]) -> impl Iterator<Item = usize> + '_ {
    history.iter().enumerate().filter_map(|(at, event)| is_turn_start(event).then_some(at))
}

/// Where a summary may end, after `after`: each user turn's start, and inside the latest
/// turn each model step's start (its first thought, message or call after the results of
/// the step before), so that one long turn can be summarized between its own steps. None
/// falls between a tool call and its result.
pub(in crate::session) fn cut_points(history: &[Event], after: usize) -> Vec<usize> {
    let latest = turn_starts(history).last();
    let mut points: Vec<usize> = turn_starts(history).filter(|&at| at > after).collect();
    if let Some(latest) = latest {
        let mut answered = false;
        for (at, event) in history.iter().enumerate().skip(latest + 1) {
            match event {
                Event::ToolResult { .. } => answered = true,
                _ if is_response(event) && answered => {
                    answered = false;
                    if at > after {
                        points.push(at);
                    }
                }
                _ if is_response(event) => answered = false,
                _ => {}
            }
        }
    }
    points
}

/// The end of the outputs the model has answered: a tool result before the model's latest
/// words was read by it; those after are about to be.
pub(in crate::session) fn answered_end(history: &[Event]) -> usize {
    history
        .iter()
        .rposition(|event| {
            matches!(event, Event::AgentMessage { .. } | Event::AgentThought { .. } | Event::ToolCall { .. })
        })
        .unwrap_or(0)
}

/// Whether `events` hold anything of a conversation a summary could stand for.
pub(in crate::session) fn has_conversation(events: &[Event]) -> bool {
    events.iter().any(|event| {
        matches!(
            event,
            Event::UserMessage { .. } | Event::GoalContinuation { .. } | Event::AgentMessage { .. }
        )
    })
}

/// The latest plan among `events`, if one was set there.
pub(in crate::session) fn latest_plan(events: &[Event]) -> Option<&[PlanItem]> {
    events.iter().rev().find_map(|event| match event {
        Event::Plan { entries } => Some(entries.as_slice()),
        _ => None,
    })
}

/// What opens the first kept user message: the summary and what is never summarized away.
fn preamble(compaction: &Compaction) -> Option<String> {
    let summary = compaction.summary.as_deref()?;
    let mut text = format!(
        "[The earlier conversation was compacted to fit the context window. Your summary of it:]\n\n{summary}\n"
    );
    if let Some(goal) = &compaction.goal {
        text.push_str(&format!("\n[The session's goal: {goal}]\n"));
    }
    if !compaction.plan.is_empty() {
        text.push_str("\n[The plan when the summary was written:]\n");
        for item in &compaction.plan {
            let status = match item.status {
                PlanStatus::Pending => "pending",
                PlanStatus::InProgress => "in progress",
                PlanStatus::Completed => "completed",
            };
            text.push_str(&format!("- [{status}] {}\n", item.content));
        }
    }
    text.push_str("\n[The conversation goes on from here.]");
    Some(text)
}

/// The first words of a summary's thought, streamed before the summary.
pub(in crate::session) const SUMMARY_HEADER: &str =
    "Compacting the conversation to free the model's context window. Summary:\n\n";

impl Compaction {
    /// What closes the compaction's thought: what was done, in numbers.
    pub fn note(&self) -> String {
        let sizes =
            format!("requests now take about {} tokens (before: {})", self.tokens_after, self.tokens_before);
        match self.stage {
            CompactionStage::Clipped => format!(
                "[{} older tool outputs are now sent clipped to fit the context window; {sizes}. The session \
                 keeps them whole.]",
                self.clipped
            ),
            CompactionStage::Summarized => {
                let clipped = match self.clipped {
                    0 => String::new(),
                    n => format!(", and {n} older tool outputs are sent clipped"),
                };
                format!(
                    "\n\n[This summary stands in for the session's first {} events{clipped}; {sizes}. The \
                     session keeps the full history.]",
                    self.replaced
                )
            }
            CompactionStage::Dropped => format!(
                "[The prompt above needs more of the context window than a request may take, so the model \
                 never read it; later requests leave it out (about {} tokens without it). The session keeps \
                 it.]",
                self.tokens_after
            ),
        }
    }

    /// The whole thought, as a replay shows it: what streamed live, then the note.
    pub fn shown(&self) -> String {
        match (&self.stage, &self.summary) {
            (CompactionStage::Summarized, Some(summary)) => {
                format!("{SUMMARY_HEADER}{summary}{}", self.note())
            }
            _ => self.note(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::clip::CLIP_OVER;
    use super::*;
    use crate::llm::UserPart;
    use crate::types::{ToolKind, ToolStatus, UserContent};

    fn user(text: &str) -> Event {
        Event::UserMessage {
            message_id: text.into(),
            content: vec![UserContent::Text { text: text.into() }],
            command: None,
        }
    }

    fn said(text: &str) -> Event {
        Event::AgentMessage { message_id: text.into(), text: text.into() }
    }

    fn call(id: &str) -> Event {
        Event::ToolCall {
            call_id: id.into(),
            name: "read_file".into(),
            title: "Read".into(),
            tool_kind: ToolKind::Read,
            arguments: "{}".into(),
            raw_input: serde_json::json!({}),
            locations: vec![],
        }
    }

    fn result(id: &str, text: &str) -> Event {
        Event::ToolResult {
            call_id: id.into(),
            status: ToolStatus::Completed,
            output: vec![],
            raw_output: None,
            for_model: text.into(),
            instructions: Vec::new(),
        }
    }

    fn compacted(kept: u64, unclipped: u64, summary: Option<&str>) -> Event {
        Event::Compacted(Compaction {
            message_id: "c".into(),
            stage: if summary.is_some() { CompactionStage::Summarized } else { CompactionStage::Clipped },
            kept,
            unclipped,
            replaced: 0,
            clipped: 0,
            summary: summary.map(str::to_owned),
            plan: vec![],
            goal: Some("ship it".into()),
            instructions: None,
            unsent: vec![],
            tokens_before: 0,
            tokens_after: 0,
        })
    }

    fn texts(messages: &[ChatMessage]) -> Vec<String> {
        messages
            .iter()
            .map(|m| match m {
                ChatMessage::System { text } => format!("system:{text}"),
                ChatMessage::User { parts } => parts
                    .iter()
                    .map(|p| match p {
                        UserPart::Text { text } => format!("user:{text}"),
                        UserPart::Image { .. } => "user:image".into(),
                    })
                    .collect::<Vec<_>>()
                    .join("|"),
                ChatMessage::Assistant { text, .. } => format!("assistant:{text}"),
                ChatMessage::Tool { content, .. } => format!("tool:{content}"),
            })
            .collect()
    }

    #[test]
    fn no_compaction_sends_everything_as_it_is() {
        let history = vec![user("one"), said("two")];
        let messages = View::of(&history).render("sys", &history, &Images::default());
        assert_eq!(texts(&messages), ["system:sys", "user:one", "assistant:two"]);
    }

    #[test]
    fn a_summary_opens_the_first_kept_turn_and_replaced_events_are_not_sent() {
        let long = "x".repeat(CLIP_OVER + 1);
        let history =
            vec![user("old"), said("old answer"), user("new"), call("1"), result("1", &long), said("done")];
        let mut history = history;
        history.push(compacted(4, 1, Some("we talked")));
        history.push(user("next"));
        let messages = View::of(&history).render("sys", &history, &Images::default());
        let texts = texts(&messages);
        assert_eq!(texts.len(), 6, "{texts:?}");
        assert!(texts[1].starts_with("user:[The earlier conversation was compacted"), "{texts:?}");
        assert!(texts[1].contains("we talked") && texts[1].contains("ship it"), "{texts:?}");
        assert!(texts[1].ends_with("|user:new"), "the kept turn follows the summary: {texts:?}");
        assert!(texts[3].contains("clipped") && texts[3].len() < long.len(), "an answered output is clipped");
        assert_eq!(texts[5], "user:next");
        assert!(!texts.iter().any(|t| t.contains("old answer")));
    }

    #[test]
    fn a_compaction_that_kept_nothing_sends_its_summary_before_the_next_prompt() {
        let history = vec![user("old"), said("answer"), compacted(0, 0, Some("all of it"))];
        let messages = View::of(&history).render("sys", &history, &Images::default());
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(texts(&messages)[1].contains("all of it"));
    }

    #[test]
    fn the_view_is_the_same_whatever_follows_it() {
        let mut history = vec![user("a"), said("b"), user("c"), compacted(1, 1, Some("s"))];
        let before = View::of(&history).render("sys", &history, &Images::default());
        history.extend([said("d"), user("e")]);
        let after = View::of(&history).render("sys", &history, &Images::default());
        assert_eq!(before[..], after[..before.len()], "the prefix is unchanged");
    }

    #[test]
    fn a_long_turn_may_be_cut_where_a_step_starts_never_between_a_call_and_its_result() {
        // Two turns; the second makes three steps of calls, the last still unanswered.
        let history = vec![
            user("a"),
            said("b"),
            user("c"),
            call("1"),
            result("1", "r"),
            said("thinking"),
            call("2"),
            call("3"),
            result("2", "r"),
            result("3", "r"),
            call("4"),
            result("4", "r"),
        ];
        assert_eq!(cut_points(&history, 0), [2, 5, 10]);
        assert_eq!(cut_points(&history, 5), [10], "only points after the current cut");
        // Steps of earlier turns are not cut into: only the turn in progress is.
        let mut later = history.clone();
        later.push(user("d"));
        assert_eq!(cut_points(&later, 0), [2, 12]);
    }

    #[test]
    fn a_view_cut_inside_a_turn_sends_the_turns_prompt_then_its_kept_steps() {
        let mut history = vec![
            user("old"),
            said("done"),
            user("read them all"),
            call("1"),
            result("1", "one"),
            call("2"),
            result("2", "two"),
        ];
        // A summary of everything before the second step of the second turn.
        history.push(compacted(2, 2, Some("read one")));
        let texts = texts(&View::of(&history).render("sys", &history, &Images::default()));
        assert_eq!(texts.len(), 4, "{texts:?}");
        assert!(texts[1].starts_with("user:[The earlier conversation was compacted"), "{texts:?}");
        assert!(texts[1].contains("read one") && texts[1].ends_with("|user:read them all"), "{texts:?}");
        assert_eq!(texts[2..], ["assistant:", "tool:two"], "the kept step, its call with its result");
        assert!(!texts.iter().any(|t| t.contains("one") && t.starts_with("tool")), "{texts:?}");
    }

    #[test]
    fn unsent_runs_are_left_out_of_every_later_view() {
        let mut history = vec![user("hello"), said("hi"), user("far too big"), user("steer")];
        let mut dropped = match compacted(4, 4, None) {
            Event::Compacted(c) => c,
            _ => unreachable!(),
        };
        dropped.stage = CompactionStage::Dropped;
        dropped.goal = None;
        dropped.unsent = vec![[2, 0]];
        history.push(Event::Compacted(dropped));
        history.push(user("small"));
        let view = View::of(&history);
        let texts = texts(&view.render("sys", &history, &Images::default()));
        assert_eq!(texts, ["system:sys", "user:hello", "assistant:hi", "user:small"]);
        // A compaction after it carries the run on while the run is still after its cut.
        assert_eq!(view.unsent, vec![std::ops::Range { start: 2, end: 4 }]);
        assert_eq!(view.unsent_back_from(6, 0), [[4, 2]]);
        assert!(view.unsent_back_from(6, 4).is_empty(), "a run before the cut is summarized away");
    }

    #[test]
    fn outputs_count_as_answered_once_the_model_spoke_after_them() {
        let history = vec![user("a"), call("1"), result("1", "r"), said("b"), call("2"), result("2", "r")];
        assert_eq!(answered_end(&history), 4);
        assert_eq!(turn_starts(&history).collect::<Vec<_>>(), [0]);
    }
}
