//! Builds the method table from `x-method`/`x-side` and the envelope definitions.
//!
//! ACP does not link a method to its params type directly: a definition carries
//! `x-method`, and whether it is a request's params, its result or a notification's params
//! follows from which envelope (`ClientRequest`, `AgentResponse`, ...) references it.
//! Vendor definitions say so themselves with `x-message`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::Error;
use crate::merge::{Inputs, Merged, Origin, collect_refs};

/// The side that receives and handles a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    /// The agent handles it; the editor sends it.
    Agent,
    /// The editor handles it; the agent sends it.
    Client,
    /// Either side may send it.
    Protocol,
}

/// Request (answered) or notification (never answered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Answered with a result or an error.
    Request,
    /// Never answered.
    Notification,
}

/// Where a method is specified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stability {
    /// The stable ACP v1 schema.
    Stable,
    /// The unstable ACP schema, or a legacy method kept for older clients.
    Unstable,
    /// Heron's own vendor extension.
    Vendor,
}

/// One row of the method table.
#[derive(Debug, Clone)]
pub struct MethodSpec {
    /// The wire name, e.g. `session/prompt`.
    pub wire: String,
    /// Legacy names accepted on input.
    pub aliases: Vec<String>,
    /// Who handles it.
    pub side: Side,
    /// Request or notification.
    pub kind: Kind,
    /// The params definition.
    pub params: String,
    /// The result definition, for requests.
    pub result: Option<String>,
    /// Where it is specified.
    pub stability: Stability,
    /// The first line of the params definition's description.
    pub summary: String,
}

impl MethodSpec {
    /// The Rust name of a method: `session/set_mode` -> `session_set_mode`,
    /// `_heron/session/mcpStatus` -> `heron_session_mcp_status`.
    pub fn fn_name(&self) -> String {
        snake(&self.wire)
    }

    /// The `Method` variant: `session/set_mode` -> `SessionSetMode`.
    pub fn variant(&self) -> String {
        crate::pascal(&self.wire)
    }
}

/// Converts a wire name to snake case, dropping punctuation.
pub fn snake(wire: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for ch in wire.chars() {
        if ch.is_ascii_alphanumeric() {
            if ch.is_ascii_uppercase() && prev_lower {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
            prev_lower = ch.is_ascii_lowercase() || ch.is_ascii_digit();
        } else {
            if !out.is_empty() && !out.ends_with('_') {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    out.trim_end_matches('_').to_owned()
}

#[derive(Default)]
struct Roles {
    requests: BTreeSet<String>,
    responses: BTreeSet<String>,
    notifications: BTreeSet<String>,
}

fn envelope_roles(doc: &Value) -> Roles {
    let mut roles = Roles::default();
    let Some(defs) = doc.get("$defs") else { return roles };
    for (envelope, role) in [
        ("ClientRequest", 0),
        ("AgentRequest", 0),
        ("ClientResponse", 1),
        ("AgentResponse", 1),
        ("ClientNotification", 2),
        ("AgentNotification", 2),
    ] {
        let mut refs = BTreeSet::new();
        if let Some(def) = defs.get(envelope) {
            collect_refs(def, &mut refs);
        }
        let set = match role {
            0 => &mut roles.requests,
            1 => &mut roles.responses,
            _ => &mut roles.notifications,
        };
        set.extend(refs);
    }
    roles
}

fn first_line(def: &Value) -> String {
    def.get("description")
        .and_then(Value::as_str)
        .and_then(|d| d.lines().find(|l| !l.trim().is_empty() && !l.contains("UNSTABLE")))
        .map(|l| l.trim().to_owned())
        .unwrap_or_default()
}

/// Builds the table, ordered by side then wire name.
pub fn method_table(inputs: &Inputs, merged: &Merged) -> Result<Vec<MethodSpec>, Error> {
    let stable_roles = envelope_roles(&inputs.stable);
    let unstable_roles = envelope_roles(&inputs.unstable);

    // wire -> (side, params, result, notification params)
    #[derive(Default)]
    struct Parts {
        side: Option<Side>,
        request: Option<String>,
        response: Option<String>,
        notification: Option<String>,
        stability: Option<Stability>,
    }
    let mut parts: BTreeMap<String, Parts> = BTreeMap::new();

    let stable_wires: BTreeSet<&str> = inputs
        .stable
        .get("$defs")
        .and_then(Value::as_object)
        .map(|defs| defs.values().filter_map(|d| d.get("x-method").and_then(Value::as_str)).collect())
        .unwrap_or_default();

    for (name, def) in &merged.defs {
        let Some(wire) = def.get("x-method").and_then(Value::as_str) else { continue };
        // An unstable definition pulled in only as a reference does not bring its method
        // along: only selected unstable methods, or stable ones whose defs were replaced.
        if merged.origin[name] == Origin::Unstable
            && !merged.unstable_methods.contains(wire)
            && !stable_wires.contains(wire)
        {
            continue;
        }
        let side = match def.get("x-side").and_then(Value::as_str) {
            Some("agent") => Side::Agent,
            Some("client") => Side::Client,
            Some("protocol") => Side::Protocol,
            other => return Err(Error::new(format!("`{name}` has unsupported x-side {other:?}"))),
        };
        let origin = merged.origin[name];
        let role = match origin {
            Origin::Vendor => match def.get("x-message").and_then(Value::as_str) {
                Some("request") => 0,
                Some("response") => 1,
                Some("notification") => 2,
                other => {
                    return Err(Error::new(format!("vendor def `{name}` has x-message {other:?}")));
                }
            },
            Origin::Stable | Origin::Unstable => {
                let roles = if origin == Origin::Stable { &stable_roles } else { &unstable_roles };
                if roles.requests.contains(name) {
                    0
                } else if roles.responses.contains(name) {
                    1
                } else if roles.notifications.contains(name) || side == Side::Protocol {
                    // Protocol-level methods (`$/cancel_request`) sit in the root envelope,
                    // and every one of them is a notification.
                    2
                } else {
                    return Err(Error::new(format!("`{name}` ({wire}) is in no envelope")));
                }
            }
        };
        // An unstable def of a stable method (pulled in by x-unstable-defs) does not make
        // the method unstable.
        let stability = match origin {
            Origin::Stable => Stability::Stable,
            Origin::Unstable if merged.unstable_methods.contains(wire) => Stability::Unstable,
            Origin::Unstable => Stability::Stable,
            Origin::Vendor if def.get("x-stability").and_then(Value::as_str) == Some("unstable") => {
                Stability::Unstable
            }
            Origin::Vendor => Stability::Vendor,
        };
        let entry = parts.entry(wire.to_owned()).or_default();
        if entry.side.is_some_and(|s| s != side) {
            return Err(Error::new(format!("`{wire}` is declared for two sides")));
        }
        entry.side = Some(side);
        entry.stability = Some(stability);
        let slot = match role {
            0 => &mut entry.request,
            1 => &mut entry.response,
            _ => &mut entry.notification,
        };
        if let Some(previous) = slot.replace(name.clone()) {
            return Err(Error::new(format!("`{wire}` has two defs in one role: {previous}, {name}")));
        }
    }

    let mut table = Vec::new();
    for (wire, p) in parts {
        let (kind, params, result) = match (p.request, p.response, p.notification) {
            (Some(req), Some(resp), None) => (Kind::Request, req, Some(resp)),
            (None, None, Some(note)) => (Kind::Notification, note, None),
            (req, resp, note) => {
                return Err(Error::new(format!(
                    "`{wire}` needs params+result or notification params, found {req:?} {resp:?} {note:?}"
                )));
            }
        };
        let summary = first_line(&merged.defs[&params]);
        table.push(MethodSpec {
            aliases: merged
                .aliases
                .iter()
                .filter(|(_, target)| **target == wire)
                .map(|(alias, _)| alias.clone())
                .collect(),
            side: p.side.unwrap_or(Side::Protocol),
            kind,
            params,
            result,
            stability: p.stability.unwrap_or(Stability::Stable),
            summary,
            wire,
        });
    }
    for (alias, target) in &merged.aliases {
        if !table.iter().any(|m| &m.wire == target) {
            return Err(Error::new(format!("alias `{alias}` points at unknown method `{target}`")));
        }
    }
    table.sort_by(|a, b| (a.side, &a.wire).cmp(&(b.side, &b.wire)));
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_follows_wire_segments_and_camel_humps() {
        assert_eq!(snake("session/set_mode"), "session_set_mode");
        assert_eq!(snake("_heron/session/mcpStatus_update"), "heron_session_mcp_status_update");
        assert_eq!(snake("$/cancel_request"), "cancel_request");
        assert_eq!(snake("fs/read_text_file"), "fs_read_text_file");
    }
}
