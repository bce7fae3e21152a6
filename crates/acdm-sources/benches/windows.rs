//! `cargo xtask bench sources`: reads a 1 GiB file in 1 MiB windows, through
//! the local-folder store and through the WebDAV client against a real
//! WebDAV server (wsgidav on loopback), and reports time, throughput and
//! how much the process's peak memory grew. Windows are streamed and never
//! buffered beyond their own size, so the growth should stay near one
//! window whatever the file size.

#![expect(
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a benchmark program that reports what it measured"
)]

#[path = "../tests/contract/harness.rs"]
mod harness;

use std::time::Instant;

use acdm_sources::{FileReader, ReadRange};

const FILE_SIZE: u64 = 1 << 30;
const WINDOW: u64 = 1 << 20;

/// Peak resident set size of this process, in KiB (Linux `VmHWM`).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

async fn bench(name: &str, store: &dyn FileReader, disk_root: &std::path::Path) {
    let folder = disk_root.join("Projects/Alpha");
    std::fs::create_dir_all(&folder).unwrap();
    // A sparse 1 GiB file: real bytes over the wire, no disk space.
    let file = std::fs::File::create(folder.join("big.bin")).unwrap();
    file.set_len(FILE_SIZE).unwrap();
    drop(file);
    let path = harness::abs("/Projects/Alpha/big.bin");
    let before = peak_rss_kib();
    let started = Instant::now();
    let mut total = 0u64;
    let mut offset = 0u64;
    while offset < FILE_SIZE {
        let window = store
            .read(&path, ReadRange::new(offset, WINDOW))
            .await
            .unwrap()
            .collect(WINDOW)
            .await
            .unwrap();
        assert_eq!(window.size, Some(FILE_SIZE));
        total += window.bytes.len() as u64;
        offset += WINDOW;
    }
    let took = started.elapsed();
    let after = peak_rss_kib();
    assert_eq!(total, FILE_SIZE);
    println!(
        "{name:>7}: 1 GiB in {} windows of 1 MiB: {:.2} s, {:.0} MiB/s, peak RSS {} MiB -> {} MiB (+{} KiB)",
        FILE_SIZE / WINDOW,
        took.as_secs_f64(),
        (FILE_SIZE as f64 / (1 << 20) as f64) / took.as_secs_f64(),
        before / 1024,
        after / 1024,
        after.saturating_sub(before)
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    println!("acdm-sources window benchmark (release build, loopback)");
    for backend in harness::backends().await {
        bench(backend.name, backend.store.as_ref(), &backend.disk_root).await;
    }
}
