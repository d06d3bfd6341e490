//! Runtime validation of messages against the schema the types were generated from
//! (`--validate` / `HERON_VALIDATE=1`): incoming params answer -32602 with the JSON pointer
//! of the violation; outgoing messages that break the schema are logged loudly. Written
//! once for every protocol version: [`SchemaValidator`] checks ACP v1 connections,
//! [`crate::v2::SchemaValidator`] ACP v2 ones.

use std::marker::PhantomData;
use std::sync::Arc;

use jsonschema::ValidatorMap;
use serde_json::Value;
use serde_json::value::RawValue;

use heron_rpc::{OutgoingKind, RpcError, Validate};

pub use crate::schema::{EmbeddedSchema, SchemaError};
use crate::table::Side;
use crate::types::Method;
use crate::version::ProtocolMethod;

/// Compiled validators for every definition of one version's merged schema, checking the
/// messages of one side of a connection; `M` is the version's `Method`.
pub struct Validator<M> {
    map: Arc<ValidatorMap>,
    serving: Side,
    version: PhantomData<fn() -> M>,
}

/// The validator of ACP v1 connections.
pub type SchemaValidator = Validator<Method>;

impl<M> std::fmt::Debug for Validator<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaValidator")
            .field("validators", &self.map.len())
            .field("serving", &self.serving)
            .finish()
    }
}

impl<M: ProtocolMethod> Validator<M> {
    /// A validator for the side that serves `serving`'s methods (`Side::Agent` for `heron
    /// acp`). The schema is compiled once per process and shared.
    pub fn new(serving: Side) -> Result<Self, SchemaError> {
        Ok(Self { map: M::schema().validators()?, serving, version: PhantomData })
    }

    fn serves(&self, method: M) -> bool {
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

impl<M: ProtocolMethod> Validate for Validator<M> {
    fn incoming(&self, method: &str, params: Option<&RawValue>) -> Result<(), RpcError> {
        // Unknown methods, and methods the other side serves, are the dispatcher's to answer.
        let Some(method) = M::from_wire(method).filter(|m| self.serves(*m)) else { return Ok(()) };
        let params = method.upgrade(params);
        let params = parse(params.as_deref()).map_err(|reason| RpcError::schema_violation("", reason))?;
        self.check(method.info().params, &params)
            .map_err(|(pointer, reason)| RpcError::schema_violation(pointer, reason))
    }

    fn outgoing(&self, kind: OutgoingKind, method: &str, payload: &RawValue) {
        let Some(method) = M::from_wire(method) else { return };
        let def = match kind {
            OutgoingKind::Request | OutgoingKind::Notification if !self.serves(method) => {
                Some(method.info().params)
            }
            OutgoingKind::Result if self.serves(method) => method.info().result,
            // A message this side should never send is a bug the peer will reject anyway.
            _ => {
                tracing::error!(method = method.info().wire, ?kind, "sending a message of the wrong side");
                return;
            }
        };
        let Some(def) = def else { return };
        let outcome = parse(Some(payload)).map_err(|e| (String::new(), e)).and_then(|v| self.check(def, &v));
        if let Err((pointer, reason)) = outcome {
            tracing::error!(method = method.info().wire, ?kind, %pointer, %reason, "outgoing message violates the ACP schema");
        }
    }
}
