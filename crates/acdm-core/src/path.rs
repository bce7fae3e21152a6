//! Caller-supplied paths: [`RelPath`] (relative to a mount root) and
//! [`AbsPath`] (absolute inside the file store's user tree), and the prefix
//! check that decides whether a path lies inside a folder.
//!
//! A path is a list of validated segments, never a string to be joined:
//! adapters build upstream URLs one percent-encoded segment at a time from
//! [`RelPath::segments`]. Every rule here exists because some layer between
//! us and the disk would otherwise reinterpret the name (see
//! `shared/reference/security-notes.md` §3).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::names::{SegmentError, check_segment};
use crate::text;

/// Longest accepted path, in bytes after NFC normalisation.
pub const MAX_PATH_BYTES: usize = 1024;

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The empty string, or a path that names the mount root where a file or
    /// folder inside it is required.
    #[error("path is empty; give a path relative to the mount root, such as `notes/plan.md`")]
    Empty,
    /// Longer than [`MAX_PATH_BYTES`].
    #[error("path is longer than {max} bytes")]
    TooLong {
        /// The limit in bytes.
        max: usize,
    },
    /// Starts with `/` where a relative path is required.
    #[error(
        "path is absolute; give it relative to the mount root (`notes/plan.md`, not `/notes/plan.md`)"
    )]
    Absolute,
    /// Does not start with `/` where an absolute path is required.
    #[error("path must be absolute (start with `/`)")]
    NotAbsolute,
    /// `a//b`: an empty segment.
    #[error("path has an empty segment (`//`)")]
    EmptySegment,
    /// One segment broke a rule.
    #[error("segment {position} ({preview}) {reason}")]
    Segment {
        /// 1-based position of the segment.
        position: usize,
        /// The segment, escaped and shortened, for the message.
        preview: String,
        /// The rule it broke.
        reason: SegmentError,
    },
}

impl PathError {
    /// The segment rule that was broken, if the failure is about one segment.
    pub fn segment_reason(&self) -> Option<SegmentError> {
        match self {
            Self::Segment { reason, .. } => Some(*reason),
            _ => None,
        }
    }
}

fn preview(segment: &str) -> String {
    let escaped = format!("{segment:?}");
    if escaped.chars().count() <= 66 {
        return escaped;
    }
    let short: String = escaped.chars().take(64).collect();
    format!("{short}…")
}

/// Splits a normalised relative path into checked segments, dropping `.`
/// segments and one trailing `/`.
fn parse_segments(normalised: &str) -> Result<Vec<String>, PathError> {
    let body = normalised.strip_suffix('/').unwrap_or(normalised);
    if body.is_empty() || body == "." {
        return Ok(Vec::new());
    }
    let mut segments = Vec::new();
    for (index, segment) in body.split('/').enumerate() {
        if segment == "." {
            continue;
        }
        if segment.is_empty() {
            return Err(PathError::EmptySegment);
        }
        check_segment(segment).map_err(|reason| PathError::Segment {
            position: index + 1,
            preview: preview(segment),
            reason,
        })?;
        segments.push(segment.to_owned());
    }
    Ok(segments)
}

fn normalise(input: &str) -> Result<String, PathError> {
    if input.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong {
            max: MAX_PATH_BYTES,
        });
    }
    let normalised = text::nfc(input);
    if normalised.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong {
            max: MAX_PATH_BYTES,
        });
    }
    Ok(normalised)
}

/// A path relative to a mount root: zero or more validated, NFC-normalised
/// segments. `./` segments and one trailing `/` are dropped; nothing else is
/// rewritten — anything else suspicious is refused.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RelPath {
    segments: Vec<String>,
}

impl RelPath {
    /// Parses a path that must name something inside the mount (at least one
    /// segment). Use [`RelPath::parse_dir`] where the mount root itself is fine.
    pub fn parse(input: &str) -> Result<Self, PathError> {
        let path = Self::parse_dir(input)?;
        if path.is_root() {
            return Err(PathError::Empty);
        }
        Ok(path)
    }

    /// Parses a folder path where the empty string, `.` and `./` mean the
    /// mount root.
    pub fn parse_dir(input: &str) -> Result<Self, PathError> {
        let normalised = normalise(input)?;
        if normalised.starts_with('/') {
            return Err(PathError::Absolute);
        }
        Ok(Self {
            segments: parse_segments(&normalised)?,
        })
    }

    /// The mount root: no segments.
    pub fn root() -> Self {
        Self {
            segments: Vec::new(),
        }
    }

    /// True for the mount root.
    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    /// The validated segments, in order. Build URLs from these, one
    /// percent-encoded segment at a time.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The last segment, if any.
    pub fn file_name(&self) -> Option<&str> {
        self.segments.last().map(String::as_str)
    }

    /// The containing folder (the root's parent is `None`).
    pub fn parent(&self) -> Option<RelPath> {
        let (_, init) = self.segments.split_last()?;
        Some(Self {
            segments: init.to_vec(),
        })
    }

    /// This path followed by `other`.
    pub fn join(&self, other: &RelPath) -> RelPath {
        let mut segments = self.segments.clone();
        segments.extend(other.segments.iter().cloned());
        Self { segments }
    }

    /// True when `self` is `other` or lies inside it (segment-wise).
    pub fn starts_with(&self, other: &RelPath) -> bool {
        self.segments.starts_with(&other.segments)
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Segment by segment: a joined copy was an allocation per display.
        for (index, segment) in self.segments.iter().enumerate() {
            if index > 0 {
                f.write_str("/")?;
            }
            f.write_str(segment)?;
        }
        Ok(())
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RelPath({:?})", self.to_string())
    }
}

impl TryFrom<String> for RelPath {
    type Error = PathError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse_dir(&value)
    }
}

impl From<RelPath> for String {
    fn from(value: RelPath) -> String {
        value.to_string()
    }
}

/// An absolute path inside the file store's user tree, such as a mount root
/// (`/Projects/Alpha`) or a user-relative file path as the search API
/// returns it (`/Projects/Alpha/notes.md`). Same segment rules as [`RelPath`].
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AbsPath {
    segments: Vec<String>,
}

/// Why a path is not inside a required prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// The candidate is not a valid path at all.
    #[error(transparent)]
    Invalid(#[from] PathError),
    /// The candidate is valid but lies outside the prefix.
    #[error("path is outside {prefix}")]
    Outside {
        /// The required prefix, with a trailing slash.
        prefix: String,
    },
}

impl AbsPath {
    /// Parses an absolute path; `/` alone is the root of the user tree.
    pub fn parse(input: &str) -> Result<Self, PathError> {
        let normalised = normalise(input)?;
        let rest = normalised.strip_prefix('/').ok_or(PathError::NotAbsolute)?;
        if rest.starts_with('/') {
            return Err(PathError::EmptySegment);
        }
        Ok(Self {
            segments: parse_segments(rest)?,
        })
    }

    /// The root of the user tree, `/`.
    pub fn root() -> Self {
        Self {
            segments: Vec::new(),
        }
    }

    /// The validated segments, in order.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The folder holding this path (`None` for the root).
    pub fn parent(&self) -> Option<AbsPath> {
        let (_, init) = self.segments.split_last()?;
        Some(Self {
            segments: init.to_vec(),
        })
    }

    /// This path with `rel` appended.
    pub fn join(&self, rel: &RelPath) -> AbsPath {
        let mut segments = self.segments.clone();
        segments.extend(rel.segments().iter().cloned());
        Self { segments }
    }

    /// This path with one more segment, a project's folder name.
    pub fn child(&self, name: &crate::names::ProjectName) -> AbsPath {
        let mut segments = self.segments.clone();
        segments.push(name.as_str().to_owned());
        Self { segments }
    }

    /// This path with one more segment named exactly `name` (a name read
    /// from a directory listing). Fails when `name` is not a valid segment
    /// or is not already in NFC form (it could not be addressed again).
    pub fn join_name(&self, name: &str) -> Result<AbsPath, PathError> {
        let segments = parse_segments(name)?;
        match segments.as_slice() {
            [only] if only == name && text::nfc(name) == name => {
                let mut path = self.clone();
                path.segments.push(name.to_owned());
                Ok(path)
            }
            [_] => Err(PathError::Segment {
                position: 1,
                preview: preview(name),
                reason: SegmentError::Lookalike,
            }),
            _ => Err(PathError::EmptySegment),
        }
    }

    /// The path with a trailing slash, as prefixes are shown to callers
    /// (`/Projects/Alpha/`).
    pub fn as_prefix(&self) -> String {
        if self.segments.is_empty() {
            "/".to_owned()
        } else {
            format!("/{}/", self.segments.join("/"))
        }
    }

    /// True when `other` is this path or lies inside it, comparing whole
    /// segments: `/base/proj-a-evil` is not inside `/base/proj-a`.
    pub fn contains(&self, other: &AbsPath) -> bool {
        other.segments.starts_with(&self.segments)
    }

    /// Checks an untrusted absolute path string against this prefix and
    /// returns the part below it (the root when equal). The candidate is
    /// parsed with every path rule first, so `..`, encoded dots, look-alike
    /// slashes and sibling names (`/base/proj-a-evil/x` against
    /// `/base/proj-a`) all fail.
    pub fn strip_prefix_of(&self, candidate: &str) -> Result<RelPath, PrefixError> {
        let candidate = AbsPath::parse(candidate)?;
        match candidate.segments.strip_prefix(self.segments.as_slice()) {
            Some(rest) => Ok(RelPath {
                segments: rest.to_vec(),
            }),
            None => Err(PrefixError::Outside {
                prefix: self.as_prefix(),
            }),
        }
    }
}

impl fmt::Display for AbsPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str("/");
        }
        for segment in &self.segments {
            f.write_str("/")?;
            f.write_str(segment)?;
        }
        Ok(())
    }
}

impl fmt::Debug for AbsPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AbsPath({:?})", self.to_string())
    }
}

impl TryFrom<String> for AbsPath {
    type Error = PathError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

/// An absolute path is a string on the wire (`/Projects/Alpha`).
impl schemars::JsonSchema for AbsPath {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AbsPath".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "An absolute path in the file store's user tree (`/Projects/Alpha`): `/`-separated names, no `.`, `..` or empty segments.",
            "pattern": "^(?!.*/\\.{1,2}(/|$))(/[^/\\\\\\u0000-\\u001f\\u007f-\\u009f]+)+$"
        })
    }
}

impl From<AbsPath> for String {
    fn from(value: AbsPath) -> String {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use SegmentError::*;

    #[test]
    fn paths_display_as_their_segments_joined() {
        for written in [
            "",
            "a",
            "a/b",
            "docs/report.md",
            "x/y/z/w.txt",
            "Größe/ΟΔΟΣ/a b",
        ] {
            let rel = RelPath::parse_dir(written).unwrap();
            let segments: Vec<String> = written
                .split('/')
                .filter(|s| !s.is_empty() && *s != ".")
                .map(text::nfc)
                .collect();
            assert_eq!(rel.to_string(), segments.join("/"), "{written:?}");
            let abs = AbsPath::parse(&format!("/{written}")).unwrap();
            assert_eq!(
                abs.to_string(),
                format!("/{}", segments.join("/")),
                "{written:?}"
            );
        }
    }

    /// What a case expects: the normalised path, or the error.
    enum Want {
        Ok(&'static str),
        Err(PathError),
        Seg(SegmentError),
    }

    fn check(input: &str, want: Want) {
        let got = RelPath::parse(input);
        match want {
            Want::Ok(path) => {
                let got = got.unwrap_or_else(|e| panic!("input {input:?}: {e}"));
                assert_eq!(got.to_string(), path, "input {input:?}");
            }
            Want::Err(err) => assert_eq!(got, Err(err), "input {input:?}"),
            Want::Seg(reason) => assert_eq!(
                got.map_err(|e| e.segment_reason()),
                Err(Some(reason)),
                "input {input:?}"
            ),
        }
    }

    #[test]
    fn accepts_ordinary_names_and_normalises_dot_segments() {
        check("notes/plan.md", Want::Ok("notes/plan.md"));
        check("./notes/plan.md", Want::Ok("notes/plan.md"));
        check("notes/./plan.md", Want::Ok("notes/plan.md"));
        check("notes/", Want::Ok("notes"));
        check("a+b c#d?e;f.md", Want::Ok("a+b c#d?e;f.md"));
        check("Q3 report (final).xlsx", Want::Ok("Q3 report (final).xlsx"));
        check("会议纪要/2026-11-20.md", Want::Ok("会议纪要/2026-11-20.md"));
        check("cafe\u{301}.txt", Want::Ok("caf\u{e9}.txt"));
        check("50% done.txt", Want::Ok("50% done.txt"));
        check("x:y", Want::Ok("x:y"));
        check("~user", Want::Ok("~user"));
        check("..a/b..c", Want::Ok("..a/b..c"));
        check("😀.md", Want::Ok("😀.md"));
        // `..;` is special to Java servlet containers only; WebDAV sees a name.
        check("..;/x", Want::Ok("..;/x"));
        check(".hidden", Want::Ok(".hidden"));
    }

    #[test]
    fn refuses_absolute_empty_and_oversized_paths() {
        check("", Want::Err(PathError::Empty));
        check(".", Want::Err(PathError::Empty));
        check("./", Want::Err(PathError::Empty));
        check("/etc/passwd", Want::Err(PathError::Absolute));
        check("/", Want::Err(PathError::Absolute));
        check("//evil.example/x", Want::Err(PathError::Absolute));
        check("a//b", Want::Err(PathError::EmptySegment));
        check("a/b//", Want::Err(PathError::EmptySegment));
        check(
            &"a/".repeat(600),
            Want::Err(PathError::TooLong {
                max: MAX_PATH_BYTES,
            }),
        );
        check(&"a".repeat(251), Want::Seg(TooLong { max: 250 }));
        let longest = "a".repeat(250);
        assert_eq!(RelPath::parse(&longest).unwrap().to_string(), longest);
    }

    #[test]
    fn refuses_traversal_in_every_spelling() {
        check("..", Want::Seg(DotName));
        check("../x", Want::Seg(DotName));
        check("a/../../P2/x", Want::Seg(DotName));
        check("a/..", Want::Seg(DotName));
        check(" ..", Want::Seg(DotName));
        check(".. ", Want::Seg(DotName));
        check("..\u{a0}", Want::Seg(DotName));
        check("a\\..\\x", Want::Seg(Separator));
        check("\\\\evil\\share", Want::Seg(Separator));
        check("C:\\x", Want::Seg(Separator));
        check("%2e%2e/x", Want::Seg(PercentEncoded));
        check("%252e%252e/x", Want::Seg(PercentEncoded));
        check("..%2f..%2fx", Want::Seg(PercentEncoded));
        check(".%2e/x", Want::Seg(PercentEncoded));
        check("%c0%ae%c0%ae/x", Want::Seg(PercentEncoded));
        check("%uff0e%uff0e%u2215x", Want::Seg(PercentEncoded));
        check("x%00y", Want::Seg(PercentEncoded));
        check("\u{FF0E}\u{FF0E}/x", Want::Seg(Lookalike));
        check("\u{2025}/x", Want::Seg(Lookalike));
        check("\u{FE52}\u{FE52}/x", Want::Seg(Lookalike));
        check("a\u{FF0F}..\u{FF0F}x", Want::Seg(Lookalike));
        check("a\u{2215}b", Want::Seg(Lookalike));
        check("...", Want::Seg(TrailingDot));
        check("..././x", Want::Seg(TrailingDot));
        check("trail.", Want::Seg(TrailingDot));
    }

    #[test]
    fn refuses_controls_invisibles_padding_and_reserved_names() {
        check("a\0b", Want::Seg(Control));
        check("a\nb", Want::Seg(Control));
        check("a\rb", Want::Seg(Control));
        check("a\u{7f}", Want::Seg(Control));
        check("a\u{85}", Want::Seg(Control));
        check("\u{202E}fdp.exe", Want::Seg(Invisible));
        check("a\u{200B}b", Want::Seg(Invisible));
        check("\u{FEFF}x", Want::Seg(Invisible));
        check("trail ", Want::Seg(Padded));
        check(" lead", Want::Seg(Padded));
        check(".htaccess", Want::Seg(Reserved));
        check("dir/.HTACCESS", Want::Seg(Reserved));
        check("x.part", Want::Seg(Reserved));
        check("x.filepart", Want::Seg(Reserved));
    }

    #[test]
    fn an_absolute_parent_drops_the_last_segment() {
        let path = AbsPath::parse("/Projects/Alpha/a b.md").unwrap();
        assert_eq!(path.parent().unwrap().to_string(), "/Projects/Alpha");
        assert_eq!(
            AbsPath::parse("/top").unwrap().parent(),
            Some(AbsPath::root())
        );
        assert_eq!(AbsPath::root().parent(), None);
    }

    #[test]
    fn parse_dir_accepts_the_root() {
        for root in ["", ".", "./"] {
            assert!(RelPath::parse_dir(root).unwrap().is_root(), "{root:?}");
        }
        assert_eq!(RelPath::parse_dir("a/b/").unwrap().to_string(), "a/b");
        assert_eq!(RelPath::parse_dir("/a"), Err(PathError::Absolute));
    }

    #[test]
    fn segment_errors_name_position_and_escape_the_segment() {
        let err = RelPath::parse("ok/a\u{202E}b").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("segment 2 (\"a\\u{202e}b\")"), "{msg}");
        assert!(!msg.contains('\u{202E}'), "{msg}");
    }

    #[test]
    fn relpath_helpers_work_segment_wise() {
        let p = RelPath::parse("a/b/c.md").unwrap();
        assert_eq!(p.file_name(), Some("c.md"));
        assert_eq!(p.parent().unwrap().to_string(), "a/b");
        assert_eq!(RelPath::root().parent(), None);
        assert!(p.starts_with(&RelPath::parse("a/b").unwrap()));
        assert!(!p.starts_with(&RelPath::parse("a/bb").unwrap()));
        assert_eq!(
            RelPath::parse("a")
                .unwrap()
                .join(&RelPath::parse("b/c").unwrap())
                .to_string(),
            "a/b/c"
        );
    }

    fn check_prefix(prefix: &str, candidate: &str, expected: Result<&str, &str>) {
        let prefix = AbsPath::parse(prefix).unwrap();
        let got = prefix.strip_prefix_of(candidate);
        match expected {
            Ok(rel) => assert_eq!(
                got.as_ref()
                    .map(ToString::to_string)
                    .map_err(ToString::to_string),
                Ok(rel.to_owned()),
                "candidate {candidate:?}"
            ),
            Err(kind) => {
                let err = got.expect_err(candidate);
                let actual = match err {
                    PrefixError::Outside { .. } => "outside",
                    PrefixError::Invalid(_) => "invalid",
                };
                assert_eq!(actual, kind, "candidate {candidate:?}: {err}");
            }
        }
    }

    #[test]
    fn prefix_check_is_segment_wise_and_not_fooled() {
        let base = "/base/proj-a";
        check_prefix(base, "/base/proj-a/notes.md", Ok("notes.md"));
        check_prefix(base, "/base/proj-a/x/y.md", Ok("x/y.md"));
        check_prefix(base, "/base/proj-a/", Ok(""));
        check_prefix(base, "/base/proj-a", Ok(""));
        check_prefix("/base/proj-a/", "/base/proj-a/n.md", Ok("n.md"));
        check_prefix(base, "/base/proj-a-evil/x", Err("outside"));
        check_prefix(base, "/base/proj-a-evil/", Err("outside"));
        check_prefix(base, "/base/proj-ab", Err("outside"));
        check_prefix(base, "/base/proj", Err("outside"));
        check_prefix(base, "/base", Err("outside"));
        check_prefix(base, "/base/proj-b/x", Err("outside"));
        check_prefix(base, "/BASE/proj-a/x", Err("outside"));
        check_prefix(base, "/base/proj-a/../proj-b/x", Err("invalid"));
        check_prefix(base, "/base/proj-a/%2e%2e/proj-b", Err("invalid"));
        check_prefix(base, "/base/proj-a\u{FF0F}..\u{FF0F}proj-b", Err("invalid"));
        check_prefix(base, "/base//proj-a/x", Err("invalid"));
        check_prefix(base, "base/proj-a/x", Err("invalid"));
        check_prefix(base, "/base/proj-a/x\0", Err("invalid"));
        // Unicode: NFD input matches an NFC prefix, as Nextcloud would see it.
        check_prefix("/base/Café", "/base/Cafe\u{301}/x.md", Ok("x.md"));
        check_prefix("/", "/anything/x", Ok("anything/x"));
    }

    #[test]
    fn join_name_accepts_exactly_one_plain_segment() {
        let base = AbsPath::parse("/Projects").unwrap();
        assert_eq!(
            base.join_name("Alpha").unwrap().to_string(),
            "/Projects/Alpha"
        );
        assert_eq!(
            AbsPath::root().join_name("x.md").unwrap().to_string(),
            "/x.md"
        );
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a\\b",
            "cafe\u{301}",
            "x%2e",
            "trail.",
        ] {
            assert!(base.join_name(bad).is_err(), "{bad:?}");
        }
        // `.` alone is dropped by the segment parser: it is not a name.
        assert!(base.join_name("./").is_err());
    }

    #[test]
    fn abs_paths_render_with_and_without_trailing_slash() {
        let p = AbsPath::parse("/Projects/Alpha/").unwrap();
        assert_eq!(p.to_string(), "/Projects/Alpha");
        assert_eq!(p.as_prefix(), "/Projects/Alpha/");
        assert_eq!(AbsPath::root().as_prefix(), "/");
        assert_eq!(AbsPath::root().to_string(), "/");
        assert_eq!(AbsPath::parse("Projects"), Err(PathError::NotAbsolute));
        let name = crate::names::ProjectName::parse("Beta").unwrap();
        assert_eq!(
            AbsPath::parse("/Projects")
                .unwrap()
                .child(&name)
                .to_string(),
            "/Projects/Beta"
        );
        assert!(p.contains(&AbsPath::parse("/Projects/Alpha/x").unwrap()));
        assert!(!p.contains(&AbsPath::parse("/Projects/Alpha-evil/x").unwrap()));
    }
}
