//! `cargo xtask bench mcp`: `tools/call` throughput and latency through the
//! whole service (service gate, host check, MCP transport, tool, local
//! sources) over loopback HTTP/1.1 keep-alive connections, at a fixed
//! concurrency, next to two floors: `/healthz` (no work at all) and
//! `/mcp/health` (the MCP router's cached health answer).
//!
//! The data is the demo's sample project plus generated pages and files
//! (`PAGES` wiki pages and as many project files, about 2 KiB each, and one
//! 1 MiB file read in a 128 KiB window), in the embedded local folders with
//! the SQLite database. Client and server share the machine's cores: the
//! server has its own runtime (`SERVER_THREADS` workers) and the clients
//! another, so the numbers are a floor on what one replica does.
//!
//! Knobs: `ACDM_BENCH_CONCURRENCY` (default 16), `ACDM_BENCH_SECONDS` per
//! scenario (default 5, after a 1 s warm-up). Every answer is checked (HTTP
//! 200 and, for tools, `isError: false`); the bench fails on any failure.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::disallowed_methods,
    reason = "a benchmark program over plain loopback HTTP that reports what it measured"
)]

use std::ffi::OsString;
use std::time::Duration;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use acdm_backend::app::Application;
use acdm_backend::config::Config;
use load::{WARM_UP, env_number, print_header, print_row};
use serde_json::{Value, json};

mod load;

const TOKEN: &str = "svc-bench-0123456789abcdef0123456789abcdef";
const PAGES: usize = 200;
const SERVER_THREADS: usize = 2;

/// Words the generated pages are made of (some shared, so searches hit).
const WORDS: &[&str] = &[
    "schedule",
    "budget",
    "milestone",
    "report",
    "meeting",
    "design",
    "review",
    "risk",
    "supplier",
    "contract",
    "delivery",
    "quality",
    "safety",
    "handover",
    "kickoff",
    "minutes",
];

fn page(n: usize) -> String {
    let mut text = format!("# Page {n}\n\n");
    let mut i = n;
    while text.len() < 2048 {
        i = i.wrapping_mul(2_654_435_761).wrapping_add(7) % 1_000_003;
        text.push_str(WORDS[i % WORDS.len()]);
        text.push(if i.is_multiple_of(11) { '\n' } else { ' ' });
    }
    text
}

fn write(path: &std::path::Path, content: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// One measured scenario.
struct Scenario {
    name: &'static str,
    request: Request,
}

#[derive(Clone)]
enum Request {
    Get(&'static str),
    Tool(Value),
}

async fn send(client: &reqwest::Client, base: &str, request: &Request) -> Result<(), String> {
    let response = match request {
        Request::Get(path) => client.get(format!("{base}{path}")).send().await,
        Request::Tool(body) => {
            client
                .post(format!("{base}/mcp"))
                .header("x-acdm-service-auth", TOKEN)
                .header("accept", "application/json, text/event-stream")
                .json(body)
                .send()
                .await
        }
    }
    .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("HTTP {status}: {}", String::from_utf8_lossy(&body)));
    }
    if matches!(request, Request::Tool(_)) {
        let value: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        if value["result"]["isError"] != false {
            return Err(format!("tool failed: {value}"));
        }
    }
    Ok(())
}

fn tool(name: &str, arguments: Value) -> Request {
    Request::Tool(json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }))
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let concurrency = usize::try_from(env_number("ACDM_BENCH_CONCURRENCY", 16)).unwrap();
    let seconds = env_number("ACDM_BENCH_SECONDS", 5);
    let duration = Duration::from_secs(seconds);

    let dir = tempfile::tempdir().unwrap();
    let env: Vec<(OsString, OsString)> = vec![
        ("ACDM_LISTEN_ADDR".into(), "127.0.0.1:0".into()),
        ("ACDM_DATA_DIR".into(), dir.path().as_os_str().to_owned()),
        ("ACDM_MCP_SERVICE_TOKEN".into(), TOKEN.into()),
        // One client calls each tool far more often than the tools'
        // limit allows: measured without it.
        ("ACDM_MCP_TOOL_RATE_PER_MINUTE".into(), "0".into()),
        ("ACDM_SHUTDOWN_PRESTOP_SECONDS".into(), "0".into()),
    ];
    let config = Config::load_from(None, env).expect("bench configuration");

    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(SERVER_THREADS)
        .thread_name("server")
        .enable_all()
        .build()
        .unwrap();
    let app = server.block_on(async {
        let folder = acdm_backend::demo::prepare(&config).await.unwrap();
        let files = dir
            .path()
            .join("files")
            .join(folder.to_string().trim_start_matches('/'));
        for n in 0..PAGES {
            write(
                &dir.path().join(format!("wiki/generated/page-{n:04}.md")),
                page(n).as_bytes(),
            );
            write(
                &files.join(format!("generated/note-{n:04}.md")),
                page(n + PAGES).as_bytes(),
            );
        }
        write(
            &files.join("generated/large.txt"),
            &b"0123456789abcde\n".repeat(65_536),
        );
        Application::build(&config).await.unwrap()
    });
    let base = format!("http://{}", app.local_addr().unwrap());
    let shutdown = app.shutdown_token();
    let served = server.spawn(app.run_until_stopped());

    let scenarios = [
        Scenario {
            name: "floor: GET /healthz",
            request: Request::Get("/healthz"),
        },
        Scenario {
            name: "floor: GET /mcp/health",
            request: Request::Get("/mcp/health"),
        },
        Scenario {
            name: "acdm_search_wiki",
            request: tool(
                "acdm_search_wiki",
                json!({"query": "milestone", "limit": 10}),
            ),
        },
        Scenario {
            name: "acdm_read_wiki_file",
            request: tool(
                "acdm_read_wiki_file",
                json!({"path": "guides/weekly-reports.md"}),
            ),
        },
        Scenario {
            name: "acdm_search_nextcloud",
            request: tool(
                "acdm_search_nextcloud",
                json!({"project_name": "Alpha", "query": "kickoff", "limit": 10}),
            ),
        },
        Scenario {
            name: "acdm_read_nextcloud_file",
            request: tool(
                "acdm_read_nextcloud_file",
                json!({"project_name": "Alpha", "path": "/Projects/Alpha/meetings/2026-11-03-kickoff.md"}),
            ),
        },
        Scenario {
            name: "acdm_read_nextcloud_file 128 KiB",
            request: tool(
                "acdm_read_nextcloud_file",
                json!({"project_name": "Alpha", "path": "/Projects/Alpha/generated/large.txt",
                       "offset": 524_288, "max_bytes": 131_072}),
            ),
        },
    ];

    let clients = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("client")
        .enable_all()
        .build()
        .unwrap();
    println!(
        "MCP bench: {concurrency} concurrent keep-alive clients, {seconds} s per scenario after a {} s warm-up; \
         {} wiki pages and {} project files of ~2 KiB; local sources, SQLite; server runtime {SERVER_THREADS} workers, {} cores",
        WARM_UP.as_secs(),
        PAGES + 7,
        PAGES + 7,
        std::thread::available_parallelism().map_or(0, usize::from),
    );
    print_header();
    let mut failed = false;
    clients.block_on(async {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(concurrency)
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        for scenario in &scenarios {
            let (client, base, request) = (client.clone(), base.clone(), scenario.request.clone());
            let outcome = load::run(concurrency, duration, move || {
                let (client, base, request) = (client.clone(), base.clone(), request.clone());
                async move { send(&client, &base, &request).await }
            })
            .await;
            failed |= print_row(scenario.name, &outcome, concurrency).1;
        }
    });
    shutdown.cancel();
    server.block_on(async {
        let _ = tokio::time::timeout(Duration::from_secs(10), served).await;
    });
    if failed {
        std::process::exit(1);
    }
}
