//! The values that cross the source traits: entries, etags, preconditions,
//! byte windows, wiki hits and file-search hits.

use std::fmt;
use std::pin::Pin;

use acdm_core::{AbsPath, RelPath};
use bytes::{Bytes, BytesMut};
use chrono::{DateTime, Utc};
use futures_util::{Stream, StreamExt};
use serde::{Deserialize, Serialize};

use crate::error::SourceError;

/// An entity tag, as servers send it: quoted (`"abc"`), unquoted (wsgidav's
/// PROPFIND) or weak (`W/"abc"`). Kept as its opaque value plus the weak
/// flag; sent back in the quoted form HTTP requires.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ETag {
    value: String,
    weak: bool,
}

impl ETag {
    /// Parses an etag in any of the forms servers use. `None` for an empty
    /// value or one with characters an etag cannot hold.
    pub fn parse(raw: &str) -> Option<Self> {
        let raw = raw.trim();
        let (weak, rest) = match raw.strip_prefix("W/").or_else(|| raw.strip_prefix("w/")) {
            Some(rest) => (true, rest),
            None => (false, raw),
        };
        let value = rest
            .strip_prefix('"')
            .and_then(|r| r.strip_suffix('"'))
            .unwrap_or(rest);
        let valid = !value.is_empty()
            && value.len() <= 256
            && value.bytes().all(|b| b.is_ascii_graphic() && b != b'"');
        valid.then(|| Self {
            value: value.to_owned(),
            weak,
        })
    }

    /// A strong etag with this opaque value.
    pub fn strong(value: impl Into<String>) -> Option<Self> {
        Self::parse(&value.into())
    }

    /// True for a weak etag (never matches `If-Match`).
    pub fn is_weak(&self) -> bool {
        self.weak
    }

    /// The opaque value without quotes.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The form sent in `If-Match`: `"abc"` or `W/"abc"`.
    pub fn header_value(&self) -> String {
        if self.weak {
            format!("W/\"{}\"", self.value)
        } else {
            format!("\"{}\"", self.value)
        }
    }

    /// Strong comparison (RFC 9110 §8.8.3.2), the one `If-Match` uses.
    pub fn strong_eq(&self, other: &ETag) -> bool {
        !self.weak && !other.weak && self.value == other.value
    }
}

impl fmt::Display for ETag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.header_value())
    }
}

impl fmt::Debug for ETag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ETag({})", self.header_value())
    }
}

impl Serialize for ETag {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.header_value())
    }
}

impl<'de> Deserialize<'de> for ETag {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        ETag::parse(&raw).ok_or_else(|| serde::de::Error::custom("not an etag such as \"5f2a\""))
    }
}

/// File or folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A file.
    File,
    /// A folder.
    Folder,
}

/// One file or folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Absolute path in the store's user tree.
    pub path: AbsPath,
    /// File or folder.
    pub kind: EntryKind,
    /// Size in bytes (files; folders when the store knows it).
    pub size: Option<u64>,
    /// Last modification.
    pub modified: Option<DateTime<Utc>>,
    /// Current etag.
    pub etag: Option<ETag>,
    /// MIME type (files).
    pub content_type: Option<String>,
}

impl Entry {
    /// The last path segment (empty for the root).
    pub fn name(&self) -> &str {
        self.path.segments().last().map_or("", String::as_str)
    }

    /// True for a folder.
    pub fn is_folder(&self) -> bool {
        self.kind == EntryKind::Folder
    }
}

/// A write precondition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Precondition {
    /// Write whatever is there.
    #[default]
    None,
    /// Only if the current etag is this one (`If-Match`).
    IfMatch(ETag),
    /// Only if nothing is there yet (`If-None-Match: *`).
    CreateOnly,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// A new file (as opposed to overwriting one).
    pub created: bool,
    /// The new etag, when the store reports one.
    pub etag: Option<ETag>,
}

/// A byte window: `len` bytes from `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRange {
    /// First byte.
    pub offset: u64,
    /// How many bytes at most (at least 1).
    pub len: u64,
}

impl ReadRange {
    /// `len` bytes from `offset`; a zero length becomes 1.
    pub fn new(offset: u64, len: u64) -> Self {
        Self {
            offset,
            len: len.max(1),
        }
    }
}

/// The body of a ranged read, streamed.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, SourceError>> + Send>>;

/// A ranged read in progress: what is known about the file, and its bytes
/// from the window's offset, never more than the window's length.
pub struct ReadStream {
    /// Total size of the file, when known.
    pub size: Option<u64>,
    /// Etag of the version being read.
    pub etag: Option<ETag>,
    /// MIME type, when known.
    pub content_type: Option<String>,
    /// Where the window starts.
    pub offset: u64,
    /// The bytes.
    pub body: ByteStream,
}

impl fmt::Debug for ReadStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadStream")
            .field("size", &self.size)
            .field("etag", &self.etag)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

/// A read window held in memory (at most the window's length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Total size of the file, when known.
    pub size: Option<u64>,
    /// Etag of the version read.
    pub etag: Option<ETag>,
    /// MIME type, when known.
    pub content_type: Option<String>,
    /// Where the window starts.
    pub offset: u64,
    /// The bytes.
    pub bytes: Bytes,
}

impl Window {
    /// True when the file continues after this window (or may, when the
    /// size is unknown and the window is full).
    pub fn has_more(&self, requested_len: u64) -> bool {
        let end = self.offset + self.bytes.len() as u64;
        match self.size {
            Some(size) => end < size,
            None => self.bytes.len() as u64 >= requested_len,
        }
    }
}

impl ReadStream {
    /// Collects the window into memory. The stream never yields more than
    /// the window's length, so memory stays bounded by it.
    pub async fn collect(mut self, len: u64) -> Result<Window, SourceError> {
        let capacity = usize::try_from(len.min(8 << 20)).unwrap_or(8 << 20);
        let mut buffer = BytesMut::with_capacity(capacity);
        while let Some(chunk) = self.body.next().await {
            let chunk = chunk?;
            let room = usize::try_from(len)
                .unwrap_or(usize::MAX)
                .saturating_sub(buffer.len());
            buffer.extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
            if buffer.len() as u64 >= len {
                break;
            }
        }
        Ok(Window {
            size: self.size,
            etag: self.etag,
            content_type: self.content_type,
            offset: self.offset,
            bytes: buffer.freeze(),
        })
    }
}

/// Skips `offset` bytes of `body` and yields at most `len` bytes after them:
/// a window over a stream that may start at byte 0 (a server that ignores
/// `Range`, or GitLab's raw endpoint, which has none). Nothing is buffered
/// beyond one chunk.
pub(crate) fn window_of(body: ByteStream, offset: u64, len: u64) -> ByteStream {
    let state = (body, offset, len);
    Box::pin(futures_util::stream::unfold(
        state,
        |(mut body, mut skip, mut left)| async move {
            loop {
                if left == 0 {
                    return None;
                }
                let chunk = match body.next().await? {
                    Ok(chunk) => chunk,
                    Err(error) => return Some((Err(error), (body, 0, 0))),
                };
                let mut chunk = chunk;
                if skip > 0 {
                    let drop = usize::try_from(skip.min(chunk.len() as u64)).unwrap_or(chunk.len());
                    skip -= drop as u64;
                    chunk = chunk.slice(drop..);
                    if chunk.is_empty() {
                        continue;
                    }
                }
                let take = usize::try_from(left.min(chunk.len() as u64)).unwrap_or(chunk.len());
                left -= take as u64;
                return Some((Ok(chunk.slice(..take)), (body, skip, left)));
            }
        },
    ))
}

/// A git ref (branch, tag or commit) for wiki reads: 1–255 of `A-Z`, `a-z`,
/// `0-9`, `.`, `_`, `-`, `/`, not starting with `-` or `/`, without `..`,
/// `//` or a trailing `/` or `.lock`.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct GitRef(String);

impl GitRef {
    /// Parses a ref name.
    pub fn parse(input: &str) -> Result<Self, SourceError> {
        let ok = !input.is_empty()
            && input.len() <= 255
            && input
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'))
            && !input.starts_with(['-', '/'])
            && !input.ends_with('/')
            && !input.ends_with(".lock")
            && !input.contains("..")
            && !input.contains("//");
        if ok {
            Ok(Self(input.to_owned()))
        } else {
            Err(SourceError::InvalidRequest(format!(
                "`{}` is not a branch, tag or commit name",
                input.escape_debug()
            )))
        }
    }

    /// The ref name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GitRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for GitRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GitRef({:?})", self.0)
    }
}

impl TryFrom<String> for GitRef {
    type Error = SourceError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<GitRef> for String {
    fn from(value: GitRef) -> String {
        value.0
    }
}

/// A wiki search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WikiQuery {
    /// What to look for (file names and contents, case-insensitive).
    pub term: String,
    /// How many hits at most (1–100).
    pub limit: usize,
    /// Only under this folder of the repository.
    pub path_prefix: Option<RelPath>,
    /// Which ref; the source's default branch when `None`.
    pub git_ref: Option<GitRef>,
}

/// One wiki search hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WikiHit {
    /// Path in the repository.
    pub path: RelPath,
    /// 1-based line of the snippet's first line (1 for a file-name match).
    pub start_line: u64,
    /// A few lines around the match (empty for a file-name match).
    pub snippet: String,
}

/// The answer to a wiki search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WikiSearch {
    /// The hits, file-name matches first.
    pub hits: Vec<WikiHit>,
    /// How many hits the source counted in all, when it says.
    pub total: Option<u64>,
}

/// A window of a wiki file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WikiWindow {
    /// Path in the repository.
    pub path: RelPath,
    /// The ref read.
    pub git_ref: GitRef,
    /// The window.
    pub window: Window,
}

/// The most files [`crate::WikiSource::tree`] lists: a larger tree is
/// refused rather than cut short (a sync that saw part of the tree would
/// drop the rest).
pub(crate) const MAX_TREE_FILES: usize = 100_000;

/// Where the wiki's default ref points now: what [`crate::WikiSource::head`]
/// answers. The commit changes whenever anything in the wiki changes, so a
/// copy kept in sync compares it first and asks for the tree only when it
/// moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WikiHead {
    /// The commit id (a full SHA on GitLab; a digest of the files on the
    /// local wiki): pass it to [`crate::WikiSource::tree`], and as a
    /// [`GitRef`] to [`crate::WikiSource::read`].
    pub commit: String,
    /// The ref it was read from (the configured default branch).
    pub ref_name: GitRef,
    /// When that commit was made (GitLab's `committed_date`; the newest
    /// modification time on the local wiki), when known.
    pub committed_at: Option<DateTime<Utc>>,
}

/// One file of the wiki's tree at a commit, as
/// [`crate::WikiSource::tree`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WikiBlob {
    /// Path in the repository.
    pub path: RelPath,
    /// The version of the file: git's blob id on GitLab (equal ids, equal
    /// bytes); on the local wiki a digest of the file's path and metadata.
    /// The file changed when its id did.
    pub blob_id: String,
}

/// One file-search hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHit {
    /// Absolute path of the file or folder.
    pub path: AbsPath,
    /// File or folder, when known.
    pub kind: Option<EntryKind>,
    /// The matching line, for content matches.
    pub snippet: Option<String>,
    /// Its 1-based line number, for content matches.
    pub line: Option<u64>,
}

#[cfg(test)]
mod tests {
    use futures_util::stream;

    use super::*;

    #[test]
    fn etags_parse_in_every_form_servers_send() {
        let check = |raw: &str, expected: Option<(&str, bool)>| {
            let got = ETag::parse(raw).map(|e| (e.value().to_owned(), e.is_weak()));
            assert_eq!(got, expected.map(|(v, w)| (v.to_owned(), w)), "{raw:?}");
        };
        check("\"62d78f47c0b2e\"", Some(("62d78f47c0b2e", false)));
        check("62d78f47c0b2e", Some(("62d78f47c0b2e", false)));
        check("W/\"abc\"", Some(("abc", true)));
        check(" \"abc\" ", Some(("abc", false)));
        check("\"\"", None);
        check("", None);
        check("\"a\"b\"", None);
        check("a b", None);
        assert_eq!(ETag::parse("abc").unwrap().header_value(), "\"abc\"");
        assert!(
            ETag::parse("\"x\"")
                .unwrap()
                .strong_eq(&ETag::parse("x").unwrap())
        );
        assert!(
            !ETag::parse("W/\"x\"")
                .unwrap()
                .strong_eq(&ETag::parse("x").unwrap())
        );
    }

    #[test]
    fn git_refs_are_plain_names() {
        for ok in [
            "main",
            "release/2026.11",
            "v1.2.3",
            "0a1b2c3d",
            "feature_x-y",
            // A full commit SHA (SHA-1 and SHA-256): reads at a commit.
            "7b5c3cc8be40ee161ae89a06bba6229da1032a0c",
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        ] {
            assert!(GitRef::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "-x", "/x", "x/", "a..b", "a//b", "a b", "x.lock", "x?y", "x\0", "ref%2F",
        ] {
            assert!(GitRef::parse(bad).is_err(), "{bad:?}");
        }
    }

    fn chunks(parts: &[&'static [u8]]) -> ByteStream {
        let items: Vec<Result<Bytes, SourceError>> =
            parts.iter().map(|p| Ok(Bytes::from_static(p))).collect();
        Box::pin(stream::iter(items))
    }

    async fn window_bytes(parts: &[&'static [u8]], offset: u64, len: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let mut s = window_of(chunks(parts), offset, len);
        while let Some(c) = s.next().await {
            out.extend_from_slice(&c.unwrap());
        }
        out
    }

    #[tokio::test]
    async fn windows_over_a_stream_skip_and_cap_across_chunk_borders() {
        let parts: &[&'static [u8]] = &[b"abcd", b"efgh", b"ij"];
        assert_eq!(window_bytes(parts, 0, 100).await, b"abcdefghij");
        assert_eq!(window_bytes(parts, 3, 4).await, b"defg");
        assert_eq!(window_bytes(parts, 4, 4).await, b"efgh");
        assert_eq!(window_bytes(parts, 9, 5).await, b"j");
        assert_eq!(window_bytes(parts, 10, 5).await, b"");
        assert_eq!(window_bytes(parts, 2, 1).await, b"c");
    }

    #[tokio::test]
    async fn collecting_never_exceeds_the_window() {
        let stream = ReadStream {
            size: Some(10),
            etag: None,
            content_type: None,
            offset: 0,
            body: chunks(&[b"abcdef", b"ghij"]),
        };
        let w = stream.collect(4).await.unwrap();
        assert_eq!(&w.bytes[..], b"abcd");
        assert!(w.has_more(4));
    }
}
