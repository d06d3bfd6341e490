//! The ACP v2 edge's conversions between the core's types and v2's: prompts in, and a
//! turn's updates and a stored history out in v2's forms (whole `agent_message`s on replay,
//! tool calls as `tool_call_update`s that offer cancel until their final status, a running
//! command's output as `tool_call_content_chunk`s, `plan_update`, `compaction_update`,
//! `state_update` for the turn's start and end).

use heron_core::session::event::Event;
use heron_core::session::update::TurnUpdate;
use heron_core::tools::editor::PermissionAsk;
use heron_core::types::{
    Location, PlanItem, PlanPriority, PlanStatus, PromptInput, StopReason, ToolKind, ToolOutput, ToolStatus,
    UsageReport, UserContent,
};
use heron_protocol::RpcError;
use heron_protocol::v2 as p;

use super::super::convert as v1;
use super::super::mcp::Definition;
use serde_json::json;

/// A v2 prompt as the core's input: text, images, resource links and embedded resources,
/// checked as over v1 (an image must be base64 of the type it claims). Audio is refused
/// with the offending block's index, so nothing the user sent is dropped.
pub fn prompt_input(blocks: Vec<p::ContentBlock>) -> Result<Vec<PromptInput>, RpcError> {
    let mut input = Vec::with_capacity(blocks.len());
    for (at, block) in blocks.into_iter().enumerate() {
        let content = match block {
            p::ContentBlock::Text(text) => UserContent::Text { text: text.text },
            p::ContentBlock::Image(image) => {
                input.push(v1::image_input(&image.data, image.mime_type.0, image.uri, at)?);
                continue;
            }
            p::ContentBlock::ResourceLink(link) => UserContent::Link {
                uri: link.uri,
                name: link.name,
                mime_type: link.mime_type.map(|m| m.0),
                title: link.title,
                description: link.description,
                size: link.size.and_then(|s| i64::try_from(s).ok()),
            },
            p::ContentBlock::Resource(p::EmbeddedResource { resource, .. }) => match resource {
                p::EmbeddedResourceResource::TextResourceContents(text) => UserContent::Resource {
                    uri: text.uri,
                    mime_type: text.mime_type.map(|m| m.0),
                    text: text.text,
                },
                p::EmbeddedResourceResource::BlobResourceContents(blob) => {
                    input.push(v1::blob_input(&blob.blob, blob.mime_type.map(|m| m.0), blob.uri, at)?);
                    continue;
                }
            },
            _ => {
                return Err(RpcError::invalid_params(
                    format!("prompt[{at}]"),
                    "audio and unknown blocks are not taken (session.prompt advertises what is)",
                ));
            }
        };
        input.push(PromptInput::Content(content));
    }
    Ok(input)
}

fn text(text: String) -> p::ContentBlock {
    p::ContentBlock::Text(p::TextContent { annotations: None, meta: None, text })
}

fn user_block(content: &UserContent) -> p::ContentBlock {
    match content {
        UserContent::Text { text: t } => text(t.clone()),
        UserContent::Link { uri, name, mime_type, title, description, size } => {
            p::ContentBlock::ResourceLink(p::ResourceLink {
                annotations: None,
                description: description.clone(),
                icons: None,
                meta: None,
                mime_type: mime_type.clone().map(p::MediaType),
                name: name.clone(),
                size: size.and_then(|s| u64::try_from(s).ok()),
                title: title.clone(),
                uri: uri.clone(),
            })
        }
        UserContent::Resource { uri, mime_type, text: body } => {
            p::ContentBlock::Resource(p::EmbeddedResource {
                annotations: None,
                meta: None,
                resource: p::EmbeddedResourceResource::TextResourceContents(p::TextResourceContents {
                    meta: None,
                    mime_type: mime_type.clone().map(p::MediaType),
                    text: body.clone(),
                    uri: uri.clone(),
                }),
            })
        }
        // An image or blob a v1 prompt attached lives in a file in the workspace: a link to it.
        UserContent::Image { mime_type, path, .. }
        | UserContent::Blob { mime_type: Some(mime_type), path, .. } => {
            file_link(path, Some(mime_type.clone()))
        }
        UserContent::Blob { path, mime_type: None, .. } => file_link(path, None),
    }
}

fn file_link(path: &str, mime_type: Option<String>) -> p::ContentBlock {
    let name = std::path::Path::new(path)
        .file_name()
        .map_or_else(|| path.to_owned(), |n| n.to_string_lossy().into_owned());
    p::ContentBlock::ResourceLink(p::ResourceLink {
        annotations: None,
        description: None,
        icons: None,
        meta: None,
        mime_type: mime_type.map(p::MediaType),
        name,
        size: None,
        title: None,
        uri: format!("file://{path}"),
    })
}

fn chunk(message_id: &str, content: p::ContentBlock) -> p::ContentChunk {
    p::ContentChunk { content, message_id: p::MessageId(message_id.to_owned()), meta: None }
}

fn tool_kind(kind: ToolKind) -> p::ToolKind {
    match kind {
        ToolKind::Read => p::ToolKind::Read,
        ToolKind::Edit => p::ToolKind::Edit,
        ToolKind::Delete => p::ToolKind::Delete,
        ToolKind::Move => p::ToolKind::Move,
        ToolKind::Search => p::ToolKind::Search,
        ToolKind::Execute => p::ToolKind::Execute,
        ToolKind::Think => p::ToolKind::Think,
        ToolKind::Fetch => p::ToolKind::Fetch,
        ToolKind::Other => p::ToolKind::Other,
    }
}

fn tool_status(status: ToolStatus) -> p::ToolCallStatus {
    match status {
        ToolStatus::Pending => p::ToolCallStatus::Pending,
        ToolStatus::InProgress => p::ToolCallStatus::InProgress,
        ToolStatus::Completed => p::ToolCallStatus::Completed,
        ToolStatus::Failed => p::ToolCallStatus::Failed,
        ToolStatus::Cancelled => p::ToolCallStatus::Cancelled,
    }
}

fn locations(locations: &[Location]) -> Vec<p::ToolCallLocation> {
    // Files only, as over v1: an editor opens each location as a buffer.
    locations
        .iter()
        .filter(|l| !l.folder)
        .map(|l| p::ToolCallLocation {
            line: l.line.and_then(std::num::NonZeroU32::new),
            meta: None,
            path: p::AbsolutePath(l.path.clone()),
        })
        .collect()
}

/// A file change as v2 shows it: the path changed (added or modified) and the change as a
/// unified patch, computed from the same old and new text v1 sends whole.
fn diff(path: &str, old_text: Option<&str>, new_text: &str) -> p::Diff {
    let path_of = || p::AbsolutePath(path.to_owned());
    let change = match old_text {
        None => p::DiffChange::Add(p::DiffChangeAdd {
            file_type: Some(p::DiffFileType::Text),
            meta: None,
            mime_type: None,
            path: path_of(),
        }),
        Some(_) => p::DiffChange::Modify(p::DiffChangeModify {
            file_type: Some(p::DiffFileType::Text),
            meta: None,
            mime_type: None,
            path: path_of(),
        }),
    };
    let old = old_text.unwrap_or_default();
    let from = if old_text.is_some() { format!("a{path}") } else { "/dev/null".to_owned() };
    let patch = similar::TextDiff::from_lines(old, new_text)
        .unified_diff()
        .header(&from, &format!("b{path}"))
        .to_string();
    let header = format!("diff --git a{path} b{path}\n");
    p::Diff {
        changes: vec![change],
        meta: None,
        patch: Some(p::DiffPatch { format: p::DiffPatchFormat::GitPatch, meta: None, text: header + &patch }),
    }
}

fn tool_content(output: &[ToolOutput]) -> Vec<p::ToolCallContent> {
    output
        .iter()
        .filter_map(|o| match o {
            ToolOutput::Text { text: t } => {
                Some(p::ToolCallContent::Content(p::Content { content: text(t.clone()), meta: None }))
            }
            ToolOutput::Diff { path, old_text, new_text } => {
                Some(p::ToolCallContent::Diff(diff(path, old_text.as_deref(), new_text)))
            }
            // v2 has no editor terminals: commands run here and report their output as text.
            ToolOutput::Terminal { .. } => None,
        })
        .collect()
}

fn update_of_call(call_id: &str) -> p::ToolCallUpdate {
    p::ToolCallUpdate {
        capabilities: None,
        content: None,
        kind: None,
        locations: None,
        meta: None,
        name: None,
        raw_input: None,
        raw_output: None,
        status: None,
        title: None,
        tool_call_id: p::ToolCallId(call_id.to_owned()),
    }
}

/// What a live call can do: every call Heron runs can be cancelled alone while it is
/// pending, waits for approval or runs (`tool_call/cancel`).
fn cancellable() -> Option<Option<p::ToolCallCapabilities>> {
    Some(Some(p::ToolCallCapabilities {
        cancel: Some(p::ToolCallCancelCapabilities { meta: None }),
        meta: None,
    }))
}

/// What a call at its final status can do: nothing any more. `null` clears the cancel
/// offered while it ran, where leaving the field out would keep it.
fn no_longer_cancellable() -> Option<Option<p::ToolCallCapabilities>> {
    Some(None)
}

/// The editor's MCP servers as [`Definition`]s, the form v1's checks take; a server type v2
/// may add later is refused by name rather than dropped.
pub fn mcp_definitions(servers: &[p::McpServer]) -> Result<Vec<Definition<'_>>, RpcError> {
    let mut definitions = Vec::with_capacity(servers.len());
    for (index, server) in servers.iter().enumerate() {
        definitions.push(match server {
            p::McpServer::Stdio(stdio) => Definition::Stdio {
                name: &stdio.name,
                command: &stdio.command.0,
                args: &stdio.args,
                env: stdio.env.iter().map(|v| (v.name.clone(), v.value.clone())).collect(),
            },
            p::McpServer::Http(http) => Definition::Http {
                name: &http.name,
                url: &http.url,
                headers: http.headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect(),
            },
            p::McpServer::Other(_) => {
                return Err(RpcError::invalid_params(
                    format!("mcpServers[{index}].type"),
                    "Heron starts stdio and http servers (session.mcp advertises which)",
                ));
            }
        });
    }
    Ok(definitions)
}

/// The tool call a permission request shows: all of it, so the user judges what will run.
pub fn permission_call(ask: &PermissionAsk) -> p::ToolCallUpdate {
    p::ToolCallUpdate {
        content: (!ask.content.is_empty()).then(|| tool_content(&ask.content)),
        kind: Some(Some(tool_kind(ask.kind))),
        locations: (!ask.locations.is_empty()).then(|| locations(&ask.locations)),
        meta: v1::subagent_meta(ask),
        name: Some(Some(ask.name.clone())),
        raw_input: Some(ask.raw_input.clone()),
        title: Some(Some(ask.title.clone())),
        ..update_of_call(&ask.call_id)
    }
}

fn plan(entries: &[PlanItem]) -> p::SessionUpdate {
    let entries = entries
        .iter()
        .map(|item| p::PlanEntry {
            content: item.content.clone(),
            meta: None,
            priority: match item.priority {
                PlanPriority::High => p::PlanEntryPriority::High,
                PlanPriority::Medium => p::PlanEntryPriority::Medium,
                PlanPriority::Low => p::PlanEntryPriority::Low,
            },
            status: match item.status {
                PlanStatus::Pending => p::PlanEntryStatus::Pending,
                PlanStatus::InProgress => p::PlanEntryStatus::InProgress,
                PlanStatus::Completed => p::PlanEntryStatus::Completed,
            },
        })
        .collect();
    // A session has one plan, replaced whole each time.
    p::SessionUpdate::PlanUpdate(p::PlanUpdate {
        meta: None,
        plan: p::PlanUpdateContent::Items(p::PlanItems {
            entries,
            meta: None,
            plan_id: p::PlanId("plan".to_owned()),
        }),
    })
}

/// Whether the updates of `event` are for replay only (`live` false) or also live.
fn event_updates(event: &Event, live: bool) -> Vec<p::SessionUpdate> {
    match event {
        // A custom command shows as the user typed it; the model read its expansion.
        Event::UserMessage { message_id, command: Some(line), .. } => {
            vec![p::SessionUpdate::UserMessage(p::UserMessage {
                content: Some(vec![text(line.clone())]),
                message_id: p::MessageId(message_id.clone()),
                meta: None,
            })]
        }
        Event::UserMessage { message_id, content, command: None } => {
            vec![p::SessionUpdate::UserMessage(p::UserMessage {
                content: Some(content.iter().map(user_block).collect()),
                message_id: p::MessageId(message_id.clone()),
                meta: None,
            })]
        }
        Event::GoalContinuation { message_id, text: t, count } => {
            vec![p::SessionUpdate::UserMessage(p::UserMessage {
                content: Some(vec![text(t.clone())]),
                message_id: p::MessageId(message_id.clone()),
                meta: json!({ "heron": { "goalContinuation": count } }).as_object().cloned(),
            })]
        }
        // Live, the text went out in chunks; the finished message is whole on replay.
        Event::AgentMessage { message_id, text: t } if !live => {
            vec![p::SessionUpdate::AgentMessage(p::AgentMessage {
                content: Some(vec![text(t.clone())]),
                message_id: p::MessageId(message_id.clone()),
                meta: None,
            })]
        }
        Event::AgentThought { message_id, text: t, .. } if !live && !t.is_empty() => {
            vec![p::SessionUpdate::AgentThought(p::AgentThought {
                content: Some(vec![text(t.clone())]),
                message_id: p::MessageId(message_id.clone()),
                meta: None,
            })]
        }
        Event::AgentMessage { .. } | Event::AgentThought { .. } | Event::TurnEnded { .. } => Vec::new(),
        Event::ToolCall { call_id, name, title, tool_kind: kind, raw_input, locations: locs, .. } => {
            vec![p::SessionUpdate::ToolCallUpdate(p::ToolCallUpdate {
                capabilities: if live { cancellable() } else { None },
                kind: Some(Some(tool_kind(*kind))),
                locations: Some(locations(locs)),
                name: Some(Some(name.clone())),
                raw_input: Some(raw_input.clone()),
                status: Some(Some(p::ToolCallStatus::Pending)),
                title: Some(Some(title.clone())),
                ..update_of_call(call_id)
            })]
        }
        Event::ToolResult { call_id, status, output, raw_output, for_model, .. } => {
            let mut update = update_of_call(call_id);
            update.status = Some(Some(tool_status(*status)));
            // Live, the call was offered cancel; replayed, it never was.
            if live {
                update.capabilities = no_longer_cancellable();
            }
            let mut content = tool_content(output);
            // What ran in a terminal on v1 has no terminal here: show what the model read.
            if content.is_empty() {
                content = tool_content(&[ToolOutput::Text { text: for_model.clone() }]);
            }
            update.content = Some(content);
            update.raw_output = raw_output.clone();
            vec![p::SessionUpdate::ToolCallUpdate(update)]
        }
        Event::Plan { entries } => vec![plan(entries)],
        // Live and replayed alike: the compaction, done, with what the model now reads in
        // place of what it replaced (the summary, or the note of what was clipped).
        // The model's working context is not part of the conversation shown.
        Event::Context(_) | Event::CommandChanges { .. } => Vec::new(),
        Event::Compacted(compaction) => {
            let marker = super::super::compaction::marker(compaction);
            vec![p::SessionUpdate::CompactionUpdate(p::CompactionUpdate {
                compaction_id: p::CompactionId(compaction.message_id.clone()),
                error: None,
                meta: json!({ "heron": { "compaction": marker } }).as_object().cloned(),
                status: p::CompactionStatus::Completed,
                summary: Some(vec![text(compaction.shown())]),
            })]
        }
    }
}

/// A compaction of `id` now at `status`.
fn compaction(id: &str, status: p::CompactionStatus, error: Option<String>) -> p::SessionUpdate {
    p::SessionUpdate::CompactionUpdate(p::CompactionUpdate {
        compaction_id: p::CompactionId(id.to_owned()),
        error,
        meta: None,
        status,
        summary: None,
    })
}

/// A notice as v2 shows it; none for an empty title, which v2 does not allow.
pub fn notice_update(notice: heron_core::types::Notice) -> Option<p::SessionUpdate> {
    use heron_core::types::NoticeSeverity as S;
    Some(p::SessionUpdate::Notice(p::Notice {
        description: notice.description,
        meta: None,
        severity: match notice.severity {
            S::Info => p::NoticeSeverity::Info,
            S::Warning => p::NoticeSeverity::Warning,
            S::Error => p::NoticeSeverity::Error,
        },
        title: notice.title.try_into().ok()?,
    }))
}

/// The updates a stored event replays as, in v2's whole-message forms.
pub fn replay_updates(event: &Event) -> Vec<p::SessionUpdate> {
    event_updates(event, false)
}

/// The updates a live turn update shows as.
pub fn turn_updates(update: TurnUpdate) -> Vec<p::SessionUpdate> {
    match update {
        TurnUpdate::Event(event) => event_updates(&event, true),
        TurnUpdate::MessageChunk { message_id, text: t, .. } => {
            vec![p::SessionUpdate::AgentMessageChunk(chunk(&message_id, text(t)))]
        }
        TurnUpdate::ThoughtChunk { message_id, text: t, .. } => {
            vec![p::SessionUpdate::AgentThoughtChunk(chunk(&message_id, text(t)))]
        }
        // v2 asks no capability for the compaction entity or for notices.
        TurnUpdate::CompactionStarted { id } => vec![compaction(&id, p::CompactionStatus::InProgress, None)],
        TurnUpdate::CompactionChunk { id, text: t, .. } => {
            vec![p::SessionUpdate::CompactionSummaryChunk(p::CompactionSummaryChunk {
                compaction_id: p::CompactionId(id),
                content: text(t),
                meta: None,
            })]
        }
        TurnUpdate::CompactionEnded { id, cancelled: true, .. } => {
            vec![compaction(&id, p::CompactionStatus::Cancelled, None)]
        }
        TurnUpdate::CompactionEnded { id, error, .. } => {
            vec![compaction(&id, p::CompactionStatus::Failed, Some(error))]
        }
        TurnUpdate::Notice(notice) => notice_update(notice).into_iter().collect(),
        TurnUpdate::ToolProgress { call_id, status, output } => {
            let mut update = update_of_call(&call_id);
            update.status = Some(Some(tool_status(status)));
            if !output.is_empty() {
                update.content = Some(tool_content(&output));
            }
            vec![p::SessionUpdate::ToolCallUpdate(update)]
        }
        // Appended to what the call shows; its final update replaces the whole content.
        TurnUpdate::ToolOutputChunk { call_id, output } => tool_content(&[output])
            .into_iter()
            .map(|content| {
                p::SessionUpdate::ToolCallContentChunk(p::ToolCallContentChunk {
                    content,
                    meta: None,
                    tool_call_id: p::ToolCallId(call_id.clone()),
                })
            })
            .collect(),
        TurnUpdate::Usage(report) => usage_update(&report).into_iter().collect(),
        TurnUpdate::Titled { title, updated_at } => {
            vec![p::SessionUpdate::SessionInfoUpdate(p::SessionInfoUpdate {
                meta: None,
                title: Some(Some(title)),
                updated_at: Some(Some(updated_at)),
            })]
        }
        TurnUpdate::Status(..) | TurnUpdate::Outcome(_) => Vec::new(),
        // The forwarder sends a request in its place; it is no update.
        TurnUpdate::Request(_) => Vec::new(),
    }
}

/// A usage report as a `usage_update`; `None` without a context window, which v2 requires
/// (`size`) as v1 does.
pub fn usage_update(report: &UsageReport) -> Option<p::SessionUpdate> {
    Some(p::SessionUpdate::UsageUpdate(p::UsageUpdate {
        // A report without a cost leaves the last one as it was.
        cost: report.cost.as_ref().map(|(amount, currency)| {
            Some(p::Cost { amount: *amount, currency: currency.clone(), meta: None })
        }),
        meta: None,
        size: report.size?,
        used: report.used,
    }))
}

/// A line the user typed, shown as their message under `message_id`.
pub fn user_line(line: String, message_id: String) -> p::SessionUpdate {
    p::SessionUpdate::UserMessage(p::UserMessage {
        content: Some(vec![text(line)]),
        message_id: p::MessageId(message_id),
        meta: None,
    })
}

/// `state_update` `running`: foreground work started.
pub fn running() -> p::SessionUpdate {
    p::SessionUpdate::StateUpdate(p::StateUpdate::Running(p::RunningStateUpdate {
        background: None,
        meta: None,
    }))
}

/// `state_update` `requires_action`: the turn waits for the user.
pub fn requires_action() -> p::SessionUpdate {
    p::SessionUpdate::StateUpdate(p::StateUpdate::RequiresAction(p::RequiresActionStateUpdate {
        background: None,
        meta: None,
    }))
}

/// `state_update` `idle` with how the turn ended: a stop reason, or the error it failed with
/// (the same code and message v1 answers the prompt with).
pub fn idle(ended: Result<StopReason, RpcError>) -> p::SessionUpdate {
    let idle = match ended {
        Ok(StopReason::EndTurn) => {
            p::IdleStateUpdate::EndTurn(p::IdleStateUpdateEndTurn { background: None, meta: None })
        }
        Ok(StopReason::MaxTokens) => {
            p::IdleStateUpdate::MaxTokens(p::IdleStateUpdateMaxTokens { background: None, meta: None })
        }
        Ok(StopReason::MaxTurnRequests) => {
            p::IdleStateUpdate::MaxTurnRequests(p::IdleStateUpdateMaxTurnRequests {
                background: None,
                meta: None,
            })
        }
        Ok(StopReason::Refusal) => {
            p::IdleStateUpdate::Refusal(p::IdleStateUpdateRefusal { background: None, meta: None })
        }
        Ok(StopReason::Cancelled) => {
            p::IdleStateUpdate::Cancelled(p::IdleStateUpdateCancelled { background: None, meta: None })
        }
        Err(err) => p::IdleStateUpdate::Error(p::IdleStateUpdateError {
            background: None,
            error: Some(p::Error {
                code: p::ErrorCode(err.code),
                data: err.data.map(p::ErrorData::Other),
                message: err.message,
            }),
            meta: None,
        }),
    };
    p::SessionUpdate::StateUpdate(p::StateUpdate::Idle(idle))
}

/// `state_update` `idle` with no stop reason: the state of a session at rest (after a
/// replay, or before its first prompt).
pub fn at_rest() -> p::SessionUpdate {
    p::SessionUpdate::StateUpdate(p::StateUpdate::Idle(p::IdleStateUpdate::None(p::IdleStateUpdateNone {
        background: None,
        meta: None,
        stop_reason: (),
    })))
}
