//! Rewrites the merged definitions into shapes typify turns into idiomatic Rust, and takes
//! out the unions that Heron emits itself.
//!
//! Rules, in order (each has a unit test):
//! 1. Envelope and `Ext*` definitions are dropped: the method table and the hand-written
//!    envelope replace them.
//! 2. `x-*` annotations, `discriminator` and `default` are stripped from every schema
//!    object (never from `const`, `enum` or example values). Without `default`, optional
//!    fields stay `Option` and round-trip exactly. So are the string formats typify would
//!    make types of crates Heron does not use (`date-time` -> chrono): such strings stay
//!    `String`, the peer's text as sent. The validation schema keeps every format.
//! 3. Tagged unions (variants told apart by a required `const` string property) become
//!    [`UnionSpec::Tagged`]: newtype variants named after their tag, untagged fallbacks
//!    (`McpServer` stdio), and an `Other` catch-all when the schema marks the union open.
//!    A variant that mixes in properties of its own or of the union gets a synthesized
//!    payload definition `<Union><Variant>`.
//! 4. Open string enums (consts plus a bare string) become [`UnionSpec::OpenString`].
//! 5. Open integer enums (`ErrorCode`) become a plain integer.
//! 6. A one-variant `anyOf` becomes its variant.
//! 7. Other `anyOf` unions become `oneOf` with a title on every variant; properties the
//!    union declares beside its variants are distributed into each variant.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::{Error, pascal, ref_name};

/// A union Heron emits itself instead of leaving it to typify.
#[derive(Debug, Clone, PartialEq)]
pub enum UnionSpec {
    /// An internally tagged union.
    Tagged {
        /// The definition name.
        name: String,
        /// Its documentation.
        doc: String,
        /// The tag property, e.g. `sessionUpdate`.
        tag: String,
        /// The tagged variants, in schema order.
        variants: Vec<TaggedVariant>,
        /// Untagged variants tried when no tag matches, in schema order.
        fallbacks: Vec<Fallback>,
        /// Whether unknown tags are kept as `Other(Map)`.
        open: bool,
    },
    /// A string enum that accepts values beyond the known ones.
    OpenString {
        /// The definition name.
        name: String,
        /// Its documentation.
        doc: String,
        /// Known values and their documentation.
        values: Vec<(String, String)>,
    },
}

impl UnionSpec {
    /// The definition name.
    pub fn name(&self) -> &str {
        match self {
            UnionSpec::Tagged { name, .. } | UnionSpec::OpenString { name, .. } => name,
        }
    }
}

/// One tagged variant.
#[derive(Debug, Clone, PartialEq)]
pub struct TaggedVariant {
    /// The tag's wire value.
    pub value: String,
    /// The payload definition; `None` for a variant that is only its tag.
    pub payload: Option<String>,
    /// Documentation.
    pub doc: String,
}

/// One untagged fallback variant.
#[derive(Debug, Clone, PartialEq)]
pub struct Fallback {
    /// The Rust variant name.
    pub variant: String,
    /// The payload definition.
    pub payload: String,
    /// Documentation.
    pub doc: String,
}

/// How a property is read leniently, from the schema's `x-deserialize-*` annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lenient {
    /// `x-deserialize-default-on-error`: a malformed value reads as absent.
    DefaultOnError,
    /// `x-deserialize-skip-invalid-items`: malformed array items are dropped.
    SkipInvalidItems,
    /// `x-deserialize-default-on-null`: `null` reads as the empty value.
    DefaultOnNull,
    /// A nullable optional property whose description says `null` clears it (v1: "Set to
    /// null to clear"; v2: "`null` clears", "unsets" or "resets"): a patch, where absent
    /// (leave as is), `null` (clear) and a value (set) are three different things. Generated
    /// as `Option<Option<T>>`; a malformed value still reads as absent.
    Patch,
}

/// How each schema version says that `null` clears a field. v2 also writes "Omitted and
/// `null` are equivalent" of plain optional fields, which these phrases do not match.
const CLEARING_PHRASES: [&str; 4] =
    ["Set to null to clear", "`null` clears", "`null` unsets", "`null` resets"];

/// Whether a property's schema describes a patch field (see [`Lenient::Patch`]).
fn is_patch(schema: &Value) -> bool {
    let nullable = match (schema.get("type"), schema.get("anyOf")) {
        (Some(Value::Array(types)), _) => types.iter().any(|t| t == "null"),
        (_, Some(Value::Array(options))) => options.iter().any(|o| o.get("type") == Some(&json!("null"))),
        _ => false,
    };
    let clears = schema
        .get("description")
        .and_then(Value::as_str)
        .is_some_and(|d| CLEARING_PHRASES.iter().any(|phrase| d.contains(phrase)));
    nullable && clears
}

/// The annotations of a property's schema, strongest first.
pub fn lenient_of(schema: &Value) -> Option<Lenient> {
    let on = |key: &str| schema.get(key) == Some(&Value::Bool(true));
    if is_patch(schema) {
        Some(Lenient::Patch)
    } else if on("x-deserialize-skip-invalid-items") {
        Some(Lenient::SkipInvalidItems)
    } else if on("x-deserialize-default-on-error") {
        Some(Lenient::DefaultOnError)
    } else if on("x-deserialize-default-on-null") {
        Some(Lenient::DefaultOnNull)
    } else {
        None
    }
}

fn lenient_props(properties: &Map<String, Value>) -> BTreeMap<String, Lenient> {
    properties.iter().filter_map(|(name, schema)| Some((name.clone(), lenient_of(schema)?))).collect()
}

/// The normalized definitions and the unions taken out of them.
#[derive(Debug, Clone, Default)]
pub struct Normalized {
    /// Lenient properties: definition -> property wire name -> how it is read.
    pub lenient: BTreeMap<String, BTreeMap<String, Lenient>>,
    /// Definitions for typify. Taken-out unions stay as `{"type":"object"}` placeholders so
    /// references resolve; typify is told to replace them.
    pub defs: BTreeMap<String, Value>,
    /// Unions Heron emits.
    pub unions: Vec<UnionSpec>,
}

const ENVELOPES: [&str; 9] = [
    "AgentRequest",
    "ClientRequest",
    "AgentResponse",
    "ClientResponse",
    "AgentNotification",
    "ClientNotification",
    "ExtRequest",
    "ExtResponse",
    "ExtNotification",
];

/// Keys whose value is a schema.
const SCHEMA_KEYS: [&str; 4] = ["items", "not", "additionalProperties", "contains"];
/// Keys whose value is an array of schemas.
const SCHEMA_LIST_KEYS: [&str; 3] = ["allOf", "anyOf", "oneOf"];

/// String formats typify maps to `chrono` or `uuid` types.
const FOREIGN_FORMATS: [&str; 3] = ["date", "date-time", "uuid"];

/// Rule 2: strips annotations from a schema object and everything below it.
pub fn strip(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    map.retain(|key, _| !key.starts_with("x-") && key != "discriminator" && key != "default");
    if map.get("format").and_then(Value::as_str).is_some_and(|f| FOREIGN_FORMATS.contains(&f)) {
        map.remove("format");
    }
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        props.values_mut().for_each(strip);
    }
    for key in SCHEMA_KEYS {
        if let Some(child) = map.get_mut(key) {
            strip(child);
        }
    }
    for key in SCHEMA_LIST_KEYS {
        if let Some(Value::Array(items)) = map.get_mut(key) {
            items.iter_mut().for_each(strip);
        }
    }
}

fn description(schema: &Value) -> String {
    schema.get("description").and_then(Value::as_str).unwrap_or_default().to_owned()
}

fn props(schema: &Value) -> Map<String, Value> {
    schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default()
}

fn required(schema: &Value) -> Vec<String> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

fn variants_of(schema: &Value) -> Option<(&'static str, &Vec<Value>)> {
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(items)) = schema.get(key) {
            return Some((if key == "oneOf" { "oneOf" } else { "anyOf" }, items));
        }
    }
    None
}

/// The `(property, value)` of a variant's required `const` string property, if any.
fn const_tag(variant: &Value) -> Option<(String, String)> {
    let req = required(variant);
    props(variant).into_iter().find_map(|(name, schema)| {
        let value = schema.get("const")?.as_str()?.to_owned();
        req.contains(&name).then_some((name, value))
    })
}

/// The single `$ref` a variant wraps, through `allOf:[{$ref}]` or a bare `$ref`.
fn wrapped_ref(variant: &Value) -> Option<String> {
    if let Some(r) = variant.get("$ref").and_then(Value::as_str) {
        return ref_name(r).map(str::to_owned);
    }
    match variant.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
        Some([only]) => only.get("$ref").and_then(Value::as_str).and_then(ref_name).map(str::to_owned),
        _ => None,
    }
}

fn is_open_catch_all(variant: &Value) -> bool {
    variant.get("not").is_some()
}

/// Merges `extra` properties into `into`, keeping the first definition of a name.
fn merge_props(into: &mut Map<String, Value>, extra: Map<String, Value>) {
    for (name, schema) in extra {
        into.entry(name).or_insert(schema);
    }
}

struct Ctx<'a> {
    defs: &'a BTreeMap<String, Value>,
    synthesized: BTreeMap<String, Value>,
    lenient: BTreeMap<String, BTreeMap<String, Lenient>>,
}

impl Ctx<'_> {
    /// Properties of a payload target, with the properties of its own `anyOf` alternatives
    /// (the elicitation scopes) merged in as optional.
    fn target_shape(&self, target: &str) -> Result<(Map<String, Value>, Vec<String>), Error> {
        let def =
            self.defs.get(target).ok_or_else(|| Error::new(format!("payload `{target}` is not defined")))?;
        let mut properties = props(def);
        if let Some((_, alternatives)) = variants_of(def) {
            for alt in alternatives {
                let alt_props = match wrapped_ref(alt) {
                    Some(r) => self.defs.get(&r).map(props).unwrap_or_default(),
                    None => props(alt),
                };
                merge_props(&mut properties, alt_props);
            }
        }
        Ok((properties, required(def)))
    }

    /// The properties and required names of a variant's payload: the union's own, each
    /// replaced by the variant's of the same name (a variant narrows what the union allows,
    /// as `IdleStateUpdate`'s `none` narrows `stopReason` to null), then those of the
    /// definition the variant wraps.
    fn variant_shape(
        &self,
        parent_props: &Map<String, Value>,
        parent_req: &[String],
        own: Map<String, Value>,
        own_req: Vec<String>,
        target: Option<&str>,
    ) -> Result<(Map<String, Value>, Vec<String>), Error> {
        let mut properties = parent_props.clone();
        properties.extend(own);
        let mut req = parent_req.to_vec();
        req.extend(own_req);
        if let Some(t) = target {
            let (tp, tr) = self.target_shape(t)?;
            merge_props(&mut properties, tp);
            req.extend(tr);
        }
        Ok((properties, req))
    }

    fn synthesize(
        &mut self,
        name: String,
        doc: String,
        mut properties: Map<String, Value>,
        required: Vec<String>,
    ) -> String {
        let lenient = lenient_props(&properties);
        if !lenient.is_empty() {
            self.lenient.insert(name.clone(), lenient);
        }
        properties.values_mut().for_each(strip);
        let mut req: Vec<String> = Vec::new();
        for r in required {
            if properties.contains_key(&r) && !req.contains(&r) {
                req.push(r);
            }
        }
        self.synthesized.insert(
            name.clone(),
            json!({ "description": doc, "type": "object", "properties": properties, "required": req }),
        );
        name
    }
}

/// Rule 3: a tagged union, if `def` is one.
fn tagged_union(name: &str, def: &Value, ctx: &mut Ctx<'_>) -> Result<Option<UnionSpec>, Error> {
    let Some((_, alternatives)) = variants_of(def) else { return Ok(None) };
    let tags: Vec<(String, String)> = alternatives.iter().filter_map(const_tag).collect();
    // A union of bare `const` strings is an enum, not a tagged union.
    if tags.is_empty()
        || alternatives.iter().all(|a| a.get("const").is_some() || a.get("type") == Some(&json!("string")))
    {
        return Ok(None);
    }
    let tag = tags[0].0.clone();
    if tags.iter().any(|(t, _)| *t != tag) {
        return Err(Error::new(format!("`{name}` mixes tag properties")));
    }
    let parent_props = props(def);
    let parent_req = required(def);
    let mut variants = Vec::new();
    let mut fallbacks = Vec::new();
    let mut open = false;

    for alt in alternatives {
        if is_open_catch_all(alt) {
            open = true;
            continue;
        }
        let doc = description(alt);
        let mut own = props(alt);
        let own_req: Vec<String> = required(alt);
        let target = wrapped_ref(alt);
        match const_tag(alt) {
            Some((_, value)) => {
                own.remove(&tag);
                let own_req: Vec<String> = own_req.into_iter().filter(|r| *r != tag).collect();
                let payload = if parent_props.is_empty() && own.is_empty() {
                    target.clone()
                } else {
                    let (mut properties, req) =
                        ctx.variant_shape(&parent_props, &parent_req, own, own_req, target.as_deref())?;
                    // The tag is the enum's to read and write; a union that declares it
                    // beside its variants (`IdleStateUpdate.stopReason`) must not also put it
                    // in each payload, where it would be written twice.
                    properties.remove(&tag);
                    let doc = if doc.is_empty() {
                        target.as_ref().and_then(|t| ctx.defs.get(t)).map(description).unwrap_or_default()
                    } else {
                        doc.clone()
                    };
                    Some(ctx.synthesize(format!("{name}{}", pascal(&value)), doc, properties, req))
                };
                let doc = if doc.is_empty() {
                    payload.as_ref().and_then(|p| ctx.defs.get(p)).map(description).unwrap_or_default()
                } else {
                    doc
                };
                variants.push(TaggedVariant { value, payload, doc });
            }
            None => {
                let title = alt
                    .get("title")
                    .and_then(Value::as_str)
                    .ok_or_else(|| Error::new(format!("`{name}` has an untagged variant without a title")))?;
                let variant = pascal(title);
                let payload = match (&target, parent_props.is_empty() && own.is_empty()) {
                    (Some(t), true) => t.clone(),
                    _ => {
                        let (properties, req) =
                            ctx.variant_shape(&parent_props, &parent_req, own, own_req, target.as_deref())?;
                        ctx.synthesize(format!("{name}{variant}"), doc.clone(), properties, req)
                    }
                };
                fallbacks.push(Fallback { variant, payload, doc });
            }
        }
    }
    Ok(Some(UnionSpec::Tagged {
        name: name.to_owned(),
        doc: description(def),
        tag,
        variants,
        fallbacks,
        open,
    }))
}

/// Rule 4: an open string enum, if `def` is one.
fn open_string_enum(name: &str, def: &Value) -> Option<UnionSpec> {
    let (_, alternatives) = variants_of(def)?;
    let mut values = Vec::new();
    let mut catch_all = false;
    for alt in alternatives {
        if alt.get("type") != Some(&json!("string")) {
            return None;
        }
        match alt.get("const").and_then(Value::as_str) {
            Some(v) => values.push((v.to_owned(), description(alt))),
            None => catch_all = true,
        }
    }
    (catch_all && !values.is_empty()).then(|| UnionSpec::OpenString {
        name: name.to_owned(),
        doc: description(def),
        values,
    })
}

/// Rule 5: an open integer enum becomes its catch-all integer.
fn open_integer_enum(def: &Value) -> Option<Value> {
    let (_, alternatives) = variants_of(def)?;
    let all_int = alternatives.iter().all(|a| a.get("type") == Some(&json!("integer")));
    let catch_all = alternatives.iter().find(|a| a.get("const").is_none())?;
    all_int.then(|| {
        let mut out = catch_all.clone();
        if let Value::Object(map) = &mut out {
            map.remove("title");
            map.insert("description".into(), json!(description(def)));
        }
        out
    })
}

/// Rules 6 and 7 for the remaining `anyOf`/`oneOf` unions.
fn plain_union(def: &Value, defs: &BTreeMap<String, Value>) -> Option<Value> {
    let (_, alternatives) = variants_of(def)?;
    let doc = description(def);
    if let [only] = alternatives.as_slice() {
        let mut out = match wrapped_ref(only) {
            Some(r) => json!({ "$ref": format!("#/$defs/{r}") }),
            None => only.clone(),
        };
        if let Value::Object(map) = &mut out {
            map.remove("title");
            map.insert("description".into(), json!(doc));
        }
        return Some(out);
    }
    let parent_props = props(def);
    let parent_req = required(def);
    let mut variants = Vec::new();
    for (i, alt) in alternatives.iter().enumerate() {
        let title = alt
            .get("title")
            .and_then(Value::as_str)
            .map(pascal)
            .or_else(|| wrapped_ref(alt))
            .unwrap_or_else(|| format!("Alternative{i}"));
        let mut variant = alt.clone();
        if let Value::Object(map) = &mut variant {
            map.insert("title".into(), json!(title));
        }
        if !parent_props.is_empty() {
            // typify would distribute the shared properties itself but lose the titles.
            let mut properties = parent_props.clone();
            let mut req = parent_req.clone();
            if let Some(r) = wrapped_ref(alt) {
                variant = json!({ "title": title, "description": description(alt), "type": "object" });
                if let Some(target) = defs.get(&r) {
                    merge_props(&mut properties, props(target));
                    req.extend(required(target));
                }
            }
            merge_props(&mut properties, props(alt));
            req.extend(required(alt));
            if let Value::Object(map) = &mut variant {
                map.remove("allOf");
                map.insert("type".into(), json!("object"));
                map.insert("properties".into(), Value::Object(properties));
                map.insert("required".into(), json!(req));
            }
        }
        // Properties copied from a `$ref` target still carry annotations.
        strip(&mut variant);
        variants.push(variant);
    }
    let mut out = json!({ "description": doc, "oneOf": variants });
    if let Some(t) = def.get("type")
        && !parent_props.is_empty()
    {
        out["type"] = t.clone();
    }
    Some(out)
}

/// Applies every rule to the merged definitions.
pub fn normalize(defs: &BTreeMap<String, Value>) -> Result<Normalized, Error> {
    let mut ctx = Ctx { defs, synthesized: BTreeMap::new(), lenient: BTreeMap::new() };
    let mut out = Normalized::default();
    for (name, def) in defs {
        if ENVELOPES.contains(&name.as_str()) {
            continue;
        }
        if let Some(union) = tagged_union(name, def, &mut ctx)? {
            out.unions.push(union);
            out.defs.insert(name.clone(), json!({ "type": "object" }));
            continue;
        }
        if let Some(union) = open_string_enum(name, def) {
            out.unions.push(union);
            out.defs.insert(name.clone(), json!({ "type": "string" }));
            continue;
        }
        let lenient = lenient_props(&props(def));
        if !lenient.is_empty() {
            out.lenient.insert(name.clone(), lenient);
        }
        let mut def = def.clone();
        strip(&mut def);
        let def = open_integer_enum(&def).or_else(|| plain_union_if_not_enum(&def, defs)).unwrap_or(def);
        out.defs.insert(name.clone(), def);
    }
    out.lenient.append(&mut ctx.lenient);
    for (name, def) in ctx.synthesized {
        if out.defs.contains_key(&name) {
            return Err(Error::new(format!("synthesized `{name}` collides with a definition")));
        }
        out.defs.insert(name, def);
    }
    Ok(out)
}

/// Closed string enums (a `oneOf` of `const` strings) are left to typify as they are.
fn plain_union_if_not_enum(def: &Value, defs: &BTreeMap<String, Value>) -> Option<Value> {
    let (_, alternatives) = variants_of(def)?;
    if alternatives.iter().all(|a| a.get("const").is_some()) {
        return None;
    }
    plain_union(def, defs)
}
