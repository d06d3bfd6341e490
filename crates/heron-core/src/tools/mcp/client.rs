//! Heron as the client of one MCP server: what it declares (roots, sampling, form and URL
//! elicitation) and how it answers what the server sends it: `roots/list` with the
//! session's roots, `elicitation/create` through the editor (checked by `elicit`), `sampling/createMessage`
//! through the session's sampler (`sampling`), progress
//! to the running call, log messages to `said`.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction};
use rmcp::service::{RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::EditorSlot;
use super::elicit::{checked, offer};
use crate::tools::editor::{Elicitation, ElicitationAnswer};

/// The client Heron is to one server.
pub(super) struct Client {
    /// The server's name, as the user is shown it.
    pub(super) server: String,
    pub(super) editor: EditorSlot,
    /// The session's roots (its cwd and additional directories), which a server may ask
    /// for (`roots/list`): server-filesystem started without folders serves these.
    pub(super) roots: Arc<Vec<PathBuf>>,
    /// The running calls that asked for progress.
    pub(super) progress: Arc<super::progress::Routes>,
    /// What the server logs for the user to see.
    pub(super) said: Arc<super::said::Said>,
    /// Its prompts and resources, listed again when it says they changed.
    pub(super) offers: Arc<super::offers::Offers>,
    /// Its requests that wait on the user (sampling, forms, pages): [`MAX_ASKING`] at once.
    pub(super) asking: Arc<Semaphore>,
}

/// The most requests one server may have waiting on the user at once. A person answers
/// one at a time; a server that sends more is flooding, and each would be a card in the
/// editor and a task held here.
pub(super) const MAX_ASKING: usize = 4;

/// The gate of a new server's requests to the user.
pub(super) fn asking() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(MAX_ASKING))
}

impl Client {
    /// A place among the requests waiting on the user, or the error the server is answered.
    fn ask_turn(&self) -> Result<OwnedSemaphorePermit, ErrorData> {
        self.asking.clone().try_acquire_owned().map_err(|_| {
            let why =
                format!("{MAX_ASKING} requests of this server already wait on the user; ask again later");
            ErrorData::new(rmcp::model::ErrorCode(-1), why, None)
        })
    }
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        // Declared whatever the editor can do: a request the editor cannot show is
        // declined, which a server handles like a user's "no".
        capabilities.elicitation = serde_json::from_value(serde_json::json!({ "form": {}, "url": {} })).ok();
        // Answered by the session's model after the user approves each request.
        capabilities.sampling = serde_json::from_value(serde_json::json!({})).ok();
        // A session's roots never change while it is open, so no list_changed is sent.
        capabilities.roots = serde_json::from_value(serde_json::json!({ "listChanged": false })).ok();
        let mut info = ClientConfig::default();
        info.capabilities = capabilities;
        info.client_info = rmcp::model::Implementation::new("heron", env!("CARGO_PKG_VERSION"));
        info
    }

    #[expect(deprecated, reason = "server logging is in the MCP revision servers speak today (2025-06-18)")]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.said.heard(&params);
    }

    async fn on_prompt_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        self.offers.relist_prompts().await;
    }

    async fn on_resource_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        self.offers.relist_resources().await;
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.progress.report(&params);
    }

    #[expect(deprecated, reason = "roots are in the MCP revision servers speak today (2025-06-18)")]
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, ErrorData> {
        let roots = self
            .roots
            .iter()
            .filter_map(|root| {
                let uri = reqwest::Url::from_file_path(root).ok()?;
                let name = root.file_name().map(|name| name.to_string_lossy().into_owned());
                let listed = rmcp::model::Root::new(uri.to_string());
                Some(match name {
                    Some(name) => listed.with_name(name),
                    None => listed,
                })
            })
            .collect();
        Ok(rmcp::model::ListRootsResult::new(roots))
    }

    #[expect(
        deprecated,
        reason = "sampling is in the MCP revisions servers speak today (2025-06-18, 2025-11-25)"
    )]
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, ErrorData> {
        let _turn = self.ask_turn()?;
        super::sampling::answer(&self.editor.sampler, &self.server, &params).await
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let _turn = self.ask_turn()?;
        let answer = match (self.editor.get(), offer(&request)) {
            (None, _) => ElicitationAnswer::Decline,
            (_, Err(why)) => {
                tracing::info!(%why, "an MCP server's elicitation was declined");
                ElicitationAnswer::Decline
            }
            (Some(editor), Ok(offered)) => {
                let modes = editor.elicitation_modes();
                let allowed = match &offered {
                    Elicitation::Form { .. } => modes.form,
                    Elicitation::Url { .. } => modes.url,
                };
                if !allowed {
                    ElicitationAnswer::Decline
                } else {
                    match editor.elicit(offered.clone()).await {
                        Ok(answer) => checked(&offered, answer),
                        Err(error) => {
                            tracing::info!(%error, "the editor could not show an MCP server's elicitation");
                            ElicitationAnswer::Decline
                        }
                    }
                }
            }
        };
        Ok(match answer {
            ElicitationAnswer::Accept(content) => {
                let mut result = ElicitResult::new(ElicitationAction::Accept);
                if !content.is_empty() {
                    result.content = Some(Value::Object(content));
                }
                result
            }
            ElicitationAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
            ElicitationAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        })
    }
}
