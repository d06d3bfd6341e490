//! Tests rule 2 of `heron_codegen::normalize`, `strip`: annotations the generated types
//! have no use for are removed at every depth, and the values and names that look like
//! them are kept.

use serde_json::json;

use crate::normalize_rules::{annotated, clean, stripped};

// Rule 2: stripping annotations.

#[test]
fn strip_removes_x_keys_discriminator_and_default_at_the_top() {
    assert_eq!(stripped(annotated()), clean());
}

#[test]
fn strip_recurses_into_properties() {
    let schema = json!({ "type": "object", "properties": { "name": annotated() } });
    assert_eq!(stripped(schema), json!({ "type": "object", "properties": { "name": clean() } }));
}

#[test]
fn strip_recurses_into_items() {
    assert_eq!(
        stripped(json!({ "type": "array", "items": annotated() })),
        json!({ "type": "array", "items": clean() })
    );
}

#[test]
fn strip_recurses_into_additional_properties() {
    let schema = json!({ "type": "object", "additionalProperties": annotated() });
    assert_eq!(stripped(schema), json!({ "type": "object", "additionalProperties": clean() }));
}

#[test]
fn strip_recurses_into_not() {
    assert_eq!(stripped(json!({ "not": annotated() })), json!({ "not": clean() }));
}

#[test]
fn strip_recurses_into_all_of_any_of_and_one_of() {
    let schema = json!({ "allOf": [annotated()], "anyOf": [annotated()], "oneOf": [annotated()] });
    assert_eq!(stripped(schema), json!({ "allOf": [clean()], "anyOf": [clean()], "oneOf": [clean()] }));
}

#[test]
fn strip_recurses_through_several_levels() {
    let schema =
        json!({ "anyOf": [{ "type": "array", "items": { "properties": { "deep": annotated() } } }] });
    assert_eq!(
        stripped(schema),
        json!({ "anyOf": [{ "type": "array", "items": { "properties": { "deep": clean() } } }] })
    );
}

#[test]
fn strip_keeps_const_and_enum_values_intact() {
    let schema = json!({
        "properties": {
            "fixed": { "const": { "x-kept": 1, "default": 2, "discriminator": 3 } },
            "choice": { "enum": [{ "x-kept": 1, "default": 2 }] },
        },
    });
    assert_eq!(stripped(schema.clone()), schema);
}

#[test]
fn strip_keeps_properties_named_like_keywords_and_strips_their_schemas() {
    // ACP's StringPropertySchema has properties called `default`, `enum` and `oneOf`.
    let schema = json!({
        "type": "object",
        "properties": { "default": annotated(), "enum": annotated(), "oneOf": annotated(), "x-name": annotated() },
    });
    let expected = json!({
        "type": "object",
        "properties": { "default": clean(), "enum": clean(), "oneOf": clean(), "x-name": clean() },
    });
    assert_eq!(stripped(schema), expected);
}

#[test]
fn strip_drops_string_formats_that_need_foreign_crates_and_keeps_the_rest() {
    let schema = json!({ "type": "object", "properties": {
        "at": { "type": ["string", "null"], "format": "date-time" },
        "id": { "type": "string", "format": "uuid" },
        "site": { "type": "string", "format": "uri" },
        "count": { "type": "integer", "format": "uint32" } } });
    let expected = json!({ "type": "object", "properties": {
        "at": { "type": ["string", "null"] },
        "id": { "type": "string" },
        "site": { "type": "string", "format": "uri" },
        "count": { "type": "integer", "format": "uint32" } } });
    assert_eq!(stripped(schema), expected);
}
