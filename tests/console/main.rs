//! The operator console in a real browser: Debian's chromium, headless,
//! driven through chromedriver (W3C WebDriver, spoken by fantoccini)
//! against the whole service on a loopback port. Each test signs in as a
//! person would, checks what the page shows, and saves a screenshot (PNG)
//! of the page it checked in `target/console-screenshots/` (or
//! `ACDM_SCREENSHOT_DIR`).
//!
//! Without chromium and chromedriver the tests say so and pass, unless
//! `ACDM_REQUIRE_BROWSER=1` (as in CI), where they fail.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "tests fail loudly and report what they measured"
)]

#[expect(
    dead_code,
    reason = "the API suite's helpers, shared: this suite uses some of them"
)]
#[path = "../api/helpers.rs"]
mod helpers;
mod webdriver;

use serde_json::{Value, json};

use helpers::{ADMIN_TOKEN, BEARER, Options, Req, TOKEN, TestApp, spawn_app};
use webdriver::{Browser, Session};

/// A service with two projects, each with its manager agent and owner,
/// and one file in `alpha` written, then changed, by its agent.
struct Env {
    app: TestApp,
    base: String,
}

async fn admin(app: &TestApp, method: &str, path: &str, body: Value) -> Value {
    let text = body.to_string();
    let headers = [("Authorization", BEARER)];
    let response = app
        .send(Req::new(method, path).headers(&headers).json(&text))
        .await;
    assert_eq!(response.status, 200, "{method} {path}: {}", response.body);
    response.json()
}

async fn nc(app: &TestApp, agent: &str, op: &str, body: Value) -> (u16, Value) {
    let text = body.to_string();
    let headers = [
        ("X-ACDM-Service-Auth", TOKEN),
        ("X-ACDM-User-Id", "u-alice"),
        ("X-ACDM-Agent-Name", agent),
        ("X-ACDM-Thread-Id", "t-42"),
    ];
    let path = format!("/agent-tools/nc/{op}");
    let response = app
        .send(Req::new("POST", &path).headers(&headers).json(&text))
        .await;
    (response.status, response.json())
}

async fn env() -> Env {
    let app = spawn_app(Options::default()).await;
    for (slug, name) in [("alpha", "Alpha"), ("beta", "Beta")] {
        admin(
            &app,
            "POST",
            "/admin/projects",
            json!({ "slug": slug, "name": name }),
        )
        .await;
        admin(
            &app,
            "POST",
            &format!("/admin/projects/{slug}/members"),
            json!({ "user_id": "u-alice", "role": "owner" }),
        )
        .await;
        admin(
            &app,
            "POST",
            "/admin/agents",
            json!({ "agent_name": format!("project-{slug}"), "project": slug }),
        )
        .await;
    }
    // The business view's data, as an operator enters it.
    admin(
        &app,
        "PUT",
        "/admin/projects/alpha/milestones/1",
        json!({ "user_id": "u-ops", "title": "Design signed off", "status": "current" }),
    )
    .await;
    admin(
        &app,
        "POST",
        "/admin/projects/alpha/reports",
        json!({ "user_id": "u-ops", "title": "Week 47", "kind": "weekly",
                "period_start": "2026-11-16", "period_end": "2026-11-22", "status": "submitted" }),
    )
    .await;
    let starts = chrono::Utc::now() + chrono::TimeDelta::days(2);
    admin(
        &app,
        "POST",
        "/admin/projects/alpha/meetings",
        json!({ "user_id": "u-ops", "title": "Design review", "location": "Room 4",
                "starts_at": starts.to_rfc3339(),
                "ends_at": (starts + chrono::TimeDelta::hours(1)).to_rfc3339(),
                "attendees": ["u-alice"] }),
    )
    .await;
    let write = |content: &str| json!({ "rel_path": "notes/plan.md", "content": content });
    let (status, _) = nc(
        &app,
        "project-alpha",
        "write",
        write("kickoff on monday\nbudget 10k\n"),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = nc(
        &app,
        "project-alpha",
        "write",
        write("kickoff on monday\nbudget 12k\nrisks reviewed\n"),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = nc(&app, "project-beta", "write", write("beta plan\n")).await;
    assert_eq!(status, 200);
    let base = format!("http://127.0.0.1:{}", app.addr.port());
    Env { app, base }
}

/// The newest event matching `query`, through the operator API.
async fn newest_event(app: &TestApp, query: &str) -> Value {
    let headers = [("Authorization", BEARER)];
    let response = app
        .send(Req::get(&format!("/admin/events?{query}")).headers(&headers))
        .await;
    response.json()["data"]["events"][0].clone()
}

async fn sign_in(browser: &Session, base: &str) {
    browser.goto(&format!("{base}/console")).await;
    assert!(browser.url().await.ends_with("/console/sign-in"));
    browser.type_into("input[name=token]", ADMIN_TOKEN).await;
    browser.type_into("input[name=user]", "u-ops").await;
    browser
        .click("form[action='/console/sign-in'] button")
        .await;
    browser.wait_for("Reset the scope cache").await;
    assert!(browser.url().await.ends_with("/console/projects"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_signs_in_filters_the_audit_trail_and_reads_a_writes_diff() {
    let Some(installed) = Browser::find() else {
        return;
    };
    let env = env().await;
    let browser = Session::start(&installed).await;
    sign_in(&browser, &env.base).await;
    let cookie = browser
        .cookies()
        .await
        .into_iter()
        .find(|c| c.name() == "acdm_console")
        .expect("the session cookie");
    assert_eq!(cookie.http_only(), Some(true));
    assert_eq!(
        cookie.same_site().map(|s| s.to_string()).as_deref(),
        Some("Strict")
    );
    assert_eq!(cookie.path(), Some("/console"));

    browser
        .goto(&format!("{}/console/projects/alpha", env.base))
        .await;
    let text = browser.text().await;
    for shown in [
        "u-alice",
        "owner",
        "project-alpha",
        "Milestones",
        "Reports by status",
    ] {
        assert!(text.contains(shown), "{shown} in {text}");
    }
    browser.screenshot("project").await;

    browser.goto(&format!("{}/console/events", env.base)).await;
    browser
        .type_into("input[name=agent]", "project-alpha")
        .await;
    browser.type_into("input[name=thread]", "t-42").await;
    browser.click("form[action='/console/events'] button").await;
    browser.wait_for("nc_write").await;
    let url = browser.url().await;
    assert!(
        url.contains("agent=project-alpha") && url.contains("thread=t-42"),
        "{url}"
    );
    let text = browser.text().await;
    assert!(text.contains("nc_write"), "{text}");
    assert!(
        !text.contains("beta"),
        "another project's events are filtered out: {text}"
    );
    browser.screenshot("audit-trail-filtered").await;

    // The newest write: its diff against the copy kept when it happened.
    browser
        .click("table tbody tr:first-child td:first-child a")
        .await;
    let text = browser.text().await;
    assert!(text.contains("- budget 10k"), "{text}");
    assert!(text.contains("+ budget 12k"), "{text}");
    assert!(text.contains("+ risks reviewed"), "{text}");
    assert!(text.contains("kickoff on monday"), "{text}");
    browser.screenshot("event-diff").await;
    env.app.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn reverting_a_write_from_the_console_restores_the_file_and_links_both_events() {
    let Some(installed) = Browser::find() else {
        return;
    };
    let env = env().await;
    let write = newest_event(&env.app, "project=alpha&agent=project-alpha").await;
    let id = write["id"].as_str().unwrap().to_owned();
    let browser = Session::start(&installed).await;
    sign_in(&browser, &env.base).await;
    browser
        .goto(&format!("{}/console/projects/alpha/events/{id}", env.base))
        .await;
    browser.click("form[action$='/revert'] button").await;
    // The confirmation says what will happen before anything does.
    let text = browser.wait_for("Yes, do it").await;
    assert!(text.contains("Revert"), "{text}");
    assert!(text.contains("copy") || text.contains("write"), "{text}");
    browser.screenshot("revert-confirmation").await;
    let (_, read) = nc(
        &env.app,
        "project-alpha",
        "read",
        json!({ "rel_path": "notes/plan.md" }),
    )
    .await;
    assert!(
        read["data"]["content"].as_str().unwrap().contains("12k"),
        "nothing changed yet"
    );

    browser.click("form[action$='/revert'] button.danger").await;
    browser.wait_for("Reverted by event").await;
    let (_, read) = nc(
        &env.app,
        "project-alpha",
        "read",
        json!({ "rel_path": "notes/plan.md" }),
    )
    .await;
    assert_eq!(read["data"]["content"], "kickoff on monday\nbudget 10k\n");

    // The revert links to what it reverted, and back.
    browser.click("main a").await;
    browser.wait_for("This event reverts").await;
    browser.click("main p a").await;
    let text = browser.wait_for("Reverted by").await;
    assert!(text.contains("This event was reverted"), "{text}");
    // Its diff still says what the write did, from the revert's trash.
    assert!(text.contains("Reverted since"), "{text}");
    assert!(text.contains("- budget 10k"), "{text}");
    assert!(text.contains("+ budget 12k"), "{text}");
    browser.screenshot("reverted-event").await;
    env.app.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unmounting_an_agent_after_its_confirmation_ends_its_calls_and_mounting_brings_them_back() {
    let Some(installed) = Browser::find() else {
        return;
    };
    let env = env().await;
    let browser = Session::start(&installed).await;
    sign_in(&browser, &env.base).await;
    browser
        .goto(&format!("{}/console/projects/beta", env.base))
        .await;
    browser
        .click("form[action='/console/agents/project-beta/unmount'] button")
        .await;
    let text = browser.wait_for("Yes, do it").await;
    assert!(text.contains("Unmount agent project-beta?"), "{text}");
    browser.screenshot("unmount-confirmation").await;
    let (status, _) = nc(&env.app, "project-beta", "list_mounts", json!({})).await;
    assert_eq!(status, 200, "nothing happens before the confirmation");
    browser.click("button.danger").await;
    browser.wait_for("no longer manages beta").await;
    let (status, refused) = nc(&env.app, "project-beta", "list_mounts", json!({})).await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (403, Some("scope_violation"))
    );

    browser
        .goto(&format!("{}/console/projects/beta", env.base))
        .await;
    browser.type_into("input[name=agent]", "project-beta").await;
    browser
        .click("form[action='/console/projects/beta/agents'] button")
        .await;
    browser.wait_for("Yes, do it").await;
    browser.click("button.danger").await;
    browser.wait_for("now manages beta").await;
    let (status, _) = nc(&env.app, "project-beta", "list_mounts", json!({})).await;
    assert_eq!(status, 200);
    env.app.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn flipping_the_kill_switch_in_the_console_refuses_an_agents_next_write() {
    let Some(installed) = Browser::find() else {
        return;
    };
    let env = env().await;
    let browser = Session::start(&installed).await;
    sign_in(&browser, &env.base).await;
    browser
        .goto(&format!("{}/console/kill-switch", env.base))
        .await;
    assert!(browser.text().await.contains("enabled"));
    browser
        .type_into(
            "input[name=reason]",
            "incident 42: <script>alert(1)</script>",
        )
        .await;
    browser.click("form button.danger").await;
    let text = browser.wait_for("OFF").await;
    assert!(text.contains("u-ops"), "who: {text}");
    assert!(
        text.contains("incident 42: <script>alert(1)</script>"),
        "why, as text: {text}"
    );
    assert!(
        !browser.source().await.contains("<script>alert(1)"),
        "escaped"
    );
    browser.screenshot("kill-switch-off").await;
    let (status, refused) = nc(
        &env.app,
        "project-alpha",
        "write",
        json!({ "rel_path": "notes/after.md", "content": "x" }),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["code"], "kill_switch_off");
    env.app.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_attacks_a_console_invites_are_refused_or_escaped() {
    let Some(installed) = Browser::find() else {
        return;
    };
    let env = env().await;
    // A file name carrying markup, written by an agent.
    let hostile = "notes/<img src=x onerror=alert(1)>.md";
    let (status, body) = nc(
        &env.app,
        "project-alpha",
        "write",
        json!({ "rel_path": hostile, "content": "<script>alert(2)</script>\n" }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let browser = Session::start(&installed).await;

    // No cookie: every page sends to sign-in, and a post is refused.
    browser.goto(&format!("{}/console/events", env.base)).await;
    assert!(browser.url().await.ends_with("/console/sign-in"));
    let refused = env
        .app
        .send(Req::new("POST", "/console/kill-switch").json("{}"))
        .await;
    assert_eq!(refused.status, 401);

    sign_in(&browser, &env.base).await;
    browser
        .goto(&format!("{}/console/events?project=alpha", env.base))
        .await;
    let source = browser.source().await;
    assert!(!source.contains("<img src=x"), "the file name is escaped");
    assert!(
        browser
            .text()
            .await
            .contains("<img src=x onerror=alert(1)>"),
        "and shown"
    );
    browser.screenshot("hostile-file-name-escaped").await;
    let event = newest_event(&env.app, "project=alpha").await;
    browser
        .goto(&format!(
            "{}/console/projects/alpha/events/{}",
            env.base,
            event["id"].as_str().unwrap()
        ))
        .await;
    let source = browser.source().await;
    assert!(!source.contains("<script>alert(2)"), "the diff is escaped");
    assert!(browser.text().await.contains("+ <script>alert(2)</script>"));

    // An event of another project, under this project's URL: not found.
    let beta = newest_event(&env.app, "project=beta").await;
    let beta_id = beta["id"].as_str().unwrap();
    browser
        .goto(&format!(
            "{}/console/projects/alpha/events/{beta_id}",
            env.base
        ))
        .await;
    assert!(
        browser
            .text()
            .await
            .contains("No such event in this project")
    );
    browser.screenshot("other-projects-event-not-found").await;
    let cookie = browser
        .cookies()
        .await
        .into_iter()
        .find(|c| c.name() == "acdm_console")
        .unwrap();
    let cookie = format!("acdm_console={}", cookie.value());
    let forged = env
        .app
        .send(
            Req::new(
                "POST",
                &format!("/console/projects/alpha/events/{beta_id}/revert"),
            )
            .headers(&[
                ("Cookie", &cookie),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ]),
        )
        .await;
    assert_eq!(forged.status, 403, "no CSRF token: {}", forged.body);

    // A forged CSRF token with a real session cookie.
    let forged = send_form(
        &env,
        &cookie,
        "/console/kill-switch",
        "csrf=forged&writes=off&reason=x",
        None,
    )
    .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(forged.body.contains("security token"));
    // The token given twice: the form cannot be read, and the answer says
    // that (400), not that the token was wrong.
    let twice = send_form(
        &env,
        &cookie,
        "/console/kill-switch",
        "csrf=forged&csrf=forged&writes=off&reason=x",
        None,
    )
    .await;
    assert_eq!(twice.status, 400, "{}", twice.body);
    assert!(twice.body.contains("could not be read"), "{}", twice.body);

    // A form on another site posting to the console with the browser's
    // cookie: refused before anything is read.
    let evil = EvilSite::start(&env.base).await;
    browser.goto(&evil.url).await;
    browser.click("button").await;
    browser.wait_for("another site").await;
    browser.screenshot("cross-site-post-refused").await;
    let (status, _) = nc(
        &env.app,
        "project-alpha",
        "write",
        json!({ "rel_path": "notes/still-allowed.md", "content": "x" }),
    )
    .await;
    assert_eq!(status, 200, "the kill switch did not move");
    env.app.stop().await;
}

async fn send_form(
    env: &Env,
    cookie: &str,
    path: &str,
    body: &str,
    origin: Option<&str>,
) -> helpers::Resp {
    let mut headers = vec![("Cookie", cookie)];
    if let Some(origin) = origin {
        headers.push(("Origin", origin));
    }
    // `send` labels a body as JSON; the console reads the fields anyway.
    env.app
        .send(Req::new("POST", path).headers(&headers).json(body))
        .await
}

/// Another origin (another port) serving a page whose form posts to the
/// console: what a malicious site would do.
struct EvilSite {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for EvilSite {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EvilSite {
    async fn start(console: &str) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let page = format!(
            "<!doctype html><html><body><h1>Win a prize</h1>\
             <form method=\"post\" action=\"{console}/console/kill-switch\">\
             <input type=\"hidden\" name=\"writes\" value=\"off\">\
             <input type=\"hidden\" name=\"reason\" value=\"pwned\">\
             <input type=\"hidden\" name=\"csrf\" value=\"guess\">\
             <button type=\"submit\">Claim</button></form></body></html>"
        );
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let mut buffer = [0u8; 4096];
                let _ = stream.read(&mut buffer).await;
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            }
        });
        Self {
            url: format!("http://localhost:{port}/"),
            task,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approver_approves_one_request_and_rejects_another_and_a_cross_site_approve_is_refused()
{
    let Some(installed) = Browser::find() else {
        return;
    };
    let app = spawn_app(Options {
        extra_env: vec![("ACDM_APPROVAL_REQUIRED_OPS", "nc.write".to_owned())],
        ..Options::default()
    })
    .await;
    admin(
        &app,
        "POST",
        "/admin/projects",
        json!({ "slug": "alpha", "name": "Alpha" }),
    )
    .await;
    for (user, role) in [("u-alice", "member"), ("u-ops", "admin")] {
        admin(
            &app,
            "POST",
            "/admin/projects/alpha/members",
            json!({ "user_id": user, "role": role }),
        )
        .await;
    }
    admin(
        &app,
        "POST",
        "/admin/agents",
        json!({ "agent_name": "project-alpha", "project": "alpha" }),
    )
    .await;
    let base = format!("http://127.0.0.1:{}", app.addr.port());
    let env = Env { app, base };
    let mut asked = Vec::new();
    for (file, content) in [
        ("notes/a.md", "the first plan"),
        ("notes/b.md", "<b>second</b>"),
    ] {
        let body = json!({ "rel_path": file, "content": content });
        let (status, answer) = nc(&env.app, "project-alpha", "write", body.clone()).await;
        assert_eq!(
            (status, answer["code"].as_str()),
            (403, Some("approval_required")),
            "{answer}"
        );
        asked.push((
            body,
            answer["data"]["approval_id"].as_str().unwrap().to_owned(),
        ));
    }
    let browser = Session::start(&installed).await;
    sign_in(&browser, &env.base).await;
    browser
        .goto(&format!("{}/console/approvals", env.base))
        .await;
    let text = browser.text().await;
    assert!(
        text.contains("Approvals 2"),
        "the count in the navigation: {text}"
    );
    assert!(
        text.contains("notes/a.md") && text.contains("notes/b.md"),
        "{text}"
    );
    browser.screenshot("approvals-pending").await;

    // Approve the first, with a note, after the confirmation.
    let (first, first_id) = &asked[0];
    browser
        .goto(&format!("{}/console/approvals/{first_id}", env.base))
        .await;
    assert!(
        browser.text().await.contains("the first plan"),
        "the new content is shown"
    );
    browser
        .type_into("input[name=note]", "fine for the kick-off")
        .await;
    browser.click("form[action$='/approve'] button").await;
    browser.wait_for("You decide as").await;
    browser.click("form button.danger").await;
    browser.wait_for("Approved as u-ops").await;
    browser.screenshot("approval-approved").await;

    // Reject the second, with the reason; its markup stays text.
    let (second, second_id) = &asked[1];
    browser
        .goto(&format!("{}/console/approvals/{second_id}", env.base))
        .await;
    assert!(!browser.source().await.contains("<b>second</b>"), "escaped");
    browser
        .type_into("input[name=reason]", "not before the review")
        .await;
    browser.click("form[action$='/reject'] button").await;
    browser.wait_for("You decide as").await;
    browser.click("form button.danger").await;
    browser.wait_for("Rejected as u-ops").await;
    browser
        .goto(&format!("{}/console/approvals", env.base))
        .await;
    assert!(
        !browser.text().await.contains("Approvals 2"),
        "none pending now"
    );

    // The agent's calls: the approved one runs, the rejected one says why.
    let mut approved = first.clone();
    approved["approval_id"] = json!(first_id);
    let (status, done) = nc(&env.app, "project-alpha", "write", approved).await;
    assert_eq!(status, 200, "{done}");
    let mut rejected = second.clone();
    rejected["approval_id"] = json!(second_id);
    let (status, refused) = nc(&env.app, "project-alpha", "write", rejected).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["code"], "approval_rejected");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("not before the review")
    );

    // A cross-site approve, with the browser's own cookie: refused.
    let (third, third_id) = {
        let body = json!({ "rel_path": "notes/c.md", "content": "third" });
        let (_, answer) = nc(&env.app, "project-alpha", "write", body.clone()).await;
        (
            body,
            answer["data"]["approval_id"].as_str().unwrap().to_owned(),
        )
    };
    let cookie = browser
        .cookies()
        .await
        .into_iter()
        .find(|c| c.name() == "acdm_console")
        .unwrap();
    let cookie = format!("acdm_console={}", cookie.value());
    let forged = send_form(
        &env,
        &cookie,
        &format!("/console/approvals/{third_id}/approve"),
        "confirm=yes&note=x",
        Some("http://evil.example"),
    )
    .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    let mut presented = third;
    presented["approval_id"] = json!(third_id);
    let (status, still) = nc(&env.app, "project-alpha", "write", presented).await;
    assert_eq!(
        (status, still["code"].as_str()),
        (403, Some("approval_pending")),
        "{still}"
    );
    env.app.stop().await;
}
