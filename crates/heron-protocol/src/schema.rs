//! One protocol version's merged schema as the binary embeds it ([`EmbeddedSchema`]):
//! what a version names (`version`) and what validation compiles (`validate`), apart from
//! both so that neither depends on the other. Invariant: each schema is compiled at most
//! once per process, on first use, and then shared.

use std::sync::{Arc, OnceLock};

use jsonschema::ValidatorMap;
use serde_json::Value;

/// One version's merged schema, embedded in the binary and compiled on first use, once per
/// process, then shared by every validator of that version.
pub struct EmbeddedSchema {
    json: &'static str,
    compiled: OnceLock<Result<Arc<ValidatorMap>, String>>,
}

impl EmbeddedSchema {
    /// The schema whose text is `json`, not yet compiled.
    pub const fn new(json: &'static str) -> Self {
        Self { json, compiled: OnceLock::new() }
    }

    pub(crate) fn validators(&self) -> Result<Arc<ValidatorMap>, SchemaError> {
        let compiled = self.compiled.get_or_init(|| {
            let schema: Value = serde_json::from_str(self.json).map_err(|e| e.to_string())?;
            jsonschema::validator_map_for(&schema).map(Arc::new).map_err(|e| e.to_string())
        });
        compiled.as_ref().map(Arc::clone).map_err(|e| SchemaError(e.clone()))
    }
}

/// Why the validator could not be built: the embedded schema is broken, a build bug.
#[derive(Debug, thiserror::Error)]
#[error("the embedded protocol schema does not compile: {0}")]
pub struct SchemaError(String);
