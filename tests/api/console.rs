//! The operator console over HTTP, without a browser: what must hold
//! whoever the client is (the browser suite in `tests/console` drives the
//! pages themselves).

use crate::helpers::{ADMIN_TOKEN, Options, Req, spawn_app};

/// Signs in on `app` and returns the `Cookie` header value.
async fn sign_in(app: &crate::helpers::TestApp) -> (String, String) {
    let body = format!("token={ADMIN_TOKEN}&user=u-ops");
    let response = app
        .send(
            Req::new("POST", "/console/sign-in")
                .headers(&[("Content-Type", "application/x-www-form-urlencoded")])
                .json(&body),
        )
        .await;
    assert_eq!(response.status, 303, "{}", response.body);
    let set_cookie = response
        .header("set-cookie")
        .expect("a session cookie")
        .to_owned();
    let pair = set_cookie.split(';').next().unwrap().to_owned();
    (pair, set_cookie)
}

#[tokio::test]
async fn a_session_made_on_one_replica_opens_the_console_on_another() {
    let first = spawn_app(Options::default()).await;
    let second = spawn_app(Options {
        data_dir: Some(first.data_dir.clone()),
        ..Options::default()
    })
    .await;
    let (cookie, set_cookie) = sign_in(&first).await;
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(set_cookie.contains(flag), "{flag}: {set_cookie}");
    }
    assert!(
        !set_cookie.contains("Secure"),
        "no TLS configured: {set_cookie}"
    );
    let page = second
        .send(Req::get("/console/projects").headers(&[("Cookie", &cookie)]))
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Reset the scope cache"));
    // A cookie altered by one character opens nothing.
    let mut forged = cookie.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    let refused = second
        .send(Req::get("/console/projects").headers(&[("Cookie", &forged)]))
        .await;
    assert_eq!(refused.status, 303);
    assert_eq!(refused.header("location"), Some("/console/sign-in"));
    second.stop().await;
    first.stop().await;
}

#[tokio::test]
async fn every_console_answer_carries_the_strict_page_policy() {
    let app = spawn_app(Options::default()).await;
    let (cookie, _) = sign_in(&app).await;
    for path in [
        "/console/sign-in",
        "/console/projects",
        "/console/events",
        "/console/kill-switch",
        "/console/projects/nope",
        "/api-docs",
    ] {
        let response = app
            .send(Req::get(path).headers(&[("Cookie", &cookie)]))
            .await;
        let csp = response
            .header("content-security-policy")
            .unwrap_or_default();
        assert!(
            csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
            "{path}: {csp}"
        );
        assert!(
            !csp.contains("script-src"),
            "no script is ever allowed: {csp}"
        );
        assert_eq!(response.header("x-frame-options"), Some("DENY"), "{path}");
        assert!(!response.body.contains("<script"), "{path}");
        assert!(
            !response.body.contains("http://") || path == "/api-docs",
            "{path}: nothing from another host"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn behind_tls_the_session_cookie_is_secure() {
    let app = spawn_app(Options {
        extra_env: vec![("ACDM_CONSOLE_SECURE_COOKIE", "true".to_owned())],
        ..Options::default()
    })
    .await;
    let (_, set_cookie) = sign_in(&app).await;
    assert!(set_cookie.contains("; Secure"), "{set_cookie}");
    app.stop().await;
}

#[tokio::test]
async fn a_wrong_token_does_not_sign_in_and_without_an_admin_token_there_is_no_console() {
    let app = spawn_app(Options::default()).await;
    let refused = app
        .send(
            Req::new("POST", "/console/sign-in")
                .headers(&[("Content-Type", "application/x-www-form-urlencoded")])
                .json("token=svc-0123456789abcdef0123456789abcdef&user=u-ops"),
        )
        .await;
    assert_eq!(refused.status, 401);
    assert!(refused.header("set-cookie").is_none());
    app.stop().await;
    let without = spawn_app(Options {
        admin_token: None,
        ..Options::default()
    })
    .await;
    let response = without.send(Req::get("/console/sign-in")).await;
    assert_eq!(response.status, 404);
    without.stop().await;
}
