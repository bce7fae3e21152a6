//! Validated names: newtypes that parse in their constructor.
//!
//! A value of one of these types has passed its rules; code that holds one
//! never re-checks it. Each type deserialises through the same parser, so a
//! JSON body with a bad name fails at the edge with the field's name.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::text;

/// Nextcloud refuses names longer than this many bytes.
pub const MAX_SEGMENT_BYTES: usize = 250;

/// Why one path segment (a file, folder or project name) was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SegmentError {
    /// Nothing between two slashes, or an empty name.
    #[error("is empty")]
    Empty,
    /// A C0/C1 control character or DEL.
    #[error("contains a control character")]
    Control,
    /// Zero-width, bidi-control, BOM, tag or similar characters.
    #[error("contains an invisible or text-direction character")]
    Invisible,
    /// `/` or `\` inside a name.
    #[error("contains `/` or `\\`")]
    Separator,
    /// `.` or `..`, possibly padded with whitespace.
    #[error("is `.` or `..`, which would leave the folder")]
    DotName,
    /// Leading or trailing whitespace (Nextcloud and Windows trim it).
    #[error("starts or ends with whitespace")]
    Padded,
    /// A character that looks like `/`, `\` or `..` or folds into one (NFKC).
    #[error("contains a character that looks like `/`, `\\` or `..`")]
    Lookalike,
    /// `%2e`, `%2F`, `%u2215` and the like.
    #[error("looks percent-encoded (such as `%2e`); send the plain characters instead")]
    PercentEncoded,
    /// A trailing `.` (dropped by Windows clients, so two names would collide).
    #[error("ends with a dot")]
    TrailingDot,
    /// More than [`MAX_SEGMENT_BYTES`] bytes of UTF-8.
    #[error("is longer than {max} bytes")]
    TooLong {
        /// The limit in bytes.
        max: usize,
    },
    /// More characters than the name's own limit.
    #[error("is longer than {max} characters")]
    TooManyCharacters {
        /// The limit in characters.
        max: usize,
    },
    /// `.htaccess`, `*.part`, `*.filepart`: names Nextcloud refuses.
    #[error("is a name the file store reserves (`.htaccess`, `*.part`, `*.filepart`)")]
    Reserved,
    /// A project name starting with `.`: hidden folders beside the
    /// projects (the trash, `.acdm-trash`, in any case) are never projects.
    #[error(
        "starts with a dot; hidden names (such as the trash `.acdm-trash`) are reserved and never name a project"
    )]
    Hidden,
}

/// Checks one segment that is already NFC-normalised.
pub(crate) fn check_segment(segment: &str) -> Result<(), SegmentError> {
    if segment.is_empty() {
        return Err(SegmentError::Empty);
    }
    // ASCII, the usual name, has no invisible or look-alike characters and
    // is its own NFKC form: one pass over its bytes finds what it can hold.
    let ascii = segment.is_ascii();
    if ascii {
        let (mut control, mut separator) = (false, false);
        for byte in segment.bytes() {
            control |= byte.is_ascii_control();
            separator |= matches!(byte, b'/' | b'\\');
        }
        if control {
            return Err(SegmentError::Control);
        }
        if separator {
            return Err(SegmentError::Separator);
        }
    } else {
        if segment.chars().any(text::is_control) {
            return Err(SegmentError::Control);
        }
        if segment.chars().any(text::is_invisible) {
            return Err(SegmentError::Invisible);
        }
        if segment.contains(['/', '\\']) {
            return Err(SegmentError::Separator);
        }
    }
    let trimmed = segment.trim();
    if trimmed == "." || trimmed == ".." {
        return Err(SegmentError::DotName);
    }
    if trimmed.len() != segment.len() {
        return Err(SegmentError::Padded);
    }
    if !ascii
        && (segment.chars().any(text::is_lookalike_separator) || text::folds_to_traversal(segment))
    {
        return Err(SegmentError::Lookalike);
    }
    if text::looks_percent_encoded(segment) {
        return Err(SegmentError::PercentEncoded);
    }
    if segment.ends_with('.') {
        return Err(SegmentError::TrailingDot);
    }
    if segment.len() > MAX_SEGMENT_BYTES {
        return Err(SegmentError::TooLong {
            max: MAX_SEGMENT_BYTES,
        });
    }
    // ASCII is compared without a lowercased copy; other text is
    // lowercased as Unicode does it.
    let is_reserved = if ascii {
        let ends_with = |suffix: &str| {
            segment.len() >= suffix.len()
                && segment[segment.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
        };
        segment.eq_ignore_ascii_case(".htaccess") || ends_with(".part") || ends_with(".filepart")
    } else {
        let lower = segment.to_lowercase();
        lower == ".htaccess" || lower.ends_with(".part") || lower.ends_with(".filepart")
    };
    if is_reserved {
        return Err(SegmentError::Reserved);
    }
    Ok(())
}

/// Why an identifier (slug, agent, mount, user or thread id) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// Empty or whitespace only.
    #[error("is empty")]
    Empty,
    /// Over the identifier's length limit (bytes).
    #[error("is longer than {max} bytes")]
    TooLong {
        /// The limit in bytes.
        max: usize,
    },
    /// A character outside the identifier's alphabet.
    #[error("contains {ch:?}; allowed: {allowed}")]
    InvalidChar {
        /// The first offending character.
        ch: char,
        /// The allowed alphabet, for the message.
        allowed: &'static str,
    },
    /// The first or last character must be a letter or digit.
    #[error("must start and end with a letter or digit")]
    BadEdge,
    /// A control character.
    #[error("contains a control character")]
    Control,
    /// An invisible or text-direction character.
    #[error("contains an invisible or text-direction character")]
    Invisible,
    /// Leading or trailing whitespace.
    #[error("starts or ends with whitespace")]
    Padded,
}

/// Rules for a short ASCII identifier.
struct AsciiRule {
    max: usize,
    allowed: &'static str,
    is_allowed: fn(u8) -> bool,
    alnum_end: bool,
}

fn check_ascii(input: &str, rule: &AsciiRule) -> Result<(), IdError> {
    if input.is_empty() {
        return Err(IdError::Empty);
    }
    if input.len() > rule.max {
        return Err(IdError::TooLong { max: rule.max });
    }
    if let Some(ch) = input
        .chars()
        .find(|c| !c.is_ascii() || !(rule.is_allowed)(*c as u8))
    {
        return Err(IdError::InvalidChar {
            ch,
            allowed: rule.allowed,
        });
    }
    let bytes = input.as_bytes();
    let first_ok = bytes.first().is_some_and(u8::is_ascii_alphanumeric);
    let last_ok = !rule.alnum_end || bytes.last().is_some_and(u8::is_ascii_alphanumeric);
    if !first_ok || !last_ok {
        return Err(IdError::BadEdge);
    }
    Ok(())
}

/// Rules for an opaque identifier from a header (user id, thread id).
fn check_opaque(input: &str, max: usize) -> Result<(), IdError> {
    if input.trim().is_empty() {
        return Err(IdError::Empty);
    }
    if input.chars().count() > max {
        return Err(IdError::TooLong { max });
    }
    if input.chars().any(text::is_control) {
        return Err(IdError::Control);
    }
    if input.chars().any(text::is_invisible) {
        return Err(IdError::Invisible);
    }
    if input.trim().len() != input.len() {
        return Err(IdError::Padded);
    }
    Ok(())
}

macro_rules! string_newtype {
    ($(#[$doc:meta])* $name:ident, $err:ty, $parse:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Parses and validates `input`.
            pub fn parse(input: &str) -> Result<Self, $err> {
                let parse: fn(&str) -> Result<String, $err> = $parse;
                parse(input).map(Self)
            }

            /// The validated value.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl TryFrom<String> for $name {
            type Error = $err;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                Self::parse(&value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

string_newtype!(
    /// A project's URL-safe identifier: 1–63 of `a-z`, `0-9`, `-`, starting
    /// and ending with a letter or digit (`alpha`, `site-2026`).
    ProjectSlug,
    IdError,
    |s| {
        check_ascii(
            s,
            &AsciiRule {
                max: 63,
                allowed: "a-z, 0-9 and '-'",
                is_allowed: |b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-',
                alnum_end: true,
            },
        )
        .map(|()| s.to_owned())
    }
);

string_newtype!(
    /// The name of an agent, as sent in `X-ACDM-Agent-Name`
    /// (`project-alpha`): 1–128 of `A-Z`, `a-z`, `0-9`, `.`, `_`, `-`,
    /// starting with a letter or digit. Case-sensitive.
    AgentName,
    IdError,
    |s| {
        check_ascii(
            s,
            &AsciiRule {
                max: 128,
                allowed: "A-Z, a-z, 0-9, '.', '_' and '-'",
                is_allowed: |b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'),
                alnum_end: false,
            },
        )
        .map(|()| s.to_owned())
    }
);

string_newtype!(
    /// The name of one of a project's mounts (`project`, `templates`):
    /// 1–63 of `a-z`, `0-9`, `_`, `-`, starting and ending with a letter or digit.
    MountName,
    IdError,
    |s| {
        check_ascii(
            s,
            &AsciiRule {
                max: 63,
                allowed: "a-z, 0-9, '_' and '-'",
                is_allowed: |b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-'),
                alnum_end: true,
            },
        )
        .map(|()| s.to_owned())
    }
);

string_newtype!(
    /// A user id as sent in `X-ACDM-User-Id`: opaque, 1–256 characters, no
    /// control or invisible characters, no surrounding whitespace.
    UserId,
    IdError,
    |s| check_opaque(s, 256).map(|()| s.to_owned())
);

string_newtype!(
    /// A conversation thread id as sent in `X-ACDM-Thread-Id`: opaque,
    /// 1–256 characters, no control or invisible characters, no surrounding whitespace.
    ThreadId,
    IdError,
    |s| check_opaque(s, 256).map(|()| s.to_owned())
);

string_newtype!(
    /// A request's correlation id: generated per request, or taken from a
    /// caller's `X-Request-Id` when it is 1–64 of `A-Z`, `a-z`, `0-9`, `.`,
    /// `_`, `:`, `-`. Shown in error messages so operators can find the logs.
    RequestId,
    IdError,
    |s| {
        check_ascii(
            s,
            &AsciiRule {
                max: 64,
                allowed: "A-Z, a-z, 0-9, '.', '_', ':' and '-'",
                is_allowed: |b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'),
                alnum_end: false,
            },
        )
        .map(|()| s.to_owned())
    }
);

string_newtype!(
    /// A project's display name, which is also its folder name in the file
    /// store (`<NEXTCLOUD_BASE_PATH>/<name>/`). NFC-normalised; 1–100
    /// characters and at most 250 bytes; no `/`, `\`, controls, invisible
    /// characters, look-alike separators, dot names, surrounding whitespace,
    /// trailing dot or percent escapes; and no leading dot, so no project
    /// folder is hidden and none is the trash (`.acdm-trash`, in any case) —
    /// one rule for the MCP tools, provisioning and import.
    ProjectName,
    SegmentError,
    |s| {
        let normalised = text::nfc(s);
        check_segment(&normalised)?;
        if normalised.starts_with('.') {
            return Err(SegmentError::Hidden);
        }
        if normalised.chars().count() > 100 {
            return Err(SegmentError::TooManyCharacters { max: 100 });
        }
        Ok(normalised)
    }
);

impl ProjectName {
    /// The name with case folded, for comparing names the way a
    /// case-insensitive file store does: `Alpha`, `ALPHA` and `alpha` share
    /// one key (and so would share one folder there). Full Unicode folding
    /// through upper then lower case, so `Straße` and `STRASSE` agree too.
    pub fn folded(&self) -> String {
        text::nfc(&self.0.to_uppercase().to_lowercase())
    }
}

impl RequestId {
    /// A fresh random id (a UUID v4).
    pub fn random() -> Self {
        Self(uuid::Uuid::new_v4().hyphenated().to_string())
    }
}

/// Each name's JSON Schema states its rule (a pattern and bounds), so a
/// schema and the parser agree on what is a name: the ASCII names exactly;
/// the opaque ids and project names as far as a regular expression can
/// (controls, invisible characters, padding, look-alike separators, dot
/// edges and percent escapes are all in the pattern; NFKC look-alikes of
/// `.`/`/` and the 250-byte cap of project names are checked by the
/// parser only).
macro_rules! name_schema {
    ($name:ident, $schema:expr) => {
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                let schema: serde_json::Value = $schema;
                schemars::Schema::try_from(schema).unwrap_or_default()
            }
        }
    };
}

/// Characters no opaque id or project name may hold: controls (Cc) and
/// the invisible ones of [`text::is_invisible`], as a regex class body.
fn forbidden_class() -> &'static str {
    text::forbidden_class!()
}

fn opaque_schema(description: &str) -> serde_json::Value {
    let bad = forbidden_class();
    serde_json::json!({
        "type": "string",
        "description": description,
        "minLength": 1,
        "maxLength": 256,
        "pattern": format!(r"^[^\s{bad}]([^{bad}]*[^\s{bad}])?$"),
    })
}

fn ascii_schema(description: &str, pattern: &str) -> serde_json::Value {
    serde_json::json!({ "type": "string", "description": description, "pattern": pattern })
}

name_schema!(
    ProjectSlug,
    ascii_schema(
        "a project's slug: 1–63 of a-z, 0-9, '-', starting and ending with a letter or digit",
        "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
    )
);
name_schema!(
    AgentName,
    ascii_schema(
        "an agent's name: 1–128 of A-Z, a-z, 0-9, '.', '_', '-', starting with a letter or digit",
        "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
    )
);
name_schema!(
    MountName,
    ascii_schema(
        "a mount's name: 1–63 of a-z, 0-9, '_', '-', starting and ending with a letter or digit",
        "^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$"
    )
);
name_schema!(
    RequestId,
    ascii_schema(
        "a request id: 1–64 of A-Z, a-z, 0-9, '.', '_', ':', '-', starting with a letter or digit",
        "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"
    )
);
name_schema!(
    UserId,
    opaque_schema(
        "a user id: 1–256 characters, no control or invisible characters, no surrounding whitespace"
    )
);
name_schema!(
    ThreadId,
    opaque_schema(
        "a thread id: 1–256 characters, no control or invisible characters, no surrounding whitespace"
    )
);
name_schema!(ProjectName, {
    let bad = forbidden_class();
    let separators = r"/\\\u2044\u2215\u2216\u29f5\u29f8\u29f9\ufe68\uff0f\uff3c\uefc8\uf025";
    serde_json::json!({
        "type": "string",
        "description": "a project's display name and folder name: 1–100 characters (at most 250 bytes), no '/', '\\', look-alike separators, control or invisible characters, no leading dot, no trailing dot, no surrounding whitespace, no percent escapes",
        "minLength": 1,
        "maxLength": 100,
        "pattern": format!(
            r"^(?!.*%([0-9A-Fa-f]{{2}}|[uU][0-9A-Fa-f]{{4}}))[^\s.{bad}{separators}]([^{bad}{separators}]*[^\s.{bad}{separators}])?$"
        ),
    })
});

#[cfg(test)]
mod tests {
    use super::*;

    /// `check_segment` as it was before its ASCII pass: every rule, char by
    /// char, for every segment.
    fn check_segment_char_by_char(segment: &str) -> Result<(), SegmentError> {
        if segment.is_empty() {
            return Err(SegmentError::Empty);
        }
        if segment.chars().any(text::is_control) {
            return Err(SegmentError::Control);
        }
        if segment.chars().any(text::is_invisible) {
            return Err(SegmentError::Invisible);
        }
        if segment.contains(['/', '\\']) {
            return Err(SegmentError::Separator);
        }
        let trimmed = segment.trim();
        if trimmed == "." || trimmed == ".." {
            return Err(SegmentError::DotName);
        }
        if trimmed.len() != segment.len() {
            return Err(SegmentError::Padded);
        }
        if segment.chars().any(text::is_lookalike_separator) || text::folds_to_traversal(segment) {
            return Err(SegmentError::Lookalike);
        }
        if text::looks_percent_encoded(segment) {
            return Err(SegmentError::PercentEncoded);
        }
        if segment.ends_with('.') {
            return Err(SegmentError::TrailingDot);
        }
        if segment.len() > MAX_SEGMENT_BYTES {
            return Err(SegmentError::TooLong {
                max: MAX_SEGMENT_BYTES,
            });
        }
        let lower = segment.to_lowercase();
        if lower == ".htaccess" || lower.ends_with(".part") || lower.ends_with(".filepart") {
            return Err(SegmentError::Reserved);
        }
        Ok(())
    }

    /// The ASCII pass refuses what the char-by-char rules refuse, with the
    /// same reason: every ASCII string of up to three characters, and
    /// random longer ones (ASCII and not) over the characters the rules
    /// look at.
    #[test]
    fn an_ascii_segment_is_judged_as_char_by_char() {
        let mut checked = 0_u64;
        let mut check = |segment: &str| {
            assert_eq!(
                check_segment(segment),
                check_segment_char_by_char(segment),
                "{segment:?}"
            );
            checked += 1;
        };
        let ascii: Vec<char> = (0_u8..128).map(char::from).collect();
        check("");
        for a in &ascii {
            check(&a.to_string());
            for b in &ascii {
                check(&format!("{a}{b}"));
                for c in &ascii {
                    check(&format!("{a}{b}{c}"));
                }
            }
        }
        let alphabet: Vec<char> =
            " .%/\\\t\u{7f}aAuU0fFgtxp.hHelr\u{a0}\u{85}\u{2215}\u{200b}\u{ff0e}é"
                .chars()
                .collect();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..300_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = usize::try_from(seed % 12).unwrap() + 1;
            let segment: String = (0..len)
                .map(|i| {
                    alphabet[usize::try_from((seed >> (i * 5)) % 32).unwrap() % alphabet.len()]
                })
                .collect();
            check(&segment);
        }
        for name in [
            ".htaccess",
            ".HTACCESS",
            "a.part",
            "A.PART",
            "x.FilePart",
            "a.parts",
        ] {
            check(name);
            check(&format!("{name}x"));
        }
        for c in &alphabet {
            check(&format!("a{c}b"));
        }
        check(&"a".repeat(MAX_SEGMENT_BYTES));
        check(&"a".repeat(MAX_SEGMENT_BYTES + 1));
        check(&format!("{}.", "a".repeat(MAX_SEGMENT_BYTES)));
        assert!(checked > 2_000_000, "{checked}");
    }

    /// Found by schemathesis: the schema bounds user ids in characters
    /// (JSON Schema's `maxLength`), the parser counted bytes.
    #[test]
    fn user_and_thread_ids_are_bounded_in_characters() {
        let long = "é".repeat(256);
        assert!(UserId::parse(&long).is_ok());
        assert!(ThreadId::parse(&long).is_ok());
        assert!(UserId::parse(&"é".repeat(257)).is_err());
    }

    fn check_project_name(input: &str, expected: Result<&str, SegmentError>) {
        let got = ProjectName::parse(input);
        assert_eq!(
            got.as_ref().map(ProjectName::as_str).map_err(|e| *e),
            expected,
            "input {input:?}"
        );
    }

    #[test]
    fn project_names_follow_the_spec_and_more() {
        use SegmentError::*;
        check_project_name("Alpha", Ok("Alpha"));
        check_project_name("Site 2026 – North", Ok("Site 2026 – North"));
        check_project_name("项目甲", Ok("项目甲"));
        check_project_name("a#b?c", Ok("a#b?c"));
        check_project_name("CON", Ok("CON"));
        check_project_name("cafe\u{301}", Ok("caf\u{e9}")); // NFD becomes NFC
        // What the bare regex accepts and we do not.
        check_project_name(".", Err(DotName));
        check_project_name("..", Err(DotName));
        check_project_name(" .. ", Err(DotName));
        check_project_name("...", Err(TrailingDot));
        check_project_name("%2e%2e", Err(PercentEncoded));
        check_project_name("a\u{7f}", Err(Control));
        check_project_name("x\u{85}y", Err(Control)); // NEL, a C1 control
        check_project_name("\u{202E}gpj.exe", Err(Invisible));
        check_project_name("a\u{2028}b", Err(Invisible));
        check_project_name("\u{FEFF}x", Err(Invisible));
        check_project_name("a\u{200B}b", Err(Invisible));
        check_project_name("a\u{FF0F}b", Err(Lookalike));
        check_project_name("a\u{2215}b", Err(Lookalike));
        check_project_name("\u{FF0E}\u{FF0E}", Err(Lookalike));
        check_project_name(".htaccess", Err(Reserved));
        for reserved in [
            ".HTACCESS",
            "a.PART",
            "a.FilePart",
            "x.part",
            "\u{e9}.PART",
            "\u{e9}.htaccess.part",
        ] {
            assert_eq!(check_segment(reserved), Err(Reserved), "{reserved}");
        }
        for fine in ["part", "a.parts", "filepart.md", "\u{e9}.md", "htaccess"] {
            assert_eq!(check_segment(fine), Ok(()), "{fine}");
        }
        // The trash and every other hidden folder beside the projects.
        check_project_name(".acdm-trash", Err(Hidden));
        check_project_name(".ACDM-TRASH", Err(Hidden));
        check_project_name(".Acdm-Trash", Err(Hidden));
        check_project_name(".git", Err(Hidden));
        check_project_name(".Alpha", Err(Hidden));
        check_project_name("Alpha.v2", Ok("Alpha.v2"));
        check_project_name(" Alpha", Err(Padded));
        check_project_name("Alpha\u{A0}", Err(Padded));
        check_project_name(&"😀".repeat(100), Err(TooLong { max: 250 }));
        check_project_name(&"a".repeat(101), Err(TooManyCharacters { max: 100 }));
        check_project_name(&"a".repeat(100), Ok(&"a".repeat(100)));
        // What the regex itself refuses.
        check_project_name("", Err(Empty));
        check_project_name("a/b", Err(Separator));
        check_project_name("a\\b", Err(Separator));
        check_project_name("a\tb", Err(Control));
        check_project_name("a\nb", Err(Control));
        check_project_name("a\0b", Err(Control));
    }

    #[test]
    fn case_twins_of_a_project_name_share_one_folded_key() {
        let key = |s: &str| ProjectName::parse(s).unwrap().folded();
        assert_eq!(key("Alpha"), key("ALPHA"));
        assert_eq!(key("alpha"), key("aLpHa"));
        assert_eq!(key("Straße"), key("STRASSE"));
        assert_eq!(key("CAF\u{c9}"), key("cafe\u{301}"));
        assert_ne!(key("Alpha"), key("Alpha 2"));
        assert_eq!(key("项目甲"), "项目甲");
    }

    fn check_id<T: std::fmt::Debug>(
        parse: fn(&str) -> Result<T, IdError>,
        input: &str,
        expected_ok: bool,
    ) {
        let got = parse(input);
        assert_eq!(got.is_ok(), expected_ok, "input {input:?} gave {got:?}");
    }

    #[test]
    fn slugs_are_lowercase_ascii_with_inner_hyphens() {
        let p = ProjectSlug::parse;
        check_id(p, "alpha", true);
        check_id(p, "site-2026", true);
        check_id(p, "a", true);
        check_id(p, &"a".repeat(63), true);
        check_id(p, &"a".repeat(64), false);
        check_id(p, "", false);
        check_id(p, "Alpha", false);
        check_id(p, "-alpha", false);
        check_id(p, "alpha-", false);
        check_id(p, "al_pha", false);
        check_id(p, "al pha", false);
        check_id(p, "ålpha", false);
        check_id(p, "..", false);
        assert_eq!(
            ProjectSlug::parse("Alpha"),
            Err(IdError::InvalidChar {
                ch: 'A',
                allowed: "a-z, 0-9 and '-'"
            })
        );
    }

    #[test]
    fn agent_names_are_case_sensitive_ascii() {
        let p = AgentName::parse;
        check_id(p, "project-alpha", true);
        check_id(p, "Project_Alpha.v2", true);
        check_id(p, "9lives", true);
        check_id(p, &"a".repeat(128), true);
        check_id(p, &"a".repeat(129), false);
        check_id(p, "", false);
        check_id(p, ".hidden", false);
        check_id(p, "-x", false);
        check_id(p, "a b", false);
        check_id(p, "a/b", false);
        check_id(p, "a\u{0}", false);
        check_id(p, "agént", false);
        assert_ne!(AgentName::parse("A").ok(), AgentName::parse("a").ok());
    }

    #[test]
    fn mount_names_are_short_lowercase() {
        let p = MountName::parse;
        check_id(p, "project", true);
        check_id(p, "shared_templates", true);
        check_id(p, "a-1", true);
        check_id(p, "Project", false);
        check_id(p, "_x", false);
        check_id(p, "x_", false);
        check_id(p, "a.b", false);
    }

    #[test]
    fn opaque_ids_refuse_control_invisible_and_padding() {
        for p in [UserId::parse as fn(&str) -> _, |s: &str| {
            ThreadId::parse(s).map(|t| UserId(t.0))
        }] {
            check_id(p, "u-123", true);
            check_id(p, "alice@example.com", true);
            check_id(p, "张三", true);
            check_id(p, "6f1c1f7e-3c5e-4b7a-9b1d-0c8d2f6a9e10", true);
            check_id(p, "", false);
            check_id(p, "   ", false);
            check_id(p, " u1", false);
            check_id(p, "u1\n", false);
            check_id(p, "u\u{1b}[31m", false);
            check_id(p, "u\u{202E}1", false);
            check_id(p, &"u".repeat(257), false);
            check_id(p, &"u".repeat(256), true);
        }
    }

    #[test]
    fn request_ids_are_short_and_log_safe() {
        let p = RequestId::parse;
        check_id(p, "6f1c1f7e-3c5e-4b7a-9b1d-0c8d2f6a9e10", true);
        check_id(p, "lb:1234.abc_def", true);
        check_id(p, &"a".repeat(65), false);
        check_id(p, "a b", false);
        check_id(p, "a\nforged log line", false);
        check_id(p, "", false);
        let random = RequestId::random();
        assert_eq!(RequestId::parse(random.as_str()), Ok(random));
    }

    #[test]
    fn newtypes_deserialise_through_their_parser() {
        let ok: ProjectSlug = serde_json::from_str("\"alpha\"").unwrap();
        assert_eq!(ok.as_str(), "alpha");
        let err = serde_json::from_str::<ProjectSlug>("\"Alpha\"").unwrap_err();
        assert!(err.to_string().contains("contains 'A'"), "{err}");
        let name: ProjectName = serde_json::from_str("\"cafe\\u0301\"").unwrap();
        assert_eq!(name.as_str(), "caf\u{e9}");
        assert_eq!(serde_json::to_string(&name).unwrap(), "\"caf\u{e9}\"");
    }
}
