//! URLs in text that leaves Heron (logs, what `heron doctor` prints) lose what may carry a
//! credential: the password of their user info and their query and fragment (API keys in
//! `?key=`, signed tokens). The scheme, host, port, path and user name stay, so the text
//! still says where it went.

use std::borrow::Cow;

/// `text` with every URL in it redacted: `https://me:pw@host/p?key=x` becomes
/// `https://me@host/p?…`. Text with no `://` is returned as it is, without copying.
pub fn redact_urls(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(found) = rest.find("://") {
        // The scheme: the letters, digits, `+`, `-` and `.` just before `://`.
        let scheme_start = rest[..found]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let after = found + 3;
        let end = rest[after..].find(ends_url).map_or(rest.len(), |i| after + i);
        out.push_str(&rest[..scheme_start]);
        if scheme_start == found {
            // No scheme: not a URL, keep the text.
            out.push_str(&rest[found..after]);
            rest = &rest[after..];
            continue;
        }
        out.push_str(&rest[scheme_start..after]);
        out.push_str(&redact_after_scheme(&rest[after..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Where a URL ends in running text.
fn ends_url(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`' | '|' | ',' | ')' | ']' | '}')
}

/// `authority/path?query#fragment` without the password and with the query and fragment
/// replaced by `…`.
fn redact_after_scheme(url: &str) -> String {
    let (before_query, had_more) = match url.find(['?', '#']) {
        Some(at) => (&url[..at], true),
        None => (url, false),
    };
    let authority_end = before_query.find('/').unwrap_or(before_query.len());
    let (authority, path) = before_query.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((user_info, host)) => {
            let user = user_info.split_once(':').map_or(user_info, |(user, _)| user);
            format!("{user}@{host}")
        }
        None => authority.to_owned(),
    };
    let mut out = format!("{authority}{path}");
    if had_more {
        out.push_str("?…");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_queries_and_fragments_leave_every_url_in_a_text() {
        assert_eq!(
            redact_urls("GET https://me:s3cret@api.example.com/v1/chat?key=sk-1&x=2 failed"),
            "GET https://me@api.example.com/v1/chat?… failed"
        );
        assert_eq!(
            redact_urls("url=\"http://127.0.0.1:8080/mcp#tok\""),
            "url=\"http://127.0.0.1:8080/mcp?…\""
        );
        assert_eq!(
            redact_urls("a postgres://app:pw@db/app and wss://h/s?t=1"),
            "a postgres://app@db/app and wss://h/s?…"
        );
        assert_eq!(redact_urls("https://example.com/plain"), "https://example.com/plain");
        assert!(matches!(redact_urls("no links here"), Cow::Borrowed(_)));
        assert_eq!(redact_urls("odd :// text"), "odd :// text");
        assert_eq!(redact_urls("(see https://h/p?q=1)."), "(see https://h/p?…).");
    }
}
