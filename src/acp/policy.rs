//! How each incoming method runs relative to the connection's reader.
//!
//! Every handler's synchronous part already runs in arrival order on the reader. `Inline`
//! additionally polls its future once there, so a cancellation takes effect before the
//! next message is read. Everything else runs as its own task, so a turn waiting on the
//! editor never holds up cancels, replies or other sessions. There is no `_` arm: a method
//! added to the schema does not compile until it is placed here.

use heron_protocol::Method;
use heron_rpc::Policy;

/// The policy of `method` when Heron is the agent.
pub fn agent_policy(method: Method) -> Policy {
    use Method as M;
    match method {
        // Cancellation must act before anything read after it.
        M::SessionCancel | M::CancelRequest => Policy::Inline,
        M::Initialize | M::Authenticate | M::Logout => Policy::Concurrent,
        M::SessionNew
        | M::SessionLoad
        | M::SessionResume
        | M::SessionList
        | M::SessionClose
        | M::SessionDelete
        | M::SessionFork => Policy::Concurrent,
        // Per-session order (queued prompts, settings between turns) is kept by the
        // session itself, which receives these in arrival order.
        M::SessionPrompt | M::SessionSetMode | M::SessionSetModel | M::SessionSetConfigOption => {
            Policy::Concurrent
        }
        M::HeronSessionSteer
        | M::HeronSessionStatus
        | M::HeronSessionMcpStatus
        | M::HeronSessionGoalPause
        | M::HeronSessionGoalResume
        | M::HeronSessionReloadExtensions
        | M::HeronSessionRewind => Policy::Concurrent,
        M::HeronInboxEnqueue
        | M::HeronInboxList
        | M::HeronInboxGet
        | M::HeronInboxUpdate
        | M::HeronInboxDelete
        | M::HeronInboxMove
        | M::HeronInboxSetPaused
        | M::HeronInboxRetry
        | M::HeronInboxRefresh => Policy::Concurrent,
        // Methods the editor handles never reach the agent's dispatcher; if a confused
        // peer sends one it is answered method-not-found before policy matters.
        M::SessionUpdate
        | M::SessionRequestPermission
        | M::FsReadTextFile
        | M::FsWriteTextFile
        | M::TerminalCreate
        | M::TerminalOutput
        | M::TerminalWaitForExit
        | M::TerminalKill
        | M::TerminalRelease
        | M::ElicitationCreate
        | M::ElicitationComplete
        | M::HeronSessionStatusUpdate
        | M::HeronSessionMcpStatusUpdate => Policy::Concurrent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancellations_run_inline_and_prompts_concurrently() {
        assert_eq!(agent_policy(Method::SessionCancel), Policy::Inline);
        assert_eq!(agent_policy(Method::CancelRequest), Policy::Inline);
        assert_eq!(agent_policy(Method::SessionPrompt), Policy::Concurrent);
    }
}
