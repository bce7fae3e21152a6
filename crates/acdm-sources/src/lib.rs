//! acdm-sources: where knowledge and files come from.
//!
//! Four ports, used by the MCP and BFF adapters:
//!
//! - [`WikiSource`]: search and read the wiki (GitLab, or a local folder);
//! - [`FileReader`]: read the project files (Nextcloud WebDAV, or a local
//!   folder) — all the MCP server gets;
//! - [`FileWriter`]: a [`FileReader`] that can also write, move, copy and
//!   make folders — what the journal drives. There is no delete: what a
//!   write removes is moved into the trash, so nothing is ever deleted
//!   upstream, and no type offers to;
//! - [`FileSearch`]: find files under a folder (Nextcloud unified search, or
//!   a local walk).
//!
//! Each has a real implementation and a local-folder one with the same
//! semantics; one contract suite (`tests/contract`) runs against all of
//! them. Every upstream call goes through [`http::HttpClient`]. Errors are
//! [`SourceError`]s whose messages never contain a credential or an
//! upstream URL.
//!
//! Paths: files are addressed by [`AbsPath`] (absolute in the store's user
//! tree: `/Projects/Alpha/notes.md`), wiki files by [`RelPath`] (in the
//! repository). URLs are built one percent-encoded segment at a time from
//! their validated segments.
//!
//! **Architecture invariant:** depends on acdm-core only among workspace
//! crates; knows nothing of axum, MCP or the database.

pub mod deadline;
pub mod error;
pub mod gitlab;
pub mod http;
pub mod local;
pub mod model;
pub mod nextcloud;
pub mod oidc;
pub mod render;
mod unconfigured;
pub mod webhook;

use acdm_core::{AbsPath, RelPath};
use async_trait::async_trait;
use bytes::Bytes;

pub use error::SourceError;
pub use model::{
    ByteStream, ETag, Entry, EntryKind, FileHit, GitRef, Precondition, ReadRange, ReadStream,
    WikiBlob, WikiHead, WikiHit, WikiQuery, WikiSearch, WikiWindow, Window, WriteOutcome,
};
pub use unconfigured::Unconfigured;

/// The wiki: readable by all, searched and read by path at a ref, and
/// listed at a commit so a copy can be kept in sync incrementally: `head`
/// says whether anything changed, `tree` gives each file's blob id, and
/// `read` at the commit (as a [`GitRef`]) fetches only the files whose id
/// changed.
#[async_trait]
pub trait WikiSource: Send + Sync {
    /// `gitlab` or `local`, for health reports.
    fn kind(&self) -> &'static str;

    /// A cheap call proving the source works (credentials, project).
    async fn check(&self) -> Result<(), SourceError>;

    /// Searches file names and contents; file-name matches first.
    async fn search(&self, query: &WikiQuery) -> Result<WikiSearch, SourceError>;

    /// Reads a window of a file at `git_ref` (the default branch when `None`;
    /// a commit [`WikiSource::head`] returned is a ref too).
    async fn read(
        &self,
        path: &RelPath,
        git_ref: Option<&GitRef>,
        range: ReadRange,
    ) -> Result<WikiWindow, SourceError>;

    /// The commit the default ref points at now: cheap, one request;
    /// changes whenever anything in the wiki changes. A default ref that is
    /// not a branch is `NotFound`.
    async fn head(&self) -> Result<WikiHead, SourceError>;

    /// Every file (blob) of the tree at `commit` (as [`WikiSource::head`]
    /// returned it), recursively, with its blob id, sorted by path; folders
    /// are left out, and so are paths that are not valid [`RelPath`]s
    /// (they could not be read either). An unknown commit is `NotFound`; a
    /// tree of more than 100,000 files is refused (`InvalidResponse`)
    /// rather than cut short.
    async fn tree(&self, commit: &str) -> Result<Vec<WikiBlob>, SourceError>;
}

/// Reading project files, with WebDAV semantics on every implementation.
#[async_trait]
pub trait FileReader: Send + Sync {
    /// `nextcloud` or `local`, for health reports.
    fn kind(&self) -> &'static str;

    /// A cheap call proving the store works (credentials, root).
    async fn check(&self) -> Result<(), SourceError>;

    /// One file or folder.
    async fn stat(&self, path: &AbsPath) -> Result<Entry, SourceError>;

    /// The entries of a folder (one level, without the folder itself),
    /// sorted by name. A file is a `Conflict`.
    async fn list(&self, folder: &AbsPath) -> Result<Vec<Entry>, SourceError>;

    /// Streams a window of a file. A window starting at or past the end is
    /// empty (with the size). Nothing is buffered beyond a chunk.
    async fn read(&self, path: &AbsPath, range: ReadRange) -> Result<ReadStream, SourceError>;
}

/// Changing project files: never deleting (see the crate docs).
#[async_trait]
pub trait FileWriter: FileReader {
    /// Writes a whole file. The parent folder must exist (`Conflict`
    /// otherwise); `precondition` guards against lost updates.
    async fn write(
        &self,
        path: &AbsPath,
        content: Bytes,
        precondition: &Precondition,
    ) -> Result<WriteOutcome, SourceError>;

    /// Moves a file or folder. Without `overwrite`, an existing destination
    /// is `PreconditionFailed`; a missing destination parent is `Conflict`.
    async fn move_to(
        &self,
        from: &AbsPath,
        to: &AbsPath,
        overwrite: bool,
    ) -> Result<(), SourceError>;

    /// Copies a file or folder; same rules as [`FileWriter::move_to`].
    async fn copy_to(
        &self,
        from: &AbsPath,
        to: &AbsPath,
        overwrite: bool,
    ) -> Result<(), SourceError>;

    /// Creates a folder and any missing parents; an existing folder is fine,
    /// a file in the way is `Conflict`.
    async fn make_folders(&self, folder: &AbsPath) -> Result<(), SourceError>;
}

/// Finding files by name (and, where the source can, by content).
#[async_trait]
pub trait FileSearch: Send + Sync {
    /// `nextcloud` or `local`, for health reports.
    fn kind(&self) -> &'static str;

    /// A cheap call proving the search works (credentials, endpoint).
    async fn check(&self) -> Result<(), SourceError>;

    /// Up to `limit` hits, all inside `scope` — whatever the source returns.
    async fn search(
        &self,
        term: &str,
        limit: usize,
        scope: &AbsPath,
    ) -> Result<Vec<FileHit>, SourceError>;
}

/// The sources the knowledge tools read, as shared trait objects: the
/// project files only as a [`FileReader`].
#[derive(Clone)]
pub struct Sources {
    /// The wiki.
    pub wiki: std::sync::Arc<dyn WikiSource>,
    /// The project files, read-only.
    pub files: std::sync::Arc<dyn FileReader>,
    /// File search.
    pub search: std::sync::Arc<dyn FileSearch>,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sources")
            .field("wiki", &self.wiki.kind())
            .field("files", &self.files.kind())
            .field("search", &self.search.kind())
            .finish()
    }
}

/// The rules every store applies to a move or copy before touching
/// anything, so all implementations refuse the same requests the same way.
pub(crate) fn check_transfer(from: &AbsPath, to: &AbsPath) -> Result<(), SourceError> {
    if from.segments().is_empty() || to.segments().is_empty() {
        return Err(SourceError::Conflict(
            "the root folder cannot be moved or copied, or replaced".to_owned(),
        ));
    }
    if from == to {
        return Err(SourceError::Conflict(
            "source and destination are the same".to_owned(),
        ));
    }
    if from.contains(to) {
        return Err(SourceError::Conflict(
            "a folder cannot be moved or copied into itself".to_owned(),
        ));
    }
    Ok(())
}

/// The search term, trimmed; an empty one is refused the same way by every
/// source.
pub(crate) fn search_term(term: &str) -> Result<&str, SourceError> {
    let term = term.trim();
    if term.is_empty() {
        return Err(SourceError::InvalidRequest(
            "the search term is empty".to_owned(),
        ));
    }
    Ok(term)
}

/// A path for messages: absolute in the store, never a URL.
pub(crate) fn shown(path: &AbsPath) -> String {
    path.to_string()
}
