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
        Ok(QuestionAnswer::Answer(text)) => call::completed(format!("The user answered: {text}")),
        Ok(QuestionAnswer::Declined) => {
            Outcome::failed("the user declined to answer; go on without the answer or stop and explain")
        }
        Ok(QuestionAnswer::Cancelled) => Outcome::failed("the user dismissed the question without answering"),
        Err(e) => Outcome::failed(format!("the question could not be asked: {e}")),
    }
}
