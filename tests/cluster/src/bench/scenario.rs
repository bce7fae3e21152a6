//! What the HTTP bench measures: one request each, sent again and again at
//! each concurrency, and what a good answer to it holds.
//!
//! The floor and the upstream's direct figure read the same 4 KiB file the
//! service's reads read; the service's scenarios are its probe
//! (`/healthz`), the Agent Tools BFF's nc `read` and `list`, and an MCP
//! `tools/call` of each of the four tools.

use serde_json::json;

use crate::bench::upstream::{DAV_USER, LISTED, REPORT, REPORT_END, WIKI_FILE, WIKI_PHRASE};
use crate::bench::wrk::{Judge, Request};
use crate::harness::{AGENT, MEMBER, PROJECT};

/// Which server a scenario's requests go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// The upstream nginx itself.
    Upstream,
    /// The one-hop nginx proxy in front of it.
    Floor,
    /// The service.
    Service,
}

/// One measured request.
#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    /// Its name in the table.
    pub(crate) name: &'static str,
    /// Where it goes.
    pub(crate) target: Target,
    /// The path.
    pub(crate) path: String,
    /// The request.
    pub(crate) request: Request,
    /// What a good answer is.
    pub(crate) judge: Judge,
}

/// The floor's name in the table.
pub(crate) const FLOOR: &str = "floor: nginx one hop (GET 4 KiB)";
/// The floor measured again at the end of each concurrency.
pub(crate) const FLOOR_AGAIN: &str = "floor, again";
/// The upstream by itself.
pub(crate) const DIRECT: &str = "upstream direct (GET 4 KiB)";
/// The BFF's read.
pub(crate) const NC_READ: &str = "BFF nc/read (4 KiB)";
/// The MCP read of a project file.
pub(crate) const MCP_READ_FILE: &str = "MCP acdm_read_nextcloud_file (4 KiB)";
/// The scenarios the targets name: each runs a second time, as the floor
/// does, so its figures are read the way the floor's are (the mean req/s
/// and the lower p99 of two runs).
pub(crate) const TARGETS: [&str; 2] = [NC_READ, MCP_READ_FILE];

/// The name of a target scenario's second run.
pub(crate) fn again(name: &str) -> String {
    format!("{name}, again")
}

/// The WebDAV path of the 4 KiB report.
fn report_path() -> String {
    format!("/remote.php/dav/files/{DAV_USER}/Projects/{PROJECT}/{REPORT}")
}

fn get(path: String, expect: &str) -> (String, Request, Judge) {
    (
        path,
        Request {
            method: "GET",
            headers: Vec::new(),
            body: None,
        },
        Judge {
            expect: expect.to_owned(),
            refuse: None,
        },
    )
}

fn bff(token: &str, op: &str, body: serde_json::Value, expect: &str) -> (String, Request, Judge) {
    let headers = [
        ("Content-Type", "application/json"),
        ("X-ACDM-Service-Auth", token),
        ("X-ACDM-User-Id", MEMBER),
        ("X-ACDM-Agent-Name", AGENT),
        ("X-ACDM-Thread-Id", "bench-http"),
    ];
    (
        format!("/agent-tools/nc/{op}"),
        Request {
            method: "POST",
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            body: Some(body.to_string()),
        },
        Judge {
            expect: expect.to_owned(),
            refuse: Some("\"success\":false".to_owned()),
        },
    )
}

fn tool(
    token: &str,
    name: &str,
    arguments: serde_json::Value,
    expect: &str,
) -> (String, Request, Judge) {
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": { "name": name, "arguments": arguments },
    });
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("X-ACDM-Service-Auth", token),
    ];
    (
        "/mcp".to_owned(),
        Request {
            method: "POST",
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            body: Some(body.to_string()),
        },
        Judge {
            expect: expect.to_owned(),
            refuse: Some("\"isError\":true".to_owned()),
        },
    )
}

/// Every scenario, for a service whose token is `token` (the order they
/// run in is the harness's: the floor and the [`TARGETS`] run twice).
pub(crate) fn scenarios(token: &str) -> Vec<Scenario> {
    let report = report_path();
    let nextcloud_report = format!("/Projects/{PROJECT}/{REPORT}");
    let rows = [
        (FLOOR, Target::Floor, get(report.clone(), REPORT_END)),
        (DIRECT, Target::Upstream, get(report, REPORT_END)),
        (
            "service GET /healthz",
            Target::Service,
            get("/healthz".to_owned(), "\"ok\""),
        ),
        (
            NC_READ,
            Target::Service,
            bff(token, "read", json!({ "rel_path": REPORT }), REPORT_END),
        ),
        (
            "BFF nc/list (21 entries)",
            Target::Service,
            bff(
                token,
                "list",
                json!({ "rel_path": LISTED }),
                "\"note-19.md\"",
            ),
        ),
        (
            "MCP acdm_search_wiki",
            Target::Service,
            tool(
                token,
                "acdm_search_wiki",
                json!({ "query": "weekly report", "limit": 10 }),
                WIKI_FILE,
            ),
        ),
        (
            "MCP acdm_read_wiki_file",
            Target::Service,
            tool(
                token,
                "acdm_read_wiki_file",
                json!({ "path": WIKI_FILE }),
                WIKI_PHRASE,
            ),
        ),
        (
            "MCP acdm_search_nextcloud",
            Target::Service,
            tool(
                token,
                "acdm_search_nextcloud",
                json!({ "project_name": PROJECT, "query": "note", "limit": 10 }),
                &format!("/Projects/{PROJECT}/{LISTED}/note-09.md"),
            ),
        ),
        (
            MCP_READ_FILE,
            Target::Service,
            tool(
                token,
                "acdm_read_nextcloud_file",
                json!({ "project_name": PROJECT, "path": nextcloud_report }),
                REPORT_END,
            ),
        ),
    ];
    rows.into_iter()
        .map(|(name, target, (path, request, judge))| Scenario {
            name,
            target,
            path,
            request,
            judge,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_is_named_once_and_the_floor_comes_first() {
        let all = scenarios("tok");
        assert_eq!(all[0].name, FLOOR);
        assert_eq!(all[0].target, Target::Floor);
        let mut names: Vec<&str> = all.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
        for name in [DIRECT, NC_READ, MCP_READ_FILE] {
            assert!(all.iter().any(|s| s.name == name), "{name}");
        }
        // The floor and the upstream read the same file as the service.
        assert_eq!(all[0].path, all[1].path);
        assert!(all[0].path.ends_with("/Projects/Alpha/docs/report.md"));
    }

    #[test]
    fn calls_to_the_service_carry_its_token_and_the_bff_identity() {
        for scenario in scenarios("tok") {
            let headers: Vec<(&str, &str)> = scenario
                .request
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            if scenario.path.starts_with("/agent-tools/") || scenario.path == "/mcp" {
                assert!(
                    headers.contains(&("X-ACDM-Service-Auth", "tok")),
                    "{}",
                    scenario.name
                );
                assert!(scenario.judge.refuse.is_some(), "{}", scenario.name);
            }
            if scenario.path.starts_with("/agent-tools/") {
                assert!(headers.contains(&("X-ACDM-Agent-Name", AGENT)));
                assert!(headers.contains(&("X-ACDM-User-Id", MEMBER)));
                assert!(headers.iter().any(|(k, _)| *k == "X-ACDM-Thread-Id"));
            }
            if scenario.path == "/mcp" {
                let body: serde_json::Value =
                    serde_json::from_str(scenario.request.body.as_deref().unwrap()).unwrap();
                assert_eq!(body["method"], "tools/call");
                assert!(headers.contains(&("Accept", "application/json, text/event-stream")));
            }
        }
    }
}
