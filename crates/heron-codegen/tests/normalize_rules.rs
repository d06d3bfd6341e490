//! Tests each normalization rule of `heron_codegen::normalize` on small inline schemas.

use std::collections::BTreeMap;

use heron_codegen::normalize::{Fallback, Lenient, Normalized, TaggedVariant, UnionSpec, normalize, strip};
use serde_json::{Value, json};

/// The `$defs` map of a micro-schema written as one JSON object.
fn defs(value: Value) -> BTreeMap<String, Value> {
    serde_json::from_value(value).expect("defs are an object")
}

fn normalized(value: Value) -> Normalized {
    normalize(&defs(value)).expect("normalizes")
}

fn error(value: Value) -> String {
    normalize(&defs(value)).expect_err("fails to normalize").to_string()
}

fn union<'a>(out: &'a Normalized, name: &str) -> &'a UnionSpec {
    out.unions
        .iter()
        .find(|u| u.name() == name)
        .unwrap_or_else(|| panic!("no union `{name}` in {:?}", out.unions))
}

/// The parts of a tagged union, for destructuring in assertions.
struct Tagged<'a> {
    tag: &'a str,
    variants: &'a [TaggedVariant],
    fallbacks: &'a [Fallback],
    open: bool,
}

fn tagged<'a>(out: &'a Normalized, name: &str) -> Tagged<'a> {
    match union(out, name) {
        UnionSpec::Tagged { tag, variants, fallbacks, open, .. } => {
            Tagged { tag, variants, fallbacks, open: *open }
        }
        other => panic!("`{name}` is not tagged: {other:?}"),
    }
}

/// A schema carrying every annotation rule 2 removes.
pub(crate) fn annotated() -> Value {
    json!({ "type": "string", "x-side": "agent", "discriminator": { "propertyName": "kind" }, "default": "a" })
}

/// `annotated()` once stripped.
pub(crate) fn clean() -> Value {
    json!({ "type": "string" })
}

pub(crate) fn stripped(mut schema: Value) -> Value {
    strip(&mut schema);
    schema
}

/// A tagged variant `{<tag>: const <value>}` that wraps `target`.
fn tagged_ref(tag: &str, value: &str, target: &str) -> Value {
    json!({
        "type": "object",
        "properties": { tag: { "type": "string", "const": value } },
        "required": [tag],
        "allOf": [{ "$ref": format!("#/$defs/{target}") }],
    })
}

/// The property names of a schema, sorted.
fn keys(schema: &Value) -> Vec<&str> {
    let mut names: Vec<&str> =
        schema["properties"].as_object().expect("has properties").keys().map(String::as_str).collect();
    names.sort_unstable();
    names
}

// Rule 1: envelopes and Ext* definitions.

#[test]
fn envelope_definitions_are_dropped() {
    let out = normalized(json!({
        "AgentRequest": { "anyOf": [{ "$ref": "#/$defs/Ping" }] },
        "ClientRequest": { "anyOf": [{ "$ref": "#/$defs/Ping" }] },
        "AgentResponse": { "anyOf": [{ "$ref": "#/$defs/Ping" }] },
        "ClientResponse": { "anyOf": [{ "$ref": "#/$defs/Ping" }] },
        "AgentNotification": { "anyOf": [{ "$ref": "#/$defs/Ping" }] },
        "ClientNotification": { "anyOf": [{ "$ref": "#/$defs/Ping" }] },
        "Ping": { "type": "object" },
    }));
    assert_eq!(out.defs.keys().collect::<Vec<_>>(), ["Ping"]);
}

#[test]
fn ext_definitions_are_dropped() {
    let out = normalized(json!({
        "ExtRequest": { "type": "object" },
        "ExtResponse": { "type": "object" },
        "ExtNotification": { "type": "object" },
        "Ping": { "type": "object" },
    }));
    assert_eq!(out.defs.keys().collect::<Vec<_>>(), ["Ping"]);
}

#[test]
fn normalize_strips_plain_definitions() {
    let out = normalized(json!({
        "Thing": { "type": "object", "x-method": "thing", "properties": { "name": annotated() } },
    }));
    assert_eq!(out.defs["Thing"], json!({ "type": "object", "properties": { "name": clean() } }));
}

// Rule 3: tagged unions.

#[test]
fn tagged_variant_wrapping_a_ref_is_a_newtype_of_the_target() {
    let out = normalized(json!({
        "Block": { "oneOf": [tagged_ref("type", "text", "Text")] },
        "Text": { "description": "Plain text.", "type": "object", "properties": { "text": { "type": "string" } } },
    }));
    let union = tagged(&out, "Block");
    assert_eq!(union.tag, "type");
    assert_eq!(
        union.variants,
        [TaggedVariant { value: "text".into(), payload: Some("Text".into()), doc: "Plain text.".into() }]
    );
}

#[test]
fn tagged_union_leaves_an_object_placeholder_for_typify() {
    let out = normalized(json!({
        "Block": { "oneOf": [tagged_ref("type", "text", "Text")] },
        "Text": { "type": "object" },
    }));
    assert_eq!(out.defs["Block"], json!({ "type": "object" }));
}

#[test]
fn tagged_variant_with_only_its_tag_is_a_unit_variant() {
    let out = normalized(json!({
        "Outcome": {
            "oneOf": [{
                "description": "The turn was cancelled.",
                "type": "object",
                "properties": { "outcome": { "type": "string", "const": "cancelled" } },
                "required": ["outcome"],
            }],
        },
    }));
    assert_eq!(
        tagged(&out, "Outcome").variants,
        [TaggedVariant { value: "cancelled".into(), payload: None, doc: "The turn was cancelled.".into() }]
    );
}

#[test]
fn tagged_variant_mixing_union_properties_gets_a_synthesized_payload() {
    let out = normalized(json!({
        "Option": {
            "type": "object",
            "properties": { "id": { "type": "string" } },
            "required": ["id"],
            "oneOf": [tagged_ref("type", "select", "Select")],
        },
        "Select": {
            "description": "A dropdown.",
            "type": "object",
            "properties": { "choices": { "type": "array" } },
            "required": ["choices"],
        },
    }));
    assert_eq!(tagged(&out, "Option").variants[0].payload.as_deref(), Some("OptionSelect"));
    assert_eq!(
        out.defs["OptionSelect"],
        json!({
            "description": "A dropdown.",
            "type": "object",
            "properties": { "id": { "type": "string" }, "choices": { "type": "array" } },
            "required": ["id", "choices"],
        })
    );
}

#[test]
fn tagged_variant_with_own_properties_gets_a_synthesized_payload_without_the_tag() {
    let out = normalized(json!({
        "Value": {
            "anyOf": [{
                "type": "object",
                "properties": { "type": { "type": "string", "const": "boolean" }, "value": { "type": "boolean" } },
                "required": ["type", "value"],
            }],
        },
    }));
    assert_eq!(tagged(&out, "Value").variants[0].payload.as_deref(), Some("ValueBoolean"));
    assert_eq!(keys(&out.defs["ValueBoolean"]), ["value"]);
    assert_eq!(out.defs["ValueBoolean"]["required"], json!(["value"]));
}

/// `IdleStateUpdate`-like: the union declares its tag beside the variants, and a titled
/// `none` variant narrows the tag to null.
fn idle() -> Value {
    json!({
        "Idle": {
            "type": "object",
            "properties": {
                "background": { "type": "array" },
                "stopReason": { "type": ["string", "null"], "x-deserialize-default-on-error": true },
            },
            "anyOf": [
                { "type": "object", "properties": { "stopReason": { "type": "string", "const": "end_turn" } },
                  "required": ["stopReason"] },
                { "title": "none", "type": "object", "properties": { "stopReason": { "type": "null" } } },
            ],
        },
    })
}

#[test]
fn a_tag_the_union_declares_is_not_repeated_in_the_tagged_payloads() {
    let out = normalized(idle());
    assert_eq!(tagged(&out, "Idle").variants[0].payload.as_deref(), Some("IdleEndTurn"));
    assert_eq!(keys(&out.defs["IdleEndTurn"]), ["background"]);
    assert!(!out.lenient.get("IdleEndTurn").is_some_and(|l| l.contains_key("stopReason")));
}

#[test]
fn a_variant_property_replaces_the_union_property_of_the_same_name() {
    let out = normalized(idle());
    assert_eq!(tagged(&out, "Idle").fallbacks[0].payload, "IdleNone");
    assert_eq!(out.defs["IdleNone"]["properties"]["stopReason"], json!({ "type": "null" }));
    // The narrowed property is read strictly, so a non-null value is no `none`.
    assert!(!out.lenient.get("IdleNone").is_some_and(|l| l.contains_key("stopReason")));
}

#[test]
fn synthesized_payload_properties_are_stripped() {
    let out = normalized(json!({
        "Option": {
            "properties": { "id": annotated() },
            "oneOf": [tagged_ref("type", "select", "Select")],
        },
        "Select": { "type": "object", "properties": { "choice": annotated() } },
    }));
    assert_eq!(out.defs["OptionSelect"]["properties"], json!({ "id": clean(), "choice": clean() }));
}

#[test]
fn titled_untagged_variant_becomes_a_fallback() {
    let out = normalized(json!({
        "Server": {
            "anyOf": [
                tagged_ref("type", "http", "Http"),
                { "title": "stdio", "description": "Stdio transport.", "allOf": [{ "$ref": "#/$defs/Stdio" }] },
            ],
        },
        "Http": { "type": "object" },
        "Stdio": { "type": "object" },
    }));
    assert_eq!(
        tagged(&out, "Server").fallbacks,
        [Fallback { variant: "Stdio".into(), payload: "Stdio".into(), doc: "Stdio transport.".into() }]
    );
}

#[test]
fn catch_all_with_not_makes_the_union_open() {
    let out = normalized(json!({
        "Mode": {
            "anyOf": [
                tagged_ref("mode", "form", "Form"),
                {
                    "title": "other",
                    "type": "object",
                    "properties": { "mode": { "type": "string" } },
                    "required": ["mode"],
                    "not": { "properties": { "mode": { "const": "form" } } },
                },
            ],
        },
        "Form": { "type": "object" },
    }));
    let union = tagged(&out, "Mode");
    assert!(union.open);
    assert!(union.fallbacks.is_empty(), "the catch-all is not a fallback: {:?}", union.fallbacks);
    assert_eq!(union.variants.len(), 1);
}

#[test]
fn union_without_catch_all_is_closed() {
    let out = normalized(json!({
        "Block": { "oneOf": [tagged_ref("type", "text", "Text")] },
        "Text": { "type": "object" },
    }));
    assert!(!tagged(&out, "Block").open);
}

#[test]
fn target_scopes_are_merged_as_optional_properties() {
    let out = normalized(json!({
        "Elicit": {
            "type": "object",
            "properties": { "message": { "type": "string" } },
            "required": ["message"],
            "anyOf": [tagged_ref("mode", "form", "FormMode")],
        },
        "FormMode": {
            "type": "object",
            "properties": { "schema": { "type": "object" } },
            "required": ["schema"],
            "anyOf": [
                { "title": "Session", "allOf": [{ "$ref": "#/$defs/SessionScope" }] },
                { "title": "Request", "allOf": [{ "$ref": "#/$defs/RequestScope" }] },
            ],
        },
        "SessionScope": { "type": "object", "properties": { "sessionId": { "type": "string" } }, "required": ["sessionId"] },
        "RequestScope": { "type": "object", "properties": { "requestId": { "type": "string" } }, "required": ["requestId"] },
    }));
    let payload = &out.defs["ElicitForm"];
    assert_eq!(keys(payload), ["message", "requestId", "schema", "sessionId"]);
    assert_eq!(payload["required"], json!(["message", "schema"]));
}

#[test]
fn variants_disagreeing_on_the_tag_property_are_an_error() {
    let message = error(json!({
        "Mixed": { "oneOf": [tagged_ref("type", "a", "A"), tagged_ref("kind", "b", "B")] },
        "A": { "type": "object" },
        "B": { "type": "object" },
    }));
    assert!(message.contains("Mixed") && message.contains("tag"), "{message}");
}

#[test]
fn untagged_variant_without_a_title_is_an_error() {
    let message = error(json!({
        "Server": { "anyOf": [tagged_ref("type", "http", "Http"), { "allOf": [{ "$ref": "#/$defs/Stdio" }] }] },
        "Http": { "type": "object" },
        "Stdio": { "type": "object" },
    }));
    assert!(message.contains("Server") && message.contains("title"), "{message}");
}

// Rule 4: open string enums.

#[test]
fn open_string_enum_becomes_open_string_with_values_and_docs() {
    let out = normalized(json!({
        "Severity": {
            "description": "How bad it is.",
            "anyOf": [
                { "description": "Just so you know.", "type": "string", "const": "info" },
                { "description": "Look at this.", "type": "string", "const": "warning" },
                { "title": "other", "type": "string" },
            ],
        },
    }));
    assert_eq!(
        union(&out, "Severity"),
        &UnionSpec::OpenString {
            name: "Severity".into(),
            doc: "How bad it is.".into(),
            values: vec![
                ("info".into(), "Just so you know.".into()),
                ("warning".into(), "Look at this.".into())
            ],
        }
    );
    assert_eq!(out.defs["Severity"], json!({ "type": "string" }));
}

#[test]
fn closed_string_enum_is_left_to_typify() {
    let def = json!({
        "description": "Who wrote it.",
        "oneOf": [
            { "description": "The user.", "type": "string", "const": "user" },
            { "description": "The agent.", "type": "string", "const": "assistant" },
        ],
    });
    let out = normalized(json!({ "Role": def.clone() }));
    assert!(out.unions.is_empty(), "{:?}", out.unions);
    assert_eq!(out.defs["Role"], def);
}

// Rule 5: open integer enums.

#[test]
fn open_integer_enum_becomes_a_plain_integer() {
    let out = normalized(json!({
        "ErrorCode": {
            "description": "Error codes.",
            "anyOf": [
                { "title": "Parse error", "type": "integer", "format": "int32", "const": -32700 },
                { "title": "Internal error", "type": "integer", "format": "int32", "const": -32603 },
                { "title": "Other", "description": "Other code.", "type": "integer", "format": "int32" },
            ],
        },
    }));
    assert_eq!(
        out.defs["ErrorCode"],
        json!({ "description": "Error codes.", "type": "integer", "format": "int32" })
    );
    assert!(out.unions.is_empty(), "{:?}", out.unions);
}

// Rule 6: one-variant anyOf.

#[test]
fn one_variant_any_of_becomes_its_ref() {
    let out = normalized(json!({
        "Input": {
            "description": "Command input.",
            "anyOf": [{ "title": "unstructured", "allOf": [{ "$ref": "#/$defs/Unstructured" }] }],
        },
        "Unstructured": { "type": "object" },
    }));
    assert_eq!(out.defs["Input"], json!({ "$ref": "#/$defs/Unstructured", "description": "Command input." }));
}

// Rule 7: other anyOf unions.

#[test]
fn untagged_any_of_becomes_one_of_with_pascal_case_titles() {
    let out = normalized(json!({
        "Content": {
            "anyOf": [
                { "title": "text value", "type": "string" },
                { "title": "count", "type": "integer" },
            ],
        },
    }));
    let def = &out.defs["Content"];
    assert!(def.get("anyOf").is_none(), "{def}");
    let titles: Vec<&Value> = def["oneOf"].as_array().expect("oneOf").iter().map(|v| &v["title"]).collect();
    assert_eq!(titles, [&json!("TextValue"), &json!("Count")]);
}

#[test]
fn untitled_ref_variant_is_titled_after_its_target() {
    let out = normalized(json!({
        "Resource": { "anyOf": [{ "$ref": "#/$defs/TextResource" }, { "$ref": "#/$defs/BlobResource" }] },
        "TextResource": { "type": "object" },
        "BlobResource": { "type": "object" },
    }));
    let titles: Vec<&Value> =
        out.defs["Resource"]["oneOf"].as_array().expect("oneOf").iter().map(|v| &v["title"]).collect();
    assert_eq!(titles, [&json!("TextResource"), &json!("BlobResource")]);
}

#[test]
fn union_properties_are_distributed_into_each_variant() {
    let out = normalized(json!({
        "FormMode": {
            "type": "object",
            "properties": { "schema": { "type": "object" } },
            "required": ["schema"],
            "anyOf": [
                { "title": "Session", "allOf": [{ "$ref": "#/$defs/SessionScope" }] },
                { "title": "Request", "allOf": [{ "$ref": "#/$defs/RequestScope" }] },
            ],
        },
        "SessionScope": { "type": "object", "properties": { "sessionId": { "type": "string" } }, "required": ["sessionId"] },
        "RequestScope": { "type": "object", "properties": { "requestId": { "type": "string" } }, "required": ["requestId"] },
    }));
    let variants = out.defs["FormMode"]["oneOf"].as_array().expect("oneOf").clone();
    assert_eq!(variants.len(), 2);
    assert_eq!((&variants[0]["title"], keys(&variants[0])), (&json!("Session"), vec!["schema", "sessionId"]));
    assert_eq!(variants[0]["required"], json!(["schema", "sessionId"]));
    assert_eq!((&variants[1]["title"], keys(&variants[1])), (&json!("Request"), vec!["requestId", "schema"]));
    assert_eq!(variants[1]["required"], json!(["schema", "requestId"]));
}

#[test]

fn distributed_target_properties_are_stripped() {
    let out = normalized(json!({
        "FormMode": {
            "type": "object",
            "properties": { "schema": { "type": "object" } },
            "anyOf": [
                { "title": "Session", "allOf": [{ "$ref": "#/$defs/SessionScope" }] },
                { "title": "Request", "allOf": [{ "$ref": "#/$defs/RequestScope" }] },
            ],
        },
        "SessionScope": { "type": "object", "properties": { "toolCallId": annotated() } },
        "RequestScope": { "type": "object", "properties": { "requestId": { "type": "string" } } },
    }));
    assert_eq!(out.defs["FormMode"]["oneOf"][0]["properties"]["toolCallId"], clean());
}

#[test]
fn a_field_null_clears_is_a_patch_in_either_version_s_wording_and_plain_optional_is_not() {
    let out = normalized(json!({
        "Update": {
            "type": "object",
            "properties": {
                "v1Title": { "type": ["string", "null"], "description": "A title. Set to null to clear." },
                "title": { "type": ["string", "null"], "description": "Omission leaves the title unchanged, `null` unsets it." },
                "capabilities": {
                    "anyOf": [{ "$ref": "#/$defs/Caps" }, { "type": "null" }],
                    "description": "Omission leaves the capabilities unchanged, `null` clears them.",
                    "x-deserialize-default-on-error": true,
                },
                "status": { "anyOf": [{ "type": "string" }, { "type": "null" }], "description": "`null` resets it to `pending`." },
                "uri": { "type": ["string", "null"], "description": "Omitted and `null` are equivalent and mean no URI.",
                         "x-deserialize-default-on-error": true },
            },
        },
        "Caps": { "type": "object" },
    }));
    let read = |property: &str| out.lenient.get("Update").and_then(|l| l.get(property)).copied();
    for patch in ["v1Title", "title", "capabilities", "status"] {
        assert_eq!(read(patch), Some(Lenient::Patch), "{patch}");
    }
    assert_eq!(read("uri"), Some(Lenient::DefaultOnError), "absent and null mean the same: no patch");
}
