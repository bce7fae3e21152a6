//! The `nc` tools cannot leave the agent's project (spec §3.3, §3.4):
//! agent `project-alpha` cannot list, read, write, move into or out of, or
//! delete anything of project `beta` or of a sibling folder `Alpha-evil`,
//! and no payload of the public traversal corpus, in any path input of any
//! op, sends a request outside `/Projects/Alpha/` and alpha's trash — or a
//! dot segment, an encoded dot or slash, or a backslash — to a real WebDAV
//! server behind a recording proxy (see `dav.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use acdm_test_support::traversal;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::dav::{
    ALPHA, BETA, NcEnv, Scope, assert_confined, assert_nothing_destroyed, assert_untouched, code,
    outside_alpha,
};

/// Paths that name Beta's data from inside Alpha's mount, in every
/// spelling a model (or an attacker steering it) might try.
const INTO_BETA: &[&str] = &[
    "../Beta/secret.md",
    "../Beta",
    "..",
    "../",
    "../../Projects/Beta/secret.md",
    "./../Beta/secret.md",
    "docs/../../Beta/secret.md",
    "/Projects/Beta/secret.md",
    "/Projects/Beta",
    "/remote.php/dav/files/u/Projects/Beta/secret.md",
    "%2e%2e/Beta/secret.md",
    "%2E%2E%2FBeta%2Fsecret.md",
    "..%2fBeta%2fsecret.md",
    "%252e%252e/Beta/secret.md",
    "..\\Beta\\secret.md",
    "docs\\..\\..\\Beta\\secret.md",
    "\u{ff0e}\u{ff0e}/Beta/secret.md",
    "\u{2025}/Beta/secret.md",
    "..\u{ff0f}Beta\u{ff0f}secret.md",
    ".. /Beta/secret.md",
    " ../Beta/secret.md",
    "..\u{a0}/Beta/secret.md",
    "....//Beta/secret.md",
    "Alpha/../Beta/secret.md",
    "../.acdm-trash/beta",
    ".acdm-trash/../../Beta",
    "//127.0.0.1/remote.php/dav/files/u/Projects/Beta/secret.md",
    "http://127.0.0.1/remote.php/dav/files/u/Projects/Beta/secret.md",
    "~/../Beta/secret.md",
    "../Beta/secret.md\u{0}.txt",
    "../Beta/secret.md%00",
    "..\u{202e}/Beta",
];

/// Codes a refused cross-project call may answer with.
const REFUSALS: &[&str] = &[
    "invalid_path",
    "not_found",
    "scope_violation",
    "permission_denied",
];

/// Every way alpha might address `path` with every op.
fn attempts(path: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("list", json!({"rel_path": path})),
        ("read", json!({"rel_path": path})),
        ("write", json!({"rel_path": path, "content": "pwned"})),
        (
            "write",
            json!({"rel_path": path, "content": "pwned", "if_match": "\"x\""}),
        ),
        ("delete", json!({"rel_path": path})),
        ("delete", json!({"rel_path": path, "dry_run": false})),
        (
            "move",
            json!({"from_rel_path": path, "to_rel_path": "stolen.md"}),
        ),
        (
            "move",
            json!({"from_rel_path": "readme.md", "to_rel_path": path}),
        ),
        (
            "move",
            json!({"from_rel_path": "readme.md", "to_rel_path": path, "overwrite": true}),
        ),
        (
            "move",
            json!({"from_rel_path": path, "to_rel_path": path, "overwrite": true}),
        ),
    ]
}

#[tokio::test]
async fn project_alpha_cannot_reach_project_beta() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    // Beta has data of its own, and an event.
    let (status, beta) = env
        .nc(
            BETA,
            "write",
            json!({"rel_path": "plans/q3.md", "content": "beta q3\n"}),
        )
        .await;
    assert_eq!(status, 200, "{beta}");
    let beta_events = env.events("project=beta").await;
    assert_eq!(beta_events.len(), 1);
    let disk = env.disk_snapshot();
    let mark = env.recorder().mark();

    let mut refused = 0;
    for path in INTO_BETA {
        for (op, body) in attempts(path) {
            let (status, answer) = env.nc(ALPHA, op, body.clone()).await;
            assert!(
                REFUSALS.contains(&code(&answer)),
                "{op} {body} was not refused: {status} {answer}"
            );
            refused += 1;
        }
    }

    // Coordinates that try to pick the project or the mount.
    for (op, body) in [
        (
            "read",
            json!({"rel_path": "secret.md", "project_id": "beta"}),
        ),
        ("read", json!({"rel_path": "secret.md", "project": "beta"})),
        ("list", json!({"rel_path": "", "mount": "beta"})),
        ("list", json!({"rel_path": "", "mount": "../Beta"})),
        ("list", json!({"rel_path": "", "mount": "Beta"})),
        (
            "read",
            json!({"rel_path": "secret.md", "mount": "/Projects/Beta"}),
        ),
        (
            "write",
            json!({"rel_path": "x.md", "content": "x", "mount": "project/../../Beta"}),
        ),
    ] {
        let (status, answer) = env.nc(ALPHA, op, body.clone()).await;
        assert!(
            matches!(
                code(&answer),
                "validation_error" | "not_found" | "invalid_path"
            ),
            "{op} {body}: {status} {answer}"
        );
    }

    // Names that look like Beta's but resolve inside Alpha are not found.
    for path in [
        "secret.md",
        "Beta/secret.md",
        "plans/q3.md",
        "Projects/Beta/secret.md",
    ] {
        let (status, answer) = env.nc(ALPHA, "read", json!({"rel_path": path})).await;
        assert_eq!(
            (status, code(&answer)),
            (404, "not_found"),
            "{path}: {answer}"
        );
    }
    let (_, found) = env.nc(ALPHA, "search", json!({"query": "secret"})).await;
    assert_eq!(found["data"]["hits"], json!([]), "{found}");
    let (_, found) = env.nc(ALPHA, "search", json!({"query": "q3"})).await;
    assert_eq!(found["data"]["hits"], json!([]), "{found}");

    // Beta's agent is scoped the same way, the other way round.
    for path in ["../Alpha/readme.md", "/Projects/Alpha/readme.md"] {
        let (_, answer) = env.nc(BETA, "read", json!({"rel_path": path})).await;
        assert!(REFUSALS.contains(&code(&answer)), "{path}: {answer}");
    }

    let seen = env.recorder().since(mark);
    assert_untouched(&seen, "Beta", "alpha's attempts");
    assert_confined(&seen, &Scope::alpha(), "alpha's attempts");
    assert_eq!(env.disk_snapshot(), disk, "nothing changed anywhere");
    assert_eq!(
        env.events("project=beta").await,
        beta_events,
        "Beta's events unchanged"
    );
    let alpha_events = env.events("project=alpha").await;
    assert!(
        alpha_events.iter().all(|e| e["status"] == "failed"),
        "no applied change: {alpha_events:?}"
    );
    eprintln!(
        "{refused} cross-project attempts refused; {} upstream requests, all inside Alpha",
        seen.len()
    );
    env.stop().await;
}

#[tokio::test]
async fn a_sibling_folder_with_the_same_prefix_is_never_touched() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let evil_before = sibling(&env.disk_snapshot());

    for path in [
        "../Alpha-evil/plan.md",
        "../Alpha-evil",
        "/Projects/Alpha-evil/plan.md",
        "..\\Alpha-evil\\plan.md",
        "%2e%2e/Alpha-evil/plan.md",
        "..%2fAlpha-evil%2fplan.md",
        "\u{ff0e}\u{ff0e}/Alpha-evil/plan.md",
    ] {
        for (op, body) in attempts(path) {
            let (status, answer) = env.nc(ALPHA, op, body.clone()).await;
            assert!(
                REFUSALS.contains(&code(&answer)),
                "{op} {body} was not refused: {status} {answer}"
            );
        }
    }
    // `-evil/…` and `Alpha-evil/…` are names inside Alpha: nothing there.
    for path in ["-evil/plan.md", "Alpha-evil/plan.md", "evil/plan.md"] {
        let (status, answer) = env.nc(ALPHA, "read", json!({"rel_path": path})).await;
        assert_eq!(
            (status, code(&answer)),
            (404, "not_found"),
            "{path}: {answer}"
        );
    }
    // Ordinary work in Alpha, including writes that create folders, moves
    // and deletes into the trash.
    for (op, body) in [
        ("list", json!({"rel_path": ""})),
        (
            "write",
            json!({"rel_path": "Alpha-evil/plan.md", "content": "inside Alpha"}),
        ),
        (
            "write",
            json!({"rel_path": "evil.md", "content": "inside Alpha"}),
        ),
        (
            "move",
            json!({"from_rel_path": "evil.md", "to_rel_path": "Alpha-evil/evil.md"}),
        ),
        (
            "delete",
            json!({"rel_path": "Alpha-evil", "dry_run": false}),
        ),
    ] {
        let (status, answer) = env.nc(ALPHA, op, body.clone()).await;
        assert_eq!(status, 200, "{op} {body}: {answer}");
    }
    let (_, found) = env.nc(ALPHA, "search", json!({"query": "sibling"})).await;
    assert_eq!(found["data"]["hits"], json!([]), "{found}");
    let (_, found) = env.nc(ALPHA, "search", json!({"query": "x.md"})).await;
    assert_eq!(
        found["data"]["hits"],
        json!([]),
        "Alpha-evil/x.md is not Alpha's: {found}"
    );

    let seen = env.recorder().all();
    assert_untouched(&seen, "Alpha-evil", "sibling");
    assert_untouched(&seen, "Beta", "sibling");
    assert_confined(&seen, &Scope::alpha(), "sibling");
    assert_eq!(
        sibling(&env.disk_snapshot()),
        evil_before,
        "Alpha-evil unchanged"
    );
    env.stop().await;
}

fn sibling(snapshot: &BTreeMap<String, Option<Vec<u8>>>) -> BTreeMap<String, Option<Vec<u8>>> {
    snapshot
        .iter()
        .filter(|(k, _)| k.starts_with("Projects/Alpha-evil"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

// ---------------------------------------------------------------------------
// The corpus

/// The public corpus with [`INTO_BETA`]; `None` (the test is skipped)
/// without the corpus, unless `ACDM_REQUIRE_CORPUS` is set.
///
/// (`traversal::HAND_WRITTEN` is not added here yet: with wsgidav, moving
/// a file to a name such as `a;b` or `a?b=c` and back fails — the move-back
/// finds nothing — which needs looking into before these names join.)
fn corpus() -> Option<Vec<String>> {
    let mut all = traversal::corpus()?;
    all.extend(INTO_BETA.iter().map(|s| (*s).to_owned()));
    Some(all.into_iter().collect())
}

/// One call's outcome.
#[derive(Debug)]
struct Outcome {
    input: &'static str,
    payload: String,
    status: u16,
    code: String,
    message: String,
}

/// Runs `make(payload, worker)` for every payload, at most `workers` at a
/// time; `worker` is a number in `0..workers` no other running call holds
/// (so each can own a file of its own).
async fn run_all<F, Fut>(payloads: &[String], workers: usize, make: F) -> Vec<Outcome>
where
    F: Fn(String, usize) -> Fut,
    Fut: std::future::Future<Output = Vec<Outcome>> + Send + 'static,
{
    let permits = Arc::new(Semaphore::new(workers));
    let free: Arc<Mutex<Vec<usize>>> = Arc::new(Mutex::new((0..workers).collect()));
    let mut set = tokio::task::JoinSet::new();
    for payload in payloads {
        let permit = permits.clone().acquire_owned().await.unwrap();
        let worker = free
            .lock()
            .unwrap()
            .pop()
            .expect("a free worker per permit");
        let call = make(payload.clone(), worker);
        let free = free.clone();
        set.spawn(async move {
            let out = call.await;
            free.lock().unwrap().push(worker);
            drop(permit);
            out
        });
    }
    let mut all = Vec::new();
    while let Some(done) = set.join_next().await {
        all.extend(done.unwrap());
    }
    all
}

async fn call(env: &NcEnv, input: &'static str, payload: &str, op: &str, body: Value) -> Outcome {
    let (status, answer) = env.nc(ALPHA, op, body).await;
    Outcome {
        input,
        payload: payload.to_owned(),
        status,
        code: code(&answer).to_owned(),
        message: answer["message"].as_str().unwrap_or_default().to_owned(),
    }
}

const WORKERS: usize = 32;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_corpus_payload_reaches_outside_the_project_folder() {
    let Some(payloads) = corpus() else {
        return;
    };
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let env = Arc::new(env);
    std::fs::create_dir_all(env.disk("Projects/Alpha/mv")).unwrap();
    for worker in 0..WORKERS {
        std::fs::write(
            env.disk(&format!("Projects/Alpha/mv/src-{worker}.txt")),
            b"m",
        )
        .unwrap();
    }
    let disk_before = env.disk_snapshot();
    let started = Instant::now();
    let mut outcomes: Vec<Outcome> = Vec::new();

    // Reads, dry runs and moves out of a payload path.
    let phase = Instant::now();
    outcomes.extend(
        run_all(&payloads, WORKERS, |p, _| {
            let env = env.clone();
            async move {
                vec![
                    call(&env, "list.rel_path", &p, "list", json!({"rel_path": p})).await,
                    call(
                        &env,
                        "read.rel_path",
                        &p,
                        "read",
                        json!({"rel_path": p, "max_bytes": 64}),
                    )
                    .await,
                    call(
                        &env,
                        "delete.rel_path",
                        &p,
                        "delete",
                        json!({"rel_path": p}),
                    )
                    .await,
                    call(
                        &env,
                        "move.from_rel_path",
                        &p,
                        "move",
                        json!({"from_rel_path": p, "to_rel_path": "corpus-never-here.txt"}),
                    )
                    .await,
                ]
            }
        })
        .await,
    );
    eprintln!("reads: {:?}", phase.elapsed());
    assert_confined(&env.recorder().all(), &Scope::alpha(), "corpus reads");

    // Moves into a payload path (and back out of it), each worker with a
    // source file of its own.
    let phase = Instant::now();
    outcomes.extend(
        run_all(&payloads, WORKERS, |p, worker| {
            let env = env.clone();
            async move {
                let src = format!("mv/src-{worker}.txt");
                let to = call(
                    &env,
                    "move.to_rel_path",
                    &p,
                    "move",
                    json!({"from_rel_path": src, "to_rel_path": p}),
                )
                .await;
                let mut out = Vec::new();
                if to.code == "ok" {
                    let back = call(
                        &env,
                        "move.from_rel_path (existing)",
                        &p,
                        "move",
                        json!({"from_rel_path": p, "to_rel_path": src}),
                    )
                    .await;
                    assert_eq!(back.code, "ok", "moving {p:?} back to {src}: {back:?}");
                    out.push(back);
                }
                out.push(to);
                out
            }
        })
        .await,
    );
    eprintln!("moves: {:?}", phase.elapsed());
    assert_confined(&env.recorder().all(), &Scope::alpha(), "corpus moves");

    // Writes (small), then real deletes of what was written: the trash
    // receives every accepted name too.
    let phase = Instant::now();
    let written = run_all(&payloads, WORKERS, |p, _| {
        let env = env.clone();
        async move {
            vec![
                call(
                    &env,
                    "write.rel_path",
                    &p,
                    "write",
                    json!({"rel_path": p, "content": "c"}),
                )
                .await,
            ]
        }
    })
    .await;
    let accepted: Vec<String> = written
        .iter()
        .filter(|o| o.code == "ok")
        .map(|o| o.payload.clone())
        .collect();
    // Payloads whose write was refused as a path (not as a conflict with
    // what is there): a real delete of them must send nothing that writes.
    // One in four is enough to show the refusal does not depend on the
    // dry run (the dry-run deletes above took every payload).
    let rejected: Vec<String> = written
        .iter()
        .filter(|o| {
            matches!(
                o.code.as_str(),
                "invalid_path" | "validation_error" | "permission_denied"
            )
        })
        .map(|o| o.payload.clone())
        .collect::<BTreeSet<String>>()
        .into_iter()
        .step_by(4)
        .collect();
    outcomes.extend(written);
    eprintln!(
        "writes: {:?} ({} accepted)",
        phase.elapsed(),
        accepted.len()
    );
    let phase = Instant::now();
    outcomes.extend(
        run_all(&accepted, WORKERS, |p, _| {
            let env = env.clone();
            async move {
                vec![
                    call(
                        &env,
                        "delete.rel_path (dry run, existing)",
                        &p,
                        "delete",
                        json!({"rel_path": p}),
                    )
                    .await,
                    call(
                        &env,
                        "delete.rel_path (real)",
                        &p,
                        "delete",
                        json!({"rel_path": p, "dry_run": false}),
                    )
                    .await,
                ]
            }
        })
        .await,
    );
    // Rejected payloads with a real delete too: nothing may be sent.
    let mark = env.recorder().mark();
    let refused_deletes = run_all(&rejected, WORKERS, |p, _| {
        let env = env.clone();
        async move {
            vec![
                call(
                    &env,
                    "delete.rel_path (real, refused write)",
                    &p,
                    "delete",
                    json!({"rel_path": p, "dry_run": false}),
                )
                .await,
            ]
        }
    })
    .await;
    let sent = env.recorder().since(mark);
    assert!(
        sent.iter().all(|r| !r.is_write()),
        "a delete of a path that could not be written wrote: {:?}",
        sent.iter()
            .filter(|r| r.is_write())
            .take(10)
            .collect::<Vec<_>>()
    );
    outcomes.extend(refused_deletes);
    eprintln!("deletes: {:?}", phase.elapsed());

    // The verdict.
    let seen = env.recorder().all();
    assert_confined(&seen, &Scope::alpha(), "corpus");
    assert_nothing_destroyed(&seen, "corpus");
    assert_untouched(&seen, "Beta", "corpus");
    assert_untouched(&seen, "Alpha-evil", "corpus");
    let disk_after = env.disk_snapshot();
    assert_eq!(
        outside_alpha(&disk_after),
        outside_alpha(&disk_before),
        "the disk outside Alpha and its trash is unchanged"
    );
    for worker in 0..WORKERS {
        assert!(
            env.disk(&format!("Projects/Alpha/mv/src-{worker}.txt"))
                .is_file(),
            "every moved file came back"
        );
    }

    for r in seen.iter().filter(|r| r.millis > 2000).take(20) {
        eprintln!("slow upstream request: {r}");
    }
    for o in outcomes.iter().filter(|o| o.code == "conflict").take(8) {
        eprintln!("conflict: {} {:?}: {}", o.input, o.payload, o.message);
    }
    let allowed: BTreeSet<&str> = [
        "ok",
        "invalid_path",
        "not_found",
        "conflict",
        "permission_denied",
        "validation_error",
        "payload_too_large",
    ]
    .into();
    // wsgidav answers some races between overlapping payloads (one worker
    // moves a file to `x` while another moves one to `x/y/z`) with a 500 or
    // a stall; the service reports those as upstream failures. A few are
    // tolerated — the recording above already proved where every request
    // went — but they are listed.
    let upstream_failures: Vec<String> = outcomes
        .iter()
        .filter(|o| matches!(o.code.as_str(), "upstream_error" | "upstream_timeout"))
        .map(|o| {
            format!(
                "{} {:?}: {} {} ({})",
                o.input, o.payload, o.status, o.code, o.message
            )
        })
        .collect();
    for failure in &upstream_failures {
        eprintln!("upstream failure (tolerated): {failure}");
    }
    for r in seen.iter().filter(|r| r.status >= 500) {
        eprintln!("upstream answered: {r}");
    }
    assert!(
        upstream_failures.len() <= 5,
        "{} upstream failures",
        upstream_failures.len()
    );
    let mut by_code: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let mut unexpected = Vec::new();
    for o in &outcomes {
        *by_code.entry((o.input, o.code.as_str())).or_default() += 1;
        let upstream = matches!(o.code.as_str(), "upstream_error" | "upstream_timeout");
        if !allowed.contains(o.code.as_str()) && !upstream {
            unexpected.push(format!(
                "{} {:?}: {} {} ({})",
                o.input, o.payload, o.status, o.code, o.message
            ));
        }
    }
    eprintln!(
        "{} payloads, {} calls, {} upstream requests in {:?}",
        payloads.len(),
        outcomes.len(),
        seen.len(),
        started.elapsed()
    );
    for ((input, code), n) in &by_code {
        eprintln!("  {input:<40} {code:<20} {n}");
    }
    assert!(
        unexpected.is_empty(),
        "{} calls answered outside the expected codes:\n{}",
        unexpected.len(),
        unexpected
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The corpus is mostly hostile: most payloads must be refused outright.
    let list_ok = by_code.get(&("list.rel_path", "ok")).copied().unwrap_or(0);
    assert!(
        list_ok * 4 < payloads.len(),
        "{list_ok} of {} corpus payloads listed a folder",
        payloads.len()
    );
    match Arc::try_unwrap(env) {
        Ok(env) => env.stop().await,
        Err(_) => panic!("a call outlived the run"),
    }
}
