//! The shapes of the generated method table, shared by every protocol version: which side
//! handles a method, whether it is a request or a notification, and where it is specified.

/// The side that receives and handles a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The agent handles it; the editor sends it.
    Agent,
    /// The editor handles it; the agent sends it.
    Client,
    /// Either side may send it (`$/cancel_request`).
    Protocol,
}

/// Request (answered exactly once) or notification (never answered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Answered with a result or an error.
    Request,
    /// Never answered.
    Notification,
}

/// Where a method is specified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stability {
    /// The stable ACP schema of its version.
    Stable,
    /// The unstable ACP schema, or a legacy method kept for older clients.
    Unstable,
    /// Heron's own `_heron/` extension.
    Vendor,
}

/// One row of the generated method table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodInfo {
    /// The wire name.
    pub wire: &'static str,
    /// Legacy names accepted on input.
    pub aliases: &'static [&'static str],
    /// The side that handles it.
    pub side: Side,
    /// Request or notification.
    pub kind: Kind,
    /// The params definition name.
    pub params: &'static str,
    /// The result definition name, for requests.
    pub result: Option<&'static str>,
    /// Where it is specified.
    pub stability: Stability,
    /// Whether every implementation must serve it.
    pub baseline: bool,
    /// Whether Heron serves (agent side) or calls (client side) it.
    pub implemented: bool,
}

/// One of Heron's vendor extensions, as clients discover it in `initialize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extension {
    /// The key under `_meta.heron`, e.g. `sessionInbox`.
    pub name: &'static str,
    /// Bumped when the extension's wire contract changes incompatibly.
    pub schema_version: u64,
    /// (short name, wire name) of each request it adds.
    pub methods: &'static [(&'static str, &'static str)],
    /// (short name, wire name) of each notification Heron sends for it.
    pub notifications: &'static [(&'static str, &'static str)],
}
