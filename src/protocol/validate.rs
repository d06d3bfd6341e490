//! Runtime validation of messages against the schema the types were generated from
//! (`--validate` / `HERON_VALIDATE=1`): incoming params answer -32602 with the JSON pointer
//! of the violation; outgoing messages that break the schema are logged loudly.

use jsonschema::ValidatorMap;
use serde_json::Value;
use serde_json::value::RawValue;

use super::error::RpcError;
use super::types::Method;
use crate::rpc::{OutgoingKind, Validate};

/// Compiled validators for every definition of the merged schema.
pub struct SchemaValidator {
    map: ValidatorMap,
}

impl std::fmt::Debug for SchemaValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaValidator").field("validators", &self.map.len()).finish()
    }
}

/// Why the validator could not be built: the embedded schema is broken, a build bug.
#[derive(Debug, thiserror::Error)]
#[error("the embedded protocol schema does not compile: {0}")]
pub struct SchemaError(String);

impl SchemaValidator {
    /// Compiles the embedded merged schema.
    pub fn new() -> Result<Self, SchemaError> {
        let schema: Value =
            serde_json::from_str(super::SCHEMA_JSON).map_err(|e| SchemaError(e.to_string()))?;
        let map = jsonschema::validator_map_for(&schema).map_err(|e| SchemaError(e.to_string()))?;
        Ok(Self { map })
    }

    /// Checks `instance` against the definition `def`. `Err` carries the instance pointer
    /// and the reason of the first violation.
    pub fn check(&self, def: &str, instance: &Value) -> Result<(), (String, String)> {
        let Some(validator) = self.map.get(&format!("#/$defs/{def}")) else {
            return Err((String::new(), format!("no schema definition `{def}`")));
        };
        match validator.validate(instance) {
            Ok(()) => Ok(()),
            Err(error) => Err((error.instance_path().to_string(), error.to_string())),
        }
    }
}

fn parse(raw: Option<&RawValue>) -> Result<Value, String> {
    match raw.map(RawValue::get) {
        None | Some("null") => Ok(Value::Object(Default::default())),
        Some(text) => serde_json::from_str(text).map_err(|e| e.to_string()),
    }
}

impl Validate for SchemaValidator {
    fn incoming(&self, method: &str, params: Option<&RawValue>) -> Result<(), RpcError> {
        // Unknown methods are the dispatcher's to answer.
        let Some(method) = Method::from_wire(method) else { return Ok(()) };
        let params = parse(params).map_err(|reason| RpcError::schema_violation("", reason))?;
        self.check(method.info().params, &params)
            .map_err(|(pointer, reason)| RpcError::schema_violation(pointer, reason))
    }

    fn outgoing(&self, kind: OutgoingKind, method: &str, payload: &RawValue) {
        let Some(method) = Method::from_wire(method) else { return };
        let def = match kind {
            OutgoingKind::Request | OutgoingKind::Notification => Some(method.info().params),
            OutgoingKind::Result => method.info().result,
        };
        let Some(def) = def else { return };
        let outcome = parse(Some(payload)).map_err(|e| (String::new(), e)).and_then(|v| self.check(def, &v));
        if let Err((pointer, reason)) = outcome {
            tracing::error!(method = method.wire(), ?kind, %pointer, %reason, "outgoing message violates the ACP schema");
        }
    }
}
