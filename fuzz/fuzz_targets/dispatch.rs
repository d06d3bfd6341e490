//! Fuzzes payload handling: arbitrary JSON params for every method of the table through
//! `canonical_params`, `canonical_result`, the `--validate` schema check and the
//! `AgentService` dispatcher over a trivial agent. None of it may panic; a dispatch error
//! is -32601 or -32602, and decoding what Heron itself encoded must give it back unchanged.
//!
//! Input layout: byte 0 picks the method (and whether to call it by a legacy alias),
//! the rest is the params text; text that is not JSON is dispatched as absent params.

#![no_main]

use std::future::{Future, ready};
use std::sync::OnceLock;
use std::task::{Context, Waker};

use heron::acp::policy::agent_policy;
use heron_protocol::runtime::{Kind, Side};
use heron_protocol::serve::AgentService;
use heron_protocol::validate::SchemaValidator;
use heron_protocol::{
    Agent, CancelNotification, InitializeRequest, InitializeResponse, Method, NewSessionRequest,
    NewSessionResponse, PromptRequest, PromptResponse, ProtocolVersion, RpcError, canonical_params,
    canonical_result,
};
use heron_rpc::Dispatcher;
use heron_rpc::Validate;
use libfuzzer_sys::fuzz_target;
use serde_json::value::RawValue;

/// An agent whose handlers do nothing; everything else keeps the trait's defaults.
struct TrivialAgent;

#[allow(refining_impl_trait)] // concrete results, narrower than the trait on purpose
impl Agent for TrivialAgent {
    fn initialize(
        &self,
        _params: InitializeRequest,
    ) -> impl Future<Output = Result<InitializeResponse, RpcError>> + Send + 'static {
        ready(Ok(InitializeResponse {
            protocol_version: ProtocolVersion(1),
            agent_capabilities: None,
            agent_info: None,
            auth_methods: Vec::new(),
            meta: None,
        }))
    }

    fn session_new(
        &self,
        _params: NewSessionRequest,
    ) -> impl Future<Output = Result<NewSessionResponse, RpcError>> + Send + 'static {
        ready(Err(RpcError::method_not_found("session/new")))
    }

    fn session_prompt(
        &self,
        _params: PromptRequest,
    ) -> impl Future<Output = Result<PromptResponse, RpcError>> + Send + 'static {
        ready(Err(RpcError::method_not_found("session/prompt")))
    }

    fn session_cancel(
        &self,
        _params: CancelNotification,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static {
        ready(Ok(()))
    }
}

fn service() -> &'static AgentService<TrivialAgent> {
    static SERVICE: OnceLock<AgentService<TrivialAgent>> = OnceLock::new();
    SERVICE.get_or_init(|| AgentService::new(TrivialAgent, agent_policy))
}

fn validator() -> &'static SchemaValidator {
    static VALIDATOR: OnceLock<SchemaValidator> = OnceLock::new();
    VALIDATOR.get_or_init(|| SchemaValidator::new(Side::Agent).expect("the embedded schema compiles"))
}

/// Canonical forms are fixed points: decoding what Heron encoded gives the same value.
fn assert_stable(
    what: &str,
    method: Method,
    canonical: fn(Method, &RawValue) -> Result<serde_json::Value, RpcError>,
    raw: &RawValue,
) {
    let Ok(first) = canonical(method, raw) else { return };
    let text = serde_json::to_string(&first).expect("a Value always encodes");
    let again = RawValue::from_string(text).expect("serde_json writes valid JSON");
    match canonical(method, &again) {
        Ok(second) => assert_eq!(first, second, "{what} of {method:?} is not stable"),
        Err(error) => panic!("{what} of {method:?} rejects its own output {first}: {error:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let [selector, text @ ..] = data else { return };
    let method = Method::ALL[usize::from(*selector) % Method::ALL.len()];
    let info = method.info();
    let wire = match info.aliases {
        [alias, ..] if selector & 0x80 != 0 => *alias,
        _ => info.wire,
    };
    let raw =
        std::str::from_utf8(text).ok().and_then(|text| serde_json::from_str::<Box<RawValue>>(text).ok());
    let params = raw.as_deref();

    if let Some(raw) = params {
        assert_stable("canonical_params", method, canonical_params, raw);
        assert_stable("canonical_result", method, canonical_result, raw);
    }
    if let Err(error) = validator().incoming(wire, params) {
        assert_eq!(error.code, -32602, "validation failed with {error:?}");
    }

    let mut cx = Context::from_waker(Waker::noop());
    match service().dispatch_request(wire, params) {
        Ok((_policy, mut running)) => {
            assert_eq!(info.kind, Kind::Request, "{wire} ran as a request");
            // The trivial handlers are ready at once; this runs their result encoding.
            let _ = running.as_mut().poll(&mut cx);
        }
        Err(error) => assert!(matches!(error.code, -32601 | -32602), "{wire} failed with {error:?}"),
    }
    if let Some((_policy, mut running)) = service().dispatch_notification(wire, params) {
        assert_eq!(info.kind, Kind::Notification, "{wire} ran as a notification");
        let _ = running.as_mut().poll(&mut cx);
    }
});
