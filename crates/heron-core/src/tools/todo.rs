//! `todo_write`: the model's plan for the turn, replaced whole on every call. Invariant: the
//! outcome carries the full list, so the session's plan is exactly what the model last sent.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Outcome, Prepared, Tool, ToolEnv, call};
use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::types::{PlanItem, PlanPriority, PlanStatus, ToolKind};

const NAME: &str = "todo_write";

/// One entry of the plan.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct Todo {
    /// What to do, as a short imperative sentence.
    pub content: String,
    /// Its state.
    pub status: PlanStatus,
    /// How much it matters (default medium).
    #[serde(default)]
    pub priority: Option<PlanPriority>,
}

/// Arguments of `todo_write`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TodoWriteArgs {
    /// The whole plan, replacing the previous one.
    pub todos: Vec<Todo>,
}

/// The `todo_write` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct TodoWrite;

impl Tool for TodoWrite {
    fn spec(&self) -> ToolSpec {
        call::spec::<TodoWriteArgs>(
            NAME,
            "Write the plan for the task as a todo list, replacing the previous list. Use it for work with \
             several steps; keep exactly one entry in_progress while working and mark entries completed as \
             soon as they are done.",
        )
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    fn prepare(&self, arguments: &str, env: &ToolEnv) -> Result<Prepared, String> {
        let (args, raw_input): (TodoWriteArgs, _) = call::parse(NAME, arguments)?;
        Ok(Prepared {
            title: call::scrub_text(env, &format!("Update the plan ({} items)", args.todos.len())),
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
            let outcome = match call::reparse::<TodoWriteArgs>(NAME, &prepared.raw_input) {
                Ok(args) => plan(args.todos),
                Err(failed) => failed,
            };
            call::scrub(&env, outcome)
        })
    }
}

fn plan(todos: Vec<Todo>) -> Outcome {
    let items: Vec<PlanItem> = todos
        .into_iter()
        .map(|todo| PlanItem {
            content: todo.content,
            priority: todo.priority.unwrap_or_default(),
            status: todo.status,
        })
        .collect();
    let count = |status: PlanStatus| items.iter().filter(|i| i.status == status).count();
    let mut text = format!(
        "Plan updated: {} items ({} completed, {} in progress, {} pending)",
        items.len(),
        count(PlanStatus::Completed),
        count(PlanStatus::InProgress),
        count(PlanStatus::Pending)
    );
    for item in &items {
        let mark = match item.status {
            PlanStatus::Completed => "[x]",
            PlanStatus::InProgress => "[~]",
            PlanStatus::Pending => "[ ]",
        };
        text.push_str(&format!("\n{mark} {}", item.content));
    }
    let mut outcome = call::completed(text);
    outcome.plan = Some(items);
    outcome
}
