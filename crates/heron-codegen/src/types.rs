//! Runs typify over the normalized definitions.

use proc_macro2::TokenStream;
use schemars::schema::Schema;
use typify::{TypeSpace, TypeSpaceSettings};

use crate::Error;
use crate::normalize::Normalized;

/// Generates the struct, newtype and plain enum types; unions in `normalized.unions` are
/// replaced by the names Heron emits for them.
pub fn typify(normalized: &Normalized) -> Result<TokenStream, Error> {
    let mut settings = TypeSpaceSettings::default();
    settings
        .with_struct_builder(false)
        .with_derive("PartialEq".to_owned())
        .with_map_type("::std::collections::BTreeMap");
    for union in &normalized.unions {
        settings.with_replacement(union.name(), union.name(), std::iter::empty());
    }
    let mut space = TypeSpace::new(&settings);
    let mut defs = Vec::new();
    for (name, def) in &normalized.defs {
        let schema: Schema = serde_json::from_value(def.clone())
            .map_err(|e| Error::new(format!("`{name}` is not a schema typify reads: {e}")))?;
        defs.push((name.clone(), schema));
    }
    space.add_ref_types(defs).map_err(|e| Error::new(format!("typify: {e}")))?;
    Ok(space.to_stream())
}
