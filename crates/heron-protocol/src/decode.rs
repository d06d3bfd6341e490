//! Typed params and results over raw JSON: decoding with the offending field's path in the
//! error, encoding for the wire. A failed decode is repeated with serde's own derive for
//! the tagged unions ([`crate::tagged`]), so its error is exactly serde's.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use crate::tagged::with_buffered_unions;
use heron_rpc::RpcError;

/// Decodes the params of `method`. Absent or `null` params decode as `{}`, as the
/// reference SDKs do, so methods whose fields are all optional work without params.
///
/// On failure the error's `data` names the JSON path of the offending field.
pub fn decode_params<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, RpcError> {
    let text = match params.map(RawValue::get) {
        None | Some("null") => "{}",
        Some(text) => text,
    };
    // Almost every message decodes, so tracking the path is paid for only when there is an
    // error to report: the second pass reads the same bytes the way serde's derive does.
    if let Ok(value) = serde_json::from_str(text) {
        return Ok(value);
    }
    with_buffered_unions(|| {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de).map_err(|err| {
            let reason = err.inner().to_string();
            RpcError::invalid_params(field_path(err.path(), &reason), reason)
        })
    })
}

/// Decodes a result from a peer. `null` decodes as `{}`, since some clients answer empty
/// results that way.
pub fn decode_result<T: DeserializeOwned>(result: &RawValue) -> Result<T, RpcError> {
    let text = match result.get() {
        "null" => "{}",
        text => text,
    };
    if let Ok(value) = serde_json::from_str(text) {
        return Ok(value);
    }
    with_buffered_unions(|| {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de).map_err(|err| {
            let path = field_path(err.path(), &err.inner().to_string());
            tracing::warn!(%path, error = %err.inner(), "peer sent a result that does not decode");
            RpcError::new(heron_rpc::error::INTERNAL_ERROR, "Peer sent an invalid result")
                .with_data(serde_json::json!({ "path": path, "reason": err.into_inner().to_string() }))
        })
    })
}

/// The JSON path of the field a decode error is about, as `prompt[0].text`. serde reports a
/// missing field at the object that lacks it, so for that error the path it tracked is the
/// parent's and the field's own name, known only from the message, is appended: a client
/// told `""` for a missing `cwd` could not tell which of its fields to add.
fn field_path(tracked: &serde_path_to_error::Path, reason: &str) -> String {
    let parent = tracked.to_string();
    let parent = if parent == "." { "" } else { parent.as_str() };
    // serde's own wording (`de::Error::missing_field`); field names are Rust identifiers
    // renamed by the schema, so they hold no backtick.
    let missing = reason.strip_prefix("missing field `").and_then(|rest| rest.split_once('`'));
    match missing {
        Some((field, _)) if parent.is_empty() => field.to_owned(),
        Some((field, _)) => format!("{parent}.{field}"),
        None => parent.to_owned(),
    }
}

/// Encodes a handler's result for the wire.
pub fn encode_result<T: Serialize>(result: &T) -> Result<Box<RawValue>, RpcError> {
    serde_json::value::to_raw_value(result).map_err(|err| RpcError::internal(&err))
}

/// A handler's answer, then what follows it on the wire. A handler that has nothing to
/// follow its answer returns its result alone, which converts.
#[derive(Debug)]
pub struct Answered<R> {
    /// The result, or the error the request is answered with.
    pub result: Result<R, RpcError>,
    /// What follows the answer: notifications right behind it, then actions.
    pub then: heron_rpc::Then,
}

impl<R> Answered<R> {
    /// `result`, followed by `then`.
    pub fn new(result: R, then: heron_rpc::Then) -> Self {
        Self { result: Ok(result), then }
    }

    /// `result`, success or error, followed by `then` either way.
    pub fn either(result: Result<R, RpcError>, then: heron_rpc::Then) -> Self {
        Self { result, then }
    }
}

impl<R> From<R> for Answered<R> {
    fn from(result: R) -> Self {
        Self::new(result, heron_rpc::Then::new())
    }
}

/// Encodes a handler's answer for the wire: its result, and what follows it when it has one.
pub fn encode_answer<R: Serialize>(answered: Result<Answered<R>, RpcError>) -> heron_rpc::Answer {
    match answered {
        Ok(Answered { result: Ok(result), then }) => {
            heron_rpc::Answer { result: encode_result(&result), then }
        }
        Ok(Answered { result: Err(error), then }) => heron_rpc::Answer { result: Err(error), then },
        Err(error) => heron_rpc::Answer::from(Err(error)),
    }
}

/// Encodes a decoded message as a JSON value (for canonical round trips).
pub fn to_value<T: Serialize>(value: &T) -> Result<serde_json::Value, RpcError> {
    serde_json::to_value(value).map_err(|err| RpcError::internal(&err))
}
