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

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).expect("raw")
    }

    #[test]
    fn content_becomes_prompt_for_session_prompt() {
        let params = raw(r#"{"sessionId":"s","content":[{"type":"text","text":"hi"}]}"#);
        let upgraded = upgrade(Method::SessionPrompt, Some(&params)).expect("params");
        let value: Value = serde_json::from_str(upgraded.get()).expect("json");
        assert_eq!(value["prompt"][0]["text"], "hi");
        assert!(value.get("content").is_none());
    }

    #[test]
    fn current_params_and_other_methods_pass_through_untouched() {
        let params = raw(r#"{"sessionId":"s","prompt":[],"content":1}"#);
        assert!(matches!(upgrade(Method::SessionPrompt, Some(&params)), Some(Cow::Borrowed(_))));
        let other = raw(r#"{"content":1}"#);
        assert!(matches!(upgrade(Method::SessionNew, Some(&other)), Some(Cow::Borrowed(_))));
    }
}
