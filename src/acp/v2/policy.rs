//! How each ACP v2 method runs on the connection's reader: cancellations inline, so they
//! take effect in arrival order before anything queued behind them; the rest concurrently.
//! An exhaustive `match`: a method added to the v2 schema does not compile until someone
//! decides how it runs.

use heron_protocol::v2::Method;
use heron_rpc::Policy;

/// The policy of each v2 method Heron serves as an agent.
pub fn agent_policy(method: Method) -> Policy {
    use Method as M;
    match method {
        M::SessionCancel | M::CancelRequest | M::ToolCallCancel | M::TerminalCancel => Policy::Inline,
        M::Initialize | M::AuthLogin | M::AuthLogout => Policy::Concurrent,
        M::SessionNew | M::SessionResume | M::SessionList | M::SessionClose | M::SessionDelete => {
            Policy::Concurrent
        }
        M::SessionPrompt | M::SessionSetConfigOption => Policy::Concurrent,
        M::SessionUpdate | M::SessionRequestPermission | M::ElicitationCreate | M::ElicitationComplete => {
            Policy::Concurrent
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancellations_run_inline_and_prompts_concurrently() {
        for cancel in
            [Method::SessionCancel, Method::CancelRequest, Method::ToolCallCancel, Method::TerminalCancel]
        {
            assert_eq!(agent_policy(cancel), Policy::Inline, "{cancel:?}");
        }
        assert_eq!(agent_policy(Method::SessionPrompt), Policy::Concurrent);
    }
}
