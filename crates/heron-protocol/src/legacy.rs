//! Rewrites params of older clients into today's shape before validation and decoding:
//! `session/prompt` with `content` in place of `prompt`.

use std::borrow::Cow;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::types::Method;

/// The params as today's schema expects them; borrowed when nothing changes.
pub fn upgrade(method: Method, params: Option<&RawValue>) -> Option<Cow<'_, RawValue>> {
    let params = params?;
    if method != Method::SessionPrompt
        || params.get().contains("\"prompt\"")
        || !params.get().contains("\"content\"")
    {
        return Some(Cow::Borrowed(params));
    }
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(params.get()) else {
        return Some(Cow::Borrowed(params));
    };
    match map.remove("content") {
        Some(content) => {
            map.insert("prompt".to_owned(), content);
            match serde_json::value::to_raw_value(&map) {
                Ok(raw) => Some(Cow::Owned(raw)),
                Err(_) => Some(Cow::Borrowed(params)),
            }
        }
        None => Some(Cow::Borrowed(params)),
    }
}
