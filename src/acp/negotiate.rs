//! Which ACP version one connection speaks. `--protocol v1` (the default) serves v1, as
//! before; `v2` serves v2 and refuses a client asking for another version (-32022 with the
//! versions served); `auto` serves what the client's `initialize` asks for, v2 for 2 and v1
//! otherwise. The version is settled by the first `initialize` and holds for the
//! connection; messages before it are v1's (or v2's under `--protocol v2`). The validator
//! (`--validate`) and the dispatcher both follow the settled version.

use std::sync::{Arc, OnceLock};

use heron_rpc::{Dispatcher, NotificationFuture, OutgoingKind, Policy, ResponseFuture, RpcError, Validate};
use serde_json::json;
use serde_json::value::RawValue;

/// What `--protocol` allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Protocol {
    /// ACP v1 only.
    #[default]
    V1,
    /// ACP v2 only (a draft protocol).
    V2,
    /// What the client asks for.
    Auto,
}

/// A protocol version a connection can settle on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// ACP v1.
    V1,
    /// ACP v2.
    V2,
}

/// The -32022 code of ACP v2: the client asked for a version this agent does not serve.
pub const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32022;

/// One connection's choice of version.
#[derive(Debug)]
pub struct Negotiation {
    allowed: Protocol,
    settled: OnceLock<Version>,
}

impl Negotiation {
    /// A connection allowed `allowed`.
    pub fn new(allowed: Protocol) -> Arc<Self> {
        Arc::new(Self { allowed, settled: OnceLock::new() })
    }

    /// The version a message goes to: settled by the first `initialize` from the version it
    /// asks for, the default before that.
    fn settle(&self, method: &str, params: Option<&RawValue>) -> Result<Version, RpcError> {
        if let Some(settled) = self.settled.get() {
            return Ok(*settled);
        }
        let default = if self.allowed == Protocol::V2 { Version::V2 } else { Version::V1 };
        if method != "initialize" {
            return Ok(default);
        }
        let asked = requested(params);
        let version = match (self.allowed, asked) {
            (Protocol::V1, _) => Version::V1,
            (Protocol::Auto, Some(2)) => Version::V2,
            (Protocol::Auto, _) => Version::V1,
            (Protocol::V2, Some(2)) => Version::V2,
            (Protocol::V2, other) => {
                return Err(RpcError::new(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version")
                    .with_data(json!({ "requested": other, "supported": [2] })));
            }
        };
        Ok(*self.settled.get_or_init(|| version))
    }

    /// The version settled on, if any.
    pub fn settled(&self) -> Option<Version> {
        self.settled.get().copied()
    }
}

/// The `protocolVersion` an `initialize` asks for, when it is a number that fits.
fn requested(params: Option<&RawValue>) -> Option<u16> {
    #[derive(serde::Deserialize)]
    struct Asked {
        #[serde(rename = "protocolVersion")]
        protocol_version: Option<serde_json::Value>,
    }
    let asked: Asked = serde_json::from_str(params?.get()).ok()?;
    asked.protocol_version?.as_u64().and_then(|v| u16::try_from(v).ok())
}

/// Serves each message with the dispatcher of the connection's version.
pub struct Negotiated {
    negotiation: Arc<Negotiation>,
    v1: Arc<dyn Dispatcher>,
    v2: Arc<dyn Dispatcher>,
}

impl Negotiated {
    /// Routes between the v1 and v2 services as `negotiation` settles.
    pub fn new(negotiation: Arc<Negotiation>, v1: Arc<dyn Dispatcher>, v2: Arc<dyn Dispatcher>) -> Self {
        Self { negotiation, v1, v2 }
    }

    fn of(&self, version: Version) -> &dyn Dispatcher {
        match version {
            Version::V1 => self.v1.as_ref(),
            Version::V2 => self.v2.as_ref(),
        }
    }
}

impl Dispatcher for Negotiated {
    fn dispatch_request(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(Policy, ResponseFuture), RpcError> {
        let version = self.negotiation.settle(method, params)?;
        self.of(version).dispatch_request(method, params)
    }

    fn dispatch_notification(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Option<(Policy, NotificationFuture)> {
        let version = self.negotiation.settle(method, params).ok()?;
        self.of(version).dispatch_notification(method, params)
    }
}

/// Checks each message against the schema of the connection's version.
pub struct NegotiatedValidator {
    negotiation: Arc<Negotiation>,
    v1: Arc<dyn Validate>,
    v2: Arc<dyn Validate>,
}

impl NegotiatedValidator {
    /// Validates with `v1` or `v2` as `negotiation` settles.
    pub fn new(negotiation: Arc<Negotiation>, v1: Arc<dyn Validate>, v2: Arc<dyn Validate>) -> Self {
        Self { negotiation, v1, v2 }
    }

    fn of(&self, version: Version) -> &dyn Validate {
        match version {
            Version::V1 => self.v1.as_ref(),
            Version::V2 => self.v2.as_ref(),
        }
    }
}

impl Validate for NegotiatedValidator {
    fn incoming(&self, method: &str, params: Option<&RawValue>) -> Result<(), RpcError> {
        // A refused `initialize` is the dispatcher's to answer, with its -32022.
        match self.negotiation.settle(method, params) {
            Ok(version) => self.of(version).incoming(method, params),
            Err(_) => Ok(()),
        }
    }

    fn outgoing(&self, kind: OutgoingKind, method: &str, payload: &RawValue) {
        let version = self.negotiation.settled().unwrap_or(match self.negotiation.allowed {
            Protocol::V2 => Version::V2,
            _ => Version::V1,
        });
        self.of(version).outgoing(kind, method, payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).expect("json")
    }

    #[test]
    fn auto_serves_what_the_client_asks_for_and_keeps_it() {
        let two = Negotiation::new(Protocol::Auto);
        assert_eq!(two.settle("session/new", None), Ok(Version::V1), "before initialize: the default");
        assert_eq!(two.settle("initialize", Some(&raw(r#"{"protocolVersion":2}"#))), Ok(Version::V2));
        assert_eq!(
            two.settle("initialize", Some(&raw(r#"{"protocolVersion":1}"#))),
            Ok(Version::V2),
            "settled"
        );
        let one = Negotiation::new(Protocol::Auto);
        assert_eq!(one.settle("initialize", Some(&raw(r#"{"protocolVersion":1}"#))), Ok(Version::V1));
        let odd = Negotiation::new(Protocol::Auto);
        assert_eq!(odd.settle("initialize", Some(&raw(r#"{"protocolVersion":"2"}"#))), Ok(Version::V1));
    }

    #[test]
    fn v1_ignores_the_ask_and_v2_refuses_other_versions_with_32022() {
        let v1 = Negotiation::new(Protocol::V1);
        assert_eq!(v1.settle("initialize", Some(&raw(r#"{"protocolVersion":2}"#))), Ok(Version::V1));
        let v2 = Negotiation::new(Protocol::V2);
        let err = v2.settle("initialize", Some(&raw(r#"{"protocolVersion":1}"#))).expect_err("refused");
        assert_eq!(err.code, UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(err.data, Some(json!({ "requested": 1, "supported": [2] })));
        assert_eq!(v2.settled(), None, "a refused initialize settles nothing");
        assert_eq!(v2.settle("initialize", Some(&raw(r#"{"protocolVersion":2}"#))), Ok(Version::V2));
    }
}
