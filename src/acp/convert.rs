//! Conversions between protocol types and the core's own, in both directions. The one
//! place where ACP shapes meet session events.

use base64::Engine as _;
use serde_json::json;

use super::compaction;
use heron_core::session::attachments::{self, ReadBack};
use heron_core::session::event::Event;
use heron_core::session::settings::{Mode, Settings};
use heron_core::session::update::TurnUpdate;
use heron_core::tools::editor::PermissionAsk;
use heron_core::types::{
    Location, PlanItem, PlanPriority, PlanStatus, PromptInput, StopReason, TokenTotals, ToolKind, ToolOutput,
    ToolStatus, UsageReport, UserContent,
};
use heron_protocol::{
    self as p, BlobResourceContents, ContentBlock, ContentChunk, EmbeddedResource, EmbeddedResourceResource,
    ImageContent, MessageId, PlanEntry, PlanEntryPriority, PlanEntryStatus, ResourceLink, RpcError,
    SessionMode, SessionModeId, SessionModeState, SessionUpdate, TextContent, TextResourceContents,
    ToolCallContent, ToolCallId, ToolCallLocation,
};

/// Image types Heron accepts in prompts.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The image type `bytes` start like (their magic number), if it is one Heron takes.
fn sniff_image(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Checks that image data is a non-empty image of the type it claims: a model given bytes
/// that are not what the prompt says fails the whole turn later, and far less clearly.
fn checked_image(data: Vec<u8>, claimed: &str, at: usize) -> Result<Vec<u8>, RpcError> {
    if data.is_empty() {
        return Err(RpcError::invalid_params(format!("prompt[{at}].data"), "the image is empty"));
    }
    match sniff_image(&data) {
        Some(actual) if actual == claimed => Ok(data),
        Some(actual) => Err(RpcError::invalid_params(
            format!("prompt[{at}].mimeType"),
            format!("the image says `{claimed}` but its data is {actual}"),
        )),
        None => Err(RpcError::invalid_params(
            format!("prompt[{at}].data"),
            format!(
                "the data is not an image of type `{claimed}` (its first bytes match no image format Heron knows)"
            ),
        )),
    }
}

fn text_block(text: String) -> ContentBlock {
    ContentBlock::Text(TextContent { annotations: None, meta: None, text })
}

/// An image block of prompt block `at` (either protocol version: the fields are the same),
/// checked: a type Heron takes, valid base64, bytes that are that type.
pub fn image_input(
    data: &str,
    mime_type: String,
    uri: Option<String>,
    at: usize,
) -> Result<PromptInput, RpcError> {
    if !IMAGE_TYPES.contains(&mime_type.as_str()) {
        return Err(RpcError::invalid_params(
            format!("prompt[{at}].mimeType"),
            format!("unsupported image type `{mime_type}`; use one of {}", IMAGE_TYPES.join(", ")),
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD.decode(data.trim()).map_err(|e| {
        RpcError::invalid_params(format!("prompt[{at}].data"), format!("invalid base64: {e}"))
    })?;
    let data = checked_image(bytes, &mime_type, at)?;
    Ok(PromptInput::Attachment { image: true, mime_type, data, uri })
}

/// An embedded binary resource of prompt block `at` (either version), its base64 checked.
pub fn blob_input(
    blob: &str,
    mime_type: Option<String>,
    uri: String,
    at: usize,
) -> Result<PromptInput, RpcError> {
    let data = base64::engine::general_purpose::STANDARD.decode(blob.trim()).map_err(|e| {
        RpcError::invalid_params(format!("prompt[{at}].resource.blob"), format!("invalid base64: {e}"))
    })?;
    Ok(PromptInput::Attachment {
        image: false,
        mime_type: mime_type.unwrap_or_else(|| "application/octet-stream".to_owned()),
        data,
        uri: Some(uri),
    })
}

/// Reads a prompt, refusing what Heron cannot take: bad base64, unsupported images, audio.
/// `field` names the offending block in errors, e.g. `prompt[2].data`.
pub fn prompt_input(blocks: Vec<ContentBlock>) -> Result<Vec<PromptInput>, RpcError> {
    blocks
        .into_iter()
        .enumerate()
        .map(|(at, block)| match block {
            ContentBlock::Text(text) => Ok(PromptInput::Content(UserContent::Text { text: text.text })),
            ContentBlock::Image(image) => image_input(&image.data, image.mime_type, image.uri, at),
            ContentBlock::Audio(_) => Err(RpcError::invalid_params(
                format!("prompt[{at}]"),
                "audio prompts are not supported (promptCapabilities.audio is false)",
            )),
            ContentBlock::ResourceLink(link) => Ok(PromptInput::Content(UserContent::Link {
                uri: link.uri,
                name: link.name,
                mime_type: link.mime_type,
                title: link.title,
                description: link.description,
                size: link.size,
            })),
            ContentBlock::Resource(embedded) => match embedded.resource {
                EmbeddedResourceResource::TextResourceContents(text) => {
                    Ok(PromptInput::Content(UserContent::Resource {
                        uri: text.uri,
                        mime_type: text.mime_type,
                        text: text.text,
                    }))
                }
                EmbeddedResourceResource::BlobResourceContents(blob) => {
                    blob_input(&blob.blob, blob.mime_type, blob.uri, at)
                }
            },
        })
        .collect()
}

/// The content blocks a prompt shows as (an inbox item's, before it runs).
pub fn prompt_blocks(input: &[PromptInput]) -> Vec<ContentBlock> {
    // Before it runs, a prompt carries its images and blobs as `Attachment`s: its content
    // refers to no saved file.
    let no_files = ReadBack::default();
    input
        .iter()
        .map(|item| match item {
            PromptInput::Content(content) => user_block(content, &no_files),
            PromptInput::Attachment { image: true, mime_type, data, uri } => {
                ContentBlock::Image(ImageContent {
                    annotations: None,
                    data: base64::engine::general_purpose::STANDARD.encode(data),
                    meta: None,
                    mime_type: mime_type.clone(),
                    uri: uri.clone(),
                })
            }
            PromptInput::Attachment { image: false, mime_type, data, uri } => {
                ContentBlock::Resource(EmbeddedResource {
                    annotations: None,
                    meta: None,
                    resource: EmbeddedResourceResource::BlobResourceContents(BlobResourceContents {
                        blob: base64::engine::general_purpose::STANDARD.encode(data),
                        meta: None,
                        mime_type: Some(mime_type.clone()),
                        uri: uri.clone().unwrap_or_default(),
                    }),
                })
            }
        })
        .collect()
}

/// The content block a stored user message replays as, its saved files from `files`.
fn user_block(content: &UserContent, files: &ReadBack) -> ContentBlock {
    match content {
        UserContent::Text { text } => text_block(text.clone()),
        UserContent::Image { mime_type, path, uri } => match files.get(path) {
            Some(bytes) => ContentBlock::Image(ImageContent {
                annotations: None,
                data: base64::engine::general_purpose::STANDARD.encode(bytes),
                meta: None,
                mime_type: mime_type.clone(),
                uri: uri.clone(),
            }),
            None => text_block(format!("[image no longer available at {path}]")),
        },
        UserContent::Resource { uri, mime_type, text } => ContentBlock::Resource(EmbeddedResource {
            annotations: None,
            meta: None,
            resource: EmbeddedResourceResource::TextResourceContents(TextResourceContents {
                meta: None,
                mime_type: mime_type.clone(),
                text: text.clone(),
                uri: uri.clone(),
            }),
        }),
        UserContent::Blob { uri, mime_type, path } => match files.get(path) {
            Some(bytes) => ContentBlock::Resource(EmbeddedResource {
                annotations: None,
                meta: None,
                resource: EmbeddedResourceResource::BlobResourceContents(BlobResourceContents {
                    blob: base64::engine::general_purpose::STANDARD.encode(bytes),
                    meta: None,
                    mime_type: mime_type.clone(),
                    uri: uri.clone(),
                }),
            }),
            None => text_block(format!("[resource {uri} no longer available]")),
        },
        UserContent::Link { uri, name, mime_type, title, description, size } => {
            ContentBlock::ResourceLink(ResourceLink {
                annotations: None,
                description: description.clone(),
                meta: None,
                mime_type: mime_type.clone(),
                name: name.clone(),
                size: *size,
                title: title.clone(),
                uri: uri.clone(),
            })
        }
    }
}

fn chunk(message_id: &str, content: ContentBlock) -> ContentChunk {
    ContentChunk { content, message_id: Some(MessageId(message_id.to_owned())), meta: None }
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
        // v1 has no cancelled status: a cancelled call shows as failed, as it always has.
        ToolStatus::Failed | ToolStatus::Cancelled => p::ToolCallStatus::Failed,
    }
}

fn locations(locations: &[Location]) -> Vec<ToolCallLocation> {
    // An editor opens each location as a buffer: folders are named in the title instead.
    locations
        .iter()
        .filter(|l| !l.folder)
        .map(|l| ToolCallLocation { line: l.line, meta: None, path: l.path.clone() })
        .collect()
}

fn tool_content(output: &[ToolOutput]) -> Vec<ToolCallContent> {
    output
        .iter()
        .map(|o| match o {
            ToolOutput::Text { text } => {
                ToolCallContent::Content(p::Content { content: text_block(text.clone()), meta: None })
            }
            ToolOutput::Diff { path, old_text, new_text } => ToolCallContent::Diff(p::Diff {
                meta: None,
                new_text: new_text.clone(),
                old_text: old_text.clone(),
                path: path.clone(),
            }),
            ToolOutput::Terminal { terminal_id } => ToolCallContent::Terminal(p::Terminal {
                meta: None,
                terminal_id: p::TerminalId(terminal_id.clone()),
            }),
        })
        .collect()
}

/// The tool call a permission request shows: all of it, so the user judges what will run.
pub fn permission_call(ask: &PermissionAsk) -> p::ToolCallUpdate {
    p::ToolCallUpdate {
        content: (!ask.content.is_empty()).then(|| tool_content(&ask.content)),
        kind: Some(tool_kind(ask.kind)),
        locations: (!ask.locations.is_empty()).then(|| locations(&ask.locations)),
        meta: subagent_meta(ask),
        name: Some(ask.name.clone()),
        raw_input: Some(ask.raw_input.clone()),
        raw_output: None,
        status: None,
        title: Some(ask.title.clone()),
        tool_call_id: ToolCallId(ask.call_id.clone()),
    }
}

/// `_meta.heron` of a subagent's permission request: the parent's call (the card it is asked
/// on) and the child's own call, so an editor can tell the two apart.
pub fn subagent_meta(ask: &PermissionAsk) -> Option<serde_json::Map<String, serde_json::Value>> {
    let child = ask.subagent_call_id.as_ref()?;
    let heron = serde_json::json!({ "parentToolCallId": ask.call_id, "subagentToolCallId": child });
    Some(serde_json::Map::from_iter([("heron".to_owned(), heron)]))
}

fn plan_entry(item: &PlanItem) -> PlanEntry {
    PlanEntry {
        content: item.content.clone(),
        meta: None,
        priority: match item.priority {
            PlanPriority::High => PlanEntryPriority::High,
            PlanPriority::Medium => PlanEntryPriority::Medium,
            PlanPriority::Low => PlanEntryPriority::Low,
        },
        status: match item.status {
            PlanStatus::Pending => PlanEntryStatus::Pending,
            PlanStatus::InProgress => PlanEntryStatus::InProgress,
            PlanStatus::Completed => PlanEntryStatus::Completed,
        },
    }
}

fn update_of_call(call_id: &str) -> p::ToolCallUpdate {
    p::ToolCallUpdate {
        content: None,
        kind: None,
        locations: None,
        meta: None,
        name: None,
        raw_input: None,
        raw_output: None,
        status: None,
        title: None,
        tool_call_id: ToolCallId(call_id.to_owned()),
    }
}

/// What a client opted into that changes what it is sent: ACP's compaction entity
/// (`session.compaction`) and notices (`session.notices`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Opted {
    /// Compactions as `compaction_update` and `compaction_summary_chunk`.
    pub compaction: bool,
    /// Notices as `notice` updates.
    pub notices: bool,
    /// Boolean config options (`session.configOptions.boolean`).
    pub boolean_options: bool,
}

impl Opted {
    /// What `capabilities` opted into.
    pub fn of(capabilities: &p::ClientCapabilities) -> Self {
        let session = capabilities.session.as_ref();
        Self {
            compaction: session.is_some_and(|s| s.compaction.is_some()),
            notices: session.is_some_and(|s| s.notices.is_some()),
            boolean_options: session
                .and_then(|s| s.config_options.as_ref())
                .is_some_and(|c| c.boolean.is_some()),
        }
    }
}

/// The updates a durable event shows as, live or replayed. Live and replay share this one
/// path, so a loaded session looks the way it did. `files` are those [`files_shown`] read.
pub fn event_updates(event: &Event, files: &ReadBack, opted: Opted) -> Vec<SessionUpdate> {
    match event {
        // A custom command shows as the user typed it; the model read its expansion.
        Event::UserMessage { message_id, command: Some(line), .. } => {
            let mut content = chunk(message_id, text_block(line.clone()));
            let name = line.trim_start_matches('/').split_whitespace().next().unwrap_or_default();
            content.meta = json!({ "heron": { "command": name } }).as_object().cloned();
            vec![SessionUpdate::UserMessageChunk(content)]
        }
        Event::UserMessage { message_id, content, command: None } => content
            .iter()
            .map(|c| SessionUpdate::UserMessageChunk(chunk(message_id, user_block(c, files))))
            .collect(),
        // Heron wrote it, so it says so; the model read it as the user's.
        Event::GoalContinuation { message_id, text, count } => {
            let mut content = chunk(message_id, text_block(text.clone()));
            content.meta = json!({ "heron": { "goalContinuation": count } }).as_object().cloned();
            vec![SessionUpdate::UserMessageChunk(content)]
        }
        // Live, the text went out in chunks; the finished message is only replayed.
        Event::AgentMessage { .. } | Event::AgentThought { .. } | Event::TurnEnded { .. } => Vec::new(),
        Event::ToolCall { call_id, name, title, tool_kind: kind, raw_input, locations: locs, .. } => {
            vec![SessionUpdate::ToolCall(p::ToolCall {
                content: Vec::new(),
                kind: Some(tool_kind(*kind)),
                locations: locations(locs),
                meta: None,
                name: Some(name.clone()),
                raw_input: Some(raw_input.clone()),
                raw_output: None,
                status: Some(p::ToolCallStatus::Pending),
                title: title.clone(),
                tool_call_id: ToolCallId(call_id.clone()),
            })]
        }
        Event::ToolResult { call_id, status, output, raw_output, .. } => {
            let mut update = update_of_call(call_id);
            update.status = Some(tool_status(*status));
            // No output leaves what the call showed while running (a live terminal) alone.
            if !output.is_empty() {
                update.content = Some(tool_content(output));
            }
            update.raw_output = raw_output.clone();
            vec![SessionUpdate::ToolCallUpdate(update)]
        }
        Event::Plan { entries } => {
            vec![SessionUpdate::Plan(p::Plan {
                entries: entries.iter().map(plan_entry).collect(),
                meta: None,
            })]
        }
        // Live, the summary streamed under this id already.
        Event::Compacted(compaction) => vec![compaction::done(compaction, opted.compaction, true)],
        // What the model was told of its surroundings is the status's to show (its
        // instruction files), not the conversation's.
        Event::Context(_) | Event::CommandChanges { .. } => Vec::new(),
    }
}

/// The files showing `event` takes (the images and blobs a user message attached), read
/// back off the async threads; none for any other event.
pub async fn files_shown(event: &Event) -> ReadBack {
    match event {
        Event::UserMessage { content, command: None, .. } if attachments::reads_files(content) => {
            attachments::read_back(content).await
        }
        _ => ReadBack::default(),
    }
}

/// The updates a replayed event shows as: like live, plus finished messages whole.
/// `files` are those [`files_shown`] read.
pub fn replay_updates(event: &Event, files: &ReadBack, opted: Opted) -> Vec<SessionUpdate> {
    match event {
        Event::AgentMessage { message_id, text } => {
            vec![SessionUpdate::AgentMessageChunk(chunk(message_id, text_block(text.clone())))]
        }
        // A thought that is only structured data has no text to show.
        Event::AgentThought { text, .. } if text.is_empty() => Vec::new(),
        Event::AgentThought { message_id, text, .. } => {
            vec![SessionUpdate::AgentThoughtChunk(chunk(message_id, text_block(text.clone())))]
        }
        // The summary and its note, whole.
        Event::Compacted(compaction) => vec![compaction::done(compaction, opted.compaction, false)],
        // A replayed call has no live terminal left: show the rest of what it reported, or
        // what the model was told.
        Event::ToolResult { output, for_model, .. }
            if output.is_empty() || output.iter().any(|o| matches!(o, ToolOutput::Terminal { .. })) =>
        {
            let mut kept: Vec<ToolOutput> =
                output.iter().filter(|o| !matches!(o, ToolOutput::Terminal { .. })).cloned().collect();
            if kept.is_empty() {
                kept.push(ToolOutput::Text { text: for_model.clone() });
            }
            let mut updates = event_updates(event, files, opted);
            if let Some(SessionUpdate::ToolCallUpdate(update)) = updates.first_mut() {
                update.content = Some(tool_content(&kept));
            }
            updates
        }
        other => event_updates(other, files, opted),
    }
}

/// The updates a live turn update shows as; `files` are those [`files_shown`] read for its
/// event.
pub fn turn_updates(update: TurnUpdate, files: &ReadBack, opted: Opted) -> Vec<SessionUpdate> {
    match update {
        TurnUpdate::Event(event) => event_updates(&event, files, opted),
        TurnUpdate::CompactionStarted { id } => compaction::started(&id, opted.compaction),
        TurnUpdate::CompactionChunk { id, text, .. } => vec![compaction::piece(&id, text, opted.compaction)],
        TurnUpdate::CompactionEnded { id, cancelled, error } => {
            compaction::ended(&id, cancelled, error, opted.compaction)
        }
        // A notice is live information, not a session update of the turn's: the forwarder
        // shows it (`notices`).
        TurnUpdate::Notice(_) => Vec::new(),
        TurnUpdate::MessageChunk { message_id, text, .. } => {
            vec![SessionUpdate::AgentMessageChunk(chunk(&message_id, text_block(text)))]
        }
        TurnUpdate::ThoughtChunk { message_id, text, .. } => {
            vec![SessionUpdate::AgentThoughtChunk(chunk(&message_id, text_block(text)))]
        }
        TurnUpdate::ToolProgress { call_id, status, output } => {
            let mut update = update_of_call(&call_id);
            update.status = Some(tool_status(status));
            if !output.is_empty() {
                update.content = Some(tool_content(&output));
            }
            vec![SessionUpdate::ToolCallUpdate(update)]
        }
        // v1 shows a local command's output when it ends, as the call's result.
        TurnUpdate::ToolOutputChunk { .. } => Vec::new(),
        TurnUpdate::Usage(report) => usage_update(&report).into_iter().collect(),
        TurnUpdate::Titled { title, updated_at } => {
            vec![SessionUpdate::SessionInfoUpdate(p::SessionInfoUpdate {
                meta: None,
                title: Some(Some(title)),
                updated_at: Some(Some(updated_at)),
            })]
        }
        // Status is not a session update; the prompt handler forwards it on its own.
        TurnUpdate::Status(..) => Vec::new(),
        // The outcome goes in the prompt's answer, which the prompt handler builds.
        TurnUpdate::Outcome(_) => Vec::new(),
        // The forwarder sends a request in its place; it is no update.
        TurnUpdate::Request(_) => Vec::new(),
    }
}

/// A usage report as a `usage_update`; `None` when the model's context window is unknown.
/// ACP requires `size` in every `usage_update`, and a made-up window (0, or a guess) would
/// draw a wrong meter, so without one no update is sent: the tokens and the cost are still
/// in `_heron/session/status` (`costQuote`).
pub fn usage_update(report: &UsageReport) -> Option<SessionUpdate> {
    Some(SessionUpdate::UsageUpdate(p::UsageUpdate {
        cost: report.cost.as_ref().map(|(amount, currency)| p::Cost {
            amount: *amount,
            currency: currency.clone(),
            meta: None,
        }),
        meta: Some(tokens_meta(&report.tokens)),
        size: report.size?,
        used: report.used,
    }))
}

/// A session's token totals as the wire shows them.
pub fn token_usage(tokens: &TokenTotals) -> p::HeronTokenUsage {
    p::HeronTokenUsage {
        input_tokens: tokens.input,
        output_tokens: tokens.output,
        cached_read_tokens: tokens.cached_read,
        cached_write_tokens: tokens.cache_write,
        thought_tokens: tokens.thought,
    }
}

/// `_meta.heron.tokens` of a `usage_update`: the session's token totals by kind, which ACP
/// v1's `usage_update` has no field for.
fn tokens_meta(tokens: &TokenTotals) -> serde_json::Map<String, serde_json::Value> {
    let value = serde_json::to_value(token_usage(tokens)).unwrap_or_default();
    serde_json::Map::from_iter([("heron".to_owned(), serde_json::json!({ "tokens": value }))])
}

/// The protocol stop reason.
pub fn stop_reason(reason: StopReason) -> p::StopReason {
    match reason {
        StopReason::EndTurn => p::StopReason::EndTurn,
        StopReason::MaxTokens => p::StopReason::MaxTokens,
        StopReason::MaxTurnRequests => p::StopReason::MaxTurnRequests,
        StopReason::Refusal => p::StopReason::Refusal,
        StopReason::Cancelled => p::StopReason::Cancelled,
    }
}

/// The modes offered and the current one.
pub fn modes(settings: &Settings) -> SessionModeState {
    SessionModeState {
        available_modes: Mode::ALL
            .into_iter()
            .map(|m| SessionMode {
                description: Some(m.description().to_owned()),
                id: SessionModeId(m.id().to_owned()),
                meta: None,
                name: m.name().to_owned(),
            })
            .collect(),
        current_mode_id: SessionModeId(settings.mode.id().to_owned()),
        meta: None,
    }
}

/// An agent message of one piece (slash command replies).
pub fn agent_message(message_id: &str, text: String) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(chunk(message_id, text_block(text)))
}
