//! Notices: what the user must know that no tool call carries (an MCP server that failed
//! to start or died, a model request being retried, commands running without the OS
//! sandbox, a problem a reload found). A client that advertised `session.notices` gets each
//! as a `notice` update when it happens. Any other gets the same text once, as an agent
//! message at the start of the session's next turn: never silence, and never a `notice` it
//! did not ask for (ACP allows those only after the capability). The same per-session
//! record of turns also re-sends a session's slash commands at its first turn here (see
//! [`turn_started`]).
//!
//! Bounds: at most [`MAX_WAITING`] notices wait per session (the oldest go first, and the
//! message says how many were left out), each title and description clipped, and a session
//! forgotten when it closes.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use heron_core::sandbox::Support;
use heron_core::secret::clip;
use heron_core::session::settings::Posture;
use heron_core::types::{Notice, NoticeSeverity};
use heron_protocol::runtime::{Outgoing, Then};
use heron_protocol::{self as p, SessionUpdate};

use super::Inner;

/// The most notices that wait for a session's next turn.
pub const MAX_WAITING: usize = 16;

/// The longest title and description shown, in bytes.
const MAX_TITLE: usize = 300;
const MAX_DESCRIPTION: usize = 2048;

/// Notices of one connection's sessions.
#[derive(Debug, Default)]
pub struct Notices {
    waiting: Mutex<HashMap<String, Waiting>>,
}

/// What waits for a session's next turn.
#[derive(Debug, Default)]
struct Waiting {
    notices: Vec<Notice>,
    /// Notices left out past [`MAX_WAITING`].
    dropped: usize,
    /// When the last turn seen started: a new value is a new turn.
    last_turn: Option<String>,
}

/// What a turn that just started brings: the notices that waited for it, and whether it is
/// the session's first turn on this connection.
#[derive(Debug, Default, PartialEq, Eq)]
struct Started {
    notices: Vec<Notice>,
    dropped: usize,
    first: bool,
}

impl Notices {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets a session that closed.
    pub fn forget(&self, session_id: &str) {
        self.waiting().remove(session_id);
    }

    /// Whether a turn of the session was seen on this connection.
    fn has_turned(&self, session_id: &str) -> bool {
        self.waiting().get(session_id).is_some_and(|w| w.last_turn.is_some())
    }

    /// Keeps `notice` for the session's next turn, the same one once.
    fn wait(&self, session_id: &str, notice: Notice) {
        let mut waiting = self.waiting();
        let entry = waiting.entry(session_id.to_owned()).or_default();
        if entry.notices.contains(&notice) {
            return;
        }
        if entry.notices.len() == MAX_WAITING {
            entry.notices.remove(0);
            entry.dropped += 1;
        }
        entry.notices.push(notice);
    }

    /// What a turn that started at `started` brings, once per turn; `None` for a turn
    /// already seen.
    fn started(&self, session_id: &str, started: &str) -> Option<Started> {
        let mut waiting = self.waiting();
        let entry = waiting.entry(session_id.to_owned()).or_default();
        if entry.last_turn.as_deref() == Some(started) {
            return None;
        }
        let first = entry.last_turn.replace(started.to_owned()).is_none();
        Some(Started {
            notices: std::mem::take(&mut entry.notices),
            dropped: std::mem::take(&mut entry.dropped),
            first,
        })
    }

    /// The notices waiting for a turn that started at `started`, once per turn.
    #[cfg(test)]
    fn due(&self, session_id: &str, started: &str) -> Option<(Vec<Notice>, usize)> {
        self.started(session_id, started).filter(|s| !s.notices.is_empty()).map(|s| (s.notices, s.dropped))
    }
}

/// Tells the user of `notice` in session `session_id`: now, or at its next turn.
pub async fn notify<O: Outgoing>(inner: &Inner<O>, session_id: &str, notice: Notice) {
    let Some(update) = shown_now(inner, session_id, notice) else { return };
    if let Err(err) = inner.send(session_id, update).await {
        tracing::debug!(%err, "could not send a notice");
    }
}

/// Shows `notice` right behind the answer being built, or at the session's next turn.
pub fn then_notify<O: Outgoing>(inner: &Inner<O>, then: &mut Then, session_id: &str, notice: Notice) {
    if let Some(update) = shown_now(inner, session_id, notice) {
        inner.then_send(then, session_id, update);
    }
}

/// The update that shows `notice` now, or `None` when it waits for the next turn (a client
/// that did not opt into notices) or cannot be shown.
fn shown_now<O: Outgoing>(inner: &Inner<O>, session_id: &str, notice: Notice) -> Option<SessionUpdate> {
    let notice = bounded(notice);
    if !inner.opted().notices {
        inner.notices.wait(session_id, notice);
        return None;
    }
    notice_update(notice)
}

/// At the start of each turn (a status snapshot with a new start time): the notices that
/// waited for it, as one agent message of their own. Before the session's first turn on this
/// connection, its slash commands go out once more: a client that dropped the update sent
/// when the session opened (Zed can, before it knows the session) recovers them here.
pub async fn turn_started<O: Outgoing>(inner: &Inner<O>, session_id: &str, started: Option<&str>) {
    let Some(started) = started else { return };
    let Some(Started { notices, dropped, first }) = inner.notices.started(session_id, started) else {
        return;
    };
    if first
        && let Some(session) = inner.manager.now().and_then(|manager| manager.get(session_id))
        && let Err(err) =
            inner.send(session_id, super::commands::update(&session.commands(), session.mcp())).await
    {
        tracing::debug!(%err, "could not advertise the commands again");
    }
    if notices.is_empty() {
        return;
    }
    let message_id = uuid::Uuid::new_v4().to_string();
    if let Err(err) = inner.send(session_id, agent_message(&message_id, text(&notices, dropped))).await {
        tracing::debug!(%err, "could not send the waiting notices");
    }
}

/// The notice a session opened here gets when walls of the sandbox around its commands do
/// not stand on this machine although `sandbox = "on"` asks for them: the user chose a
/// sandbox and must know what of it they have. (The network namespace is for conformance
/// runs, whose sessions have network anyway.)
pub fn unconfined(sandbox_on: bool, support: &Support) -> Option<Notice> {
    let missing: Vec<&str> =
        support.missing().into_iter().filter(|wall| *wall != "networkNamespace").collect();
    if !sandbox_on || missing.is_empty() {
        return None;
    }
    let mut description = format!(
        "Missing: {}. `heron doctor` says what each would stop; the approval setting still decides what runs.",
        missing.join(", ")
    );
    if let Err(reason) = &support.landlock {
        description = format!("{reason}. {description}");
    }
    Some(Notice {
        severity: NoticeSeverity::Warning,
        title: "Commands run with fewer walls of the OS sandbox on this machine".to_owned(),
        description: Some(description),
    })
}

/// Tells the user of a session just opened that its commands run unconfined, when they do
/// (see [`unconfined`]), once the answer that opened it is out.
pub fn after_open<O: Outgoing>(inner: &Inner<O>, then: &mut Then, session: &heron_core::session::Session) {
    let on = session.runtime().providers().config().sandbox == heron_core::config::SandboxSetting::On;
    let Some(notice) = unconfined(on, heron_core::sandbox::support()) else { return };
    then_notify(inner, then, session.id(), notice);
}

/// The note a session gets when it runs above `ask`, which the user may not have chosen in
/// this session (an editor applies its saved defaults, a launch flag sets it): what runs
/// without asking, and how to change it. `None` at `ask` or below.
pub fn posture(posture: Posture) -> Option<Notice> {
    let severity = match posture {
        Posture::Yolo => NoticeSeverity::Warning,
        Posture::Auto => NoticeSeverity::Info,
        Posture::ReadOnly | Posture::DontAsk | Posture::Ask => return None,
    };
    Some(Notice {
        severity,
        title: format!("This session's tool approval is `{}`: {}", posture.id(), posture.description().to_lowercase()),
        description: Some(
            "Choose another Tool approval in the session's settings, or type `/approval ask`, to be asked first."
                .to_owned(),
        ),
    })
}

/// Tells the user when `session` starts above `ask`: opened so (`before` is `None`), or
/// raised from `before` ahead of its first turn here, which is how an editor applies the
/// defaults it saved (Zed's `default_config_options`). A raise the user makes later is
/// theirs, and says nothing.
pub fn posture_raised<O: Outgoing>(
    inner: &Inner<O>,
    then: &mut Then,
    session: &heron_core::session::Session,
    before: Option<Posture>,
) {
    let now = session.state().settings.posture;
    if before.is_some_and(|before| before >= now || inner.notices.has_turned(session.id())) {
        return;
    }
    let Some(notice) = posture(now) else { return };
    then_notify(inner, then, session.id(), notice);
}

/// The waiting notices' agent message: a message of its own, apart from the model's.
fn agent_message(message_id: &str, text: String) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(p::ContentChunk {
        content: p::ContentBlock::Text(p::TextContent { annotations: None, meta: None, text }),
        message_id: Some(p::MessageId(message_id.to_owned())),
        meta: None,
    })
}

fn bounded(notice: Notice) -> Notice {
    let title = clip(&notice.title, MAX_TITLE);
    let description = notice.description.map(|d| clip(&d, MAX_DESCRIPTION)).filter(|d| !d.is_empty());
    Notice { title, description, ..notice }
}

/// The waiting notices as one message, one paragraph each.
fn text(notices: &[Notice], dropped: usize) -> String {
    let mut text = String::new();
    if dropped > 0 {
        text.push_str(&format!("[{dropped} earlier notices were left out]\n\n"));
    }
    for notice in notices {
        let label = match notice.severity {
            NoticeSeverity::Info => "Note",
            NoticeSeverity::Warning => "Warning",
            NoticeSeverity::Error => "Error",
        };
        text.push_str(&format!("[{label}] {}", notice.title));
        if let Some(description) = &notice.description {
            text.push_str(&format!("\n{description}"));
        }
        text.push_str("\n\n");
    }
    text.truncate(text.trim_end().len());
    text.push('\n');
    text
}

/// A notice as ACP v1 shows it; none for an empty title, which ACP does not allow.
fn notice_update(notice: Notice) -> Option<SessionUpdate> {
    Some(SessionUpdate::Notice(p::Notice {
        description: notice.description,
        meta: None,
        severity: match notice.severity {
            NoticeSeverity::Info => p::NoticeSeverity::Info,
            NoticeSeverity::Warning => p::NoticeSeverity::Warning,
            NoticeSeverity::Error => p::NoticeSeverity::Error,
        },
        title: notice.title.try_into().ok()?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(title: &str) -> Notice {
        Notice { severity: NoticeSeverity::Warning, title: title.to_owned(), description: None }
    }

    #[test]
    fn a_waiting_notice_is_due_once_at_the_next_turn_and_the_same_one_waits_once() {
        let notices = Notices::default();
        assert_eq!(notices.due("s", "t0"), None, "nothing waits");
        notices.wait("s", notice("A server failed"));
        notices.wait("s", notice("A server failed"));
        assert_eq!(notices.due("s", "t0"), None, "that turn had started already");
        notices.wait("s", notice("Retrying"));
        let (due, dropped) = notices.due("s", "t1").expect("due at a new turn");
        assert_eq!(due, vec![notice("A server failed"), notice("Retrying")]);
        assert_eq!(dropped, 0);
        assert_eq!(notices.due("s", "t2"), None, "shown once");
    }

    #[test]
    fn past_the_bound_the_oldest_notices_go_and_the_message_counts_them() {
        let notices = Notices::default();
        for n in 0..MAX_WAITING + 3 {
            notices.wait("s", notice(&format!("n{n}")));
        }
        let (due, dropped) = notices.due("s", "t").expect("due");
        assert_eq!(due.len(), MAX_WAITING);
        assert_eq!(due[0], notice("n3"));
        assert_eq!(dropped, 3);
        assert!(text(&due, dropped).starts_with("[3 earlier notices were left out]"));
    }

    #[test]
    fn commands_without_the_walls_they_were_configured_with_are_a_warning() {
        let all = heron_core::sandbox::Walls {
            no_capabilities: true,
            seccomp: true,
            user_namespace: true,
            mount_namespace: true,
            pid_namespace: true,
            private_proc: true,
            network_namespace: false,
        };
        let bare = heron_core::sandbox::Walls { pid_namespace: false, private_proc: false, ..all };
        let missing =
            Support { landlock: Err("this kernel has no Landlock".to_owned()), walls: bare, inside: false };
        let notice = unconfined(true, &missing).expect("a notice");
        assert_eq!(notice.severity, NoticeSeverity::Warning);
        let description = notice.description.expect("says what");
        assert!(description.starts_with("this kernel has no Landlock."), "{description}");
        assert!(description.contains("Missing: landlock, pidNamespace, privateProc."), "{description}");
        assert_eq!(unconfined(false, &missing), None, "sandbox = \"off\" is the user's own choice");
        let standing = Support { landlock: Ok(6), walls: all, inside: false };
        assert_eq!(
            unconfined(true, &standing),
            None,
            "a missing network namespace is for conformance runs only"
        );
    }

    #[test]
    fn a_notice_is_clipped_and_an_empty_title_is_not_sent_as_one() {
        let long = bounded(Notice {
            severity: NoticeSeverity::Error,
            title: "t".repeat(5000),
            description: Some("d".repeat(50_000)),
        });
        assert!(long.title.len() <= MAX_TITLE);
        assert!(long.description.as_deref().is_some_and(|d| d.len() <= MAX_DESCRIPTION));
        assert_eq!(notice_update(notice("")), None);
    }
}
