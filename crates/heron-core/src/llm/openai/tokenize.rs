//! Counting tokens with the server's own tokenizer, for the servers that serve one beside
//! the API root (not under `/v1`): llama.cpp's llama-server (`POST /tokenize` with
//! `{"content": TEXT}`, answering `{"tokens": [...]}`) and llama-cpp-python's server
//! (`POST /extras/tokenize/count` with `{"input": TEXT}`, answering `{"count": N}`). People
//! run both under the llamacpp flavor, so the routes are tried in that order and one the
//! server does not have (404, 405) is not asked again.
//!
//! A count only sharpens an estimate, so it is cheap or it is nothing: text over
//! [`MAX_TEXT_BYTES`] is not sent, an answer has [`COUNT_WAIT`] to arrive whole and at most
//! [`MAX_ANSWER_BYTES`], it is never retried, and after [`MAX_FAILURES`] failed counts in a
//! row none is asked for again. Each failure is logged, and the caller's estimate stands in.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap};
use reqwest::{StatusCode, Url};
use serde_json::{Value, json};

use crate::config::flavor::TokenCounter;
use crate::llm::TokenCount;

/// The most text sent to be counted: a quarter of a million tokens or more, past the window
/// of any model such a server runs on one machine.
pub(crate) const MAX_TEXT_BYTES: usize = 1024 * 1024;

/// The most bytes of an answer read: llama-server lists every token, which for the longest
/// text sent takes a few bytes a token.
pub(crate) const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;

/// How long a count may take, answer included: a tokenizer takes milliseconds, and a server
/// that takes longer is busy with something the turn should not wait on.
pub(crate) const COUNT_WAIT: Duration = Duration::from_secs(5);

/// Failed counts in a row after which none is asked for again.
pub(crate) const MAX_FAILURES: u32 = 3;

/// One way a server counts tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// llama-server's `/tokenize`.
    Tokenize,
    /// llama-cpp-python's `/extras/tokenize/count`.
    ExtrasCount,
}

impl Route {
    fn path(self) -> &'static [&'static str] {
        match self {
            Route::Tokenize => &["tokenize"],
            Route::ExtrasCount => &["extras", "tokenize", "count"],
        }
    }

    fn body(self, text: &str) -> Value {
        match self {
            Route::Tokenize => json!({ "content": text }),
            Route::ExtrasCount => json!({ "input": text }),
        }
    }

    /// The count in an answer of this route.
    fn count(self, answer: &Value) -> Option<u64> {
        match self {
            Route::Tokenize => answer["tokens"].as_array().map(|tokens| tokens.len() as u64),
            Route::ExtrasCount => answer["count"].as_u64(),
        }
    }
}

/// Why a count did not come.
enum Missed {
    /// The server has no such route.
    Absent,
    /// It has, and this count failed.
    Failed(String),
}

/// A server's tokenizer, and what its answers so far taught.
#[derive(Debug)]
pub(crate) struct Counter {
    client: reqwest::Client,
    headers: HeaderMap,
    /// The routes to try, in order, with their URLs.
    routes: Vec<(Route, Url)>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Routes before this one are known to be absent.
    next: usize,
    /// Failed counts in a row.
    failures: u32,
}

impl Counter {
    /// The counter of `kind` for the API rooted at `base_url`, asking with `client` and
    /// `headers` (the provider's own, key included); `None` when the URL has no root.
    pub(crate) fn new(
        kind: TokenCounter,
        base_url: &str,
        client: reqwest::Client,
        headers: HeaderMap,
    ) -> Option<Arc<Counter>> {
        let TokenCounter::Llamacpp = kind;
        let routes = [Route::Tokenize, Route::ExtrasCount]
            .into_iter()
            .map(|route| route_url(base_url, route.path()).map(|url| (route, url)))
            .collect::<Option<Vec<_>>>()?;
        Some(Arc::new(Counter { client, headers, routes, state: Mutex::new(State::default()) }))
    }

    /// Counts the tokens of `text`, as [`crate::llm::Provider::count_tokens`] does.
    pub(crate) fn count(self: &Arc<Self>, text: String) -> TokenCount {
        let counter = Arc::clone(self);
        Box::pin(async move {
            if text.len() > MAX_TEXT_BYTES {
                return None;
            }
            loop {
                let at = {
                    let state = counter.state.lock().unwrap_or_else(PoisonError::into_inner);
                    if state.failures >= MAX_FAILURES {
                        return None;
                    }
                    state.next
                };
                let (route, url) = counter.routes.get(at)?.clone();
                let missed = match tokio::time::timeout(COUNT_WAIT, counter.ask(route, url, &text)).await {
                    Ok(Ok(count)) => {
                        counter.state.lock().unwrap_or_else(PoisonError::into_inner).failures = 0;
                        return Some(count);
                    }
                    Ok(Err(missed)) => missed,
                    Err(_) => Missed::Failed(format!("no answer within {} s", COUNT_WAIT.as_secs())),
                };
                let mut state = counter.state.lock().unwrap_or_else(PoisonError::into_inner);
                match missed {
                    Missed::Absent => state.next = state.next.max(at + 1),
                    Missed::Failed(why) => {
                        state.failures += 1;
                        tracing::debug!(?route, %why, "the server's tokenizer did not count; estimating");
                        return None;
                    }
                }
            }
        })
    }

    async fn ask(&self, route: Route, url: Url, text: &str) -> Result<u64, Missed> {
        let body = serde_json::to_vec(&route.body(text)).map_err(|e| Missed::Failed(e.to_string()))?;
        let sent = self
            .client
            .post(url)
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await;
        let mut response = sent.map_err(|e| Missed::Failed(crate::llm::http::describe(e)))?;
        match response.status() {
            StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED => return Err(Missed::Absent),
            status if !status.is_success() => return Err(Missed::Failed(format!("status {status}"))),
            _ => {}
        }
        let mut answer = Vec::new();
        while let Some(bytes) =
            response.chunk().await.map_err(|e| Missed::Failed(crate::llm::http::describe(e)))?
        {
            if answer.len() + bytes.len() > MAX_ANSWER_BYTES {
                return Err(Missed::Failed(format!("an answer over {MAX_ANSWER_BYTES} bytes")));
            }
            answer.extend_from_slice(&bytes);
        }
        let answer: Value = serde_json::from_slice(&answer)
            .map_err(|e| Missed::Failed(format!("an answer not JSON: {e}")))?;
        route.count(&answer).ok_or_else(|| Missed::Failed("an answer without a count".to_owned()))
    }
}

/// `path` at the API's root: beside `base_url`, whose last `v1` segment is left out.
fn route_url(base_url: &str, path: &[&str]) -> Option<Url> {
    let mut url = Url::parse(base_url.trim()).ok().filter(|url| matches!(url.scheme(), "http" | "https"))?;
    url.set_query(None);
    {
        let mut segments = url.path_segments_mut().ok()?;
        segments.pop_if_empty();
    }
    if url.path_segments().and_then(|mut s| s.next_back()) == Some("v1") {
        url.path_segments_mut().ok()?.pop();
    }
    url.path_segments_mut().ok()?.pop_if_empty().extend(path);
    Some(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_sit_at_the_api_root_beside_v1() {
        let at = |base: &str, route: Route| route_url(base, route.path()).map(|url| url.to_string());
        assert_eq!(
            at("http://127.0.0.1:8080/v1", Route::Tokenize).as_deref(),
            Some("http://127.0.0.1:8080/tokenize")
        );
        assert_eq!(
            at("http://127.0.0.1:8000/v1/", Route::ExtrasCount).as_deref(),
            Some("http://127.0.0.1:8000/extras/tokenize/count")
        );
        assert_eq!(at("http://h:1", Route::Tokenize).as_deref(), Some("http://h:1/tokenize"));
        assert_eq!(at("http://h/llama/v1?x=1", Route::Tokenize).as_deref(), Some("http://h/llama/tokenize"));
        assert_eq!(at("ftp://h/v1", Route::Tokenize), None);
    }

    #[test]
    fn each_route_reads_its_own_answer() {
        assert_eq!(Route::Tokenize.count(&json!({ "tokens": [1, 2, 3] })), Some(3));
        assert_eq!(Route::ExtrasCount.count(&json!({ "count": 7 })), Some(7));
        assert_eq!(Route::ExtrasCount.count(&json!({ "tokens": [1] })), None);
        assert_eq!(Route::Tokenize.body("hi"), json!({ "content": "hi" }));
        assert_eq!(Route::ExtrasCount.body("hi"), json!({ "input": "hi" }));
    }
}
