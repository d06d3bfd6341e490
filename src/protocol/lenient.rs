//! Lenient readers the generated types use where the ACP schema asks for them
//! (`x-deserialize-*`), so one odd optional field from a newer or sloppier peer does not
//! cost the whole message.

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde_json::Value;

/// Reads a malformed value as the type's default (absent), logging what was dropped.
pub fn default_on_error<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let value = Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).unwrap_or_else(|err| {
        tracing::debug!(%err, "ignoring a malformed optional field");
        T::default()
    }))
}

/// Reads `null` as the type's default.
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A list field: `Vec<T>` or `Option<Vec<T>>`.
pub trait ItemList: Default {
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

fn keep_valid<L: ItemList>(items: Vec<Value>) -> L {
    let total = items.len();
    let kept: Vec<L::Item> = items.into_iter().filter_map(|item| L::Item::deserialize(item).ok()).collect();
    if kept.len() != total {
        tracing::debug!(dropped = total - kept.len(), "ignoring malformed list items");
    }
    L::from_items(kept)
}

/// A required list: must be an array (or `null`, read as empty); malformed items are dropped.
pub fn skip_invalid_items<'de, D, L>(deserializer: D) -> Result<L, D::Error>
where
    D: Deserializer<'de>,
    L: ItemList,
{
    match Value::deserialize(deserializer)? {
        Value::Array(items) => Ok(keep_valid(items)),
        Value::Null => Ok(L::default()),
        other => Err(D::Error::custom(format!("expected an array, found {}", kind(&other)))),
    }
}

/// An optional list: anything but an array reads as absent; malformed items are dropped.
pub fn lenient_items<'de, D, L>(deserializer: D) -> Result<L, D::Error>
where
    D: Deserializer<'de>,
    L: ItemList,
{
    match Value::deserialize(deserializer)? {
        Value::Array(items) => Ok(keep_valid(items)),
        _ => Ok(L::default()),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
