//! `cargo xtask bench search`: the content index over a generated corpus
//! of project files in the local file store, through the service's own
//! knowledge layer (extraction children of the service binary, the index on
//! disk):
//!
//! - the first build (every file read, documents extracted), its time and
//!   the index's size on disk;
//! - a refresh with nothing changed, and one with 1 % of the files
//!   changed: time, folder listings and downloads;
//! - query latency (p50, p99, snippets included) through the same call the
//!   search tools make;
//! - the process's resident memory while serving, and its peak.
//!
//! `--docs N` (default 10,000) and `--queries N` (default 1,000). One JSON
//! object on standard output. Documents: nine in ten are Markdown text of
//! 2–6 KB (sentences of the ranking corpus, half Chinese, half English);
//! one in ten is a real document (docx, xlsx, pptx, odt, pdf, html, made
//! by `cargo xtask setup`) when the fixtures are there.
#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    reason = "a benchmark: its output is its report; setup failures end it"
)]

use std::path::{Path, PathBuf};

/// The service's allocator, so the memory measured is what the service
/// would hold (glibc's per-thread arenas keep three times as much here).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::{Duration, Instant};

use acdm_core::AbsPath;
use acdm_extract::{Extractor, ExtractorConfig};
use acdm_knowledge::{Knowledge, KnowledgeSettings, KnowledgeSources, ProjectFolders};
use acdm_sources::local::{LocalFileStore, LocalWiki};
use acdm_sources::{FileReader, GitRef, WikiSource};

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

#[derive(serde::Deserialize)]
struct Corpus {
    documents: Vec<CorpusDocument>,
    queries: Vec<CorpusQuery>,
}

#[derive(serde::Deserialize)]
struct CorpusDocument {
    body: String,
}

#[derive(serde::Deserialize)]
struct CorpusQuery {
    text: String,
}

const PROJECTS: usize = 20;
const FOLDERS: [&str; 6] = [
    "minutes",
    "contracts",
    "reports",
    "safety",
    "会议纪要",
    "合同",
];

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Resident memory in MiB: now, at its peak, anonymous (the heap) and file-backed (the
/// index's mapped files, which the kernel may drop and read again).
fn memory() -> (u64, u64, u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            / 1024
    };
    (
        field("VmRSS:"),
        field("VmHWM:"),
        field("RssAnon:"),
        field("RssFile:"),
    )
}

fn size_of(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => size_of(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn main() {
    let docs = arg("--docs", 10_000);
    let queries = arg("--queries", 1_000);
    let corpus: Corpus = serde_json::from_str(include_str!(
        "../../../crates/acdm-index/tests/ranking/corpus.json"
    ))
    .unwrap();
    let sentences: Vec<String> = corpus
        .documents
        .iter()
        .flat_map(|d| d.body.lines().map(str::trim).filter(|l| l.len() > 12))
        .map(str::to_owned)
        .collect();
    let fixtures =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.test-tools/fixtures/documents");
    let documents: Vec<(String, Vec<u8>)> = std::fs::read_dir(&fixtures)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    (acdm_extract::Format::from_name(&name).is_some() && name != "scan.pdf")
                        .then(|| (name, std::fs::read(e.path()).unwrap()))
                })
                .collect()
        })
        .unwrap_or_default();

    let dir = tempfile::tempdir().unwrap();
    let files_root = dir.path().join("files");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut paths = Vec::with_capacity(docs);
    for i in 0..docs {
        let project = format!("Project{:02}", i % PROJECTS);
        let folder = FOLDERS[rng.below(FOLDERS.len())];
        let sub = format!("Projects/{project}/{folder}/batch-{}", rng.below(10));
        let path = if i % 10 == 9 && !documents.is_empty() {
            let (name, bytes) = &documents[rng.below(documents.len())];
            let path = format!("{sub}/{i}-{name}");
            let file = files_root.join(&path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, bytes).unwrap();
            path
        } else {
            let target = 2_000 + rng.below(4_000);
            let mut body = String::with_capacity(target + 100);
            while body.len() < target {
                body.push_str(&sentences[rng.below(sentences.len())]);
                body.push_str(&format!(" ({}-{})\n", rng.below(1000), rng.below(100)));
            }
            let path = format!("{sub}/note-{i}.md");
            let file = files_root.join(&path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, body).unwrap();
            path
        };
        paths.push(path);
    }
    std::fs::create_dir_all(dir.path().join("wiki")).unwrap();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let files: Arc<dyn FileReader> = Arc::new(LocalFileStore::open(&files_root).unwrap());
        let wiki: Arc<dyn WikiSource> = Arc::new(
            LocalWiki::open(dir.path().join("wiki"), GitRef::parse("main").unwrap()).unwrap(),
        );
        let roots: Vec<AbsPath> = (0..PROJECTS)
            .map(|p| AbsPath::parse(&format!("/Projects/Project{p:02}")).unwrap())
            .collect();
        let roots: Arc<dyn ProjectFolders> = Arc::new(roots);
        let index_dir = dir.path().join("index");
        let extractor = Extractor::new(ExtractorConfig::new(
            env!("CARGO_BIN_EXE_acdm-backend"),
            vec!["extract".into()],
        ));
        let knowledge = Knowledge::open(
            &KnowledgeSettings {
                index_dir: Some(index_dir.clone()),
                refresh_every: Duration::from_secs(3600),
                max_file_bytes: 32 << 20,
                documents_in_flight: 2,
            },
            KnowledgeSources {
                wiki,
                files,
                files_base: AbsPath::parse("/Projects").unwrap(),
                folder_etags_cover_subtree: false,
            },
            extractor.clone(),
            roots,
        )
        .unwrap();

        let started = Instant::now();
        let (_, build) = knowledge.refresh().await;
        let build = build.unwrap();
        let build_seconds = started.elapsed().as_secs_f64();
        let index_bytes = size_of(&index_dir);

        let started = Instant::now();
        let (_, unchanged) = knowledge.refresh().await;
        let unchanged = unchanged.unwrap();
        let unchanged_ms = started.elapsed().as_secs_f64() * 1000.0;

        for i in (0..docs).step_by(100) {
            let file = dir.path().join("files").join(&paths[i]);
            if paths[i].ends_with(".md") {
                let mut text = std::fs::read_to_string(&file).unwrap();
                text.push_str("\nAmended: the crane inspection moved to Friday.\n");
                std::fs::write(&file, text).unwrap();
            } else {
                // A document rewritten: its etag changes, its text is read again.
                let bytes = std::fs::read(&file).unwrap();
                std::fs::write(&file, bytes).unwrap();
            }
        }
        let started = Instant::now();
        let (_, changed) = knowledge.refresh().await;
        let changed = changed.unwrap();
        let changed_ms = started.elapsed().as_secs_f64() * 1000.0;

        let mut latencies = Vec::with_capacity(queries);
        let mut hits = 0u64;
        for q in 0..queries {
            let text = &corpus.queries[q % corpus.queries.len()].text;
            let scope = AbsPath::parse(&format!("/Projects/Project{:02}", q % PROJECTS)).unwrap();
            let started = Instant::now();
            let found = knowledge
                .search_files(&scope, text, 10)
                .await
                .unwrap()
                .expect("the index answers");
            latencies.push(started.elapsed());
            hits += found.hits.len() as u64;
        }
        latencies.sort();
        let (rss_mib, peak_mib, anon_mib, file_mib) = memory();
        let stats = extractor.stats();
        let report = serde_json::json!({
            "documents": docs,
            "real_documents": docs / 10 * usize::from(!documents.is_empty()),
            "projects": PROJECTS,
            "build": {
                "seconds": build_seconds,
                "indexed": build.indexed,
                "listings": build.listings,
                "downloads": build.downloads,
                "extractions": stats.extractions,
                "extraction_cache_hits": stats.cache_hits,
                "index_bytes": index_bytes,
            },
            "refresh_unchanged": {
                "ms": unchanged_ms,
                "listings": unchanged.listings,
                "downloads": unchanged.downloads,
                "indexed": unchanged.indexed,
            },
            "refresh_one_percent_changed": {
                "ms": changed_ms,
                "listings": changed.listings,
                "downloads": changed.downloads,
                "indexed": changed.indexed,
            },
            "query": {
                "count": queries,
                "hits_per_query": hits as f64 / queries.max(1) as f64,
                "p50_ms": percentile(&latencies, 0.50),
                "p99_ms": percentile(&latencies, 0.99),
                "max_ms": percentile(&latencies, 1.0),
            },
            "rss_mib": rss_mib,
            "peak_rss_mib": peak_mib,
            "rss_anonymous_mib": anon_mib,
            "rss_file_mib": file_mib,
        });
        println!("{}", serde_json::to_string_pretty(&report).unwrap());
    });
}
