//! What Heron does with every variant of the protocol's open-ended parts, as exhaustive
//! matches and patterns (no `_` arm, no `..`): a schema upgrade that adds a session update,
//! a content block or a capability does not compile until it is placed here. The
//! classification written for people (`x-variants` in the vendor schema, the table in
//! `generated/METHODS.md`) is checked against these by the tests below.

use heron_protocol::{
    AgentAuthCapabilities, AgentCapabilities, AuthCapabilities, ClientCapabilities,
    ClientSessionCapabilities, ContentBlockKind, ElicitationCapabilities, FileSystemCapabilities,
    McpCapabilities, PromptCapabilities, SessionCapabilities, SessionConfigOptionsCapabilities,
    SessionSystemPromptCapabilities, SessionSystemPromptModeCapabilities, SessionUpdateKind,
};

use super::convert::Opted;

/// Whether an update of `kind` may go to a client that opted into `opted`: ACP lets an
/// agent send `notice` and the compaction entity only after the client's capability.
pub fn may_send(kind: SessionUpdateKind, opted: Opted) -> bool {
    use SessionUpdateKind as K;
    match kind {
        K::UserMessageChunk
        | K::AgentMessageChunk
        | K::AgentThoughtChunk
        | K::ToolCall
        | K::ToolCallUpdate
        | K::Plan
        | K::AvailableCommandsUpdate
        | K::CurrentModeUpdate
        | K::ConfigOptionUpdate
        | K::SessionInfoUpdate
        | K::UsageUpdate => true,
        K::Notice => opted.notices,
        K::CompactionUpdate | K::CompactionSummaryChunk => opted.compaction,
    }
}

/// Whether a prompt may carry a block of `kind` (`promptCapabilities`).
pub fn accepted_in_prompt(kind: ContentBlockKind) -> bool {
    use ContentBlockKind as K;
    match kind {
        K::Text | K::Image | K::ResourceLink | K::Resource => true,
        // No provider Heron drives takes audio.
        K::Audio => false,
    }
}

/// The capability paths a client advertised (a flag true, a marker object present), as the
/// vendor schema's `x-variants` names them.
pub fn advertised_by_client(capabilities: &ClientCapabilities) -> Vec<&'static str> {
    let ClientCapabilities { auth, elicitation, fs, meta: _, session, terminal } = capabilities;
    let mut on = Vec::new();
    let mut flag = |path: &'static str, set: bool| {
        if set {
            on.push(path);
        }
    };
    if let Some(FileSystemCapabilities { meta: _, read_text_file, write_text_file }) = fs {
        flag("fs.readTextFile", *read_text_file == Some(true));
        flag("fs.writeTextFile", *write_text_file == Some(true));
    }
    flag("terminal", *terminal == Some(true));
    if let Some(ClientSessionCapabilities { compaction, config_options, meta: _, notices }) = session {
        flag("session.compaction", compaction.is_some());
        if let Some(SessionConfigOptionsCapabilities { boolean, meta: _ }) = config_options {
            flag("session.configOptions.boolean", boolean.is_some());
        }
        flag("session.notices", notices.is_some());
    }
    if let Some(AuthCapabilities { meta: _, terminal }) = auth {
        flag("auth.terminal", *terminal == Some(true));
    }
    if let Some(ElicitationCapabilities { form, meta: _, url }) = elicitation {
        flag("elicitation.form", form.is_some());
        flag("elicitation.url", url.is_some());
    }
    on
}

/// The capability paths `capabilities` advertises, named as for [`advertised_by_client`].
pub fn advertised_by_agent(capabilities: &AgentCapabilities) -> Vec<&'static str> {
    let AgentCapabilities {
        auth,
        load_session,
        mcp_capabilities,
        meta: _,
        prompt_capabilities,
        session_capabilities,
    } = capabilities;
    let mut on = Vec::new();
    let mut flag = |path: &'static str, set: bool| {
        if set {
            on.push(path);
        }
    };
    flag("loadSession", *load_session == Some(true));
    if let Some(PromptCapabilities { audio, embedded_context, image, meta: _ }) = prompt_capabilities {
        flag("promptCapabilities.image", *image == Some(true));
        flag("promptCapabilities.audio", *audio == Some(true));
        flag("promptCapabilities.embeddedContext", *embedded_context == Some(true));
    }
    if let Some(McpCapabilities { http, meta: _, sse }) = mcp_capabilities {
        flag("mcpCapabilities.http", *http == Some(true));
        flag("mcpCapabilities.sse", *sse == Some(true));
    }
    if let Some(SessionCapabilities {
        additional_directories,
        archive,
        close,
        delete,
        fork,
        list,
        meta: _,
        resume,
        status,
        system_prompt,
        title,
    }) = session_capabilities
    {
        flag("sessionCapabilities.list", list.is_some());
        flag("sessionCapabilities.delete", delete.is_some());
        flag("sessionCapabilities.additionalDirectories", additional_directories.is_some());
        if let Some(SessionSystemPromptCapabilities { meta: _, mode }) = system_prompt
            && let Some(SessionSystemPromptModeCapabilities { meta: _, override_ }) = mode
        {
            flag("sessionCapabilities.systemPrompt.mode.override", override_.is_some());
        }
        flag("sessionCapabilities.fork", fork.is_some());
        flag("sessionCapabilities.archive", archive.is_some());
        flag("sessionCapabilities.status", status.is_some());
        flag("sessionCapabilities.title", title.is_some());
        flag("sessionCapabilities.resume", resume.is_some());
        flag("sessionCapabilities.close", close.is_some());
    }
    if let Some(AgentAuthCapabilities { logout, meta: _ }) = auth {
        flag("auth.logout", logout.is_some());
    }
    on
}

#[cfg(test)]
pub(super) mod tests {
    use serde_json::{Value, json};

    use super::*;
    use heron_protocol::CLIENT_CAPABILITIES_CLASSIFIED;

    pub(in crate::acp) fn sorted(mut paths: Vec<&str>) -> Vec<&str> {
        paths.sort_unstable();
        paths
    }

    pub(in crate::acp) fn paths<'a>(classified: &[(&'a str, &str)]) -> Vec<&'a str> {
        classified.iter().map(|(path, _)| *path).collect()
    }

    const EVERYTHING: Opted = Opted { compaction: true, notices: true, boolean_options: true };
    const NOTHING: Opted = Opted { compaction: false, notices: false, boolean_options: false };

    #[test]
    fn what_heron_sends_matches_the_classification_people_read() {
        for kind in SessionUpdateKind::ALL.iter().copied() {
            let (always, when_asked) = (may_send(kind, NOTHING), may_send(kind, EVERYTHING));
            match kind.heron() {
                "sends" => assert!(always, "{}", kind.wire()),
                "sends when advertised" => assert!(when_asked && !always, "{}", kind.wire()),
                "declined" => assert!(!when_asked, "{}", kind.wire()),
                other => panic!("{} is classified `{other}`, which is no update's", kind.wire()),
            }
        }
        for kind in ContentBlockKind::ALL.iter().copied() {
            assert_eq!(accepted_in_prompt(kind), kind.heron() != "declined", "{}", kind.wire());
        }
    }

    /// A capability set with every path of `classified` on (`true` for a flag, `{}` for a
    /// marker object, as the schema takes either).
    pub(in crate::acp) fn all_on(classified: &[(&str, &str)], flags: &[&str]) -> Value {
        let mut value = json!({});
        for (path, _) in classified {
            let mut at = &mut value;
            let parts: Vec<&str> = path.split('.').collect();
            for part in &parts[..parts.len() - 1] {
                at = at.as_object_mut().expect("an object").entry(*part).or_insert_with(|| json!({}));
            }
            let leaf = if flags.contains(path) { json!(true) } else { json!({}) };
            at[parts[parts.len() - 1]] = leaf;
        }
        value
    }

    #[test]
    fn every_client_capability_of_the_schema_is_read_by_name() {
        let flags = ["fs.readTextFile", "fs.writeTextFile", "terminal", "auth.terminal"];
        let value = all_on(&CLIENT_CAPABILITIES_CLASSIFIED, &flags);
        let capabilities: ClientCapabilities = serde_json::from_value(value).expect("decodes");
        assert_eq!(
            sorted(advertised_by_client(&capabilities)),
            sorted(paths(&CLIENT_CAPABILITIES_CLASSIFIED))
        );
    }
}
