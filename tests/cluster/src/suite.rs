//! The cluster suite: what must hold when several replicas serve behind a
//! real load balancer (issue: "several replicas behind a real load
//! balancer").
//!
//! Each entry of [`CHECKS`] runs against the one cluster, in order; before
//! each, any replica a previous check stopped is started again and the
//! balancer is waited for until it sends that replica requests again. A
//! check fails with the reason; the others still run. Figures (requests
//! per replica, propagation delays, failures under a crash or a drain) are
//! printed as they are measured and again at the end.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant, SystemTime};

use acdm_core::business::wire::BusinessOp;
use acdm_core::nc::{ListRequest, ReadRequest, WriteRequest};
use acdm_core::{AgentName, Identity, ThreadId, UserId};
use anyhow::{Context, Result, anyhow, bail, ensure};
use reqwest::Method;
use rustix::process::Signal;
use serde_json::{Value, json};
use tokio::process::Command;
use tokio::task::JoinSet;

use crate::harness::{AGENT, Cluster, MEMBER, OWNER, SLUG};
use crate::load::{self, Load, Op, Record, Target};
use crate::nginx::LogLine;

/// The bound on propagation: an unmount or a kill-switch flip
/// made through one replica is obeyed by every replica within 2 s.
const PROPAGATION_BOUND: Duration = Duration::from_secs(2);
/// How many unmounts and kill-switch flips are measured.
const PROPAGATION_TRIALS: usize = 5;
/// Concurrent clients of the crash and drain checks.
const CONCURRENCY: usize = 16;
/// Requests completed before a replica is killed or stopped, and after.
const REQUESTS_AROUND: usize = 400;
/// Who operates (recorded as the direct actor of reverts and switches).
const OPERATOR: &str = "u-ops";

/// One check's future, borrowing the cluster and the report.
type CheckFuture<'a> = Pin<Box<dyn Future<Output = Result<()>> + 'a>>;

/// One check of the suite.
struct Check {
    /// What it asserts, as a sentence.
    name: &'static str,
    run: for<'a> fn(&'a mut Cluster, &'a mut Report) -> CheckFuture<'a>,
}

/// Settings every replica of the suite's cluster gets (before any
/// `--set` of the command line, which wins). The defaults, as a
/// deployment runs them, except the rate limits: the load of the crash
/// and drain checks is one agent and its tools far beyond any real
/// agent's rate. The rate-limit check restarts the replicas with limits
/// ([`RATE_LIMITED`]).
pub(crate) const SETTINGS: &[(&str, &str)] = &[
    ("ACDM_BFF_RATE_PER_MINUTE", "0"),
    ("ACDM_BFF_WRITE_RATE_PER_MINUTE", "0"),
    ("ACDM_MCP_TOOL_RATE_PER_MINUTE", "0"),
];

/// The limit the rate-limit check sets: 20 calls a second per agent,
/// bursts of 20.
const RATE_LIMIT_PER_SECOND: f64 = 20.0;
const RATE_LIMITED: &[(&str, &str)] = &[
    ("ACDM_BFF_RATE_PER_MINUTE", "1200"),
    ("ACDM_BFF_RATE_BURST", "20"),
];

/// The suite, in order. Checks that stop replicas come last.
///
/// Where the rate-limit accuracy check goes: after
/// `one_agents_calls_are_spread_over_every_replica` (which already drives
/// one agent through the balancer and counts per replica), using
/// [`load::drive_at_rate`] — the agent driven above its configured rate
/// for T seconds — and [`load::per_replica`] — 200s and 429s per replica
/// from the balancer's log — with the limit in [`SETTINGS`]; the admitted
/// total over T must be the configured rate ±10 %. A check of the new
/// drain behaviour belongs beside `a_sigterm_under_load_fails_no_request`,
/// whose load and accounting it can share ([`under_load`]).
const CHECKS: &[Check] = &[
    Check {
        name: "MCP through the balancer with the official Python SDK: initialize, tools/list and every tools/call land on different replicas and succeed",
        run: |c, r| Box::pin(mcp_sdk_through_the_balancer(c, r)),
    },
    Check {
        name: "BFF writes through one replica are read, listed and reverted through the others",
        run: |c, r| Box::pin(writes_through_one_replica_are_seen_through_the_others(c, r)),
    },
    Check {
        name: "an approval asked through replica 1 is approved through replica 2 and used once through replica 3",
        run: |c, r| Box::pin(an_approval_crosses_the_replicas(c, r)),
    },
    Check {
        name: "one agent's calls through the balancer are spread over every replica (±10 % of an even share)",
        run: |c, r| Box::pin(one_agents_calls_are_spread_over_every_replica(c, r)),
    },
    Check {
        name: "one agent driven at twice its rate through the balancer gets its configured rate (±10 %) from three replicas together, each answering its share",
        run: |c, r| Box::pin(an_agents_rate_limit_holds_for_the_deployment(c, r)),
    },
    Check {
        name: "an unmount through one replica is obeyed by every replica within 2 s",
        run: |c, r| Box::pin(an_unmount_reaches_every_replica_in_time(c, r)),
    },
    Check {
        name: "a kill-switch flip through one replica is obeyed by every replica within 2 s",
        run: |c, r| Box::pin(a_kill_switch_flip_reaches_every_replica_in_time(c, r)),
    },
    Check {
        name: "kill -9 of a replica under load: only its in-flight requests fail, every acknowledged write is applied with its event, nothing stays pending after the reconciler, the others keep serving",
        run: |c, r| Box::pin(a_crash_under_load_loses_only_what_was_in_flight(c, r)),
    },
    Check {
        name: "SIGTERM of a replica under load: no request fails",
        run: |c, r| Box::pin(a_sigterm_under_load_fails_no_request(c, r)),
    },
];

/// Outcomes and figures.
#[derive(Default)]
pub(crate) struct Report {
    outcomes: Vec<(&'static str, Result<()>)>,
    figures: Vec<(String, String)>,
}

impl Report {
    /// Records a figure and prints it now.
    fn figure(&mut self, name: &str, value: String) {
        println!("  {name}: {value}");
        self.figures.push((name.to_owned(), value));
    }

    /// How many checks failed.
    pub(crate) fn failed(&self) -> usize {
        self.outcomes.iter().filter(|(_, o)| o.is_err()).count()
    }

    /// Prints every outcome, the figures, and the count.
    pub(crate) fn print(&self) {
        println!("\n==> cluster suite: figures");
        for (name, value) in &self.figures {
            println!("{name}: {value}");
        }
        println!("\n==> cluster suite: checks");
        for (name, outcome) in &self.outcomes {
            match outcome {
                Ok(()) => println!("PASS {name}"),
                Err(error) => println!("FAIL {name}\n     {error:#}"),
            }
        }
        println!(
            "{} passed, {} failed",
            self.outcomes.len() - self.failed(),
            self.failed()
        );
    }
}

/// Runs every check against `cluster`.
pub(crate) async fn run(cluster: &mut Cluster) -> Report {
    let mut report = Report::default();
    let mark = cluster.nginx.log.mark();
    for check in CHECKS {
        println!("\n--- {}", check.name);
        let outcome = match cluster.ensure_running().await {
            Ok(_) => (check.run)(cluster, &mut report).await,
            Err(error) => Err(error.context("the cluster could not be restored")),
        };
        if let Err(error) = &outcome {
            println!("  FAIL: {error:#}");
        }
        report.outcomes.push((check.name, outcome));
    }
    let lines = cluster.nginx.log.since(mark);
    let mut counts = vec![0_usize; cluster.replicas.len()];
    for index in lines
        .iter()
        .filter_map(|l| l.answered_by().and_then(|a| cluster.replica_at(a)))
    {
        if let Some(count) = counts.get_mut(index) {
            *count += 1;
        }
    }
    report.figure(
        "requests per replica (the balancer's log, whole suite)",
        replicas_list(&counts),
    );
    report
}

/// `replica 0: 12, replica 1: 13`.
fn replicas_list<T: std::fmt::Display>(values: &[T]) -> String {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| format!("replica {i}: {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `12 ms after` or `3 ms before`: when `at` was, seen from `reference`.
fn signed_ms(at: SystemTime, reference: SystemTime) -> String {
    match at.duration_since(reference) {
        Ok(after) => format!("{} ms after", after.as_millis()),
        Err(before) => format!("{} ms before", before.duration().as_millis()),
    }
}

/// Milliseconds, for figures.
fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// The sum of the `metric` counters in a `/metrics` text.
fn counter_sum(text: &str, metric: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(metric)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Every replica's `acdm_mcp_tool_calls_total`.
async fn tool_calls(cluster: &Cluster) -> Result<Vec<f64>> {
    let mut counts = Vec::new();
    for index in 0..cluster.replicas.len() {
        counts.push(counter_sum(
            &cluster.metrics(index).await?,
            "acdm_mcp_tool_calls_total",
        ));
    }
    Ok(counts)
}

// ---------------------------------------------------------------------------
// MCP through the balancer.

async fn mcp_sdk_through_the_balancer(cluster: &mut Cluster, report: &mut Report) -> Result<()> {
    const CALLS: usize = 30;
    let before = tool_calls(cluster).await?;
    let mark = cluster.nginx.log.mark();
    let python = cluster.root.join(".test-tools/venv/bin/python");
    let script = cluster.root.join("tests/integration/mcp_cluster.py");
    let url = format!("{}/mcp", cluster.balancer_url());
    println!("  $ python tests/integration/mcp_cluster.py {url} *** {CALLS}");
    let output = Command::new(&python)
        .arg(&script)
        .args([&url, &cluster.service_token, &CALLS.to_string()])
        .output()
        .await
        .with_context(|| format!("cannot run {}", python.display()))?;
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        println!("  {line}");
    }
    ensure!(
        output.status.success(),
        "the SDK script failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
            .lines()
            .rev()
            .take(15)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    // initialize, notifications/initialized, tools/list and the calls.
    let expected = CALLS + 3;
    let mut posts: Vec<LogLine> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while posts.len() < expected && Instant::now() < deadline {
        posts = cluster
            .nginx
            .log
            .since(mark)
            .into_iter()
            .filter(|l| l.uri.starts_with("/mcp") && l.method == "POST")
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ensure!(
        posts.len() >= expected,
        "the balancer logged {} POSTs to /mcp, expected at least {expected}",
        posts.len()
    );
    let refused: Vec<&LogLine> = posts
        .iter()
        .filter(|l| !(200..300).contains(&l.status))
        .collect();
    ensure!(refused.is_empty(), "POSTs not answered 2xx: {refused:?}");
    let mut per_replica = vec![0_usize; cluster.replicas.len()];
    for line in &posts {
        let index = line
            .answered_by()
            .and_then(|a| cluster.replica_at(a))
            .ok_or_else(|| anyhow!("a POST answered by no known replica: {line:?}"))?;
        if let Some(count) = per_replica.get_mut(index) {
            *count += 1;
        }
    }
    let after = tool_calls(cluster).await?;
    let calls: Vec<f64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    report.figure(
        "MCP session through the balancer (POSTs per replica)",
        replicas_list(&per_replica),
    );
    report.figure(
        "MCP tools/call per replica (their own metrics)",
        replicas_list(&calls),
    );
    ensure!(
        per_replica.iter().all(|&n| n > 0),
        "some replica got none of the session's requests"
    );
    ensure!(
        calls.iter().all(|&n| n > 0.0),
        "some replica counted no tools/call"
    );
    let total: f64 = calls.iter().sum();
    ensure!(
        (total - CALLS as f64).abs() < 0.5,
        "the replicas counted {total} tools/call, the client made {CALLS}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Writes through one replica, seen through the others.

fn identity(agent: &str, user: &str, thread: &str) -> Result<Identity> {
    Ok(Identity::new(
        UserId::parse(user)?,
        AgentName::parse(agent)?,
        ThreadId::parse(thread)?,
    ))
}

/// The data of a successful envelope, or the envelope's failure.
fn data_of<T: Clone>(answer: &acdm_core::ToolResponse<T>, what: &str) -> Result<T> {
    match answer.data() {
        Some(data) if answer.is_success() => Ok(data.clone()),
        _ => bail!("{what}: {} {}", answer.code(), answer.message()),
    }
}

async fn writes_through_one_replica_are_seen_through_the_others(
    cluster: &mut Cluster,
    _report: &mut Report,
) -> Result<()> {
    let n = cluster.replicas.len();
    let (a, b, c) = (0, 1 % n, 2 % n);
    let client = |i: usize| -> Result<acdm_harness_client::HarnessClient> {
        cluster.client(&cluster.replica_url(i)?)
    };
    let (ca, cb, cc) = (client(a)?, client(b)?, client(c)?);
    let who = identity(AGENT, OWNER, "cross-replica")?;
    let (at_a, at_b, at_c) = (
        ca.as_identity(who.clone()),
        cb.as_identity(who.clone()),
        cc.as_identity(who),
    );
    let path = "cross/note.md";
    let read = || ReadRequest {
        rel_path: path.to_owned(),
        ..ReadRequest::default()
    };

    let first = data_of(
        &at_a
            .nc_write(&WriteRequest {
                rel_path: path.to_owned(),
                content: "first\n".to_owned(),
                ..WriteRequest::default()
            })
            .await,
        "write through replica a",
    )?;
    let seen = data_of(&at_b.nc_read(&read()).await, "read through replica b")?;
    ensure!(
        seen.content == "first\n",
        "replica {b} read {:?}",
        seen.content
    );
    let listed = data_of(
        &at_c
            .nc_list(&ListRequest {
                rel_path: "cross".to_owned(),
                ..ListRequest::default()
            })
            .await,
        "list through replica c",
    )?;
    ensure!(
        listed.entries.iter().any(|e| e.name == "note.md"),
        "replica {c} lists {:?}",
        listed.entries
    );
    let second = data_of(
        &at_b
            .nc_write(&WriteRequest {
                rel_path: path.to_owned(),
                content: "second\n".to_owned(),
                if_match: seen.etag.clone(),
                ..WriteRequest::default()
            })
            .await,
        "overwrite through replica b with the etag read there",
    )?;
    let events = cluster
        .admin(
            c,
            Method::GET,
            &format!("/admin/events?project={SLUG}&limit=20"),
            None,
        )
        .await?;
    for id in [first.event_id.to_string(), second.event_id.to_string()] {
        let status = events
            .pointer("/data/events")
            .and_then(Value::as_array)
            .and_then(|list| list.iter().find(|e| e.get("id") == Some(&json!(id))))
            .and_then(|e| e.get("status").cloned());
        ensure!(
            status == Some(json!("applied")),
            "replica {c} lists event {id} as {status:?}"
        );
    }
    cluster
        .admin(
            a,
            Method::POST,
            &format!("/admin/events/{}/revert", second.event_id),
            Some(json!({ "user_id": OPERATOR })),
        )
        .await?;
    let back = data_of(&at_c.nc_read(&read()).await, "read through replica c")?;
    ensure!(
        back.content == "first\n",
        "after the revert through replica {a}, replica {c} reads {:?}",
        back.content
    );
    // A file created through c, its creation reverted through b: gone
    // through a.
    let other = data_of(
        &at_c
            .nc_write(&WriteRequest {
                rel_path: "cross/other.md".to_owned(),
                content: "created through c\n".to_owned(),
                ..WriteRequest::default()
            })
            .await,
        "create through replica c",
    )?;
    cluster
        .admin(
            b,
            Method::POST,
            &format!("/admin/events/{}/revert", other.event_id),
            Some(json!({ "user_id": OPERATOR })),
        )
        .await?;
    let gone = at_a
        .nc_read(&ReadRequest {
            rel_path: "cross/other.md".to_owned(),
            ..ReadRequest::default()
        })
        .await;
    ensure!(
        gone.code().as_str() == "not_found",
        "after reverting the create through replica {b}, replica {a} answers {} {}",
        gone.code(),
        gone.message()
    );

    // A business write: a meeting created through a, read and listed
    // through the others, its creation reverted, gone everywhere.
    let created = at_a
        .call::<Value, Value>(
            BusinessOp::CreateMeeting.path(),
            &json!({
                "title": "Cluster review",
                "starts_at": "2030-01-07T09:00:00+01:00",
                "ends_at": "2030-01-07T10:00:00+01:00",
            }),
        )
        .await;
    let created = data_of(&created, "create_meeting through replica a")?;
    let meeting_id = created
        .pointer("/meeting/meeting_id")
        .cloned()
        .ok_or_else(|| anyhow!("create_meeting answered no meeting id: {created}"))?;
    let event_id = created
        .get("event_id")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("create_meeting answered no event id: {created}"))?
        .to_owned();
    let got = at_b
        .call::<Value, Value>(
            BusinessOp::GetMeeting.path(),
            &json!({ "meeting_id": meeting_id }),
        )
        .await;
    let got = data_of(&got, "get_meeting through replica b")?;
    ensure!(
        got.pointer("/meeting/title") == Some(&json!("Cluster review")),
        "replica {b} reads {got}"
    );
    let window = json!({ "from": "2030-01-01T00:00:00Z", "to": "2030-01-31T00:00:00Z" });
    let listed = at_c
        .call::<Value, Value>(BusinessOp::ListMeetings.path(), &window)
        .await;
    let listed = data_of(&listed, "list_meetings through replica c")?;
    ensure!(
        listed
            .get("items")
            .and_then(Value::as_array)
            .is_some_and(|items| items
                .iter()
                .any(|m| m.get("meeting_id") == Some(&meeting_id))),
        "replica {c} lists {listed}"
    );
    cluster
        .admin(
            c,
            Method::POST,
            &format!("/admin/events/{event_id}/revert"),
            Some(json!({ "user_id": OPERATOR })),
        )
        .await?;
    let gone = at_a
        .call::<Value, Value>(
            BusinessOp::GetMeeting.path(),
            &json!({ "meeting_id": meeting_id }),
        )
        .await;
    ensure!(
        gone.code().as_str() == "not_found",
        "after the revert through replica {c}, replica {a} answers {} {}",
        gone.code(),
        gone.message()
    );
    println!(
        "  written through replica {a}, read through {b}, listed through {c}, reverted through {a}, {b} and {c}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Approvals across replicas.

async fn an_approval_crosses_the_replicas(
    cluster: &mut Cluster,
    _report: &mut Report,
) -> Result<()> {
    let n = cluster.replicas.len();
    let (a, b, c) = (0, 1 % n, 2 % n);
    let policy = format!("/admin/projects/{SLUG}/approval-policy");
    cluster
        .admin(
            a,
            Method::PUT,
            &policy,
            Some(json!({ "ops": ["nc.delete"] })),
        )
        .await?;
    let outcome = approval_across(cluster, (a, b, c)).await;
    // The other checks write without asking.
    cluster.admin(a, Method::DELETE, &policy, None).await?;
    outcome
}

async fn approval_across(cluster: &Cluster, (a, b, c): (usize, usize, usize)) -> Result<()> {
    let who = identity(AGENT, MEMBER, "approval-across")?;
    let client = |i: usize| -> Result<acdm_harness_client::HarnessClient> {
        cluster.client(&cluster.replica_url(i)?)
    };
    let (ca, cb, cc) = (client(a)?, client(b)?, client(c)?);
    let (at_a, at_b, at_c) = (
        ca.as_identity(who.clone()),
        cb.as_identity(who.clone()),
        cc.as_identity(who),
    );
    let path = "approvals/doomed.md";
    data_of(
        &at_a
            .nc_write(&WriteRequest {
                rel_path: path.to_owned(),
                content: "to be deleted once approved\n".to_owned(),
                ..WriteRequest::default()
            })
            .await,
        "write through replica a",
    )?;
    let delete = json!({ "rel_path": path, "dry_run": false });
    let asked: acdm_core::ToolResponse<Value> = at_a.call("/agent-tools/nc/delete", &delete).await;
    ensure!(
        asked.code().as_str() == "approval_required",
        "the delete through replica {a} answered {} {}",
        asked.code(),
        asked.message()
    );
    let id = asked
        .data()
        .and_then(|d| d.get("approval_id"))
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("approval_required without an approval_id"))?
        .to_owned();
    let presented = json!({ "rel_path": path, "dry_run": false, "approval_id": id });
    let pending: acdm_core::ToolResponse<Value> =
        at_c.call("/agent-tools/nc/delete", &presented).await;
    ensure!(
        pending.code().as_str() == "approval_pending",
        "presented before the decision through replica {c}: {} {}",
        pending.code(),
        pending.message()
    );
    let listed = cluster
        .admin(
            b,
            Method::GET,
            &format!("/admin/approvals?status=pending&project={SLUG}"),
            None,
        )
        .await?;
    ensure!(
        listed
            .pointer("/data/approvals")
            .and_then(Value::as_array)
            .is_some_and(|list| list
                .iter()
                .any(|x| x.get("approval_id") == Some(&json!(id)))),
        "replica {b} does not list {id}: {listed}"
    );
    cluster
        .admin(
            b,
            Method::POST,
            &format!("/admin/approvals/{id}/approve"),
            Some(json!({ "user_id": OWNER, "note": "checked in the cluster suite" })),
        )
        .await?;
    let done: acdm_core::ToolResponse<Value> =
        at_c.call("/agent-tools/nc/delete", &presented).await;
    let done = data_of(&done, "the approved delete through replica c")?;
    let event_id = done
        .get("event_id")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("the delete answered no event id: {done}"))?
        .to_owned();
    let gone = at_b
        .nc_read(&ReadRequest {
            rel_path: path.to_owned(),
            ..ReadRequest::default()
        })
        .await;
    ensure!(
        gone.code().as_str() == "not_found",
        "after the delete through replica {c}, replica {b} answers {} {}",
        gone.code(),
        gone.message()
    );
    let again: acdm_core::ToolResponse<Value> =
        at_a.call("/agent-tools/nc/delete", &presented).await;
    ensure!(
        again.code().as_str() == "approval_used",
        "a second use through replica {a} answered {} {}",
        again.code(),
        again.message()
    );
    let shown = cluster
        .admin(a, Method::GET, &format!("/admin/approvals/{id}"), None)
        .await?;
    ensure!(
        shown.pointer("/data/status") == Some(&json!("used"))
            && shown.pointer("/data/event_id") == Some(&json!(event_id)),
        "replica {a} shows {shown}"
    );
    let event = cluster
        .admin(a, Method::GET, &format!("/admin/events/{event_id}"), None)
        .await?;
    ensure!(
        event.pointer("/data/params/approval/approved_by") == Some(&json!(OWNER)),
        "the event does not record who approved it: {event}"
    );
    println!(
        "  asked through replica {a}, approved through {b}, used once through {c}, refused again through {a}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// One agent's calls over every replica.

async fn one_agents_calls_are_spread_over_every_replica(
    cluster: &mut Cluster,
    report: &mut Report,
) -> Result<()> {
    const RATE: f64 = 60.0;
    const SECONDS: u64 = 5;
    let target = Target::new(cluster, &cluster.balancer_url())?;
    let mark = cluster.nginx.log.mark();
    let records =
        load::drive_at_rate(&target, AGENT, RATE, Duration::from_secs(SECONDS), "spread").await;
    let probes: Vec<&str> = records.iter().map(|r| r.probe.as_str()).collect();
    let lines = cluster
        .nginx
        .log
        .wait_for_probes(mark, &probes, Duration::from_secs(5))
        .await;
    let tallies = load::per_replica(cluster, &lines, probes.iter().copied());
    let n = cluster.replicas.len();
    let shown: Vec<String> = (0..n)
        .map(|i| {
            let t = tallies.get(&Some(i)).cloned().unwrap_or_default();
            format!("{} ok, {} limited, {} other", t.ok, t.limited, t.other)
        })
        .collect();
    report.figure(
        &format!("one agent at {RATE}/s for {SECONDS} s through the balancer"),
        replicas_list(&shown),
    );
    let failures: Vec<&Record> = records.iter().filter(|r| r.failure.is_some()).collect();
    ensure!(
        failures.is_empty(),
        "{} of {} calls failed, first: {:?}",
        failures.len(),
        records.len(),
        failures.first().and_then(|r| r.failure.as_deref())
    );
    ensure!(
        !tallies.contains_key(&None),
        "calls no replica answered: {:?}",
        tallies.get(&None)
    );
    let share = records.len() as f64 / n as f64;
    for i in 0..n {
        let got = tallies.get(&Some(i)).map_or(0, |t| t.ok) as f64;
        ensure!(
            (got - share).abs() <= share * 0.10,
            "replica {i} answered {got} calls, an even share is {share:.0} (±10 %)"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// A rate limit that holds for the deployment.

async fn an_agents_rate_limit_holds_for_the_deployment(
    cluster: &mut Cluster,
    report: &mut Report,
) -> Result<()> {
    const DRIVEN: f64 = 2.0 * RATE_LIMIT_PER_SECOND;
    const SECONDS: u64 = 10;
    cluster.restart_all_with(RATE_LIMITED).await?;
    let outcome = async {
        let target = Target::new(cluster, &cluster.balancer_url())?;
        // The burst is spent first: what is measured is the steady rate.
        let warm = load::drive_at_rate(&target, AGENT, DRIVEN, Duration::from_secs(2), "warm").await;
        ensure!(
            warm.iter().any(|r| r.failure.as_deref().is_some_and(|f| f.starts_with("rate_limited"))),
            "driving at twice the rate was never limited: are the limits on?"
        );
        let mark = cluster.nginx.log.mark();
        let records = load::drive_at_rate(
            &target,
            AGENT,
            DRIVEN,
            Duration::from_secs(SECONDS),
            "rate",
        )
        .await;
        let probes: Vec<&str> = records.iter().map(|r| r.probe.as_str()).collect();
        let lines = cluster
            .nginx
            .log
            .wait_for_probes(mark, &probes, Duration::from_secs(5))
            .await;
        let tallies = load::per_replica(cluster, &lines, probes.iter().copied());
        let admitted = records.iter().filter(|r| r.failure.is_none()).count();
        let limited = records
            .iter()
            .filter(|r| r.failure.as_deref().is_some_and(|f| f.starts_with("rate_limited")))
            .count();
        let other = records.len() - admitted - limited;
        let expected = RATE_LIMIT_PER_SECOND * SECONDS as f64;
        let n = cluster.replicas.len();
        let shown: Vec<String> = (0..n)
            .map(|i| {
                let t = tallies.get(&Some(i)).cloned().unwrap_or_default();
                format!("{} ok, {} limited", t.ok, t.limited)
            })
            .collect();
        report.figure(
            "rate-limit accuracy across replicas",
            format!(
                "{admitted} admitted of {} sent at {DRIVEN}/s for {SECONDS} s with a limit of {RATE_LIMIT_PER_SECOND}/s: {:.1} % of the configured {expected}; per replica {}",
                records.len(),
                100.0 * admitted as f64 / expected,
                replicas_list(&shown)
            ),
        );
        ensure!(other == 0, "{other} calls failed otherwise");
        ensure!(
            (admitted as f64 - expected).abs() <= expected * 0.10,
            "{admitted} calls admitted, the limit allows {expected} (±10 %)"
        );
        // Round robin sends each replica a third of the calls: each must
        // admit a share of the limit, not one replica all of it.
        for i in 0..n {
            let t = tallies.get(&Some(i)).cloned().unwrap_or_default();
            ensure!(
                t.ok * 2 * n >= admitted,
                "replica {i} admitted {} of {admitted}: less than half an even share",
                t.ok
            );
        }
        Ok(())
    }
    .await;
    cluster.restart_all_with(&[]).await?;
    outcome
}

// ---------------------------------------------------------------------------
// Propagation of an unmount and of the kill switch.

/// For each replica, polls `probe` on it until it says the change is
/// obeyed; how long after `since` each first did (within 10 s).
async fn time_until_obeyed<F, Fut>(
    cluster: &Cluster,
    since: Instant,
    probe: F,
) -> Result<Vec<Duration>>
where
    F: Fn(acdm_harness_client::HarnessClient) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    let mut polls = JoinSet::new();
    for index in 0..cluster.replicas.len() {
        let client = cluster.client(&cluster.replica_url(index)?)?;
        let probe = probe.clone();
        polls.spawn(async move {
            let deadline = since + Duration::from_secs(10);
            loop {
                if probe(client.clone()).await {
                    return (index, Some(since.elapsed()));
                }
                if Instant::now() > deadline {
                    return (index, None);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
    }
    let mut delays = vec![Duration::ZERO; cluster.replicas.len()];
    while let Some(done) = polls.join_next().await {
        let (index, delay) = done?;
        let delay = delay.ok_or_else(|| anyhow!("replica {index} did not follow within 10 s"))?;
        if let Some(slot) = delays.get_mut(index) {
            *slot = delay;
        }
    }
    Ok(delays)
}

/// The figure of a propagation measurement: the worst, and every trial.
fn propagation_figure(trials: &[Vec<Duration>]) -> (Duration, String) {
    let worst = trials.iter().flatten().max().copied().unwrap_or_default();
    let shown: Vec<String> = trials
        .iter()
        .map(|delays| {
            delays
                .iter()
                .map(|d| d.as_millis().to_string())
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect();
    (
        worst,
        format!(
            "worst {} (bound {}); per trial, replica 0/1/…: {} ms",
            ms(worst),
            ms(PROPAGATION_BOUND),
            shown.join(", ")
        ),
    )
}

/// An agent of the check's own, so the project's agent stays mounted.
const PROBE_AGENT: &str = "cluster-probe";

async fn an_unmount_reaches_every_replica_in_time(
    cluster: &mut Cluster,
    report: &mut Report,
) -> Result<()> {
    let mut trials = Vec::new();
    for _ in 0..PROPAGATION_TRIALS {
        cluster
            .admin(
                0,
                Method::POST,
                "/admin/agents",
                Some(json!({ "agent_name": PROBE_AGENT, "project": SLUG })),
            )
            .await?;
        // Every replica resolves (and caches) the agent first, so each
        // must notice the unmount itself rather than miss its cache.
        let mounted = |client: acdm_harness_client::HarnessClient| async move {
            match identity(PROBE_AGENT, OWNER, "probe") {
                Ok(who) => client.as_identity(who).nc_list_mounts().await.is_success(),
                Err(_) => false,
            }
        };
        time_until_obeyed(cluster, Instant::now(), mounted)
            .await
            .context("the agent was not usable on every replica after mounting")?;
        let since = Instant::now();
        cluster
            .admin(
                0,
                Method::DELETE,
                &format!("/admin/agents/{PROBE_AGENT}"),
                None,
            )
            .await?;
        let unmounted = |client: acdm_harness_client::HarnessClient| async move {
            match identity(PROBE_AGENT, OWNER, "probe") {
                Ok(who) => {
                    let answer = client.as_identity(who).nc_list_mounts().await;
                    answer.code().as_str() == "scope_violation"
                }
                Err(_) => false,
            }
        };
        trials.push(time_until_obeyed(cluster, since, unmounted).await?);
    }
    let (worst, figure) = propagation_figure(&trials);
    report.figure("unmount propagation (through replica 0)", figure);
    ensure!(
        worst <= PROPAGATION_BOUND,
        "an unmount took {} to reach every replica (bound {})",
        ms(worst),
        ms(PROPAGATION_BOUND)
    );
    Ok(())
}

/// Whether a replica's overview says agents' file writes are `enabled`.
async fn writes_are(client: acdm_harness_client::HarnessClient, enabled: bool) -> bool {
    match identity(AGENT, OWNER, "switch") {
        Ok(who) => client
            .as_identity(who)
            .project_overview()
            .await
            .data()
            .is_some_and(|o| o.file_writes_enabled == enabled),
        Err(_) => false,
    }
}

async fn flip_kill_switch(cluster: &Cluster, enabled: bool) -> Result<Vec<Duration>> {
    let since = Instant::now();
    cluster
        .admin(
            0,
            Method::PUT,
            "/admin/kill-switch",
            Some(json!({
                "nc_writes_enabled": enabled,
                "reason": "cluster suite",
                "user_id": OPERATOR,
            })),
        )
        .await?;
    time_until_obeyed(cluster, since, move |client| writes_are(client, enabled)).await
}

async fn a_kill_switch_flip_reaches_every_replica_in_time(
    cluster: &mut Cluster,
    report: &mut Report,
) -> Result<()> {
    let outcome = kill_switch_trials(cluster, report).await;
    if outcome.is_err() {
        // Whatever failed, the checks after this one need writes on.
        let _ = flip_kill_switch(cluster, true).await;
    }
    outcome
}

async fn kill_switch_trials(cluster: &mut Cluster, report: &mut Report) -> Result<()> {
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for trial in 0..PROPAGATION_TRIALS {
        off.push(flip_kill_switch(cluster, false).await?);
        if trial + 1 == PROPAGATION_TRIALS {
            // With the switch off, every replica refuses a real write.
            for index in 0..cluster.replicas.len() {
                let who = identity(AGENT, OWNER, "switch")?;
                let answer = cluster
                    .client(&cluster.replica_url(index)?)?
                    .as_identity(who)
                    .nc_write(&WriteRequest {
                        rel_path: "switch/refused.md".to_owned(),
                        content: "must not be written\n".to_owned(),
                        ..WriteRequest::default()
                    })
                    .await;
                ensure!(
                    answer.code().as_str() == "kill_switch_off",
                    "with the switch off, replica {index} answered a write with {} {}",
                    answer.code(),
                    answer.message()
                );
            }
        }
        on.push(flip_kill_switch(cluster, true).await?);
    }
    let (worst_off, figure) = propagation_figure(&off);
    report.figure("kill switch off propagation (through replica 0)", figure);
    let (worst_on, figure) = propagation_figure(&on);
    report.figure("kill switch on propagation (through replica 0)", figure);
    let worst = worst_off.max(worst_on);
    ensure!(
        worst <= PROPAGATION_BOUND,
        "a kill-switch flip took {} to reach every replica (bound {})",
        ms(worst),
        ms(PROPAGATION_BOUND)
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// A crash and a drain under load.

/// What happened around one replica's kill or stop under load.
struct UnderLoad {
    /// Every request sent.
    records: Vec<Record>,
    /// The balancer's line of each, by probe id.
    lines: HashMap<String, LogLine>,
    /// When the signal was sent.
    signalled_at: SystemTime,
    /// How long the replica took to exit after it.
    exit_after: Duration,
}

impl UnderLoad {
    fn failures(&self) -> Vec<&Record> {
        self.records
            .iter()
            .filter(|r| r.failure.is_some())
            .collect()
    }

    /// One failure per line: what it was, why, and what the balancer saw.
    fn describe(&self, record: &Record) -> String {
        let line = self.lines.get(&record.probe);
        let failure: String = record
            .failure
            .as_deref()
            .unwrap_or("ok")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        format!(
            "{:?} {}: {failure} [balancer: {}]",
            record.op,
            record.probe,
            line.map_or("no line".to_owned(), |l| format!(
                "status {}, tried {:?} answering {:?}, sent {} the signal, took {} ms",
                l.status,
                l.upstreams,
                l.upstream_statuses,
                signed_ms(l.start, self.signalled_at),
                l.end
                    .duration_since(l.start)
                    .unwrap_or_default()
                    .as_millis()
            ))
        )
    }
}

/// Runs the load (C clients through the balancer), sends `signal` to
/// replica `victim` once [`REQUESTS_AROUND`] requests have completed,
/// waits for it to exit, lets as many more complete, and returns what
/// happened. Written files go to `load/<tag>/`.
async fn under_load(
    cluster: &mut Cluster,
    victim: usize,
    signal: Signal,
    tag: &str,
) -> Result<UnderLoad> {
    std::fs::create_dir_all(
        crate::harness::project_folder(&cluster.dav)
            .join("load")
            .join(tag),
    )?;
    let target = Target::new(cluster, &cluster.balancer_url())?;
    let mark = cluster.nginx.log.mark();
    let load = Load::start(&target, CONCURRENCY, tag);
    let warm = load
        .wait_for_more(REQUESTS_AROUND, Duration::from_secs(120))
        .await;
    let signalled_at = SystemTime::now();
    let signalled = Instant::now();
    let sent = if warm {
        cluster.signal(victim, signal)
    } else {
        Err(anyhow!(
            "the load did not complete {REQUESTS_AROUND} requests within 120 s"
        ))
    };
    let exited = match sent {
        Ok(()) => cluster.wait_exit(victim, Duration::from_secs(30)).await,
        Err(error) => Err(error),
    };
    let exit_after = signalled.elapsed();
    let after = load
        .wait_for_more(REQUESTS_AROUND, Duration::from_secs(120))
        .await;
    let records = load.finish().await;
    match exited {
        Ok(true) => {}
        Ok(false) => bail!("replica {victim} did not exit within 30 s of the signal"),
        Err(error) => return Err(error),
    }
    ensure!(
        after,
        "the load did not complete {REQUESTS_AROUND} requests within 120 s after the signal"
    );
    let probes: Vec<&str> = records.iter().map(|r| r.probe.as_str()).collect();
    let lines = cluster
        .nginx
        .log
        .wait_for_probes(mark, &probes, Duration::from_secs(5))
        .await
        .into_iter()
        .filter_map(|l| Some((l.probe.clone()?, l)))
        .collect();
    Ok(UnderLoad {
        records,
        lines,
        signalled_at,
        exit_after,
    })
}

/// Every acknowledged write is on the WebDAV disk as written, and its
/// event is `applied`; returns how many there were.
async fn acknowledged_writes_are_applied(cluster: &Cluster, run: &UnderLoad) -> Result<usize> {
    let acked: Vec<&load::Acked> = run
        .records
        .iter()
        .filter_map(|r| r.acked.as_ref())
        .collect();
    let folder = crate::harness::project_folder(&cluster.dav);
    for write in &acked {
        let path = folder.join(&write.rel_path);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        ensure!(
            on_disk == write.content,
            "acknowledged write {} is not on the disk as written (found {on_disk:?})",
            write.rel_path
        );
        let event = cluster
            .admin(
                0,
                Method::GET,
                &format!("/admin/events/{}", write.event_id),
                None,
            )
            .await?;
        let status = event.pointer("/data/status").cloned();
        ensure!(
            status == Some(json!("applied")),
            "the event {} of acknowledged write {} is {status:?}",
            write.event_id,
            write.rel_path
        );
    }
    Ok(acked.len())
}

/// Every event of the project with `status`, as the operator API lists
/// them (page by page).
async fn events_with_status(cluster: &Cluster, status: &str) -> Result<Vec<Value>> {
    let mut events = Vec::new();
    let mut before = String::new();
    loop {
        let listed = cluster
            .admin(
                0,
                Method::GET,
                &format!("/admin/events?project={SLUG}&status={status}&limit=500{before}"),
                None,
            )
            .await?;
        events.extend(
            listed
                .pointer("/data/events")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        );
        match listed.pointer("/data/next_before").and_then(Value::as_str) {
            Some(next) => before = format!("&before={next}"),
            None => return Ok(events),
        }
    }
}

/// The balancer's log has millisecond times.
const CLOCK_SLACK: Duration = Duration::from_millis(2);

async fn a_crash_under_load_loses_only_what_was_in_flight(
    cluster: &mut Cluster,
    report: &mut Report,
) -> Result<()> {
    let victim = 1 % cluster.replicas.len();
    let victim_addr = cluster.replicas.get(victim).map(|r| r.addr.to_string());
    let run = under_load(cluster, victim, Signal::KILL, "kill9").await?;
    let killed = run.signalled_at;
    // A process takes a moment to die after SIGKILL (longer on a busy
    // machine): until the harness reaped it, a request sent to it may
    // still have reached it and been lost with it.
    let gone = killed + run.exit_after;
    let on_victim = |l: &LogLine| l.first_tried() == victim_addr.as_deref();
    let in_flight = |l: &LogLine| l.start <= gone + CLOCK_SLACK && l.end + CLOCK_SLACK >= killed;
    let failures = run.failures();
    let in_flight_on_victim: Vec<&LogLine> = run
        .lines
        .values()
        .filter(|l| on_victim(l) && in_flight(l))
        .collect();
    let retried = in_flight_on_victim
        .iter()
        .filter(|l| l.upstreams.len() > 1 && (200..300).contains(&l.status))
        .count();
    let mut not_in_flight = Vec::new();
    for failure in &failures {
        // Sent to the killed replica before it was gone, and ended after
        // the kill.
        let explained = run
            .lines
            .get(&failure.probe)
            .is_some_and(|l| on_victim(l) && in_flight(l));
        if !explained {
            not_in_flight.push(run.describe(failure));
        }
    }
    // After the kill, the balancer serves from the others.
    let mut served_after = vec![0_usize; cluster.replicas.len()];
    for line in run.lines.values().filter(|l| l.start > gone + CLOCK_SLACK) {
        if let Some(index) = line.answered_by().and_then(|a| cluster.replica_at(a))
            && (200..300).contains(&line.status)
            && let Some(count) = served_after.get_mut(index)
        {
            *count += 1;
        }
    }
    let pending_before = events_with_status(cluster, "pending").await?;
    let reconciled = cluster.cli(&["events", "reconcile"]).await?;
    println!("  $ acdm-backend events reconcile\n  {}", reconciled.trim());
    let pending_after = events_with_status(cluster, "pending").await?;
    // The writes that failed with the crash: each left at most one event,
    // settled now: applied with its bytes on the disk, or failed without.
    let mut unsettled = Vec::new();
    let events_failed = events_with_status(cluster, "failed").await?;
    let events_applied = events_with_status(cluster, "applied").await?;
    for failure in failures.iter().filter(|r| r.op == Op::NcWrite) {
        let thread = |e: &&Value| e.pointer("/actor/thread_id") == Some(&json!(failure.probe));
        let path = crate::harness::project_folder(&cluster.dav)
            .join("load")
            .join("kill9")
            .join(format!("{}.txt", failure.probe));
        let applied = events_applied.iter().filter(thread).count();
        let failed = events_failed.iter().filter(thread).count();
        let consistent = match (applied, failed) {
            (1, 0) => path.is_file(),
            (0, 1) | (0, 0) => !path.exists(),
            _ => false,
        };
        if !consistent {
            unsettled.push(format!(
                "{}: {applied} applied and {failed} failed events, file present: {}",
                failure.probe,
                path.exists()
            ));
        }
    }
    let acked = acknowledged_writes_are_applied(cluster, &run).await?;
    report.figure(
        &format!("kill -9 of replica {victim} under load (C={CONCURRENCY})"),
        format!(
            "{} of {} requests failed; it was gone {} after the signal; {} requests were sent to it before and ended after the kill, {} of them retried by the balancer on another replica; {} acknowledged writes all applied with their events; {} pending before the reconciler, {} after; requests served after it was gone: {}",
            failures.len(),
            run.records.len(),
            ms(run.exit_after),
            in_flight_on_victim.len(),
            retried,
            acked,
            pending_before.len(),
            pending_after.len(),
            replicas_list(&served_after)
        ),
    );
    for failure in failures.iter().take(20) {
        println!("    failed: {}", run.describe(failure));
    }
    ensure!(
        !in_flight_on_victim.is_empty(),
        "no request was in flight on replica {victim} at the kill; nothing was proved"
    );
    ensure!(
        not_in_flight.is_empty(),
        "{} failed requests were not in flight on the killed replica: {}",
        not_in_flight.len(),
        not_in_flight.join("; ")
    );
    ensure!(
        pending_after.is_empty(),
        "{} events still pending after the reconciler",
        pending_after.len()
    );
    ensure!(
        unsettled.is_empty(),
        "writes that failed with the crash left inconsistent events: {}",
        unsettled.join("; ")
    );
    for (index, served) in served_after.iter().enumerate() {
        ensure!(
            index == victim || *served > 0,
            "replica {index} served nothing after the kill"
        );
    }
    Ok(())
}

/// Drains tried at most, each of another replica, until one stopped with
/// both an MCP call and a BFF call in flight on it (a drain with neither
/// would prove nothing).
const MAX_DRAINS: usize = 5;

async fn a_sigterm_under_load_fails_no_request(
    cluster: &mut Cluster,
    report: &mut Report,
) -> Result<()> {
    let n = cluster.replicas.len();
    let (mut requests, mut failed, mut drains) = (0, Vec::new(), Vec::new());
    let (mut acked, mut covered) = (0, false);
    for attempt in 0..MAX_DRAINS {
        let victim = (2 + attempt) % n;
        let victim_addr = cluster.replicas.get(victim).map(|r| r.addr.to_string());
        let run = under_load(cluster, victim, Signal::TERM, &format!("term{attempt}")).await?;
        // Back before anything is asked of it (the operator calls below go
        // to replica 0), and before the next drain stops another one.
        cluster.restart_stopped().await?;
        let signalled = run.signalled_at;
        let ms1 = Duration::from_millis(1);
        let in_flight: Vec<&LogLine> = run
            .lines
            .values()
            .filter(|l| {
                l.first_tried() == victim_addr.as_deref()
                    && l.start <= signalled + ms1
                    && l.end + ms1 >= signalled
            })
            .collect();
        let mcp = in_flight
            .iter()
            .filter(|l| l.uri.starts_with("/mcp"))
            .count();
        let bff = in_flight.len() - mcp;
        drains.push(format!(
            "replica {victim} exited {} after the signal with {mcp} MCP and {bff} BFF requests in flight on it",
            ms(run.exit_after)
        ));
        println!(
            "  drain {}: {}",
            attempt + 1,
            drains.last().map_or("", String::as_str)
        );
        requests += run.records.len();
        acked += acknowledged_writes_are_applied(cluster, &run).await?;
        for failure in run.failures() {
            failed.push((failure.op.is_mcp(), run.describe(failure)));
        }
        if mcp > 0 && bff > 0 {
            covered = true;
            break;
        }
    }
    let pending = events_with_status(cluster, "pending").await?;
    let mcp_failed = failed.iter().filter(|(mcp, _)| *mcp).count();
    report.figure(
        &format!("SIGTERM of a replica under load (C={CONCURRENCY})"),
        format!(
            "{} of {requests} requests failed ({mcp_failed} MCP, {} BFF) over {} drain(s): {}; {acked} acknowledged writes applied; {} events pending",
            failed.len(),
            failed.len() - mcp_failed,
            drains.len(),
            drains.join("; "),
            pending.len()
        ),
    );
    for (_, failure) in failed.iter().take(20) {
        println!("    failed: {failure}");
    }
    ensure!(
        failed.is_empty(),
        "{} requests failed on a graceful stop, first: {}",
        failed.len(),
        failed.first().map(|(_, f)| f.as_str()).unwrap_or_default()
    );
    ensure!(
        covered,
        "in {MAX_DRAINS} drains no replica stopped with both an MCP and a BFF request in flight; nothing was proved"
    );
    ensure!(
        pending.is_empty(),
        "{} events were left pending by a graceful stop",
        pending.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_summed_over_their_labels_only() {
        let text = "# TYPE acdm_mcp_tool_calls counter\n\
                    acdm_mcp_tool_calls_total{tool=\"a\",outcome=\"ok\"} 3\n\
                    acdm_mcp_tool_calls_total{tool=\"b\",outcome=\"ok\"} 4\n\
                    acdm_mcp_tool_calls_total_other 100\n";
        assert_eq!(counter_sum(text, "acdm_mcp_tool_calls_total"), 7.0);
    }

    #[test]
    fn times_are_said_before_or_after_the_signal() {
        let signal = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let ms = Duration::from_millis;
        assert_eq!(signed_ms(signal + ms(12), signal), "12 ms after");
        assert_eq!(signed_ms(signal - ms(3), signal), "3 ms before");
    }

    #[test]
    fn the_propagation_figure_names_the_worst_trial() {
        let ms = Duration::from_millis;
        let (worst, text) = propagation_figure(&[vec![ms(1), ms(1500)], vec![ms(3), ms(2100)]]);
        assert_eq!(worst, ms(2100));
        assert!(text.starts_with("worst 2100 ms (bound 2000 ms)"), "{text}");
        assert!(text.ends_with("1/1500, 3/2100 ms"), "{text}");
    }
}
