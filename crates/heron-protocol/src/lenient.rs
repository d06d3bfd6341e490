//! Lenient readers the generated types use where the ACP schema asks for them
//! (`x-deserialize-*`), so one odd optional field from a newer or sloppier peer does not
//! cost the whole message. A field is first captured whole, then decoded: a malformed one
//! is dropped without failing the message. Captured as raw JSON text when the input is
//! serde_json's (a slice of the input when it is text in memory, a copy when it is read
//! from a stream; parsed once either way), and as a `Value` tree only when serde's own
//! buffering got there first (inside an internally tagged enum read the derive's way).

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeOwned, Deserializer, Error as _, MapAccess, Visitor};
use serde::{Deserialize, de::IntoDeserializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// The name serde_json answers with a value's raw text (its `RawValue` protocol).
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

/// A field's value, captured whole before it is decoded.
enum Captured<'de> {
    /// Its JSON text, as serde_json read it (so valid JSON, not checked again).
    Raw(Cow<'de, str>),
    /// Its tree, when the input could not give its text.
    Tree(Value),
}

impl Captured<'_> {
    fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        match self {
            Captured::Raw(text) => serde_json::from_str(text),
            Captured::Tree(value) => T::deserialize(value),
        }
    }

    /// The first byte of its JSON text (raw text carries no leading whitespace).
    fn starts(&self) -> u8 {
        match self {
            Captured::Raw(text) => text.as_bytes().first().copied().unwrap_or(b' '),
            Captured::Tree(Value::Null) => b'n',
            Captured::Tree(Value::Bool(_)) => b't',
            Captured::Tree(Value::Number(_)) => b'0',
            Captured::Tree(Value::String(_)) => b'"',
            Captured::Tree(Value::Array(_)) => b'[',
            Captured::Tree(Value::Object(_)) => b'{',
        }
    }
}

impl<'de> Deserialize<'de> for Captured<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_newtype_struct(RAW_TOKEN, CaptureVisitor)
    }
}

struct CaptureVisitor;

impl<'de> Visitor<'de> for CaptureVisitor {
    type Value = Captured<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    /// serde_json answers the raw-value name with a one-member map: the name, then the
    /// text. Any other map is a real object from another deserializer.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Captured<'de>, A::Error> {
        let mut object = serde_json::Map::new();
        match map.next_key::<Key>()? {
            None => return Ok(Captured::Tree(Value::Object(object))),
            Some(Key::Raw) => {
                return map.next_value::<RawText<'de>>().map(|text| Captured::Raw(text.0));
            }
            Some(Key::Member(key)) => {
                object.insert(key, map.next_value()?);
            }
        }
        while let Some(key) = map.next_key::<String>()? {
            object.insert(key, map.next_value()?);
        }
        Ok(Captured::Tree(Value::Object(object)))
    }

    /// serde's buffered content hands the value on as is: it is read as a tree.
    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<Captured<'de>, D::Error> {
        Value::deserialize(deserializer).map(Captured::Tree)
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Captured<'de>, E> {
        Ok(Captured::Tree(Value::Bool(v)))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Captured<'de>, E> {
        Ok(Captured::Tree(v.into()))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Captured<'de>, E> {
        Ok(Captured::Tree(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Captured<'de>, E> {
        Ok(Captured::Tree(v.into()))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Captured<'de>, E> {
        Ok(Captured::Tree(Value::String(v.to_owned())))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Captured<'de>, E> {
        Ok(Captured::Tree(Value::Null))
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Captured<'de>, E> {
        Ok(Captured::Tree(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Captured<'de>, D::Error> {
        Value::deserialize(deserializer).map(Captured::Tree)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Captured<'de>, A::Error> {
        Value::deserialize(serde::de::value::SeqAccessDeserializer::new(seq)).map(Captured::Tree)
    }
}

/// The text of a raw value: borrowed from the input when serde_json reads from memory.
struct RawText<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for RawText<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = RawText<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a raw JSON value")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<RawText<'de>, E> {
                Ok(RawText(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawText<'de>, E> {
                Ok(RawText(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<RawText<'de>, E> {
                Ok(RawText(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

/// The first key of a captured map: serde_json's raw-value marker, or a real member.
enum Key {
    Raw,
    Member(String),
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(if v == RAW_TOKEN { Key::Raw } else { Key::Member(v.to_owned()) })
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Reads a malformed value as the type's default (absent), logging what was dropped.
pub(crate) fn default_on_error<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let captured = Captured::deserialize(deserializer)?;
    Ok(captured.decode().unwrap_or_else(|err| {
        tracing::debug!(%err, "ignoring a malformed optional field");
        T::default()
    }))
}

/// Reads a patch field (present only when the member is): `null` is `Some(None)`, "clear
/// it"; a value is `Some(Some(value))`; a malformed value reads as absent, like the other
/// optional fields.
pub(crate) fn patch<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let captured = Captured::deserialize(deserializer)?;
    if captured.starts() == b'n' {
        return Ok(Some(None));
    }
    Ok(match captured.decode() {
        Ok(value) => Some(Some(value)),
        Err(err) => {
            tracing::debug!(%err, "ignoring a malformed patch field");
            None
        }
    })
}

/// Reads `null` as the type's default.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A list field: `Vec<T>` or `Option<Vec<T>>`.
pub(crate) trait ItemList: Default {
    /// The item type.
    type Item: DeserializeOwned;
    /// Builds the list from the items that decoded.
    fn from_items(items: Vec<Self::Item>) -> Self;
}

impl<T: DeserializeOwned> ItemList for Vec<T> {
    type Item = T;
    fn from_items(items: Vec<T>) -> Self {
        items
    }
}

impl<T: DeserializeOwned> ItemList for Option<Vec<T>> {
    type Item = T;
    fn from_items(items: Vec<T>) -> Self {
        Some(items)
    }
}

/// The items of a captured array that decode; the others are dropped and logged.
fn keep_valid<L: ItemList>(array: Captured<'_>) -> L {
    let (kept, total): (Vec<L::Item>, usize) = match array {
        Captured::Raw(text) => match serde_json::from_str::<Vec<L::Item>>(&text) {
            // Almost always every item is fine: one pass over the text.
            Ok(items) => return L::from_items(items),
            Err(_) => match serde_json::from_str::<Vec<&RawValue>>(&text) {
                // Each item stays a slice of the array's text until it is decoded.
                Ok(items) => {
                    let total = items.len();
                    (
                        items.into_iter().filter_map(|item| serde_json::from_str(item.get()).ok()).collect(),
                        total,
                    )
                }
                Err(_) => (Vec::new(), 0),
            },
        },
        Captured::Tree(Value::Array(items)) => {
            let total = items.len();
            (
                items
                    .into_iter()
                    .filter_map(|item| L::Item::deserialize(item.into_deserializer()).ok())
                    .collect(),
                total,
            )
        }
        Captured::Tree(_) => (Vec::new(), 0),
    };
    if kept.len() != total {
        tracing::debug!(dropped = total - kept.len(), "ignoring malformed list items");
    }
    L::from_items(kept)
}

/// A required list: must be an array (or `null`, read as empty); malformed items are dropped.
pub(crate) fn skip_invalid_items<'de, D, L>(deserializer: D) -> Result<L, D::Error>
where
    D: Deserializer<'de>,
    L: ItemList,
{
    let captured = Captured::deserialize(deserializer)?;
    match captured.starts() {
        b'[' => Ok(keep_valid(captured)),
        b'n' => Ok(L::default()),
        first => Err(D::Error::custom(format!("expected an array, found {}", kind(first)))),
    }
}

/// An optional list: anything but an array reads as absent; malformed items are dropped.
pub(crate) fn lenient_items<'de, D, L>(deserializer: D) -> Result<L, D::Error>
where
    D: Deserializer<'de>,
    L: ItemList,
{
    let captured = Captured::deserialize(deserializer)?;
    match captured.starts() {
        b'[' => Ok(keep_valid(captured)),
        _ => Ok(L::default()),
    }
}

/// What a JSON value starting with `first` is, for error messages.
fn kind(first: u8) -> &'static str {
    match first {
        b'n' => "null",
        b't' | b'f' => "a boolean",
        b'"' => "a string",
        b'[' => "an array",
        b'{' => "an object",
        _ => "a number",
    }
}
