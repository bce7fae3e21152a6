//! The traversal corpus and the one oracle every scope test judges by.
//!
//! [`payloads`] is the public corpus (`$ACDM_SHARED_DIR/corpus/traversal/`,
//! the `*.txt` files, one payload a line) together with [`HAND_WRITTEN`],
//! the Unicode and WebDAV cases of `shared/reference/security-notes.md`
//! §3.1. Without the corpus only the hand-written cases run — unless
//! `ACDM_REQUIRE_CORPUS` is set (CI), where its absence fails the test.
//!
//! [`land`] says where a WebDAV server (sabre/dav under Nextcloud, or any
//! lenient server in front of a disk) could take a raw request path, and
//! refuses every spelling that leaves room for doubt; [`Scope`] says
//! whether that landing is inside one project's folder (or its trash).

use std::collections::BTreeSet;
use std::path::PathBuf;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use unicode_normalization::UnicodeNormalization;

/// The trash beside the project folders (`<base>/.acdm-trash/<slug>/…`).
pub const TRASH: &str = ".acdm-trash";

/// Hand-written payloads: what the public corpora miss (Unicode look-alikes,
/// WebDAV and Nextcloud specials, the trash in several spellings, the
/// sibling-prefix and cross-project attacks).
pub const HAND_WRITTEN: &[&str] = &[
    "..",
    " ..",
    ".. ",
    "..\u{a0}",
    "a/../../P2/x",
    "a/../../Beta/x",
    "a//b",
    "\\\\evil\\share",
    "C:\\x",
    "\u{FF0E}\u{FF0E}/x",
    "\u{2025}/x",
    "\u{FE52}\u{FE52}/x",
    "a\u{FF0F}..\u{FF0F}x",
    "a\u{2215}b",
    "a\0b",
    "x%00y",
    "\n",
    "%2e%2e/x",
    "%252e%252e/x",
    "..%2f..%2fx",
    "a#b",
    "a?b=c",
    "a;b",
    "cafe\u{301}",
    "caf\u{e9}",
    "\u{202E}txt.exe",
    "a\u{200B}b",
    ".htaccess",
    ".HTACCESS",
    "x.part",
    "x.filepart",
    "trail.",
    "trail ",
    "CON",
    "aux.txt",
    "😀",
    "dir/",
    "//double",
    "//evil.example/x",
    "x:y",
    "~user",
    "%c0%ae%c0%ae/x",
    "a+b c#d?e;f.md",
    "../Beta/secret.md",
    "../Beta/x.md",
    "./../Beta",
    "Alpha/../Beta",
    "Alpha-evil",
    "/Projects/Beta/x",
    // The trash beside the projects, in several spellings.
    ".acdm-trash",
    ".ACDM-TRASH",
    ".Acdm-Trash",
    ".acdm-trash/alpha/x.md",
    ".acdm-trash/alpha/e/0/x.md",
    "../.acdm-trash/alpha/x.md",
    "../.acdm-trash/alpha/e/0/x.md",
    "/Projects/.acdm-trash/alpha/x.md",
    "/Projects/.acdm-trash/alpha/e/0/x.md",
    "\u{FF0E}acdm-trash",
    ".acdm-trash\u{200B}",
];

/// The public corpus's payloads, or `None` when it is not there.
///
/// # Panics
///
/// When it is missing and `ACDM_REQUIRE_CORPUS` is set, when it has fewer
/// than its four files, or when a file cannot be read.
pub fn corpus() -> Option<BTreeSet<String>> {
    let shared = crate::setting("ACDM_SHARED_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
        PathBuf::from,
    );
    let dir = shared.join("corpus/traversal");
    if !dir.is_dir() {
        assert!(
            crate::setting("ACDM_REQUIRE_CORPUS").is_none(),
            "ACDM_REQUIRE_CORPUS is set but the traversal corpus is not at {}; set ACDM_SHARED_DIR",
            dir.display()
        );
        #[expect(clippy::print_stderr, reason = "tells why the corpus is left out")]
        {
            eprintln!(
                "traversal corpus not found at {}; only the hand-written cases run",
                dir.display()
            );
        }
        return None;
    }
    let mut all = BTreeSet::new();
    let mut files = 0;
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
            .path();
        if path.extension().is_some_and(|e| e == "txt") {
            files += 1;
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            all.extend(text.lines().map(str::to_owned));
        }
    }
    assert!(
        files >= 4,
        "expected the four corpus files in {}",
        dir.display()
    );
    Some(all)
}

/// [`HAND_WRITTEN`] and, when it is there, the public corpus.
///
/// # Panics
///
/// As [`corpus`].
pub fn payloads() -> BTreeSet<String> {
    let mut all: BTreeSet<String> = HAND_WRITTEN.iter().map(|s| (*s).to_owned()).collect();
    all.extend(corpus().unwrap_or_default());
    all
}

/// What a URL path segment keeps unencoded: RFC 3986's unreserved
/// characters, as the adapters encode.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The absolute URL path of these segments, each percent-encoded on its own
/// (everything but unreserved characters).
pub fn url_path<S: AsRef<str>>(segments: &[S]) -> String {
    segments
        .iter()
        .map(|s| format!("/{}", utf8_percent_encode(s.as_ref(), SEGMENT)))
        .collect()
}

/// How many times [`land`] decodes a path looking for hidden dots and
/// separators.
const DECODE_DEPTH: usize = 8;

/// Where a raw request path (still percent-encoded, without query) lands:
/// its segments decoded once (as sabre/dav decodes) and NFC-normalised.
///
/// Refused, with the reason, is any spelling under which some server could
/// land elsewhere: not absolute; not decodable once as UTF-8; a backslash,
/// or `%2e`, `%2f`, `%5c` (any case), at any depth of repeated decoding; a
/// dot segment (`.`, `..`, padded with spaces, or a Unicode look-alike
/// folding to one) at any depth; an empty segment (`//`, one trailing `/`
/// aside); a control character or a look-alike separator in a segment.
pub fn land(raw: &str) -> Result<Vec<String>, String> {
    if !raw.starts_with('/') {
        return Err("not an absolute path".to_owned());
    }
    let mut text = raw.to_owned();
    let mut once = None;
    for depth in 0..DECODE_DEPTH {
        let spelled = if depth == 0 {
            "raw".to_owned()
        } else {
            format!("after {depth} decoding(s)")
        };
        if text.contains('\\') {
            return Err(format!("backslash ({spelled})"));
        }
        let lower = text.to_ascii_lowercase();
        if ["%2e", "%2f", "%5c"].iter().any(|e| lower.contains(e)) {
            return Err(format!("encoded dot, slash or backslash ({spelled})"));
        }
        if text.split('/').any(is_dot_segment) {
            return Err(format!("dot segment ({spelled})"));
        }
        let Some(decoded) = decode(&text) else {
            if depth == 0 {
                return Err("not decodable once as UTF-8".to_owned());
            }
            break;
        };
        if once.is_none() {
            once = Some(decoded.clone());
        }
        if decoded == text {
            break;
        }
        text = decoded;
    }
    let once: String = once.unwrap_or_default().nfc().collect();
    let body = once.strip_prefix('/').unwrap_or(&once);
    let body = body.strip_suffix('/').unwrap_or(body);
    if body.is_empty() {
        return Ok(Vec::new());
    }
    let mut segments = Vec::new();
    for segment in body.split('/') {
        if segment.is_empty() {
            return Err("empty segment".to_owned());
        }
        if segment.chars().any(char::is_control) {
            return Err(format!("control character in {segment:?}"));
        }
        if segment.nfkc().any(|c| matches!(c, '/' | '\\')) {
            return Err(format!("look-alike separator in {segment:?}"));
        }
        segments.push(segment.to_owned());
    }
    Ok(segments)
}

/// `.` or `..`, also padded with whitespace or spelled with look-alikes
/// that fold to them.
fn is_dot_segment(segment: &str) -> bool {
    let folded: String = segment.nfkc().collect();
    [segment, folded.as_str()]
        .iter()
        .any(|s| matches!(s.trim(), "." | ".."))
}

/// `%XX` decoded once; `None` when a `%` is not followed by two hex digits
/// or the bytes are not UTF-8.
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let well_formed = bytes.iter().enumerate().all(|(i, b)| {
        *b != b'%'
            || bytes
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
    });
    if !well_formed {
        return None;
    }
    percent_decode_str(text)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// One project's folder (and optionally its trash) under a base folder:
/// where requests made for that project may land.
#[derive(Debug, Clone)]
pub struct Scope {
    base: Vec<String>,
    project: Vec<String>,
    trash: Option<Vec<String>>,
    list_base: bool,
}

impl Scope {
    /// The folder `folder` under `base` (segments, such as
    /// `["remote.php", "dav", "files", "u", "Projects"]`).
    pub fn new<S: AsRef<str>>(base: &[S], folder: &str) -> Self {
        let base: Vec<String> = base.iter().map(|s| s.as_ref().to_owned()).collect();
        let mut project = base.clone();
        project.push(folder.to_owned());
        Self {
            base,
            project,
            trash: None,
            list_base: false,
        }
    }

    /// Also the project's trash, `<base>/.acdm-trash/<slug>`.
    #[must_use]
    pub fn with_trash(mut self, slug: &str) -> Self {
        let mut trash = self.base.clone();
        trash.push(TRASH.to_owned());
        trash.push(slug.to_owned());
        self.trash = Some(trash);
        self
    }

    /// Also a `PROPFIND` of the base itself, at any depth (looking for a
    /// project folder whose name differs only in case).
    #[must_use]
    pub fn listing_the_base(mut self) -> Self {
        self.list_base = true;
        self
    }

    /// Where a request (`method`, raw path, `Depth` header) lands, or why
    /// it must not be sent for this project. Inside are the project folder
    /// and the trash (when allowed) — the folder itself only for `PROPFIND`
    /// and `MKCOL`; their ancestors from the base down only for `MKCOL` and
    /// a depth-0 `PROPFIND`; the trash, in any case (servers compare names
    /// without case on some file systems), never otherwise.
    pub fn judge(
        &self,
        method: &str,
        raw: &str,
        depth: Option<&str>,
    ) -> Result<Vec<String>, String> {
        let landed = land(raw)?;
        let is = |m: &str| method.eq_ignore_ascii_case(m);
        let roots: Vec<&Vec<String>> = std::iter::once(&self.project)
            .chain(self.trash.as_ref())
            .collect();
        let ancestor = landed.len() >= self.base.len()
            && roots
                .iter()
                .any(|r| r.len() > landed.len() && r.starts_with(&landed));
        if ancestor && (is("MKCOL") || (is("PROPFIND") && depth == Some("0"))) {
            return Ok(landed);
        }
        let in_trash = self.trash.as_ref().is_some_and(|t| landed.starts_with(t));
        let names_the_trash = landed.starts_with(&self.base)
            && landed
                .get(self.base.len())
                .is_some_and(|s| s.to_lowercase() == TRASH);
        if names_the_trash && !in_trash {
            return Err("reaches the trash".to_owned());
        }
        for root in &roots {
            if landed.starts_with(root) {
                if landed.len() == root.len() && !(is("PROPFIND") || is("MKCOL")) {
                    return Err(format!("{method} on the folder {root:?} itself"));
                }
                return Ok(landed);
            }
        }
        if self.list_base && is("PROPFIND") && landed == self.base {
            return Ok(landed);
        }
        Err(format!(
            "outside {:?}",
            roots.iter().map(|r| r.join("/")).collect::<Vec<_>>()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{Scope, land, url_path};

    fn alpha() -> Scope {
        Scope::new(&["dav", "Projects"], "Alpha").with_trash("alpha")
    }

    #[test]
    fn plain_paths_land_where_they_say() {
        assert_eq!(
            land("/dav/Projects/Alpha/caf%C3%A9%20x.md").as_deref(),
            Ok(&["dav", "Projects", "Alpha", "café x.md"].map(str::to_owned)[..])
        );
        assert_eq!(land("/dav/x/").map(|s| s.len()), Ok(2));
        assert_eq!(land("/"), Ok(Vec::new()));
        // A literal `%` in a name is encoded once and decodes once.
        assert!(land("/dav/50%25.md").is_ok());
    }

    #[test]
    fn every_doubtful_spelling_is_refused() {
        for raw in [
            "dav/x",
            "/dav/../x",
            "/dav/./x",
            "/dav/%2e%2e/x",
            "/dav/%2E./x",
            "/dav/a%2Fb",
            "/dav/a%5Cb",
            "/dav/a\\b",
            "/dav/%252e%252e/x",
            "/dav/%25252e%25252e/x",
            "/dav/%20../x",
            "/dav/%EF%BC%8E%EF%BC%8E/x",
            "/dav/a%EF%BC%8Fb",
            "/dav//x",
            "/dav/a%00b",
            "/dav/%zz",
            "/dav/%C0%AE",
        ] {
            assert!(land(raw).is_err(), "{raw} was not refused");
        }
    }

    #[test]
    fn the_scope_is_the_project_and_its_trash_and_nothing_beside() {
        let scope = alpha();
        assert!(scope.judge("GET", "/dav/Projects/Alpha/x.md", None).is_ok());
        assert!(
            scope
                .judge("PROPFIND", "/dav/Projects/Alpha", Some("1"))
                .is_ok()
        );
        assert!(scope.judge("PUT", "/dav/Projects/Alpha", None).is_err());
        assert!(
            scope
                .judge("MOVE", "/dav/Projects/.acdm-trash/alpha/e/x", None)
                .is_ok()
        );
        assert!(
            scope
                .judge("MKCOL", "/dav/Projects/.acdm-trash", None)
                .is_ok()
        );
        assert!(scope.judge("PROPFIND", "/dav/Projects", Some("0")).is_ok());
        for (method, raw) in [
            ("PROPFIND", "/dav/Projects"),
            ("GET", "/dav/Projects/Alpha-evil/x"),
            ("GET", "/dav/Projects/Beta/x"),
            ("GET", "/dav/Projects/.acdm-trash/beta/x"),
            ("GET", "/dav/Projects/.ACDM-TRASH/alpha/x"),
            ("GET", "/dav/Projects/alpha/x"),
            ("MKCOL", "/dav"),
        ] {
            assert!(
                scope.judge(method, raw, Some("1")).is_err(),
                "{method} {raw}"
            );
        }
        let listing = Scope::new(&["dav", "Projects"], "Alpha").listing_the_base();
        assert!(listing.judge("PROPFIND", "/dav/Projects", None).is_ok());
        assert!(
            listing
                .judge("GET", "/dav/Projects/.acdm-trash/alpha/x", None)
                .is_err()
        );
    }

    #[test]
    fn url_paths_encode_each_segment() {
        assert_eq!(url_path(&["a b", "c/d", "é~"]), "/a%20b/c%2Fd/%C3%A9~");
    }
}
