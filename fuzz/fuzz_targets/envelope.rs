//! Fuzzes the JSON-RPC envelope: any string through `protocol::envelope::parse`. It must
//! never panic, only answer -32700 or -32600, and whatever Heron would write back (the
//! message re-encoded, or the error answer) must be one line that parses to the same thing.

#![no_main]

use heron_rpc::RpcError;
use heron_rpc::envelope::{
    Id, Message, Rejected, encode_notification, encode_request, encode_response, parse,
};
use libfuzzer_sys::fuzz_target;
use serde_json::value::RawValue;

/// Parses a line Heron wrote, checking it is one line first.
fn reparse(line: &str) -> Message {
    assert!(!line.contains(['\n', '\r']), "an encoded message spans lines: {line:?}");
    match parse(line) {
        Ok(message) => message,
        Err(rejected) => panic!("Heron wrote a line it rejects itself: {line:?} -> {rejected:?}"),
    }
}

/// A raw value as Heron copies it onto the wire: CR and LF (whitespace) become spaces.
fn on_the_wire(raw: Option<&RawValue>) -> Option<String> {
    raw.map(|raw| raw.get().replace(['\n', '\r'], " "))
}

fn raw_text(raw: Option<&RawValue>) -> Option<String> {
    raw.map(|raw| raw.get().to_owned())
}

/// The answer to `id` must come back as a response under the same id.
fn assert_answer_round_trips(id: &Id, result: &Result<Box<RawValue>, RpcError>) {
    match reparse(&encode_response(id, result)) {
        Message::Response { id: again, result: back } => {
            assert_eq!(&again, id);
            match (result, &back) {
                (Ok(sent), Ok(back)) => assert_eq!(on_the_wire(Some(sent)), raw_text(Some(back))),
                (Err(sent), Err(back)) => assert_eq!(sent, back),
                _ => panic!("a response changed between result and error"),
            }
        }
        other => panic!("an encoded response read back as {other:?}"),
    }
}

fuzz_target!(|line: &str| {
    match parse(line) {
        Ok(Message::Request { id, method, params }) => {
            match reparse(&encode_request(&id, &method, params.as_deref())) {
                Message::Request { id: id2, method: method2, params: params2 } => {
                    assert_eq!((id2, method2), (id.clone(), method.clone()));
                    assert_eq!(raw_text(params2.as_deref()), on_the_wire(params.as_deref()));
                }
                other => panic!("an encoded request read back as {other:?}"),
            }
            assert_answer_round_trips(&id, &Err(RpcError::method_not_found(&method)));
        }
        Ok(Message::Notification { method, params }) => {
            match reparse(&encode_notification(&method, params.as_deref())) {
                Message::Notification { method: method2, params: params2 } => {
                    assert_eq!(method2, method);
                    assert_eq!(raw_text(params2.as_deref()), on_the_wire(params.as_deref()));
                }
                other => panic!("an encoded notification read back as {other:?}"),
            }
        }
        Ok(Message::Response { id, result }) => assert_answer_round_trips(&id, &result),
        Err(Rejected::Answer { id, error }) => {
            assert!(matches!(error.code, -32700 | -32600), "unexpected code {}", error.code);
            if error.code == -32700 {
                assert_eq!(id, Id::Null, "a parse error must be answered with id null");
            }
            assert_answer_round_trips(&id, &Err(error));
        }
        Err(Rejected::BadResponse { .. }) => {}
    }
});
