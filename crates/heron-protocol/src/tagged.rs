//! Reading closed internally tagged unions without buffering: when the tag is the first
//! member (as every ACP implementation writes it) the variant's payload is read straight
//! from the rest of the object. Anything else, and every failed decode being repeated for
//! its error, goes through serde's own derive (`TaggedUnion::Buffered`), switched by a
//! thread-local flag that only [`crate::decode`] sets.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::value::{
    BorrowedStrDeserializer, MapAccessDeserializer, SeqAccessDeserializer, StringDeserializer,
};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};

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
pub(crate) fn with_buffered_unions<R>(decode: impl FnOnce() -> R) -> R {
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
