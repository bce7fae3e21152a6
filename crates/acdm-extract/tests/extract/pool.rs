//! The pool of child processes: documents read in children that lower
//! their own limits; hostile ones fail by their reason, killed when they
//! run out of time or memory, without touching this process; the pool
//! keeps serving meanwhile; the cache answers a key again without a child.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use acdm_extract::{Extractor, ExtractorConfig, Format, Limits, Via};
use bytes::Bytes;

use crate::hostile::{deep_docx, entity_bomb, far_cell_xlsx, zip_bomb};
use crate::support::{fixture, pdftotext_installed};

/// The child binary of this crate.
const CHILD: &str = env!("CARGO_BIN_EXE_acdm-extract-child");

fn pool(limits: Limits) -> Extractor {
    let mut config = ExtractorConfig::new(CHILD, Vec::new());
    config.limits = limits;
    Extractor::new(config)
}

fn page(text: &str) -> Bytes {
    Bytes::from(format!(
        "<html><body><h1>Title</h1><p>{text}</p></body></html>"
    ))
}

/// An executable shell script of `lines` at `path`, written by a shell (a
/// file this process never opens for writing cannot be "busy" when it is
/// run, whatever other tests fork meanwhile).
fn script(path: &Path, lines: &[&str]) {
    let status = Command::new("/bin/sh")
        .arg("-c")
        .arg(r##"printf '%s\n' "#!/bin/sh" "$@" > "$0" && chmod 700 "$0""##)
        .arg(path)
        .args(lines)
        .status()
        .unwrap();
    assert!(status.success());
}

/// A stand-in for pdftotext that never finishes (a PDF that hangs its reader).
fn hanging_pdftotext(dir: &Path) -> PathBuf {
    let path = dir.join("hanging-pdftotext");
    script(&path, &["exec sleep 60"]);
    path
}

/// Some PDF bytes (pdftotext stand-ins do not read them).
fn pdf() -> Bytes {
    Bytes::from_static(b"%PDF-1.4\n% a stand-in\n")
}

#[tokio::test]
async fn documents_are_read_in_child_processes() {
    let extractor = pool(Limits::default());
    let extracted = extractor
        .extract(Format::Html, None, page("hello 你好"))
        .await
        .unwrap();
    assert_eq!(extracted.format, Format::Html);
    assert_eq!(extracted.via, Via::Native);
    assert_eq!(extracted.text, "# Title\n\nhello 你好\n");
    if let Some(minutes) = fixture("minutes.docx") {
        let extracted = extractor
            .extract(Format::Docx, None, Bytes::from(minutes.bytes()))
            .await
            .unwrap();
        assert!(
            extracted.text.starts_with("# Project Kickoff Minutes\n"),
            "{}",
            extracted.text
        );
    }
    if let (Some(report), true) = (fixture("report-zh.pdf"), pdftotext_installed()) {
        // pdftotext runs under the child's limits (address space, files, CPU).
        let extracted = extractor
            .extract(Format::Pdf, None, Bytes::from(report.bytes()))
            .await
            .unwrap();
        assert_eq!(extracted.via, Via::Pdftotext);
        assert!(extracted.text.contains("季度报告"), "{}", extracted.text);
    }
    let stats = extractor.stats();
    assert_eq!(stats.extractions, stats.requests);
    assert_eq!(stats.children_running, 0);
}

#[tokio::test]
async fn hostile_documents_fail_in_the_child_with_their_reason() {
    let extractor = pool(Limits {
        max_inflated_bytes: 16 * 1024 * 1024,
        ..Limits::default()
    });
    let cases = [
        (Format::Docx, zip_bomb(), "zip_bomb"),
        (Format::Docx, entity_bomb(), "entity_bomb"),
        (Format::Docx, deep_docx(), "too_deep"),
        (Format::Xlsx, far_cell_xlsx(), "too_many_cells"),
        (Format::Pptx, b"not a zip at all".to_vec(), "malformed"),
    ];
    for (format, bytes, expected) in cases {
        let error = extractor
            .extract(format, None, Bytes::from(bytes))
            .await
            .unwrap_err();
        assert_eq!(error.reason(), expected, "{error}");
    }
    let stats = extractor.stats();
    for reason in [
        "zip_bomb",
        "entity_bomb",
        "too_deep",
        "too_many_cells",
        "malformed",
    ] {
        assert_eq!(stats.failures.get(reason), Some(&1), "{stats:?}");
    }
}

#[tokio::test]
async fn a_memory_hungry_document_is_stopped_by_the_address_space_limit() {
    // Two million elements: html5ever's tree of them needs far more than 256 MiB.
    let html = "<p>x</p>".repeat(2_000_000);
    let extractor = pool(Limits {
        memory_bytes: 256 * 1024 * 1024,
        ..Limits::default()
    });
    let started = Instant::now();
    let error = extractor
        .extract(Format::Html, None, Bytes::from(html))
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "out_of_memory", "{error}");
    assert!(error.to_string().contains("256 MiB"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(20 + 10));
    // This process is untouched, and the pool serves the next document.
    let fine = extractor
        .extract(Format::Html, None, page("after"))
        .await
        .unwrap();
    assert!(fine.text.contains("after"));
}

#[tokio::test]
async fn a_child_past_its_wall_time_is_killed() {
    let mut config = ExtractorConfig::new("/bin/sh", vec!["-c".into(), "exec sleep 60".into()]);
    config.limits.wall_seconds = 1;
    let extractor = Extractor::new(config);
    let started = Instant::now();
    let error = extractor
        .extract(Format::Html, None, page("never read"))
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "timed_out", "{error}");
    assert!(started.elapsed() < Duration::from_secs(1 + 10));
    assert_eq!(extractor.stats().children_running, 0);
}

#[tokio::test]
async fn a_pdf_that_hangs_its_reader_times_out_in_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let extractor = pool(Limits {
        wall_seconds: 2,
        pdftotext: hanging_pdftotext(dir.path()),
        ..Limits::default()
    });
    let started = Instant::now();
    let error = extractor
        .extract(Format::Pdf, None, pdf())
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "timed_out", "{error}");
    assert!(started.elapsed() < Duration::from_secs(2 + 10));
}

#[tokio::test]
async fn a_reader_that_spins_is_stopped_by_its_cpu_limit() {
    let dir = tempfile::tempdir().unwrap();
    let spinning = dir.path().join("spinning-pdftotext");
    script(&spinning, &["while :; do :; done"]);
    let extractor = pool(Limits {
        cpu_seconds: 1,
        wall_seconds: 60,
        pdftotext: spinning,
        ..Limits::default()
    });
    let error = extractor
        .extract(Format::Pdf, None, pdf())
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "timed_out", "{error}");
    assert!(error.to_string().contains("CPU"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_keeps_serving_while_a_slow_document_holds_a_slot() {
    let dir = tempfile::tempdir().unwrap();
    let wall = 3;
    let extractor = pool(Limits {
        wall_seconds: wall,
        pdftotext: hanging_pdftotext(dir.path()),
        ..Limits::default()
    });
    let started = Instant::now();
    let slow = tokio::spawn({
        let extractor = extractor.clone();
        async move { extractor.extract(Format::Pdf, None, pdf()).await }
    });
    while extractor.stats().children_running == 0 {
        tokio::task::yield_now().await;
    }
    for n in 0..5 {
        let text = format!("document {n}");
        let extracted = extractor
            .extract(Format::Html, None, page(&text))
            .await
            .unwrap();
        assert!(extracted.text.contains(&text));
        assert!(extractor.stats().children_running <= 2);
    }
    assert!(
        !slow.is_finished(),
        "the slow document should still be running"
    );
    let error = slow.await.unwrap().unwrap_err();
    assert_eq!(error.reason(), "timed_out");
    assert!(started.elapsed() < Duration::from_secs(wall + 10));
    let stats = extractor.stats();
    assert_eq!((stats.extractions, stats.children_running), (6, 0));
    assert_eq!(stats.failures.get("timed_out"), Some(&1));
}

#[tokio::test]
async fn the_cache_answers_a_key_again_with_the_same_result_and_no_child() {
    let extractor = pool(Limits::default());
    let first = extractor
        .extract(Format::Html, Some("/wiki/a.html@etag1"), page("cached"))
        .await
        .unwrap();
    let again = extractor
        .extract(Format::Html, Some("/wiki/a.html@etag1"), page("not read"))
        .await
        .unwrap();
    assert!(Arc::ptr_eq(&first, &again));
    let changed = extractor
        .extract(Format::Html, Some("/wiki/a.html@etag2"), page("changed"))
        .await
        .unwrap();
    assert!(changed.text.contains("changed"));
    let stats = extractor.stats();
    assert_eq!(
        (stats.requests, stats.extractions, stats.cache_hits),
        (3, 2, 1)
    );
    assert_eq!(stats.cache_entries, 2);
    assert!(stats.cache_bytes > 0);
}

#[tokio::test]
async fn a_hostile_document_is_remembered_and_not_read_again() {
    let extractor = pool(Limits::default());
    for _ in 0..3 {
        let error = extractor
            .extract(
                Format::Docx,
                Some("/evil.docx@1"),
                Bytes::from(entity_bomb()),
            )
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "entity_bomb");
    }
    let stats = extractor.stats();
    assert_eq!((stats.extractions, stats.cache_hits), (1, 2));
    assert_eq!(stats.failures.get("entity_bomb"), Some(&1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_of_one_key_share_one_child() {
    let extractor = pool(Limits::default());
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let extractor = extractor.clone();
            tokio::spawn(async move {
                extractor
                    .extract(Format::Html, Some("/shared.html@1"), page("shared"))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut results = Vec::new();
    for call in calls {
        results.push(call.await.unwrap());
    }
    assert!(results.iter().all(|r| Arc::ptr_eq(r, &results[0])));
    let stats = extractor.stats();
    assert_eq!((stats.extractions, stats.cache_hits), (1, 3));
}

#[tokio::test]
async fn a_child_that_answers_nonsense_has_crashed() {
    let extractor = Extractor::new(ExtractorConfig::new(
        "/bin/sh",
        vec![
            OsString::from("-c"),
            OsString::from("cat > /dev/null; echo nonsense"),
        ],
    ));
    let error = extractor
        .extract(Format::Html, None, page("x"))
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "crashed", "{error}");
}

#[tokio::test]
async fn an_answer_past_its_cap_is_too_large() {
    let mut config = ExtractorConfig::new(
        "/bin/sh",
        vec![
            OsString::from("-c"),
            OsString::from("head -c 4000000 /dev/zero"),
        ],
    );
    config.limits.max_output_bytes = 1024 * 1024;
    let error = Extractor::new(config)
        .extract(Format::Html, None, page("x"))
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "too_large", "{error}");
}

#[tokio::test]
async fn a_missing_program_is_unavailable_and_not_cached() {
    let extractor = Extractor::new(ExtractorConfig::new(
        "/nonexistent/acdm-backend",
        Vec::new(),
    ));
    for _ in 0..2 {
        let error = extractor
            .extract(Format::Html, Some("/a.html@1"), page("x"))
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "unavailable");
        assert!(!error.to_string().contains("/nonexistent"), "{error}");
    }
    let stats = extractor.stats();
    assert_eq!((stats.extractions, stats.cache_hits), (2, 0));
    assert_eq!(stats.failures.get("unavailable"), Some(&2));
}

#[tokio::test]
async fn a_document_over_the_input_limit_never_reaches_a_child() {
    let extractor = pool(Limits {
        max_input_bytes: 10,
        ..Limits::default()
    });
    let error = extractor
        .extract(Format::Html, None, page("too long"))
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "too_large");
    assert_eq!(extractor.stats().extractions, 0);
}
