//! Tests how `heron_codegen::merge` combines the three schemas and how
//! `heron_codegen::methods` builds the method table from them, on small inline schemas.

use heron_codegen::Inputs;
use heron_codegen::merge::{Merged, Origin, merge};
use heron_codegen::methods::{Kind, MethodSpec, Side, Stability, method_table};
use serde_json::{Value, json};

/// A document with the given `$defs` and no other keys.
fn doc(defs: Value) -> Value {
    json!({ "$defs": defs })
}

fn inputs(stable: Value, unstable: Value, vendor: Value) -> Inputs {
    Inputs { stable, unstable, vendor }
}

fn merged(inputs: &Inputs) -> Merged {
    merge(inputs).expect("merges")
}

fn merge_error(inputs: &Inputs) -> String {
    merge(inputs).expect_err("fails to merge").to_string()
}

fn table(inputs: &Inputs) -> Vec<MethodSpec> {
    method_table(inputs, &merged(inputs)).expect("builds the table")
}

fn row<'a>(table: &'a [MethodSpec], wire: &str) -> &'a MethodSpec {
    table.iter().find(|m| m.wire == wire).unwrap_or_else(|| panic!("no `{wire}` in the table"))
}

fn def_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/$defs/{name}") })
}

/// An envelope referencing `names` the way ACP's do: through an `anyOf` of `allOf` wrappers.
fn envelope(names: &[&str]) -> Value {
    let variants: Vec<Value> = names.iter().map(|n| json!({ "title": n, "allOf": [def_ref(n)] })).collect();
    json!({ "type": "object", "properties": { "params": { "anyOf": variants } } })
}

fn method_def(wire: &str, side: &str) -> Value {
    json!({ "type": "object", "x-method": wire, "x-side": side })
}

/// A stable schema with one agent request, `ping`, and nothing else.
fn stable_with_ping() -> Value {
    doc(json!({
        "ClientRequest": envelope(&["PingRequest"]),
        "AgentResponse": envelope(&["PingResponse"]),
        "PingRequest": method_def("ping", "agent"),
        "PingResponse": method_def("ping", "agent"),
    }))
}

fn vendor_method(wire: &str, message: &str) -> Value {
    json!({ "type": "object", "x-method": wire, "x-side": "agent", "x-message": message })
}

// Merging.

#[test]
fn stable_definitions_enter_with_stable_origin() {
    let m =
        merged(&inputs(doc(json!({ "SessionId": { "type": "string" } })), doc(json!({})), doc(json!({}))));
    assert_eq!(m.defs["SessionId"], json!({ "type": "string" }));
    assert_eq!(m.origin["SessionId"], Origin::Stable);
}

#[test]
fn unstable_definitions_no_selected_method_needs_stay_out() {
    let m = merged(&inputs(doc(json!({})), doc(json!({ "Draft": { "type": "object" } })), doc(json!({}))));
    assert!(!m.defs.contains_key("Draft"));
}

#[test]
fn unstable_method_pulls_its_definitions() {
    let unstable = doc(json!({
        "ForkRequest": method_def("session/fork", "agent"),
        "ForkResponse": method_def("session/fork", "agent"),
    }));
    let vendor = json!({ "$defs": {}, "x-unstable-methods": ["session/fork"] });
    let m = merged(&inputs(doc(json!({})), unstable, vendor));
    assert_eq!((m.origin["ForkRequest"], m.origin["ForkResponse"]), (Origin::Unstable, Origin::Unstable));
    assert!(m.unstable_methods.contains("session/fork"));
}

#[test]
fn unstable_method_pulls_the_transitive_closure_of_what_stable_lacks() {
    let unstable = doc(json!({
        "ForkRequest": { "x-method": "session/fork", "x-side": "agent", "properties": { "options": def_ref("ForkOptions") } },
        "ForkOptions": { "properties": { "depth": def_ref("ForkDepth") } },
        "ForkDepth": { "type": "integer" },
    }));
    let vendor = json!({ "$defs": {}, "x-unstable-methods": ["session/fork"] });
    let m = merged(&inputs(doc(json!({})), unstable, vendor));
    assert_eq!(m.defs["ForkDepth"], json!({ "type": "integer" }));
    assert_eq!(m.origin["ForkDepth"], Origin::Unstable);
}

#[test]
fn stable_definition_wins_over_the_unstable_one_a_method_references() {
    let stable = doc(json!({ "SessionId": { "type": "string", "description": "stable" } }));
    let unstable = doc(json!({
        "ForkRequest": { "x-method": "session/fork", "x-side": "agent", "properties": { "id": def_ref("SessionId") } },
        "SessionId": { "type": "string", "description": "unstable" },
    }));
    let vendor = json!({ "$defs": {}, "x-unstable-methods": ["session/fork"] });
    let m = merged(&inputs(stable, unstable, vendor));
    assert_eq!(m.defs["SessionId"]["description"], "stable");
    assert_eq!(m.origin["SessionId"], Origin::Stable);
}

#[test]
fn unstable_method_missing_from_the_unstable_schema_is_an_error() {
    let vendor = json!({ "$defs": {}, "x-unstable-methods": ["session/fork"] });
    let message = merge_error(&inputs(doc(json!({})), doc(json!({})), vendor));
    assert!(message.contains("session/fork"), "{message}");
}

#[test]
fn x_unstable_defs_replaces_a_stable_definition() {
    let stable = doc(json!({ "SessionCapabilities": { "type": "object", "description": "stable" } }));
    let unstable = doc(json!({ "SessionCapabilities": { "type": "object", "description": "unstable" } }));
    let vendor = json!({ "$defs": {}, "x-unstable-defs": ["SessionCapabilities"] });
    let m = merged(&inputs(stable, unstable, vendor));
    assert_eq!(m.defs["SessionCapabilities"]["description"], "unstable");
    assert_eq!(m.origin["SessionCapabilities"], Origin::Unstable);
}

#[test]
fn x_unstable_defs_pulls_what_the_replacement_references() {
    let stable = doc(json!({ "SessionCapabilities": { "type": "object" } }));
    let unstable = doc(json!({
        "SessionCapabilities": { "properties": { "fork": def_ref("SessionForkCapabilities") } },
        "SessionForkCapabilities": { "type": "object" },
    }));
    let vendor = json!({ "$defs": {}, "x-unstable-defs": ["SessionCapabilities"] });
    let m = merged(&inputs(stable, unstable, vendor));
    assert_eq!(m.origin["SessionForkCapabilities"], Origin::Unstable);
}

#[test]
fn vendor_definitions_enter_with_vendor_origin() {
    let m =
        merged(&inputs(doc(json!({})), doc(json!({})), doc(json!({ "HeronGoal": { "type": "object" } }))));
    assert_eq!(m.origin["HeronGoal"], Origin::Vendor);
}

#[test]
fn vendor_definition_colliding_with_a_stable_one_is_an_error() {
    let message = merge_error(&inputs(
        doc(json!({ "SessionId": { "type": "string" } })),
        doc(json!({})),
        doc(json!({ "SessionId": { "type": "integer" } })),
    ));
    assert!(message.contains("SessionId"), "{message}");
}

#[test]
fn vendor_definition_colliding_with_an_unselected_unstable_one_is_an_error() {
    let message = merge_error(&inputs(
        doc(json!({})),
        doc(json!({ "Draft": { "type": "object" } })),
        doc(json!({ "Draft": { "type": "object" } })),
    ));
    assert!(message.contains("Draft"), "{message}");
}

#[test]
fn dangling_ref_is_an_error() {
    let stable = doc(json!({ "Holder": { "properties": { "x": def_ref("Missing") } } }));
    let message = merge_error(&inputs(stable, doc(json!({})), doc(json!({}))));
    assert!(message.contains("#/$defs/Missing"), "{message}");
}

#[test]
fn ref_inside_a_const_value_is_not_a_reference() {
    let stable = doc(json!({ "Example": { "const": { "$ref": "#/$defs/Missing" } } }));
    assert!(merge(&inputs(stable, doc(json!({})), doc(json!({})))).is_ok());
}

#[test]
fn vendor_aliases_are_read() {
    let vendor = json!({ "$defs": {}, "x-aliases": { "newSession": "session/new" } });
    let m = merged(&inputs(doc(json!({})), doc(json!({})), vendor));
    assert_eq!(m.aliases.get("newSession").map(String::as_str), Some("session/new"));
}

// The method table.

#[test]
fn request_and_response_pair_through_envelopes() {
    let t = table(&inputs(stable_with_ping(), doc(json!({})), doc(json!({}))));
    let ping = row(&t, "ping");
    assert_eq!(
        (ping.kind, ping.side, ping.params.as_str(), ping.result.as_deref()),
        (Kind::Request, Side::Agent, "PingRequest", Some("PingResponse"))
    );
}

#[test]
fn notification_envelope_makes_a_notification() {
    let stable = doc(json!({
        "AgentNotification": envelope(&["UpdateNotification"]),
        "UpdateNotification": method_def("session/update", "client"),
    }));
    let t = table(&inputs(stable, doc(json!({})), doc(json!({}))));
    let update = row(&t, "session/update");
    assert_eq!(
        (update.kind, update.side, update.params.as_str(), update.result.as_deref()),
        (Kind::Notification, Side::Client, "UpdateNotification", None)
    );
}

#[test]
fn protocol_method_outside_every_envelope_is_a_notification() {
    let stable = doc(json!({ "CancelRequestNotification": method_def("$/cancel_request", "protocol") }));
    let t = table(&inputs(stable, doc(json!({})), doc(json!({}))));
    let cancel = row(&t, "$/cancel_request");
    assert_eq!((cancel.kind, cancel.side), (Kind::Notification, Side::Protocol));
}

#[test]
fn agent_method_outside_every_envelope_is_an_error() {
    let i = inputs(doc(json!({ "Stray": method_def("stray", "agent") })), doc(json!({})), doc(json!({})));
    let message = method_table(&i, &merged(&i)).expect_err("fails").to_string();
    assert!(message.contains("Stray"), "{message}");
}

#[test]
fn request_without_a_response_is_an_error() {
    let stable = doc(
        json!({ "ClientRequest": envelope(&["PingRequest"]), "PingRequest": method_def("ping", "agent") }),
    );
    let i = inputs(stable, doc(json!({})), doc(json!({})));
    let message = method_table(&i, &merged(&i)).expect_err("fails").to_string();
    assert!(message.contains("ping"), "{message}");
}

#[test]
fn vendor_request_and_response_are_told_apart_by_x_message() {
    let vendor = doc(json!({
        "HeronSteerRequest": vendor_method("_heron/session/steer", "request"),
        "HeronSteerResponse": vendor_method("_heron/session/steer", "response"),
    }));
    let t = table(&inputs(doc(json!({})), doc(json!({})), vendor));
    let steer = row(&t, "_heron/session/steer");
    assert_eq!(
        (steer.kind, steer.params.as_str(), steer.result.as_deref()),
        (Kind::Request, "HeronSteerRequest", Some("HeronSteerResponse"))
    );
}

#[test]
fn vendor_notification_is_declared_by_x_message() {
    let vendor =
        doc(json!({ "HeronStatusUpdate": vendor_method("_heron/session/status_update", "notification") }));
    let t = table(&inputs(doc(json!({})), doc(json!({})), vendor));
    assert_eq!(row(&t, "_heron/session/status_update").kind, Kind::Notification);
}

#[test]
fn vendor_method_without_x_message_is_an_error() {
    let i = inputs(
        doc(json!({})),
        doc(json!({})),
        doc(json!({ "HeronStray": method_def("_heron/stray", "agent") })),
    );
    let message = method_table(&i, &merged(&i)).expect_err("fails").to_string();
    assert!(message.contains("HeronStray"), "{message}");
}

#[test]
fn stable_method_is_stable() {
    let t = table(&inputs(stable_with_ping(), doc(json!({})), doc(json!({}))));
    assert_eq!(row(&t, "ping").stability, Stability::Stable);
}

#[test]
fn selected_unstable_method_is_unstable() {
    let unstable = doc(json!({
        "ClientRequest": envelope(&["ForkRequest"]),
        "AgentResponse": envelope(&["ForkResponse"]),
        "ForkRequest": method_def("session/fork", "agent"),
        "ForkResponse": method_def("session/fork", "agent"),
    }));
    let vendor = json!({ "$defs": {}, "x-unstable-methods": ["session/fork"] });
    let t = table(&inputs(doc(json!({})), unstable, vendor));
    assert_eq!(row(&t, "session/fork").stability, Stability::Unstable);
}

#[test]
fn stable_method_whose_defs_are_replaced_by_x_unstable_defs_stays_stable() {
    let unstable = doc(json!({
        "ClientRequest": envelope(&["PingRequest"]),
        "AgentResponse": envelope(&["PingResponse"]),
        "PingRequest": method_def("ping", "agent"),
        "PingResponse": method_def("ping", "agent"),
    }));
    let vendor = json!({ "$defs": {}, "x-unstable-defs": ["PingRequest", "PingResponse"] });
    let t = table(&inputs(stable_with_ping(), unstable, vendor));
    assert_eq!(row(&t, "ping").stability, Stability::Stable);
}

#[test]
fn vendor_method_is_vendor() {
    let vendor = doc(json!({ "HeronNote": vendor_method("_heron/note", "notification") }));
    let t = table(&inputs(doc(json!({})), doc(json!({})), vendor));
    assert_eq!(row(&t, "_heron/note").stability, Stability::Vendor);
}

#[test]
fn vendor_method_marked_x_stability_unstable_is_unstable() {
    let mut note = vendor_method("session/set_model", "notification");
    note["x-stability"] = json!("unstable");
    let t = table(&inputs(doc(json!({})), doc(json!({})), doc(json!({ "SetModel": note }))));
    assert_eq!(row(&t, "session/set_model").stability, Stability::Unstable);
}

#[test]

fn unselected_unstable_method_reached_through_a_reference_stays_out_of_the_table() {
    // `session/fork`'s response mentions the params of `session/status`, which Heron does not serve.
    let unstable = doc(json!({
        "ClientRequest": envelope(&["ForkRequest"]),
        "AgentResponse": envelope(&["ForkResponse"]),
        "AgentNotification": envelope(&["StatusNotification"]),
        "ForkRequest": method_def("session/fork", "agent"),
        "ForkResponse": {
            "x-method": "session/fork",
            "x-side": "agent",
            "properties": { "status": def_ref("StatusNotification") },
        },
        "StatusNotification": method_def("session/status", "client"),
    }));
    let vendor = json!({ "$defs": {}, "x-unstable-methods": ["session/fork"] });
    let t = table(&inputs(doc(json!({})), unstable, vendor));
    let wires: Vec<&str> = t.iter().map(|m| m.wire.as_str()).collect();
    assert_eq!(wires, ["session/fork"]);
}

#[test]
fn summary_is_the_first_line_of_the_params_description_that_is_not_an_unstable_banner() {
    let mut stable = stable_with_ping();
    stable["$defs"]["PingRequest"]["description"] =
        json!("**UNSTABLE**\n\nChecks the peer is alive.\n\nMore.");
    let t = table(&inputs(stable, doc(json!({})), doc(json!({}))));
    assert_eq!(row(&t, "ping").summary, "Checks the peer is alive.");
}

#[test]
fn aliases_are_attached_to_their_method() {
    let vendor = json!({ "$defs": {}, "x-aliases": { "poke": "ping", "knock": "ping" } });
    let t = table(&inputs(stable_with_ping(), doc(json!({})), vendor));
    assert_eq!(row(&t, "ping").aliases, ["knock", "poke"]);
}

#[test]
fn alias_to_an_unknown_method_is_an_error() {
    let vendor = json!({ "$defs": {}, "x-aliases": { "poke": "pong" } });
    let i = inputs(stable_with_ping(), doc(json!({})), vendor);
    let message = method_table(&i, &merged(&i)).expect_err("fails").to_string();
    assert!(message.contains("poke") && message.contains("pong"), "{message}");
}

#[test]
fn table_is_sorted_by_side_then_wire_name() {
    let stable = doc(json!({
        "ClientRequest": envelope(&["ZetaRequest", "AlphaRequest"]),
        "AgentResponse": envelope(&["ZetaResponse", "AlphaResponse"]),
        "AgentNotification": envelope(&["BetaNotification"]),
        "ZetaRequest": method_def("zeta", "agent"),
        "ZetaResponse": method_def("zeta", "agent"),
        "AlphaRequest": method_def("alpha", "agent"),
        "AlphaResponse": method_def("alpha", "agent"),
        "BetaNotification": method_def("beta", "client"),
        "CancelNotification": method_def("$/cancel_request", "protocol"),
    }));
    let t = table(&inputs(stable, doc(json!({})), doc(json!({}))));
    let order: Vec<(Side, &str)> = t.iter().map(|m| (m.side, m.wire.as_str())).collect();
    assert_eq!(
        order,
        [
            (Side::Agent, "alpha"),
            (Side::Agent, "zeta"),
            (Side::Client, "beta"),
            (Side::Protocol, "$/cancel_request")
        ]
    );
}

/// A table row for naming tests; only `wire` matters.
fn spec(wire: &str) -> MethodSpec {
    MethodSpec {
        wire: wire.into(),
        aliases: Vec::new(),
        side: Side::Agent,
        kind: Kind::Request,
        params: String::new(),
        result: None,
        stability: Stability::Stable,
        summary: String::new(),
    }
}

#[test]
fn fn_name_is_the_snake_case_wire_name() {
    assert_eq!(spec("session/set_mode").fn_name(), "session_set_mode");
    assert_eq!(spec("_heron/session/mcpStatus").fn_name(), "heron_session_mcp_status");
    assert_eq!(spec("$/cancel_request").fn_name(), "cancel_request");
}

#[test]
fn variant_is_the_pascal_case_wire_name() {
    assert_eq!(spec("session/set_mode").variant(), "SessionSetMode");
    assert_eq!(spec("_heron/session/mcpStatus").variant(), "HeronSessionMcpStatus");
    assert_eq!(spec("$/cancel_request").variant(), "CancelRequest");
}
