//! An MCP server's elicitation as Heron offers it to the editor, and the editor's answer as
//! Heron passes it back, on these rules:
//!
//! - The message starts "MCP server asks:", loses its control characters and is capped;
//!   titles, descriptions and options likewise.
//! - A form must be flat: each field text (with its length bounds and format: email, uri,
//!   date, date-time), a number or an integer (with bounds), a yes or no, one choice or
//!   several of a fixed list (plain, titled, or legacy `enumNames`), within [`MAX_FIELDS`]
//!   fields and [`MAX_OPTIONS`] options; anything else is declined. A default is offered
//!   only if the field would accept it.
//! - A URL must be http or https.
//! - An accepted answer must fit the form Heron offered: known fields only, required ones
//!   present, each of its field's type, within its bounds, format and options. One that
//!   does not declines the whole form: nothing the editor sent reaches the server.

use serde_json::{Map, Value};

use crate::tools::editor::{Elicitation, ElicitationAnswer, FieldKind, FieldOption, FormField, TextFormat};

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
/// The largest magnitude a number field takes: beyond it, an f64 no longer holds every
/// whole number, so "integer" could not be checked.
const MAX_NUMBER: f64 = 9_007_199_254_740_991.0;

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
pub(super) fn offer(request: &rmcp::model::ElicitRequestParams) -> Result<Elicitation, String> {
    let value = serde_json::to_value(request).map_err(|e| e.to_string())?;
    let message = format!("{PREFIX}{}", clean(value["message"].as_str().unwrap_or_default(), MAX_MESSAGE));
    match value["mode"].as_str() {
        Some("url") => {
            page(message, value["url"].as_str().unwrap_or_default(), value["elicitationId"].as_str())
        }
        Some("form") | None => Ok(Elicitation::Form { message, fields: fields(&value["requestedSchema"])? }),
        Some(other) => Err(format!("the mode `{}` is unknown", clean(other, 32))),
    }
}

/// A page to open, if `url` is one Heron offers: http or https, within [`MAX_URL`].
pub(super) fn page(message: String, url: &str, id: Option<&str>) -> Result<Elicitation, String> {
    if url.len() > MAX_URL {
        return Err("the URL is too long".into());
    }
    super::remote::parse_url(url).map_err(|e| format!("the URL {e}"))?;
    let id = clean(id.unwrap_or_default(), MAX_LABEL);
    // A -32042 refusal's pages come here too: whatever brought it, the editor is shown one
    // bounded line.
    Ok(Elicitation::Url { message: clean(&message, MAX_MESSAGE), url: url.trim().to_owned(), id })
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

/// A count a schema gives under `key`, if it gives one.
fn count(schema: &Value, key: &str) -> Option<usize> {
    schema.get(key).and_then(Value::as_u64).and_then(|n| usize::try_from(n).ok())
}

/// What one property asks for.
fn kind(property: &Value) -> Result<FieldKind, String> {
    let kind = match property.get("type").and_then(Value::as_str) {
        Some("string") => match options(property)? {
            Some(options) => FieldKind::Choice { options, default: None },
            None => text(property)?,
        },
        Some(kind @ ("number" | "integer")) => {
            let integer = kind == "integer";
            let bound =
                |key: &str| property.get(key).and_then(Value::as_f64).filter(|n| n.abs() <= MAX_NUMBER);
            // An integer field's bounds are whole: 1.5 as a least means 2.
            let minimum = bound("minimum").map(|n| if integer { n.ceil() } else { n });
            let maximum = bound("maximum").map(|n| if integer { n.floor() } else { n });
            if let (Some(least), Some(most)) = (minimum, maximum)
                && least > most
            {
                return Err("a number that cannot be answered".into());
            }
            FieldKind::Number { integer, minimum, maximum, default: None }
        }
        Some("boolean") => FieldKind::Boolean { default: None },
        Some("array") => {
            let items = property.get("items").ok_or("a list without items")?;
            if items.get("type").is_some_and(|t| t != "string") {
                return Err("a list of something other than strings".into());
            }
            let options = options(items)?.ok_or("a list whose items are not a fixed set")?;
            let min = count(property, "minItems").unwrap_or(0);
            let max = count(property, "maxItems").unwrap_or(options.len()).min(options.len());
            if min > max {
                return Err("a list that cannot be answered".into());
            }
            FieldKind::Choices { options, min, max, default: Vec::new() }
        }
        Some(other) => return Err(format!("type `{}` is not offered in a form", clean(other, 32))),
        None => return Err("a field without a type".into()),
    };
    Ok(with_default(kind, property.get("default")))
}

/// A text field: its length bounds (within [`MAX_TEXT`]) and format.
fn text(property: &Value) -> Result<FieldKind, String> {
    let max_length = count(property, "maxLength").unwrap_or(MAX_TEXT).min(MAX_TEXT);
    let min_length = count(property, "minLength").unwrap_or(0);
    if min_length > max_length {
        return Err("text that cannot be answered".into());
    }
    // A format Heron cannot check is dropped: the field is offered, and checked, as text.
    let format = match property.get("format").and_then(Value::as_str) {
        Some("email") => Some(TextFormat::Email),
        Some("uri") => Some(TextFormat::Uri),
        Some("date") => Some(TextFormat::Date),
        Some("date-time") => Some(TextFormat::DateTime),
        _ => None,
    };
    Ok(FieldKind::Text { min_length, max_length, format, default: None })
}

/// `kind` with the server's default, if the field would take it as an answer.
fn with_default(mut kind: FieldKind, given: Option<&Value>) -> FieldKind {
    let Some(given) = given else { return kind };
    let fits = fits_kind(&kind, given).is_ok();
    match &mut kind {
        FieldKind::Text { default, .. } | FieldKind::Choice { default, .. } => {
            *default = given.as_str().filter(|_| fits).map(str::to_owned);
        }
        FieldKind::Number { default, .. } => *default = given.as_f64().filter(|_| fits),
        FieldKind::Boolean { default } => *default = given.as_bool(),
        FieldKind::Choices { default, .. } => {
            if fits {
                *default = given
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect();
            }
        }
    }
    kind
}

/// The fixed options of a string schema, if it has them: `enum` (titled by a legacy
/// `enumNames` of the same length), or `oneOf`/`anyOf` of `const`s with titles.
fn options(schema: &Value) -> Result<Option<Vec<FieldOption>>, String> {
    let listed: Vec<(&Value, Option<&Value>)> =
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            let names = schema.get("enumNames").and_then(Value::as_array).filter(|n| n.len() == values.len());
            values.iter().enumerate().map(|(at, value)| (value, names.and_then(|n| n.get(at)))).collect()
        } else if let Some(choices) =
            schema.get("oneOf").or_else(|| schema.get("anyOf")).and_then(Value::as_array)
        {
            choices.iter().map(|c| (c.get("const").unwrap_or(&Value::Null), c.get("title"))).collect()
        } else {
            return Ok(None);
        };
    if listed.is_empty() || listed.len() > MAX_OPTIONS {
        return Err(format!("a choice of none or more than {MAX_OPTIONS} options"));
    }
    let mut options: Vec<FieldOption> = Vec::new();
    for (value, title) in listed {
        let value = value.as_str().ok_or("an option that is not a string")?;
        if value.chars().count() > MAX_LABEL || value.chars().any(char::is_control) {
            return Err("an option too long or with control characters".into());
        }
        if options.iter().any(|o| o.value == value) {
            return Err("an option listed twice".into());
        }
        let title = title.and_then(Value::as_str).map(|t| clean(t, MAX_LABEL)).filter(|t| !t.is_empty());
        options.push(FieldOption { value: value.to_owned(), title });
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
        fits_kind(&field.kind, value).map_err(|why| format!("field `{name}`: {why}"))?;
    }
    match fields.iter().find(|f| f.required && !content.contains_key(&f.name)) {
        Some(missing) => Err(format!("field `{}` is required", missing.name)),
        None => Ok(()),
    }
}

/// Whether `value` is an answer `kind` takes.
fn fits_kind(kind: &FieldKind, value: &Value) -> Result<(), &'static str> {
    let among = |options: &[FieldOption], text: &str| options.iter().any(|o| o.value == text);
    match (kind, value) {
        (FieldKind::Text { min_length, max_length, format, .. }, Value::String(text)) => {
            let length = text.chars().count();
            if length < *min_length || length > *max_length {
                return Err("text of the wrong length");
            }
            match format {
                Some(format) if !super::formats::holds(*format, text) => Err("text not in the asked format"),
                _ => Ok(()),
            }
        }
        (FieldKind::Number { integer, minimum, maximum, .. }, Value::Number(number)) => {
            let n = number.as_f64().ok_or("not a number")?;
            if n.abs() > MAX_NUMBER || (*integer && n.fract() != 0.0) {
                return Err("not a number of the asked kind");
            }
            if minimum.is_some_and(|least| n < least) || maximum.is_some_and(|most| n > most) {
                return Err("a number outside its bounds");
            }
            Ok(())
        }
        (FieldKind::Boolean { .. }, Value::Bool(_)) => Ok(()),
        (FieldKind::Choice { options, .. }, Value::String(text)) if among(options, text) => Ok(()),
        (FieldKind::Choices { options, min, max, .. }, Value::Array(picked)) => {
            let mut seen = std::collections::HashSet::new();
            for item in picked {
                let text = item.as_str().ok_or("a pick that is not a string")?;
                if !among(options, text) || !seen.insert(text) {
                    return Err("a pick outside its options");
                }
            }
            if picked.len() < *min || picked.len() > *max {
                return Err("a number of picks outside its bounds");
            }
            Ok(())
        }
        _ => Err("an answer of the wrong type"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(value: Value) -> rmcp::model::ElicitRequestParams {
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
        assert!(fields(&json!({ "type": "object", "properties": { "n": { "type": "null" } } })).is_err());
        let impossible = json!({ "type": "object", "properties": { "n": { "type": "integer", "minimum": 1.5, "maximum": 1.9 } } });
        assert!(fields(&impossible).is_err());
        let open_list = json!({ "type": "object", "properties": { "l": { "type": "array", "items": { "type": "string" } } } });
        assert!(fields(&open_list).is_err());
        let many: Map<String, Value> =
            (0..=MAX_FIELDS).map(|i| (format!("f{i}"), json!({ "type": "string" }))).collect();
        assert!(fields(&json!({ "type": "object", "properties": many })).is_err());
    }

    /// The form server-everything's `trigger-elicitation-request` sends, as the pinned
    /// version spells it (every primitive MCP forms allow).
    fn every_primitive() -> Value {
        json!({ "type": "object", "required": ["name"], "properties": {
            "name": { "type": "string", "title": "Full name", "minLength": 1, "maxLength": 50 },
            "check": { "type": "boolean", "default": true },
            "email": { "type": "string", "format": "email" },
            "homepage": { "type": "string", "format": "uri" },
            "birthdate": { "type": "string", "format": "date" },
            "integer": { "type": "integer", "minimum": 1, "maximum": 100, "default": 42 },
            "number": { "type": "number", "minimum": 0, "maximum": 1000, "default": 2.75 },
            "untitled": { "type": "string", "enum": ["a", "b"], "default": "b" },
            "multi": { "type": "array", "minItems": 1, "maxItems": 2,
                "items": { "type": "string", "enum": ["Guitar", "Drums", "Bass"] }, "default": ["Guitar"] },
            "titled": { "type": "string", "oneOf": [{ "const": "v1", "title": "First" }, { "const": "v2", "title": "Second" }] },
            "titledMulti": { "type": "array", "items": { "anyOf": [{ "const": "x", "title": "Ex" }] } },
            "legacy": { "type": "string", "enum": ["p", "q"], "enumNames": ["Pea", "Queue"] },
        }})
    }

    fn every_primitive_form() -> Vec<FormField> {
        let Ok(Elicitation::Form { fields, .. }) = form(every_primitive()) else {
            panic!("every primitive is offered")
        };
        fields
    }

    fn kind_of<'f>(fields: &'f [FormField], name: &str) -> &'f FieldKind {
        &fields.iter().find(|f| f.name == name).expect("the field").kind
    }

    #[test]
    fn every_primitive_is_offered_with_its_bounds_titles_and_defaults() {
        let fields = every_primitive_form();
        assert_eq!(fields.len(), 12);
        assert_eq!(
            kind_of(&fields, "name"),
            &FieldKind::Text { min_length: 1, max_length: 50, format: None, default: None }
        );
        assert_eq!(kind_of(&fields, "check"), &FieldKind::Boolean { default: Some(true) });
        assert!(matches!(kind_of(&fields, "email"), FieldKind::Text { format: Some(TextFormat::Email), .. }));
        assert!(matches!(
            kind_of(&fields, "birthdate"),
            FieldKind::Text { format: Some(TextFormat::Date), .. }
        ));
        assert_eq!(
            kind_of(&fields, "integer"),
            &FieldKind::Number {
                integer: true,
                minimum: Some(1.0),
                maximum: Some(100.0),
                default: Some(42.0)
            }
        );
        assert!(
            matches!(kind_of(&fields, "number"), FieldKind::Number { integer: false, default: Some(d), .. } if (*d - 2.75).abs() < 1e-9)
        );
        assert!(
            matches!(kind_of(&fields, "untitled"), FieldKind::Choice { default: Some(d), .. } if d == "b")
        );
        assert!(
            matches!(kind_of(&fields, "multi"), FieldKind::Choices { min: 1, max: 2, default, .. } if default == &["Guitar"])
        );
        let titles = |name: &str| match kind_of(&fields, name) {
            FieldKind::Choice { options, .. } | FieldKind::Choices { options, .. } => options
                .iter()
                .map(|o| (o.value.clone(), o.title.clone().unwrap_or_default()))
                .collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        assert_eq!(titles("titled"), [("v1".into(), "First".into()), ("v2".into(), "Second".into())]);
        assert_eq!(titles("titledMulti"), [("x".into(), "Ex".into())]);
        assert_eq!(titles("legacy"), [("p".into(), "Pea".into()), ("q".into(), "Queue".into())]);
    }

    #[test]
    fn a_default_the_field_would_refuse_is_not_offered() {
        let form = json!({ "type": "object", "properties": {
            "n": { "type": "integer", "maximum": 10, "default": 11 },
            "f": { "type": "integer", "default": 1.5 },
            "c": { "type": "string", "enum": ["a"], "default": "z" },
            "t": { "type": "string", "maxLength": 2, "default": "long" },
            "m": { "type": "array", "items": { "type": "string", "enum": ["a"] }, "default": ["a", "a"] },
            "b": { "type": "boolean", "default": "yes" },
        }});
        for field in fields(&form).expect("a flat form") {
            let default_left = match field.kind {
                FieldKind::Number { default, .. } => default.is_some(),
                FieldKind::Choice { default, .. } | FieldKind::Text { default, .. } => default.is_some(),
                FieldKind::Choices { default, .. } => !default.is_empty(),
                FieldKind::Boolean { default } => default.is_some(),
            };
            assert!(!default_left, "{}", field.name);
        }
    }

    #[test]
    fn answers_of_every_primitive_are_checked_against_the_form() {
        let offered = Elicitation::Form { message: String::new(), fields: every_primitive_form() };
        let check = |content: Value| {
            checked(&offered, ElicitationAnswer::Accept(content.as_object().cloned().unwrap_or_default()))
        };
        let good = json!({ "name": "Ada", "check": false, "email": "ada@x.example", "homepage": "https://x.example",
            "birthdate": "1815-12-10", "integer": 7, "number": 2.5, "untitled": "a", "multi": ["Drums", "Bass"],
            "titled": "v2", "titledMulti": ["x"], "legacy": "q" });
        assert!(matches!(check(good.clone()), ElicitationAnswer::Accept(content) if content.len() == 12));
        for (field, wrong) in [
            ("name", json!("")),
            ("check", json!("true")),
            ("email", json!("not an address")),
            ("homepage", json!("x")),
            ("birthdate", json!("1815-02-30")),
            ("integer", json!(7.5)),
            ("integer", json!("7")),
            ("integer", json!(101)),
            ("number", json!(-0.1)),
            ("untitled", json!("c")),
            ("multi", json!([])),
            ("multi", json!(["Guitar", "Drums", "Bass"])),
            ("titled", json!("First")),
            ("legacy", json!("Pea")),
        ] {
            let mut content = good.clone();
            content[field] = wrong.clone();
            assert_eq!(check(content), ElicitationAnswer::Decline, "{field} = {wrong}");
        }
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
    fn a_pages_message_is_clipped_and_cleaned_wherever_it_came_from() {
        let long = format!("Sign\u{1b}[31m in {}", "x".repeat(3 * MAX_MESSAGE));
        let Ok(Elicitation::Url { message, .. }) = page(long, "https://auth.example/", Some("e1")) else {
            panic!("offered")
        };
        assert_eq!(message.chars().count(), MAX_MESSAGE, "{message}");
        assert!(message.starts_with("Sign[31m in x") && message.ends_with('…'), "{message}");
    }

    /// One past each bound of a form's options, labels, text and page is declined (or
    /// clipped, for what is only shown); at the bound it is offered.
    #[test]
    fn options_labels_text_and_urls_past_their_bounds_are_declined_or_clipped() {
        let choice = |count: usize| {
            let values: Vec<String> = (0..count).map(|i| format!("o{i}")).collect();
            form(json!({ "type": "object", "properties": { "c": { "type": "string", "enum": values } } }))
        };
        assert!(choice(MAX_OPTIONS).is_ok());
        let past = choice(MAX_OPTIONS + 1).expect_err("one option too many");
        assert!(past.contains("more than 64 options"), "{past}");
        let option = |value: String| {
            form(json!({ "type": "object", "properties": { "c": { "type": "string", "enum": [value] } } }))
        };
        assert!(option("v".repeat(MAX_LABEL)).is_ok());
        assert!(option("v".repeat(MAX_LABEL + 1)).is_err(), "an option past the label bound");

        let long = "t".repeat(10 * MAX_LABEL);
        let Ok(Elicitation::Form { fields, .. }) = form(json!({ "type": "object", "properties": {
            "c": { "type": "string", "oneOf": [{ "const": "a", "title": long }] },
            "t": { "type": "string", "title": long, "description": long, "maxLength": 1_000_000 },
        } })) else {
            panic!("a form whose labels are too long is offered clipped")
        };
        let field = |name: &str| fields.iter().find(|f| f.name == name).expect("the field");
        let clipped = |label: &Option<String>| label.as_ref().map(|l| l.chars().count());
        assert_eq!(clipped(&field("t").title), Some(MAX_LABEL));
        assert_eq!(clipped(&field("t").description), Some(MAX_LABEL));
        let FieldKind::Choice { options, .. } = &field("c").kind else { panic!("a choice") };
        assert_eq!(clipped(&options[0].title), Some(MAX_LABEL));
        let FieldKind::Text { max_length, .. } = field("t").kind else { panic!("text") };
        assert_eq!(max_length, MAX_TEXT, "a server asks for at most {MAX_TEXT} characters");
        let offered = Elicitation::Form { message: String::new(), fields };
        let text = |n: usize| {
            let content = json!({ "t": "x".repeat(n) }).as_object().cloned().unwrap_or_default();
            checked(&offered, ElicitationAnswer::Accept(content))
        };
        assert!(matches!(text(MAX_TEXT), ElicitationAnswer::Accept(_)));
        assert_eq!(text(MAX_TEXT + 1), ElicitationAnswer::Decline);

        let url = |length: usize| {
            let base = "https://auth.example/";
            format!("{base}{}", "u".repeat(length - base.len()))
        };
        assert!(page(String::new(), &url(MAX_URL), None).is_ok());
        let past = page(String::new(), &url(MAX_URL + 1), None).expect_err("a URL too long");
        assert!(past.contains("too long"), "{past}");
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
