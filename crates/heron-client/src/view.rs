//! What the user sees of the turn: session updates rendered for people (or passed through
//! as JSON lines with `--json`), and what is known of each tool call, so that a permission
//! question can show the diff or command it is about. Invariants: memory is bounded (a
//! fixed number of tool calls, each diff text capped); a diff is shown once, before the
//! question when there is one; `--json` prints exactly `{"update": ...}` per update.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};

use heron_protocol::{
    ContentBlock, Diff, PermissionOptionKind, Plan, PlanEntryStatus, RequestPermissionOutcome,
    RequestPermissionRequest, SessionUpdate, ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate,
    ToolKind,
};

use super::screen::{Paint, Screen, Stream};
use super::shown::visible;
use super::terminals::Terminals;

/// Tool calls remembered; the oldest is forgotten first.
const MAX_CALLS: usize = 256;
/// The largest diff side kept and diffed; past it, only its size is shown.
const MAX_DIFF_TEXT: usize = 2 * 1024 * 1024;
/// Lines of a diff shown, and how long computing one may take.
const MAX_DIFF_LINES: usize = 80;
const DIFF_TIMEOUT: Duration = Duration::from_millis(300);
/// Lines of a tool's text output shown.
const MAX_TEXT_LINES: usize = 12;
/// Characters of a command (and its folder) kept for the question that asks about it.
const MAX_COMMAND_KEPT: usize = 64 * 1024;

/// What is known of one tool call.
#[derive(Debug, Default, Clone)]
pub struct CallInfo {
    pub title: Option<String>,
    pub kind: Option<ToolKind>,
    pub locations: Vec<String>,
    pub diffs: Vec<Diff>,
    /// For `execute`: the command and the folder it runs in, from `rawInput`.
    pub command: Option<String>,
    pub command_cwd: Option<String>,
    /// The terminal the call runs in, when it embeds one.
    terminal: Option<String>,
    /// Diffs already shown, by fingerprint.
    shown: HashSet<u64>,
    /// Text contents already shown, by fingerprint: an update that repeats the call's
    /// content (a pending call, then its update) shows it once.
    shown_texts: HashSet<u64>,
}

impl CallInfo {
    fn merge(&mut self, update: &ToolCallUpdate) {
        if let Some(title) = &update.title {
            self.title = Some(title.clone());
        }
        if let Some(kind) = update.kind {
            self.kind = Some(kind);
        }
        if let Some(locations) = &update.locations {
            self.locations = locations.iter().take(8).map(|l| l.path.clone()).collect();
        }
        if let Some(content) = &update.content {
            self.take_diffs(content);
            if let Some(id) = content.iter().find_map(|c| match c {
                ToolCallContent::Terminal(t) => Some(t.terminal_id.0.clone()),
                _ => None,
            }) {
                self.terminal = Some(id);
            }
        }
        if let Some(raw) = &update.raw_input {
            self.take_command(raw);
        }
    }

    fn take_diffs(&mut self, content: &[ToolCallContent]) {
        let diffs: Vec<Diff> = content
            .iter()
            .filter_map(|c| match c {
                ToolCallContent::Diff(diff) => Some(capped(diff)),
                _ => None,
            })
            .take(8)
            .collect();
        if !diffs.is_empty() {
            self.diffs = diffs;
        }
    }

    fn take_command(&mut self, raw: &Value) {
        let command = match &raw["command"] {
            Value::String(line) => Some(line.clone()),
            Value::Array(words) => {
                Some(words.iter().map(|w| w.as_str().unwrap_or("?")).collect::<Vec<_>>().join(" "))
            }
            _ => None,
        };
        if let Some(command) = command {
            self.command = Some(command.chars().take(MAX_COMMAND_KEPT).collect());
        }
        if let Some(cwd) = raw["cwd"].as_str() {
            self.command_cwd = Some(cwd.chars().take(MAX_COMMAND_KEPT).collect());
        }
    }

    /// Every diff of the call rendered whole (for a question's "view all"), and whether any
    /// is longer than a question shows.
    pub fn full_diffs(&self) -> (Vec<(Paint, String)>, bool) {
        let mut cut = false;
        let mut lines = Vec::new();
        for diff in &self.diffs {
            let whole = render_diff(diff, usize::MAX);
            cut |= whole.len() > MAX_DIFF_LINES;
            lines.extend(whole);
        }
        (lines, cut)
    }

    /// The text contents of `update` not shown yet for this call; marks them shown.
    fn unshown_texts(&mut self, update: &ToolCallUpdate) -> Vec<String> {
        use std::hash::{Hash, Hasher};
        let mut texts = Vec::new();
        for content in update.content.iter().flatten() {
            // A terminal's output is shown when its call ends; diffs are shown apart.
            if let ToolCallContent::Content(c) = content
                && let ContentBlock::Text(text) = &c.content
            {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                text.text.hash(&mut hasher);
                if self.shown_texts.insert(hasher.finish()) {
                    texts.push(text.text.clone());
                }
            }
        }
        texts
    }

    /// The diffs not shown yet, rendered; marks them shown.
    pub fn unshown_diffs(&mut self) -> Vec<(Paint, String)> {
        let mut lines = Vec::new();
        for diff in &self.diffs {
            if self.shown.insert(fingerprint(diff)) {
                lines.extend(render_diff(diff, MAX_DIFF_LINES));
            }
        }
        lines
    }
}

fn as_update(call: &ToolCall) -> ToolCallUpdate {
    ToolCallUpdate {
        content: Some(call.content.clone()),
        kind: call.kind,
        locations: Some(call.locations.clone()),
        meta: None,
        name: call.name.clone(),
        raw_input: call.raw_input.clone(),
        raw_output: None,
        status: call.status,
        title: Some(call.title.clone()),
        tool_call_id: call.tool_call_id.clone(),
    }
}

/// A diff whose sides are too large to keep is kept as a note of their size.
fn capped(diff: &Diff) -> Diff {
    let too_large = |text: &str| text.len() > MAX_DIFF_TEXT;
    if too_large(&diff.new_text) || diff.old_text.as_deref().is_some_and(too_large) {
        let size = diff.new_text.len();
        return Diff {
            meta: None,
            new_text: format!("({size} bytes: too large to show)\n"),
            old_text: diff.old_text.as_ref().map(|_| "(too large to show)\n".to_owned()),
            path: diff.path.clone(),
        };
    }
    diff.clone()
}

fn fingerprint(diff: &Diff) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (&diff.path, &diff.old_text, &diff.new_text).hash(&mut hasher);
    hasher.finish()
}

/// `text` without a first line that is `command` (or `$ command`) when the title already
/// showed it: Heron repeats the command in the pending card and the finished one.
fn without_command<'a>(text: &'a str, command: &str) -> &'a str {
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    if first == command || first.strip_prefix("$ ") == Some(command) { rest } else { text }
}

/// A unified diff of `diff`, coloured by line, clipped to `max_lines` (then a line says how
/// many more there are), each line [`visible`].
pub fn render_diff(diff: &Diff, max_lines: usize) -> Vec<(Paint, String)> {
    let old = diff.old_text.as_deref().unwrap_or("");
    let text_diff = similar::TextDiff::configure().timeout(DIFF_TIMEOUT).diff_lines(old, &diff.new_text);
    let old_name = if diff.old_text.is_some() { diff.path.as_str() } else { "/dev/null" };
    let body = text_diff.unified_diff().context_radius(3).header(old_name, &diff.path).to_string();
    let all: Vec<&str> = body.lines().collect();
    let mut lines: Vec<(Paint, String)> = all
        .iter()
        .take(max_lines)
        .map(|line| {
            let paint = if line.starts_with("+++") || line.starts_with("---") {
                Paint::Bold
            } else if line.starts_with('+') {
                Paint::Green
            } else if line.starts_with('-') {
                Paint::Red
            } else if line.starts_with("@@") {
                Paint::Cyan
            } else {
                Paint::Plain
            };
            (paint, format!("  {}", visible(line)))
        })
        .collect();
    if all.len() > max_lines {
        lines.push((Paint::Dim, format!("  … {} more diff lines", all.len() - max_lines)));
    }
    if all.is_empty() {
        lines.push((Paint::Dim, format!("  {} is unchanged", diff.path)));
    }
    lines
}

/// The tool calls of the turn, bounded.
#[derive(Default)]
struct Calls {
    by_id: HashMap<String, CallInfo>,
    order: VecDeque<String>,
}

impl Calls {
    fn entry(&mut self, id: &str) -> &mut CallInfo {
        if !self.by_id.contains_key(id) {
            if self.order.len() >= MAX_CALLS
                && let Some(oldest) = self.order.pop_front()
            {
                self.by_id.remove(&oldest);
            }
            self.order.push_back(id.to_owned());
        }
        self.by_id.entry(id.to_owned()).or_default()
    }
}

/// Renders updates and remembers tool calls.
pub struct View {
    screen: Screen,
    json: bool,
    calls: Mutex<Calls>,
    /// The terminals the agent runs commands in, whose output a finished call shows.
    terminals: Arc<Terminals>,
}

impl View {
    /// A view writing to `screen`, as JSON lines when `json`.
    pub fn new(screen: Screen, json: bool, terminals: Arc<Terminals>) -> Self {
        Self { screen, json, calls: Mutex::default(), terminals }
    }

    /// The screen it writes to.
    pub fn screen(&self) -> &Screen {
        &self.screen
    }

    /// What is known of call `id`, merged with what a permission request says of it; the
    /// diffs it carries are marked shown, since the question shows them.
    pub fn call_for_question(&self, update: &ToolCallUpdate) -> (CallInfo, Vec<(Paint, String)>) {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        let info = calls.entry(&update.tool_call_id.0);
        info.merge(update);
        let diffs = info.unshown_diffs();
        (info.clone(), diffs)
    }

    /// Says on stdout how a permission question was answered: the question and its diff
    /// go to stderr, and the record of the turn on stdout must still say what was allowed.
    pub fn permission_answered(
        &self,
        request: &RequestPermissionRequest,
        outcome: &RequestPermissionOutcome,
    ) {
        if self.json {
            return;
        }
        let title = {
            let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
            calls.by_id.get(&request.tool_call.tool_call_id.0).and_then(|info| info.title.clone())
        }
        .or_else(|| request.tool_call.title.clone())
        .unwrap_or_else(|| request.tool_call.tool_call_id.0.clone());
        let chosen = match outcome {
            RequestPermissionOutcome::Selected(selected) => {
                request.options.iter().find(|option| option.option_id == selected.option_id)
            }
            RequestPermissionOutcome::Cancelled => None,
        };
        let (paint, said) = match chosen {
            Some(option)
                if matches!(
                    option.kind,
                    PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways
                ) =>
            {
                (Paint::Green, format!("approved ({})", option.name))
            }
            Some(option) => (Paint::Red, format!("rejected ({})", option.name)),
            None => (Paint::Red, "not answered".to_owned()),
        };
        self.screen.line(Stream::Out, paint, &format!("  {said}: {}", visible(&title)));
    }

    /// Shows one session update.
    pub fn update(&self, update: SessionUpdate) {
        if self.json {
            self.screen.line(Stream::Out, Paint::Plain, &json!({ "update": update }).to_string());
            return;
        }
        match update {
            SessionUpdate::AgentMessageChunk(chunk) => {
                if let ContentBlock::Text(text) = chunk.content {
                    self.screen.stream(Stream::Out, Paint::Plain, &text.text);
                }
            }
            SessionUpdate::AgentThoughtChunk(chunk) => {
                if let ContentBlock::Text(text) = chunk.content {
                    self.screen.stream(Stream::Err, Paint::Dim, &text.text);
                }
            }
            SessionUpdate::UserMessageChunk(chunk) => self.user_message(&chunk.content),
            SessionUpdate::ToolCall(call) => {
                self.screen.line(Stream::Out, Paint::Bold, &format!("» {}", call.title));
                self.tool_call_update(&as_update(&call));
            }
            SessionUpdate::ToolCallUpdate(update) => self.tool_call_update(&update),
            SessionUpdate::Plan(plan) => self.plan(&plan),
            SessionUpdate::UsageUpdate(usage) => {
                let cost =
                    usage.cost.map(|c| format!(", {:.4} {}", c.amount, c.currency)).unwrap_or_default();
                let text = format!("[context {} / {} tokens{cost}]", usage.used, usage.size);
                self.screen.line(Stream::Err, Paint::Dim, &text);
            }
            _ => {}
        }
    }

    /// A user's message, quoted with `> ` (and dimmed on a terminal) so that it reads apart
    /// from the answers: what a load replays, and prompts the user did not type here
    /// (inbox items, steers). What is not text is named, not shown.
    fn user_message(&self, content: &ContentBlock) {
        let text = match content {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::ResourceLink(link) => format!("[{}]", link.uri),
            ContentBlock::Resource(_) => "[an attached file]".to_owned(),
            ContentBlock::Image(_) => "[an image]".to_owned(),
            ContentBlock::Audio(_) => "[audio]".to_owned(),
        };
        let lines: Vec<(Paint, String)> =
            text.lines().map(|line| (Paint::Dim, format!("> {line}"))).collect();
        if !lines.is_empty() {
            self.screen.lines(Stream::Out, &lines);
        }
    }

    /// Marks where the replay of a loaded session ends and the new turn begins, quoting the
    /// new prompt (which the agent does not echo) the way the replay quoted earlier ones.
    pub fn new_turn(&self, prompt: &str) {
        if self.json {
            return;
        }
        let mut lines = vec![(Paint::Dim, "──── new turn ────".to_owned())];
        lines.extend(prompt.lines().map(|line| (Paint::Dim, format!("> {line}"))));
        self.screen.lines(Stream::Out, &lines);
    }

    fn tool_call_update(&self, update: &ToolCallUpdate) {
        let mut lines = Vec::new();
        let ended = matches!(update.status, Some(ToolCallStatus::Completed | ToolCallStatus::Failed));
        let (terminal, texts, command_in_title) = {
            let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
            let info = calls.entry(&update.tool_call_id.0);
            info.merge(update);
            // A pending call's diff waits for its question; once it runs, it is shown.
            if update.status.is_some_and(|s| s != ToolCallStatus::Pending) {
                lines.extend(info.unshown_diffs());
            }
            let texts = info.unshown_texts(update);
            // The title showed the command whole (`Run cargo test`): its text need not.
            let command_in_title = info.command.clone().filter(|c| {
                !c.contains('\n') && info.title.as_deref().is_some_and(|t| t.contains(c.as_str()))
            });
            (if ended { info.terminal.take() } else { None }, texts, command_in_title)
        };
        let texts: Vec<&str> = texts
            .iter()
            .map(|text| {
                command_in_title.as_deref().map_or(text.as_str(), |command| without_command(text, command))
            })
            .filter(|text| !text.trim().is_empty())
            .collect();
        // A command run in one of our terminals: its output is ours to show, unless the
        // agent's own account of the call already holds it (Heron's does).
        if let Some(output) = terminal.and_then(|id| self.terminals.tail(&id))
            && !texts.iter().any(|text| text.contains(output.trim()))
        {
            lines.extend(output.lines().map(|l| (Paint::Plain, format!("  {l}"))));
        }
        for text in texts {
            let all: Vec<&str> = text.lines().collect();
            lines.extend(all.iter().take(MAX_TEXT_LINES).map(|l| (Paint::Plain, format!("  {l}"))));
            if all.len() > MAX_TEXT_LINES {
                lines.push((Paint::Dim, format!("  … {} more lines", all.len() - MAX_TEXT_LINES)));
            }
        }
        match update.status {
            Some(ToolCallStatus::Completed) => lines.push((Paint::Green, "  [completed]".to_owned())),
            Some(ToolCallStatus::Failed) => lines.push((Paint::Red, "  [failed]".to_owned())),
            _ => {}
        }
        if !lines.is_empty() {
            self.screen.lines(Stream::Out, &lines);
        }
    }

    fn plan(&self, plan: &Plan) {
        let mut lines = vec![(Paint::Bold, "Plan:".to_owned())];
        for entry in &plan.entries {
            let status = entry.status.to_string().replace('_', " ");
            let paint =
                if matches!(entry.status, PlanEntryStatus::Completed) { Paint::Dim } else { Paint::Plain };
            lines.push((paint, format!("  [{status}] {}", entry.content)));
        }
        self.screen.lines(Stream::Out, &lines);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_the_title_showed_is_not_repeated() {
        assert_eq!(without_command("echo hi\n(in /ws)", "echo hi"), "(in /ws)");
        assert_eq!(without_command("$ echo hi\nExit code: 0", "echo hi"), "Exit code: 0");
        assert_eq!(without_command("$ echo hi", "echo hi"), "");
        assert_eq!(without_command("Exit code: 0\n$ echo hi", "echo hi"), "Exit code: 0\n$ echo hi");
    }

    #[test]
    fn a_new_file_diffs_against_dev_null_and_long_diffs_are_clipped() {
        let diff = Diff { meta: None, new_text: "x\n".repeat(200), old_text: None, path: "/ws/a.txt".into() };
        let lines = render_diff(&diff, MAX_DIFF_LINES);
        assert_eq!(lines[0].1, "  --- /dev/null");
        assert_eq!(lines[1].1, "  +++ /ws/a.txt");
        assert_eq!(lines.len(), MAX_DIFF_LINES + 1);
        assert!(lines[MAX_DIFF_LINES].1.contains("more diff lines"));
    }
}
