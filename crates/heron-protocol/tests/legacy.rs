//! Params of older clients are read in today's shape: `session/prompt` with `content` in
//! place of `prompt` validates and decodes; current params pass through untouched.

use heron_protocol::runtime::Side;
use heron_protocol::validate::SchemaValidator;
use heron_rpc::Validate;
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
