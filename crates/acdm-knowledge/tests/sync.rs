//! The index's sync over stores with Nextcloud's folder-etag semantics
//! (every parent folder gets a new etag when anything below it changes —
//! what wsgidav, the real WebDAV server of the other suites, does not do)
//! and a wiki with a head and a tree: what a refresh costs, in upstream
//! calls, when nothing changed and when one file did; that adds, changes
//! and deletes show in search after one refresh; and that a project's
//! search never returns another project's or the trash's files.
//!
//! The stores are in memory and count their calls; the documents are
//! plain text (documents as text are the extraction suite's and the API
//! suite's).

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    reason = "tests"
)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acdm_core::{AbsPath, RelPath};
use acdm_extract::{Extractor, ExtractorConfig, Limits};
use acdm_knowledge::{Knowledge, KnowledgeSettings, KnowledgeSources, ProjectFolders};
use acdm_sources::{
    ETag, Entry, EntryKind, FileReader, GitRef, ReadRange, ReadStream, SourceError, WikiBlob,
    WikiHead, WikiQuery, WikiSearch, WikiSource, WikiWindow, Window,
};
use async_trait::async_trait;
use bytes::Bytes;

fn abs(path: &str) -> AbsPath {
    AbsPath::parse(path).unwrap()
}

/// Calls a double received, by kind.
#[derive(Default)]
struct Calls {
    list: AtomicU64,
    read: AtomicU64,
    stat: AtomicU64,
}

impl Calls {
    fn take(&self) -> (u64, u64) {
        (
            self.list.swap(0, Ordering::SeqCst),
            self.read.swap(0, Ordering::SeqCst),
        )
    }
}

/// A file store with Nextcloud's semantics: a write or delete gives the
/// file and every folder above it a new etag.
#[derive(Default)]
struct PropagatingStore {
    files: Mutex<HashMap<AbsPath, (Bytes, String)>>,
    folder_etags: Mutex<HashMap<AbsPath, String>>,
    counter: AtomicU64,
    calls: Calls,
}

impl PropagatingStore {
    fn next(&self) -> String {
        format!("e{}", self.counter.fetch_add(1, Ordering::SeqCst))
    }

    fn touch_parents(&self, path: &AbsPath) {
        let mut folders = self.folder_etags.lock().unwrap();
        let mut parent = path.parent();
        while let Some(folder) = parent {
            folders.insert(folder.clone(), self.next());
            parent = folder.parent();
        }
    }

    fn put(&self, path: &str, text: &str) {
        let path = abs(path);
        let etag = self.next();
        self.files
            .lock()
            .unwrap()
            .insert(path.clone(), (Bytes::from(text.to_owned()), etag));
        self.touch_parents(&path);
    }

    fn remove(&self, path: &str) {
        let path = abs(path);
        self.files.lock().unwrap().remove(&path);
        self.touch_parents(&path);
    }

    fn is_folder(&self, path: &AbsPath) -> bool {
        self.files
            .lock()
            .unwrap()
            .keys()
            .any(|f| path.contains(f) && f != path)
    }

    fn entry(&self, path: &AbsPath) -> Option<Entry> {
        if let Some((bytes, etag)) = self.files.lock().unwrap().get(path) {
            return Some(Entry {
                path: path.clone(),
                kind: EntryKind::File,
                size: Some(bytes.len() as u64),
                modified: None,
                etag: ETag::strong(etag.clone()),
                content_type: Some("text/markdown".to_owned()),
            });
        }
        self.is_folder(path).then(|| Entry {
            path: path.clone(),
            kind: EntryKind::Folder,
            size: None,
            modified: None,
            etag: self
                .folder_etags
                .lock()
                .unwrap()
                .get(path)
                .and_then(|e| ETag::strong(e.clone())),
            content_type: None,
        })
    }
}

#[async_trait]
impl FileReader for PropagatingStore {
    fn kind(&self) -> &'static str {
        "nextcloud"
    }

    async fn check(&self) -> Result<(), SourceError> {
        Ok(())
    }

    async fn stat(&self, path: &AbsPath) -> Result<Entry, SourceError> {
        self.calls.stat.fetch_add(1, Ordering::SeqCst);
        self.entry(path)
            .ok_or_else(|| SourceError::NotFound(path.to_string()))
    }

    async fn list(&self, folder: &AbsPath) -> Result<Vec<Entry>, SourceError> {
        self.calls.list.fetch_add(1, Ordering::SeqCst);
        if !self.is_folder(folder) {
            return Err(SourceError::NotFound(folder.to_string()));
        }
        let depth = folder.segments().len() + 1;
        let children: BTreeSet<String> = self
            .files
            .lock()
            .unwrap()
            .keys()
            .filter(|f| folder.contains(f) && f.segments().len() >= depth)
            .map(|f| format!("/{}", f.segments()[..depth].join("/")))
            .collect();
        Ok(children
            .iter()
            .filter_map(|c| self.entry(&abs(c)))
            .collect())
    }

    async fn read(&self, path: &AbsPath, range: ReadRange) -> Result<ReadStream, SourceError> {
        self.calls.read.fetch_add(1, Ordering::SeqCst);
        let (bytes, etag) = self
            .files
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .ok_or_else(|| SourceError::NotFound(path.to_string()))?;
        let start = (range.offset as usize).min(bytes.len());
        let end = start.saturating_add(range.len as usize).min(bytes.len());
        let body = bytes.slice(start..end);
        Ok(ReadStream {
            size: Some(bytes.len() as u64),
            etag: ETag::strong(etag),
            content_type: None,
            offset: start as u64,
            body: Box::pin(futures_util::stream::iter([Ok(body)])),
        })
    }
}

/// A wiki with a branch head and a tree; every change is a new commit.
#[derive(Default)]
struct CommitWiki {
    files: Mutex<BTreeMap<String, String>>,
    commits: AtomicU64,
    heads: AtomicU64,
    trees: AtomicU64,
    reads: AtomicU64,
}

impl CommitWiki {
    fn put(&self, path: &str, text: &str) {
        self.files
            .lock()
            .unwrap()
            .insert(path.to_owned(), text.to_owned());
        self.commits.fetch_add(1, Ordering::SeqCst);
    }

    fn remove(&self, path: &str) {
        self.files.lock().unwrap().remove(path);
        self.commits.fetch_add(1, Ordering::SeqCst);
    }

    fn take(&self) -> (u64, u64, u64) {
        (
            self.heads.swap(0, Ordering::SeqCst),
            self.trees.swap(0, Ordering::SeqCst),
            self.reads.swap(0, Ordering::SeqCst),
        )
    }
}

fn blob_id(text: &str) -> String {
    format!("{:016x}", {
        let mut h: u64 = 1469598103934665603;
        for b in text.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(1099511628211);
        }
        h
    })
}

#[async_trait]
impl WikiSource for CommitWiki {
    fn kind(&self) -> &'static str {
        "gitlab"
    }

    async fn check(&self) -> Result<(), SourceError> {
        Ok(())
    }

    async fn search(&self, _: &WikiQuery) -> Result<WikiSearch, SourceError> {
        Ok(WikiSearch {
            hits: Vec::new(),
            total: Some(0),
        })
    }

    async fn read(
        &self,
        path: &RelPath,
        git_ref: Option<&GitRef>,
        range: ReadRange,
    ) -> Result<WikiWindow, SourceError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let text = self
            .files
            .lock()
            .unwrap()
            .get(&path.to_string())
            .cloned()
            .ok_or_else(|| SourceError::NotFound(path.to_string()))?;
        let bytes = Bytes::from(text);
        let end = (range.len as usize).min(bytes.len());
        Ok(WikiWindow {
            path: path.clone(),
            git_ref: git_ref.cloned().unwrap(),
            window: Window {
                size: Some(bytes.len() as u64),
                etag: None,
                content_type: None,
                offset: 0,
                bytes: bytes.slice(..end),
            },
        })
    }

    async fn head(&self) -> Result<WikiHead, SourceError> {
        self.heads.fetch_add(1, Ordering::SeqCst);
        Ok(WikiHead {
            commit: format!("{:040x}", self.commits.load(Ordering::SeqCst)),
            ref_name: GitRef::parse("main").unwrap(),
            committed_at: None,
        })
    }

    async fn tree(&self, _commit: &str) -> Result<Vec<WikiBlob>, SourceError> {
        self.trees.fetch_add(1, Ordering::SeqCst);
        Ok(self
            .files
            .lock()
            .unwrap()
            .iter()
            .map(|(path, text)| WikiBlob {
                path: RelPath::parse(path).unwrap(),
                blob_id: blob_id(text),
            })
            .collect())
    }
}

struct Setup {
    knowledge: Knowledge,
    store: Arc<PropagatingStore>,
    wiki: Arc<CommitWiki>,
    _dir: tempfile::TempDir,
}

/// Projects Alpha, Alphabet (a name sharing Alpha's prefix) and Beta are
/// provisioned; `Gamma` is a folder no project provisions.
fn setup() -> Setup {
    let store = Arc::new(PropagatingStore::default());
    store.put("/Projects/Alpha/README.md", "Alpha project overview.");
    store.put(
        "/Projects/Alpha/contracts/supply.md",
        "The supplier pays a penalty of 0.5% per day of late delivery.",
    );
    store.put(
        "/Projects/Alpha/meetings/2026/kickoff.md",
        "Kickoff meeting: we chose the steel supplier. 会议决定采用钢结构方案。",
    );
    store.put("/Projects/Alphabet/penalty.md", "Alphabet penalty terms.");
    store.put(
        "/Projects/Beta/penalty.md",
        "Beta penalty terms, confidential.",
    );
    store.put("/Projects/Gamma/penalty.md", "Gamma is not provisioned.");
    store.put(
        "/Projects/.acdm-trash/alpha/e1/0/penalty.md",
        "Deleted penalty notes.",
    );
    let wiki = Arc::new(CommitWiki::default());
    wiki.put(
        "guides/weekly-reports.md",
        "Write the weekly report every Friday.",
    );
    wiki.put(
        "policies/security.md",
        "Passwords are rotated every 90 days.",
    );
    let dir = tempfile::tempdir().unwrap();
    let roots: Arc<dyn ProjectFolders> = Arc::new(vec![
        abs("/Projects/Alpha"),
        abs("/Projects/Alphabet"),
        abs("/Projects/Beta"),
    ]);
    let extractor = Extractor::new(ExtractorConfig {
        // Plain text only here: no document is extracted.
        program: "/nonexistent/acdm-extract".into(),
        args: Vec::new(),
        processes: 1,
        limits: Limits::default(),
        cache_bytes: 0,
    });
    let knowledge = Knowledge::open(
        &KnowledgeSettings {
            index_dir: Some(dir.path().join("index")),
            refresh_every: Duration::from_secs(3600),
            max_file_bytes: 1 << 20,
            documents_in_flight: 2,
        },
        KnowledgeSources {
            wiki: wiki.clone(),
            files: store.clone(),
            files_base: abs("/Projects"),
            folder_etags_cover_subtree: true,
        },
        extractor,
        roots,
    )
    .unwrap();
    Setup {
        knowledge,
        store,
        wiki,
        _dir: dir,
    }
}

async fn files(knowledge: &Knowledge, scope: &str, query: &str) -> Vec<String> {
    knowledge
        .search_files(&abs(scope), query, 50)
        .await
        .unwrap()
        .expect("the index answers after a refresh")
        .hits
        .into_iter()
        .map(|h| h.path)
        .collect()
}

async fn wiki(knowledge: &Knowledge, query: &str) -> Vec<String> {
    knowledge
        .search_wiki(None, query, 50)
        .await
        .unwrap()
        .expect("the index answers after a refresh")
        .hits
        .into_iter()
        .map(|h| h.path)
        .collect()
}

async fn refresh(knowledge: &Knowledge) {
    let (wiki, files) = knowledge.refresh().await;
    wiki.unwrap();
    files.unwrap();
}

#[tokio::test]
async fn before_the_first_refresh_the_index_leaves_searches_to_the_upstreams() {
    let s = setup();
    assert!(
        s.knowledge
            .search_files(&abs("/Projects/Alpha"), "penalty", 10)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        s.knowledge
            .search_wiki(None, "report", 10)
            .await
            .unwrap()
            .is_none()
    );
    refresh(&s.knowledge).await;
    assert_eq!(
        files(&s.knowledge, "/Projects/Alpha", "penalty").await,
        ["/Projects/Alpha/contracts/supply.md"]
    );
    // A folder no project provisions is not the index's: the upstream's.
    assert!(
        s.knowledge
            .search_files(&abs("/Projects/Gamma"), "penalty", 10)
            .await
            .unwrap()
            .is_none()
    );
    let status = s.knowledge.status().await;
    assert!(status.files.built && status.wiki.built);
    assert_eq!(status.files.documents, 5, "{status:?}");
    assert_eq!(status.wiki.documents, 2, "{status:?}");
}

#[tokio::test]
async fn a_refresh_with_nothing_changed_lists_each_project_folder_once_and_downloads_nothing() {
    let s = setup();
    refresh(&s.knowledge).await;
    let (lists, reads) = s.store.calls.take();
    assert_eq!(reads, 5, "the first refresh reads every file once");
    assert!(lists >= 3);
    let (heads, trees, wiki_reads) = s.wiki.take();
    assert_eq!((heads, trees, wiki_reads), (1, 1, 2));

    refresh(&s.knowledge).await;
    assert_eq!(
        s.store.calls.take(),
        (3, 0),
        "one listing per provisioned folder, no download"
    );
    assert_eq!(s.wiki.take(), (1, 0, 0), "one branch lookup, nothing else");

    // One deep change: the folders above it are listed again, nothing else
    // is, and only that file is read.
    s.store.put(
        "/Projects/Alpha/meetings/2026/kickoff.md",
        "Kickoff meeting: we chose the aluminium supplier.",
    );
    refresh(&s.knowledge).await;
    let (lists, reads) = s.store.calls.take();
    assert_eq!(reads, 1);
    // Alpha, Alpha/meetings, Alpha/meetings/2026, plus Alphabet and Beta.
    assert_eq!(lists, 5);
    assert_eq!(
        files(&s.knowledge, "/Projects/Alpha", "aluminium").await,
        ["/Projects/Alpha/meetings/2026/kickoff.md"]
    );
    assert!(
        files(&s.knowledge, "/Projects/Alpha", "steel")
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn files_added_changed_and_deleted_upstream_show_after_one_refresh() {
    let s = setup();
    refresh(&s.knowledge).await;
    s.store.put(
        "/Projects/Alpha/reports/w47.md",
        "Weekly report: the crane inspection passed.",
    );
    s.wiki
        .put("guides/cranes.md", "Crane inspections happen monthly.");
    refresh(&s.knowledge).await;
    assert_eq!(
        files(&s.knowledge, "/Projects/Alpha", "crane").await,
        ["/Projects/Alpha/reports/w47.md"]
    );
    assert_eq!(wiki(&s.knowledge, "crane").await, ["guides/cranes.md"]);

    s.store.put(
        "/Projects/Alpha/reports/w47.md",
        "Weekly report: the scaffolding was delayed.",
    );
    s.wiki
        .put("guides/cranes.md", "Tower cranes need a permit.");
    refresh(&s.knowledge).await;
    assert!(
        files(&s.knowledge, "/Projects/Alpha", "inspection")
            .await
            .is_empty()
    );
    assert_eq!(
        files(&s.knowledge, "/Projects/Alpha", "scaffolding").await,
        ["/Projects/Alpha/reports/w47.md"]
    );
    assert_eq!(wiki(&s.knowledge, "permit").await, ["guides/cranes.md"]);
    assert!(wiki(&s.knowledge, "monthly").await.is_empty());

    s.store.remove("/Projects/Alpha/reports/w47.md");
    s.wiki.remove("guides/cranes.md");
    refresh(&s.knowledge).await;
    assert!(
        files(&s.knowledge, "/Projects/Alpha", "scaffolding")
            .await
            .is_empty()
    );
    assert!(wiki(&s.knowledge, "permit").await.is_empty());
}

#[tokio::test]
async fn a_write_made_through_the_service_is_searchable_at_once() {
    let s = setup();
    refresh(&s.knowledge).await;
    s.store.put(
        "/Projects/Alpha/notes/site-visit.md",
        "Site visit: the foundation pour is scheduled.",
    );
    s.knowledge
        .file_changed(&[abs("/Projects/Alpha/notes/site-visit.md")])
        .await;
    assert_eq!(
        files(&s.knowledge, "/Projects/Alpha", "foundation").await,
        ["/Projects/Alpha/notes/site-visit.md"]
    );
    s.store.remove("/Projects/Alpha/notes/site-visit.md");
    s.knowledge
        .file_changed(&[abs("/Projects/Alpha/notes/site-visit.md")])
        .await;
    assert!(
        files(&s.knowledge, "/Projects/Alpha", "foundation")
            .await
            .is_empty()
    );
    // A write outside the provisioned folders is not read at all.
    s.store
        .put("/Projects/Gamma/secret.md", "foundation secrets");
    s.store.calls.take();
    let stats = s.store.calls.stat.load(Ordering::SeqCst);
    s.knowledge
        .file_changed(&[abs("/Projects/Gamma/secret.md")])
        .await;
    assert_eq!(s.store.calls.take(), (0, 0));
    assert_eq!(s.store.calls.stat.load(Ordering::SeqCst), stats);
}

#[tokio::test]
async fn a_projects_search_never_returns_another_projects_or_the_trashs_files() {
    let s = setup();
    refresh(&s.knowledge).await;
    for (scope, expected) in [
        (
            "/Projects/Alpha",
            vec!["/Projects/Alpha/contracts/supply.md"],
        ),
        ("/Projects/Alphabet", vec!["/Projects/Alphabet/penalty.md"]),
        ("/Projects/Beta", vec!["/Projects/Beta/penalty.md"]),
        (
            "/Projects/Alpha/contracts",
            vec!["/Projects/Alpha/contracts/supply.md"],
        ),
    ] {
        assert_eq!(
            files(&s.knowledge, scope, "penalty").await,
            expected,
            "{scope}"
        );
    }
    // The trash and the unprovisioned folder are never in the index.
    for scope in [
        "/Projects/.acdm-trash",
        "/Projects/.acdm-trash/alpha",
        "/Projects/Gamma",
    ] {
        assert!(
            s.knowledge
                .search_files(&abs(scope), "penalty", 10)
                .await
                .unwrap()
                .is_none(),
            "{scope}"
        );
    }
}

#[tokio::test]
async fn deleting_the_index_loses_nothing_it_is_rebuilt() {
    let s = setup();
    refresh(&s.knowledge).await;
    let dir = s._dir.path().join("index");
    drop(s.knowledge);
    std::fs::remove_dir_all(&dir).unwrap();
    let rebuilt = Knowledge::open(
        &KnowledgeSettings {
            index_dir: Some(dir),
            refresh_every: Duration::from_secs(3600),
            max_file_bytes: 1 << 20,
            documents_in_flight: 2,
        },
        KnowledgeSources {
            wiki: s.wiki.clone(),
            files: s.store.clone(),
            files_base: abs("/Projects"),
            folder_etags_cover_subtree: true,
        },
        Extractor::new(ExtractorConfig {
            program: "/nonexistent/acdm-extract".into(),
            args: Vec::new(),
            processes: 1,
            limits: Limits::default(),
            cache_bytes: 0,
        }),
        Arc::new(vec![abs("/Projects/Alpha")]),
    )
    .unwrap();
    refresh(&rebuilt).await;
    assert_eq!(
        files(&rebuilt, "/Projects/Alpha", "penalty").await,
        ["/Projects/Alpha/contracts/supply.md"]
    );
    // Beta is no longer provisioned: its files were never indexed again.
    assert!(
        rebuilt
            .search_files(&abs("/Projects/Beta"), "penalty", 10)
            .await
            .unwrap()
            .is_none()
    );
}

#[derive(serde::Deserialize)]
struct Corpus {
    documents: Vec<CorpusDocument>,
    queries: Vec<CorpusQuery>,
}

#[derive(serde::Deserialize)]
struct CorpusDocument {
    key: String,
    body: String,
}

#[derive(serde::Deserialize)]
struct CorpusQuery {
    text: String,
    relevant: Vec<String>,
}

/// The index's labelled corpus (`acdm-index` `tests/ranking`) through the
/// calls the search tools make: files synced from a store and searched in
/// their project's folder (`acdm_search_nextcloud` and `nc/search`), wiki
/// pages synced from the wiki and searched whole (`acdm_search_wiki`).
/// Titles come from the file names, as they do for real files.
#[tokio::test]
async fn held_out_queries_find_their_files_through_the_tools_search_calls() {
    let corpus: Corpus = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../acdm-index/tests/ranking/corpus.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let store = Arc::new(PropagatingStore::default());
    let wiki = Arc::new(CommitWiki::default());
    for doc in &corpus.documents {
        match doc.key.strip_prefix('/') {
            Some(_) => store.put(&doc.key, &doc.body),
            None => wiki.put(&doc.key, &doc.body),
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let knowledge = Knowledge::open(
        &KnowledgeSettings {
            index_dir: Some(dir.path().join("index")),
            refresh_every: Duration::from_secs(3600),
            max_file_bytes: 1 << 20,
            documents_in_flight: 2,
        },
        KnowledgeSources {
            wiki,
            files: store,
            files_base: abs("/Projects"),
            folder_etags_cover_subtree: true,
        },
        Extractor::new(ExtractorConfig {
            program: "/nonexistent/acdm-extract".into(),
            args: Vec::new(),
            processes: 1,
            limits: Limits::default(),
            cache_bytes: 0,
        }),
        Arc::new(vec![abs("/Projects/Alpha"), abs("/Projects/Beta")]),
    )
    .unwrap();
    refresh(&knowledge).await;
    // (tool, queries, hits in the top 3, reciprocal ranks)
    let mut scores: BTreeMap<&str, (u32, u32, f64)> = BTreeMap::new();
    for query in &corpus.queries {
        let Some(first) = query.relevant.first() else {
            continue;
        };
        let (tool, found) = if first.starts_with('/') {
            let project = first.split('/').take(3).collect::<Vec<_>>().join("/");
            let found = files(&knowledge, &project, &query.text).await;
            ("files", found)
        } else {
            ("wiki", wiki_paths(&knowledge, &query.text).await)
        };
        let rank = found.iter().position(|p| query.relevant.contains(p));
        let entry = scores.entry(tool).or_default();
        entry.0 += 1;
        entry.1 += u32::from(rank.is_some_and(|r| r < 3));
        entry.2 += rank.map_or(0.0, |r| 1.0 / (r as f64 + 1.0));
    }
    for (tool, (queries, top3, rr)) in &scores {
        let recall = f64::from(*top3) / f64::from(*queries);
        let mrr = rr / f64::from(*queries);
        println!("{tool}: {queries} queries, recall@3 {recall:.3}, MRR {mrr:.3}");
        assert!(recall >= 0.9, "{tool}: recall@3 {recall:.3}");
        assert!(mrr >= 0.75, "{tool}: MRR {mrr:.3}");
    }
    assert_eq!(scores.len(), 2, "both kinds of search were asked");
}

async fn wiki_paths(knowledge: &Knowledge, query: &str) -> Vec<String> {
    wiki(knowledge, query).await
}
