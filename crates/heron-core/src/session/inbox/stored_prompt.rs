//! How a prompt waiting in the store (an inbox item or a steer, which both keep theirs in
//! the inbox's rows) is kept: the core's own prompt content, tagged with its format, so the
//! store holds no protocol shape. Rows written before this format existed (ACP content
//! blocks, as the first inbox stored them) are still read, never written.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::types::{PromptInput, UserContent};

/// The format tag of stored prompts.
const FORMAT: &str = "heron.prompt/1";

#[derive(Serialize, Deserialize)]
struct Stored {
    format: String,
    input: Vec<StoredInput>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum StoredInput {
    Content {
        content: UserContent,
    },
    Attachment {
        image: bool,
        mime_type: String,
        /// The bytes, base64.
        data: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uri: Option<String>,
    },
}

/// A prompt as the store keeps it.
pub(in crate::session) fn encode(input: &[PromptInput]) -> Value {
    let input = input
        .iter()
        .map(|item| match item {
            PromptInput::Content(content) => StoredInput::Content { content: content.clone() },
            PromptInput::Attachment { image, mime_type, data, uri } => StoredInput::Attachment {
                image: *image,
                mime_type: mime_type.clone(),
                data: STANDARD.encode(data),
                uri: uri.clone(),
            },
        })
        .collect();
    // A struct of strings and vectors always encodes.
    serde_json::to_value(Stored { format: FORMAT.to_owned(), input }).unwrap_or(Value::Null)
}

/// A stored prompt read back, or why it cannot be.
pub(in crate::session) fn decode(value: &Value) -> Result<Vec<PromptInput>, String> {
    if value.is_array() {
        return legacy_blocks(value);
    }
    let stored = Stored::deserialize(value).map_err(|e| format!("not a stored prompt: {e}"))?;
    if stored.format != FORMAT {
        return Err(format!("a prompt stored as `{}`, which this version does not read", stored.format));
    }
    stored
        .input
        .into_iter()
        .map(|item| match item {
            StoredInput::Content { content } => Ok(PromptInput::Content(content)),
            StoredInput::Attachment { image, mime_type, data, uri } => {
                let data =
                    STANDARD.decode(data).map_err(|e| format!("a stored attachment is damaged: {e}"))?;
                Ok(PromptInput::Attachment { image, mime_type, data, uri })
            }
        })
        .collect()
}

/// Reads the ACP content blocks the first inbox stored (text, images, resource links and
/// embedded resources; it refused everything else before storing).
fn legacy_blocks(value: &Value) -> Result<Vec<PromptInput>, String> {
    let blocks = value.as_array().map(Vec::as_slice).unwrap_or_default();
    blocks
        .iter()
        .enumerate()
        .map(|(at, block)| legacy_block(block).ok_or_else(|| format!("block {at} cannot be read")))
        .collect()
}

fn legacy_block(block: &Value) -> Option<PromptInput> {
    let text = |value: &Value, key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let bytes = |value: &Value, key: &str| STANDARD.decode(value.get(key)?.as_str()?.trim()).ok();
    Some(match block.get("type")?.as_str()? {
        "text" => PromptInput::Content(UserContent::Text { text: text(block, "text")? }),
        "image" => PromptInput::Attachment {
            image: true,
            mime_type: text(block, "mimeType")?,
            data: bytes(block, "data")?,
            uri: text(block, "uri"),
        },
        "resource_link" => PromptInput::Content(UserContent::Link {
            uri: text(block, "uri")?,
            name: text(block, "name")?,
            mime_type: text(block, "mimeType"),
            title: text(block, "title"),
            description: text(block, "description"),
            size: block.get("size").and_then(Value::as_i64),
        }),
        "resource" => {
            let resource = block.get("resource")?;
            match text(resource, "text") {
                Some(body) => PromptInput::Content(UserContent::Resource {
                    uri: text(resource, "uri")?,
                    mime_type: text(resource, "mimeType"),
                    text: body,
                }),
                None => PromptInput::Attachment {
                    image: false,
                    mime_type: text(resource, "mimeType")
                        .unwrap_or_else(|| "application/octet-stream".to_owned()),
                    data: bytes(resource, "blob")?,
                    uri: text(resource, "uri"),
                },
            }
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_prompt_round_trips_through_the_stored_form() {
        let input = vec![
            PromptInput::Content(UserContent::Text { text: "look at this".into() }),
            PromptInput::Attachment {
                image: true,
                mime_type: "image/png".into(),
                data: vec![0x89, b'P', b'N', b'G', 0],
                uri: None,
            },
        ];
        let stored = encode(&input);
        assert_eq!(stored["format"], FORMAT);
        assert_eq!(decode(&stored), Ok(input));
    }

    #[test]
    fn rows_of_the_first_inbox_are_still_read() {
        let old = json!([
            { "type": "text", "text": "hello" },
            { "type": "image", "mimeType": "image/png", "data": "iVBORw==" },
            { "type": "resource_link", "uri": "file:///a.rs", "name": "a.rs" },
            { "type": "resource", "resource": { "uri": "file:///b.md", "text": "# B" } },
        ]);
        let read = decode(&old).expect("legacy blocks");
        assert_eq!(read.len(), 4);
        assert_eq!(read[0], PromptInput::Content(UserContent::Text { text: "hello".into() }));
        assert!(
            matches!(&read[1], PromptInput::Attachment { image: true, data, .. } if data.starts_with(&[0x89]))
        );
        assert!(
            matches!(&read[3], PromptInput::Content(UserContent::Resource { text, .. }) if text == "# B")
        );
    }

    #[test]
    fn an_unknown_format_or_block_is_an_error_not_a_guess() {
        assert!(decode(&json!({ "format": "heron.prompt/9", "input": [] })).is_err());
        assert!(decode(&json!([{ "type": "audio", "data": "AAAA" }])).is_err());
        assert!(decode(&json!("text")).is_err());
    }
}
