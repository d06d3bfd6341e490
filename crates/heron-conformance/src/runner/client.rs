//! The client the runner plays in the acp profile, for the requests an agent sends it during
//! a turn that the transcript does not answer itself: a permission question is answered with
//! one of the rejecting options the agent offered (nothing runs on the runner's say-so), and
//! any other method the scenario's `initialize` did not advertise is -32601, as a client
//! without it answers. A method the scenario did advertise is left to the transcript, which
//! then has to expect it: only the scenario knows what its files or terminals hold.
//!
//! An acp scenario holds for every agent, and agents differ in what they ask the client
//! mid-turn (Heron asks before writing a file; an echo agent asks nothing), so these
//! requests are the agent's own business and are not deviations.

use serde_json::{Value, json};

use crate::format::{Item, Scenario};

/// ACP's auth_required: the agent cannot open a session without credentials.
pub(super) const AUTH_REQUIRED: i64 = -32000;

/// JSON-RPC's method not found.
const METHOD_NOT_FOUND: i64 = -32601;

/// What the scenario's client advertised, as the methods an agent may then call on it.
#[derive(Debug, Clone, Default)]
pub(super) struct Client {
    advertised: Vec<&'static str>,
}

impl Client {
    /// The client of `scenario`: the capabilities its first `initialize` sends.
    pub(super) fn of(scenario: &Scenario) -> Client {
        let capabilities = scenario.items.iter().find_map(|item| match item {
            Item::Send { message, .. }
                if message.get("method").and_then(Value::as_str) == Some("initialize") =>
            {
                message.pointer("/params/clientCapabilities").cloned()
            }
            _ => None,
        });
        Client::advertising(&capabilities.unwrap_or(Value::Null))
    }

    /// The client that advertised `capabilities` (ACP v1's `clientCapabilities`).
    pub(super) fn advertising(capabilities: &Value) -> Client {
        let on =
            |path: &str| !matches!(capabilities.pointer(path), None | Some(Value::Null | Value::Bool(false)));
        let mut advertised = Vec::new();
        if on("/fs/readTextFile") {
            advertised.push("fs/read_text_file");
        }
        if on("/fs/writeTextFile") {
            advertised.push("fs/write_text_file");
        }
        if on("/terminal") {
            advertised.extend([
                "terminal/create",
                "terminal/output",
                "terminal/wait_for_exit",
                "terminal/kill",
                "terminal/release",
            ]);
        }
        if on("/elicitation/form") || on("/elicitation/url") {
            advertised.push("elicitation/create");
        }
        Client { advertised }
    }

    /// The runner's answer to `message` when it is a request of the agent's that the runner
    /// answers as the client; `None` for anything else (answers, notifications, and methods
    /// the scenario advertised, which are the transcript's to answer).
    pub(super) fn answer(&self, message: &Value) -> Option<Value> {
        let method = message.get("method")?.as_str()?;
        let id = message.get("id")?;
        if method == "session/request_permission" {
            return Some(json!({ "jsonrpc": "2.0", "id": id, "result": { "outcome": rejection(message) } }));
        }
        if self.advertised.contains(&method) {
            return None;
        }
        Some(json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": METHOD_NOT_FOUND,
                "message": format!("Method not found: the conformance client does not offer {method}"),
            },
        }))
    }
}

/// The outcome that turns a permission question down: the first `reject_once` option the
/// agent offered, else the first `reject_always`, else `cancelled` (which every agent must
/// take, and which allows nothing).
fn rejection(request: &Value) -> Value {
    let options = request.pointer("/params/options").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let of_kind = |kind: &str| {
        options
            .iter()
            .find(|o| o.get("kind").and_then(Value::as_str) == Some(kind))
            .and_then(|o| o.get("optionId"))
    };
    match of_kind("reject_once").or_else(|| of_kind("reject_always")) {
        Some(option) => json!({ "outcome": "selected", "optionId": option }),
        None => json!({ "outcome": "cancelled" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn permission(options: Value) -> Value {
        json!({ "jsonrpc": "2.0", "id": 7, "method": "session/request_permission",
                "params": { "sessionId": "s", "toolCall": { "toolCallId": "c" }, "options": options } })
    }

    #[test]
    fn a_permission_question_is_answered_with_a_rejecting_option_never_an_allowing_one() {
        let client = Client::default();
        let options = json!([
            { "optionId": "yes", "name": "Allow", "kind": "allow_once" },
            { "optionId": "never", "name": "Never", "kind": "reject_always" },
            { "optionId": "no", "name": "Reject", "kind": "reject_once" },
        ]);
        let answer = client.answer(&permission(options)).expect("answered");
        assert_eq!(
            answer,
            json!({ "jsonrpc": "2.0", "id": 7, "result": { "outcome": { "outcome": "selected", "optionId": "no" } } })
        );
        let only_always = json!([{ "optionId": "never", "name": "Never", "kind": "reject_always" }]);
        assert_eq!(
            client.answer(&permission(only_always)).expect("answered")["result"]["outcome"]["optionId"],
            "never"
        );
        let only_allow = json!([{ "optionId": "yes", "name": "Allow", "kind": "allow_once" }]);
        assert_eq!(
            client.answer(&permission(only_allow)).expect("answered")["result"]["outcome"],
            json!({ "outcome": "cancelled" })
        );
    }

    #[test]
    fn methods_the_client_did_not_advertise_are_not_found_and_advertised_ones_left_to_the_transcript() {
        let read = json!({ "jsonrpc": "2.0", "id": "r", "method": "fs/read_text_file", "params": {} });
        let answer =
            Client::advertising(&json!({ "fs": { "readTextFile": false } })).answer(&read).expect("answered");
        assert_eq!((answer["id"].clone(), answer["error"]["code"].clone()), (json!("r"), json!(-32601)));
        let offering = Client::advertising(&json!({ "fs": { "readTextFile": true }, "terminal": true }));
        assert_eq!(offering.answer(&read), None);
        let terminal = json!({ "jsonrpc": "2.0", "id": 1, "method": "terminal/create", "params": {} });
        assert_eq!(offering.answer(&terminal), None);
        let write = json!({ "jsonrpc": "2.0", "id": 2, "method": "fs/write_text_file", "params": {} });
        assert_eq!(offering.answer(&write).expect("not advertised")["error"]["code"], -32601);
    }

    #[test]
    fn notifications_and_answers_are_not_requests_to_answer() {
        let client = Client::default();
        assert_eq!(
            client.answer(&json!({ "jsonrpc": "2.0", "method": "session/update", "params": {} })),
            None
        );
        assert_eq!(client.answer(&json!({ "jsonrpc": "2.0", "id": 1, "result": {} })), None);
    }
}
