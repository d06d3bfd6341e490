//! Runtime validation of messages against the schema the types were generated from
//! (`--validate` / `HERON_VALIDATE=1`): incoming params answer -32602 with the JSON pointer
//! of the violation; outgoing messages that break the schema are logged loudly.

use std::sync::{Arc, OnceLock};

use jsonschema::ValidatorMap;
use serde_json::Value;
use serde_json::value::RawValue;

use heron_rpc::{OutgoingKind, RpcError, Validate};

use crate::table::Side;
use crate::types::Method;

/// Compiled validators for every definition of the merged schema, checking the messages
/// of one side of a connection.
pub struct SchemaValidator {
    map: Arc<ValidatorMap>,
    serving: Side,
}

impl std::fmt::Debug for SchemaValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaValidator")
            .field("validators", &self.map.len())
            .field("serving", &self.serving)
            .finish()
    }
}

/// Why the validator could not be built: the embedded schema is broken, a build bug.
#[derive(Debug, thiserror::Error)]
#[error("the embedded protocol schema does not compile: {0}")]
pub struct SchemaError(String);

impl SchemaValidator {
    /// A validator for the side that serves `serving`'s methods (`Side::Agent` for `heron
    /// acp`). The schema is compiled once per process and shared.
    pub fn new(serving: Side) -> Result<Self, SchemaError> {
        static COMPILED: OnceLock<Result<Arc<ValidatorMap>, String>> = OnceLock::new();
        let compiled = COMPILED.get_or_init(|| {
            let schema: Value = serde_json::from_str(crate::SCHEMA_JSON).map_err(|e| e.to_string())?;
            jsonschema::validator_map_for(&schema).map(Arc::new).map_err(|e| e.to_string())
        });
        let map = compiled.as_ref().map_err(|e| SchemaError(e.clone()))?.clone();
        Ok(Self { map, serving })
    }

    fn serves(&self, method: Method) -> bool {
        let side = method.info().side;
        side == self.serving || side == Side::Protocol
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
        // Unknown methods, and methods the other side serves, are the dispatcher's to answer.
        let Some(method) = Method::from_wire(method).filter(|m| self.serves(*m)) else { return Ok(()) };
        let params = crate::legacy::upgrade(method, params);
        let params = parse(params.as_deref()).map_err(|reason| RpcError::schema_violation("", reason))?;
        self.check(method.info().params, &params)
            .map_err(|(pointer, reason)| RpcError::schema_violation(pointer, reason))
    }

    fn outgoing(&self, kind: OutgoingKind, method: &str, payload: &RawValue) {
        let Some(method) = Method::from_wire(method) else { return };
        let def = match kind {
            OutgoingKind::Request | OutgoingKind::Notification if !self.serves(method) => {
                Some(method.info().params)
            }
            OutgoingKind::Result if self.serves(method) => method.info().result,
            // A message this side should never send is a bug the peer will reject anyway.
            _ => {
                tracing::error!(method = method.wire(), ?kind, "sending a message of the wrong side");
                return;
            }
        };
        let Some(def) = def else { return };
        let outcome = parse(Some(payload)).map_err(|e| (String::new(), e)).and_then(|v| self.check(def, &v));
        if let Err((pointer, reason)) = outcome {
            tracing::error!(method = method.wire(), ?kind, %pointer, %reason, "outgoing message violates the ACP schema");
        }
    }
}
