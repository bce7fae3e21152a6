//! Turning a read window into what a tool returns: text when the bytes are
//! UTF-8 text, base64 otherwise, never cutting a character in two, with the
//! offset to continue from. Shared by the MCP tools and the BFF so both
//! answer a read the same way.

pub use acdm_core::nc::Encoding;
use base64::Engine;

use crate::Window;

/// A rendered window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// Text or base64.
    pub encoding: Encoding,
    /// The bytes, as text or base64.
    pub content: String,
    /// Bytes of the file this content covers (may be fewer than read when
    /// a character was cut at the end).
    pub returned_bytes: u64,
    /// True when the file continues after the returned bytes.
    pub truncated: bool,
    /// Where to continue reading, when truncated.
    pub next_offset: Option<u64>,
}

/// MIME types that are text even though they are `application/…`.
fn textual(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence.starts_with("text/")
        || matches!(
            essence.as_str(),
            "application/json"
                | "application/xml"
                | "application/yaml"
                | "application/x-yaml"
                | "application/javascript"
                | "application/toml"
                | "application/x-sh"
                | "application/sql"
        )
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
}

fn binary_type(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|t| {
        let essence = t.split(';').next().unwrap_or_default().trim();
        !essence.is_empty() && essence != "application/octet-stream" && !textual(essence)
    })
}

/// The file's size when a read asked from `offset` starts past its end:
/// at or after the last byte of a file that has bytes (an empty file read
/// from 0 is not past its end). A tool answers such a read with a failure
/// naming the size, not an empty success the caller could take for
/// content. (Stores may clamp the window's own offset to the size, so the
/// offset asked for is what counts.)
pub fn past_the_end(window: &Window, offset: u64) -> Option<u64> {
    let offset = offset.max(window.offset);
    window.size.filter(|size| offset > 0 && offset >= *size)
}

/// Renders `window` (read with a requested length of `requested`).
pub fn render(window: &Window, requested: u64) -> Rendered {
    let bytes = &window.bytes[..];
    let more_in_file = window.has_more(requested);
    let as_binary = |bytes: &[u8]| Rendered {
        encoding: Encoding::Base64,
        content: base64::engine::general_purpose::STANDARD.encode(bytes),
        returned_bytes: bytes.len() as u64,
        truncated: more_in_file,
        next_offset: more_in_file.then(|| window.offset + bytes.len() as u64),
    };
    // Both scans by vector, chosen at run time (memchr: SSE2 or AVX2;
    // simdutf8: SSE4.2 or AVX2, else std's; NEON on ARM): a window is
    // read whole.
    if binary_type(window.content_type.as_deref()) || memchr::memchr(0, bytes).is_some() {
        return as_binary(bytes);
    }
    let text = match simdutf8::compat::from_utf8(bytes) {
        Ok(text) => text,
        // A character cut by the end of the window: stop before it, and
        // continue from its first byte.
        Err(e) if e.error_len().is_none() && more_in_file && e.valid_up_to() > 0 => {
            simdutf8::basic::from_utf8(bytes.get(..e.valid_up_to()).unwrap_or_default())
                .unwrap_or_default()
        }
        Err(_) => return as_binary(bytes),
    };
    let returned = text.len() as u64;
    let truncated = more_in_file || returned < bytes.len() as u64;
    Rendered {
        encoding: Encoding::Text,
        content: text.to_owned(),
        returned_bytes: returned,
        truncated,
        next_offset: truncated.then(|| window.offset + returned),
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn window(bytes: &'static [u8], offset: u64, size: u64, content_type: Option<&str>) -> Window {
        Window {
            size: Some(size),
            etag: None,
            content_type: content_type.map(str::to_owned),
            offset,
            bytes: Bytes::from_static(bytes),
        }
    }

    #[test]
    fn text_windows_continue_where_they_stop() {
        let r = render(&window(b"hello world", 0, 11, Some("text/markdown")), 100);
        assert_eq!(
            (r.encoding, r.content.as_str(), r.truncated, r.next_offset),
            (Encoding::Text, "hello world", false, None)
        );
        let r = render(&window(b"hello", 0, 11, None), 5);
        assert_eq!((r.truncated, r.next_offset), (true, Some(5)));
        let r = render(&window(b"world", 6, 11, None), 5);
        assert_eq!((r.truncated, r.next_offset), (false, None));
    }

    #[test]
    fn a_window_at_or_after_the_end_of_a_file_is_past_it() {
        assert_eq!(past_the_end(&window(b"", 11, 11, None), 11), Some(11));
        assert_eq!(past_the_end(&window(b"", 500, 11, None), 500), Some(11));
        assert_eq!(
            past_the_end(&window(b"", 11, 11, None), 500),
            Some(11),
            "a store that clamps the window's offset"
        );
        assert_eq!(past_the_end(&window(b"d", 10, 11, None), 10), None);
        assert_eq!(
            past_the_end(&window(b"", 0, 0, None), 0),
            None,
            "empty file"
        );
        let unknown = Window {
            size: None,
            ..window(b"", 500, 0, None)
        };
        assert_eq!(past_the_end(&unknown, 500), None);
    }

    #[test]
    fn a_character_cut_by_the_window_is_left_for_the_next_one() {
        // "café" is 63 61 66 c3 a9; a 4-byte window cuts the é.
        let r = render(&window(b"caf\xc3", 0, 5, None), 4);
        assert_eq!(
            (
                r.encoding,
                r.content.as_str(),
                r.returned_bytes,
                r.next_offset
            ),
            (Encoding::Text, "caf", 3, Some(3))
        );
        let r = render(&window(b"\xc3\xa9", 3, 5, None), 4);
        assert_eq!((r.content.as_str(), r.truncated), ("é", false));
    }

    #[test]
    fn binary_is_base64_by_type_nul_or_invalid_utf8() {
        let r = render(
            &window(
                b"%PDF-1.7 text-looking header",
                0,
                1000,
                Some("application/pdf"),
            ),
            28,
        );
        assert_eq!(r.encoding, Encoding::Base64);
        assert_eq!(r.next_offset, Some(28));
        let r = render(&window(b"ab\0cd", 0, 5, None), 10);
        assert_eq!(
            (r.encoding, r.content.as_str()),
            (Encoding::Base64, "YWIAY2Q=")
        );
        let r = render(&window(b"\xff\xfe\xfd", 0, 3, None), 10);
        assert_eq!(r.encoding, Encoding::Base64);
        let r = render(
            &window(b"{\"a\":1}", 0, 7, Some("application/json; charset=utf-8")),
            10,
        );
        assert_eq!(r.encoding, Encoding::Text);
    }

    /// The vector scans (memchr, simdutf8) decide as std's byte-by-byte
    /// `contains(&0)` and `from_utf8` do: every cut of a text of 1-, 2-,
    /// 3- and 4-byte characters, longer than a vector, whole or with a NUL
    /// or an invalid byte put at each place, with and without more of the
    /// file after it.
    #[test]
    fn the_vector_scans_decide_as_the_byte_by_byte_ones() {
        let reference = |bytes: &[u8], more: bool| -> (Encoding, usize) {
            if bytes.contains(&0) {
                return (Encoding::Base64, bytes.len());
            }
            match std::str::from_utf8(bytes) {
                Ok(text) => (Encoding::Text, text.len()),
                Err(e) if e.error_len().is_none() && more && e.valid_up_to() > 0 => {
                    (Encoding::Text, e.valid_up_to())
                }
                Err(_) => (Encoding::Base64, bytes.len()),
            }
        };
        let text = "plan: café ✓ 𝄞 done, then the 2nd floor — ok? ".repeat(3);
        let text = text.as_bytes();
        let mut checked = 0;
        for end in 0..=text.len() {
            let whole = text.get(..end).unwrap();
            let mut variants = vec![whole.to_vec()];
            for place in (0..end).step_by(7) {
                for bad in [0_u8, 0xff, 0x80] {
                    let mut spoiled = whole.to_vec();
                    if let Some(byte) = spoiled.get_mut(place) {
                        *byte = bad;
                    }
                    variants.push(spoiled);
                }
            }
            for bytes in variants {
                for more in [false, true] {
                    let size = bytes.len() as u64 + u64::from(more);
                    let window = Window {
                        size: Some(size),
                        etag: None,
                        content_type: None,
                        offset: 0,
                        bytes: Bytes::from(bytes.clone()),
                    };
                    let rendered = render(&window, bytes.len() as u64);
                    let (encoding, returned) = reference(&bytes, more);
                    assert_eq!(
                        (rendered.encoding, rendered.returned_bytes),
                        (encoding, returned as u64),
                        "{bytes:?}, more: {more}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }
}
