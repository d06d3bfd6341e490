//! Params of older clients are read in today's shape: `session/prompt` with `content` in
//! place of `prompt` validates and decodes, MCP servers' `env` and `headers` objects become
//! name-value lists; current params pass through untouched.

use std::borrow::Cow;

use heron_protocol::Method;
use heron_protocol::runtime::{ProtocolMethod, Side};
use heron_protocol::validate::SchemaValidator;
use heron_rpc::Validate;
use serde_json::Value;
use serde_json::value::RawValue;

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).expect("raw")
}

#[test]
fn content_in_place_of_prompt_validates_as_a_prompt() {
    let validator = SchemaValidator::new(Side::Agent).expect("the schema compiles");
    let legacy = raw(r#"{"sessionId":"s","content":[{"type":"text","text":"hi"}]}"#);
    assert_eq!(validator.incoming("session/prompt", Some(&legacy)), Ok(()));
    let current = raw(r#"{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}"#);
    assert_eq!(validator.incoming("session/prompt", Some(&current)), Ok(()));
}

#[test]
fn content_means_nothing_special_to_other_methods() {
    let validator = SchemaValidator::new(Side::Agent).expect("the schema compiles");
    let without_prompt = raw(r#"{"sessionId":"s","content":[]}"#);
    assert!(validator.incoming("session/cancel", Some(&without_prompt)).is_ok());
    let neither = raw(r#"{"sessionId":"s"}"#);
    assert!(validator.incoming("session/prompt", Some(&neither)).is_err(), "a prompt is required");
}

fn upgraded(method: Method, params: &str) -> Value {
    let raw = raw(params);
    let out = method.upgrade(Some(&raw)).expect("params");
    serde_json::from_str(out.get()).expect("json")
}

#[test]
fn header_and_env_objects_become_name_value_lists() {
    let params = r#"{"cwd":"/w","mcpServers":[
        {"type":"http","name":"web","url":"http://h/mcp","headers":{"X-Key":"k1","Y":"2"}},
        {"name":"fs","command":"mcp","args":[],"env":{"TOKEN":"t"}},
        {"type":"sse","name":"old","url":"http://h/sse","headers":[{"name":"A","value":"b"}]}]}"#;
    let servers = upgraded(Method::SessionNew, params)["mcpServers"].clone();
    assert_eq!(
        servers[0]["headers"],
        serde_json::json!([{"name": "X-Key", "value": "k1"}, {"name": "Y", "value": "2"}])
    );
    assert_eq!(servers[1]["env"], serde_json::json!([{"name": "TOKEN", "value": "t"}]));
    assert_eq!(servers[2]["headers"], serde_json::json!([{"name": "A", "value": "b"}]));
}

#[test]
fn mcp_server_lists_are_left_as_sent() {
    let params = raw(r#"{"cwd":"/w","mcpServers":[{"name":"fs","command":"mcp","args":[],"env":[]}]}"#);
    assert!(matches!(Method::SessionLoad.upgrade(Some(&params)), Some(Cow::Borrowed(_))));
}
