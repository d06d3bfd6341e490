//! `finish_goal`: how the model ends a goal-mode objective, reached or not. Invariant: the
//! tool itself changes nothing; a completed call carries its verdict in `raw_output`, and
//! the turn loop (which alone offers it, in goal mode) applies it to the session's goal.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Outcome, Prepared, Tool, ToolEnv, call};
use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::types::{ToolKind, ToolStatus};

/// The tool's name.
pub(crate) const NAME: &str = "finish_goal";

/// How the goal ended: `completed` (the objective is met) or `failed` (it cannot be met).
/// No variant doc comments, so the schema lists a plain `enum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs, reason = "variant docs would turn the schema's plain enum into a oneOf")]
pub(crate) enum GoalEnd {
    Completed,
    Failed,
}

/// Arguments of `finish_goal`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub(crate) struct FinishGoalArgs {
    /// Whether the goal was reached.
    pub status: GoalEnd,
    /// What was done, or why the goal cannot be reached, in a few sentences.
    pub summary: String,
}

/// The `finish_goal` tool.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FinishGoal;

impl Tool for FinishGoal {
    fn spec(&self) -> ToolSpec {
        call::spec::<FinishGoalArgs>(
            NAME,
            "End the current goal. Call it with status completed once the objective is fully met and \
             checked, or with status failed when you are sure it cannot be met. Until you call it, you \
             will be asked to continue.",
        )
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    fn prepare(&self, arguments: &str, env: &ToolEnv) -> Result<Prepared, String> {
        let (args, raw_input): (FinishGoalArgs, _) = call::parse(NAME, arguments)?;
        let verb = match args.status {
            GoalEnd::Completed => "completed",
            GoalEnd::Failed => "failed",
        };
        Ok(Prepared {
            title: call::scrub_text(env, &format!("Goal {verb}")),
            kind: ToolKind::Think,
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
            let outcome = match call::reparse::<FinishGoalArgs>(NAME, &prepared.raw_input) {
                Ok(args) => finish(args),
                Err(failed) => failed,
            };
            call::scrub(&env, outcome)
        })
    }
}

fn finish(args: FinishGoalArgs) -> Outcome {
    let text = match args.status {
        GoalEnd::Completed => format!("Goal completed: {}", args.summary),
        GoalEnd::Failed => format!("Goal failed: {}", args.summary),
    };
    let mut outcome = call::completed(text);
    outcome.raw_output = serde_json::to_value(&args).ok();
    outcome
}

/// The verdict of a finished `finish_goal` call, if `outcome` is one.
pub(crate) fn verdict(tool: &str, outcome: &Outcome) -> Option<GoalEnd> {
    if tool != NAME || outcome.status != ToolStatus::Completed {
        return None;
    }
    let raw: &Value = outcome.raw_output.as_ref()?;
    FinishGoalArgs::deserialize(raw).ok().map(|args| args.status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completed_call_carries_its_verdict_and_others_carry_none() {
        let done = finish(FinishGoalArgs { status: GoalEnd::Failed, summary: "no network".into() });
        assert_eq!(done.for_model, "Goal failed: no network");
        assert_eq!(verdict(NAME, &done), Some(GoalEnd::Failed));
        assert_eq!(verdict("todo_write", &done), None);
        assert_eq!(verdict(NAME, &Outcome::failed("bad arguments")), None);
    }
}
