//! Keeping the index in step with the upstreams.
//!
//! - **Project folders** (Nextcloud over WebDAV, or the local store): each
//!   provisioned folder is listed one level at a time. A subfolder whose
//!   etag is the one seen at the last refresh is skipped whole (Nextcloud
//!   gives every parent folder a new etag when anything below it changes);
//!   a server that sends no folder etag (wsgidav) has every folder listed.
//!   A file is read again only when its etag differs from the version the
//!   index holds; what disappeared is dropped. The trash is never indexed.
//! - **The wiki**: the branch head says whether anything changed; when it
//!   moved, the recursive tree's blob ids say which files did, and only
//!   those are downloaded, at that commit.
//!
//! A refresh with nothing changed costs one folder listing per provisioned
//! folder and one branch lookup, and downloads nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use acdm_core::{AbsPath, RelPath};
use acdm_extract::Format;
use acdm_index::{Change, Document, SourceKind};
use acdm_sources::{Entry, EntryKind, GitRef, ReadRange, SourceError};
use chrono::{DateTime, Utc};

use crate::status::{RefreshCounts, Unreadable};
use crate::{Inner, KnowledgeError};

/// Changes written to the index in one commit, at most: so many
/// documents, or so many bytes of their text (what a refresh holds in
/// memory before it writes). Each commit is a segment tantivy merges
/// later, and the merges are what the heap grows with: a first build of
/// 10,000 documents left 76 MiB of heap at 1,000 a commit and 133 MiB at
/// 200 (`cargo xtask bench search`).
const BATCH: usize = 1000;
const BATCH_BYTES: usize = 32 << 20;

/// Extraction failures that say nothing of the document (the pool could
/// not run it, or ran out of time under load): never recorded as the
/// document's, so the next refresh tries again.
fn transient(error: &acdm_extract::ExtractError) -> bool {
    matches!(error.reason(), "unavailable" | "timed_out")
}

/// Plain-text files indexed as they are (by extension, lower-cased).
const TEXT_EXTENSIONS: &[&str] = &[
    "md", "markdown", "txt", "text", "csv", "tsv", "json", "yaml", "yml", "xml", "rst", "adoc",
    "org", "log", "ini", "toml", "conf", "sql", "tex",
];

/// The largest plain-text file indexed with its content (larger ones by
/// name only).
const MAX_TEXT_FILE: u64 = 4 << 20;

/// What the folders' walk remembers between refreshes.
#[derive(Debug, Default)]
pub(crate) struct FolderMemory {
    /// Each folder's etag when its whole subtree was last walked cleanly.
    etags: HashMap<AbsPath, String>,
}

/// What the wiki's sync remembers between refreshes.
#[derive(Debug, Default)]
pub(crate) struct WikiMemory {
    /// The commit the index reflects.
    pub(crate) commit: Option<String>,
}

/// The extension of a file name, lower-cased.
fn extension(name: &str) -> Option<String> {
    let (stem, ext) = name.rsplit_once('.')?;
    (!stem.is_empty()).then(|| ext.to_ascii_lowercase())
}

/// A title the analyzers can split: the file name with its separators as
/// spaces.
pub(crate) fn title_of(name: &str) -> String {
    name.chars()
        .map(|c| if matches!(c, '-' | '_' | '.') { ' ' } else { c })
        .collect()
}

/// What a file contributes besides its name.
enum Body {
    /// Text, and the format it was extracted from.
    Text(String, Option<&'static str>),
    /// Its name only (a format without text, or too large).
    NameOnly,
    /// Its name only, because extraction failed (why).
    Unreadable(String),
}

impl Inner {
    /// Walks every provisioned folder; returns what it did.
    pub(crate) async fn refresh_files(&self) -> Result<RefreshCounts, KnowledgeError> {
        let mut counts = RefreshCounts::default();
        let started = Utc::now();
        let roots = outermost(self.roots.roots().await?);
        let known: BTreeMap<String, String> = {
            let index = self.index.clone();
            tokio::task::spawn_blocking(move || index.versions(SourceKind::Files))
                .await
                .map_err(|_| KnowledgeError::Stopped)??
                .into_iter()
                .collect()
        };
        let mut walk = Walk {
            inner: self,
            known: &known,
            seen: BTreeSet::new(),
            changes: Vec::new(),
            counts: &mut counts,
            unreadable: Vec::new(),
            failed: false,
            last_error: None,
            pending_bytes: 0,
        };
        {
            let mut memory = self.folders.lock().await;
            // A folder no longer provisioned is forgotten: provisioned
            // again, it is walked whole.
            memory
                .etags
                .retain(|folder, _| roots.iter().any(|root| root.contains(folder)));
            for root in &roots {
                if self.trash.contains(root) {
                    continue;
                }
                let failed_before = walk.failed;
                walk.failed = false;
                let clean = walk.folder(root, &mut memory).await?;
                let mut walked = self.walked.lock().await;
                if clean {
                    walked.insert(root.clone());
                }
                walk.failed |= failed_before;
            }
            self.walked.lock().await.retain(|root| roots.contains(root));
        }
        // Gone: indexed keys no walk saw, unless their folder could not be
        // listed (kept as seen) — including every key of a folder that is
        // no longer provisioned.
        let gone: Vec<String> = known
            .keys()
            .filter(|k| !walk.seen.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            walk.changes.push(Change::Delete {
                source: SourceKind::Files,
                key,
            });
            walk.counts.removed += 1;
        }
        let Walk {
            changes,
            unreadable,
            failed,
            last_error,
            ..
        } = walk;
        self.apply(changes).await?;
        let documents = documents(&self.index, SourceKind::Files);
        self.status.lock().await.files.refreshed(
            started,
            documents,
            unreadable,
            failed.then_some(last_error).flatten(),
            counts,
        );
        Ok(counts)
    }

    /// Brings the wiki to its branch head; returns what it did.
    pub(crate) async fn refresh_wiki(&self) -> Result<RefreshCounts, KnowledgeError> {
        let mut counts = RefreshCounts::default();
        let started = Utc::now();
        let mut memory = self.wiki_memory.lock().await;
        counts.listings += 1;
        let head = match self.reader.wiki.head().await {
            Ok(head) => head,
            Err(SourceError::NotConfigured(_)) => {
                self.status
                    .lock()
                    .await
                    .wiki
                    .refreshed(started, 0, Vec::new(), None, counts);
                return Ok(counts);
            }
            Err(error) => {
                counts.errors += 1;
                self.status.lock().await.wiki.failed(
                    started,
                    KnowledgeError::Source(error.clone()).reason(),
                    counts,
                );
                return Err(error.into());
            }
        };
        if memory.commit.as_deref() == Some(head.commit.as_str()) {
            let documents = documents(&self.index, SourceKind::Wiki);
            self.status
                .lock()
                .await
                .wiki
                .refreshed(started, documents, None, None, counts);
            return Ok(counts);
        }
        counts.listings += 1;
        let tree = match self.reader.wiki.tree(&head.commit).await {
            Ok(tree) => tree,
            Err(error) => {
                counts.errors += 1;
                self.status.lock().await.wiki.failed(
                    started,
                    KnowledgeError::Source(error.clone()).reason(),
                    counts,
                );
                return Err(error.into());
            }
        };
        let commit = GitRef::parse(&head.commit)?;
        let known = {
            let index = self.index.clone();
            tokio::task::spawn_blocking(move || index.versions(SourceKind::Wiki))
                .await
                .map_err(|_| KnowledgeError::Stopped)??
        };
        let mut changes = Vec::new();
        let mut unreadable = Vec::new();
        let mut present = BTreeSet::new();
        let mut last_error = None;
        for blob in &tree {
            let key = blob.path.to_string();
            if hidden(blob.path.segments()) {
                continue;
            }
            present.insert(key.clone());
            if known.get(&key) == Some(&blob.blob_id) {
                continue;
            }
            counts.downloads += 1;
            let body = match self.wiki_body(&blob.path, &commit, &blob.blob_id).await {
                Ok(body) => body,
                Err(error @ (KnowledgeError::Source(_) | KnowledgeError::Extract(_))) => {
                    // Left as the index has it, for the next refresh: the
                    // head is not recorded.
                    counts.errors += 1;
                    tracing::warn!(path = %blob.path, error = %error, "a wiki file could not be indexed; the next refresh tries again");
                    last_error = Some(error.reason().to_owned());
                    continue;
                }
                Err(error) => return Err(error),
            };
            let name = blob.path.file_name().unwrap_or_default();
            changes.push(Change::Upsert(document(
                SourceKind::Wiki,
                key.clone(),
                name,
                body,
                head.committed_at,
                blob.blob_id.clone(),
                &mut unreadable,
            )));
            counts.indexed += 1;
            if changes.len() >= BATCH {
                self.apply(std::mem::take(&mut changes)).await?;
            }
        }
        for key in known.keys().filter(|k| !present.contains(*k)) {
            changes.push(Change::Delete {
                source: SourceKind::Wiki,
                key: key.clone(),
            });
            counts.removed += 1;
        }
        // Hidden files are never indexed; drop any that were.
        self.apply(changes).await?;
        if last_error.is_none() {
            memory.commit = Some(head.commit.clone());
        }
        let documents = documents(&self.index, SourceKind::Wiki);
        self.status
            .lock()
            .await
            .wiki
            .refreshed(started, documents, unreadable, last_error, counts);
        Ok(counts)
    }

    async fn wiki_body(
        &self,
        path: &RelPath,
        commit: &GitRef,
        version: &str,
    ) -> Result<Body, KnowledgeError> {
        let name = path.file_name().unwrap_or_default();
        if Format::from_name(name).is_some() {
            return match self.reader.wiki(path, commit, version).await {
                Ok(Some(text)) => Ok(Body::Text(text.extracted.text.clone(), Some(text.format()))),
                Ok(None) => Ok(Body::NameOnly),
                Err(KnowledgeError::Extract(error)) if !transient(&error) => {
                    Ok(Body::Unreadable(error.reason().to_owned()))
                }
                Err(error) => Err(error),
            };
        }
        if !is_text_name(name) {
            return Ok(Body::NameOnly);
        }
        let read = self
            .reader
            .wiki
            .read(path, Some(commit), ReadRange::new(0, MAX_TEXT_FILE + 1))
            .await?;
        Ok(text_body(&read.window.bytes))
    }

    /// Indexes one project file now (a write through the BFF), or drops it
    /// when it is gone.
    pub(crate) async fn reindex_file(&self, path: &AbsPath) -> Result<(), KnowledgeError> {
        let roots = self.roots.roots().await?;
        if self.trash.contains(path)
            || hidden(path.segments())
            || !roots.iter().any(|r| r.contains(path))
        {
            return Ok(());
        }
        let mut unreadable = Vec::new();
        let change = match self.reader.files.stat(path).await {
            Ok(entry) if entry.kind == EntryKind::File => {
                let body = self.file_body(&entry).await?;
                Change::Upsert(document(
                    SourceKind::Files,
                    path.to_string(),
                    entry.name(),
                    body,
                    entry.modified,
                    version_of(&entry),
                    &mut unreadable,
                ))
            }
            // A folder (moved or made): its files are found by the walk;
            // what was indexed at this path as a file goes now.
            Ok(_) | Err(SourceError::NotFound(_)) => Change::DeleteUnder {
                source: SourceKind::Files,
                folder: path.as_prefix(),
            },
            Err(error) => return Err(error.into()),
        };
        let gone = matches!(change, Change::DeleteUnder { .. });
        if gone {
            // What was under it is gone from the index: a folder brought
            // back there is walked whole.
            self.folders
                .lock()
                .await
                .etags
                .retain(|folder, _| !path.contains(folder));
        }
        let mut changes = vec![change];
        if gone {
            changes.push(Change::Delete {
                source: SourceKind::Files,
                key: path.to_string(),
            });
        }
        self.apply(changes).await?;
        if !unreadable.is_empty() {
            self.status.lock().await.files.add_unreadable(unreadable);
        }
        Ok(())
    }

    async fn file_body(&self, entry: &Entry) -> Result<Body, KnowledgeError> {
        let name = entry.name();
        if Format::from_name(name).is_some() {
            return match self.reader.file(&entry.path).await {
                Ok(Some(text)) => Ok(Body::Text(text.extracted.text.clone(), Some(text.format()))),
                Ok(None) => Ok(Body::NameOnly),
                Err(KnowledgeError::Extract(error)) if !transient(&error) => {
                    Ok(Body::Unreadable(error.reason().to_owned()))
                }
                Err(error) => Err(error),
            };
        }
        if !is_text_name(name) || entry.size.is_some_and(|s| s > MAX_TEXT_FILE) {
            return Ok(Body::NameOnly);
        }
        let stream = self
            .reader
            .files
            .read(&entry.path, ReadRange::new(0, MAX_TEXT_FILE + 1))
            .await?;
        let window = stream.collect(MAX_TEXT_FILE + 1).await?;
        Ok(text_body(&window.bytes))
    }

    pub(crate) async fn apply(&self, changes: Vec<Change>) -> Result<(), KnowledgeError> {
        if changes.is_empty() {
            return Ok(());
        }
        let index = self.index.clone();
        tokio::task::spawn_blocking(move || index.apply(changes))
            .await
            .map_err(|_| KnowledgeError::Stopped)??;
        Ok(())
    }
}

/// One walk over the provisioned folders.
struct Walk<'a> {
    inner: &'a Inner,
    known: &'a BTreeMap<String, String>,
    seen: BTreeSet<String>,
    changes: Vec<Change>,
    counts: &'a mut RefreshCounts,
    unreadable: Vec<Unreadable>,
    failed: bool,
    last_error: Option<String>,
    /// Bytes of text in `changes`.
    pending_bytes: usize,
}

impl Walk<'_> {
    /// Walks `folder` (listing it), descending into subfolders whose etag
    /// changed. Returns whether the whole subtree was walked cleanly.
    async fn folder(
        &mut self,
        folder: &AbsPath,
        memory: &mut FolderMemory,
    ) -> Result<bool, KnowledgeError> {
        // Iterative, so a deep tree costs no recursion depth.
        let mut clean = true;
        let mut stack = vec![folder.clone()];
        // Folders whose walk finished, with the etag to remember.
        let mut etags_to_record: Vec<(AbsPath, String)> = Vec::new();
        while let Some(current) = stack.pop() {
            self.counts.listings += 1;
            let entries = match self.inner.reader.files.list(&current).await {
                Ok(entries) => entries,
                Err(SourceError::NotFound(_)) if &current == folder => {
                    // A provisioned folder that does not exist (yet): nothing to index.
                    continue;
                }
                Err(error) => {
                    self.counts.errors += 1;
                    self.failed = true;
                    tracing::warn!(folder = %current, error = %error, "a folder could not be listed; what the index holds under it stays");
                    self.last_error = Some(KnowledgeError::Source(error).reason().to_owned());
                    self.keep_under(&current);
                    memory.etags.remove(&current);
                    clean = false;
                    continue;
                }
            };
            for entry in entries {
                if hidden(entry.path.segments()) || self.inner.trash.contains(&entry.path) {
                    continue;
                }
                match entry.kind {
                    EntryKind::Folder => {
                        let etag = entry
                            .etag
                            .as_ref()
                            .filter(|_| self.inner.folder_etags_cover_subtree)
                            .map(|e| e.value().to_owned());
                        match etag {
                            Some(etag) if memory.etags.get(&entry.path) == Some(&etag) => {
                                self.counts.skipped_folders += 1;
                                self.keep_under(&entry.path);
                            }
                            Some(etag) => {
                                etags_to_record.push((entry.path.clone(), etag));
                                stack.push(entry.path);
                            }
                            None => stack.push(entry.path),
                        }
                    }
                    EntryKind::File => self.file(entry).await?,
                }
            }
            if self.changes.len() >= BATCH {
                self.inner.apply(std::mem::take(&mut self.changes)).await?;
            }
        }
        // A file that could not be read makes its walk unclean too.
        let clean = clean && !self.failed;
        if clean {
            for (path, etag) in etags_to_record {
                memory.etags.insert(path, etag);
            }
        } else {
            // Which subtree failed is not tracked: walk them all next time.
            for (path, _) in etags_to_record {
                memory.etags.remove(&path);
            }
        }
        Ok(clean)
    }

    async fn file(&mut self, entry: Entry) -> Result<(), KnowledgeError> {
        let key = entry.path.to_string();
        let version = version_of(&entry);
        self.seen.insert(key.clone());
        if self.known.get(&key) == Some(&version) {
            return Ok(());
        }
        self.counts.downloads += 1;
        let body = match self.inner.file_body(&entry).await {
            Ok(body) => body,
            Err(KnowledgeError::Source(SourceError::NotFound(_))) => {
                // Gone since the listing: its folder's etag moved too.
                return Ok(());
            }
            Err(error @ (KnowledgeError::Source(_) | KnowledgeError::Extract(_))) => {
                // The upstream failed, or the extraction could not run (no
                // fault of the document's): what the index held stays, and
                // no folder above it is remembered as walked, so the next
                // refresh comes back to it.
                self.counts.errors += 1;
                self.failed = true;
                tracing::warn!(path = %entry.path, error = %error, "a file could not be indexed; the next refresh tries again");
                self.last_error = Some(error.reason().to_owned());
                return Ok(());
            }
            Err(error) => return Err(error),
        };
        let document = document(
            SourceKind::Files,
            key,
            entry.name(),
            body,
            entry.modified,
            version,
            &mut self.unreadable,
        );
        self.pending_bytes += document.body.len();
        self.changes.push(Change::Upsert(document));
        self.counts.indexed += 1;
        if self.changes.len() >= BATCH || self.pending_bytes >= BATCH_BYTES {
            self.pending_bytes = 0;
            self.inner.apply(std::mem::take(&mut self.changes)).await?;
        }
        Ok(())
    }

    /// Counts every indexed key under `folder` as seen (kept as it is).
    fn keep_under(&mut self, folder: &AbsPath) {
        let prefix = folder.as_prefix();
        for key in self
            .known
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k)
        {
            self.seen.insert(key.clone());
        }
    }
}

/// The index document of a file.
fn document(
    source: SourceKind,
    key: String,
    name: &str,
    body: Body,
    modified: Option<DateTime<Utc>>,
    version: String,
    unreadable: &mut Vec<Unreadable>,
) -> Document {
    let (body, format) = match body {
        Body::Text(text, format) => (text, format.map(str::to_owned)),
        Body::NameOnly => (String::new(), None),
        Body::Unreadable(reason) => {
            unreadable.push(Unreadable {
                path: key.clone(),
                reason,
            });
            (String::new(), None)
        }
    };
    Document {
        source,
        title: title_of(name),
        key,
        body,
        modified: modified.map(|m| m.timestamp()),
        version,
        format,
    }
}

/// The version the index keeps for a file: its etag, or its size and time
/// when the store gives none.
fn version_of(entry: &Entry) -> String {
    match &entry.etag {
        Some(etag) => etag.value().to_owned(),
        None => format!(
            "{}-{}",
            entry.size.unwrap_or_default(),
            entry.modified.map(|m| m.timestamp()).unwrap_or_default()
        ),
    }
}

fn is_text_name(name: &str) -> bool {
    extension(name).is_some_and(|e| TEXT_EXTENSIONS.contains(&e.as_str()))
}

/// A plain-text file's body: its text when it is UTF-8 without NUL bytes
/// and within the bound, its name only otherwise.
fn text_body(bytes: &[u8]) -> Body {
    if bytes.len() as u64 > MAX_TEXT_FILE || bytes.contains(&0) {
        return Body::NameOnly;
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => Body::Text(text.to_owned(), None),
        Err(_) => Body::NameOnly,
    }
}

/// Hidden files and folders (a leading dot: the trash, `.git`) are never
/// indexed.
fn hidden(segments: &[String]) -> bool {
    segments.iter().any(|s| s.starts_with('.'))
}

/// The folders to walk: each provisioned folder once, none inside another.
pub(crate) fn outermost(mut roots: Vec<AbsPath>) -> Vec<AbsPath> {
    roots.sort_by_key(|r| r.segments().len());
    let mut kept: Vec<AbsPath> = Vec::new();
    for root in roots {
        if !kept.iter().any(|k| k.contains(&root)) {
            kept.push(root);
        }
    }
    kept
}

/// Documents of `source` in the index.
fn documents(index: &acdm_index::SearchIndex, source: SourceKind) -> u64 {
    let stats = index.stats();
    match source {
        SourceKind::Wiki => stats.wiki_documents,
        SourceKind::Files => stats.files_documents,
    }
}

/// Shared for the status: a root list that cannot be had.
pub(crate) type Roots = Arc<dyn crate::ProjectFolders>;

#[cfg(test)]
mod tests {
    use super::*;

    fn abs(s: &str) -> AbsPath {
        AbsPath::parse(s).unwrap()
    }

    #[test]
    fn nested_provisioned_folders_are_walked_once() {
        let kept = outermost(vec![
            abs("/Projects/Alpha/shared"),
            abs("/Projects/Alpha"),
            abs("/Projects/Alphabet"),
        ]);
        assert_eq!(
            kept,
            vec![abs("/Projects/Alpha"), abs("/Projects/Alphabet")]
        );
    }

    #[test]
    fn titles_split_on_separators_and_text_files_are_known_by_extension() {
        assert_eq!(title_of("budget_2026-Q1.xlsx"), "budget 2026 Q1 xlsx");
        assert!(is_text_name("Notes.MD"));
        assert!(!is_text_name("photo.jpg"));
        assert!(!is_text_name(".md"));
        assert!(matches!(text_body(b"a\0b"), Body::NameOnly));
        assert!(matches!(text_body(&[0xff, 0xfe]), Body::NameOnly));
        assert!(matches!(text_body("会议纪要".as_bytes()), Body::Text(t, None) if t == "会议纪要"));
        assert!(hidden(&["Projects".to_owned(), ".acdm-trash".to_owned()]));
    }
}
