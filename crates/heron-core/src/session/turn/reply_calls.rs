//! What one model reply's tool calls may hold and cost: how many of them run, how large
//! their arguments are kept, and how many bytes their results may add to the conversation.
//! Every one of these is a bound on what a model (the peer least trusted) makes Heron hold,
//! store and send: a 140 KB reply of 2,000 `read_file` calls made half a gigabyte of
//! results, each stored twice (for the model and for the editor) and sent to the editor.
//!
//! - At most [`Limits::max_tool_calls`] calls of one reply run. The call after the last
//!   one allowed is kept, fails with [`past_cap`], and the reply is read no further (its
//!   stream is dropped, which stops the model): the model reads which calls did not run.
//! - A call whose arguments pass [`Limits::max_tool_arguments`] fails without running, and
//!   only the start of its arguments is kept, as soon as it arrives.
//! - The results of one reply's calls hold at most [`Limits::max_tool_result_bytes`]
//!   together ([`ResultBudget`]): what the model reads and what the editor is shown, each
//!   clipped with a note once the budget is spent.

use std::collections::HashMap;

use super::limits::Limits;
use crate::llm::ToolCallRequest;
use crate::tools::Outcome;
use crate::types::ToolOutput;

/// How much of a refused call's arguments is kept: enough for the store and the editor to
/// say what was refused.
const KEPT_ARGUMENTS: usize = 1024;

/// Calls of a reply that fail without running, by call id, with what the model is told.
#[derive(Debug, Default)]
pub(in crate::session) struct Refused(HashMap<String, String>);

impl Refused {
    /// Why call `id` may not run, if it may not.
    pub(in crate::session) fn reason(&self, id: &str) -> Option<String> {
        self.0.get(id).cloned()
    }
}

/// What the model reads of the call after the last one a reply may make.
pub(in crate::session) fn past_cap(max: usize) -> String {
    format!(
        "Not run: this reply asked for more than {max} tool calls (max_tool_calls_per_reply), so Heron stopped \
         reading it here. This call and any after it did not run; the {max} before it did. Make at most {max} \
         calls in one reply, and ask for the rest in the next."
    )
}

/// Takes call number `index` (from 0) of a reply: refuses it when it is past the cap or
/// its arguments are too large, keeping only the start of their text. Returns the bytes
/// of arguments now held for it, which count toward the reply's size.
pub(in crate::session) fn admit(
    call: &mut ToolCallRequest,
    index: usize,
    limits: &Limits,
    refused: &mut Refused,
) -> usize {
    let reason = if index >= limits.max_tool_calls {
        past_cap(limits.max_tool_calls)
    } else if call.arguments.len() > limits.max_tool_arguments {
        format!(
            "The arguments of `{}` are larger than {} bytes; the call was not run. Send smaller arguments (for \
             a large file, write it in parts with edit_file).",
            call.name, limits.max_tool_arguments
        )
    } else {
        return call.arguments.len();
    };
    call.arguments = crate::secret::clip(&call.arguments, KEPT_ARGUMENTS);
    refused.0.insert(call.id.clone(), reason);
    call.arguments.len()
}

/// What is left of the bytes one reply's tool results may take.
#[derive(Debug)]
pub(in crate::session) struct ResultBudget {
    cap: usize,
    left: usize,
}

impl ResultBudget {
    /// A budget of `cap` bytes for one reply's results.
    pub(in crate::session) fn new(cap: usize) -> Self {
        Self { cap, left: cap }
    }

    /// Fits `outcome` into what is left, the model's text first: text past it is cut with
    /// a note saying so, a diff or raw result that does not fit is replaced by that note.
    pub(in crate::session) fn fit(&mut self, outcome: &mut Outcome) {
        outcome.for_model = self.take_text(std::mem::take(&mut outcome.for_model));
        for output in &mut outcome.output {
            match output {
                ToolOutput::Text { text } => *text = self.take_text(std::mem::take(text)),
                ToolOutput::Diff { old_text, new_text, .. } => {
                    let size = old_text.as_ref().map_or(0, String::len) + new_text.len();
                    if !self.take(size) {
                        *output = ToolOutput::Text { text: self.note(size) };
                    }
                }
                ToolOutput::Terminal { .. } => {}
            }
        }
        if let Some(raw) = &outcome.raw_output {
            let size = serde_json::to_string(raw).map_or(usize::MAX, |text| text.len());
            if !self.take(size) {
                outcome.raw_output = None;
            }
        }
    }

    /// Takes `size` bytes if they are left.
    fn take(&mut self, size: usize) -> bool {
        let fits = size <= self.left;
        if fits {
            self.left -= size;
        }
        fits
    }

    fn take_text(&mut self, text: String) -> String {
        if self.take(text.len()) {
            return text;
        }
        let mut kept = self.left;
        while !text.is_char_boundary(kept) {
            kept -= 1;
        }
        self.left = 0;
        format!("{}\n{}", &text[..kept], self.note(text.len() - kept))
    }

    fn note(&self, cut: usize) -> String {
        format!(
            "[{cut} more bytes of this result are not shown: the results of one reply's tool calls may hold {} \
             bytes (max_tool_result_bytes). Ask for less at once (a range of lines, a narrower search), or in \
             the next reply.]",
            self.cap
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ToolStatus;

    fn limits() -> Limits {
        Limits { max_tool_calls: 2, max_tool_arguments: 100, ..Limits::default() }
    }

    fn call(id: &str, arguments: &str) -> ToolCallRequest {
        ToolCallRequest { id: id.to_owned(), name: "read_file".to_owned(), arguments: arguments.to_owned() }
    }

    fn read(text: &str) -> Outcome {
        Outcome {
            status: ToolStatus::Completed,
            output: vec![ToolOutput::Text { text: text.to_owned() }],
            raw_output: Some(serde_json::json!({ "path": "/w/a" })),
            for_model: text.to_owned(),
            plan: None,
        }
    }

    #[test]
    fn calls_past_the_cap_and_oversized_arguments_are_refused_and_clipped() {
        let (limits, mut refused) = (limits(), Refused::default());
        let mut small = call("a", "{}");
        assert_eq!(admit(&mut small, 0, &limits, &mut refused), 2);
        let mut big = call("b", &"x".repeat(5000));
        assert!(admit(&mut big, 1, &limits, &mut refused) <= KEPT_ARGUMENTS);
        let mut third = call("c", &"y".repeat(3000));
        assert!(admit(&mut third, 2, &limits, &mut refused) <= KEPT_ARGUMENTS);
        assert_eq!(refused.reason("a"), None);
        assert!(refused.reason("b").is_some_and(|r| r.contains("larger than 100 bytes")));
        let past = refused.reason("c").expect("refused");
        assert!(
            past.contains("more than 2 tool calls") && past.contains("max_tool_calls_per_reply"),
            "{past}"
        );
    }

    #[test]
    fn results_past_the_budget_are_clipped_with_a_note() {
        let mut budget = ResultBudget::new(1000);
        let mut first = read(&"a".repeat(300));
        budget.fit(&mut first);
        assert_eq!(first, read(&"a".repeat(300)), "within the budget, untouched");
        let mut second = read(&"é".repeat(400));
        budget.fit(&mut second);
        // 1000 - 300 - 300 - 15 (the raw result) = 385 bytes left: the model's text is cut
        // on a character boundary, and the editor's has no room left.
        let kept = second.for_model.split('\n').next().expect("line");
        assert_eq!(kept.len(), 384);
        assert!(
            second.for_model.contains("416 more bytes") && second.for_model.contains("max_tool_result_bytes")
        );
        assert!(
            matches!(&second.output[0], ToolOutput::Text { text } if text.starts_with("\n[800 more bytes"))
        );
        assert_eq!(second.raw_output, None);
        let mut diff = Outcome {
            output: vec![ToolOutput::Diff { path: "/w/a".into(), old_text: None, new_text: "x".into() }],
            ..read("")
        };
        budget.fit(&mut diff);
        assert!(matches!(&diff.output[0], ToolOutput::Text { text } if text.contains("not shown")));
    }
}
