//! The terminal `heron run` writes to: stdout carries the turn (the agent's text, tool
//! calls, plans), stderr everything else (thoughts, questions, usage, the agent's own log).
//! Invariants: a line on one stream never continues text left open on the other (the open
//! stream is ended with a newline first); escape codes and the spinner are written only to
//! a terminal, and never with `NO_COLOR` or `TERM=dumb`; text from the agent never carries
//! control characters of its own, so it cannot move the cursor, recolour or rewrite what
//! was shown. Once stdout's reader has gone (a closed pipe), nothing more is written to it
//! and the run is told, so that it can stop the turn.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// Where a piece of output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The turn itself.
    Out,
    /// Everything around it.
    Err,
}

/// How a piece of output is coloured (on a colour terminal only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paint {
    /// As it is.
    Plain,
    /// Thoughts, context, what is secondary.
    Dim,
    /// Tool call titles and questions.
    Bold,
    /// Success, added lines.
    Green,
    /// Failure, removed lines.
    Red,
    /// Hunk headers, commands.
    Cyan,
}

impl Paint {
    fn code(self) -> &'static str {
        match self {
            Paint::Plain => "",
            Paint::Dim => "\x1b[2m",
            Paint::Bold => "\x1b[1m",
            Paint::Green => "\x1b[32m",
            Paint::Red => "\x1b[31m",
            Paint::Cyan => "\x1b[36m",
        }
    }
}

/// How often the spinner turns, and how long output must pause before it shows.
const SPIN_EVERY: Duration = Duration::from_millis(120);
const SPIN_AFTER: Duration = Duration::from_millis(400);
const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
/// What the spinner line says; erased with as many spaces, so no escape code is needed.
const SPIN_LABEL: &str = " working (Ctrl-C to cancel)";

/// The shared screen; cheap to clone.
#[derive(Clone)]
pub struct Screen {
    state: Arc<Mutex<State>>,
    colour_out: bool,
    colour_err: bool,
    spinner: bool,
    /// Fired when a write to stdout finds its reader gone.
    out_closed: CancellationToken,
}

struct State {
    /// The stream whose last line is not finished yet.
    open: Option<Stream>,
    /// Whether the turn is running (the spinner may show).
    busy: bool,
    /// Whether the run is over (the spinner never shows again).
    done: bool,
    /// Whether a spinner frame is on stderr now.
    spun: bool,
    frame: usize,
    last_output: Instant,
}

impl Screen {
    /// A screen for this process: colour where the stream is a terminal, a spinner where
    /// stderr is one and `spinner` is asked for; neither when `NO_COLOR` is set (not empty)
    /// or `TERM` is `dumb`. The spinner goes with the colour because both rewrite the
    /// screen with codes of their own: whoever asks for plain output (a log of the session,
    /// a screen reader, an editor's terminal pane) gets none of them.
    pub fn for_process(spinner: bool) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let dumb = std::env::var_os("TERM").is_some_and(|v| v == "dumb");
        let plain = no_color || dumb;
        let err_tty = std::io::stderr().is_terminal();
        Self::new(std::io::stdout().is_terminal() && !plain, err_tty && !plain, err_tty && spinner && !plain)
    }

    fn new(colour_out: bool, colour_err: bool, spinner: bool) -> Self {
        let state = State {
            open: None,
            busy: false,
            done: false,
            spun: false,
            frame: 0,
            last_output: Instant::now(),
        };
        Self {
            state: Arc::new(Mutex::new(state)),
            colour_out,
            colour_err,
            spinner,
            out_closed: CancellationToken::new(),
        }
    }

    /// Fired once stdout's reader has gone (`heron run ... | head -3`).
    pub fn out_closed(&self) -> CancellationToken {
        self.out_closed.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Streams `text` (the agent's), leaving its last line open.
    pub fn stream(&self, stream: Stream, paint: Paint, text: &str) {
        let text = clean(text);
        if text.is_empty() {
            return;
        }
        let mut state = self.lock();
        self.settle(&mut state, Some(stream));
        self.write(stream, paint, &text);
        state.open = (!text.ends_with('\n')).then_some(stream);
    }

    /// Writes whole lines: the open stream is ended first.
    pub fn lines(&self, stream: Stream, lines: &[(Paint, String)]) {
        let mut state = self.lock();
        self.settle(&mut state, None);
        for (paint, text) in lines {
            let mut text = clean(text);
            text.push('\n');
            self.write(stream, *paint, &text);
        }
        state.open = None;
    }

    /// Writes one line (see [`Screen::lines`]).
    pub fn line(&self, stream: Stream, paint: Paint, text: &str) {
        self.lines(stream, &[(paint, text.to_owned())]);
    }

    /// Writes a question and leaves the cursor after it, on stderr.
    pub fn prompt(&self, text: &str) {
        let mut state = self.lock();
        self.settle(&mut state, None);
        self.write(Stream::Err, Paint::Bold, &clean(text));
        state.open = Some(Stream::Err);
    }

    /// Ends the question's line once it is answered. A terminal echoed the answer and its
    /// newline; piped input echoes nothing, so the answer read is shown (`echo`).
    pub fn answered(&self, echo: Option<&str>) {
        let mut state = self.lock();
        if let Some(answer) = echo {
            let mut text = clean(answer);
            text.push('\n');
            self.write(Stream::Err, Paint::Plain, &text);
        }
        state.open = None;
    }

    /// Whether the turn is running; the spinner shows only then.
    pub fn set_busy(&self, busy: bool) {
        let mut state = self.lock();
        // Once the turn is over, nothing turns the spinner on again.
        state.busy = busy && !state.done;
        if !busy {
            self.erase_spinner(&mut state);
        }
    }

    /// Ends whatever line is open and takes the spinner away.
    pub fn finish(&self) {
        let mut state = self.lock();
        state.busy = false;
        state.done = true;
        self.settle(&mut state, None);
        state.open = None;
    }

    /// Turns the spinner until the process ends, when there is one.
    pub fn spin(&self) {
        if !self.spinner {
            return;
        }
        let screen = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SPIN_EVERY);
            loop {
                tick.tick().await;
                screen.turn_spinner();
            }
        });
    }

    fn turn_spinner(&self) {
        let mut state = self.lock();
        if !state.busy || state.open.is_some() || state.last_output.elapsed() < SPIN_AFTER {
            return;
        }
        state.frame = (state.frame + 1) % FRAMES.len();
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{}{SPIN_LABEL}", FRAMES[state.frame]);
        let _ = err.flush();
        state.spun = true;
    }

    /// Makes room for output to `next` (`None`: a whole line): takes the spinner away and
    /// ends a line left open on another stream, or on any stream when a line comes.
    fn settle(&self, state: &mut State, next: Option<Stream>) {
        self.erase_spinner(state);
        if let Some(open) = state.open
            && next != Some(open)
        {
            self.write(open, Paint::Plain, "\n");
            state.open = None;
        }
        state.last_output = Instant::now();
    }

    fn erase_spinner(&self, state: &mut State) {
        if state.spun {
            let blank = " ".repeat(SPIN_LABEL.len() + 1);
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{blank}\r");
            let _ = err.flush();
            state.spun = false;
        }
    }

    fn write(&self, stream: Stream, paint: Paint, text: &str) {
        let colour = match stream {
            Stream::Out => self.colour_out,
            Stream::Err => self.colour_err,
        } && paint != Paint::Plain;
        let painted;
        let text = if colour {
            // The reset goes before a final newline, so a colour never leaks into the next line.
            let (body, end) = text.strip_suffix('\n').map_or((text, ""), |body| (body, "\n"));
            painted = format!("{}{body}\x1b[0m{end}", paint.code());
            painted.as_str()
        } else {
            text
        };
        match stream {
            Stream::Out if self.out_closed.is_cancelled() => {}
            Stream::Out => {
                // A reader that went away stops the run (the caller watches `out_closed`);
                // other failures (a full disk behind a redirect) lose output, nothing more.
                if let Err(err) = write_flushed(&mut std::io::stdout().lock(), text)
                    && err.kind() == std::io::ErrorKind::BrokenPipe
                {
                    self.out_closed.cancel();
                }
            }
            Stream::Err => {
                let _ = write_flushed(&mut std::io::stderr().lock(), text);
            }
        }
    }
}

fn write_flushed(out: &mut impl Write, text: &str) -> std::io::Result<()> {
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// `text` without control characters (escape sequences, carriage returns, C1 codes) and
/// without the bidirectional overrides that make a line read differently from what it is;
/// newlines and tabs stay.
pub fn clean(text: &str) -> String {
    text.chars()
        .filter(|&c| {
            c == '\n'
                || c == '\t'
                || !(c.is_control()
                    || ('\u{202a}'..='\u{202e}').contains(&c)
                    || ('\u{2066}'..='\u{2069}').contains(&c))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_drops_escapes_and_overrides_but_keeps_lines() {
        assert_eq!(clean("a\x1b[31mred\r\n\tb\u{202e}c\u{9b}"), "a[31mred\n\tbc");
    }
}
