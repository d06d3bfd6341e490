//! `question`: asks the user something through the editor. Invariant: without the editor's
//! support the call fails at once, and a cancelled turn never leaves it waiting.

use schemars::JsonSchema;
use serde::Deserialize;

use super::editor::QuestionAnswer;
use super::{Outcome, Prepared, Tool, ToolEnv, call};
use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::types::ToolKind;

const NAME: &str = "question";

/// Arguments of `question`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct QuestionArgs {
    /// The question, as the user will read it.
    pub question: String,
    /// Fixed answers to choose from, if any.
    #[serde(default)]
    pub options: Option<Vec<String>>,
}

/// The `question` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Question;

impl Tool for Question {
    fn spec(&self) -> ToolSpec {
        call::spec::<QuestionArgs>(
            NAME,
            "Ask the user a question and wait for the answer. Use it only when you cannot go on without \
             a decision from the user; offer options when the choices are known.",
        )
    }

    fn pace(&self) -> crate::tools::deadline::Pace {
        // It waits for the user, who may take their time; a cancel ends the wait.
        crate::tools::deadline::Pace::Person
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Other
    }

    fn prepare(&self, arguments: &str, env: &ToolEnv) -> Result<Prepared, String> {
        let (args, raw_input): (QuestionArgs, _) = call::parse(NAME, arguments)?;
        if args.question.trim().is_empty() {
            return Err("question must not be empty".to_owned());
        }
        Ok(Prepared {
            title: call::scrub_text(env, &format!("Ask: {}", call::one_line(&args.question, 80))),
            kind: ToolKind::Other,
            locations: Vec::new(),
            raw_input,
            outside_roots: false,
            always_ask: None,
            content: Vec::new(),
            planned: None,
        })
    }

    fn run(&self, prepared: Prepared, env: ToolEnv) -> BoxFuture<Outcome> {
        Box::pin(async move {
            let outcome = match call::reparse::<QuestionArgs>(NAME, &prepared.raw_input) {
                Ok(args) => ask(&env, args).await,
                Err(failed) => failed,
            };
            call::scrub(&env, outcome)
        })
    }
}

/// The longest answer the model is given, in characters; the editor is asked for no more
/// (`maxLength`), and an answer past it is cut, saying so.
pub const MAX_ANSWER_CHARS: usize = 8000;

/// `text` within [`MAX_ANSWER_CHARS`].
fn held(text: &str) -> String {
    match text.char_indices().nth(MAX_ANSWER_CHARS) {
        Some((end, _)) => format!("{} [the answer was cut at {MAX_ANSWER_CHARS} characters]", &text[..end]),
        None => text.to_owned(),
    }
}

async fn ask(env: &ToolEnv, args: QuestionArgs) -> Outcome {
    if !env.editor.asks_questions() {
        return Outcome::failed(
            "the editor cannot ask the user questions; decide yourself and say what you assumed, or ask \
             in your reply",
        );
    }
    let options = args.options.unwrap_or_default();
    let answer = tokio::select! {
        answer = env.editor.ask(&args.question, &options, env.progress.call_id()) => answer,
        () = env.cancel.cancelled() => return Outcome::failed("cancelled"),
    };
    match answer {
        Ok(QuestionAnswer::Answer(text)) if !options.is_empty() && !options.contains(&text) => {
            Outcome::failed(
                "the editor answered with something other than the choices offered; ask again or decide",
            )
        }
        Ok(QuestionAnswer::Answer(text)) => call::completed(format!("The user answered: {}", held(&text))),
        Ok(QuestionAnswer::Declined) => {
            Outcome::failed("the user declined to answer; go on without the answer or stop and explain")
        }
        Ok(QuestionAnswer::Cancelled) => Outcome::failed("the user dismissed the question without answering"),
        Err(e) => Outcome::failed(format!("the question could not be asked: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_past_its_bound_is_cut_saying_so() {
        assert_eq!(held("yes"), "yes");
        let long = "é".repeat(MAX_ANSWER_CHARS + 10);
        let kept = held(&long);
        assert!(kept.starts_with(&"é".repeat(MAX_ANSWER_CHARS)), "the answer's start is kept");
        assert!(kept.ends_with("[the answer was cut at 8000 characters]"), "{}", &kept[kept.len() - 60..]);
        assert_eq!(kept.chars().filter(|c| *c == 'é').count(), MAX_ANSWER_CHARS);
    }
}
