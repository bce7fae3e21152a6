//! acdm-knowledge: the knowledge agents search and read.
//!
//! - **Documents as text**: a project file of a format the extraction pool
//!   knows (`docx`, `xlsx`, `pptx`, `odt`, `ods`, `odp`, `pdf`, `html`) is
//!   read whole within its bound and turned into Markdown by a child
//!   process ([`acdm_extract::Extractor`]); the text is cached by file and
//!   etag, and served in windows ([`DocumentText::window`]).
//! - **The content index** ([`acdm_index::SearchIndex`], on disk, one per
//!   server): every provisioned project folder and the wiki, kept in step
//!   by [`Knowledge::run`] every refresh period (see `sync`), and at once
//!   for writes made through the BFF ([`Knowledge::file_changed`]).
//! - **Search** answers from the index once a source's first refresh went
//!   through; until then (or for a folder no project provisions) the
//!   callers use the upstream's own search, and say so.
//!
//! **Architecture invariant:** depends on acdm-core, acdm-sources,
//! acdm-extract and acdm-index only among workspace crates; knows nothing
//! of HTTP servers, MCP or the database (the provisioned folders come
//! through [`ProjectFolders`]).

mod document;
mod status;
mod sync;

use std::sync::Arc;
use std::time::Duration;

use acdm_core::{AbsPath, RelPath};
use acdm_extract::{ExtractError, Extractor};
use acdm_index::{IndexError, IndexSettings, SearchIndex, SearchQuery, SourceKind};
use acdm_sources::{FileReader, SourceError, WikiSource};
use async_trait::async_trait;
use chrono::{DateTime, TimeZone as _, Utc};
use tokio::sync::{Mutex, Notify};
use tokio_util::sync::CancellationToken;

pub use document::{DocumentText, TextWindow};
pub use status::{IndexStatus, RefreshCounts, SourceStatus, Unreadable};

/// The folders the index covers: every provisioned project's mounts.
#[async_trait]
pub trait ProjectFolders: Send + Sync {
    /// The folders, absolute in the file store.
    async fn roots(&self) -> Result<Vec<AbsPath>, KnowledgeError>;
}

/// A fixed list of folders (tests, tools).
#[async_trait]
impl ProjectFolders for Vec<AbsPath> {
    async fn roots(&self) -> Result<Vec<AbsPath>, KnowledgeError> {
        Ok(self.clone())
    }
}

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    /// An upstream (or the local store) failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A document could not be turned into text.
    #[error(transparent)]
    Extract(#[from] ExtractError),
    /// The index failed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The provisioned folders could not be listed.
    #[error("the provisioned project folders cannot be listed: {0}")]
    Folders(String),
    /// The service is stopping.
    #[error("the service is stopping")]
    Stopped,
}

impl KnowledgeError {
    /// A stable reason, for logs and the unreadable list.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Source(_) => "upstream",
            Self::Extract(error) => error.reason(),
            Self::Index(_) => "index",
            Self::Folders(_) => "folders",
            Self::Stopped => "stopped",
        }
    }
}

/// How the knowledge layer is set up.
#[derive(Debug, Clone)]
pub struct KnowledgeSettings {
    /// The index's folder (`None`: in memory, for tests); when another
    /// server holds it, the first free `<folder>-N` beside it.
    pub index_dir: Option<std::path::PathBuf>,
    /// How often the sources are checked for changes; zero turns the
    /// index off (searches answer `None`: the upstreams' own).
    pub refresh_every: Duration,
    /// The largest document read as text.
    pub max_file_bytes: u64,
    /// Documents held in memory at once while they become text (at least
    /// one): with `max_file_bytes` and the text's bound, what bounds the
    /// memory document reads take.
    pub documents_in_flight: usize,
}

/// The sources the knowledge layer reads.
#[derive(Clone)]
pub struct KnowledgeSources {
    /// The wiki.
    pub wiki: Arc<dyn WikiSource>,
    /// The project files.
    pub files: Arc<dyn FileReader>,
    /// Where the project folders live (`/Projects`): its trash is never
    /// indexed.
    pub files_base: AbsPath,
    /// True when a folder's etag changes whenever anything below it does
    /// (Nextcloud: its propagator gives every parent a new etag), so an
    /// unchanged folder is skipped whole. False for stores whose folder
    /// etags say only the folder's own entries changed (a local folder's
    /// modification time): every folder is listed each refresh.
    pub folder_etags_cover_subtree: bool,
}

/// The knowledge layer: documents as text, the index and its sync.
#[derive(Clone)]
pub struct Knowledge(Arc<Inner>);

impl std::fmt::Debug for Knowledge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Knowledge").finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) reader: document::Reader,
    pub(crate) index: SearchIndex,
    pub(crate) roots: sync::Roots,
    pub(crate) trash: AbsPath,
    pub(crate) folder_etags_cover_subtree: bool,
    pub(crate) folders: Mutex<sync::FolderMemory>,
    /// The provisioned folders walked whole at least once: the index
    /// answers for these only.
    pub(crate) walked: Mutex<std::collections::HashSet<AbsPath>>,
    pub(crate) wiki_memory: Mutex<sync::WikiMemory>,
    pub(crate) status: Mutex<IndexStatus>,
    /// One refresh at a time.
    refreshing: Mutex<()>,
    refresh_every: Duration,
    kick: Notify,
}

/// A hit of a search answered by the index.
#[derive(Debug, Clone)]
pub struct FoundHit {
    /// The file's path: absolute for project files, in the repository for
    /// the wiki.
    pub path: String,
    /// The snippet around the best match, the matched terms in `**…**`.
    pub snippet: String,
    /// Its BM25 score (higher is better; comparable within one answer).
    pub score: f32,
    /// Last modification, when known.
    pub modified: Option<DateTime<Utc>>,
    /// The format its text was extracted from, for documents.
    pub extracted_from: Option<String>,
}

/// A search answered by the index: hits best first, one per file.
#[derive(Debug, Clone)]
pub struct Found {
    /// Every matching file (the hits are the best of them).
    pub total_count: u64,
    /// The hits.
    pub hits: Vec<FoundHit>,
}

impl Knowledge {
    /// Opens (or builds) the index and sets up the reader; nothing is
    /// crawled until [`Knowledge::run`] or [`Knowledge::refresh`].
    pub fn open(
        settings: &KnowledgeSettings,
        sources: KnowledgeSources,
        extractor: Extractor,
        roots: Arc<dyn ProjectFolders>,
    ) -> Result<Self, KnowledgeError> {
        let index = open_own_index(settings.index_dir.as_deref())?;
        Ok(Self(Arc::new(Inner {
            reader: document::Reader {
                files: sources.files,
                wiki: sources.wiki,
                extractor,
                max_file_bytes: settings.max_file_bytes,
                in_flight: Arc::new(tokio::sync::Semaphore::new(
                    settings.documents_in_flight.max(1),
                )),
            },
            index,
            roots,
            trash: acdm_core::events::trash_root(&sources.files_base),
            folder_etags_cover_subtree: sources.folder_etags_cover_subtree,
            folders: Mutex::new(sync::FolderMemory::default()),
            walked: Mutex::new(std::collections::HashSet::new()),
            wiki_memory: Mutex::new(sync::WikiMemory::default()),
            status: Mutex::new(IndexStatus::default()),
            refreshing: Mutex::new(()),
            refresh_every: settings.refresh_every,
            kick: Notify::new(),
        })))
    }

    /// True when the content index is on (`refresh_every` is not zero):
    /// searches are answered by it once built.
    pub fn indexing(&self) -> bool {
        !self.0.refresh_every.is_zero()
    }

    /// The extraction pool.
    pub fn extractor(&self) -> &Extractor {
        &self.0.reader.extractor
    }

    /// The text of the project file at `path`, or `None` when its name
    /// says no document format (read its bytes instead).
    pub async fn file_text(&self, path: &AbsPath) -> Result<Option<DocumentText>, KnowledgeError> {
        self.0.reader.file(path).await
    }

    /// Searches the project files under `scope` in the index, or `None`
    /// when the index cannot answer for it (its first refresh has not gone
    /// through, or no provisioned folder covers `scope`): the caller then
    /// asks the upstream.
    pub async fn search_files(
        &self,
        scope: &AbsPath,
        text: &str,
        limit: usize,
    ) -> Result<Option<Found>, KnowledgeError> {
        if self.0.refresh_every.is_zero() || !self.0.status.lock().await.files.built {
            return Ok(None);
        }
        // Only folders the index has walked whole (a project provisioned
        // since the last refresh is the upstream's until the next).
        let covered = {
            let walked = self.0.walked.lock().await;
            walked.iter().any(|root| root.contains(scope))
        };
        if !covered || self.0.trash.contains(scope) {
            return Ok(None);
        }
        self.search(SourceKind::Files, Some(scope.as_prefix()), text, limit)
            .await
            .map(Some)
    }

    /// Searches the wiki (under `prefix`, a folder of it) in the index, or
    /// `None` before its first refresh went through.
    pub async fn search_wiki(
        &self,
        prefix: Option<&RelPath>,
        text: &str,
        limit: usize,
    ) -> Result<Option<Found>, KnowledgeError> {
        if self.0.refresh_every.is_zero() || !self.0.status.lock().await.wiki.built {
            return Ok(None);
        }
        let scope = prefix.filter(|p| !p.is_root()).map(|p| format!("{p}/"));
        self.search(SourceKind::Wiki, scope, text, limit)
            .await
            .map(Some)
    }

    async fn search(
        &self,
        source: SourceKind,
        scope: Option<String>,
        text: &str,
        limit: usize,
    ) -> Result<Found, KnowledgeError> {
        let index = self.0.index.clone();
        let query = SearchQuery {
            source,
            text: text.to_owned(),
            scope,
            limit,
        };
        let results = match tokio::task::spawn_blocking(move || index.search(&query))
            .await
            .map_err(|_| KnowledgeError::Stopped)?
        {
            // Only punctuation or symbols: nothing to search for, so
            // nothing found (the schema allows any 1–500 characters).
            Err(IndexError::EmptyQuery) => acdm_index::SearchResults {
                total_count: 0,
                hits: Vec::new(),
            },
            other => other?,
        };
        Ok(Found {
            total_count: results.total_count,
            hits: results
                .hits
                .into_iter()
                .map(|hit| FoundHit {
                    snippet: hit.marked(),
                    path: hit.key,
                    score: hit.score,
                    modified: hit.modified.and_then(|s| Utc.timestamp_opt(s, 0).single()),
                    extracted_from: hit.format,
                })
                .collect(),
        })
    }

    /// Indexes the project files at `paths` now, as they are upstream (a
    /// write, move or delete made through the BFF): a file is read again, a
    /// path that is gone (or became a folder) is dropped. Failures are
    /// logged; the next refresh repairs them.
    pub async fn file_changed(&self, paths: &[AbsPath]) {
        if self.0.refresh_every.is_zero() {
            return;
        }
        for path in paths {
            if let Err(error) = self.0.reindex_file(path).await {
                tracing::warn!(path = %path, error = %error, "a changed file could not be indexed now; the next refresh will");
            }
        }
    }

    /// One refresh of both sources now (the periodic task calls this too).
    pub async fn refresh(
        &self,
    ) -> (
        Result<RefreshCounts, KnowledgeError>,
        Result<RefreshCounts, KnowledgeError>,
    ) {
        let _one = self.0.refreshing.lock().await;
        let wiki = self.0.refresh_wiki().await;
        let files = self.0.refresh_files().await;
        (wiki, files)
    }

    /// Refreshes every refresh period until `stop` is cancelled; a first
    /// refresh right away.
    pub async fn run(self, stop: CancellationToken) {
        if self.0.refresh_every.is_zero() {
            return;
        }
        loop {
            let (wiki, files) = tokio::select! {
                () = stop.cancelled() => return,
                done = self.refresh() => done,
            };
            for (source, result) in [("wiki", wiki), ("files", files)] {
                match result {
                    Ok(counts) if counts.indexed + counts.removed > 0 => tracing::info!(
                        source,
                        indexed = counts.indexed,
                        removed = counts.removed,
                        downloads = counts.downloads,
                        listings = counts.listings,
                        "content index refreshed"
                    ),
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(source, error = %error, "content index refresh failed; the index keeps what it had");
                    }
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(self.0.refresh_every) => {}
                () = self.0.kick.notified() => {}
            }
        }
    }

    /// Asks the periodic task to refresh now.
    pub fn refresh_soon(&self) {
        self.0.kick.notify_one();
    }

    /// Each source's state.
    pub async fn status(&self) -> IndexStatus {
        self.0.status.lock().await.clone()
    }

    /// Bytes the index takes on disk.
    pub fn index_bytes(&self) -> u64 {
        self.0.index.stats().bytes
    }
}

/// Servers sharing one index folder that each get an index of their own.
const MAX_INDEX_SLOTS: usize = 64;

/// The index in `dir` (in memory without one), or — when another server
/// holds it (replicas sharing a data folder) — in the first of `dir-1`,
/// `dir-2`, … no other holds; a restarted server finds its old one again.
fn open_own_index(dir: Option<&std::path::Path>) -> Result<SearchIndex, KnowledgeError> {
    let mut slot = 0;
    loop {
        let dir = dir.map(|base| match slot {
            0 => base.to_owned(),
            n => {
                let mut name = base.file_name().unwrap_or_default().to_owned();
                name.push(format!("-{n}"));
                base.with_file_name(name)
            }
        });
        match SearchIndex::open(&IndexSettings {
            dir,
            // tantivy's least: a bigger arena only makes fewer, larger
            // flushes, and the service's memory is the budget that counts.
            writer_heap_bytes: 15_000_000,
        }) {
            Err(IndexError::Locked(_)) if slot < MAX_INDEX_SLOTS => slot += 1,
            other => return Ok(other?),
        }
    }
}

/// Suggestions are offered when a search returns fewer hits than this.
const FEW_HITS: usize = 3;

/// Ways to search better, for a search that found fewer than three hits:
/// the longest word of a phrase, a wider folder, a word likely in a file's
/// name (when the search `names_only`), or another form of the word. The
/// MCP tools and the BFF's `nc/search` say the same.
pub fn search_suggestions(
    query: &str,
    returned: usize,
    prefix: Option<&str>,
    names_only: bool,
) -> Vec<String> {
    if returned >= FEW_HITS {
        return Vec::new();
    }
    let mut out = Vec::new();
    let words: Vec<&str> = query.split_whitespace().collect();
    if words.len() > 1 {
        let longest = words
            .iter()
            .max_by_key(|w| w.chars().count())
            .copied()
            .unwrap_or(query);
        out.push(format!(
            "Search for one distinctive word instead of the phrase, e.g. \"{longest}\"."
        ));
    }
    if let Some(prefix) = prefix {
        out.push(format!(
            "Remove path_prefix \"{prefix}\" or use a parent folder to search more widely."
        ));
    }
    if names_only {
        out.push("This search matches file and folder names only: try a word likely to be in the file name, such as a meeting date, \"report\" or \"budget\".".to_owned());
    } else {
        out.push("Try a synonym, a singular or plural form, or a shorter word stem.".to_owned());
    }
    if returned > 0 {
        out.push("Read the hits for details; a broader query may find related pages.".to_owned());
    }
    out
}
