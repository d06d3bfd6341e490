//! The small hand-written runtime that the generated dispatch glue and peer handles call.
//!
//! The generated code stays data and glue: it decodes params with [`decode_params`],
//! encodes results with [`encode_result`], and talks to the wire only through the
//! [`Outgoing`] trait, which the `rpc` connection implements.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;

use serde::de::value::{
    BorrowedStrDeserializer, MapAccessDeserializer, SeqAccessDeserializer, StringDeserializer,
};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// A boxed, sendable, `'static` future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The running handler of an incoming request: resolves to the encoded result.
pub type ResponseFuture = BoxFuture<Result<Box<RawValue>, RpcError>>;

/// The running handler of an incoming notification.
pub type NotificationFuture = BoxFuture<()>;

/// How an incoming method runs relative to the reader.
///
/// Every handler's synchronous part runs on the reader task in arrival order; the
/// policy decides what happens to the future it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Polled once on the reader task before the next message is read, then spawned
    /// if it is not finished. For cancellations, whose effect must be immediate.
    Inline,
    /// Spawned as its own task; the reader moves on at once.
    Concurrent,
}

/// The side that serves incoming messages on a connection.
///
/// `dispatch_*` run on the reader task, in arrival order: they decode the params, run the
/// handler's synchronous part and return its future. They must never block.
pub trait Dispatcher: Send + Sync + 'static {
    /// Starts the handler of a request. An `Err` is answered at once.
    fn dispatch_request(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(Policy, ResponseFuture), RpcError>;

    /// Starts the handler of a notification. Unknown methods and bad params are logged and
    /// dropped, because notifications are never answered.
    fn dispatch_notification(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Option<(Policy, NotificationFuture)>;
}

/// The calling side of a connection: what the generated peer handles send through.
pub trait Outgoing: Clone + Send + Sync + 'static {
    /// Sends a request and resolves to its decoded result (or the peer's error, a timeout
    /// as -32800, or a closed connection as -32603).
    fn call<P, R>(
        &self,
        method: &'static str,
        params: P,
    ) -> impl Future<Output = Result<R, RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static,
        R: DeserializeOwned + Send + 'static;

    /// Sends a request that may wait longer (or shorter) than the connection's default
    /// timeout; `None` waits until the reply or the connection closes.
    fn call_with_timeout<P, R>(
        &self,
        method: &'static str,
        params: P,
        timeout: Option<std::time::Duration>,
    ) -> impl Future<Output = Result<R, RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static,
        R: DeserializeOwned + Send + 'static;

    /// Sends a notification. Fails only when the connection is closed.
    fn notify<P>(
        &self,
        method: &'static str,
        params: P,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static;
}

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
            let path = err.path().to_string();
            let path = if path == "." { String::new() } else { path };
            RpcError::invalid_params(path, err.into_inner().to_string())
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
            let path = err.path().to_string();
            tracing::warn!(%path, error = %err.inner(), "peer sent a result that does not decode");
            RpcError::new(super::error::INTERNAL_ERROR, "Peer sent an invalid result")
                .with_data(serde_json::json!({ "path": path, "reason": err.into_inner().to_string() }))
        })
    })
}

/// Encodes a handler's result for the wire.
pub fn encode_result<T: Serialize>(result: &T) -> Result<Box<RawValue>, RpcError> {
    serde_json::value::to_raw_value(result).map_err(|err| RpcError::internal(&err))
}

pub use super::error::RpcError;

/// Encodes a decoded message as a JSON value (for canonical round trips).
pub fn to_value<T: Serialize>(value: &T) -> Result<serde_json::Value, RpcError> {
    serde_json::to_value(value).map_err(|err| RpcError::internal(&err))
}

/// The side that receives and handles a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The agent handles it; the editor sends it.
    Agent,
    /// The editor handles it; the agent sends it.
    Client,
    /// Either side may send it (`$/cancel_request`).
    Protocol,
}

/// Request (answered exactly once) or notification (never answered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Answered with a result or an error.
    Request,
    /// Never answered.
    Notification,
}

/// Where a method is specified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stability {
    /// The stable ACP v1 schema.
    Stable,
    /// The unstable ACP schema, or a legacy method kept for older clients.
    Unstable,
    /// Heron's own `_heron/` extension.
    Vendor,
}

/// One row of the generated method table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodInfo {
    /// The wire name.
    pub wire: &'static str,
    /// Legacy names accepted on input.
    pub aliases: &'static [&'static str],
    /// The side that handles it.
    pub side: Side,
    /// Request or notification.
    pub kind: Kind,
    /// The params definition name.
    pub params: &'static str,
    /// The result definition name, for requests.
    pub result: Option<&'static str>,
    /// Where it is specified.
    pub stability: Stability,
    /// Whether every implementation must serve it.
    pub baseline: bool,
    /// Whether Heron serves (agent side) or calls (client side) it.
    pub implemented: bool,
}

/// A connection's remote agent: implements the generated `Agent` trait by sending.
#[derive(Debug, Clone)]
pub struct AgentPeer<O>(pub O);

/// A connection's remote editor: implements the generated `Client` trait by sending.
#[derive(Debug, Clone)]
pub struct ClientPeer<O>(pub O);

/// A closed internally tagged union (every variant has a tag; no untagged fallback, no
/// `Other`), read by [`deserialize_tagged`]. The generated code implements it for each
/// such union and keeps serde's derive as [`TaggedUnion::Buffered`], the reference reading.
pub trait TaggedUnion: Sized {
    /// The tag property, e.g. `sessionUpdate`.
    const TAG: &'static str;
    /// What serde's derive says it expected (`internally tagged enum Name`).
    const EXPECTING: &'static str;
    /// The variant named by a tag value (`#[serde(variant_identifier)]`).
    type Tag: DeserializeOwned;
    /// The union as serde derives it: buffers the whole object before choosing a variant.
    type Buffered: DeserializeOwned + Into<Self>;

    /// Reads the variant `tag` names from the members after the tag.
    fn read_variant<'de, M: MapAccess<'de>>(tag: Self::Tag, body: VariantBody<M>) -> Result<Self, M::Error>;
}

thread_local! {
    /// Set while a failed decode is repeated to build its error, so the error (message,
    /// path, position) is exactly the one serde's derive gives.
    static BUFFERED_UNIONS: Cell<bool> = const { Cell::new(false) };
}

/// Runs `decode` with every [`TaggedUnion`] read the way serde's derive reads it.
fn with_buffered_unions<R>(decode: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUFFERED_UNIONS.with(|on| on.set(self.0));
        }
    }
    let _restore = Restore(BUFFERED_UNIONS.with(|on| on.replace(true)));
    decode()
}

/// Reads a [`TaggedUnion`] without buffering when the tag is the first member, which is how
/// every ACP implementation writes it: the variant's payload is read straight from the rest
/// of the object. Any other shape (tag later or missing, a sequence, not an object) goes to
/// [`TaggedUnion::Buffered`] with the members already read replayed, so results and errors
/// are serde's. A payload that fails mid-object reports its own field and position; the
/// decode functions above repeat a failed decode with the derive to report serde's error.
pub fn deserialize_tagged<'de, D: Deserializer<'de>, U: TaggedUnion>(deserializer: D) -> Result<U, D::Error> {
    if BUFFERED_UNIONS.with(Cell::get) {
        return U::Buffered::deserialize(deserializer).map(Into::into);
    }
    deserializer.deserialize_any(TaggedVisitor(PhantomData))
}

struct TaggedVisitor<U>(PhantomData<U>);

impl<'de, U: TaggedUnion> Visitor<'de> for TaggedVisitor<U> {
    type Value = U;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(U::EXPECTING)
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<U, M::Error> {
        let first = map.next_key_seed(KeySeed)?;
        if first.as_deref() == Some(U::TAG) {
            let tag = map.next_value()?;
            return U::read_variant(tag, VariantBody { map, tag: U::TAG });
        }
        U::Buffered::deserialize(MapAccessDeserializer::new(Replay { first, map })).map(Into::into)
    }

    fn visit_seq<S: SeqAccess<'de>>(self, seq: S) -> Result<U, S::Error> {
        U::Buffered::deserialize(SeqAccessDeserializer::new(seq)).map(Into::into)
    }
}

/// The members of a tagged object after its tag.
pub struct VariantBody<M> {
    map: M,
    tag: &'static str,
}

impl<'de, M: MapAccess<'de>> VariantBody<M> {
    /// Reads a newtype variant's payload from the remaining members.
    pub fn payload<T: Deserialize<'de>>(self) -> Result<T, M::Error> {
        T::deserialize(MapAccessDeserializer::new(self))
    }

    /// Skips the remaining members of a variant that is only its tag.
    pub fn unit(mut self) -> Result<(), M::Error> {
        while self.next_key::<IgnoredAny>()?.is_some() {
            self.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}

impl<'de, M: MapAccess<'de>> MapAccess<'de> for VariantBody<M> {
    type Error = M::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, M::Error> {
        match self.map.next_key_seed(KeySeed)? {
            // serde's derive rejects a second tag; a payload would silently ignore it.
            Some(key) if key == self.tag => Err(de::Error::duplicate_field(self.tag)),
            Some(key) => replay_key(key, seed).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, M::Error> {
        self.map.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// A map whose first key was already read, handed on as if it had not been.
struct Replay<'de, M> {
    first: Option<Cow<'de, str>>,
    map: M,
}

impl<'de, M: MapAccess<'de>> MapAccess<'de> for Replay<'de, M> {
    type Error = M::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, M::Error> {
        match self.first.take() {
            Some(key) => replay_key(key, seed).map(Some),
            None => self.map.next_key_seed(seed),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, M::Error> {
        self.map.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint().map(|rest| rest + usize::from(self.first.is_some()))
    }
}

fn replay_key<'de, K: DeserializeSeed<'de>, E: de::Error>(
    key: Cow<'de, str>,
    seed: K,
) -> Result<K::Value, E> {
    match key {
        Cow::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::new(key)),
        Cow::Owned(key) => seed.deserialize(StringDeserializer::new(key)),
    }
}

/// Reads a map key as text, borrowed from the input when it has no escapes. JSON keys are
/// always strings.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Cow<'de, str>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(key))
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(key.to_owned()))
    }

    fn visit_string<E: de::Error>(self, key: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(key))
    }
}
