//! Heron's side of an MCP connection: it declares form and URL elicitation, and turns a
//! server's elicitation into an [`Elicitation`] for the session's editor, on these rules:
//!
//! - A request goes to the editor only in a mode it advertised; otherwise it is declined.
//!   A URL request is never turned into a form, nor a form into a page.
//! - The message starts "MCP server asks:", loses its control characters and is capped;
//!   titles, descriptions and options likewise.
//! - A form must be flat: each field a string, a string enum, or an array of a string enum,
//!   within [`MAX_FIELDS`] fields and [`MAX_OPTIONS`] options; anything else is declined.
//! - A URL must be http or https.
//! - An accepted answer must fit the form: known fields only, required ones present, text
//!   within its length, choices among the options. One that does not declines the whole
//!   form: nothing the editor sent reaches the server.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction};
use rmcp::service::{RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData};
use serde_json::{Map, Value};

use super::EditorSlot;
use crate::tools::editor::{Elicitation, ElicitationAnswer, FieldKind, FormField};

/// How every message to the user starts.
const PREFIX: &str = "MCP server asks: ";
/// The longest message shown, in characters.
const MAX_MESSAGE: usize = 2000;
/// The longest title, description or option, in characters.
const MAX_LABEL: usize = 200;
/// The most fields a form may have.
pub(super) const MAX_FIELDS: usize = 16;
/// The most options one field may have.
pub(super) const MAX_OPTIONS: usize = 64;
/// The longest text answer, in characters (a server may ask for less).
pub(super) const MAX_TEXT: usize = 4096;
/// The longest URL offered, in bytes.
const MAX_URL: usize = 4096;

/// The client Heron is to one server.
pub(super) struct Client {
    pub(super) editor: EditorSlot,
    /// The session's roots (its cwd and additional directories), which a server may ask
    /// for (`roots/list`): server-filesystem started without folders serves these.
    pub(super) roots: Arc<Vec<PathBuf>>,
    /// The running calls that asked for progress.
    pub(super) progress: Arc<super::progress::Routes>,
    /// What the server logs for the user to see.
    pub(super) said: Arc<super::said::Said>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        // Declared whatever the editor can do: a request the editor cannot show is
        // declined, which a server handles like a user's "no".
        capabilities.elicitation = serde_json::from_value(serde_json::json!({ "form": {}, "url": {} })).ok();
        // A session's roots never change while it is open, so no list_changed is sent.
        capabilities.roots = serde_json::from_value(serde_json::json!({ "listChanged": false })).ok();
        let mut info = ClientConfig::default();
        info.capabilities = capabilities;
        info.client_info = rmcp::model::Implementation::new("heron", env!("CARGO_PKG_VERSION"));
        info
    }

    #[expect(deprecated, reason = "server logging is in the MCP revision servers speak today (2025-06-18)")]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.said.heard(&params);
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.progress.report(&params);
    }

    #[expect(deprecated, reason = "roots are in the MCP revision servers speak today (2025-06-18)")]
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, ErrorData> {
        let roots = self
            .roots
            .iter()
            .filter_map(|root| {
                let uri = reqwest::Url::from_file_path(root).ok()?;
                let name = root.file_name().map(|name| name.to_string_lossy().into_owned());
                let listed = rmcp::model::Root::new(uri.to_string());
                Some(match name {
                    Some(name) => listed.with_name(name),
                    None => listed,
                })
            })
            .collect();
        Ok(rmcp::model::ListRootsResult::new(roots))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let answer = match (self.editor.get(), offer(&request)) {
            (None, _) => ElicitationAnswer::Decline,
            (_, Err(why)) => {
                tracing::info!(%why, "an MCP server's elicitation was declined");
                ElicitationAnswer::Decline
            }
            (Some(editor), Ok(offered)) => {
                let modes = editor.elicitation_modes();
                let allowed = match &offered {
                    Elicitation::Form { .. } => modes.form,
                    Elicitation::Url { .. } => modes.url,
                };
                if !allowed {
                    ElicitationAnswer::Decline
                } else {
                    match editor.elicit(offered.clone()).await {
                        Ok(answer) => checked(&offered, answer),
                        Err(error) => {
                            tracing::info!(%error, "the editor could not show an MCP server's elicitation");
                            ElicitationAnswer::Decline
                        }
                    }
                }
            }
        };
        Ok(match answer {
            ElicitationAnswer::Accept(content) => {
                let mut result = ElicitResult::new(ElicitationAction::Accept);
                if !content.is_empty() {
                    result.content = Some(Value::Object(content));
                }
                result
            }
            ElicitationAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
            ElicitationAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        })
    }
}

/// Text from a server as the user may see it: control characters removed, at most `max`
/// characters (cut marked).
fn clean(text: &str, max: usize) -> String {
    let kept: String = text.chars().filter(|c| !c.is_control()).collect();
    let kept = kept.trim();
    if kept.chars().count() <= max {
        return kept.to_owned();
    }
    let mut cut: String = kept.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The request as the editor would be shown it, or why it is declined.
pub(super) fn offer(request: &ElicitRequestParams) -> Result<Elicitation, String> {
    let value = serde_json::to_value(request).map_err(|e| e.to_string())?;
    let message = format!("{PREFIX}{}", clean(value["message"].as_str().unwrap_or_default(), MAX_MESSAGE));
    match value["mode"].as_str() {
        Some("url") => {
            let url = value["url"].as_str().unwrap_or_default();
            if url.len() > MAX_URL {
                return Err("the URL is too long".into());
            }
            super::remote::parse_url(url).map_err(|e| format!("the URL {e}"))?;
            let id = clean(value["elicitationId"].as_str().unwrap_or_default(), MAX_LABEL);
            Ok(Elicitation::Url { message, url: url.trim().to_owned(), id })
        }
        Some("form") | None => Ok(Elicitation::Form { message, fields: fields(&value["requestedSchema"])? }),
        Some(other) => Err(format!("the mode `{}` is unknown", clean(other, 32))),
    }
}

/// The fields of a flat form schema.
fn fields(schema: &Value) -> Result<Vec<FormField>, String> {
    if schema.get("type").is_some_and(|t| t != "object") {
        return Err("the form is not an object".into());
    }
    let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    if properties.len() > MAX_FIELDS {
        return Err(format!("the form has more than {MAX_FIELDS} fields"));
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut fields = Vec::new();
    for (name, property) in &properties {
        if name.is_empty() || name.len() > MAX_LABEL || name.chars().any(char::is_control) {
            return Err("a field has an unusable name".into());
        }
        let label = |key: &str| property.get(key).and_then(Value::as_str).map(|t| clean(t, MAX_LABEL));
        fields.push(FormField {
            name: name.clone(),
            title: label("title"),
            description: label("description"),
            kind: kind(property).map_err(|why| format!("field `{}`: {why}", clean(name, 64)))?,
            required: required.contains(&name.as_str()),
        });
    }
    if let Some(missing) = required.iter().find(|r| !properties.contains_key(**r)) {
        return Err(format!("the required field `{}` is not in the form", clean(missing, 64)));
    }
    Ok(fields)
}

/// What one property asks for: text, one choice, or several.
fn kind(property: &Value) -> Result<FieldKind, String> {
    match property.get("type").and_then(Value::as_str) {
        Some("string") => match options(property)? {
            Some(options) => Ok(FieldKind::Choice { options }),
            None => {
                let asked = property.get("maxLength").and_then(Value::as_u64).unwrap_or(MAX_TEXT as u64);
                Ok(FieldKind::Text { max_length: usize::try_from(asked).unwrap_or(MAX_TEXT).min(MAX_TEXT) })
            }
        },
        Some("array") => {
            let items = property.get("items").ok_or("a list without items")?;
            if items.get("type").is_some_and(|t| t != "string") {
                return Err("a list of something other than strings".into());
            }
            let options = options(items)?.ok_or("a list whose items are not a fixed set")?;
            let count =
                |key: &str| property.get(key).and_then(Value::as_u64).and_then(|n| usize::try_from(n).ok());
            let min = count("minItems").unwrap_or(0);
            let max = count("maxItems").unwrap_or(options.len()).min(options.len());
            if min > max {
                return Err("a list that cannot be answered".into());
            }
            Ok(FieldKind::Choices { options, min, max })
        }
        Some(other) => Err(format!("type `{}` is not offered (only text and choices)", clean(other, 32))),
        None => Err("a field without a type".into()),
    }
}

/// The fixed options of a string schema (`enum`, or `oneOf`/`anyOf` of `const`s), if it
/// has them.
fn options(schema: &Value) -> Result<Option<Vec<String>>, String> {
    let listed: Vec<&Value> = if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        values.iter().collect()
    } else if let Some(choices) =
        schema.get("oneOf").or_else(|| schema.get("anyOf")).and_then(Value::as_array)
    {
        choices.iter().map(|c| c.get("const").unwrap_or(&Value::Null)).collect()
    } else {
        return Ok(None);
    };
    if listed.is_empty() || listed.len() > MAX_OPTIONS {
        return Err(format!("a choice of none or more than {MAX_OPTIONS} options"));
    }
    let mut options = Vec::new();
    for option in listed {
        let text = option.as_str().ok_or("an option that is not a string")?;
        if text.chars().count() > MAX_LABEL || text.chars().any(char::is_control) {
            return Err("an option too long or with control characters".into());
        }
        options.push(text.to_owned());
    }
    Ok(Some(options))
}

/// `answer`, if it fits what was offered; otherwise the whole form is declined.
pub(super) fn checked(offered: &Elicitation, answer: ElicitationAnswer) -> ElicitationAnswer {
    let ElicitationAnswer::Accept(content) = answer else { return answer };
    match offered {
        // A page is done in the browser: nothing is sent back but the choice.
        Elicitation::Url { .. } => ElicitationAnswer::Accept(Map::new()),
        Elicitation::Form { fields, .. } => match fits(fields, &content) {
            Ok(()) => ElicitationAnswer::Accept(content),
            Err(why) => {
                tracing::info!(%why, "an answer that does not fit the MCP server's form declines it");
                ElicitationAnswer::Decline
            }
        },
    }
}

fn fits(fields: &[FormField], content: &Map<String, Value>) -> Result<(), String> {
    for (name, value) in content {
        let field = fields.iter().find(|f| &f.name == name).ok_or("an answer to a field not asked")?;
        match (&field.kind, value) {
            (FieldKind::Text { max_length }, Value::String(text)) if text.chars().count() <= *max_length => {}
            (FieldKind::Choice { options }, Value::String(text)) if options.contains(text) => {}
            (FieldKind::Choices { options, min, max }, Value::Array(picked)) => {
                let mut seen = std::collections::HashSet::new();
                for item in picked {
                    let text = item.as_str().ok_or("a pick that is not a string")?;
                    if !options.iter().any(|o| o == text) || !seen.insert(text) {
                        return Err(format!("field `{name}`: a pick outside its options"));
                    }
                }
                if picked.len() < *min || picked.len() > *max {
                    return Err(format!("field `{name}`: a number of picks outside its bounds"));
                }
            }
            _ => return Err(format!("field `{name}`: an answer of the wrong shape or size")),
        }
    }
    match fields.iter().find(|f| f.required && !content.contains_key(&f.name)) {
        Some(missing) => Err(format!("field `{}` is required", missing.name)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(value: Value) -> ElicitRequestParams {
        serde_json::from_value(value).expect("an elicitation request")
    }

    fn form(schema: Value) -> Result<Elicitation, String> {
        offer(&request(json!({ "mode": "form", "message": "Pick", "requestedSchema": schema })))
    }

    fn color_form() -> Elicitation {
        form(json!({ "type": "object", "properties": {
            "color": { "type": "string", "enum": ["red", "green"] },
            "note": { "type": "string", "maxLength": 5 },
            "tags": { "type": "array", "items": { "type": "string", "enum": ["a", "b"] } },
        }, "required": ["color"] }))
        .expect("a flat form")
    }

    fn answer(content: Value) -> ElicitationAnswer {
        checked(&color_form(), ElicitationAnswer::Accept(content.as_object().cloned().unwrap_or_default()))
    }

    #[test]
    fn the_message_is_prefixed_cleaned_and_capped() {
        let long = format!("Your\u{1b}[31m name?\n{}", "x".repeat(5000));
        let Ok(Elicitation::Form { message, .. }) = offer(&request(
            json!({ "mode": "form", "message": long, "requestedSchema": { "type": "object", "properties": {} } }),
        )) else {
            panic!("a form")
        };
        assert!(message.starts_with("MCP server asks: Your[31m name?x"), "{message}");
        assert!(message.chars().count() <= PREFIX.len() + MAX_MESSAGE);
    }

    #[test]
    fn only_flat_forms_are_offered() {
        let Elicitation::Form { fields: offered, .. } = color_form() else { panic!("a form") };
        assert_eq!(offered.len(), 3);
        assert!(offered.iter().any(|f| f.name == "color" && f.required));
        // rmcp itself refuses some shapes before Heron sees them: the rest are checked here.
        let nested =
            json!({ "type": "object", "properties": { "a": { "type": "object", "properties": {} } } });
        assert!(fields(&nested).is_err());
        assert!(fields(&json!({ "type": "object", "properties": { "n": { "type": "number" } } })).is_err());
        let open_list = json!({ "type": "object", "properties": { "l": { "type": "array", "items": { "type": "string" } } } });
        assert!(fields(&open_list).is_err());
        let many: Map<String, Value> =
            (0..=MAX_FIELDS).map(|i| (format!("f{i}"), json!({ "type": "string" }))).collect();
        assert!(fields(&json!({ "type": "object", "properties": many })).is_err());
    }

    #[test]
    fn only_http_pages_are_offered() {
        let page = |url: &str| {
            offer(&request(json!({ "mode": "url", "message": "Sign in", "url": url, "elicitationId": "e1" })))
        };
        assert!(matches!(page("https://auth.example/login?x=1"), Ok(Elicitation::Url { .. })));
        assert!(page("javascript:alert(1)").is_err());
        assert!(page("file:///etc/passwd").is_err());
    }

    #[test]
    fn an_answer_that_fits_reaches_the_server() {
        let fits = answer(json!({ "color": "red", "note": "hi", "tags": ["a", "b"] }));
        assert!(matches!(fits, ElicitationAnswer::Accept(content) if content["color"] == "red"));
    }

    #[test]
    fn an_answer_outside_the_form_declines_it_whole() {
        for content in [
            json!({ "color": "blue" }),
            json!({ "color": "red", "note": "too long" }),
            json!({ "color": ["red"] }),
            json!({ "color": "red", "tags": ["a", "a"] }),
            json!({ "color": "red", "tags": ["c"] }),
            json!({ "color": "red", "extra": "x" }),
            json!({ "note": "hi" }),
        ] {
            assert_eq!(answer(content.clone()), ElicitationAnswer::Decline, "{content}");
        }
    }

    #[test]
    fn a_page_sends_back_no_content() {
        let page =
            Elicitation::Url { message: String::new(), url: "https://x.example".into(), id: "1".into() };
        let mut content = Map::new();
        content.insert("secret".into(), json!("x"));
        assert_eq!(checked(&page, ElicitationAnswer::Accept(content)), ElicitationAnswer::Accept(Map::new()));
    }
}
