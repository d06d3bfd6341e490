//! The connection's start: `initialize` (version, what Heron serves, the client's
//! capabilities, whether this machine can sandbox commands) and `authenticate` (Heron's
//! one auth method runs in a terminal).

use std::sync::PoisonError;

use heron_core::sandbox::Support;
use serde_json::{Map, Value, json};

use heron_protocol::runtime::Outgoing;
use heron_protocol::{
    AgentCapabilities, AuthMethod, AuthMethodId, AuthMethodTerminal, AuthenticateRequest,
    AuthenticateResponse, ContentBlockKind, Implementation, InitializeRequest, InitializeResponse,
    McpCapabilities, PromptCapabilities, ProtocolVersion, RpcError, SessionCapabilities,
};

use super::{HeronAgent, status, variants, vendor};

/// The only protocol version Heron speaks.
pub const PROTOCOL_VERSION: u16 = 1;

/// The id of the terminal auth method (it runs `heron acp --setup`).
pub const SETUP_METHOD: &str = "heron-setup";

/// The terminal auth method's name, as every protocol version offers it.
pub(super) const SETUP_NAME: &str = "Set up Heron";

/// What the terminal auth method does, as every protocol version offers it.
pub(super) const SETUP_DESCRIPTION: &str = "Choose a model provider and store its key";

/// What Heron advertises: only what it serves (no additional directories under `--cwd-only`).
pub(super) fn capabilities(cwd_only: bool) -> AgentCapabilities {
    AgentCapabilities {
        auth: None,
        load_session: Some(true),
        mcp_capabilities: Some(McpCapabilities { http: Some(true), meta: None, sse: Some(true) }),
        meta: Some(vendor::capabilities_meta()),
        // What a prompt may carry, as `variants` decides it.
        prompt_capabilities: Some(PromptCapabilities {
            audio: Some(variants::accepted_in_prompt(ContentBlockKind::Audio)),
            embedded_context: Some(variants::accepted_in_prompt(ContentBlockKind::Resource)),
            image: Some(variants::accepted_in_prompt(ContentBlockKind::Image)),
            meta: None,
        }),
        session_capabilities: Some(SessionCapabilities {
            additional_directories: (!cwd_only).then(Default::default),
            archive: None,
            close: Some(Default::default()),
            delete: Some(Default::default()),
            fork: Some(Default::default()),
            list: Some(Default::default()),
            meta: None,
            resume: Some(Default::default()),
            status: None,
            system_prompt: None,
            title: None,
        }),
    }
}

/// `initialize`: any version asked for is answered with the one Heron speaks (the client
/// decides whether to go on); the client's capabilities are kept for this connection.
pub(super) fn initialize<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: InitializeRequest,
) -> Result<InitializeResponse, RpcError> {
    if params.protocol_version.0 != PROTOCOL_VERSION {
        tracing::info!(asked = params.protocol_version.0, "protocol version negotiated to 1");
    }
    let client = params.client_capabilities.unwrap_or_default();
    let terminal_auth = client.auth.as_ref().and_then(|a| a.terminal).unwrap_or(false);
    agent.inner.status.want(status::wants_updates(&client));
    tracing::debug!(capabilities = ?variants::advertised_by_client(&client), "the client advertised");
    *agent.inner.opted.lock().unwrap_or_else(PoisonError::into_inner) = super::convert::Opted::of(&client);
    *agent.inner.client_capabilities.lock().unwrap_or_else(PoisonError::into_inner) = client;
    // The terminal method is only offered to clients that can run it.
    let auth_methods = if terminal_auth {
        vec![AuthMethod::Terminal(AuthMethodTerminal {
            args: vec!["--setup".to_owned()],
            description: Some(SETUP_DESCRIPTION.to_owned()),
            env: Default::default(),
            id: AuthMethodId(SETUP_METHOD.to_owned()),
            meta: None,
            name: SETUP_NAME.to_owned(),
        })]
    } else {
        Vec::new()
    };
    let advertised = capabilities(agent.inner.cwd_only);
    tracing::debug!(capabilities = ?variants::advertised_by_agent(&advertised), "Heron advertises");
    Ok(InitializeResponse {
        protocol_version: ProtocolVersion(PROTOCOL_VERSION),
        agent_capabilities: Some(advertised),
        agent_info: Some(Implementation {
            name: "heron".to_owned(),
            title: Some("Heron".to_owned()),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            meta: None,
        }),
        auth_methods,
        meta: Some(meta(heron_core::sandbox::reported())),
    })
}

/// `_meta.heron` of the answer: which walls of the OS sandbox stand here around the
/// commands run on the model's behalf, so a client can tell its user what is missing.
/// `supported` and `abi` are Landlock's; `walls` names each of the others.
pub(super) fn meta(support: &Support) -> Map<String, Value> {
    let mut sandbox = match &support.landlock {
        Ok(abi) => json!({ "supported": true, "abi": abi }),
        Err(reason) => json!({ "supported": false, "reason": reason }),
    };
    sandbox["hidesHome"] = json!(support.walls.mount_namespace);
    let walls: Map<String, Value> =
        support.walls.listed().iter().map(|(name, stands, _)| ((*name).to_owned(), json!(stands))).collect();
    sandbox["walls"] = Value::Object(walls);
    sandbox["missing"] = json!(support.missing());
    if support.inside {
        sandbox["inside"] = json!(true);
    }
    // How a command routed to the editor's terminal runs: through Heron's launcher, behind
    // the same walls, or (a core embedded without one) as the editor runs it.
    sandbox["editorTerminals"] =
        json!(if heron_core::sandbox::launcher::get().is_some() { "launcher" } else { "direct" });
    Map::from_iter([("heron".to_owned(), json!({ "sandbox": sandbox }))])
}

/// `authenticate`: Heron's method runs in a terminal (`heron acp --setup`), never over the
/// connection. Asked after it ran, it reads `config.toml` and `.env` again and succeeds once
/// a model is usable, so a client that authenticates before retrying `session/new` learns
/// whether the setup worked; a client that retries at once gets the same re-read.
pub(super) fn authenticate<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: AuthenticateRequest,
) -> super::Reply<AuthenticateResponse> {
    let inner = agent.inner.clone();
    Box::pin(async move {
        if params.method_id.0 != SETUP_METHOD {
            return Err(auth_refusal(&params.method_id.0));
        }
        let manager = inner.manager.ready().await?;
        manager.refresh_home().await.map_err(|e| super::errors::session_error(e, &manager))?;
        manager.default_model().map_err(|e| {
            super::errors::session_error(heron_core::session::SessionError::Model(e), &manager)
        })?;
        Ok(AuthenticateResponse { meta: None })
    })
}

/// Why asking to authenticate with `method_id` over a connection fails (v1's `authenticate`,
/// v2's `auth/login`): Heron's one method runs in a terminal, and no other exists.
pub(super) fn auth_refusal(method_id: &str) -> RpcError {
    if method_id == SETUP_METHOD {
        RpcError::invalid_params("methodId", "this method runs in a terminal: launch `heron acp --setup`")
    } else {
        RpcError::invalid_params("methodId", format!("unknown auth method `{method_id}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::variants::tests::{all_on, paths, sorted};
    use heron_protocol::AGENT_CAPABILITIES_CLASSIFIED;

    #[test]
    fn initialize_advertises_exactly_what_the_classification_says() {
        let advertised = variants::advertised_by_agent(&capabilities(false));
        let classified: Vec<&str> = AGENT_CAPABILITIES_CLASSIFIED
            .iter()
            .filter(|(_, heron)| *heron == "advertises")
            .map(|(path, _)| *path)
            .collect();
        assert_eq!(sorted(advertised), sorted(classified));
        let flags = ["loadSession", "promptCapabilities.image", "promptCapabilities.audio"];
        let flags = [
            &flags[..],
            &["promptCapabilities.embeddedContext", "mcpCapabilities.http", "mcpCapabilities.sse"],
        ]
        .concat();
        let value = all_on(&AGENT_CAPABILITIES_CLASSIFIED, &flags);
        let everything: AgentCapabilities = serde_json::from_value(value).expect("decodes");
        assert_eq!(
            sorted(variants::advertised_by_agent(&everything)),
            sorted(paths(&AGENT_CAPABILITIES_CLASSIFIED)),
            "every path of the schema is read by name"
        );
    }

    #[test]
    fn the_sandbox_report_names_each_wall_and_says_why_landlock_is_missing() {
        let all = heron_core::sandbox::Walls {
            no_capabilities: true,
            seccomp: true,
            user_namespace: false,
            mount_namespace: true,
            pid_namespace: true,
            private_proc: true,
            network_namespace: true,
        };
        let available = meta(&Support { landlock: Ok(7), walls: all, inside: false });
        assert_eq!(
            Value::Object(available),
            json!({"heron": {"sandbox": {
                "supported": true, "abi": 7, "hidesHome": true,
                "walls": {"capabilities": true, "seccomp": true, "pidNamespace": true, "privateProc": true,
                          "mountNamespace": true, "networkNamespace": true},
                "missing": [],
                // The unit tests' binary registers no launcher.
                "editorTerminals": "direct",
            }}})
        );
        let bare = heron_core::sandbox::Walls { pid_namespace: false, private_proc: false, ..all };
        let missing = meta(&Support { landlock: Err("no Landlock".to_owned()), walls: bare, inside: false });
        assert_eq!(missing["heron"]["sandbox"]["reason"], "no Landlock");
        assert_eq!(
            missing["heron"]["sandbox"]["missing"],
            json!(["landlock", "pidNamespace", "privateProc"])
        );
    }
}
