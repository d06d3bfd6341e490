//! Text encodings of files the tools read and write: UTF-8 with or without a BOM, Latin-1
//! for anything else that is not binary. Invariant: decoding then encoding with the same
//! [`Encoding`] gives back the same bytes.

/// The UTF-8 byte order mark.
const BOM: &str = "\u{feff}";

/// How a file's bytes map to text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// UTF-8 without a byte order mark.
    Utf8,
    /// UTF-8 starting with a byte order mark (kept out of the decoded text).
    Utf8Bom,
    /// Not UTF-8: each byte is one character (ISO-8859-1).
    Latin1,
}

/// A file's content as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Decoded {
    /// The text, without a BOM.
    pub text: String,
    /// How the bytes were decoded.
    pub encoding: Encoding,
}

/// Why bytes are not text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Binary;

/// Whether `bytes` look binary: they contain a NUL byte.
pub(super) fn is_binary(bytes: &[u8]) -> bool {
    bytes.contains(&0)
}

/// Decodes a file's bytes; NUL bytes make it [`Binary`].
pub(super) fn decode(bytes: Vec<u8>) -> Result<Decoded, Binary> {
    if is_binary(&bytes) {
        return Err(Binary);
    }
    match String::from_utf8(bytes) {
        Ok(mut text) => {
            if text.starts_with(BOM) {
                text.drain(..BOM.len());
                Ok(Decoded { text, encoding: Encoding::Utf8Bom })
            } else {
                Ok(Decoded { text, encoding: Encoding::Utf8 })
            }
        }
        Err(e) => {
            let text = e.as_bytes().iter().map(|&b| char::from(b)).collect();
            Ok(Decoded { text, encoding: Encoding::Latin1 })
        }
    }
}

/// Encodes `text` as `encoding`. Latin-1 fails with the first character it cannot hold.
pub(super) fn encode(text: &str, encoding: Encoding) -> Result<Vec<u8>, char> {
    match encoding {
        Encoding::Utf8 => Ok(text.as_bytes().to_vec()),
        Encoding::Utf8Bom => {
            let mut out = Vec::with_capacity(BOM.len() + text.len());
            out.extend_from_slice(BOM.as_bytes());
            out.extend_from_slice(text.strip_prefix(BOM).unwrap_or(text).as_bytes());
            Ok(out)
        }
        Encoding::Latin1 => text.chars().map(|c| u8::try_from(u32::from(c)).map_err(|_| c)).collect(),
    }
}

/// Whether the text's line endings are mostly CRLF.
pub(super) fn uses_crlf(text: &str) -> bool {
    let crlf = text.matches("\r\n").count();
    let lf = text.matches('\n').count();
    crlf > 0 && crlf * 2 >= lf
}

/// Turns every bare `\n` into `\r\n`, leaving existing `\r\n` alone.
pub(super) fn to_crlf(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 32);
    let mut previous = '\0';
    for c in text.chars() {
        if c == '\n' && previous != '\r' {
            out.push('\r');
        }
        out.push(c);
        previous = c;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_encoding_round_trips_byte_exact() {
        for bytes in [&b"plain\n"[..], b"\xef\xbb\xbfbom\r\n", b"caf\xe9 cr\xe8me\n"] {
            let decoded = decode(bytes.to_vec()).expect("text");
            assert_eq!(encode(&decoded.text, decoded.encoding).expect("encodable"), bytes);
        }
    }

    #[test]
    fn nul_bytes_are_binary() {
        assert_eq!(decode(b"a\0b".to_vec()), Err(Binary));
    }

    #[test]
    fn to_crlf_leaves_existing_crlf_alone() {
        assert_eq!(to_crlf("a\nb\r\nc"), "a\r\nb\r\nc");
    }
}
