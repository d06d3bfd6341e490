//! One model step's tool calls, run as a batch: each checked and described first (its
//! tool's `prepare`, on the blocking pool, since it resolves paths), recorded so the editor
//! sees it pending, then run in order through the permission gate, each under its deadline
//! and with a cancel of its own. Invariant: every call the model made gets exactly one
//! recorded result, and a call cancelled before it starts never runs.

use std::sync::Arc;

use serde_json::Value;

use super::{Asking, Turn, TurnError};
use crate::llm::{ProviderError, ToolCallRequest};
use crate::session::event::Event;
use crate::session::settings::Mode;
use crate::session::turn::permission::{Decision, Scope, decide};
use crate::session::update::{self, TurnUpdate};
use crate::tools::deadline::run_within;
use crate::tools::editor::{PermissionAnswer, PermissionAsk, Unanswered};
use crate::tools::title::readable;
use crate::tools::{Outcome, Prepared, Registry, Tool, ToolEnv, finish_goal};
use crate::types::{Location, ToolKind, ToolOutput, ToolStatus};

/// What the model reads of a call the user cancelled alone (`tool_call/cancel`).
const CALL_CANCELLED: &str = "The user cancelled this tool call; nothing more of it ran. The turn goes on.";

/// What decides, before any tool runs, whether a call of this turn may run at all.
#[derive(Debug, Clone, Copy)]
struct Rules {
    /// Plan mode: only tools that change nothing run.
    read_only: bool,
    /// Whether the turn pursues a goal (only then may `finish_goal` run).
    pursuing: bool,
}

/// A call to run at once with the others of its step that run together: the call, its
/// tool, what it will do (or why not) and its own cancel.
type Together =
    (ToolCallRequest, Option<Arc<dyn Tool>>, Result<Prepared, String>, tokio_util::sync::CancellationToken);

/// What the editor is shown of a call before it runs.
struct Shown {
    title: String,
    kind: ToolKind,
    locations: Vec<Location>,
    raw_input: Value,
}

/// A call as the model sent it (arguments past the bound already clipped as the reply was
/// read, `reply_calls`), its tool, and what it will do or why it will not run (which the
/// model reads).
struct Described {
    call: ToolCallRequest,
    tool: Option<Arc<dyn Tool>>,
    described: Result<Prepared, String>,
    shown: Shown,
}

/// Checks `call` against `rules` and, when it may run, describes it (`Tool::prepare`, which
/// may block on the file system). `refusal` is why reading the reply already refused it
/// (past the reply's call cap, or arguments too large).
fn described(
    call: ToolCallRequest,
    refusal: Option<String>,
    tools: &Registry,
    env: &ToolEnv,
    rules: Rules,
) -> Described {
    let tool = tools.get(&call.name).cloned();
    let described = match (&tool, refusal) {
        (_, Some(refusal)) => Err(refusal),
        (None, None) => Err(tools.missing(&call.name)),
        (Some(tool), None)
            if rules.read_only
                && !matches!(tool.kind(), ToolKind::Read | ToolKind::Search | ToolKind::Think) =>
        {
            Err(format!("`{}` changes things, and plan mode is read-only.", call.name))
        }
        (Some(_), None) if call.name == finish_goal::NAME && !rules.pursuing => {
            Err("There is no goal to finish: `finish_goal` works only in goal mode.".to_owned())
        }
        (Some(tool), None) => tool.prepare(&call.arguments, env),
    };
    // Whatever made the title (the model's command, a file's name, an MCP server's tool
    // name), the user reads it as one plain line: what they approve is what they see.
    let described = described.map(|mut p| {
        p.title = readable(&p.title);
        p
    });
    let shown = match &described {
        Ok(p) => Shown {
            title: p.title.clone(),
            kind: p.kind,
            locations: p.locations.clone(),
            raw_input: p.raw_input.clone(),
        },
        Err(_) => Shown {
            title: readable(&call.name),
            kind: tool.as_ref().map_or(ToolKind::Other, |t| t.kind()),
            locations: Vec::new(),
            raw_input: serde_json::from_str(&call.arguments).unwrap_or(Value::String(call.arguments.clone())),
        },
    };
    Described { call, tool, described, shown }
}

impl Turn {
    /// Records every call first (the editor sees them pending), then runs them in order.
    /// Each call is registered as cancellable (`tool_call/cancel`) with its own token before
    /// the editor sees it, so a call cancelled while an earlier one of the step waits or runs
    /// never runs and ends cancelled.
    pub(super) async fn run_tools(
        &mut self,
        calls: Vec<ToolCallRequest>,
        refused: &crate::session::turn::reply_calls::Refused,
        asking: &Asking,
    ) -> Result<(), TurnError> {
        let mut prepared = Vec::with_capacity(calls.len());
        for Described { call, tool, described, shown } in self.describe(calls, refused, asking).await? {
            let Shown { title, kind, locations, raw_input } = shown;
            // This call's own token: `tool_call/cancel` ends it, the turn goes on. Registered
            // before the editor is shown the call (which offers the cancel), and kept until
            // its result is recorded.
            let call_cancel = self.io.env.cancel.child_token();
            let registered = self.shared.calls.register(&call.id, call_cancel.clone());
            self.record(Event::ToolCall {
                call_id: call.id.clone(),
                name: call.name.clone(),
                title,
                tool_kind: kind,
                arguments: call.arguments.clone(),
                raw_input,
                locations,
            })
            .await?;
            let touched: Vec<std::path::PathBuf> = match &described {
                Ok(p) => p.locations.iter().map(|l| std::path::PathBuf::from(&l.path)).collect(),
                Err(_) => Vec::new(),
            };
            prepared.push((call, tool, described, call_cancel, registered, touched));
        }
        let mut budget =
            crate::session::turn::reply_calls::ResultBudget::new(self.policy.limits.max_tool_result_bytes);
        // Calls whose tool runs them together (subagents) run at once: the first one reached
        // starts every later one of the same kind too, and each result is then recorded in
        // its place.
        let mut together: std::collections::HashMap<String, (Outcome, Arc<update::CallProgress>)> =
            Default::default();
        let mut prepared: Vec<_> = prepared.into_iter().map(Some).collect();
        for index in 0..prepared.len() {
            let Some((call, tool, described, call_cancel, registered, touched)) = prepared[index].take()
            else {
                continue;
            };
            let together_kind =
                |tool: &Option<Arc<dyn Tool>>| tool.as_ref().is_some_and(|t| t.runs_together());
            if together_kind(&tool) && !together.contains_key(&call.id) {
                let mut group = vec![(call.clone(), tool.clone(), described.clone(), call_cancel.clone())];
                for later in prepared[index + 1..].iter_mut().flatten() {
                    let runs = later.1.is_some() && later.2.is_ok() && !later.3.is_cancelled();
                    if together_kind(&later.1) && runs {
                        // It ran here: its own turn in the loop records the result.
                        let described = std::mem::replace(&mut later.2, Err(String::new()));
                        group.push((later.0.clone(), later.1.clone(), described, later.3.clone()));
                    }
                }
                together = self.run_together(group).await;
            }
            // The sink of the call that ran, to run what it left for after its result.
            let mut sink = None;
            let mut outcome = match (together.remove(&call.id), tool, described) {
                (Some((outcome, call_sink)), _, _) => {
                    sink = Some(call_sink);
                    outcome
                }
                // Cancelled while an earlier call waited or ran: it never starts.
                _ if call_cancel.is_cancelled() => self.cancelled_before_running(),
                (None, Some(tool), Ok(prepared)) => match tokio::select! {
                    // Dropping a pending question withdraws it at the editor.
                    gated = self.gate(&call, tool.as_ref(), prepared) => gated,
                    () = call_cancel.cancelled() => Err(Refused::plain(CALL_CANCELLED)),
                } {
                    // Approved as the cancel came: the cancel wins, nothing runs.
                    Ok(_) if call_cancel.is_cancelled() => self.cancelled_before_running(),
                    Ok(prepared) => {
                        self.live(TurnUpdate::ToolProgress {
                            call_id: call.id.clone(),
                            status: ToolStatus::InProgress,
                            output: Vec::new(),
                        });
                        // The editor sees the call running before the tool asks it anything
                        // (fs/*, terminal/*, elicitation/create): the editor's requests
                        // wait for the run to be forwarded up to them (`WatchedEditor`).
                        let (progress, call_sink) = update::call_progress(&call.id, &self.io.updates);
                        sink = Some(call_sink);
                        self.before_command(&call.name).await;
                        let env = ToolEnv { progress, cancel: call_cancel.clone(), ..self.io.env.clone() };
                        run_within(tool.as_ref(), prepared, env).await
                    }
                    Err(refused) => refused.outcome(),
                },
                (None, _, Err(message)) => Outcome::failed(message),
                (None, None, Ok(_)) => Outcome::failed(format!("There is no tool called `{}`.", call.name)),
            };
            // A call a cancel stopped ends cancelled; one that finished first keeps its result.
            if call_cancel.is_cancelled() && outcome.status != ToolStatus::Completed {
                if !self.cancel().is_cancelled() {
                    outcome = Outcome::failed(CALL_CANCELLED);
                }
                outcome.status = ToolStatus::Cancelled;
            }
            // A folder below the cwd with instructions for agents: given with the first
            // result that worked there.
            let mut given = Vec::new();
            if outcome.status == ToolStatus::Completed {
                let (text, paths) = self.nested_instructions(touched).await;
                outcome.for_model.push_str(&text);
                if !paths.is_empty() {
                    self.shared.status.change(|s| s.instructions.extend(paths.iter().cloned()));
                }
                given = paths;
            }
            budget.fit(&mut outcome);
            if let Some(entries) = outcome.plan.clone() {
                self.record(Event::Plan { entries }).await?;
            }
            if let Some(end) = finish_goal::verdict(&call.name, &outcome) {
                self.end_goal(end).await?;
            }
            self.record(Event::ToolResult {
                call_id: call.id,
                status: outcome.status,
                output: outcome.output,
                raw_output: outcome.raw_output,
                for_model: outcome.for_model,
                instructions: given,
            })
            .await?;
            if let Some(sink) = sink {
                sink.finish(self.io.env.deadlines.quick).await;
            }
            // Final now: a cancel of it is refused from here on.
            drop(registered);
        }
        Ok(())
    }

    /// Runs `group`, a step's calls that run together (subagents), at once: each through the
    /// gate, then all of them together. Their outcomes, with the sinks of their progress, by
    /// call id.
    async fn run_together(
        &self,
        group: Vec<Together>,
    ) -> std::collections::HashMap<String, (Outcome, Arc<update::CallProgress>)> {
        let mut runs = Vec::new();
        let mut done = std::collections::HashMap::new();
        for (call, tool, described, call_cancel) in group {
            let (Some(tool), Ok(prepared)) = (tool, described) else { continue };
            if call_cancel.is_cancelled() {
                continue;
            }
            let (progress, sink) = update::call_progress(&call.id, &self.io.updates);
            match self.gate(&call, tool.as_ref(), prepared).await {
                Ok(prepared) => {
                    self.live(TurnUpdate::ToolProgress {
                        call_id: call.id.clone(),
                        status: ToolStatus::InProgress,
                        output: Vec::new(),
                    });
                    let env = ToolEnv { progress, cancel: call_cancel.clone(), ..self.io.env.clone() };
                    runs.push(async move { (call.id, run_within(tool.as_ref(), prepared, env).await, sink) });
                }
                Err(refused) => {
                    done.insert(call.id, (refused.outcome(), sink));
                }
            }
        }
        for (id, outcome, sink) in futures_util::future::join_all(runs).await {
            done.insert(id, (outcome, sink));
        }
        done
    }

    /// Checks and describes every call of a step in one call on the blocking pool: a tool's
    /// `prepare` resolves the paths it names (canonicalize, symlink_metadata), which must not
    /// block the async threads, and a step's calls are described before any is shown.
    async fn describe(
        &self,
        calls: Vec<ToolCallRequest>,
        refused: &crate::session::turn::reply_calls::Refused,
        asking: &Asking,
    ) -> Result<Vec<Described>, TurnError> {
        let rules = Rules { read_only: asking.read_only, pursuing: asking.pursuing };
        let (tools, env) = (self.policy.tools.clone(), self.io.env.clone());
        let calls: Vec<_> = calls
            .into_iter()
            .map(|call| {
                let refusal = refused.reason(&call.id);
                (call, refusal)
            })
            .collect();
        let describing = tokio::task::spawn_blocking(move || {
            calls.into_iter().map(|(call, refusal)| described(call, refusal, &tools, &env, rules)).collect()
        });
        match describing.await {
            Ok(described) => Ok(described),
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            // The pool drops a task only as the runtime shuts down, which ends the turn too.
            Err(_) => Err(TurnError::Provider(ProviderError::Cancelled)),
        }
    }

    /// The result of a call whose token was cancelled before it could run: by the user
    /// alone (`tool_call/cancel`), or with the whole turn.
    fn cancelled_before_running(&self) -> Outcome {
        if self.cancel().is_cancelled() {
            Outcome::failed("The turn was cancelled before this tool ran.")
        } else {
            Outcome::failed(CALL_CANCELLED)
        }
    }

    /// Asks the permission gate, and the user when it says so, showing them what the call
    /// will do (worked out first, without changing anything). Returns the call to run, as
    /// shown; `Err` is the refusal the model reads, with what the card showed.
    async fn gate(
        &self,
        call: &ToolCallRequest,
        tool: &dyn Tool,
        prepared: Prepared,
    ) -> Result<Prepared, Refused> {
        let name = call.name.as_str();
        let decision = {
            let approvals = self.shared.approvals.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            decide(
                self.policy.settings.posture,
                self.policy.settings.mode == Mode::Plan,
                name,
                &prepared,
                &approvals,
            )
        };
        match decision {
            Decision::Allow => Ok(prepared),
            Decision::Deny(reason) => Err(Refused::plain(reason)),
            Decision::Ask => {
                let prepared = self.preview(tool, prepared).await.map_err(Refused::plain)?;
                if !prepared.content.is_empty() {
                    // The card shows the change (or the command) before the question.
                    self.live(TurnUpdate::ToolProgress {
                        call_id: call.id.clone(),
                        status: ToolStatus::Pending,
                        output: prepared.content.clone(),
                    });
                }
                // The editor sees the tool call before it is asked about it: the question
                // waits for the run to be forwarded up to it (`WatchedEditor`).
                let ask = PermissionAsk {
                    call_id: call.id.clone(),
                    name: name.to_owned(),
                    title: prepared.title.clone(),
                    kind: prepared.kind,
                    locations: prepared.locations.clone(),
                    raw_input: prepared.raw_input.clone(),
                    content: prepared.content.clone(),
                    subagent_call_id: None,
                };
                let asked = self.io.env.editor.request_permission(&ask, self.policy.permission_timeout);
                let answer = tokio::select! {
                    answer = asked => answer,
                    // Dropping the request cancels it at the editor ($/cancel_request).
                    () = self.io.env.cancel.cancelled() => PermissionAnswer::Cancelled,
                };
                self.shared.approvals.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remember(
                    name,
                    Scope::of(&prepared),
                    answer,
                );
                let refused = match answer {
                    PermissionAnswer::AllowOnce | PermissionAnswer::AllowAlways => return Ok(prepared),
                    PermissionAnswer::RejectOnce | PermissionAnswer::RejectAlways => {
                        format!("The user did not allow `{name}` to run.")
                    }
                    PermissionAnswer::Cancelled if self.io.env.cancel.is_cancelled() => {
                        "The turn was cancelled while waiting for permission.".to_owned()
                    }
                    PermissionAnswer::Cancelled => format!(
                        "The editor withdrew the permission request for `{name}` without an answer; it was not run."
                    ),
                    PermissionAnswer::Unanswered(Unanswered::TimedOut) => format!(
                        "Nobody answered the permission request for `{name}` within {} s \
                         (permission_timeout_s); it was not run.",
                        self.policy.permission_timeout.as_secs()
                    ),
                    PermissionAnswer::Unanswered(Unanswered::Failed) => format!(
                        "The editor could not ask the user about `{name}` (its permission request failed); \
                         it was not run."
                    ),
                };
                // The card keeps the change it showed, with why it did not run.
                Err(Refused { reason: refused, shown: prepared.content })
            }
        }
    }

    /// What the call will do, worked out within the tool's quick deadline: a preview that
    /// waits on an editor that never answers fails the call rather than the turn.
    async fn preview(&self, tool: &dyn Tool, prepared: Prepared) -> Result<Prepared, String> {
        let limit = self.io.env.deadlines.quick;
        let previewing = tool.preview(prepared, self.io.env.clone());
        tokio::select! {
            result = tokio::time::timeout(limit, previewing) => result.unwrap_or_else(|_| Err(format!(
                "Working out the change took longer than {} s (tool_timeout_s); nothing was changed.",
                limit.as_secs()
            ))),
            () = self.io.env.cancel.cancelled() => Err("The turn was cancelled before this tool ran.".into()),
        }
    }
}

/// Why a call did not run, and what its card showed when the user was asked (the diff, the
/// command), which stays on the card beside the reason.
pub(super) struct Refused {
    reason: String,
    shown: Vec<ToolOutput>,
}

impl Refused {
    /// A refusal with nothing shown.
    fn plain(reason: impl Into<String>) -> Self {
        Self { reason: reason.into(), shown: Vec::new() }
    }

    /// The failed call's outcome: what was shown, then the reason the model reads.
    fn outcome(self) -> Outcome {
        let mut outcome = Outcome::failed(self.reason);
        outcome.output.splice(0..0, self.shown);
        outcome
    }
}
