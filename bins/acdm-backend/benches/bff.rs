//! `cargo xtask bench bff`: Agent Tools BFF throughput and latency through
//! the whole service (gate, identity, scope, role, handler, database, local
//! file store) over loopback keep-alive connections at a fixed concurrency:
//! nc `read` of a small file and `list_mounts` beside the business reads
//! (`list_meetings`, `get_meeting` with two files, `list_calendar`) and the
//! project reads (`overview`, `sow`), with two ratios: `get_meeting` to the
//! nc read and `overview` to `list_mounts` (both database-only calls; the
//! target for each: at least half the throughput of the other).
//!
//! The project is realistic: 50 meetings over the next weeks (one with two
//! attachments), 20 reports in every status, 8 milestones, four members, a
//! statement of work, and 500 storage events in all (most of them agents'
//! meeting changes), seeded through the journal. On the embedded SQLite
//! database, then on PostgreSQL too when `ACDM_BENCH_DATABASE_URL=postgres://…`
//! is set (the bench adds its own project there, named per run).
//!
//! Rate limits: the table runs with limits off (one agent here makes far
//! more calls than any limit allows). Then `nc/list_mounts` — a call that
//! costs a database read and little else, so a limiter's cost shows — runs
//! again on servers of the same database with a limit far above what they
//! can serve (nothing is refused: every call pays the check): with the
//! shared bucket leased a second of demand at a time (the default), and
//! with a round trip to the bucket for every call
//! (`ACDM_RATE_LIMIT_LEASE_MILLIS=0`);
//! each as a share of the throughput with limits off.
//! Knobs: `ACDM_BENCH_CONCURRENCY` (16), `ACDM_BENCH_SECONDS` (5).

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

use acdm_backend::app::Application;
use acdm_backend::config::Config;
use acdm_core::business::{
    Deliverable, FileId, Meeting, MeetingFile, MeetingId, Milestone, MilestoneStatus, Report,
    ReportId, ReportKind, ReportStatus, RowImage, StatementOfWork,
};
use acdm_core::domain::MemberRole;
use acdm_core::events::{Actor, EventOp};
use acdm_core::{AbsPath, AgentName, Identity, ProjectName, ProjectSlug, ThreadId, UserId};
use acdm_journal::{Change, Record};
use bytes::Bytes;
use chrono::{TimeDelta, Utc};
use load::{WARM_UP, env_number, print_header, print_row};
use serde_json::{Value, json};

mod load;

const TOKEN: &str = "svc-bench-0123456789abcdef0123456789abcdef";
const SERVER_THREADS: usize = 2;
const MEETINGS: i64 = 50;
const REPORTS: usize = 20;
const MILESTONES: u32 = 8;
/// Storage events of the project in all.
const EVENTS: usize = 500;

/// Seeds one project and returns (agent name, a meeting with files).
async fn seed(app: &Application, run: &str) -> (String, MeetingId) {
    let state = app.state();
    let slug = ProjectSlug::parse(&format!("bench-{run}")).unwrap();
    let name = ProjectName::parse(&format!("Bench {run}")).unwrap();
    let details = state
        .store
        .create_project(&slug, &name, &AbsPath::parse("/Projects").unwrap())
        .await
        .unwrap();
    let project = details.project.to_ref();
    let user = UserId::parse("u-bench").unwrap();
    state
        .store
        .set_member(&slug, &user, MemberRole::Member)
        .await
        .unwrap();
    let agent = format!("bench-agent-{run}");
    state
        .store
        .mount_agent(&AgentName::parse(&agent).unwrap(), &slug)
        .await
        .unwrap();
    for (other, role) in [
        ("u-owner", MemberRole::Owner),
        ("u-admin", MemberRole::Admin),
        ("u-viewer", MemberRole::Viewer),
    ] {
        state
            .store
            .set_member(&slug, &UserId::parse(other).unwrap(), role)
            .await
            .unwrap();
    }
    // Agents made the meetings and their changes; people the rest.
    let actor = Actor::via_agent(&Identity::new(
        user.clone(),
        AgentName::parse(&agent).unwrap(),
        ThreadId::parse("t-seed").unwrap(),
    ));
    let operator = Actor::direct(UserId::parse("u-owner").unwrap());
    let record = |target: &str| Record {
        actor: &actor,
        project: &project,
        target: target.to_owned(),
        params: json!({}),
        approval: None,
    };
    let by_operator = |target: &str| Record {
        actor: &operator,
        project: &project,
        target: target.to_owned(),
        params: json!({}),
        approval: None,
    };
    let mut events = 0usize;
    let folder = AbsPath::parse("/Projects").unwrap().child(&name);
    state
        .journal
        .write(
            record("project:/notes/small.md"),
            &folder.join(&acdm_core::RelPath::parse("notes/small.md").unwrap()),
            Bytes::from(vec![b'x'; 2048]),
            None,
        )
        .await
        .unwrap();
    events += 1;
    let now = Utc::now();
    let mut first = None;
    let mut meetings = Vec::new();
    for n in 0..MEETINGS {
        let starts_at = now + TimeDelta::hours(6 * n + 1);
        let meeting = Meeting {
            meeting_id: MeetingId::new_random(),
            title: format!("Meeting {n}"),
            starts_at,
            ends_at: starts_at + TimeDelta::hours(1),
            location: Some("Room 1".into()),
            agenda: Some("1. status\n2. risks\n3. next steps".into()),
            notes: None,
            attendees: vec![user.clone()],
            version: 1,
            created_by: Some(user.clone()),
            created_at: now,
            updated_by: Some(user.clone()),
            updated_at: now,
        };
        state
            .journal
            .change(
                record("meeting"),
                Change {
                    op: EventOp::CreateMeeting,
                    remove: vec![],
                    create: None,
                    rows: vec![(None, Some(RowImage::Meeting(meeting.clone())))],
                },
            )
            .await
            .unwrap();
        events += 1;
        first.get_or_insert(meeting.meeting_id);
        meetings.push(meeting);
    }
    let with_files = first.unwrap();
    for file in ["minutes.md", "slides.md"] {
        let rel_path = format!("meetings/{with_files}/{file}");
        let row = MeetingFile {
            file_id: FileId::new_random(),
            meeting_id: with_files,
            mount: "project".into(),
            rel_path: rel_path.clone(),
            name: file.into(),
            size: 1024,
            etag: None,
            content_type: Some("text/markdown".into()),
            added_by: Some(user.clone()),
            added_at: now,
            missing: false,
        };
        state
            .journal
            .change(
                record("attach"),
                Change {
                    op: EventOp::AttachMeetingFile,
                    remove: vec![],
                    create: Some((
                        folder.join(&acdm_core::RelPath::parse(&rel_path).unwrap()),
                        Bytes::from(vec![b'm'; 1024]),
                    )),
                    rows: vec![(None, Some(RowImage::MeetingFile(row)))],
                },
            )
            .await
            .unwrap();
        events += 1;
    }
    for seq in 1..=MILESTONES {
        let milestone = Milestone {
            seq,
            title: format!("Milestone {seq}"),
            due_date: Some((now + TimeDelta::weeks(i64::from(seq))).date_naive()),
            status: match seq {
                1 => MilestoneStatus::Done,
                2 => MilestoneStatus::Current,
                _ => MilestoneStatus::Planned,
            },
            acceptance_criteria: vec!["accepted by the client".into()],
            closed_at: None,
            closed_by: None,
        };
        state
            .journal
            .change(
                by_operator("milestone"),
                Change {
                    op: EventOp::SetMilestone,
                    remove: vec![],
                    create: None,
                    rows: vec![(None, Some(RowImage::Milestone(milestone)))],
                },
            )
            .await
            .unwrap();
        events += 1;
    }
    let statuses = [
        ReportStatus::Draft,
        ReportStatus::Submitted,
        ReportStatus::Approved,
        ReportStatus::Rejected,
    ];
    for n in 0..REPORTS {
        let report = Report {
            report_id: ReportId::new_random(),
            title: format!("Weekly report {n}"),
            kind: ReportKind::Weekly,
            period_start: now.date_naive(),
            period_end: now.date_naive(),
            body: "# Progress\n\nOn track; two risks open.\n".repeat(20),
            status: statuses[n % statuses.len()],
            version: 1,
            created_by: Some(user.clone()),
            created_at: now + TimeDelta::seconds(i64::try_from(n).unwrap()),
            updated_at: now,
        };
        state
            .journal
            .change(
                by_operator("report"),
                Change {
                    op: EventOp::CreateReport,
                    remove: vec![],
                    create: None,
                    rows: vec![(None, Some(RowImage::Report(report)))],
                },
            )
            .await
            .unwrap();
        events += 1;
    }
    let sow = StatementOfWork {
        summary: "Deliver the platform in eight milestones.".into(),
        deliverables: (1..=MILESTONES)
            .map(|seq| Deliverable {
                title: format!("Deliverable {seq}"),
                description: "What the client accepts.".into(),
                milestone: Some(seq),
            })
            .collect(),
        updated_at: now,
    };
    let empty = state.store.sow(project.id).await.unwrap();
    state
        .journal
        .change(
            by_operator("sow"),
            Change {
                op: EventOp::SetSow,
                remove: vec![],
                create: None,
                rows: vec![(Some(RowImage::Sow(empty)), Some(RowImage::Sow(sow)))],
            },
        )
        .await
        .unwrap();
    events += 1;
    // The agents' meeting changes fill the journal up to EVENTS.
    let mut turn = 0usize;
    while events < EVENTS {
        let slot = turn % meetings.len();
        let before = meetings[slot].clone();
        let after = Meeting {
            location: Some(format!("Room {}", turn % 7)),
            version: before.version + 1,
            ..before.clone()
        };
        state
            .journal
            .change(
                record("meeting"),
                Change {
                    op: EventOp::UpdateMeeting,
                    remove: vec![],
                    create: None,
                    rows: vec![(
                        Some(RowImage::Meeting(before)),
                        Some(RowImage::Meeting(after.clone())),
                    )],
                },
            )
            .await
            .unwrap();
        meetings[slot] = after;
        events += 1;
        turn += 1;
    }
    (agent, with_files)
}

async fn send(
    client: &reqwest::Client,
    url: &str,
    agent: &str,
    body: Option<&Value>,
) -> Result<(), String> {
    let request = match body {
        Some(body) => client.post(url).json(body),
        None => client.get(url),
    };
    let response = request
        .header("x-acdm-service-auth", TOKEN)
        .header("x-acdm-user-id", "u-bench")
        .header("x-acdm-agent-name", agent)
        .header("x-acdm-thread-id", "t-bench")
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let bytes = response.bytes().await.map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&bytes)
        ));
    }
    Ok(())
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let concurrency = usize::try_from(env_number("ACDM_BENCH_CONCURRENCY", 16)).unwrap();
    let seconds = env_number("ACDM_BENCH_SECONDS", 5);
    let mut databases = vec![None];
    match std::env::var("ACDM_BENCH_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => databases.push(Some(url)),
        _ => println!(
            "(PostgreSQL left out: set ACDM_BENCH_DATABASE_URL=postgres://… to a database of its own)"
        ),
    }
    let mut failed = false;
    for database in databases {
        failed |= run_on(database, concurrency, Duration::from_secs(seconds));
    }
    if failed {
        std::process::exit(1);
    }
}

/// Rate limits off, or on far above what a server can serve (so nothing
/// is refused) with a lease of this many milliseconds.
const LIMITS_OFF: &[(&str, &str)] = &[
    ("ACDM_BFF_RATE_PER_MINUTE", "0"),
    ("ACDM_BFF_WRITE_RATE_PER_MINUTE", "0"),
];

fn limits_on(lease_millis: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("ACDM_BFF_RATE_PER_MINUTE", "1000000"),
        ("ACDM_BFF_RATE_BURST", "1000000"),
        ("ACDM_RATE_LIMIT_LEASE_MILLIS", lease_millis),
    ]
}

/// The configuration of a bench server on `database_url` (`None`: SQLite
/// in `dir`) with `settings`.
fn bench_config(
    dir: &std::path::Path,
    database_url: Option<&str>,
    settings: &[(&str, &str)],
) -> Config {
    let mut env: Vec<(OsString, OsString)> = vec![
        ("ACDM_LISTEN_ADDR".into(), "127.0.0.1:0".into()),
        ("ACDM_DATA_DIR".into(), dir.as_os_str().to_owned()),
        ("ACDM_MCP_SERVICE_TOKEN".into(), TOKEN.into()),
        ("ACDM_SHUTDOWN_PRESTOP_SECONDS".into(), "0".into()),
    ];
    if let Some(url) = database_url {
        env.push(("DATABASE_URL".into(), url.into()));
    }
    for (key, value) in settings {
        env.push(((*key).into(), (*value).into()));
    }
    Config::load_from(None, env).expect("bench configuration")
}

/// `nc/list_mounts` on a server of the same database with `settings`;
/// its throughput.
fn list_mounts_with(
    dir: &std::path::Path,
    database_url: Option<&str>,
    settings: &[(&str, &str)],
    name: &str,
    agent: &str,
    concurrency: usize,
    duration: Duration,
) -> (f64, bool) {
    let config = bench_config(dir, database_url, settings);
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(SERVER_THREADS)
        .thread_name("server")
        .enable_all()
        .build()
        .unwrap();
    let app = server.block_on(Application::build(&config)).unwrap();
    let url = format!(
        "http://{}/agent-tools/nc/list_mounts",
        app.local_addr().unwrap()
    );
    let shutdown = app.shutdown_token();
    let served = server.spawn(app.run_until_stopped());
    let clients = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("client")
        .enable_all()
        .build()
        .unwrap();
    let outcome = clients.block_on(async {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(concurrency)
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let agent = agent.to_owned();
        load::run(concurrency, duration, move || {
            let (client, url, agent) = (client.clone(), url.clone(), agent.clone());
            async move { send(&client, &url, &agent, Some(&json!({}))).await }
        })
        .await
    });
    let row = print_row(name, &outcome, concurrency);
    shutdown.cancel();
    server.block_on(async {
        let _ = tokio::time::timeout(Duration::from_secs(10), served).await;
    });
    row
}

/// The whole table on one database (`None`: the embedded SQLite);
/// returns whether a scenario failed.
fn run_on(database_url: Option<String>, concurrency: usize, duration: Duration) -> bool {
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let dir = tempfile::tempdir().unwrap();
    let database = if database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let config = bench_config(dir.path(), database_url.as_deref(), LIMITS_OFF);
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(SERVER_THREADS)
        .thread_name("server")
        .enable_all()
        .build()
        .unwrap();
    let (app, agent, meeting) = server.block_on(async {
        let app = Application::build(&config).await.unwrap();
        let (agent, meeting) = seed(&app, &run_id).await;
        (app, agent, meeting)
    });
    let base = format!("http://{}", app.local_addr().unwrap());
    let shutdown = app.shutdown_token();
    let served = server.spawn(app.run_until_stopped());

    let now = Utc::now();
    let scenarios: Vec<(&str, &str, Option<Value>)> = vec![
        ("nc/list_mounts", "nc/list_mounts", Some(json!({}))),
        (
            "nc/read 2 KiB",
            "nc/read",
            Some(json!({"rel_path": "notes/small.md"})),
        ),
        (
            "business/list_meetings (20)",
            "business/list_meetings",
            Some(json!({})),
        ),
        (
            "business/get_meeting (2 files)",
            "business/get_meeting",
            Some(json!({"meeting_id": meeting})),
        ),
        (
            "business/list_calendar (14 days)",
            "business/list_calendar",
            Some(json!({"from": now.to_rfc3339(), "to": (now + TimeDelta::days(14)).to_rfc3339()})),
        ),
        ("project/overview", "project/overview", None),
        ("project/sow", "project/sow", None),
    ];
    let clients = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("client")
        .enable_all()
        .build()
        .unwrap();
    println!(
        "\nBFF bench on {database}: {concurrency} concurrent keep-alive clients, {} s per scenario after a {} s warm-up; \
         {MEETINGS} meetings, {REPORTS} reports, {MILESTONES} milestones, {EVENTS} events; local files; \
         server runtime {SERVER_THREADS} workers, {} cores",
        duration.as_secs(),
        WARM_UP.as_secs(),
        std::thread::available_parallelism().map_or(0, usize::from),
    );
    print_header();
    let mut failed = false;
    let mut rates = Vec::new();
    clients.block_on(async {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(concurrency)
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        for (name, op, body) in &scenarios {
            let url = format!("{base}/agent-tools/{op}");
            let (client, agent, body) = (client.clone(), agent.clone(), body.clone());
            let outcome = load::run(concurrency, duration, move || {
                let (client, url, agent, body) =
                    (client.clone(), url.clone(), agent.clone(), body.clone());
                async move { send(&client, &url, &agent, body.as_ref()).await }
            })
            .await;
            let (rate, bad) = print_row(name, &outcome, concurrency);
            failed |= bad;
            rates.push((*name, rate));
        }
    });
    let rate = |name: &str| {
        rates
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(f64::NAN, |(_, r)| *r)
    };
    let ratio = rate("business/get_meeting (2 files)") / rate("nc/read 2 KiB");
    println!(
        "\n{database}: get_meeting / nc read throughput: {ratio:.2} (target ≥ 0.50, i.e. get_meeting within 2× of a small nc read)"
    );
    let ratio = rate("project/overview") / rate("nc/list_mounts");
    println!(
        "{database}: overview / list_mounts throughput: {ratio:.2} (target ≥ 0.50; both read the database only)"
    );
    shutdown.cancel();
    server.block_on(async {
        let _ = tokio::time::timeout(Duration::from_secs(10), served).await;
    });
    drop(server);

    println!(
        "\n{database}: rate limits, nc/list_mounts with a limit far above the throughput (every call checked, none refused)"
    );
    print_header();
    let off = rate("nc/list_mounts");
    for (name, lease) in [
        ("limits on, leases of 1 s of demand", "1000"),
        ("limits on, a round trip per call", "0"),
    ] {
        let (on, bad) = list_mounts_with(
            dir.path(),
            database_url.as_deref(),
            &limits_on(lease),
            name,
            &agent,
            concurrency,
            duration,
        );
        failed |= bad;
        println!(
            "{database}: {name} / limits off throughput: {:.2}",
            on / off
        );
    }
    failed
}
