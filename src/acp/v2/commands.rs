//! Slash commands over ACP v2: the session's commands advertised as v2's
//! `available_commands_update`, and Heron's own commands (`/help`, `/status`, `/mode`, ...)
//! run here without the model, as a turn the v2 way: `running`, the command line as the
//! user message under the prompt's id, the reply as an agent message, `idle`.

use heron_core::extensions::Catalog;
use heron_core::session::Session;
use heron_core::session::commands::Invocation;
use heron_core::session::outbound::Place;
use heron_core::tools::mcp::McpHub;
use heron_core::types::StopReason;
use heron_protocol::runtime::{Outgoing, Then};
use heron_protocol::v2::{
    self as p, AgentMessage, AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, Command,
    ConfigOptionUpdate, ContentBlock, MessageId, SessionUpdate, TextCommandInput, TextContent, UserMessage,
};

use super::{Inner, convert, settings};

fn hint(text: &str) -> AvailableCommandInput {
    AvailableCommandInput::Text(TextCommandInput { hint: text.to_owned(), meta: None })
}

/// Every command of a session with `catalog` and its MCP servers' `prompts`, Heron's own
/// first.
fn available(catalog: &Catalog, mcp: &McpHub) -> Vec<AvailableCommand> {
    let prompts = mcp.prompts();
    let builtin = super::super::commands::builtins(mcp).map(|c| Command {
        description: c.description.to_owned(),
        input: c.hint.map(hint),
        meta: None,
        name: c.name.to_owned(),
    });
    let custom = catalog.commands().map(|c| Command {
        description: c.description.clone(),
        input: c.hint.as_deref().map(hint),
        meta: None,
        name: c.name.clone(),
    });
    let mcp = prompts.iter().map(|prompt| Command {
        description: super::super::commands::prompt_description(prompt),
        input: super::super::commands::prompt_hint(prompt).as_deref().map(hint),
        meta: None,
        name: prompt.command(),
    });
    builtin.chain(custom).chain(mcp).map(AvailableCommand::Command).collect()
}

/// Advertises the session's commands right behind the answer that made it known.
pub(super) fn advertise<O: Outgoing>(inner: &Inner<O>, then: &mut Then, session: &Session) {
    let catalog = session.commands();
    let update = SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate {
        available_commands: available(&catalog, session.mcp()),
        meta: super::super::commands::meta(&catalog),
    });
    inner.then_send(then, session.id(), update);
}

fn text(text: String) -> ContentBlock {
    ContentBlock::Text(TextContent { annotations: None, meta: None, text })
}

/// A command's reply for the user, and whether it changed the session's settings.
pub(super) struct Reply {
    pub(super) text: String,
    pub(super) changed: bool,
}

/// Runs one of Heron's own commands at once, typed as the line of `shown` (with the
/// prompt's message id), and answers at its `place`.
pub(super) async fn run<O: Outgoing>(
    inner: &Inner<O>,
    session: &Session,
    invocation: Invocation,
    shown: (String, String),
    place: Place,
) {
    let (text, changed) = super::super::commands::run_here(session, &invocation).await;
    answer(inner, session, shown, Reply { text, changed }, place).await;
}

/// Once the runs before `place` are out, shows the line of `shown` as the user's message
/// under its id and the reply as the agent's, as a turn of its own (`running` to `idle`);
/// when the reply `changed` the settings, the new config options follow. The session's
/// next run goes out after.
pub(super) async fn answer<O: Outgoing>(
    inner: &Inner<O>,
    session: &Session,
    (line, message_id): (String, String),
    reply: Reply,
    place: Place,
) {
    let sent = place.reached().await;
    let id = session.id();
    let _ = inner.send(id, convert::running()).await;
    let user = UserMessage { content: Some(vec![text(line)]), message_id: MessageId(message_id), meta: None };
    let _ = inner.send(id, SessionUpdate::UserMessage(user)).await;
    let answer = AgentMessage {
        content: Some(vec![text(reply.text)]),
        message_id: MessageId(uuid::Uuid::new_v4().to_string()),
        meta: None,
    };
    let _ = inner.send(id, SessionUpdate::AgentMessage(answer)).await;
    if reply.changed {
        let options = ConfigOptionUpdate { config_options: settings::options_of(session), meta: None };
        let _ = inner.send(id, p::SessionUpdate::ConfigOptionUpdate(options)).await;
    }
    let _ = inner.send(id, convert::idle(Ok(StopReason::EndTurn))).await;
    sent.done();
}
