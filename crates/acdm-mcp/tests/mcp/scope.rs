//! No request outside `<base>/<project_name>/`: every payload of the public
//! traversal corpora (`shared/corpus/traversal/`) goes into `path` and into
//! `project_name` of the Nextcloud tools, against a recording upstream. After
//! each call, every request that reached the upstream must be a read and
//! land inside that call's project folder, as the suites' one oracle
//! (`acdm_test_support::traversal`) judges it; a refused name or path must
//! send nothing at all.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use acdm_core::ProjectName;
use acdm_mcp::McpMetrics;
use acdm_sources::nextcloud::{NextcloudConfig, NextcloudFiles, NextcloudSearch};
use acdm_sources::{Sources, http::HttpClient, http::HttpSettings};
use acdm_test_support::traversal::{Scope, payloads};
use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::harness::{Mcp, settings};

/// The Nextcloud user's projects folder, as WebDAV path segments.
const BASE: [&str; 5] = ["remote.php", "dav", "files", "u", "Projects"];

/// The upstream: records every request; answers WebDAV with 404 and the
/// search with hits in several projects (and hostile ones).
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<String>>>);

impl Recorder {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

async fn upstream(recorder: Recorder, request: Request) -> Response {
    let target = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    recorder
        .0
        .lock()
        .unwrap()
        .push(format!("{} {target}", request.method()));
    if request.uri().path().starts_with("/ocs/") {
        let entry = |path: &str| json!({"title": "x", "icon": "", "attributes": {"path": path}});
        let body = json!({"ocs": {"meta": {"status": "ok", "statuscode": 200, "message": "OK"}, "data": {
        "name": "Files", "isPaginated": true, "cursor": null, "entries": [
            entry("/Projects/Alpha/notes/x.md"), entry("/Projects/Beta/secret.md"),
            entry("/Projects/Alpha/../Beta/secret.md"), entry("/Projects/Alpha-evil/x.md"),
            entry("/other/x.md"), entry("../../etc/passwd"),
            entry("/Projects/.acdm-trash/alpha/e/0/x.md"),
        ]}}});
        return axum::Json(body).into_response();
    }
    StatusCode::NOT_FOUND.into_response()
}

struct Check<'a> {
    mcp: &'a Mcp,
    recorder: &'a Recorder,
    requests: usize,
    calls: usize,
    /// The one project the caller may read, for a person's calls.
    member_of: Option<&'static str>,
}

impl Check<'_> {
    /// Calls `tool` as project `project`; checks every upstream request it
    /// caused stays in that project's folder (or that none was sent when
    /// the name is invalid).
    async fn call(&mut self, tool: &str, project: &str, arguments: Value) {
        let result = self.mcp.tool(tool, arguments.clone()).await;
        let failed = result["isError"] == true;
        self.judge(&arguments.to_string(), project, failed);
        if tool == "acdm_search_nextcloud" && !failed {
            let scope = format!("/Projects/{project}/");
            for hit in result["structuredContent"]["hits"].as_array().unwrap() {
                assert!(
                    hit["path"].as_str().unwrap().starts_with(&scope),
                    "{arguments}: {hit}"
                );
            }
        }
    }

    /// Reads the resource `uri`, for the project `project`, as `call`
    /// calls a tool; its content, if it was served.
    async fn read(&mut self, project: &str, uri: &str) {
        let response = self.mcp.rpc("resources/read", json!({"uri": uri})).await;
        let failed = response.get("error").is_some();
        assert!(
            failed || response["result"]["contents"].is_array(),
            "{uri}: {response}"
        );
        self.judge(uri, project, failed);
    }

    /// Asks for the `summarise_file` prompt of `path` in `project`.
    async fn prompt(&mut self, project: &str, path: &str) {
        let arguments = json!({"project_name": project, "path": path});
        let response = self
            .mcp
            .rpc(
                "prompts/get",
                json!({"name": "summarise_file", "arguments": arguments}),
            )
            .await;
        let failed = response.get("error").is_some();
        self.judge(&arguments.to_string(), project, failed);
    }

    /// Checks the upstream requests of the call just made (`what`) for
    /// `project`: none for a name that is not the person's or not valid,
    /// and only reads inside the project's folder otherwise.
    fn judge(&mut self, what: &str, project: &str, failed: bool) {
        self.calls += 1;
        let seen = self.recorder.take();
        if let Some(own) = self.member_of
            && project != own
        {
            // A person naming any other project: refused before anything
            // is sent, whatever the name.
            assert!(
                seen.is_empty(),
                "{what}: a person's call for another project sent {seen:?}"
            );
            assert!(failed, "{what}: another project's call was served");
            return;
        }
        let Ok(name) = ProjectName::parse(project) else {
            assert!(
                seen.is_empty(),
                "{what}: an invalid project name sent {seen:?}"
            );
            assert!(failed, "{what}: an invalid project name was served");
            return;
        };
        // When a search finds nothing or a read misses, the tool looks
        // whether the project folder exists (and lists the base for a name
        // differing only in case): PROPFINDs of the folder and the base.
        let scope = Scope::new(&BASE, name.as_str()).listing_the_base();
        for request in &seen {
            self.requests += 1;
            if request.contains(" /ocs/") {
                continue; // the search request carries no path
            }
            let (method, target) = request.split_once(' ').unwrap();
            assert!(
                matches!(method, "GET" | "HEAD" | "PROPFIND"),
                "{what}: the knowledge tools only read, yet sent {request}"
            );
            let path = target.split(['?', '#']).next().unwrap_or_default();
            if let Err(why) = scope.judge(method, path, None) {
                panic!("{what}: {request}: {why}, not in /Projects/{name}/");
            }
        }
    }
}

/// `value` percent-encoded whole (every byte but unreserved ones), as a
/// URI template fills a `{var}`.
fn encoded(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The MCP router over Nextcloud clients talking to the recording
/// upstream; with `person`, every request is that person's.
async fn recording(person: Option<acdm_mcp::Person>) -> (Mcp, Recorder) {
    let recorder = Recorder::default();
    let app = Router::new().fallback({
        let recorder = recorder.clone();
        move |request: Request| upstream(recorder.clone(), request)
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let config = NextcloudConfig {
        url: url::Url::parse(&format!("http://{addr}/")).unwrap(),
        user: "u".to_owned(),
        app_password: Some(SecretString::from("p")),
    };
    let http = HttpClient::new(HttpSettings {
        retries: 0,
        ..HttpSettings::default()
    })
    .unwrap();
    let files = Arc::new(NextcloudFiles::new(config.clone(), http.clone()).unwrap());
    let sources = Sources {
        wiki: Arc::new(acdm_sources::Unconfigured::new("GITLAB_WIKI_BASE_URL")),
        files,
        search: Arc::new(NextcloudSearch::new(config, http).unwrap()),
    };
    let mut router = acdm_mcp::router(sources, settings(), McpMetrics::unregistered());
    if let Some(person) = person {
        router = router.layer(axum::Extension(person));
    }
    (Mcp::with_router(router), recorder)
}

/// Every payload into `path` and `project_name` of both Nextcloud tools
/// (into `project_name` only with `names_only`).
async fn every_payload(check: &mut Check<'_>, names_only: bool) -> usize {
    let payloads = payloads();
    for p in &payloads {
        if !names_only {
            check
                .call(
                    "acdm_read_nextcloud_file",
                    "Alpha",
                    json!({"project_name": "Alpha", "path": format!("/Projects/Alpha/{p}")}),
                )
                .await;
            check
                .call(
                    "acdm_read_nextcloud_file",
                    "Alpha",
                    json!({"project_name": "Alpha", "path": p}),
                )
                .await;
        }
        check
            .call(
                "acdm_read_nextcloud_file",
                p,
                json!({"project_name": p, "path": format!("/Projects/{p}/x.md")}),
            )
            .await;
        check
            .call(
                "acdm_search_nextcloud",
                p,
                json!({"project_name": p, "query": "x"}),
            )
            .await;
        // The same payloads as resources and as a prompt's arguments: the
        // project part of a URI, its path part encoded as a template fills
        // it, and raw.
        check
            .read(p, &format!("nextcloud://{}/x.md", encoded(p)))
            .await;
        check.prompt(p, &format!("/Projects/{p}/x.md")).await;
        if !names_only {
            check
                .read("Alpha", &format!("nextcloud://Alpha/{}", encoded(p)))
                .await;
            check.read("Alpha", &format!("nextcloud://Alpha/{p}")).await;
            check.prompt("Alpha", p).await;
        }
    }
    // The sibling-prefix attack, explicitly.
    check
        .call(
            "acdm_read_nextcloud_file",
            "Alpha",
            json!({"project_name": "Alpha", "path": "/Projects/Alpha-evil/x.md"}),
        )
        .await;
    payloads.len()
}

#[tokio::test]
async fn no_corpus_payload_reaches_outside_the_project_folder() {
    let (mcp, recorder) = recording(None).await;
    let mut check = Check {
        mcp: &mcp,
        recorder: &recorder,
        requests: 0,
        calls: 0,
        member_of: None,
    };
    let started = Instant::now();
    let payloads = every_payload(&mut check, false).await;
    eprintln!(
        "{payloads} payloads, {} tool calls, {} upstream requests, all inside the project folder ({:.1} s)",
        check.calls,
        check.requests,
        started.elapsed().as_secs_f64()
    );
    assert!(
        check.requests > 0,
        "some payloads are legitimate names and reach the upstream"
    );
}

#[tokio::test]
async fn no_corpus_payload_takes_a_person_outside_their_projects() {
    let person = acdm_mcp::Person {
        user: acdm_core::UserId::parse("u-alice").unwrap(),
        memberships: Arc::from(vec![acdm_mcp::Membership {
            slug: acdm_core::ProjectSlug::parse("alpha").unwrap(),
            name: ProjectName::parse("Alpha").unwrap(),
            role: acdm_core::domain::MemberRole::Viewer,
        }]),
    };
    let (mcp, recorder) = recording(Some(person)).await;
    let mut check = Check {
        mcp: &mcp,
        recorder: &recorder,
        requests: 0,
        calls: 0,
        member_of: Some("Alpha"),
    };
    // Paths inside her own project take the same way as the engine's
    // (the test above); the names are what a person's call adds.
    let payloads = every_payload(&mut check, true).await;
    // Her own project: searched and read, inside its folder only (the
    // upstream's hits of Beta are dropped).
    let found = mcp
        .tool(
            "acdm_search_nextcloud",
            json!({"project_name": "Alpha", "query": "x"}),
        )
        .await;
    let hits = found["structuredContent"]["hits"].as_array().unwrap();
    assert!(!hits.is_empty(), "{found}");
    assert!(
        hits.iter()
            .all(|h| h["path"].as_str().unwrap().starts_with("/Projects/Alpha/")),
        "{found}"
    );
    eprintln!(
        "{payloads} payloads, {} calls as a person of Alpha: none sent a request outside /Projects/Alpha/",
        check.calls
    );
}
