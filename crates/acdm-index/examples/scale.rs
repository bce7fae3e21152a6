//! The index at scale: generates N documents (default 10,000; half Chinese,
//! half English, 2–6 KB each, sentences drawn from the ranking corpus),
//! indexes them on disk in batches, reopens the index as a restarted
//! service would, runs queries, and prints one JSON object: build time,
//! index size, query latency (p50/p99, snippets included) and the
//! process's resident memory.
//!
//! ```sh
//! cargo run --release -p acdm-index --example scale -- [--docs 10000] [--queries 2000] [--large 0] [--dir PATH]
//! cargo run --release -p acdm-index --example scale -- --dir PATH --serve-only
//! ```
//!
//! The second form serves the index the first left in `PATH` from a fresh
//! process, so its memory figures are the serving ones alone.
//!
//! Memory is read from `/proc/self/status` (Linux); the service's allocator
//! (mimalloc) is not this example's (the system's), which tends to keep
//! more of what it freed.
#![expect(
    clippy::print_stdout,
    reason = "the example's output is its JSON report"
)]

use std::error::Error;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use acdm_index::{Change, Document, IndexSettings, SearchIndex, SearchQuery, SourceKind};

/// The folders of a project.
const FOLDERS: [&str; 7] = [
    "minutes",
    "contracts",
    "reports",
    "safety",
    "budget",
    "会议纪要",
    "合同",
];

/// Documents per `apply` (one commit each).
const BATCH: usize = 500;

/// A small deterministic generator (xorshift64*), so runs compare.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n.max(1) as u64)).unwrap_or(0)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len()))
    }
}

/// The ranking corpus's sentences (Chinese and English apart) and queries.
struct Pool {
    chinese: Vec<String>,
    english: Vec<String>,
    queries: Vec<String>,
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

fn pool() -> Result<Pool, Box<dyn Error>> {
    let corpus: Corpus = serde_json::from_str(include_str!("../tests/ranking/corpus.json"))?;
    let mut pool = Pool {
        chinese: Vec::new(),
        english: Vec::new(),
        queries: corpus.queries.into_iter().map(|q| q.text).collect(),
    };
    for doc in &corpus.documents {
        for line in doc.body.lines().map(str::trim).filter(|l| l.len() > 12) {
            if line.chars().any(|c| ('\u{4E00}'..='\u{9FFF}').contains(&c)) {
                pool.chinese.push(line.to_owned());
            } else {
                pool.english.push(line.to_owned());
            }
        }
    }
    Ok(pool)
}

/// Document `i`: a wiki page one time in ten, else a project file.
fn document(i: usize, rng: &mut Rng, pool: &Pool) -> Document {
    let chinese = i.is_multiple_of(2);
    let lines = if chinese {
        &pool.chinese
    } else {
        &pool.english
    };
    let target = 2_000 + rng.below(4_000);
    let mut body = String::with_capacity(target + 200);
    while body.len() < target {
        let Some(line) = rng.pick(lines) else { break };
        body.push_str(line);
        // Numbers and codes vary from document to document, as in life.
        body.push_str(&format!(" ({}-{})\n", rng.below(1000), rng.below(100)));
    }
    let project = rng.below(50);
    let folder = rng.pick(&FOLDERS).copied().unwrap_or("minutes");
    let (source, key) = if i % 10 == 9 {
        (
            SourceKind::Wiki,
            format!("guides/section-{}/page-{i}.md", rng.below(20)),
        )
    } else {
        (
            SourceKind::Files,
            format!("/Projects/P{project}/{folder}/doc-{i}.docx"),
        )
    };
    let title = body
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(40)
        .collect();
    Document {
        source,
        key,
        title,
        body,
        modified: Some(1_770_000_000 + i64::try_from(i).unwrap_or(0)),
        version: format!("etag-{i}"),
        format: Some("docx".to_owned()),
    }
}

/// A kB figure of `/proc/self/status`, in MB.
fn status_mb(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Starts a new peak-memory measure (Linux: resets VmHWM).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() - 1) as f64 * p).round();
    let i = usize::try_from(rank as u64).unwrap_or(0);
    sorted.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

fn json_number(value: Option<f64>) -> String {
    value.map_or_else(|| "null".to_owned(), |v| format!("{v:.1}"))
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut docs = 10_000_usize;
    let mut queries = 2_000_usize;
    let mut dir: Option<PathBuf> = None;
    let mut build_index = true;
    let mut large = 0_usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--docs" => docs = args.next().ok_or("--docs N")?.parse()?,
            "--queries" => queries = args.next().ok_or("--queries N")?.parse()?,
            "--dir" => dir = Some(args.next().ok_or("--dir PATH")?.into()),
            // Documents of 8 MB (the extractor's largest text) added to the others.
            "--large" => large = args.next().ok_or("--large N")?.parse()?,
            // Serve an index an earlier run left in --dir, in a fresh process.
            "--serve-only" => build_index = false,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let temp = tempfile::tempdir()?;
    let dir = dir.unwrap_or_else(|| temp.path().to_owned());
    let settings = IndexSettings {
        dir: Some(dir),
        ..IndexSettings::default()
    };
    let pool = pool()?;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);

    let rss_start = status_mb("VmRSS:");
    let index = SearchIndex::open(&settings)?;
    let rss_open = status_mb("VmRSS:");
    let anon_open = status_mb("RssAnon:");
    let started = Instant::now();
    if build_index {
        let mut batch = Vec::with_capacity(BATCH);
        for i in 0..docs {
            batch.push(Change::Upsert(document(i, &mut rng, &pool)));
            if batch.len() == BATCH {
                index.apply(std::mem::take(&mut batch))?;
            }
        }
        index.apply(batch)?;
        for i in 0..large {
            let mut doc = document(docs + i, &mut rng, &pool);
            while doc.body.len() < 8 * 1024 * 1024 {
                let more = document(docs + i, &mut rng, &pool).body;
                doc.body.push_str(&more);
            }
            index.apply(vec![Change::Upsert(doc)])?;
        }
    }
    let build = started.elapsed();
    let rss_built = status_mb("VmRSS:");
    let peak_build = status_mb("VmHWM:");
    drop(index);

    // A restart: reopen, learn the versions, serve queries.
    let peak_reset = reset_peak();
    let started = Instant::now();
    let index = SearchIndex::open(&settings)?;
    let versions =
        index.versions(SourceKind::Files)?.len() + index.versions(SourceKind::Wiki)?.len();
    let reopen = started.elapsed();
    let stats = index.stats();
    let mut latencies = Vec::with_capacity(queries);
    let mut hits = 0_usize;
    for q in 0..queries {
        let text = if q.is_multiple_of(2) {
            rng.pick(&pool.queries).cloned().unwrap_or_default()
        } else {
            // Two random words of a random sentence.
            let line = rng.pick(&pool.english).cloned().unwrap_or_default();
            line.split_whitespace()
                .skip(rng.below(6))
                .take(2)
                .collect::<Vec<_>>()
                .join(" ")
        };
        let source = if q % 10 == 9 {
            SourceKind::Wiki
        } else {
            SourceKind::Files
        };
        let scope = (q.is_multiple_of(3) && source == SourceKind::Files)
            .then(|| format!("/Projects/P{}/", rng.below(50)));
        let started = Instant::now();
        match index.search(&SearchQuery {
            source,
            text,
            scope,
            limit: 10,
        }) {
            Ok(found) => hits += found.hits.len(),
            Err(error) if error.code() == "empty_query" => {}
            Err(error) => return Err(error.into()),
        }
        latencies.push(started.elapsed());
    }
    latencies.sort();
    let rss_serving = status_mb("VmRSS:");
    let (anon_serving, file_serving) = (status_mb("RssAnon:"), status_mb("RssFile:"));
    let peak_serving = if peak_reset {
        status_mb("VmHWM:")
    } else {
        None
    };

    println!(
        "{{\"docs\":{docs},\"large_docs\":{large},\"versions\":{versions},\"build_seconds\":{:.2},\"reopen_ms\":{:.1},\"index_bytes\":{},\"segments\":{},\"queries\":{queries},\"hits\":{hits},\"query_p50_ms\":{:.2},\"query_p99_ms\":{:.2},\"query_max_ms\":{:.2},\"rss_start_mb\":{},\"rss_open_mb\":{},\"rss_open_anon_mb\":{},\"rss_built_mb\":{},\"peak_rss_build_mb\":{},\"rss_serving_mb\":{},\"rss_serving_anon_mb\":{},\"rss_serving_file_mb\":{},\"peak_rss_serving_mb\":{}}}",
        build.as_secs_f64(),
        reopen.as_secs_f64() * 1000.0,
        stats.bytes,
        stats.segments,
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0),
        json_number(rss_start),
        json_number(rss_open),
        json_number(anon_open),
        json_number(rss_built),
        json_number(peak_build),
        json_number(rss_serving),
        json_number(anon_serving),
        json_number(file_serving),
        json_number(peak_serving),
    );
    Ok(())
}
