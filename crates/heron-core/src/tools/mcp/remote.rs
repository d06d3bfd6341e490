//! What the http and sse transports share: the HTTP client (the bounds on a server's
//! messages are the parent module's), the editor's headers (secrets: their values are
//! never logged or reported), and failures told without secrets: an HTTP status in
//! Heron's own words, never the server's body, and a URL shown without its query or
//! credentials.

use std::error::Error as StdError;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use rmcp::service::ClientInitializeError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

/// How long one attempt to connect to a server may take ([`super::McpLimits::connect`]).
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest failure reason kept, in bytes.
const MAX_REASON: usize = 512;

/// Why a remote server could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RemoteFailure {
    /// A sentence without secrets.
    pub(super) reason: String,
    /// The HTTP status, when the server answered with a failing one.
    pub(super) http_status: Option<u16>,
    /// Nothing listens there yet: worth another try while the server starts.
    pub(super) refused: bool,
}

impl RemoteFailure {
    pub(super) fn new(reason: impl Into<String>) -> Self {
        Self { reason: reason.into(), http_status: None, refused: false }
    }

    pub(super) fn status(status: u16) -> Self {
        let name = reqwest::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason());
        let reason = match name {
            Some(name) => format!("the server answered HTTP {status} ({name})"),
            None => format!("the server answered HTTP {status}"),
        };
        Self { reason, http_status: Some(status), refused: false }
    }
}

/// Checks that `url` is an http(s) URL with a host; the parsed URL, or why not.
pub fn parse_url(url: &str) -> Result<Url, String> {
    let parsed = Url::parse(url.trim()).map_err(|e| format!("is not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err("must be an http or https URL".to_owned());
    }
    Ok(parsed)
}

/// `url` as it may be shown: scheme, host, port and path, without credentials or query.
pub(crate) fn shown_url(url: &str) -> String {
    match Url::parse(url.trim()) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => "(not a URL)".to_owned(),
    }
}

/// The editor's headers as a header map, or which one is malformed (by name only).
pub(super) fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let header = HeaderName::try_from(name.trim())
            .map_err(|_| format!("the header name `{}` is not valid", crate::secret::clip(name, 64)))?;
        let mut value = HeaderValue::try_from(value.as_str()).map_err(|_| {
            format!("the value of header `{}` is not a valid header value", crate::secret::clip(name, 64))
        })?;
        value.set_sensitive(true);
        map.append(header, value);
    }
    Ok(map)
}

/// The HTTP client of one server: Heron's TLS provider, user agent and `connect` timeout, no
/// redirects (a redirect could carry the editor's headers to another host), no proxy.
pub(super) fn client(connect: Duration) -> Result<reqwest::Client, RemoteFailure> {
    crate::llm::http::client_builder()
        .connect_timeout(connect)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("heron/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| RemoteFailure::new(format!("cannot build an HTTP client: {}", e.without_url())))
}

/// A failure of `error` (an rmcp or reqwest error and its causes) without secrets: its
/// HTTP status when one is found, else its text with the header values and the URL's
/// query redacted, clipped.
pub(super) fn failure_of(
    error: &(dyn StdError + 'static),
    url: &str,
    headers: &[(String, String)],
) -> RemoteFailure {
    let mut refused = false;
    let mut unreachable = None;
    let mut cause: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(current) = cause {
        if let Some(status) = status_of(current) {
            return RemoteFailure::status(status);
        }
        let http = current.downcast_ref::<reqwest::Error>().or_else(|| {
            match current.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                Some(StreamableHttpError::Client(client)) => Some(client),
                _ => None,
            }
        });
        if let Some(http) = http {
            refused |= http.is_connect();
            unreachable.get_or_insert_with(|| format!("it could not be reached: {}", chain_text(http)));
        }
        cause = next(current);
    }
    let mut text = unreachable.unwrap_or_else(|| {
        // rmcp names its transport's type in the text ("Transport [rmcp::...] error: ..."):
        // what follows is the part that says what happened.
        let text = chain_text(error);
        match text.rfind("] error: ") {
            Some(at) => text[at + "] error: ".len()..].to_owned(),
            None => text,
        }
    });
    for (_, value) in headers {
        if value.len() >= 3 {
            text = text.replace(value.as_str(), "[redacted]");
        }
    }
    if let Ok(parsed) = Url::parse(url.trim()) {
        text = text.replace(parsed.as_str(), &shown_url(url));
        if let Some(query) = parsed.query().filter(|q| !q.is_empty()) {
            text = text.replace(query, "[redacted]");
        }
        if let Some(password) = parsed.password() {
            text = text.replace(password, "[redacted]");
        }
    }
    let clean: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    RemoteFailure { reason: crate::secret::clip(&clean, MAX_REASON), http_status: None, refused }
}

/// The cause of `error`: its source, or the transport error an rmcp initialization
/// failure holds without naming it as its source.
fn next<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a (dyn StdError + 'static)> {
    if let Some(ClientInitializeError::TransportError { error, .. }) =
        error.downcast_ref::<ClientInitializeError>()
    {
        return Some(error);
    }
    error.source()
}

/// The error and its causes on one line.
fn chain_text(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = next(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = next(cause);
    }
    text
}

/// The HTTP status one error of the chain carries.
fn status_of(error: &(dyn StdError + 'static)) -> Option<u16> {
    if let Some(http) = error.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
        return match http {
            StreamableHttpError::AuthRequired(_) => Some(401),
            StreamableHttpError::InsufficientScope(_) => Some(403),
            StreamableHttpError::HttpStatus(status) => Some(status.status),
            StreamableHttpError::SessionExpired => Some(404),
            StreamableHttpError::Client(client) => client.status().map(|s| s.as_u16()),
            // rmcp words other failing statuses as "HTTP 401 Unauthorized: <body>".
            StreamableHttpError::UnexpectedServerResponse(text) => leading_status(text),
            _ => None,
        };
    }
    if let Some(sse) = error.downcast_ref::<super::sse::SseError>() {
        return sse.http_status();
    }
    error.downcast_ref::<reqwest::Error>().and_then(|e| e.status()).map(|s| s.as_u16())
}

/// `NNN` of a text that starts `HTTP NNN`.
fn leading_status(text: &str) -> Option<u16> {
    let digits = text.strip_prefix("HTTP ")?.get(..3)?;
    digits.parse().ok().filter(|status| (400..600).contains(status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Plain(String);
    impl std::fmt::Display for Plain {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }
    impl StdError for Plain {}

    #[test]
    fn only_http_urls_are_taken() {
        assert!(parse_url("https://mcp.example.com/mcp").is_ok());
        assert!(parse_url("http://127.0.0.1:8000/sse").is_ok());
        for bad in ["file:///etc/passwd", "/home/u/.heron/.env", "ftp://x/y", "nope"] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_shown_url_has_no_query_or_credentials() {
        assert_eq!(shown_url("https://u:pw@host.example/mcp?key=sk-1#x"), "https://host.example/mcp");
    }

    #[test]
    fn a_failure_never_shows_header_values_or_the_query() {
        let url = "http://127.0.0.1:1/mcp?token=qq-secret";
        let headers = [("Authorization".to_owned(), "Bearer tok-123".to_owned())];
        let error = Plain("sent Bearer tok-123 to http://127.0.0.1:1/mcp?token=qq-secret\n".into());
        let failure = failure_of(&error, url, &headers);
        assert!(!failure.reason.contains("tok-123") && !failure.reason.contains("qq-secret"), "{failure:?}");
        assert!(!failure.reason.contains('\n'));
    }

    #[test]
    fn statuses_are_read_from_rmcp_errors_and_worded_by_heron() {
        let error: StreamableHttpError<reqwest::Error> =
            StreamableHttpError::UnexpectedServerResponse("HTTP 401 Unauthorized: secret body".into());
        let failure = failure_of(&error, "http://h/mcp", &[]);
        assert_eq!(failure.http_status, Some(401));
        assert_eq!(failure.reason, "the server answered HTTP 401 (Unauthorized)");
        assert_eq!(leading_status("HTTP 200 fine"), None);
    }

    #[test]
    fn malformed_headers_are_named_without_their_values() {
        let error = header_map(&[("X-Key".into(), "line\nbreak-secret".into())]).expect_err("refused");
        assert!(error.contains("X-Key") && !error.contains("secret"), "{error}");
        assert!(header_map(&[("bad name".into(), "v".into())]).is_err());
    }
}
