//! The JSON-RPC envelope: how one line is classified, and how outgoing lines look.

use heron_rpc::RpcError;
use heron_rpc::envelope::{
    self, Id, Message, Rejected, encode_notification, encode_notification_of, encode_request, encode_response,
};
use serde_json::value::RawValue;
use serde_json::{Value, json};

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).expect("test JSON is valid")
}

/// The answer a rejected line gets, as (id, code, reason).
fn answer(line: &str) -> (Id, i32, Value) {
    match envelope::parse(line) {
        Err(Rejected::Answer { id, error }) => {
            (id, error.code, error.data.map_or(Value::Null, |d| d["reason"].clone()))
        }
        other => panic!("expected an answered rejection for {line}, got {other:?}"),
    }
}

#[test]
fn invalid_json_is_a_parse_error_with_null_id() {
    let (id, code, _) = answer(r#"{"jsonrpc":"2.0","id":1,"method":"#);
    assert_eq!((id, code), (Id::Null, -32700));
}

#[test]
fn leading_garbage_is_a_parse_error_with_null_id() {
    let (id, code, _) = answer("Loading profile... done");
    assert_eq!((id, code), (Id::Null, -32700));
}

#[test]
fn batch_is_rejected_without_processing_entries() {
    let (id, code, reason) = answer(r#"[{"jsonrpc":"2.0","id":1,"method":"a"}]"#);
    assert_eq!((id, code), (Id::Null, -32600));
    assert_eq!(reason, json!("JSON-RPC batches are not supported"));
}

#[test]
fn non_object_json_is_an_invalid_request() {
    for line in ["42", r#""hello""#, "null", "true"] {
        let (id, code, _) = answer(line);
        assert_eq!((id, code), (Id::Null, -32600), "{line}");
    }
}

#[test]
fn missing_or_wrong_jsonrpc_is_an_invalid_request_echoing_the_id() {
    assert_eq!(answer(r#"{"id":7,"method":"a"}"#).0, Id::Int(7));
    assert_eq!(answer(r#"{"jsonrpc":"1.0","id":"x","method":"a"}"#).0, Id::Str("x".into()));
    assert_eq!(answer(r#"{"jsonrpc":2.0,"id":7,"method":"a"}"#).1, -32600);
    assert_eq!(
        answer(r#"{"jsonrpc":"2.0 ","method":"a"}"#),
        (Id::Null, -32600, json!("jsonrpc must be \"2.0\""))
    );
}

#[test]
fn fractional_exponent_and_out_of_range_ids_are_invalid_requests_with_null_id() {
    for id in ["1.5", "1e3", "9223372036854775808", "-9223372036854775809", "true", "{}"] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"a"}}"#);
        let (echo, code, _) = answer(&line);
        assert_eq!((echo, code), (Id::Null, -32600), "{line}");
    }
}

#[test]
fn an_integer_id_beyond_64_bits_is_said_to_be_out_of_range() {
    for (id, reason) in [
        ("1180591620717411303424", "out of the int64 range"),
        ("-18446744073709551616", "out of the int64 range"),
        ("18446744073709551615", "out of the int64 range"),
        ("1.5", "fractional or exponent"),
        ("1e3", "fractional or exponent"),
    ] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"a"}}"#);
        let rejected = envelope::parse(&line).expect_err("rejected");
        assert!(format!("{rejected:?}").contains(reason), "{id}: {rejected:?}");
    }
}

#[test]
fn extreme_integer_ids_are_accepted() {
    for (text, id) in [("9223372036854775807", i64::MAX), ("-9223372036854775808", i64::MIN)] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"a"}}"#);
        assert!(matches!(envelope::parse(&line), Ok(Message::Request { id: got, .. }) if got == Id::Int(id)));
    }
}

#[test]
fn method_that_is_not_a_string_is_an_invalid_request() {
    assert_eq!(answer(r#"{"jsonrpc":"2.0","id":3,"method":5}"#).0, Id::Int(3));
    assert_eq!(answer(r#"{"jsonrpc":"2.0","method":null}"#).1, -32600);
}

#[test]
fn scalar_params_are_an_invalid_request() {
    for params in ["1", r#""x""#, "true"] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":"p","method":"a","params":{params}}}"#);
        assert_eq!(
            answer(&line),
            (Id::Str("p".into()), -32600, json!("params must be an object, an array or null"))
        );
    }
}

#[test]
fn array_params_pass_through_for_the_dispatcher_to_reject() {
    let msg = envelope::parse(r#"{"jsonrpc":"2.0","id":1,"method":"a","params":[1,2]}"#);
    match msg {
        Ok(Message::Request { params: Some(params), .. }) => assert_eq!(params.get(), "[1,2]"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn null_id_is_a_request_and_absent_id_is_a_notification() {
    match envelope::parse(r#"{"jsonrpc":"2.0","id":null,"method":"a"}"#) {
        Ok(Message::Request { id: Id::Null, method, params: None }) => assert_eq!(method, "a"),
        other => panic!("{other:?}"),
    }
    match envelope::parse(r#"{"jsonrpc":"2.0","method":"a","params":{"x":1}}"#) {
        Ok(Message::Notification { method, params: Some(params) }) => {
            assert_eq!((method.as_str(), params.get()), ("a", r#"{"x":1}"#));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn null_params_read_as_absent() {
    match envelope::parse(r#"{"jsonrpc":"2.0","id":1,"method":"a","params":null}"#) {
        Ok(Message::Request { params: None, .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn string_and_int_ids_stay_distinct() {
    let id = |line: &str| match envelope::parse(line) {
        Ok(Message::Request { id, .. }) => id,
        other => panic!("{other:?}"),
    };
    assert_eq!(id(r#"{"jsonrpc":"2.0","id":"1","method":"a"}"#), Id::Str("1".into()));
    assert_eq!(id(r#"{"jsonrpc":"2.0","id":1,"method":"a"}"#), Id::Int(1));
}

#[test]
fn extra_top_level_members_are_ignored() {
    let line = r#"{"jsonrpc":"2.0","id":1,"method":"a","extra":{"deep":[1]},"x":null}"#;
    assert!(matches!(envelope::parse(line), Ok(Message::Request { .. })));
}

#[test]
fn responses_carry_result_or_error() {
    match envelope::parse(r#"{"jsonrpc":"2.0","id":4,"result":{"ok":true}}"#) {
        Ok(Message::Response { id: Id::Int(4), result: Ok(result) }) => {
            assert_eq!(result.get(), r#"{"ok":true}"#);
        }
        other => panic!("{other:?}"),
    }
    match envelope::parse(r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"nope"}}"#) {
        Ok(Message::Response { id: Id::Int(4), result: Err(error) }) => {
            assert_eq!(error, RpcError::new(-32601, "nope"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn responses_with_both_or_neither_result_and_error_are_never_answered() {
    for line in [
        r#"{"jsonrpc":"2.0","id":4,"result":{},"error":{"code":1,"message":"m"}}"#,
        r#"{"jsonrpc":"2.0","id":4}"#,
    ] {
        match envelope::parse(line) {
            Err(Rejected::BadResponse { id, error }) => {
                assert_eq!((id, error.code), (Some(Id::Int(4)), -32603), "{line}");
            }
            other => panic!("{line}: {other:?}"),
        }
    }
}

#[test]
fn a_response_with_a_bad_error_object_is_malformed() {
    let line = r#"{"jsonrpc":"2.0","id":2,"error":"boom"}"#;
    assert!(matches!(envelope::parse(line), Err(Rejected::BadResponse { id: Some(Id::Int(2)), .. })));
}

#[test]
fn an_empty_object_is_an_invalid_request() {
    assert_eq!(answer(r#"{"jsonrpc":"2.0"}"#).0, Id::Null);
}

#[test]
fn requests_encode_compactly_with_jsonrpc_first() {
    let params = raw("{\n  \"a\": 1\n}");
    assert_eq!(
        encode_request(&Id::Int(0), "fs/read_text_file", Some(&params)),
        r#"{"jsonrpc":"2.0","id":0,"method":"fs/read_text_file","params":{   "a": 1 }}"#
    );
    assert_eq!(encode_notification("x", None), r#"{"jsonrpc":"2.0","method":"x"}"#);
}

#[test]
fn notifications_serialized_into_the_line_match_the_raw_encoding_and_stay_one_line() {
    let params = json!({"sessionId": "s", "update": {"text": "two\nlines\r\n\"quoted\""}});
    let line = encode_notification_of("session/update", &params).expect("encodes");
    let raw_params = serde_json::value::to_raw_value(&params).expect("encodes");
    assert_eq!(line, encode_notification("session/update", Some(&raw_params)));
    assert!(!line.contains('\n') && !line.contains('\r'), "one line: {line}");
    assert_eq!(serde_json::from_str::<Value>(&line).expect("JSON")["params"], params);
}

#[test]
fn notifications_whose_params_serialize_to_null_omit_them() {
    assert_eq!(encode_notification_of("x", &()).expect("encodes"), r#"{"jsonrpc":"2.0","method":"x"}"#);
    assert_eq!(
        encode_notification_of("x", &None::<u8>).expect("encodes"),
        r#"{"jsonrpc":"2.0","method":"x"}"#
    );
}

#[test]
fn responses_encode_ids_exactly() {
    let ok = Ok(raw("{}"));
    assert_eq!(encode_response(&Id::Str("1".into()), &ok), r#"{"jsonrpc":"2.0","id":"1","result":{}}"#);
    assert_eq!(encode_response(&Id::Int(1), &ok), r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    assert_eq!(encode_response(&Id::Null, &ok), r#"{"jsonrpc":"2.0","id":null,"result":{}}"#);
}

#[test]
fn error_responses_encode_code_message_and_data() {
    let error = Err(RpcError::method_not_found("a\"b\n"));
    assert_eq!(
        encode_response(&Id::Str("q\u{2028}".into()), &error),
        "{\"jsonrpc\":\"2.0\",\"id\":\"q\u{2028}\",\"error\":{\"code\":-32601,\"message\":\"Method not found\",\"data\":{\"method\":\"a\\\"b\\n\"}}}"
    );
}

#[test]
fn encoded_lines_parse_back_to_the_same_message() {
    let line = encode_request(&Id::Str("ω\u{1}".into()), "m\t", Some(&raw(r#"{"k":"\n"}"#)));
    assert!(!line.contains('\n'));
    match envelope::parse(&line) {
        Ok(Message::Request { id, method, params: Some(params) }) => {
            assert_eq!(
                (id, method.as_str(), params.get()),
                (Id::Str("ω\u{1}".into()), "m\t", r#"{"k":"\n"}"#)
            );
        }
        other => panic!("{other:?}"),
    }
}
