//! A push decoder for server-sent events: feed it bytes as they arrive and it hands back
//! each complete event. Where the bytes are split never changes the result, and one event
//! never buffers more than the decoder's limit.
//!
//! Model endpoints read [`Payload`]s: `data` fields (several lines join with `\n`), the
//! `event` name (only `error` matters), a bare `error` field (llama.cpp sends `error: {...}`
//! at HTTP 200 when generation fails). MCP's legacy SSE transport reads named [`Event`]s
//! (`endpoint`, `message`). Both skip comments (`:` lines, used as keep-alives) and end an
//! event at a blank line. Lines end with `\n` or `\r\n`; other fields are ignored.

/// The most bytes one event may buffer by default; a stream past it is malformed, not a
/// bigger model.
const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// The event stream grew an event past the decoder's limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EventTooLarge;

/// One complete event, as a model stream reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Payload {
    /// A `data` payload: a JSON chunk or `[DONE]`.
    Data(String),
    /// The server says the stream failed: the text of an `event: error` event's data or of
    /// a bare `error` field.
    Error(String),
}

/// One complete event with data, and its name (`message` when it has none, as the SSE
/// standard says).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// The `event` field.
    pub(crate) name: String,
    /// The `data` fields, joined with `\n`.
    pub(crate) data: String,
}

/// Decodes server-sent events from a byte stream.
#[derive(Debug)]
pub(crate) struct SseDecoder {
    /// The bytes of the current line, without its end.
    line: Vec<u8>,
    /// The `event` name of the current event, if it has one.
    name: String,
    /// The data of the current event so far.
    data: String,
    /// Whether the current event has a `data` field (an empty one counts).
    has_data: bool,
    /// Whether the current event is named `error` or carries a bare `error` field.
    is_error: bool,
    /// The most bytes one event may buffer.
    limit: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::with_limit(MAX_EVENT_BYTES)
    }
}

/// What the end of an event hands on, before it is shaped as a [`Payload`] or an [`Event`].
struct Ended {
    name: String,
    data: String,
    has_data: bool,
    is_error: bool,
}

impl SseDecoder {
    /// A decoder whose events may buffer at most `limit` bytes.
    pub(crate) fn with_limit(limit: usize) -> Self {
        Self {
            line: Vec::new(),
            name: String::new(),
            data: String::new(),
            has_data: false,
            is_error: false,
            limit,
        }
    }

    /// Feeds `bytes`, pushing the data of each event they complete onto `out`.
    pub(crate) fn push(&mut self, bytes: &[u8], out: &mut Vec<Payload>) -> Result<(), EventTooLarge> {
        self.feed(bytes, &mut |ended| out.extend(payload(ended)))
    }

    /// Ends the stream: an event cut off without its blank line still counts, because
    /// some servers close right after their last `data` line.
    pub(crate) fn finish(&mut self, out: &mut Vec<Payload>) {
        self.close(&mut |ended| out.extend(payload(ended)));
    }

    /// Feeds `bytes`, pushing each named event with data they complete onto `out`.
    pub(crate) fn push_events(&mut self, bytes: &[u8], out: &mut Vec<Event>) -> Result<(), EventTooLarge> {
        self.feed(bytes, &mut |ended| out.extend(event(ended)))
    }

    fn feed(&mut self, bytes: &[u8], emit: &mut dyn FnMut(Ended)) -> Result<(), EventTooLarge> {
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..end]);
            self.end_line(emit);
            if self.data.len() > self.limit {
                return Err(EventTooLarge);
            }
            rest = &rest[end + 1..];
        }
        self.line.extend_from_slice(rest);
        if self.line.len() + self.data.len() > self.limit {
            return Err(EventTooLarge);
        }
        Ok(())
    }

    fn close(&mut self, emit: &mut dyn FnMut(Ended)) {
        if !self.line.is_empty() {
            self.end_line(emit);
        }
        self.dispatch(emit);
    }

    fn end_line(&mut self, emit: &mut dyn FnMut(Ended)) {
        let mut line = std::mem::take(&mut self.line);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.is_empty() {
            self.dispatch(emit);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        if field == b"event" {
            self.is_error = value == b"error";
            self.name = String::from_utf8_lossy(value).into_owned();
        } else if field == b"error" {
            // A bare `error` field is an error event of its own, whatever the event name.
            self.is_error = true;
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(&String::from_utf8_lossy(value));
            self.has_data = true;
        } else if field == b"data" {
            if self.has_data {
                self.data.push('\n');
            }
            // Lines are whole here, so a multi-byte character is never split across reads.
            self.data.push_str(&String::from_utf8_lossy(value));
            self.has_data = true;
        }
        // The line buffer keeps its capacity for the next line.
        self.line = line;
        self.line.clear();
    }

    fn dispatch(&mut self, emit: &mut dyn FnMut(Ended)) {
        emit(Ended {
            name: std::mem::take(&mut self.name),
            data: std::mem::take(&mut self.data),
            has_data: self.has_data,
            is_error: self.is_error,
        });
        self.has_data = false;
        self.is_error = false;
    }
}

fn payload(ended: Ended) -> Option<Payload> {
    if ended.is_error {
        Some(Payload::Error(ended.data))
    } else if ended.has_data {
        Some(Payload::Data(ended.data))
    } else {
        None
    }
}

fn event(ended: Ended) -> Option<Event> {
    let name = if ended.name.is_empty() { "message".to_owned() } else { ended.name };
    ended.has_data.then_some(Event { name, data: ended.data })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_pieces(bytes: &[u8], piece: usize) -> Vec<String> {
        decode_payloads(bytes, piece)
            .into_iter()
            .map(|payload| match payload {
                Payload::Data(data) => data,
                Payload::Error(error) => format!("error: {error}"),
            })
            .collect()
    }

    fn decode_payloads(bytes: &[u8], piece: usize) -> Vec<Payload> {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        for chunk in bytes.chunks(piece.max(1)) {
            decoder.push(chunk, &mut out).expect("small events fit");
        }
        decoder.finish(&mut out);
        out
    }

    #[test]
    fn events_end_at_blank_lines_and_comments_are_skipped() {
        let stream = b": keep-alive\n\ndata: {\"a\":1}\n\ndata:[DONE]\r\n\r\n";
        assert_eq!(decode_in_pieces(stream, 1000), ["{\"a\":1}", "[DONE]"]);
    }

    #[test]
    fn multi_line_data_joins_with_newlines() {
        assert_eq!(decode_in_pieces(b"data: a\ndata: b\nevent: x\n\n", 1000), ["a\nb"]);
    }

    #[test]
    fn split_points_never_change_the_events() {
        let stream = "data: héllo wörld\r\n\r\n: c\n\ndata: second\n\ndata: cut off".as_bytes();
        let whole = decode_in_pieces(stream, stream.len());
        assert_eq!(whole, ["héllo wörld", "second", "cut off"]);
        for piece in 1..stream.len() {
            assert_eq!(decode_in_pieces(stream, piece), whole, "pieces of {piece}");
        }
    }

    #[test]
    fn error_events_and_bare_error_fields_are_errors() {
        let stream = b"event: error\r\ndata: {\"message\":\"boom\"}\r\n\r\nerror: {\"code\":500}\n\nevent: message\ndata: ok\n\n";
        assert_eq!(
            decode_in_pieces(stream, 1000),
            ["error: {\"message\":\"boom\"}", "error: {\"code\":500}", "ok"]
        );
        // An error event without data still fails the stream.
        assert_eq!(decode_payloads(b"event: error\n\n", 3), [Payload::Error(String::new())]);
    }

    #[test]
    fn comments_and_crlf_line_ends_are_tolerated() {
        let stream = b": ping\r\n\r\n:\r\ndata: a\r\n\r\n: ping - 2024\n\n";
        assert_eq!(decode_in_pieces(stream, 2), ["a"]);
    }

    #[test]
    fn named_events_keep_their_names_and_default_to_message() {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        let stream = b"event: endpoint\r\ndata: /messages?id=1\r\n\r\n: ping\n\ndata: {}\n\n";
        for chunk in stream.chunks(3) {
            decoder.push_events(chunk, &mut out).expect("small events fit");
        }
        let named = |name: &str, data: &str| Event { name: name.into(), data: data.into() };
        assert_eq!(out, [named("endpoint", "/messages?id=1"), named("message", "{}")]);
    }

    #[test]
    fn an_event_of_many_lines_past_the_limit_is_refused() {
        let mut decoder = SseDecoder::with_limit(64);
        let mut out = Vec::new();
        let lines = b"data: 0123456789\n".repeat(8);
        assert_eq!(decoder.push_events(&lines, &mut out), Err(EventTooLarge));
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        let chunk = vec![b'x'; 1024 * 1024];
        let refused = (0..20).any(|_| decoder.push(&chunk, &mut out).is_err());
        assert!(refused);
    }
}
