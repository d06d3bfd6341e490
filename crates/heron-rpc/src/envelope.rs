//! The hand-written JSON-RPC 2.0 envelope: reads one line into a request, notification or
//! response, and writes outgoing messages as single compact lines.
//!
//! Params and results stay raw (`RawValue`): the envelope checks the frame, never the
//! payload. Classification of one line:
//!
//! - Not JSON: -32700, answered with `id: null`.
//! - JSON but not an object, a batch, a bad `jsonrpc`, `id`, `method` or `params`: -32600,
//!   answered with the id when it could be read, else `id: null`. These are answered even
//!   without an `id`, because a frame this broken is not known to be a notification.
//! - A `method` member makes it a request (with an `id` member, even `"id": null`) or a
//!   notification (no `id` member).
//! - No `method` but a `result`, `error` or `id` member makes it a response. A broken
//!   response is never answered: its id belongs to our own id space, so an error sent
//!   back under it would read as an answer to one of the peer's requests.

use std::fmt::{self, Write as _};

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use super::error::RpcError;

/// A JSON-RPC request id, kept in the type it arrived in so it is echoed exactly
/// (`"1"` and `1` are different ids).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Id {
    /// `null`: allowed on incoming requests (discouraged); never used for our own.
    Null,
    /// An integer within `i64`.
    Int(i64),
    /// A string.
    Str(String),
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Null => f.write_str("null"),
            Id::Int(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Int(n)
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::Str(s.to_owned())
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Null => serializer.serialize_unit(),
            Id::Int(n) => serializer.serialize_i64(*n),
            Id::Str(s) => serializer.serialize_str(s),
        }
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IdVisitor)
    }
}

struct IdVisitor;

impl Visitor<'_> for IdVisitor {
    type Value = Id;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, an integer within int64, or null")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Id, E> {
        Ok(Id::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Id, E> {
        Ok(Id::Null)
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Id, E> {
        Ok(Id::Int(n))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Id, E> {
        i64::try_from(n).map(Id::Int).map_err(|_| E::custom("id is out of the int64 range"))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Id, E> {
        // An integer too large for 64 bits reaches here as a float; say what it is.
        if n.fract() == 0.0 && n.abs() >= 9_223_372_036_854_775_808.0 {
            return Err(E::custom("id is out of the int64 range"));
        }
        Err(E::custom("id must be an integer, not a fractional or exponent number"))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Id, E> {
        Ok(Id::Str(s.to_owned()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Id, E> {
        Ok(Id::Str(s))
    }
}

/// One well-formed incoming message.
#[derive(Debug)]
pub enum Message {
    /// A call that must get exactly one response under `id`.
    Request {
        /// The id to answer under, exactly as received.
        id: Id,
        /// The method name.
        method: String,
        /// An object or array; `None` when absent or `null`.
        params: Option<Box<RawValue>>,
    },
    /// A message that is never answered.
    Notification {
        /// The method name.
        method: String,
        /// An object or array; `None` when absent or `null`.
        params: Option<Box<RawValue>>,
    },
    /// The peer's answer to one of our requests.
    Response {
        /// The id of our request.
        id: Id,
        /// The `result` member, or the `error` member.
        result: Result<Box<RawValue>, RpcError>,
    },
}

/// Why a line is not a usable message, and what to do about it.
#[derive(Debug, PartialEq)]
pub enum Rejected {
    /// Answer `error` under `id` (`Id::Null` when the id could not be read).
    Answer {
        /// The id to answer under.
        id: Id,
        /// -32700 or -32600.
        error: RpcError,
    },
    /// A broken response: never answered. When `id` names one of our pending calls, that
    /// call fails with `error`; otherwise the line is logged and dropped.
    BadResponse {
        /// The id, when it could be read.
        id: Option<Id>,
        /// What is wrong with it.
        error: RpcError,
    },
}

/// The top-level members, borrowed from the line. `Some(raw)` means "present", including
/// `null`, which plain `Option` would lose.
#[derive(Deserialize)]
struct Members<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// Parses one line (without its terminator) into a message.
pub fn parse(line: &str) -> Result<Message, Rejected> {
    // A well-formed object is read in one pass. Any line that pass rejects is read again
    // below, whose order of checks decides which error it gets; a line the pass accepts is
    // one the checks below would accept with the same members.
    if line.trim_start().starts_with('{')
        && let Ok(members) = serde_json::from_str::<Members<'_>>(line)
    {
        return classify(&members);
    }
    let answer_null = |error| Rejected::Answer { id: Id::Null, error };
    let raw: &RawValue =
        serde_json::from_str(line).map_err(|err| answer_null(RpcError::parse_error(err.to_string())))?;
    // A derived struct would also accept a positional array, so check the shape first.
    match raw.get().trim_start().as_bytes().first() {
        Some(b'{') => {}
        Some(b'[') => {
            return Err(answer_null(RpcError::invalid_request("JSON-RPC batches are not supported")));
        }
        _ => {
            return Err(answer_null(RpcError::invalid_request("a message must be a JSON object")));
        }
    }
    let members: Members<'_> = serde_json::from_str(raw.get())
        .map_err(|err| answer_null(RpcError::invalid_request(err.to_string())))?;
    classify(&members)
}

/// Tells a request, notification or response apart by the members of a JSON object.
fn classify(members: &Members<'_>) -> Result<Message, Rejected> {
    let answer_null = |error| Rejected::Answer { id: Id::Null, error };
    if members.method.is_none() {
        if members.id.is_none() && members.result.is_none() && members.error.is_none() {
            return Err(answer_null(RpcError::invalid_request("not a request, notification or response")));
        }
        return parse_response(members);
    }

    // Read the id first so every later error can echo it.
    let id = match members.id.map(read_id).transpose() {
        Ok(id) => id,
        Err(error) => return Err(answer_null(error)),
    };
    let reject = |error| Rejected::Answer { id: id.clone().unwrap_or(Id::Null), error };
    check_version(members.jsonrpc).map_err(reject)?;
    let method = members
        .method
        .and_then(read_method)
        .ok_or_else(|| reject(RpcError::invalid_request("method must be a string")))?;
    let params = read_params(members.params).map_err(reject)?;
    Ok(match id {
        Some(id) => Message::Request { id, method, params },
        None => Message::Notification { method, params },
    })
}

/// The method name, if the member is a string. Method names rarely hold escapes, so the
/// common case copies the text between the quotes instead of parsing it again.
fn read_method(raw: &RawValue) -> Option<String> {
    match raw.get().strip_prefix('"').and_then(|rest| rest.strip_suffix('"')) {
        Some(plain) if !plain.contains('\\') => Some(plain.to_owned()),
        _ => serde_json::from_str(raw.get()).ok(),
    }
}

fn parse_response(members: &Members<'_>) -> Result<Message, Rejected> {
    let bad = |id: Option<&Id>, reason: &str| Rejected::BadResponse {
        id: id.cloned(),
        error: malformed_response(reason),
    };
    let id = match members.id.map(read_id) {
        Some(Ok(id)) => id,
        Some(Err(_)) => return Err(bad(None, "the response id is not a string, int64 or null")),
        None => return Err(bad(None, "the response has no id")),
    };
    if check_version(members.jsonrpc).is_err() {
        return Err(bad(Some(&id), "jsonrpc must be \"2.0\""));
    }
    match (members.result, members.error) {
        (Some(result), None) => Ok(Message::Response { id, result: Ok(result.to_owned()) }),
        (None, Some(error)) => match serde_json::from_str::<RpcError>(error.get()) {
            Ok(error) => Ok(Message::Response { id, result: Err(error) }),
            Err(_) => Err(bad(Some(&id), "the error member is not a JSON-RPC error object")),
        },
        (Some(_), Some(_)) => Err(bad(Some(&id), "a response has both result and error")),
        (None, None) => Err(bad(Some(&id), "a response has neither result nor error")),
    }
}

/// The error a pending call fails with when its response is broken.
pub fn malformed_response(reason: &str) -> RpcError {
    RpcError::new(super::error::INTERNAL_ERROR, "Peer sent a malformed response")
        .with_data(serde_json::json!({ "reason": reason }))
}

fn read_id(raw: &RawValue) -> Result<Id, RpcError> {
    serde_json::from_str(raw.get()).map_err(|err| {
        // serde_json appends " at line 1 column N"; the reason alone reads better.
        let reason = err.to_string();
        let reason = reason.split(" at line ").next().unwrap_or_default();
        RpcError::invalid_request(format!("invalid id: {reason}"))
    })
}

fn check_version(raw: Option<&RawValue>) -> Result<(), RpcError> {
    match raw.map(RawValue::get) {
        Some("\"2.0\"") => Ok(()),
        _ => Err(RpcError::invalid_request("jsonrpc must be \"2.0\"")),
    }
}

fn read_params(raw: Option<&RawValue>) -> Result<Option<Box<RawValue>>, RpcError> {
    let Some(raw) = raw else { return Ok(None) };
    match raw.get().trim_start().as_bytes().first() {
        Some(b'{' | b'[') => Ok(Some(raw.to_owned())),
        // `null` params decode as `{}` downstream, exactly like absent ones.
        Some(b'n') => Ok(None),
        _ => Err(RpcError::invalid_request("params must be an object, an array or null")),
    }
}

/// Encodes a request as one line (no terminator). Absent params are omitted.
#[must_use]
pub fn encode_request(id: &Id, method: &str, params: Option<&RawValue>) -> String {
    let mut out = String::with_capacity(64 + params.map_or(0, |p| p.get().len()));
    out.push_str(r#"{"jsonrpc":"2.0","id":"#);
    push_id(&mut out, id);
    out.push_str(r#","method":"#);
    push_str(&mut out, method);
    push_params(&mut out, params);
    out.push('}');
    out
}

/// Encodes a notification as one line (no terminator). Absent params are omitted.
#[must_use]
pub fn encode_notification(method: &str, params: Option<&RawValue>) -> String {
    let mut out = String::with_capacity(64 + params.map_or(0, |p| p.get().len()));
    out.push_str(r#"{"jsonrpc":"2.0","method":"#);
    push_str(&mut out, method);
    push_params(&mut out, params);
    out.push('}');
    out
}

/// Encodes a notification with its params serialized straight into the line: one buffer and
/// no intermediate text, which is what most of an agent's output (`session/update`) pays.
/// serde_json writes no raw CR or LF (strings escape them), so the line needs no scan.
/// Params that serialize to `null` (as `()` does) are omitted, like absent ones.
pub fn encode_notification_of<P: Serialize + ?Sized>(
    method: &str,
    params: &P,
) -> Result<String, serde_json::Error> {
    let mut out = Vec::with_capacity(256);
    push_notification_of(&mut out, method, params)?;
    // serde_json writes UTF-8 only; were it ever not, the error says so instead of a panic.
    String::from_utf8(out).map_err(<serde_json::Error as serde::ser::Error>::custom)
}

/// Appends the line [`encode_notification_of`] makes to `out` (no terminator); on an error
/// `out` is left as it was.
pub(crate) fn push_notification_of<P: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    method: &str,
    params: &P,
) -> Result<(), serde_json::Error> {
    const HEAD: &str = r#"{"jsonrpc":"2.0","method":"#;
    const PARAMS: &str = r#","params":"#;
    let begin = out.len();
    out.extend_from_slice(HEAD.as_bytes());
    let written = serde_json::to_writer(&mut *out, method).and_then(|()| {
        out.extend_from_slice(PARAMS.as_bytes());
        let start = out.len();
        serde_json::to_writer(&mut *out, params).map(|()| start)
    });
    let start = match written {
        Ok(start) => start,
        Err(err) => {
            out.truncate(begin);
            return Err(err);
        }
    };
    if out[start..] == *b"null" {
        out.truncate(start - PARAMS.len());
    }
    out.push(b'}');
    Ok(())
}

/// Encodes a response as one line (no terminator).
#[must_use]
pub fn encode_response(id: &Id, result: &Result<Box<RawValue>, RpcError>) -> String {
    let mut out = String::with_capacity(64 + result.as_ref().map_or(0, |r| r.get().len()));
    out.push_str(r#"{"jsonrpc":"2.0","id":"#);
    push_id(&mut out, id);
    match result {
        Ok(result) => {
            out.push_str(r#","result":"#);
            push_raw(&mut out, result);
        }
        Err(error) => {
            out.push_str(r#","error":{"code":"#);
            out.push_str(&error.code.to_string());
            out.push_str(r#","message":"#);
            push_str(&mut out, &error.message);
            if let Some(data) = &error.data {
                // Serializing a `Value` cannot fail; if it ever did, the error stays valid
                // without its detail.
                match serde_json::to_string(data) {
                    Ok(data) => {
                        out.push_str(r#","data":"#);
                        out.push_str(&data);
                    }
                    Err(err) => tracing::warn!(%err, "dropping unencodable error data"),
                }
            }
            out.push('}');
        }
    }
    out.push('}');
    out
}

fn push_params(out: &mut String, params: Option<&RawValue>) {
    if let Some(params) = params {
        out.push_str(r#","params":"#);
        push_raw(out, params);
    }
}

fn push_id(out: &mut String, id: &Id) {
    match id {
        Id::Null => out.push_str("null"),
        Id::Int(n) => {
            // Writing into a `String` cannot fail.
            let _ = write!(out, "{n}");
        }
        Id::Str(s) => push_str(out, s),
    }
}

/// Copies a raw value. A raw CR or LF in valid JSON can only be insignificant whitespace
/// (strings escape them), so turning them into spaces keeps the message on one line.
fn push_raw(out: &mut String, raw: &RawValue) {
    let text = raw.get();
    // A byte scan: CR and LF are ASCII, so no UTF-8 decoding is needed to find them.
    if text.bytes().any(|b| b == b'\n' || b == b'\r') {
        out.extend(text.chars().map(|c| if c == '\n' || c == '\r' { ' ' } else { c }));
    } else {
        out.push_str(text);
    }
}

/// Writes `s` as a JSON string literal.
fn push_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}
