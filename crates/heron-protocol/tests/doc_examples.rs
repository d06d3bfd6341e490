//! Every JSON example of the ACP v1 docs goes through the generated types and comes back
//! meaning the same thing.
//!
//! "The same" ignores what the protocol itself treats as equal: an optional field sent as
//! `null` or as an empty array is the same as an absent one. Examples the ACP schema itself
//! rejects (`expect: schema_mismatch`) must not silently pass as something else: they either
//! fail to decode or come back changed.

use heron_protocol::{Method, canonical_def, canonical_params, canonical_result};
use serde_json::Value;
use serde_json::value::RawValue;

fn fixtures() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/acp_doc_examples.json");
    let text = std::fs::read_to_string(path).expect("fixture file");
    let doc: Value = serde_json::from_str(&text).expect("fixture JSON");
    doc["examples"].as_array().expect("examples array").clone()
}

/// Drops `null` members and empty arrays, which ACP treats as absent.
fn prune(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
                .map(|(k, v)| (k.clone(), prune(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(prune).collect()),
        other => other.clone(),
    }
}

fn pointer<'a>(message: &'a Value, example: &Value) -> &'a Value {
    match example.get("pointer").and_then(Value::as_str) {
        Some(p) => message.pointer(p).unwrap_or(&Value::Null),
        None => message,
    }
}

/// Returns (what was sent, what Heron made of it), or None for examples with no typed payload.
fn round_trip(example: &Value) -> Option<(Value, Result<Value, String>)> {
    let message = &example["message"];
    let direction = example["direction"].as_str()?;
    let (payload, result) = match direction {
        "request" | "notification" | "response" => {
            let method = Method::from_wire(example["method"].as_str()?)?;
            let key = if direction == "response" { "result" } else { "params" };
            let payload = message.get(key)?.clone();
            let raw = RawValue::from_string(payload.to_string()).ok()?;
            let result = if direction == "response" {
                canonical_result(method, &raw)
            } else {
                canonical_params(method, &raw)
            };
            (payload, result)
        }
        "fragment" => {
            let def = example.get("def")?.as_str()?;
            let payload = pointer(message, example).clone();
            if payload.is_string() && def != "SessionId" {
                return None; // Blocks that did not parse are stored as text.
            }
            let raw = RawValue::from_string(payload.to_string()).ok()?;
            (payload, canonical_def(def, &raw)?)
        }
        _ => return None,
    };
    Some((payload, result.map_err(|e| format!("{e}: {:?}", e.data))))
}

#[test]
fn every_doc_example_round_trips_through_the_generated_types() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for example in fixtures() {
        if example["expect"] != "roundtrip" {
            continue;
        }
        let Some((sent, back)) = round_trip(&example) else { continue };
        checked += 1;
        match back {
            Ok(back) if prune(&back) == prune(&sent) => {}
            Ok(back) => {
                failures.push(format!("{}: changed\n  sent {sent}\n  back {back}", example["source"]))
            }
            Err(err) => failures.push(format!("{}: rejected: {err}\n  sent {sent}", example["source"])),
        }
    }
    assert!(failures.is_empty(), "{} of {checked} examples failed:\n{}", failures.len(), failures.join("\n"));
    assert!(checked >= 80, "only {checked} examples were checked");
}

#[test]
fn doc_examples_the_schema_rejects_do_not_pass_unchanged() {
    for example in fixtures() {
        if example["expect"] != "schema_mismatch" {
            continue;
        }
        let Some((sent, back)) = round_trip(&example) else { continue };
        if let Ok(back) = back {
            assert_ne!(prune(&back), prune(&sent), "{} passed unchanged", example["source"]);
        }
    }
}
