//! A wiki in a local folder: the embedded default when no GitLab is
//! configured. Same search and read semantics as the GitLab source; it has
//! no history, so it knows one ref (the default branch name) and the
//! commits its `head` names, which all read what is there now.
//!
//! `head` and `tree` stand in for git's ids with digests of what the walk
//! sees, so a sync can tell what changed without reading any file: a file's
//! blob id is SHA-256 over its path, size, modification time (nanoseconds)
//! and inode (40 hex digits, like git's); the head is SHA-256 over every
//! (path, blob id), sorted. Rewriting a file changes its time (and, with
//! the file store's rename into place, its inode), so its id; content is
//! never read — hashing every file on every change would cost as much as
//! reading the wiki. The price: a touched but unchanged file looks changed,
//! and an edit that keeps the size on a file system with coarse times,
//! within one tick, is not seen. Ids name a path's version, not content:
//! two files with the same bytes have different ids.

use std::collections::VecDeque;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::UNIX_EPOCH;

use acdm_core::{AbsPath, RelPath};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::error::SourceError;
use crate::local::grep;
use crate::local::store::LocalFileStore;
use crate::model::{
    GitRef, MAX_TREE_FILES, ReadRange, WikiBlob, WikiHead, WikiHit, WikiQuery, WikiSearch,
    WikiWindow,
};
use crate::{FileReader, WikiSource};

const SOURCE: &str = "local wiki";
/// Commits `head` named lately, which reads and trees accept as refs
/// without walking the folder again.
const REMEMBERED_HEADS: usize = 64;
/// Deepest folder nesting followed (as the search's walk).
const MAX_DEPTH: usize = 64;
/// Hex digits of a head or blob id, as many as a git SHA-1's.
const ID_HEX: usize = 40;

/// A [`WikiSource`] over a local folder.
#[derive(Debug, Clone)]
pub struct LocalWiki {
    files: LocalFileStore,
    default_ref: Arc<GitRef>,
    heads: Arc<Mutex<VecDeque<String>>>,
}

/// What one walk of the folder saw.
struct Snapshot {
    /// The head digest.
    head: String,
    /// Every file, sorted by path.
    blobs: Vec<WikiBlob>,
    /// The newest modification time.
    newest: Option<DateTime<Utc>>,
}

impl LocalWiki {
    /// A wiki rooted at `root` (created if missing), answering to
    /// `default_ref` (usually `main`).
    pub fn open(root: impl Into<PathBuf>, default_ref: GitRef) -> Result<Self, SourceError> {
        Ok(Self {
            files: LocalFileStore::open(root)?,
            default_ref: Arc::new(default_ref),
            heads: Arc::new(Mutex::new(VecDeque::new())),
        })
    }

    /// The ref a call names: the default branch, or a commit `head` named
    /// (remembered, or the folder's current head). Anything else is
    /// `NotFound`: there is no history.
    async fn check_ref(&self, git_ref: Option<&GitRef>) -> Result<GitRef, SourceError> {
        match git_ref {
            None => Ok((*self.default_ref).clone()),
            Some(r) if *r == *self.default_ref => Ok(r.clone()),
            Some(r) if self.knows(r.as_str()).await? => Ok(r.clone()),
            Some(r) => Err(SourceError::NotFound(format!(
                "ref `{r}`: the local wiki has no history; use `{}`",
                self.default_ref
            ))),
        }
    }

    /// Whether `commit` is a head this wiki named: one remembered, else the
    /// current one (after a restart, say).
    async fn knows(&self, commit: &str) -> Result<bool, SourceError> {
        if commit.len() != ID_HEX || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(false);
        }
        if self.remembered(commit) {
            return Ok(true);
        }
        let current = self.snapshot().await?.head;
        self.remember(&current);
        Ok(current.eq_ignore_ascii_case(commit))
    }

    fn remembered(&self, commit: &str) -> bool {
        self.heads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|h| h.eq_ignore_ascii_case(commit))
    }

    fn remember(&self, commit: &str) {
        let mut heads = self.heads.lock().unwrap_or_else(PoisonError::into_inner);
        if !heads.iter().any(|h| h == commit) {
            if heads.len() >= REMEMBERED_HEADS {
                heads.pop_front();
            }
            heads.push_back(commit.to_owned());
        }
    }

    /// Walks the folder (off the async runtime).
    async fn snapshot(&self) -> Result<Snapshot, SourceError> {
        let root = self.files.root().to_path_buf();
        tokio::task::spawn_blocking(move || snapshot(&root))
            .await
            .map_err(|_| SourceError::upstream(SOURCE, None, "the walk was interrupted"))?
    }
}

/// Every file under `root` as the wiki shows it — hidden names (a leading
/// `.`: the store's temporary files and trash), symbolic links and what is
/// not a regular file left out, as the search leaves them — with its blob
/// id, and the head over them all.
fn snapshot(root: &Path) -> Result<Snapshot, SourceError> {
    let mut blobs = Vec::new();
    let mut newest = None;
    walk(root, &mut Vec::new(), &mut blobs, &mut newest)?;
    blobs.sort_by_cached_key(|blob| blob.path.to_string());
    let mut hasher = Sha256::new();
    for blob in &blobs {
        hasher.update(blob.path.to_string().as_bytes());
        hasher.update([0]);
        hasher.update(blob.blob_id.as_bytes());
        hasher.update([b'\n']);
    }
    Ok(Snapshot {
        head: hex_id(&hasher.finalize()),
        blobs,
        newest,
    })
}

fn walk(
    dir: &Path,
    segments: &mut Vec<String>,
    blobs: &mut Vec<WikiBlob>,
    newest: &mut Option<DateTime<Utc>>,
) -> Result<(), SourceError> {
    if segments.len() > MAX_DEPTH {
        return Ok(());
    }
    let unreadable = || SourceError::upstream(SOURCE, None, "the wiki folder could not be read");
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        // A folder removed during the walk, or one nobody may read (whose
        // files could not be read either), has nothing to list.
        Err(e) if !segments.is_empty() && skippable(&e) => return Ok(()),
        Err(_) => return Err(unreadable()),
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) if skippable(&e) => continue,
            Err(_) => return Err(unreadable()),
        };
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        // Not following links: the metadata of the entry itself.
        let meta = match entry.metadata() {
            Ok(meta) => meta,
            Err(e) if skippable(&e) => continue,
            Err(_) => return Err(unreadable()),
        };
        segments.push(name);
        if meta.is_dir() {
            walk(&entry.path(), segments, blobs, newest)?;
        } else if meta.is_file() {
            // Only names a read can reach: valid, and unchanged by the
            // path rules (a name in another Unicode form is not).
            let joined = segments.join("/");
            let readable = RelPath::parse(&joined)
                .ok()
                .filter(|p| p.segments() == segments.as_slice());
            if let Some(path) = readable {
                if blobs.len() >= MAX_TREE_FILES {
                    return Err(SourceError::invalid(
                        SOURCE,
                        format!(
                            "the wiki has more than {MAX_TREE_FILES} files, more than a tree may list"
                        ),
                    ));
                }
                let modified = meta.modified().ok();
                if let Some(time) = modified.map(DateTime::<Utc>::from) {
                    *newest = Some(newest.map_or(time, |n: DateTime<Utc>| n.max(time)));
                }
                let nanos = modified
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                #[cfg(unix)]
                let inode = std::os::unix::fs::MetadataExt::ino(&meta);
                #[cfg(not(unix))]
                let inode = 0u64;
                let mut hasher = Sha256::new();
                hasher.update(joined.as_bytes());
                hasher.update([0]);
                hasher.update(format!("{}:{nanos}:{inode}", meta.len()).as_bytes());
                blobs.push(WikiBlob {
                    path,
                    blob_id: hex_id(&hasher.finalize()),
                });
            }
        }
        segments.pop();
    }
    Ok(())
}

/// Errors a walk passes over: the entry went away, or may not be read.
fn skippable(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
    )
}

/// The first [`ID_HEX`] hex digits of a digest.
fn hex_id(digest: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(ID_HEX);
    for byte in digest.iter().take(ID_HEX / 2) {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

fn as_abs(path: &RelPath) -> AbsPath {
    AbsPath::root().join(path)
}

#[async_trait]
impl WikiSource for LocalWiki {
    fn kind(&self) -> &'static str {
        "local"
    }

    async fn check(&self) -> Result<(), SourceError> {
        self.files.check().await
    }

    async fn search(&self, query: &WikiQuery) -> Result<WikiSearch, SourceError> {
        let term = crate::search_term(&query.term)?.to_owned();
        self.check_ref(query.git_ref.as_ref()).await?;
        let prefix = query.path_prefix.clone().unwrap_or_else(RelPath::root);
        // Refuses a symbolic link on the way to the prefix folder.
        crate::local::store::resolve(self.files.root(), &as_abs(&prefix))?;
        let root = self.files.root().to_path_buf();
        let (start, limit) = (prefix.segments().to_vec(), query.limit);
        let outcome = tokio::task::spawn_blocking(move || {
            grep::search(&root, &start, &term, limit, grep::Names::FilePath, true)
        })
        .await
        .map_err(|_| SourceError::upstream("local wiki", None, "the search was interrupted"))?;
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => grep::Outcome::default(),
            Err(_) => {
                return Err(SourceError::upstream(
                    "local wiki",
                    None,
                    "the wiki folder could not be read",
                ));
            }
        };
        let hits = outcome
            .matches
            .into_iter()
            .filter(|m| m.kind == crate::model::EntryKind::File)
            .filter_map(|m| {
                let path = RelPath::parse(&m.segments.join("/")).ok()?;
                Some(match m.content {
                    Some(c) => WikiHit {
                        path,
                        start_line: c.start_line,
                        snippet: c.snippet,
                    },
                    None => WikiHit {
                        path,
                        start_line: 1,
                        snippet: String::new(),
                    },
                })
            })
            .collect();
        Ok(WikiSearch {
            hits,
            total: Some(outcome.total),
        })
    }

    async fn read(
        &self,
        path: &RelPath,
        git_ref: Option<&GitRef>,
        range: ReadRange,
    ) -> Result<WikiWindow, SourceError> {
        let git_ref = self.check_ref(git_ref).await?;
        let stream = self
            .files
            .read(&as_abs(path), range)
            .await
            .map_err(|e| match e {
                SourceError::NotFound(_) => {
                    SourceError::NotFound(format!("wiki file `{path}` at `{git_ref}`"))
                }
                other => other,
            })?;
        let window = stream.collect(range.len).await?;
        Ok(WikiWindow {
            path: path.clone(),
            git_ref,
            window,
        })
    }

    async fn head(&self) -> Result<WikiHead, SourceError> {
        let snapshot = self.snapshot().await?;
        self.remember(&snapshot.head);
        Ok(WikiHead {
            commit: snapshot.head,
            ref_name: (*self.default_ref).clone(),
            committed_at: snapshot.newest,
        })
    }

    /// The files as they are now: with no history, any commit this wiki
    /// named lists the current tree (a sync that compares heads first sees
    /// the next change on its next round).
    async fn tree(&self, commit: &str) -> Result<Vec<WikiBlob>, SourceError> {
        let commit = GitRef::parse(commit)?;
        if !(self.remembered(commit.as_str()) || *self.default_ref == commit) {
            let snapshot = self.snapshot().await?;
            self.remember(&snapshot.head);
            if snapshot.head.eq_ignore_ascii_case(commit.as_str()) {
                return Ok(snapshot.blobs);
            }
            return Err(SourceError::NotFound(format!(
                "ref `{commit}`: the local wiki has no history; use a commit its head named"
            )));
        }
        Ok(self.snapshot().await?.blobs)
    }
}
