//! Character classes shared by every validated name and path.
//!
//! These rules come from how Nextcloud, sabre/dav, Windows clients and log
//! readers treat characters (see `shared/reference/security-notes.md` §3):
//! anything another system might silently drop, fold or interpret is refused
//! here, before a name reaches storage, a URL or a log line.

use unicode_normalization::UnicodeNormalization;

/// True for C0 controls, DEL and C1 controls (U+0080–U+009F).
/// The characters [`is_control`] and [`is_invisible`] match, as the body
/// of a regex character class (for the JSON Schemas that state the same
/// rules); `text::tests` checks the two agree.
macro_rules! forbidden_class {
    () => {
        "\\u0000-\\u001f\\u007f-\\u009f\\u00ad\\u034f\\u061c\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}"
    };
}
pub(crate) use forbidden_class;

pub(crate) fn is_control(c: char) -> bool {
    c.is_control()
}

/// True for characters that render as nothing or reorder text: zero-width
/// characters, bidi controls, word joiners, the byte-order mark, line and
/// paragraph separators, soft hyphen, and Unicode tag characters.
pub(crate) fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFFB}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// True for characters that look like a path separator but are not `/`.
/// Some are folded to `/` or `\` by NFKC; the others only look alike.
pub(crate) fn is_lookalike_separator(c: char) -> bool {
    matches!(
        c,
        '\u{2044}' // FRACTION SLASH
            | '\u{2215}' // DIVISION SLASH
            | '\u{2216}' // SET MINUS
            | '\u{29F5}' // REVERSE SOLIDUS OPERATOR
            | '\u{29F8}' // BIG SOLIDUS
            | '\u{29F9}' // BIG REVERSE SOLIDUS
            | '\u{FE68}' // SMALL REVERSE SOLIDUS
            | '\u{FF0F}' // FULLWIDTH SOLIDUS
            | '\u{FF3C}' // FULLWIDTH REVERSE SOLIDUS
            | '\u{EFC8}' // private-use slashes some decoders emit (dotdotpwn)
            | '\u{F025}'
    )
}

/// NFC form of `s`, the form Nextcloud stores and compares.
pub(crate) fn nfc(s: &str) -> String {
    // ASCII text is its own NFC (and NFKC) form: no decomposition or
    // composition touches it, so the usual path skips the tables.
    if s.is_ascii() {
        return s.to_owned();
    }
    s.nfc().collect()
}

/// True when the NFKC form of `segment` contains a separator or trims to a
/// dot name: `．．`, `‥`, `﹒﹒` and `／` all become traversal under NFKC.
pub(crate) fn folds_to_traversal(segment: &str) -> bool {
    fn traversal(folded: &str) -> bool {
        let trimmed = folded.trim();
        folded.contains(['/', '\\']) || trimmed == "." || trimmed == ".."
    }
    // ASCII text is its own NFKC form.
    if segment.is_ascii() {
        return traversal(segment);
    }
    traversal(&segment.nfkc().collect::<String>())
}

/// True when `s` contains something a decoder would turn into another
/// character: `%XX` with two hex digits, or the IIS-style `%uXXXX`.
pub(crate) fn looks_percent_encoded(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| {
        if b != b'%' {
            return false;
        }
        let rest = bytes.get(i + 1..).unwrap_or_default();
        match rest {
            [h1, h2, ..] if h1.is_ascii_hexdigit() && h2.is_ascii_hexdigit() => true,
            [u, h1, h2, h3, h4, ..] if (*u == b'u' || *u == b'U') => {
                [h1, h2, h3, h4].iter().all(|h| h.is_ascii_hexdigit())
            }
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ASCII shortcuts give what the normalisation tables give: every
    /// ASCII character alone, around dots and between slashes.
    #[test]
    fn ascii_text_takes_the_shortcut_to_the_same_answers() {
        let mut inputs: Vec<String> = (0u8..128).map(|b| char::from(b).to_string()).collect();
        for b in 0u8..128 {
            let c = char::from(b);
            inputs.extend([
                format!("{c}."),
                format!(".{c}."),
                format!("a{c}b/{c}"),
                format!(" ..{c}"),
            ]);
        }
        inputs.extend([". .", " .. ", "..", ".", "a\\b", "a/b", "plain.md"].map(String::from));
        for input in &inputs {
            assert!(input.is_ascii());
            assert_eq!(nfc(input), input.nfc().collect::<String>(), "{input:?}");
            let folded: String = input.nfkc().collect();
            let by_table =
                folded.contains(['/', '\\']) || folded.trim() == "." || folded.trim() == "..";
            assert_eq!(folds_to_traversal(input), by_table, "{input:?}");
        }
        // Outside ASCII the tables still decide.
        assert!(folds_to_traversal("\u{ff0e}\u{ff0e}"));
        assert_eq!(nfc("e\u{301}"), "\u{e9}");
    }

    /// The characters a class body such as [`forbidden_class!`] names.
    fn class_members(class: &str) -> Vec<(char, char)> {
        let mut atoms = Vec::new();
        let mut chars = class.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\\' {
                assert_eq!(chars.next(), Some('u'));
                let hex: String = chars.by_ref().take(4).collect();
                atoms.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
            } else if c == '-' {
                atoms.push('-');
            } else {
                atoms.push(c);
            }
        }
        let mut ranges = Vec::new();
        let mut i = 0;
        while i < atoms.len() {
            if atoms.get(i + 1) == Some(&'-') {
                ranges.push((atoms[i], atoms[i + 2]));
                i += 3;
            } else {
                ranges.push((atoms[i], atoms[i]));
                i += 1;
            }
        }
        ranges
    }

    #[test]
    fn the_schema_class_names_exactly_the_control_and_invisible_characters() {
        let ranges = class_members(forbidden_class!());
        for c in (0..=0x10FFFF_u32).filter_map(char::from_u32) {
            let in_class = ranges.iter().any(|(from, to)| (*from..=*to).contains(&c));
            assert_eq!(in_class, is_control(c) || is_invisible(c), "{c:?}");
        }
    }

    #[test]
    fn percent_detection_matches_escapes_only() {
        let check = |input: &str, expected: bool| {
            assert_eq!(looks_percent_encoded(input), expected, "input {input:?}");
        };
        check("%2e%2e", true);
        check("a%2Fb", true);
        check("%u2215", true);
        check("%U002e", true);
        check("%%32%%65", true); // `%32` is itself an escape
        check("50% off", false);
        check("100%", false);
        check("%zz", false);
        check("%u12", false);
        check("plain", false);
    }

    #[test]
    fn nfkc_folding_catches_lookalike_dots_and_slashes() {
        let check = |input: &str, expected: bool| {
            assert_eq!(folds_to_traversal(input), expected, "input {input:?}");
        };
        check("\u{FF0E}\u{FF0E}", true); // fullwidth dots
        check("\u{2025}", true); // two-dot leader
        check("\u{FE52}\u{FE52}", true); // small full stops
        check("a\u{FF0F}b", true); // fullwidth solidus
        check("a\u{FF3C}b", true); // fullwidth reverse solidus
        check("report.md", false);
        check("..a", false);
        check("caf\u{e9}", false);
    }
}
