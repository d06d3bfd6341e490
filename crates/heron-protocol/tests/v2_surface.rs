//! The ACP v2 Rust surface the adapter builds on: v2's method table, its `Agent` served by
//! `v2::AgentService`, its `ClientPeer` sending v2 wire names, and its schema validator.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use heron_protocol::RpcError;
use heron_protocol::runtime::{Kind, Outgoing, Side, Stability};
use heron_protocol::v2::{
    self, Agent, AgentService, CancelSessionNotification, Client, ClientPeer, Implementation,
    InitializeRequest, InitializeResponse, Method, NewSessionRequest, NewSessionResponse, PromptRequest,
    PromptResponse, SchemaValidator, SessionUpdate, UpdateSessionNotification,
};
use heron_rpc::{Dispatcher, Policy, Validate};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Value, json};

fn raw(value: Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(&value).expect("encodes")
}

/// Polls a future that needs nothing outside itself to finish.
fn ready<T>(future: impl Future<Output = T>) -> T {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("the future waits on something"),
    }
}

#[test]
fn v2_table_has_its_18_methods_on_their_sides() {
    let sides =
        |side: Side| -> Vec<&str> { v2::METHODS.iter().filter(|m| m.side == side).map(|m| m.wire).collect() };
    assert_eq!(
        sides(Side::Agent),
        [
            "auth/login",
            "auth/logout",
            "initialize",
            "session/cancel",
            "session/close",
            "session/delete",
            "session/list",
            "session/new",
            "session/prompt",
            "session/resume",
            "session/set_config_option",
            "terminal/cancel",
            "tool_call/cancel",
        ]
    );
    assert_eq!(
        sides(Side::Client),
        ["elicitation/complete", "elicitation/create", "session/request_permission", "session/update"]
    );
    assert_eq!(sides(Side::Protocol), ["$/cancel_request"]);
    assert_eq!(v2::METHODS.len(), 18);
    assert!(v2::METHODS.iter().all(|m| m.stability == Stability::Stable && m.aliases.is_empty()));
    let unserved: Vec<&str> = v2::METHODS.iter().filter(|m| !m.implemented).map(|m| m.wire).collect();
    // Declined (elicitation/complete, auth/logout) or not yet served over v2.
    assert_eq!(unserved, ["auth/logout", "elicitation/complete", "elicitation/create"]);
    assert!(v2::EXTENSIONS.is_empty(), "no `_heron/` extension is advertised over v2");
}

#[test]
fn v2_from_wire_knows_v2_names_only() {
    let update = Method::from_wire("session/update").expect("a v2 method");
    assert_eq!(
        (update, update.info().side, update.info().kind),
        (Method::SessionUpdate, Side::Client, Kind::Notification)
    );
    assert_eq!(Method::from_wire("tool_call/cancel"), Some(Method::ToolCallCancel));
    for gone in ["session/load", "authenticate", "fs/read_text_file", "prompt", "_heron/session/steer"] {
        assert_eq!(Method::from_wire(gone), None, "`{gone}` is no v2 method");
    }
}

/// A v2 agent serving only the baseline.
struct EchoAgent;

#[allow(refining_impl_trait)] // concrete results, narrower than the trait on purpose
impl Agent for EchoAgent {
    fn initialize(
        &self,
        params: InitializeRequest,
    ) -> impl Future<Output = Result<InitializeResponse, RpcError>> + Send + 'static {
        let info = Implementation { name: "echo".into(), title: None, version: "0".into(), meta: None };
        std::future::ready(Ok(InitializeResponse {
            protocol_version: params.protocol_version,
            info,
            capabilities: None,
            auth_methods: Vec::new(),
            meta: None,
        }))
    }

    fn session_new(
        &self,
        _params: NewSessionRequest,
    ) -> impl Future<Output = Result<NewSessionResponse, RpcError>> + Send + 'static {
        std::future::ready(Err(RpcError::method_not_found("session/new")))
    }

    fn session_prompt(
        &self,
        _params: PromptRequest,
    ) -> impl Future<Output = Result<PromptResponse, RpcError>> + Send + 'static {
        std::future::ready(Err(RpcError::method_not_found("session/prompt")))
    }

    fn session_cancel(
        &self,
        _params: CancelSessionNotification,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static {
        std::future::ready(Ok(()))
    }
}

fn policy(method: Method) -> Policy {
    match method {
        Method::SessionCancel | Method::CancelRequest => Policy::Inline,
        _ => Policy::Concurrent,
    }
}

#[test]
fn v2_service_answers_initialize_through_the_v2_agent() {
    let service = AgentService::new(EchoAgent, policy);
    let params = raw(json!({ "protocolVersion": 2, "info": { "name": "zed", "version": "1" } }));
    let (policy, running) = service.dispatch_request("initialize", Some(&params)).expect("dispatched");
    assert_eq!(policy, Policy::Concurrent);
    let answer: Value = serde_json::from_str(ready(running).result.expect("answered").get()).expect("JSON");
    assert_eq!(answer["protocolVersion"], 2);
    assert_eq!(answer["info"]["name"], "echo");
}

#[test]
fn v2_service_refuses_v1_only_and_vendor_methods() {
    let service = AgentService::new(EchoAgent, policy);
    for method in ["session/load", "_heron/session/steer", "newSession"] {
        let refused = service.dispatch_request(method, None).err().expect("refused");
        assert_eq!(refused.code, heron_protocol::error::METHOD_NOT_FOUND, "{method}");
    }
    let cancel = raw(json!({ "sessionId": "s" }));
    let (policy, _) = service.dispatch_notification("session/cancel", Some(&cancel)).expect("dispatched");
    assert_eq!(policy, Policy::Inline);
}

/// Records what a peer handle sends.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<(&'static str, Value)>>>);

impl Recorder {
    fn record<P: Serialize>(&self, method: &'static str, params: &P) {
        let value = serde_json::to_value(params).expect("encodes");
        self.0.lock().expect("not poisoned").push((method, value));
    }
}

impl Outgoing for Recorder {
    fn call<P, R>(
        &self,
        method: &'static str,
        params: P,
    ) -> impl Future<Output = Result<R, RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static,
        R: DeserializeOwned + Send + 'static,
    {
        self.call_with_timeout(method, params, None)
    }

    fn call_with_timeout<P, R>(
        &self,
        method: &'static str,
        params: P,
        _timeout: Option<Duration>,
    ) -> impl Future<Output = Result<R, RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static,
        R: DeserializeOwned + Send + 'static,
    {
        self.record(method, &params);
        std::future::ready(Err(RpcError::method_not_found(method)))
    }

    fn notify<P>(
        &self,
        method: &'static str,
        params: P,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static,
    {
        self.record(method, &params);
        std::future::ready(Ok(()))
    }
}

#[test]
fn v2_client_peer_sends_session_update_under_its_v2_name() {
    let recorder = Recorder::default();
    let client = ClientPeer(recorder.clone());
    let update: UpdateSessionNotification = serde_json::from_value(json!({
        "sessionId": "s", "update": { "sessionUpdate": "state_update", "state": "running" } }))
    .expect("decodes");
    assert!(matches!(update.update, SessionUpdate::StateUpdate(_)));
    ready(client.session_update(update)).expect("sent");
    let sent = recorder.0.lock().expect("not poisoned").clone();
    assert_eq!(
        sent,
        [(
            "session/update",
            json!({ "sessionId": "s", "update": { "sessionUpdate": "state_update", "state": "running" } })
        )]
    );
}

#[test]
fn v2_validator_checks_against_the_v2_schema() {
    let validator = SchemaValidator::new(Side::Agent).expect("the v2 schema compiles");
    let v2_initialize = raw(json!({ "protocolVersion": 2, "info": { "name": "zed", "version": "1" } }));
    assert!(validator.incoming("initialize", Some(&v2_initialize)).is_ok());
    // v1's initialize names the client `clientInfo`; v2 requires `info`.
    let v1_initialize = raw(json!({ "protocolVersion": 1, "clientCapabilities": {} }));
    let refused = validator.incoming("initialize", Some(&v1_initialize)).expect_err("refused");
    assert_eq!(refused.code, heron_protocol::error::INVALID_PARAMS);
}
