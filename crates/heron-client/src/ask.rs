//! Permission questions: what the request is about (title, paths, the diff or the command)
//! is shown first, then only the answers the agent offered, each with a key: `y` allow
//! once, `a` allow always, `n` reject once, `N` (or `r`) reject always, and a number for
//! every option; `v` shows the whole call when the question had to cut any of it (a long
//! command or diff). The answer is a line read from stdin, a terminal or a pipe. Invariants:
//! only an offered option is ever selected; an answer that matches none is asked again, a
//! bounded number of times, then the request is rejected; end of input, Ctrl-C or the
//! agent withdrawing the request end the question at once; questions are asked one at a
//! time.

use std::io::{IsTerminal, Read};

use tokio::sync::{Mutex, mpsc};
use tokio_util::sync::CancellationToken;

use heron_protocol::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    SelectedPermissionOutcome, ToolKind,
};

use super::Approve;
use super::lines::BoundedLines;
use super::screen::{Paint, Screen, Stream};
use super::shown::{clipped, visible};
use super::view::View;

/// How many answers that match no option are taken before the request is rejected.
const MAX_ATTEMPTS: usize = 3;
/// The longest answer line kept.
const MAX_ANSWER: usize = 1024;

/// Lines typed (or piped) on stdin, read by a thread of their own once the first question
/// is asked, so that a question can end (Ctrl-C, the agent withdrawing it) while a read
/// waits. `None` is the end of input.
struct Answers {
    lines: mpsc::Receiver<Option<String>>,
    ended: bool,
}

impl Answers {
    fn start() -> Self {
        let (send, lines) = mpsc::channel(4);
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut split = BoundedLines::new(MAX_ANSWER);
            let mut buffer = [0u8; 1024];
            loop {
                let n = match stdin.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                for line in split.push(&buffer[..n]) {
                    if send.blocking_send(Some(line)).is_err() {
                        return;
                    }
                }
            }
            if let Some(line) = split.finish() {
                let _ = send.blocking_send(Some(line));
            }
            let _ = send.blocking_send(None);
        });
        Self { lines, ended: false }
    }

    /// Forgets lines typed before the question was shown (a terminal only: piped answers
    /// are meant for the questions in turn).
    fn forget_typed_ahead(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            if line.is_none() {
                self.ended = true;
            }
        }
    }

    async fn next(&mut self) -> Option<String> {
        if self.ended {
            return None;
        }
        let line = self.lines.recv().await.flatten();
        self.ended = line.is_none();
        line
    }
}

/// Asks permission questions.
pub struct Asker {
    approve: Approve,
    tty: bool,
    answers: Mutex<Option<Answers>>,
}

/// The key of each option: the first of each kind gets its letter.
fn keys(options: &[PermissionOption]) -> Vec<Option<&'static str>> {
    let mut seen = Vec::new();
    options
        .iter()
        .map(|option| {
            if seen.contains(&option.kind) {
                return None;
            }
            seen.push(option.kind);
            Some(match option.kind {
                PermissionOptionKind::AllowOnce => "y",
                PermissionOptionKind::AllowAlways => "a",
                PermissionOptionKind::RejectOnce => "n",
                PermissionOptionKind::RejectAlways => "N",
            })
        })
        .collect()
}

/// The option an answer picks, if it picks one that was offered.
fn pick(answer: &str, options: &[PermissionOption]) -> Option<usize> {
    let answer = answer.trim();
    if let Ok(n) = answer.parse::<usize>() {
        return (1..=options.len()).contains(&n).then(|| n - 1);
    }
    let kind = match answer {
        "y" | "Y" | "yes" => PermissionOptionKind::AllowOnce,
        "a" | "A" | "always" => PermissionOptionKind::AllowAlways,
        "n" | "no" => PermissionOptionKind::RejectOnce,
        "N" | "r" | "R" | "never" => PermissionOptionKind::RejectAlways,
        _ => return None,
    };
    options.iter().position(|o| o.kind == kind)
}

fn selected(option: &PermissionOption) -> RequestPermissionOutcome {
    RequestPermissionOutcome::Selected(SelectedPermissionOutcome {
        meta: None,
        option_id: option.option_id.clone(),
    })
}

/// Rejects once when the agent offered it; never picks an "always" on the user's behalf.
fn reject(options: &[PermissionOption]) -> RequestPermissionOutcome {
    options
        .iter()
        .find(|o| o.kind == PermissionOptionKind::RejectOnce)
        .map_or(RequestPermissionOutcome::Cancelled, selected)
}

impl Asker {
    /// Answers as `approve` says, asking on stdin for [`Approve::Ask`].
    pub fn new(approve: Approve) -> Self {
        Self { approve, tty: std::io::stdin().is_terminal(), answers: Mutex::new(None) }
    }

    /// Whether questions are put to the user (`--approve ask`), rather than answered by a
    /// flag the user gave.
    pub fn asks(&self) -> bool {
        self.approve == Approve::Ask
    }

    /// The answer to `request`; `cancel` (Ctrl-C) ends the question with `cancelled`.
    pub async fn decide(
        &self,
        view: &View,
        request: &RequestPermissionRequest,
        cancel: &CancellationToken,
    ) -> RequestPermissionOutcome {
        let options = &request.options;
        let find = |kind| {
            options.iter().find(|o| o.kind == kind).map_or(RequestPermissionOutcome::Cancelled, selected)
        };
        match self.approve {
            Approve::All => return find(PermissionOptionKind::AllowOnce),
            Approve::None => return find(PermissionOptionKind::RejectOnce),
            Approve::Ask => {}
        }
        if options.is_empty() {
            return RequestPermissionOutcome::Cancelled;
        }
        // One question at a time, each shown whole before it is answered.
        let mut answers = self.answers.lock().await;
        if cancel.is_cancelled() {
            return RequestPermissionOutcome::Cancelled;
        }
        let answers = answers.get_or_insert_with(Answers::start);
        if self.tty {
            answers.forget_typed_ahead();
        }
        let screen = view.screen();
        let mut asking = Asking { screen, settled: false };
        screen.set_busy(false);
        let (about, whole) = describe(view, request);
        screen.lines(Stream::Err, &about);
        let mut choices = choices(options);
        if whole.is_some() {
            choices.push_str("  [v] view all");
        }
        let mut outcome = reject(options);
        let (mut attempt, mut views) = (0, 0);
        while attempt < MAX_ATTEMPTS {
            screen.prompt(&format!("{choices}: "));
            let line = tokio::select! {
                line = answers.next() => line,
                () = cancel.cancelled() => {
                    screen.answered(Some(""));
                    asking.settled = true;
                    return RequestPermissionOutcome::Cancelled;
                }
            };
            screen.answered(if self.tty { None } else { Some(line.as_deref().unwrap_or("")) });
            let Some(line) = line else {
                screen.line(Stream::Err, Paint::Plain, "heron: no more input; rejected");
                break;
            };
            if let Some(index) = pick(&line, options) {
                outcome = selected(&options[index]);
                break;
            }
            if let Some(whole) = whole.as_ref().filter(|_| line.trim() == "v" && views < MAX_VIEWS) {
                views += 1;
                screen.lines(Stream::Err, whole);
                continue;
            }
            attempt += 1;
            if attempt < MAX_ATTEMPTS {
                screen.line(
                    Stream::Err,
                    Paint::Plain,
                    &format!("`{}` is not one of the answers offered", line.trim()),
                );
            } else {
                screen.line(Stream::Err, Paint::Plain, "heron: no answer offered was chosen; rejected");
            }
        }
        asking.settled = true;
        outcome
    }
}

/// Puts the screen back when a question ends, also when the agent withdraws it (its
/// request is cancelled, so this future is dropped mid-question).
struct Asking<'a> {
    screen: &'a Screen,
    settled: bool,
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.screen.answered(Some(""));
            self.screen.line(Stream::Err, Paint::Plain, "heron: the agent withdrew the question");
        }
        self.screen.set_busy(true);
    }
}

/// `[y] Allow once  [n] Reject  (or 1-2)`.
fn choices(options: &[PermissionOption]) -> String {
    let listed: Vec<String> = options
        .iter()
        .zip(keys(options))
        .enumerate()
        .map(|(i, (option, key))| format!("[{}] {}", key.unwrap_or(&(i + 1).to_string()), option.name))
        .collect();
    format!("{}  (or 1-{})", listed.join("  "), options.len())
}

/// Characters of a command a question shows before it says how many more there are.
const MAX_COMMAND_SHOWN: usize = 2000;
/// How many times one question shows the whole call on `v`.
const MAX_VIEWS: usize = 2;

/// Lines of a question, each with its paint.
type Lines = Vec<(Paint, String)>;

/// What the question is about: title, kind, paths, the command and its folder, the diff;
/// and, when any of that was cut to fit, the whole of it for `v`.
fn describe(view: &View, request: &RequestPermissionRequest) -> (Lines, Option<Lines>) {
    let (info, diffs) = view.call_for_question(&request.tool_call);
    let title = info.title.clone().unwrap_or_else(|| request.tool_call.tool_call_id.0.clone());
    let kind = info.kind.map(|k| format!(" ({k})")).unwrap_or_default();
    let mut lines = vec![(Paint::Bold, format!("Permission asked: {}{kind}", visible(&title)))];
    let mut whole = Vec::new();
    let mut cut = Vec::new();
    if info.kind == Some(ToolKind::Execute) {
        let command = visible(info.command.as_deref().unwrap_or(&title));
        let (shown, left_out) = clipped(&command, MAX_COMMAND_SHOWN);
        lines.push((Paint::Cyan, format!("  $ {shown}")));
        if left_out > 0 {
            cut.push(format!("{left_out} more characters of the command"));
            whole.push((Paint::Cyan, format!("  $ {command}")));
        }
        if let Some(cwd) = &info.command_cwd {
            lines.push((Paint::Dim, format!("  in {}", visible(cwd))));
        }
    }
    for path in &info.locations {
        lines.push((Paint::Dim, format!("  at {}", visible(path))));
    }
    lines.extend(diffs);
    let (full_diffs, diffs_cut) = info.full_diffs();
    if diffs_cut {
        cut.push("the rest of the diff".to_owned());
        whole.extend(full_diffs);
    }
    if cut.is_empty() {
        return (lines, None);
    }
    let note = format!("  ! not shown above: {}; answer `v` to see all of it", cut.join(" and "));
    lines.push((Paint::Bold, note));
    (lines, Some(whole))
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_protocol::PermissionOptionId;

    fn option(id: &str, kind: PermissionOptionKind) -> PermissionOption {
        PermissionOption {
            kind,
            meta: None,
            name: id.to_owned(),
            option_id: PermissionOptionId(id.to_owned()),
        }
    }

    #[test]
    fn only_offered_options_are_picked() {
        let options =
            [option("ok", PermissionOptionKind::AllowOnce), option("no", PermissionOptionKind::RejectOnce)];
        assert_eq!(pick("y", &options), Some(0));
        assert_eq!(pick(" n \n", &options), Some(1));
        assert_eq!(pick("2", &options), Some(1));
        assert_eq!(pick("a", &options), None, "allow always was not offered");
        assert_eq!(pick("N", &options), None);
        assert_eq!(pick("3", &options), None);
        assert_eq!(pick("0", &options), None);
        assert_eq!(pick("", &options), None);
        assert_eq!(choices(&options), "[y] ok  [n] no  (or 1-2)");
    }

    #[test]
    fn a_second_option_of_a_kind_is_reached_by_its_number() {
        let options =
            [option("a", PermissionOptionKind::AllowOnce), option("b", PermissionOptionKind::AllowOnce)];
        assert_eq!(choices(&options), "[y] a  [2] b  (or 1-2)");
        assert_eq!(pick("2", &options), Some(1));
        assert!(matches!(reject(&options), RequestPermissionOutcome::Cancelled));
    }
}
