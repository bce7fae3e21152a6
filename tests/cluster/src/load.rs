//! Load through the balancer, and the record of every request in it.
//!
//! [`Load`] runs C workers; each sends one request after another, cycling
//! through a fixed mix of the agent's BFF reads and writes (through the
//! harness client, the engine's own client) and MCP `tools/call`s (plain
//! JSON-RPC, stateless), until it is told to stop. [`drive_at_rate`] sends
//! one agent's calls open-loop at a fixed rate instead — the driver for
//! measuring rate limits across replicas.
//!
//! Every request carries a unique probe id (the BFF's thread id, or the
//! `X-Cluster-Probe` header on MCP calls), which the balancer's access log
//! records with the replica that answered: [`per_replica`] joins the two.
//! Every acknowledged write is kept with its event id and content, so a
//! check can later find it applied, with its event, on the WebDAV disk.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use acdm_core::nc::{ListRequest, ReadRequest, WriteRequest};
use acdm_core::{AgentName, Identity, ThreadId, ToolResponse, UserId};
use acdm_harness_client::HarnessClient;
use anyhow::Result;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::harness::{AGENT, Cluster, MEMBER, PROJECT};
use crate::nginx::{LogLine, PROBE_HEADER};

/// One kind of request in the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Op {
    /// nc `write` of a new file (a journalled write with its event).
    NcWrite,
    /// nc `read` of the project's README.
    NcRead,
    /// nc `list` of a folder.
    NcList,
    /// project `overview` (database reads).
    Overview,
    /// MCP `tools/call acdm_read_nextcloud_file`.
    McpReadFile,
    /// MCP `tools/call acdm_search_wiki`.
    McpSearchWiki,
}

impl Op {
    /// Whether this is an MCP call.
    pub(crate) fn is_mcp(self) -> bool {
        matches!(self, Self::McpReadFile | Self::McpSearchWiki)
    }
}

/// The mix each worker cycles through (each starting at its own place):
/// a quarter writes, three eighths MCP calls.
const MIX: [Op; 8] = [
    Op::NcWrite,
    Op::McpReadFile,
    Op::NcRead,
    Op::Overview,
    Op::NcWrite,
    Op::McpSearchWiki,
    Op::NcList,
    Op::McpReadFile,
];

/// A write the service acknowledged (a success with its event).
#[derive(Debug, Clone)]
pub(crate) struct Acked {
    /// The file, relative to the project's folder.
    pub(crate) rel_path: String,
    /// What was written.
    pub(crate) content: String,
    /// The write's storage event.
    pub(crate) event_id: String,
}

/// One request and how it went.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// Its probe id (unique in the run).
    pub(crate) probe: String,
    /// What it was.
    pub(crate) op: Op,
    /// Why it failed; `None` for a success.
    pub(crate) failure: Option<String>,
    /// The write it made, when acknowledged.
    pub(crate) acked: Option<Acked>,
}

/// Where requests go: the balancer, or one replica.
#[derive(Clone)]
pub(crate) struct Target {
    bff: HarnessClient,
    http: reqwest::Client,
    mcp_url: String,
    token: String,
}

impl Target {
    /// Requests to `base_url` (the balancer's or a replica's).
    pub(crate) fn new(cluster: &Cluster, base_url: &str) -> Result<Self> {
        Ok(Self {
            bff: cluster.client(base_url)?,
            http: cluster.http.clone(),
            mcp_url: format!("{base_url}/mcp"),
            token: cluster.service_token.clone(),
        })
    }

    /// The identity of a request: the member, `agent`, the probe as thread.
    fn identity(agent: &str, probe: &str) -> Result<Identity, String> {
        Ok(Identity::new(
            UserId::parse(MEMBER).map_err(|e| e.to_string())?,
            AgentName::parse(agent).map_err(|e| e.to_string())?,
            ThreadId::parse(probe).map_err(|e| e.to_string())?,
        ))
    }

    /// Sends one `op` with `probe` as its id; its failure, or the write
    /// it made.
    async fn send(&self, op: Op, probe: &str, folder: &str) -> (Option<String>, Option<Acked>) {
        let identity = match Self::identity(AGENT, probe) {
            Ok(identity) => identity,
            Err(error) => return (Some(error), None),
        };
        let bff = self.bff.as_identity(identity);
        let failure = match op {
            Op::NcWrite => {
                let rel_path = format!("{folder}/{probe}.txt");
                let content = format!("{probe} was here\n");
                let answer = bff
                    .nc_write(&WriteRequest {
                        rel_path: rel_path.clone(),
                        content: content.clone(),
                        ..WriteRequest::default()
                    })
                    .await;
                return match answer.data() {
                    Some(data) if answer.is_success() => (
                        None,
                        Some(Acked {
                            rel_path,
                            content,
                            event_id: data.event_id.to_string(),
                        }),
                    ),
                    _ => (Some(envelope_failure(&answer)), None),
                };
            }
            Op::NcRead => {
                let answer = bff
                    .nc_read(&ReadRequest {
                        rel_path: "README.md".to_owned(),
                        ..ReadRequest::default()
                    })
                    .await;
                match answer.data() {
                    Some(data) if data.content.contains("Alpha") => None,
                    _ => Some(envelope_failure(&answer)),
                }
            }
            Op::NcList => {
                let answer = bff
                    .nc_list(&ListRequest {
                        rel_path: "notes".to_owned(),
                        ..ListRequest::default()
                    })
                    .await;
                match answer.data() {
                    Some(data) if data.entries.iter().any(|e| e.name == "plan.md") => None,
                    _ => Some(envelope_failure(&answer)),
                }
            }
            Op::Overview => {
                let answer = bff.project_overview().await;
                (!answer.is_success()).then(|| envelope_failure(&answer))
            }
            Op::McpReadFile => {
                let arguments = json!({
                    "path": format!("/Projects/{PROJECT}/README.md"),
                    "project_name": PROJECT,
                });
                self.tool(probe, "acdm_read_nextcloud_file", arguments)
                    .await
                    .err()
            }
            Op::McpSearchWiki => {
                let arguments = json!({ "query": "weekly", "limit": 5 });
                self.tool(probe, "acdm_search_wiki", arguments).await.err()
            }
        };
        (failure, None)
    }

    /// One MCP `tools/call` (stateless: no session, no handshake); its
    /// structured content, or why it failed (a transport error, an HTTP
    /// status other than 200, a JSON-RPC error or an `isError` result).
    pub(crate) async fn tool(
        &self,
        probe: &str,
        name: &str,
        arguments: Value,
    ) -> Result<Value, String> {
        let body = json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": { "name": name, "arguments": arguments },
        });
        let response = self
            .http
            .post(&self.mcp_url)
            .header("x-acdm-service-auth", &self.token)
            .header("accept", "application/json, text/event-stream")
            .header(PROBE_HEADER, probe)
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("MCP {name}: transport: {e}"))?;
        let status = response.status().as_u16();
        let text = response
            .text()
            .await
            .map_err(|e| format!("MCP {name}: HTTP {status}, body lost: {e}"))?;
        if status != 200 {
            return Err(format!("MCP {name}: HTTP {status}: {}", excerpt(&text)));
        }
        let answer: Value = serde_json::from_str(&text)
            .map_err(|_| format!("MCP {name}: not JSON: {}", excerpt(&text)))?;
        let result = answer
            .get("result")
            .ok_or_else(|| format!("MCP {name}: JSON-RPC error: {}", excerpt(&text)))?;
        if result.get("isError") == Some(&Value::Bool(true)) {
            return Err(format!("MCP {name}: tool error: {}", excerpt(&text)));
        }
        Ok(result.get("structuredContent").cloned().unwrap_or_default())
    }
}

/// A failed envelope in one line: its code and message.
fn envelope_failure<T>(answer: &ToolResponse<T>) -> String {
    if answer.is_success() {
        format!("unexpected data: {}", excerpt(answer.message()))
    } else {
        format!("{}: {}", answer.code(), excerpt(answer.message()))
    }
}

/// The first 200 characters of `text`.
fn excerpt(text: &str) -> String {
    text.chars().take(200).collect()
}

/// Load in progress: C workers through one [`Target`].
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    completed: Arc<AtomicUsize>,
    workers: JoinSet<Vec<Record>>,
}

impl Load {
    /// Starts `concurrency` workers sending the mix to `target`; probe ids
    /// and written files are named after `tag` (files go to
    /// `load/<tag>/` in the project's folder, which must exist).
    pub(crate) fn start(target: &Target, concurrency: usize, tag: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let completed = Arc::new(AtomicUsize::new(0));
        let mut workers = JoinSet::new();
        for worker in 0..concurrency {
            let (target, stop, completed) = (target.clone(), stop.clone(), completed.clone());
            let (tag, folder) = (tag.to_owned(), format!("load/{tag}"));
            workers.spawn(async move {
                let mut records = Vec::new();
                for (seq, op) in MIX.iter().copied().cycle().skip(worker).enumerate() {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let probe = format!("{tag}-{worker}-{seq}");
                    let (failure, acked) = target.send(op, &probe, &folder).await;
                    records.push(Record {
                        probe,
                        op,
                        failure,
                        acked,
                    });
                    completed.fetch_add(1, Ordering::Relaxed);
                }
                records
            });
        }
        Self {
            stop,
            completed,
            workers,
        }
    }

    /// How many requests have completed so far.
    pub(crate) fn completed(&self) -> usize {
        self.completed.load(Ordering::Relaxed)
    }

    /// Waits until `more` requests have completed after this call, for at
    /// most `limit`; false if they did not.
    pub(crate) async fn wait_for_more(&self, more: usize, limit: Duration) -> bool {
        let target = self.completed() + more;
        let deadline = tokio::time::Instant::now() + limit;
        while self.completed() < target {
            if tokio::time::Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    /// Stops the workers (each finishes its request in flight) and returns
    /// every request's record.
    pub(crate) async fn finish(mut self) -> Vec<Record> {
        self.stop.store(true, Ordering::Relaxed);
        let mut records = Vec::new();
        while let Some(done) = self.workers.join_next().await {
            records.extend(done.unwrap_or_default());
        }
        records
    }
}

/// Sends `agent`'s calls (nc `list_mounts`, the cheapest BFF call) to
/// `target` at `rate` per second for `duration`, open loop: a call every
/// 1/`rate` s whatever the answers, as an engine would under a burst.
/// Each call's record says how it went (`rate_limited: …` for a refusal);
/// [`per_replica`] tells which replica answered each and with what status.
///
/// This is the driver for the rate-limit accuracy check across replicas:
/// drive an agent at more than its configured rate through the balancer
/// for T seconds, then count the 200s (admitted) and 429s (refused) per
/// replica; the admitted total over T must be the configured rate ±10 %.
pub(crate) async fn drive_at_rate(
    target: &Target,
    agent: &str,
    rate: f64,
    duration: Duration,
    tag: &str,
) -> Vec<Record> {
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let calls = (rate * duration.as_secs_f64()).round() as usize;
    let mut in_flight = JoinSet::new();
    for seq in 0..calls {
        ticks.tick().await;
        let (target, agent, probe) = (target.clone(), agent.to_owned(), format!("{tag}-{seq}"));
        in_flight.spawn(async move {
            let failure = match Target::identity(&agent, &probe) {
                Ok(identity) => {
                    let answer = target.bff.as_identity(identity).nc_list_mounts().await;
                    (!answer.is_success()).then(|| envelope_failure(&answer))
                }
                Err(error) => Some(error),
            };
            Record {
                probe,
                op: Op::NcList,
                failure,
                acked: None,
            }
        });
    }
    let mut records = Vec::new();
    while let Some(done) = in_flight.join_next().await {
        records.extend(done.ok());
    }
    records
}

/// Requests answered by one replica, by the status the client got.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tally {
    /// 2xx.
    pub(crate) ok: usize,
    /// 429 (rate limited).
    pub(crate) limited: usize,
    /// Anything else.
    pub(crate) other: usize,
}

/// For the `probes` given, the balancer's lines grouped by the replica
/// that answered (index into the cluster's replicas) and tallied by
/// status; lines no replica answered are under `None`.
pub(crate) fn per_replica<'a>(
    cluster: &Cluster,
    lines: &[LogLine],
    probes: impl IntoIterator<Item = &'a str>,
) -> HashMap<Option<usize>, Tally> {
    let wanted: std::collections::HashSet<&str> = probes.into_iter().collect();
    let mut tallies: HashMap<Option<usize>, Tally> = HashMap::new();
    for line in lines {
        if !line.probe.as_deref().is_some_and(|p| wanted.contains(p)) {
            continue;
        }
        let replica = line.answered_by().and_then(|a| cluster.replica_at(a));
        let tally = tallies.entry(replica).or_default();
        match line.status {
            200..=299 => tally.ok += 1,
            429 => tally.limited += 1,
            _ => tally.other += 1,
        }
    }
    tallies
}
