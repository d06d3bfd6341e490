//! Merges the stable ACP schema, the unstable methods Heron serves and Heron's vendor schema
//! into one `$defs` namespace.
//!
//! Stable definitions win. Unstable ones enter only when a selected unstable method needs
//! them (with everything they reference that stable lacks) or when the vendor schema names
//! them in `x-unstable-defs`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::{Error, Version, ref_name};

/// One version's three input documents, parsed.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The stable ACP schema (`schema/acp/v1/schema.json`).
    pub stable: Value,
    /// The unstable ACP schema (`schema/acp/v1/schema.unstable.json`).
    pub unstable: Value,
    /// Heron's vendor schema (`schema/heron/v1.json`).
    pub vendor: Value,
}

/// Where a definition came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The stable ACP schema.
    Stable,
    /// The unstable ACP schema.
    Unstable,
    /// Heron's vendor schema.
    Vendor,
}

/// The merged definitions, in name order, each with its origin.
#[derive(Debug, Clone)]
pub struct Merged {
    /// Every definition, annotations intact.
    pub defs: BTreeMap<String, Value>,
    /// Where each definition came from.
    pub origin: BTreeMap<String, Origin>,
    /// Legacy method aliases: alias -> wire name.
    pub aliases: BTreeMap<String, String>,
    /// The unstable methods Heron serves.
    pub unstable_methods: BTreeSet<String>,
}

fn defs_of(doc: &Value, what: &str) -> Result<Map<String, Value>, Error> {
    doc.get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .ok_or_else(|| Error::new(format!("{what} has no `$defs` object")))
}

fn string_list(doc: &Value, key: &str) -> Result<Vec<String>, Error> {
    match doc.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str().map(str::to_owned).ok_or_else(|| Error::new(format!("`{key}` must hold strings")))
            })
            .collect(),
        Some(_) => Err(Error::new(format!("`{key}` must be an array"))),
    }
}

/// Collects the names of every `#/$defs/...` reference below `value`.
pub fn collect_refs(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if key == "$ref" {
                    if let Some(name) = child.as_str().and_then(ref_name) {
                        out.insert(name.to_owned());
                    }
                } else if key != "const" && key != "default" && key != "enum" {
                    collect_refs(child, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_refs(item, out)),
        _ => {}
    }
}

/// Builds the merged namespace.
pub fn merge(inputs: &Inputs) -> Result<Merged, Error> {
    let stable = defs_of(&inputs.stable, "the stable ACP schema")?;
    let unstable = defs_of(&inputs.unstable, "the unstable ACP schema")?;
    // A vendor schema may add no definitions (one that only says what Heron serves).
    let vendor = match inputs.vendor.get("$defs") {
        None => Map::new(),
        Some(_) => defs_of(&inputs.vendor, "the vendor schema")?,
    };

    let mut defs: BTreeMap<String, Value> = stable.clone().into_iter().collect();
    let mut origin: BTreeMap<String, Origin> = stable.keys().map(|k| (k.clone(), Origin::Stable)).collect();

    let unstable_methods: BTreeSet<String> =
        string_list(&inputs.vendor, "x-unstable-methods")?.into_iter().collect();
    let mut wanted: Vec<String> = Vec::new();
    for method in &unstable_methods {
        let found: Vec<&String> = unstable
            .iter()
            .filter(|(_, def)| def.get("x-method").and_then(Value::as_str) == Some(method))
            .map(|(name, _)| name)
            .collect();
        if found.is_empty() {
            return Err(Error::new(format!("unstable method `{method}` is not in the unstable schema")));
        }
        wanted.extend(found.into_iter().cloned());
    }
    // Explicit replacements take the unstable shape even when stable has the name.
    for name in string_list(&inputs.vendor, "x-unstable-defs")? {
        let def = unstable
            .get(&name)
            .ok_or_else(|| Error::new(format!("x-unstable-defs names `{name}`, which unstable lacks")))?;
        defs.insert(name.clone(), def.clone());
        origin.insert(name.clone(), Origin::Unstable);
        wanted.push(name);
    }
    // Pull in what the unstable additions reference and stable lacks.
    while let Some(name) = wanted.pop() {
        if !defs.contains_key(&name) || origin.get(&name) == Some(&Origin::Unstable) {
            let def = unstable
                .get(&name)
                .ok_or_else(|| Error::new(format!("unstable schema lacks referenced `{name}`")))?;
            if !defs.contains_key(&name) {
                defs.insert(name.clone(), def.clone());
                origin.insert(name.clone(), Origin::Unstable);
            }
            let mut refs = BTreeSet::new();
            collect_refs(def, &mut refs);
            wanted.extend(refs.into_iter().filter(|r| !defs.contains_key(r)));
        }
    }

    for (name, def) in vendor {
        if defs.contains_key(&name) || unstable.contains_key(&name) {
            return Err(Error::new(format!("vendor def `{name}` collides with an ACP definition")));
        }
        defs.insert(name.clone(), def);
        origin.insert(name, Origin::Vendor);
    }

    // Every reference must resolve inside the merged namespace.
    let mut refs = BTreeSet::new();
    for def in defs.values() {
        collect_refs(def, &mut refs);
    }
    if let Some(missing) = refs.iter().find(|r| !defs.contains_key(*r)) {
        return Err(Error::new(format!("`#/$defs/{missing}` is referenced but not defined")));
    }

    let mut aliases = BTreeMap::new();
    if let Some(map) = inputs.vendor.get("x-aliases") {
        let map = map.as_object().ok_or_else(|| Error::new("`x-aliases` must be an object"))?;
        for (alias, target) in map {
            let target =
                target.as_str().ok_or_else(|| Error::new(format!("alias `{alias}` must map to a string")))?;
            aliases.insert(alias.clone(), target.to_owned());
        }
    }

    Ok(Merged { defs, origin, aliases, unstable_methods })
}

/// The merged document used for runtime validation: every definition, annotations intact.
pub fn validation_document(merged: &Merged, version: &Version) -> Value {
    let defs: Map<String, Value> = merged.defs.clone().into_iter().collect();
    let name = version.name;
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("heron:acp/{name}"),
        "title": format!("ACP {name} as served by Heron: stable, selected unstable and vendor definitions"),
        "$defs": defs,
    })
}
