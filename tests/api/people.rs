//! People's own MCP clients: `/mcp` as an OAuth 2.1 resource server, over
//! real sockets, with a local identity provider made by the test (RSA and
//! EC keys, its JWKS served over HTTP). A person's token opens `/mcp`
//! only, reads only the projects the person is a member of (another
//! project's answer is word for word a missing project's), loses a project
//! with the membership, and never reaches `/agent-tools` or `/admin`; the
//! service token works as before. (Every path form of the traversal
//! corpus, as a person's call, is in acdm-mcp's scope suite.)

use acdm_test_support::issuer::{INTROSPECTION_CLIENT, SigningKey, TestIssuer};
use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, Options, TOKEN, TestApp, spawn_app};

const PUBLIC: &str = "https://acdm.test";
const RESOURCE: &str = "https://acdm.test/mcp";

struct People {
    app: TestApp,
    issuer: TestIssuer,
    rsa: SigningKey,
    ec: SigningKey,
    http: reqwest::Client,
}

/// Alpha (alice a viewer, bob an owner), Beta (bob only), each with a
/// file saying whose it is.
async fn people() -> People {
    people_with(|_| Vec::new()).await
}

/// [`people`] with more settings, made from the issuer.
async fn people_with(more: impl FnOnce(&TestIssuer) -> Vec<(&'static str, String)>) -> People {
    let (rsa, ec) = (SigningKey::rsa("rsa-1"), SigningKey::ec("ec-1"));
    let issuer = TestIssuer::start(&[&rsa, &ec]).await;
    let mut extra_env = vec![
        ("ACDM_OIDC_ISSUER", issuer.issuer.clone()),
        ("ACDM_PUBLIC_URL", PUBLIC.to_owned()),
    ];
    extra_env.extend(more(&issuer));
    let app = spawn_app(Options {
        extra_env,
        ..Options::default()
    })
    .await;
    let this = People {
        app,
        issuer,
        rsa,
        ec,
        http: crate::dav::test_client(),
    };
    for (slug, name) in [("alpha", "Alpha"), ("beta", "Beta")] {
        this.admin(
            "POST",
            "/admin/projects",
            json!({"slug": slug, "name": name}),
        )
        .await;
        let folder = this.app.data_dir.join(format!("files/Projects/{name}"));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join("plan.md"),
            format!("# {name} plan\nbudget of {name}: secret-{slug}\n"),
        )
        .unwrap();
    }
    for (project, user, role) in [
        ("alpha", "u-alice", "viewer"),
        ("alpha", "u-bob", "owner"),
        ("beta", "u-bob", "member"),
    ] {
        this.admin(
            "POST",
            &format!("/admin/projects/{project}/members"),
            json!({"user_id": user, "role": role}),
        )
        .await;
    }
    this
}

impl People {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.app.addr)
    }

    async fn admin(&self, method: &str, path: &str, body: Value) -> Value {
        let response = self
            .http
            .request(method.parse().unwrap(), self.url(path))
            .bearer_auth(ADMIN_TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{method} {path}");
        response.json().await.unwrap()
    }

    /// A valid token of `user` signed with the RSA key.
    fn token(&self, user: &str) -> String {
        self.rsa.sign(&self.issuer.claims(user, RESOURCE))
    }

    /// A JSON-RPC request to `/mcp` with `auth` as the Authorization
    /// header (none when `None`); the status, the challenge and the body.
    async fn mcp(
        &self,
        auth: Option<&str>,
        method: &str,
        params: Value,
    ) -> (u16, Option<String>, Value) {
        let mut request = self
            .http
            .post(self.url("/mcp"))
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-06-18")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
        if let Some(auth) = auth {
            request = request.header("Authorization", auth);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, challenge, body)
    }

    /// A tool call as `user`; its structured result.
    async fn call(&self, user: &str, tool: &str, arguments: Value) -> Value {
        let bearer = format!("Bearer {}", self.token(user));
        let (status, _, body) = self
            .mcp(
                Some(&bearer),
                "tools/call",
                json!({"name": tool, "arguments": arguments}),
            )
            .await;
        assert_eq!(status, 200, "{tool} {arguments}: {body}");
        body["result"].clone()
    }
}

#[tokio::test]
async fn the_metadata_and_the_challenge_follow_rfc_9728() {
    let p = people().await;
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let response = p.http.get(p.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        let metadata: Value = response.json().await.unwrap();
        // §2: `resource` is the resource identifier; §3.3: it must be the
        // one the metadata was asked for.
        assert_eq!(metadata["resource"], RESOURCE, "{path}: {metadata}");
        assert_eq!(
            metadata["authorization_servers"],
            json!([p.issuer.issuer]),
            "{metadata}"
        );
        assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    }

    // No token: 401 and where the metadata is (§5.1), no error code.
    let (status, challenge, body) = p.mcp(None, "tools/list", json!({})).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(
        challenge.as_deref(),
        Some(
            "Bearer resource_metadata=\"https://acdm.test/.well-known/oauth-protected-resource/mcp\""
        )
    );
    assert!(!body.to_string().contains("secret"), "{body}");

    // A bad token: 401 invalid_token with the reason, the metadata again.
    let claims = p.issuer.claims("u-alice", RESOURCE);
    let mut expired = claims.clone();
    expired["exp"] = json!(acdm_test_support::issuer::now() - 3600);
    let mut other_audience = claims.clone();
    other_audience["aud"] = json!("https://elsewhere.test/mcp");
    let mut other_issuer = claims.clone();
    other_issuer["iss"] = json!("http://127.0.0.1:1/realms/other");
    let stranger = SigningKey::rsa("rsa-1");
    let cases = [
        ("expired", p.rsa.sign(&expired), "expired"),
        ("another audience", p.ec.sign(&other_audience), "aud"),
        ("another issuer", p.rsa.sign(&other_issuer), "iss"),
        ("another key", stranger.sign(&claims), "signature"),
        ("not a JWT", "opaque-token".to_owned(), "not a signed JWT"),
    ];
    for (what, token, says) in cases {
        let (status, challenge, body) = p
            .mcp(Some(&format!("Bearer {token}")), "tools/list", json!({}))
            .await;
        assert_eq!(status, 401, "{what}: {body}");
        let challenge = challenge.unwrap();
        assert!(
            challenge.starts_with("Bearer resource_metadata=\"https://acdm.test/.well-known/oauth-protected-resource/mcp\", error=\"invalid_token\", error_description=\"")
                && challenge.contains(says),
            "{what}: {challenge}"
        );
        assert_eq!(body["error"], "invalid_token", "{what}");
        assert!(!challenge.contains(&token) && !body.to_string().contains(&token));
    }
    // A wrong service token is refused, even beside a valid person's token.
    let response = p
        .http
        .post(p.url("/mcp"))
        .header("X-ACDM-Service-Auth", "wrong-token-0123456789abcdef0123")
        .header("Authorization", format!("Bearer {}", p.token("u-alice")))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    // The health probe stays open.
    let health = p.http.get(p.url("/mcp/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    p.app.stop().await;
}

#[tokio::test]
async fn a_persons_token_reads_their_projects_only_and_another_is_as_if_missing() {
    let p = people().await;

    // Both keys' tokens work; the person sees the list tool.
    let bearer = format!(
        "Bearer {}",
        p.ec.sign(&p.issuer.claims("u-alice", RESOURCE))
    );
    let (status, _, listed) = p.mcp(Some(&bearer), "tools/list", json!({})).await;
    assert_eq!(status, 200, "{listed}");
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"acdm_list_projects"), "{names:?}");

    let mine = p.call("u-alice", "acdm_list_projects", json!({})).await;
    assert_eq!(
        mine["structuredContent"]["projects"],
        json!([{"project_name": "Alpha", "slug": "alpha", "role": "viewer", "folder": "/Projects/Alpha/"}]),
        "{mine}"
    );
    let read = p
        .call(
            "u-alice",
            "acdm_read_nextcloud_file",
            json!({"project_name": "Alpha", "path": "/Projects/Alpha/plan.md"}),
        )
        .await;
    assert!(
        read["structuredContent"]["content"]
            .as_str()
            .unwrap()
            .contains("secret-alpha"),
        "{read}"
    );
    let found = p
        .call(
            "u-alice",
            "acdm_search_nextcloud",
            json!({"project_name": "Alpha", "query": "budget"}),
        )
        .await;
    assert_eq!(
        found["structuredContent"]["hits"][0]["path"],
        "/Projects/Alpha/plan.md"
    );
    // The wiki is for every authenticated person.
    let wiki = p
        .call("u-alice", "acdm_search_wiki", json!({"query": "anything"}))
        .await;
    assert_eq!(wiki["isError"], false, "{wiki}");

    // Beta exists but is not hers: word for word a project that does not
    // exist, by every tool, in every spelling.
    fn read_form(name: &str) -> Value {
        json!({"project_name": name, "path": format!("/Projects/{name}/plan.md")})
    }
    fn search_form(name: &str) -> Value {
        json!({"project_name": name, "query": "budget"})
    }
    type Form = fn(&str) -> Value;
    let forms: [(&str, Form); 2] = [
        ("acdm_read_nextcloud_file", read_form),
        ("acdm_search_nextcloud", search_form),
    ];
    for (tool, arguments) in forms {
        for (theirs, missing) in [("Beta", "Gamma"), ("BETA", "GAMMA"), ("beta", "gamma")] {
            let refused = p.call("u-alice", tool, arguments(theirs)).await;
            let absent = p.call("u-alice", tool, arguments(missing)).await;
            assert_eq!(refused["isError"], true, "{tool} {theirs}: {refused}");
            assert_eq!(
                refused["structuredContent"]["code"], "not_found",
                "{refused}"
            );
            let text = refused.to_string();
            assert!(!text.contains("secret-beta"), "{text}");
            assert_eq!(
                text.replace(theirs, "NAME"),
                absent.to_string().replace(missing, "NAME"),
                "{tool}: another project's answer differs from a missing one's"
            );
        }
    }
    // Her own project spelt in another case: the hint names it.
    let hinted = p
        .call(
            "u-alice",
            "acdm_search_nextcloud",
            json!({"project_name": "alpha", "query": "budget"}),
        )
        .await;
    assert!(
        hinted["structuredContent"]["suggested_action"]
            .as_str()
            .unwrap()
            .contains("\"Alpha\""),
        "{hinted}"
    );
    // The same through rmcp's own handler (a call with `_meta`, which the
    // direct path leaves to rmcp): the person travels with the request.
    let bearer = format!("Bearer {}", p.token("u-alice"));
    for (name, secret, code) in [
        ("Alpha", "secret-alpha", None),
        ("Beta", "secret-beta", Some("not_found")),
    ] {
        let (status, _, body) = p
            .mcp(
                Some(&bearer),
                "tools/call",
                json!({
                    "name": "acdm_read_nextcloud_file",
                    "arguments": {"project_name": name, "path": format!("/Projects/{name}/plan.md")},
                    "_meta": {"progressToken": "p-1"},
                }),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let text = body.to_string();
        match code {
            None => assert!(text.contains(secret), "{text}"),
            Some(code) => {
                assert!(!text.contains(secret), "{text}");
                assert_eq!(body["result"]["structuredContent"]["code"], code, "{text}");
            }
        }
    }

    // Bob reads Beta.
    let bobs = p
        .call(
            "u-bob",
            "acdm_read_nextcloud_file",
            json!({"project_name": "Beta", "path": "/Projects/Beta/plan.md"}),
        )
        .await;
    assert_eq!(bobs["isError"], false, "{bobs}");

    // Removed from Beta: the next call is refused, no restart, no wait.
    p.admin("DELETE", "/admin/projects/beta/members/u-bob", json!({}))
        .await;
    let gone = p
        .call(
            "u-bob",
            "acdm_read_nextcloud_file",
            json!({"project_name": "Beta", "path": "/Projects/Beta/plan.md"}),
        )
        .await;
    assert_eq!(gone["structuredContent"]["code"], "not_found", "{gone}");
    p.app.stop().await;
}

#[tokio::test]
async fn a_persons_token_opens_neither_the_agent_tools_nor_the_operator_api_and_the_service_token_works_as_before()
 {
    let p = people().await;
    let token = p.token("u-bob");
    for path in ["/agent-tools/nc/list", "/admin/projects"] {
        let method = if path.starts_with("/admin") {
            "GET"
        } else {
            "POST"
        };
        let response = p
            .http
            .request(method.parse().unwrap(), p.url(path))
            .bearer_auth(&token)
            .header("X-ACDM-User-Id", "u-bob")
            .header("X-ACDM-Agent-Name", "project-alpha")
            .header("X-ACDM-Thread-Id", "t-1")
            .json(&json!({"rel_path": ""}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{path}");
    }
    // The engine's service token: every project by name, as before.
    let response = p
        .http
        .post(p.url("/mcp"))
        .header("X-ACDM-Service-Auth", TOKEN)
        .header("Accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "acdm_read_nextcloud_file",
                "arguments": {"project_name": "Beta", "path": "/Projects/Beta/plan.md"},
            }}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert!(body.to_string().contains("secret-beta"), "{body}");
    // ...and no list of "my" projects for it.
    let response = p
        .http
        .post(p.url("/mcp"))
        .header("X-ACDM-Service-Auth", TOKEN)
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["result"]["tools"].as_array().unwrap().len(),
        4,
        "{body}"
    );
    p.app.stop().await;
}

#[tokio::test]
async fn an_opaque_token_is_checked_at_the_issuers_introspection_endpoint() {
    let p = people_with(|issuer| {
        vec![
            ("ACDM_OIDC_INTROSPECTION_URL", issuer.introspection_url()),
            ("ACDM_OIDC_CLIENT_ID", INTROSPECTION_CLIENT.0.to_owned()),
            ("ACDM_OIDC_CLIENT_SECRET", INTROSPECTION_CLIENT.1.to_owned()),
        ]
    })
    .await;
    let opaque = p.issuer.issue_opaque(&p.issuer.claims("u-alice", RESOURCE));
    let bearer = format!("Bearer {opaque}");
    let call = |project: &str| json!({"name": "acdm_read_nextcloud_file", "arguments": {"project_name": project, "path": format!("/Projects/{project}/plan.md")}});
    let (status, _, mine) = p.mcp(Some(&bearer), "tools/call", call("Alpha")).await;
    assert_eq!(status, 200, "{mine}");
    assert!(mine.to_string().contains("secret-alpha"), "{mine}");
    let (_, _, theirs) = p.mcp(Some(&bearer), "tools/call", call("Beta")).await;
    assert_eq!(theirs["result"]["structuredContent"]["code"], "not_found");
    assert_eq!(p.issuer.introspections(), 1, "one request for both calls");
    // A token the issuer does not know: 401 with the reason.
    let (status, challenge, body) = p
        .mcp(Some("Bearer made-up-opaque-token"), "tools/list", json!({}))
        .await;
    assert_eq!(status, 401, "{body}");
    let challenge = challenge.unwrap();
    assert!(
        challenge.contains("error=\"invalid_token\"") && challenge.contains("not active"),
        "{challenge}"
    );
    assert!(!body.to_string().contains("made-up-opaque-token"), "{body}");
    p.app.stop().await;
}

#[tokio::test]
async fn with_sessions_on_a_session_serves_only_the_one_who_opened_it() {
    let p = people_with(|_| vec![("ACDM_MCP_SESSIONS", "true".to_owned())]).await;
    let post = |auth: (&'static str, String), session: Option<&str>, body: Value| {
        let mut request = p
            .http
            .post(p.url("/mcp"))
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-06-18")
            .header(auth.0, auth.1)
            .json(&body);
        if let Some(session) = session {
            request = request.header("Mcp-Session-Id", session);
        }
        request.send()
    };
    let alice = ("Authorization", format!("Bearer {}", p.token("u-alice")));
    let bob = ("Authorization", format!("Bearer {}", p.token("u-bob")));
    let service = ("X-ACDM-Service-Auth", TOKEN.to_owned());
    let opened = post(
        alice.clone(),
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
    )
    .await
    .unwrap();
    assert_eq!(opened.status(), 200);
    let session = opened
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = post(
        alice.clone(),
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await
    .unwrap();
    assert!(
        initialized.status().is_success(),
        "{}",
        initialized.status()
    );
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let hers = post(alice.clone(), Some(&session), list.clone())
        .await
        .unwrap();
    assert_eq!(hers.status(), 200);
    assert!(hers.text().await.unwrap().contains("acdm_list_projects"));
    // Her session id in anyone else's hands: a session that does not exist.
    for other in [bob.clone(), service.clone()] {
        let refused = post(other.clone(), Some(&session), list.clone())
            .await
            .unwrap();
        assert_eq!(refused.status(), 404, "{}", other.0);
        let stream = p
            .http
            .get(p.url("/mcp"))
            .header("Accept", "text/event-stream")
            .header(other.0, other.1.clone())
            .header("Mcp-Session-Id", &session)
            .send()
            .await
            .unwrap();
        assert_eq!(stream.status(), 404, "{}: the session's stream", other.0);
    }
    // Nor can anyone else close it: it still serves her.
    let closing = p
        .http
        .delete(p.url("/mcp"))
        .header(bob.0, bob.1.clone())
        .header("Mcp-Session-Id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(closing.status(), 404);
    let still = post(alice.clone(), Some(&session), list.clone())
        .await
        .unwrap();
    assert_eq!(still.status(), 200);
    // Closed by her, it is gone for her too.
    let closed = p
        .http
        .delete(p.url("/mcp"))
        .header(alice.0, alice.1.clone())
        .header("Mcp-Session-Id", &session)
        .send()
        .await
        .unwrap();
    assert!(closed.status().is_success(), "{}", closed.status());
    let after = post(alice, Some(&session), list).await.unwrap();
    assert_eq!(after.status(), 404);
    p.app.stop().await;
}

/// A JSON-RPC answer with the given names put back as `NAME`, to compare
/// another project's answer with a missing one's word for word.
fn named(answer: &Value, name: &str) -> String {
    answer.to_string().replace(name, "NAME")
}

#[tokio::test]
async fn a_persons_resources_and_prompts_serve_their_projects_only() {
    let p = people().await;
    // A meeting tomorrow in Alpha, written as the engine writes it, and
    // a report waiting for approval.
    p.admin(
        "POST",
        "/admin/agents",
        json!({"agent_name": "agent-alpha", "project": "alpha"}),
    )
    .await;
    let tomorrow = (chrono::Utc::now() + chrono::TimeDelta::days(1))
        .date_naive()
        .and_hms_opt(9, 0, 0)
        .unwrap()
        .and_utc();
    let response = p
        .http
        .post(p.url("/agent-tools/business/create_meeting"))
        .header("X-ACDM-Service-Auth", TOKEN)
        .header("X-ACDM-User-Id", "u-bob")
        .header("X-ACDM-Agent-Name", "agent-alpha")
        .header("X-ACDM-Thread-Id", "t-1")
        .json(&json!({
            "title": "Design review",
            "starts_at": tomorrow.to_rfc3339(),
            "ends_at": (tomorrow + chrono::TimeDelta::hours(1)).to_rfc3339(),
            "location": "Room 4",
            "attendees": ["u-bob", "u-alice"],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    crate::business::seed_report_in(
        &p.app,
        "alpha",
        "Week 47",
        acdm_core::business::ReportStatus::Submitted,
    )
    .await;
    let alice = format!("Bearer {}", p.token("u-alice"));
    let rpc = |method: &'static str, params: Value| {
        let alice = alice.clone();
        let p = &p;
        async move {
            let (status, _, body) = p.mcp(Some(&alice), method, params).await;
            assert_eq!(status, 200, "{method}: {body}");
            body
        }
    };

    // The list: her project's overview first, then the wiki; Beta's
    // overview nowhere.
    let listed = rpc("resources/list", json!({})).await;
    let uris: Vec<&str> = listed["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris.first(), Some(&"project://alpha/overview"), "{listed}");
    assert!(!listed.to_string().contains("beta"), "{listed}");

    // Her overview, as the agent tools' overview says it, as she sees it.
    let read = rpc("resources/read", json!({"uri": "project://alpha/overview"})).await;
    let contents = &read["result"]["contents"][0];
    assert_eq!(contents["mimeType"], "application/json", "{read}");
    let overview: Value = serde_json::from_str(contents["text"].as_str().unwrap()).unwrap();
    let data = &overview["data"];
    assert_eq!(data["meta"]["name"], "Alpha", "{overview}");
    assert_eq!(data["acting_role"], "viewer");
    assert_eq!(data["upcoming_meetings"][0]["title"], "Design review");
    assert_eq!(data["reports"]["awaiting_approval"][0]["title"], "Week 47");
    assert!(
        overview["message"]
            .as_str()
            .unwrap()
            .contains("1 report(s) waiting for approval"),
        "{overview}"
    );
    // Her project's file, as a resource.
    let plan = rpc(
        "resources/read",
        json!({"uri": "nextcloud://Alpha/plan.md"}),
    )
    .await;
    assert!(
        plan["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("secret-alpha"),
        "{plan}"
    );

    // Another project, by every resource and prompt: word for word a
    // project that does not exist, and nothing of it.
    let prompt =
        |name: &str, project: &str| json!({"name": name, "arguments": {"project_name": project}});
    let cases: [(&str, Value, Value, &str, &str); 5] = [
        (
            "resources/read",
            json!({"uri": "project://beta/overview"}),
            json!({"uri": "project://gamma/overview"}),
            "beta",
            "gamma",
        ),
        (
            "resources/read",
            json!({"uri": "nextcloud://Beta/plan.md"}),
            json!({"uri": "nextcloud://Gamma/plan.md"}),
            "Beta",
            "Gamma",
        ),
        (
            "prompts/get",
            prompt("prepare_meeting", "Beta"),
            prompt("prepare_meeting", "Gamma"),
            "Beta",
            "Gamma",
        ),
        (
            "prompts/get",
            prompt("review_reports", "Beta"),
            prompt("review_reports", "Gamma"),
            "Beta",
            "Gamma",
        ),
        (
            "prompts/get",
            json!({"name": "summarise_file", "arguments": {"project_name": "Beta", "path": "plan.md"}}),
            json!({"name": "summarise_file", "arguments": {"project_name": "Gamma", "path": "plan.md"}}),
            "Beta",
            "Gamma",
        ),
    ];
    for (method, theirs, missing, their_name, missing_name) in cases {
        let refused = rpc(method, theirs.clone()).await;
        let absent = rpc(method, missing).await;
        assert_eq!(
            refused["error"]["data"]["code"], "not_found",
            "{theirs}: {refused}"
        );
        assert!(!refused.to_string().contains("secret-beta"), "{refused}");
        assert_eq!(
            named(&refused, their_name),
            named(&absent, missing_name),
            "{method} {theirs}: another project's answer differs from a missing one's"
        );
    }

    // The prompts she is offered, each embedding what it is about.
    let prompts = rpc("prompts/list", json!({})).await;
    let names: Vec<&str> = prompts["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["prepare_meeting", "review_reports", "summarise_file"]
    );
    let prepared = rpc("prompts/get", prompt("prepare_meeting", "Alpha")).await;
    let messages = prepared["result"]["messages"].as_array().unwrap();
    assert!(
        messages[0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("\"Design review\""),
        "{prepared}"
    );
    assert_eq!(
        messages[1]["content"]["resource"]["uri"],
        "project://alpha/overview"
    );
    assert!(
        messages[1]["content"]["resource"]["text"]
            .as_str()
            .unwrap()
            .contains("Design review")
    );
    let none = rpc(
        "prompts/get",
        json!({"name": "prepare_meeting", "arguments": {"project_name": "Alpha", "meeting": "retrospective"}}),
    )
    .await;
    assert!(
        none["result"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("No such meeting starts in the next 14 days"),
        "{none}"
    );
    let reviewed = rpc("prompts/get", prompt("review_reports", "Alpha")).await;
    assert!(
        reviewed["result"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("\"Week 47\" (weekly"),
        "{reviewed}"
    );

    // Removed from Alpha: its overview goes with the membership.
    p.admin("DELETE", "/admin/projects/alpha/members/u-alice", json!({}))
        .await;
    let gone = rpc("resources/read", json!({"uri": "project://alpha/overview"})).await;
    assert_eq!(gone["error"]["data"]["code"], "not_found", "{gone}");
    p.app.stop().await;
}

/// The official MCP Python SDK (`cargo xtask setup` installs it into
/// `.test-tools/venv`; missing, the test is skipped unless
/// `ACDM_REQUIRE_WEBDAV` says the test tools must be there, as in CI).
#[tokio::test]
async fn a_person_signs_in_with_the_official_python_sdk() {
    let python =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.test-tools/venv/bin/python");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/integration/mcp_people.py");
    if !python.exists() {
        #[expect(
            clippy::disallowed_methods,
            reason = "a test: CI requires the test tools"
        )]
        let required = std::env::var_os("ACDM_REQUIRE_WEBDAV").is_some();
        assert!(
            !required,
            "the MCP Python SDK is not installed; run `cargo xtask setup`"
        );
        return;
    }
    let p = people().await;
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::process::Command::new(&python)
            .arg(&script)
            .arg(p.url("/mcp"))
            .arg(p.token("u-alice"))
            .output(),
    )
    .await
    .expect("the SDK finishes")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(" 0 failed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    p.app.stop().await;
}
