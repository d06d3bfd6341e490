//! `task`: the model hands a self-contained job to a subagent, a child run with a context
//! window of its own (its instructions and the job, nothing of the parent's conversation),
//! which answers with one message. The child reads, lists and searches by default; the
//! model may name other tools of the session for it (never `task`, so children do not
//! nest), and each of its calls goes through the session's permission gate: a call the
//! user must approve is asked on the parent's card, its title naming the subagent. It runs
//! in the session's confinement with the call's cancellation, so `session/cancel` and a
//! cancel of the call stop it. It is bounded in model requests (`subagent_max_steps`), in
//! the answer it returns ([`MAX_ANSWER_BYTES`]), in time (`subagent_timeout_s`, kept by the
//! child itself so that past it the parent still learns what it did) and in how many run at
//! once (`max_subagents`, the session's semaphore). Its usage counts in the session's. The editor sees the
//! parent's call, whose content follows the child's tool calls as they run, then the
//! answer; the child's steps are kept in the call's raw output.

use std::sync::Arc;

use futures_util::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Semaphore;

use super::status::Board;
use crate::BoxFuture;
use crate::llm::registry::{Providers, ResolvedProvider};
use crate::llm::{ChatMessage, ModelEvent, ModelRequest, ToolCallRequest, ToolSpec, UserPart};
use crate::tools::deadline::{Pace, run_within};
use crate::tools::{Outcome, Prepared, Registry, Tool, ToolEnv};
use crate::types::{ToolKind, ToolOutput, ToolStatus};

/// The tool's name.
pub const NAME: &str = "task";

/// The most of a child's answer the parent reads, in bytes.
pub const MAX_ANSWER_BYTES: usize = 32 * 1024;

/// The longest a job's title shows, in characters.
const MAX_TITLE: usize = 80;

/// What the child is told before its job.
const INSTRUCTIONS: &str = "You are a subagent of Heron, a coding agent. You were handed one \
self-contained job: do it with the read-only tools you have (you cannot change files or run \
commands), then answer with one message that holds everything the agent that asked needs, \
since it sees nothing else of your work. Be concise and exact; name files and lines.";

/// How a child's calls are decided: the session's tool approval, its plan mode and the
/// approvals given so far, and how long the user has to answer.
#[derive(Clone)]
pub(super) struct Gate {
    pub(super) posture: super::settings::Posture,
    pub(super) plan: bool,
    pub(super) approvals: Arc<std::sync::Mutex<super::turn::permission::Approvals>>,
    pub(super) timeout: std::time::Duration,
}

/// Arguments of `task`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskArgs {
    /// The whole job: the subagent sees nothing of this conversation, so say all it needs.
    pub prompt: String,
    /// A short title for the job, shown to the user.
    #[serde(default)]
    pub description: Option<String>,
    /// Tools the subagent may use (the read-only ones when left out); any it is given that
    /// change things are asked about as the session's own calls are.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// A configured model (`provider/model`) for the subagent; the session's when left out.
    #[serde(default)]
    pub model: Option<String>,
}

/// The `task` tool of one turn; each child run holds a copy.
#[derive(Clone)]
pub(super) struct Task {
    /// The turn's model, and the session's providers for another.
    pub(super) model: ResolvedProvider,
    pub(super) providers: Arc<Providers>,
    /// The turn's tools; the child gets the read-only ones unless given others.
    pub(super) tools: Arc<Registry>,
    /// Where the child's usage is owed.
    pub(super) status: Arc<Board>,
    /// Places for children running at once, and how far each may go.
    pub(super) bounds: Bounds,
    /// How the children's calls are decided.
    pub(super) gate: Gate,
    /// The session's transcript, beside which each child's is kept.
    pub(super) transcript: Option<std::path::PathBuf>,
}

/// How many children run at once, and how far each may go.
#[derive(Clone)]
pub(super) struct Bounds {
    /// Places for children running at once, shared by the session's turns (`max_subagents`).
    pub(super) running: Arc<Semaphore>,
    /// The most model requests one child makes (`subagent_max_steps`).
    pub(super) max_steps: usize,
    /// The longest one child runs (`subagent_timeout_s`).
    pub(super) max_time: std::time::Duration,
}

/// Whether a tool of `kind` changes nothing, so a child may have it.
fn read_only(kind: ToolKind) -> bool {
    matches!(kind, ToolKind::Read | ToolKind::Search)
}

impl Tool for Task {
    fn spec(&self) -> ToolSpec {
        crate::tools::call::spec::<TaskArgs>(
            NAME,
            "Hand a self-contained research job to a subagent with a fresh context: it reads, lists and \
             searches files (it cannot change anything), then answers with one message. Use it for work \
             that would fill your context (surveying a large tree, finding every use of something); \
             several task calls in one reply run at once.",
        )
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    /// The child keeps its own time (`subagent_timeout_s`), so that past it the parent
    /// still gets what it did; a cancel stops it like any call.
    fn pace(&self) -> Pace {
        Pace::Person
    }

    fn runs_together(&self) -> bool {
        true
    }

    fn prepare(&self, arguments: &str, _env: &ToolEnv) -> Result<Prepared, String> {
        let (args, raw_input): (TaskArgs, _) = crate::tools::call::parse(NAME, arguments)?;
        if args.prompt.trim().is_empty() {
            return Err("`prompt` must say the job".into());
        }
        if let Some(model) = &args.model {
            self.providers.resolve(model).map_err(|e| format!("`model`: {e}"))?;
        }
        for name in args.tools.iter().flatten() {
            if name == NAME || self.tools.get(name).is_none() {
                return Err(format!("`tools`: a subagent cannot have `{name}`"));
            }
        }
        let what = args.description.as_deref().unwrap_or(&args.prompt);
        let line: String = what.lines().next().unwrap_or_default().chars().take(MAX_TITLE).collect();
        Ok(Prepared {
            title: format!("Subagent: {}", line.trim()),
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
        let child = Child { task: self.clone(), title: prepared.title.clone() };
        let running = self.bounds.running.clone();
        Box::pin(async move {
            let args: TaskArgs = match crate::tools::call::reparse(NAME, &prepared.raw_input) {
                Ok(args) => args,
                Err(failed) => return failed,
            };
            let _place = tokio::select! {
                place = running.acquire_owned() => place.ok(),
                () = env.cancel.cancelled() => return Outcome::failed("cancelled before it started"),
            };
            child.run(args, env).await
        })
    }
}

/// One child run.
struct Child {
    /// What the tool was given.
    task: Task,
    /// The parent call's title, which names the child in what the user is asked.
    title: String,
}

/// What the child did, for the parent's call: each of its tool calls with its status.
struct Steps(Vec<(String, ToolStatus)>);

impl Steps {
    fn shown(&self, answer: Option<&str>) -> Vec<ToolOutput> {
        let mut text: String =
            self.0.iter().map(|(title, status)| format!("- {title}: {}\n", status_word(*status))).collect();
        if let Some(answer) = answer {
            text.push_str(answer);
        }
        vec![ToolOutput::Text { text }]
    }
}

fn status_word(status: ToolStatus) -> &'static str {
    match status {
        ToolStatus::Pending => "waiting",
        ToolStatus::InProgress => "running",
        ToolStatus::Completed => "done",
        ToolStatus::Failed => "failed",
        ToolStatus::Cancelled => "cancelled",
    }
}

impl Child {
    /// Runs the child, and keeps what it said and was told beside the session's transcript
    /// (`<session>.<call>.jsonl`), named in the result's raw output.
    async fn run(self, args: TaskArgs, env: ToolEnv) -> Outcome {
        let mut messages = Vec::new();
        let mut outcome = self.work(args, &env, &mut messages).await;
        let (Some(parent), Some(call)) = (&self.task.transcript, env.progress.call_id()) else {
            return outcome;
        };
        let path = parent.with_extension(format!("{}.jsonl", super::turn::transcript::safe_name(call)));
        let lines: String = messages
            .iter()
            .filter_map(|m| serde_json::to_string(m).ok())
            .map(|line| format!("{}\n", crate::secret::redact(&line, env.secrets.iter())))
            .collect();
        let written = path.clone();
        if tokio::task::spawn_blocking(move || std::fs::write(written, lines)).await.is_ok_and(|w| w.is_ok())
        {
            let raw = outcome.raw_output.get_or_insert_with(|| json!({}));
            raw["transcript"] = json!(path.display().to_string());
        }
        outcome
    }

    async fn work(&self, args: TaskArgs, env: &ToolEnv, messages: &mut Vec<ChatMessage>) -> Outcome {
        let env = env.clone();
        let model = match &args.model {
            Some(id) => match self.task.providers.resolve(id) {
                Ok(model) => model,
                Err(error) => return Outcome::failed(format!("`model`: {error}")),
            },
            None => self.task.model.clone(),
        };
        let mut tools = Registry::new();
        for spec in self.task.tools.specs(false) {
            let wanted = match &args.tools {
                Some(names) => names.contains(&spec.name),
                None => self.task.tools.get(&spec.name).is_some_and(|t| read_only(t.kind())),
            };
            if let Some(tool) = self.task.tools.get(&spec.name).filter(|_| wanted && spec.name != NAME) {
                tools.add(tool.clone());
            }
        }
        let specs = tools.specs(self.task.gate.plan);
        *messages = vec![
            ChatMessage::System { text: INSTRUCTIONS.to_owned() },
            ChatMessage::User { parts: vec![UserPart::Text { text: args.prompt.clone() }] },
        ];
        let mut steps = Steps(Vec::new());
        let deadline = tokio::time::Instant::now() + self.task.bounds.max_time;
        let late = || {
            format!(
                "The subagent ran {} s (subagent_timeout_s) without answering.",
                self.task.bounds.max_time.as_secs()
            )
        };
        for _ in 0..self.task.bounds.max_steps {
            let request = ModelRequest {
                model: model.model.clone(),
                messages: messages.clone(),
                tools: specs.clone(),
                effort: None,
                max_tokens: None,
            };
            let (text, calls) = match tokio::time::timeout_at(deadline, self.ask(&model, request, &env)).await
            {
                Ok(Ok(reply)) => reply,
                Ok(Err(why)) => return Outcome::failed(why),
                Err(_) => return stopped(&late(), &steps),
            };
            if calls.is_empty() {
                messages.push(ChatMessage::Assistant {
                    text: text.clone(),
                    tool_calls: Vec::new(),
                    reasoning: None,
                });
                return answered(&text, &steps);
            }
            messages.push(ChatMessage::Assistant { text, tool_calls: calls.clone(), reasoning: None });
            for call in calls {
                let running = self.run_one(&tools, &call, &env);
                let Ok((title, status, said)) = tokio::time::timeout_at(deadline, running).await else {
                    steps.0.push((call.name.clone(), ToolStatus::Cancelled));
                    return stopped(&late(), &steps);
                };
                steps.0.push((title, status));
                env.progress.show(steps.shown(None));
                messages.push(ChatMessage::Tool { call_id: call.id, content: said });
            }
            if env.cancel.is_cancelled() {
                return Outcome::failed("cancelled");
            }
        }
        let why = format!(
            "The subagent made {} model requests (subagent_max_steps) without answering.",
            self.task.bounds.max_steps
        );
        stopped(&why, &steps)
    }

    /// One model request: its text and tool calls; usage is owed to the session.
    async fn ask(
        &self,
        model: &ResolvedProvider,
        request: ModelRequest,
        env: &ToolEnv,
    ) -> Result<(String, Vec<ToolCallRequest>), String> {
        let mut stream = model.provider.stream(request, env.cancel.child_token());
        let (mut text, mut calls) = (String::new(), Vec::new());
        while let Some(event) = stream.next().await {
            match event.map_err(|e| format!("the subagent's model failed: {e}"))? {
                ModelEvent::Attempt { .. } => {
                    text.clear();
                    calls.clear();
                }
                ModelEvent::TextDelta { text: piece } if text.len() < MAX_ANSWER_BYTES => {
                    text.push_str(&piece)
                }
                ModelEvent::ToolCall { call } => calls.push(call),
                ModelEvent::Usage { usage } => self.task.status.owe(usage, model.price.clone()),
                _ => {}
            }
        }
        Ok((text, calls))
    }
}

impl Child {
    /// Runs one of the child's calls through the session's gate: allowed, refused, or asked
    /// on the parent's card with the change it will make, its title naming the subagent.
    async fn run_one(
        &self,
        tools: &Registry,
        call: &ToolCallRequest,
        env: &ToolEnv,
    ) -> (String, ToolStatus, String) {
        use super::turn::permission::{Decision, decide};
        let Some(tool) = tools.get(&call.name).cloned() else {
            return (call.name.clone(), ToolStatus::Failed, tools.missing(&call.name));
        };
        let (arguments, env_for) = (call.arguments.clone(), env.clone());
        let prepared = tokio::task::spawn_blocking({
            let tool = tool.clone();
            move || tool.prepare(&arguments, &env_for)
        })
        .await;
        let prepared = match prepared {
            Ok(Ok(prepared)) => prepared,
            Ok(Err(why)) => return (call.name.clone(), ToolStatus::Failed, why),
            Err(_) => return (call.name.clone(), ToolStatus::Failed, "the call could not be checked".into()),
        };
        let title = prepared.title.clone();
        let decision = {
            let approvals =
                self.task.gate.approvals.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            decide(self.task.gate.posture, self.task.gate.plan, &call.name, &prepared, &approvals)
        };
        let prepared = match decision {
            Decision::Allow => prepared,
            Decision::Deny(why) => return (title, ToolStatus::Failed, why),
            Decision::Ask => match self.asked(tool.as_ref(), call, prepared, env).await {
                Ok(prepared) => prepared,
                Err(why) => return (title, ToolStatus::Failed, why),
            },
        };
        let env = ToolEnv { progress: crate::tools::Progress::default(), ..env.clone() };
        let outcome = run_within(tool.as_ref(), prepared, env).await;
        (title, outcome.status, outcome.for_model)
    }

    /// Asks the user about a child's call on the parent's card; the call as shown when they
    /// allow it, else what the child is told.
    async fn asked(
        &self,
        tool: &dyn Tool,
        call: &ToolCallRequest,
        prepared: Prepared,
        env: &ToolEnv,
    ) -> Result<Prepared, String> {
        use crate::tools::editor::{PermissionAnswer, PermissionAsk};
        let prepared = tool.preview(prepared, env.clone()).await?;
        let Some(card) = env.progress.call_id() else {
            return Err("a subagent's call needs the user's approval, and no card shows the subagent".into());
        };
        let ask = PermissionAsk {
            call_id: card.to_owned(),
            name: call.name.clone(),
            title: format!("{}: {}", self.title, prepared.title),
            kind: prepared.kind,
            locations: prepared.locations.clone(),
            raw_input: prepared.raw_input.clone(),
            content: prepared.content.clone(),
            subagent_call_id: Some(call.id.clone()),
        };
        let answer = tokio::select! {
            answer = env.editor.request_permission(&ask, self.task.gate.timeout) => answer,
            () = env.cancel.cancelled() => PermissionAnswer::Cancelled,
        };
        // An "always" counts for the session, as for the parent's own calls.
        self.task.gate.approvals.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remember(
            &call.name,
            super::turn::permission::Scope::of(&prepared),
            answer,
        );
        match answer {
            PermissionAnswer::AllowOnce | PermissionAnswer::AllowAlways => Ok(prepared),
            _ => Err(format!("The user did not allow `{}` to run.", call.name)),
        }
    }
}

/// Past a bound: the parent (model and editor) gets why, and what the child did.
fn stopped(why: &str, steps: &Steps) -> Outcome {
    let why = format!("{why} What it did:\n");
    let mut outcome = Outcome::failed(why.clone());
    outcome.output = steps.shown(Some(&why));
    if let Some(ToolOutput::Text { text }) = steps.shown(None).pop() {
        outcome.for_model.push_str(&text);
    }
    outcome
}

/// The parent's result: the child's answer, clipped, after the list of what it did.
fn answered(text: &str, steps: &Steps) -> Outcome {
    let answer = crate::secret::clip(text.trim(), MAX_ANSWER_BYTES);
    let mut outcome = crate::tools::call::completed(answer.clone());
    outcome.output = steps.shown(Some(&answer));
    let done: Vec<_> = steps
        .0
        .iter()
        .map(|(title, status)| json!({ "title": title, "status": status_word(*status) }))
        .collect();
    outcome.raw_output = Some(json!({ "steps": done }));
    outcome
}
