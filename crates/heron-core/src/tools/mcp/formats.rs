//! The text formats MCP and ACP forms name (`email`, `uri`, `date`, `date-time`), checked
//! the way a server would check them, so an answer a server would refuse is declined
//! before it is sent.

use crate::tools::editor::TextFormat;

/// Whether `text` is in `format`.
pub(super) fn holds(format: TextFormat, text: &str) -> bool {
    match format {
        TextFormat::Email => email(text),
        // An absolute URI: a scheme, then anything the URL parser takes.
        TextFormat::Uri => reqwest::Url::parse(text).is_ok(),
        TextFormat::Date => date(text),
        TextFormat::DateTime => date_time(text),
    }
}

/// `local@domain`: one `@`, neither side empty, no spaces or control characters, a domain
/// of dot-separated labels.
fn email(text: &str) -> bool {
    let Some((local, domain)) = text.split_once('@') else { return false };
    let plain = |part: &str| !part.is_empty() && !part.chars().any(|c| c.is_whitespace() || c.is_control());
    plain(local)
        && plain(domain)
        && !domain.contains('@')
        && domain
            .split('.')
            .all(|label| !label.is_empty() && !label.starts_with('-') && !label.ends_with('-'))
}

/// `n` ASCII digits, as a number.
fn digits(text: &str, n: usize) -> Option<u32> {
    (text.len() == n && text.bytes().all(|b| b.is_ascii_digit())).then(|| text.parse().ok()).flatten()
}

/// A full date, `YYYY-MM-DD`, that exists on the calendar.
fn date(text: &str) -> bool {
    let mut parts = text.split('-');
    let (Some(year), Some(month), Some(day), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let (Some(year), Some(month), Some(day)) = (digits(year, 4), digits(month, 2), digits(day, 2)) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// An RFC 3339 date-time: `date`, `T`, `hh:mm:ss`, an optional fraction, then `Z` or an
/// offset `±hh:mm`. A leap second (`:60`) is taken, as RFC 3339 allows.
fn date_time(text: &str) -> bool {
    let Some((day, time)) = text.split_once(['T', 't']) else { return false };
    if !date(day) {
        return false;
    }
    let (clock, zone) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, None)
    } else {
        match time.rfind(['+', '-']) {
            Some(at) => (&time[..at], Some(&time[at + 1..])),
            None => return false,
        }
    };
    let clock = match clock.split_once('.') {
        Some((whole, fraction)) if !fraction.is_empty() && fraction.bytes().all(|b| b.is_ascii_digit()) => {
            whole
        }
        Some(_) => return false,
        None => clock,
    };
    let hm = |text: &str| {
        let (h, m) = text.split_once(':')?;
        Some((digits(h, 2)?, digits(m, 2)?))
    };
    let Some((hm_part, seconds)) = clock.rsplit_once(':') else { return false };
    let (Some((hour, minute)), Some(second)) = (hm(hm_part), digits(seconds, 2)) else { return false };
    if hour > 23 || minute > 59 || second > 60 {
        return false;
    }
    match zone {
        None => true,
        Some(offset) => hm(offset).is_some_and(|(h, m)| h <= 23 && m <= 59),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_takes_what_it_names_and_nothing_else() {
        let cases: [(TextFormat, &[&str], &[&str]); 4] = [
            (
                TextFormat::Email,
                &["a@b.example", "first.last+tag@x.io"],
                &["a", "@b.c", "a@", "a b@c.d", "a@b@c", "a@.b"],
            ),
            (
                TextFormat::Uri,
                &["https://x.example/a?b=1", "mailto:a@b.c", "urn:isbn:1"],
                &["", "not a uri", "/relative"],
            ),
            (
                TextFormat::Date,
                &["2024-02-29", "1999-12-31"],
                &["2023-02-29", "2024-13-01", "2024-1-01", "24-01-01", "2024-01-01T00:00:00Z"],
            ),
            (
                TextFormat::DateTime,
                &["2024-02-29T12:30:00Z", "2024-02-29t12:30:00.123+05:30", "2016-12-31T23:59:60-01:00"],
                &[
                    "2024-02-29",
                    "2024-02-29T24:00:00Z",
                    "2024-02-29T12:30Z",
                    "2024-02-29T12:30:00",
                    "2024-02-29T12:30:00+5:30",
                ],
            ),
        ];
        for (format, good, bad) in cases {
            for text in good {
                assert!(holds(format, text), "{format:?} should take {text}");
            }
            for text in bad {
                assert!(!holds(format, text), "{format:?} should refuse {text}");
            }
        }
    }
}
