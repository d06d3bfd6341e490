//! `read_mcp_resource`: the model reads a resource an MCP server lists, by server and URI.
//! Offered when a ready server lists resources; its description names them (bounded), and
//! what it returns is capped like a file read and scrubbed of secrets. A read is a read:
//! it is gated as one, since the server is one the user configured.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Value, json};

use super::offers::{Offers, Shelf};
use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::tools::deadline::Pace;
use crate::tools::{Outcome, Prepared, Tool, ToolEnv, call};
use crate::types::ToolKind;

/// The tool's name.
const NAME: &str = "read_mcp_resource";
/// The most resources its description names.
const MAX_NAMED: usize = 40;

/// The tool, over the servers that list resources.
pub(super) struct ReadResource {
    shelf: Shelf,
    description: String,
}

impl ReadResource {
    /// The tool over `shelf`, or `None` when no server lists a resource.
    pub(super) fn over(shelf: Shelf) -> Option<Self> {
        let listed: Vec<(String, super::McpResource)> = shelf
            .iter()
            .flat_map(|(server, offers)| offers.resources().into_iter().map(move |r| (server.clone(), r)))
            .collect();
        if listed.is_empty() {
            return None;
        }
        let mut description = String::from(
            "Read a resource an MCP server lists, by the server's name and the resource's URI. Listed:",
        );
        for (server, resource) in listed.iter().take(MAX_NAMED) {
            let _ = write!(description, "\n- server `{server}`: {} ({})", resource.uri, resource.name);
        }
        if listed.len() > MAX_NAMED {
            let _ = write!(description, "\n- and {} more", listed.len() - MAX_NAMED);
        }
        Some(Self { shelf, description })
    }

    fn offers(&self, server: &str) -> Option<&Arc<Offers>> {
        self.shelf.iter().find(|(name, _)| name == server).map(|(_, offers)| offers)
    }
}

impl Tool for ReadResource {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.into(),
            description: self.description.clone(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "server": { "type": "string", "description": "The MCP server's name" },
                    "uri": { "type": "string", "description": "The resource's URI, as listed" },
                },
                "required": ["server", "uri"],
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn pace(&self) -> Pace {
        Pace::External
    }

    fn prepare(&self, arguments: &str, env: &ToolEnv) -> Result<Prepared, String> {
        let value: Value = serde_json::from_str(arguments).map_err(|e| {
            format!("the arguments of {NAME} are not valid JSON ({e}); send {{\"server\", \"uri\"}}")
        })?;
        let (Some(server), Some(uri)) = (value["server"].as_str(), value["uri"].as_str()) else {
            return Err(format!("{NAME} needs `server` and `uri`, both strings"));
        };
        if self.offers(server).is_none() {
            let known: Vec<&str> = self.shelf.iter().map(|(name, _)| name.as_str()).collect();
            return Err(format!("no MCP server `{server}` lists resources; these do: {}", known.join(", ")));
        }
        if uri.is_empty() || uri.len() > 2048 {
            return Err("the URI must be 1 to 2048 bytes".into());
        }
        Ok(Prepared {
            title: call::scrub_text(env, &format!("{server}: read {uri}")),
            kind: ToolKind::Read,
            locations: Vec::new(),
            raw_input: json!({ "server": server, "uri": uri }),
            outside_roots: false,
            always_ask: None,
            content: Vec::new(),
            planned: None,
        })
    }

    fn run(&self, prepared: Prepared, env: ToolEnv) -> BoxFuture<Outcome> {
        let server = prepared.raw_input["server"].as_str().unwrap_or_default().to_owned();
        let uri = prepared.raw_input["uri"].as_str().unwrap_or_default().to_owned();
        let offers = self.offers(&server).cloned();
        Box::pin(async move {
            let Some(offers) = offers else { return Outcome::failed(format!("no MCP server `{server}`")) };
            let outcome = tokio::select! {
                biased;
                () = env.cancel.cancelled() => Outcome::failed("cancelled"),
                read = offers.read_resource(&uri) => match read {
                    Ok(text) => call::completed(crate::secret::redact(&text, env.secrets.iter())),
                    Err(why) => Outcome::failed(why),
                },
            };
            call::scrub(&env, outcome)
        })
    }
}
