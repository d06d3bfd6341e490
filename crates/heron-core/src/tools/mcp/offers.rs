//! What a server offers besides tools: its prompts (which the editor shows as slash
//! commands, `/mcp:<server>:<prompt>`) and its resources (which the model reads through
//! `read_mcp_resource`). Both are listed when the server is ready and listed again when it
//! says they changed (`notifications/*/list_changed`); every list, name, prompt and
//! resource is bounded, since a server is a peer like any other.

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleClient;
use rmcp::service::Peer;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

/// The most pages of a list read.
const MAX_PAGES: usize = 10;
/// The most tools, prompts and resources kept of one server (each kind).
const MAX_LISTED: usize = 200;
/// The longest prompt or argument name kept, in bytes; longer ones are left out.
const MAX_NAME: usize = 64;
/// The longest description kept, in characters.
const MAX_DESCRIPTION: usize = 300;
/// The most text a prompt expands to, in bytes.
pub(super) const MAX_PROMPT: usize = 256 * 1024;
/// The most text a resource read returns, in bytes (what a file read returns at most).
pub(super) const MAX_RESOURCE: usize = 256 * 1024;

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// Whether the prompt needs it.
    pub required: bool,
}

/// A prompt a server offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPrompt {
    /// The server's name.
    pub server: String,
    /// The prompt's name on the server (no spaces or colons: others are left out).
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// Its arguments, in the server's order.
    pub arguments: Vec<PromptArgument>,
}

impl McpPrompt {
    /// The slash command that stands for it, without the slash.
    pub fn command(&self) -> String {
        format!("mcp:{}:{}", self.server, self.name)
    }
}

/// A resource a server lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpResource {
    /// Its URI.
    pub uri: String,
    /// Its name.
    pub name: String,
}

/// Which of a server's lists.
#[derive(Clone, Copy)]
enum Listing {
    Prompts,
    Resources,
}

/// A server's prompts and resources, kept current.
#[derive(Default)]
pub(super) struct Offers {
    server: String,
    now: Mutex<Listed>,
    /// Moves when the lists change.
    changed: Mutex<Option<watch::Sender<u64>>>,
    /// Whether each list is being listed again, and whether the server said it changed since.
    prompts_relisting: Relisting,
    resources_relisting: Relisting,
}

/// One listing at a time per list, however often a server says it changed: a change said
/// while one runs makes one more run after it, and any number of them make only one. So a
/// server that floods `list_changed` costs at most two listings in flight, not one each.
#[derive(Default)]
struct Relisting(std::sync::atomic::AtomicU8);

impl Relisting {
    const IDLE: u8 = 0;
    const RUNNING: u8 = 1;
    const AGAIN: u8 = 2;

    /// Whether the caller should list now; if not, whoever lists will go once more.
    fn begin(&self) -> bool {
        self.step(|state| if state == Self::IDLE { Self::RUNNING } else { Self::AGAIN }) == Self::IDLE
    }

    /// After a listing: whether to list once more (a change was said meanwhile).
    fn again(&self) -> bool {
        self.step(|state| if state == Self::AGAIN { Self::RUNNING } else { Self::IDLE }) == Self::AGAIN
    }

    /// Moves the state by `next` in one atomic step; the state before.
    fn step(&self, next: impl Fn(u8) -> u8) -> u8 {
        use std::sync::atomic::Ordering::{AcqRel, Acquire};
        match self.0.fetch_update(AcqRel, Acquire, |state| Some(next(state))) {
            Ok(before) | Err(before) => before,
        }
    }
}

#[derive(Default)]
struct Listed {
    peer: Option<Peer<RoleClient>>,
    prompts: Vec<McpPrompt>,
    resources: Vec<McpResource>,
}

fn clean(text: &str, max: usize) -> String {
    let kept: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    kept.trim().chars().take(max).collect()
}

/// A name usable in a command line: non-empty, bounded, no spaces, colons or control
/// characters.
fn usable(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.chars().any(|c| c.is_whitespace() || c == ':' || c.is_control())
}

impl Offers {
    pub(super) fn new(server: &str) -> Self {
        Self { server: server.to_owned(), ..Self::default() }
    }

    /// Moves `changed` whenever the lists change.
    pub(super) fn wake(&self, changed: watch::Sender<u64>) {
        *self.changed.lock().unwrap_or_else(PoisonError::into_inner) = Some(changed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Listed> {
        self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The prompts, as last listed.
    pub(super) fn prompts(&self) -> Vec<McpPrompt> {
        self.lock().prompts.clone()
    }

    /// The resources, as last listed.
    pub(super) fn resources(&self) -> Vec<McpResource> {
        self.lock().resources.clone()
    }

    /// Forgets everything: the server stopped.
    pub(super) fn clear(&self) {
        *self.lock() = Listed::default();
        self.moved();
    }

    fn moved(&self) {
        if let Some(changed) = &*self.changed.lock().unwrap_or_else(PoisonError::into_inner) {
            changed.send_modify(|n| *n += 1);
        }
    }

    /// Lists what a server that just became ready offers, as its capabilities say it does.
    pub(super) async fn adopt(&self, peer: Peer<RoleClient>) {
        let capabilities =
            peer.peer_info().map(|info| serde_json::to_value(&info.capabilities).unwrap_or_default());
        self.lock().peer = Some(peer);
        let offers =
            |key: &str| capabilities.as_ref().is_some_and(|c| c.get(key).is_some_and(|v| !v.is_null()));
        if offers("prompts") {
            self.relist_prompts().await;
        }
        if offers("resources") {
            self.relist_resources().await;
        }
    }

    fn peer(&self) -> Option<Peer<RoleClient>> {
        self.lock().peer.clone()
    }

    /// What the server lists of `kind`, bounded ([`pages`]); nothing when it is not
    /// connected or its first page fails.
    async fn listed(&self, kind: Listing) -> Vec<Value> {
        let Some(peer) = self.peer() else { return Vec::new() };
        let page = |cursor| {
            let peer = peer.clone();
            async move {
                match kind {
                    Listing::Prompts => {
                        peer.list_prompts(cursor).await.map(|r| serde_json::to_value(r).unwrap_or_default())
                    }
                    Listing::Resources => {
                        peer.list_resources(cursor).await.map(|r| serde_json::to_value(r).unwrap_or_default())
                    }
                }
            }
        };
        let key = match kind {
            Listing::Prompts => "prompts",
            Listing::Resources => "resources",
        };
        pages(page, key).await.unwrap_or_default()
    }

    /// Lists the prompts again (the server said they changed); see [`Relisting`].
    pub(super) async fn relist_prompts(&self) {
        if !self.prompts_relisting.begin() {
            return;
        }
        loop {
            self.list_prompts().await;
            if !self.prompts_relisting.again() {
                return;
            }
        }
    }

    async fn list_prompts(&self) {
        let listed = self.listed(Listing::Prompts).await;
        let prompts = listed
            .iter()
            .filter_map(|p| {
                let name = p["name"].as_str().filter(|n| usable(n))?;
                let arguments = p["arguments"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| {
                        Some(PromptArgument {
                            name: a["name"].as_str().filter(|n| usable(n))?.to_owned(),
                            description: a["description"].as_str().map(|d| clean(d, MAX_DESCRIPTION)),
                            required: a["required"].as_bool().unwrap_or(false),
                        })
                    })
                    .take(16)
                    .collect();
                Some(McpPrompt {
                    server: self.server.clone(),
                    name: name.to_owned(),
                    description: p["description"].as_str().map(|d| clean(d, MAX_DESCRIPTION)),
                    arguments,
                })
            })
            .take(MAX_LISTED)
            .collect();
        let prompts = self.distinct(prompts, listed.len());
        self.lock().prompts = prompts;
        self.moved();
    }

    /// `prompts` with a name given twice kept once (the first: `prompts/get` names one);
    /// what was left out, of the `listed` the server sent, is said in the log, not dropped
    /// in silence.
    fn distinct(&self, prompts: Vec<McpPrompt>, listed: usize) -> Vec<McpPrompt> {
        let mut seen = std::collections::HashSet::new();
        let kept: Vec<McpPrompt> = prompts.into_iter().filter(|p| seen.insert(p.name.clone())).collect();
        if kept.len() < listed {
            tracing::warn!(
                server = %self.server,
                listed,
                offered = kept.len(),
                "some of an MCP server's prompts are not offered as commands: a name repeated, unusable \
                 in a command line (empty, over 64 bytes, with spaces or colons), or past the 200 kept"
            );
        }
        kept
    }

    /// Lists the resources again (the server said they changed); see [`Relisting`].
    pub(super) async fn relist_resources(&self) {
        if !self.resources_relisting.begin() {
            return;
        }
        loop {
            self.list_resources().await;
            if !self.resources_relisting.again() {
                return;
            }
        }
    }

    async fn list_resources(&self) {
        let listed = self.listed(Listing::Resources).await;
        let resources = listed
            .iter()
            .filter_map(|r| {
                let uri = r["uri"].as_str().filter(|u| !u.is_empty() && u.len() <= 2048)?;
                Some(McpResource {
                    uri: uri.to_owned(),
                    name: clean(r["name"].as_str().unwrap_or(uri), MAX_NAME),
                })
            })
            .take(MAX_LISTED)
            .collect();
        self.lock().resources = resources;
        self.moved();
    }

    /// The text of prompt `name` with `arguments`: its messages, in order.
    pub(super) async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<String, String> {
        let peer = self.peer().ok_or_else(|| format!("the MCP server `{}` is not running", self.server))?;
        let params = serde_json::from_value(json!({ "name": name, "arguments": arguments }))
            .map_err(|e| e.to_string())?;
        let result = peer
            .get_prompt(params)
            .await
            .map_err(|e| format!("the MCP server `{}` failed: {e}", self.server))?;
        let result = serde_json::to_value(result).unwrap_or_default();
        let parts: Vec<String> =
            result["messages"].as_array().into_iter().flatten().map(|m| text_of(&m["content"])).collect();
        bounded(parts.join("\n\n"), MAX_PROMPT)
    }

    /// The text of the resource at `uri`.
    pub(super) async fn read_resource(&self, uri: &str) -> Result<String, String> {
        let peer = self.peer().ok_or_else(|| format!("the MCP server `{}` is not running", self.server))?;
        let params = serde_json::from_value(json!({ "uri": uri })).map_err(|e| e.to_string())?;
        let result = peer
            .read_resource(params)
            .await
            .map_err(|e| format!("the MCP server `{}` failed: {e}", self.server))?;
        let result = serde_json::to_value(result).unwrap_or_default();
        let parts: Vec<String> = result["contents"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| match c["text"].as_str() {
                Some(text) => text.to_owned(),
                None => format!(
                    "[binary resource {} ({})]",
                    c["uri"].as_str().unwrap_or(uri),
                    c["mimeType"].as_str().unwrap_or("unknown type")
                ),
            })
            .collect();
        bounded(parts.join("\n"), MAX_RESOURCE)
    }
}

/// `text`, cut at `max` bytes with the cut marked.
fn bounded(mut text: String, max: usize) -> Result<String, String> {
    if text.len() > max {
        let cut = (0..=max).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        text.truncate(cut);
        text.push_str("\n[cut: the rest was longer than Heron reads]");
    }
    Ok(text)
}

/// The text of a prompt message's content block.
fn text_of(content: &Value) -> String {
    match content["type"].as_str() {
        Some("text") => content["text"].as_str().unwrap_or_default().to_owned(),
        Some("resource") => match content["resource"]["text"].as_str() {
            Some(text) => text.to_owned(),
            None => format!("[resource {}]", content["resource"]["uri"].as_str().unwrap_or_default()),
        },
        Some("resource_link") => format!("[resource {}]", content["uri"].as_str().unwrap_or_default()),
        Some(other) => format!("[{} content]", clean(other, 32)),
        None => String::new(),
    }
}

/// Every item of a paginated list, at most [`MAX_PAGES`] pages and [`MAX_LISTED`] items; a
/// failed first page is the list's failure, a failed later page ends it (what came before
/// is kept).
pub(super) async fn pages<F, Fut>(mut page: F, key: &str) -> Result<Vec<Value>, rmcp::service::ServiceError>
where
    F: FnMut(Option<rmcp::model::PaginatedRequestParams>) -> Fut,
    Fut: std::future::Future<Output = Result<Value, rmcp::service::ServiceError>>,
{
    let (mut items, mut cursor): (Vec<Value>, Option<String>) = (Vec::new(), None);
    for number in 0..MAX_PAGES {
        let params = cursor.take().and_then(|c| serde_json::from_value(json!({ "cursor": c })).ok());
        let listed = match page(params).await {
            Ok(listed) => listed,
            Err(error) if number == 0 => return Err(error),
            Err(_) => break,
        };
        items.extend(listed[key].as_array().into_iter().flatten().cloned());
        match listed["nextCursor"].as_str() {
            Some(next) if items.len() < MAX_LISTED && !next.is_empty() => cursor = Some(next.to_owned()),
            _ => break,
        }
    }
    items.truncate(MAX_LISTED);
    Ok(items)
}

/// The offers of several servers, for the model's `read_mcp_resource` tool.
pub(super) type Shelf = Vec<(String, Arc<Offers>)>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_said_during_a_listing_make_one_more_and_no_more() {
        let relisting = Relisting::default();
        assert!(relisting.begin(), "the first lists");
        for _ in 0..1000 {
            assert!(!relisting.begin(), "a flood while it runs starts nothing");
        }
        assert!(relisting.again(), "the flood makes one more listing");
        assert!(!relisting.again(), "and only one");
        assert!(relisting.begin(), "idle again: the next change lists");
        assert!(!relisting.again());
    }

    /// A server whose list never ends, a page of one item at a time, is asked for
    /// [`MAX_PAGES`] pages and no more; what those pages held is kept.
    #[tokio::test]
    async fn a_list_that_never_ends_is_read_for_ten_pages() {
        let asked = std::sync::atomic::AtomicUsize::new(0);
        let listed = pages(
            |cursor: Option<rmcp::model::PaginatedRequestParams>| {
                let number = asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let given = cursor.and_then(|c| c.cursor).unwrap_or_default();
                async move {
                    Ok(json!({ "tools": [{ "name": format!("t{number}"), "after": given }],
                               "nextCursor": format!("c{}", number + 1) }))
                }
            },
            "tools",
        )
        .await
        .expect("listed");
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), MAX_PAGES);
        assert_eq!(listed.len(), MAX_PAGES);
        assert_eq!((listed[9]["name"].as_str(), listed[9]["after"].as_str()), (Some("t9"), Some("c9")));
    }

    fn prompt(name: &str) -> McpPrompt {
        McpPrompt { server: "s".into(), name: name.into(), description: None, arguments: Vec::new() }
    }

    #[test]
    fn a_prompt_name_given_twice_is_one_command_and_names_that_break_a_command_line_are_not_offered() {
        let offers = Offers::new("s");
        let kept = offers.distinct(vec![prompt("a"), prompt("a"), prompt("b")], 3);
        assert_eq!(kept.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        for bad in ["", "two words", "a:b", &"x".repeat(MAX_NAME + 1)] {
            assert!(!usable(bad), "{bad:?}");
        }
        assert!(usable("summarize-pr"));
    }
}
