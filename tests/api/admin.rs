//! The operator API: its own token, envelopes everywhere, provisioning that
//! the scope resolver sees at once.

use std::time::Duration;

use acdm_core::AgentName;

use crate::helpers::{ADMIN_TOKEN, BEARER, Options, Req, TOKEN, spawn_app};

pub(crate) fn admin_headers() -> [(&'static str, &'static str); 1] {
    [("Authorization", BEARER)]
}

#[tokio::test]
async fn without_an_admin_token_every_admin_path_is_404() {
    let app = spawn_app(Options {
        admin_token: None,
        ..Options::default()
    })
    .await;
    for (method, path) in [
        ("GET", "/admin/projects"),
        ("POST", "/admin/agents"),
        ("POST", "/admin/scope-cache/reset"),
        ("GET", "/admin"),
    ] {
        let r = app
            .send(Req::new(method, path).headers(&admin_headers()))
            .await;
        assert_eq!(r.status, 404, "{method} {path}");
        assert_eq!(r.json()["code"], "not_found");
    }
    app.stop().await;
}

#[tokio::test]
async fn the_admin_api_refuses_missing_wrong_and_service_tokens() {
    let app = spawn_app(Options::default()).await;
    let service_bearer = format!("Bearer {TOKEN}");
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("no header", vec![]),
        (
            "the service token as bearer",
            vec![("Authorization", &service_bearer)],
        ),
        (
            "the service token header",
            vec![("X-ACDM-Service-Auth", TOKEN)],
        ),
        ("no scheme", vec![("Authorization", ADMIN_TOKEN)]),
        (
            "twice",
            vec![("Authorization", BEARER), ("Authorization", BEARER)],
        ),
    ];
    for (label, headers) in &cases {
        let r = app.send(Req::get("/admin/projects").headers(headers)).await;
        assert_eq!(r.status, 401, "{label}");
        assert_eq!(r.json()["code"], "unauthorized", "{label}");
        assert_eq!(
            r.header("www-authenticate"),
            Some("Bearer realm=\"acdm-admin\"")
        );
    }
    let ok = app
        .send(Req::get("/admin/projects").headers(&admin_headers()))
        .await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.json()["data"], serde_json::json!([]));
    app.stop().await;
}

#[tokio::test]
async fn the_bearer_scheme_name_is_case_insensitive() {
    let app = spawn_app(Options::default()).await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let value = format!("{scheme} {ADMIN_TOKEN}");
        let r = app
            .send(Req::get("/admin/projects").headers(&[("Authorization", &value)]))
            .await;
        assert_eq!(r.status, 200, "{scheme}: {}", r.body);
    }
    app.stop().await;
}

#[tokio::test]
async fn an_admin_refusal_says_what_was_wrong_without_revealing_which_tokens_exist() {
    let app = spawn_app(Options::default()).await;
    let refusal = |headers: Vec<(&'static str, String)>| {
        let app = &app;
        async move {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let r = app
                .send(Req::get("/admin/projects").headers(&headers))
                .await;
            assert_eq!(r.status, 401, "{headers:?}");
            let v = r.json();
            assert_eq!(v["code"], "unauthorized", "{headers:?}");
            let message = v["message"].as_str().unwrap().to_owned();
            assert!(message.contains("ACDM_ADMIN_TOKEN"), "{message}");
            assert!(!message.contains(ADMIN_TOKEN) && !message.contains(TOKEN));
            assert!(
                !message.contains("service token"),
                "never hints that the service token was recognised: {message}"
            );
            message
        }
    };
    let missing = refusal(vec![]).await;
    assert!(missing.contains("no `Authorization` header"), "{missing}");

    let twice = refusal(vec![
        ("Authorization", BEARER.to_owned()),
        ("Authorization", BEARER.to_owned()),
    ])
    .await;
    assert!(twice.contains("more than one"), "{twice}");

    for malformed in [
        ADMIN_TOKEN.to_owned(),
        format!("Basic {ADMIN_TOKEN}"),
        "Bearer".to_owned(),
        "Bearer ".to_owned(),
        format!("Bearer{ADMIN_TOKEN}"),
    ] {
        let message = refusal(vec![("Authorization", malformed.clone())]).await;
        assert!(
            message.contains("is not `Bearer <token>`"),
            "{malformed}: {message}"
        );
    }

    // A wrong token and the service token get the same words: nothing
    // tells a caller that it guessed another token of this service.
    let wrong = refusal(vec![(
        "Authorization",
        format!("Bearer {}", "x".repeat(40)),
    )])
    .await;
    let service = refusal(vec![("Authorization", format!("Bearer {TOKEN}"))]).await;
    assert!(wrong.contains("not the admin token"), "{wrong}");
    assert_eq!(wrong, service);
    app.stop().await;
}

#[tokio::test]
async fn provisioning_through_the_api_takes_effect_for_the_resolver_at_once() {
    let app = spawn_app(Options::default()).await;
    let h = admin_headers();
    let agent = AgentName::parse("project-alpha").unwrap();
    assert!(
        app.state.resolver.resolve(&agent).await.is_err(),
        "an earlier miss"
    );

    let created = app
        .send(
            Req::new("POST", "/admin/projects")
                .headers(&h)
                .json(r#"{"slug":"alpha","name":"Alpha"}"#),
        )
        .await;
    assert_eq!(created.status, 200, "{}", created.body);
    let body = created.json();
    assert_eq!(body["success"], true);
    assert_eq!(body["data"]["mounts"][0]["root"], "/Projects/Alpha");

    let member = app
        .send(
            Req::new("POST", "/admin/projects/alpha/members")
                .headers(&h)
                .json(r#"{"user_id":"u1","role":"owner"}"#),
        )
        .await;
    assert_eq!(
        member.json()["data"]["change"],
        "created",
        "{}",
        member.body
    );
    let mount = app
        .send(
            Req::new("POST", "/admin/projects/alpha/mounts")
                .headers(&h)
                .json(r#"{"name":"templates","root":"/Shared/Templates","writable":false}"#),
        )
        .await;
    assert_eq!(mount.json()["data"]["writable"], false, "{}", mount.body);

    let mounted = app
        .send(
            Req::new("POST", "/admin/agents")
                .headers(&h)
                .json(r#"{"agent_name":"project-alpha","project":"alpha"}"#),
        )
        .await;
    assert_eq!(mounted.status, 200, "{}", mounted.body);
    let resolved = app
        .state
        .resolver
        .resolve(&agent)
        .await
        .expect("seen at once");
    assert_eq!(resolved.project.slug.as_str(), "alpha");

    let shown = app
        .send(Req::get("/admin/projects/alpha").headers(&h))
        .await
        .json();
    assert_eq!(shown["data"]["members"][0]["role"], "owner");
    assert_eq!(shown["data"]["mounts"].as_array().unwrap().len(), 2);
    assert_eq!(shown["data"]["agents"][0]["agent_name"], "project-alpha");

    let unmounted = app
        .send(Req::new("DELETE", "/admin/agents/project-alpha").headers(&h))
        .await;
    assert_eq!(unmounted.status, 200, "{}", unmounted.body);
    assert!(
        app.state.resolver.resolve(&agent).await.is_err(),
        "revoked at once on this server"
    );
    let again = app
        .send(Req::new("DELETE", "/admin/agents/project-alpha").headers(&h))
        .await;
    assert_eq!(
        (again.status, again.json()["code"].as_str()),
        (404, Some("not_found"))
    );

    let reset = app
        .send(Req::new("POST", "/admin/scope-cache/reset").headers(&h))
        .await;
    assert_eq!(reset.status, 200);
    app.stop().await;
}

#[tokio::test]
async fn bad_requests_get_envelopes_naming_the_problem() {
    let app = spawn_app(Options::default()).await;
    let h = admin_headers();
    let check = async |req: Req<'_>, status: u16, code: &str, field: Option<&str>| {
        let r = app.send(req.headers(&h)).await;
        let v = r.json();
        assert_eq!(
            (r.status, v["code"].as_str()),
            (status, Some(code)),
            "{}",
            r.body
        );
        if let Some(field) = field {
            assert_eq!(v["data"]["errors"][0]["field"], field, "{}", r.body);
        }
        assert_eq!(v["success"], code == "ok");
    };
    check(
        Req::new("POST", "/admin/projects")
            .json(r#"{"slug":"alpha","name":"Alpha","project_id":"x"}"#),
        422,
        "validation_error",
        Some("project_id"),
    )
    .await;
    check(
        Req::new("POST", "/admin/projects").json(r#"{"slug":"Alpha!","name":"Alpha"}"#),
        422,
        "validation_error",
        Some("slug"),
    )
    .await;
    check(
        Req::new("POST", "/admin/projects").json(r#"{"slug":"dots","name":".."}"#),
        422,
        "validation_error",
        Some("name"),
    )
    .await;
    check(
        Req::new("POST", "/admin/projects").json(r#"{"slug":"alpha""#),
        422,
        "validation_error",
        Some("."),
    )
    .await;
    check(
        Req::new("POST", "/admin/projects").json(r#"{"slug":"alpha","name":"Alpha"}"#),
        200,
        "ok",
        None,
    )
    .await;
    check(
        Req::new("POST", "/admin/projects").json(r#"{"slug":"alpha","name":"Alpha 2"}"#),
        409,
        "conflict",
        None,
    )
    .await;
    check(Req::get("/admin/projects/nope"), 404, "not_found", None).await;
    check(
        Req::get("/admin/projects/NOPE!"),
        422,
        "validation_error",
        Some("slug"),
    )
    .await;
    check(
        Req::new("POST", "/admin/projects/alpha/members").json(r#"{"user_id":"u1","role":"boss"}"#),
        422,
        "validation_error",
        Some("role"),
    )
    .await;
    check(
        Req::new("POST", "/admin/projects/alpha/mounts").json(r#"{"name":"x","root":"/a/../b"}"#),
        422,
        "validation_error",
        Some("root"),
    )
    .await;
    check(
        Req::new("POST", "/admin/agents").json(r#"{"agent_name":"bad agent","project":"alpha"}"#),
        422,
        "validation_error",
        Some("agent_name"),
    )
    .await;
    check(
        Req::new("POST", "/admin/agents").json(r#"{"agent_name":"a1","project":"nope"}"#),
        404,
        "not_found",
        None,
    )
    .await;
    check(
        Req::new("PUT", "/admin/projects"),
        405,
        "method_not_allowed",
        None,
    )
    .await;
    check(Req::get("/admin/unknown"), 404, "not_found", None).await;
    app.stop().await;
}

#[tokio::test]
async fn oversized_bodies_are_refused_with_an_envelope() {
    let app = spawn_app(Options {
        extra_env: vec![("ACDM_MAX_REQUEST_BYTES", "2048".to_owned())],
        ..Options::default()
    })
    .await;
    let big = format!(r#"{{"slug":"alpha","name":"{}"}}"#, "a".repeat(4000));
    let r = app
        .send(
            Req::new("POST", "/admin/projects")
                .headers(&admin_headers())
                .json(&big),
        )
        .await;
    assert_eq!(
        (r.status, r.json()["code"].as_str()),
        (413, Some("payload_too_large"))
    );
    app.stop().await;
}

#[tokio::test]
async fn a_move_made_on_one_server_reaches_another_within_seconds() {
    let first = spawn_app(Options::default()).await;
    let second = spawn_app(Options {
        data_dir: Some(first.data_dir.clone()),
        ..Options::default()
    })
    .await;
    let h = admin_headers();
    for (slug, name) in [("alpha", "Alpha"), ("beta", "Beta")] {
        let body = format!(r#"{{"slug":"{slug}","name":"{name}"}}"#);
        assert_eq!(
            first
                .send(Req::new("POST", "/admin/projects").headers(&h).json(&body))
                .await
                .status,
            200
        );
    }
    first
        .send(
            Req::new("POST", "/admin/agents")
                .headers(&h)
                .json(r#"{"agent_name":"project-alpha","project":"alpha"}"#),
        )
        .await;
    let agent = AgentName::parse("project-alpha").unwrap();
    assert_eq!(
        second
            .state
            .resolver
            .resolve(&agent)
            .await
            .unwrap()
            .project
            .slug
            .as_str(),
        "alpha"
    );

    let moved = first
        .send(
            Req::new("POST", "/admin/agents")
                .headers(&h)
                .json(r#"{"agent_name":"project-alpha","project":"beta"}"#),
        )
        .await;
    assert!(
        moved.json()["message"]
            .as_str()
            .unwrap()
            .contains("moved from `alpha` to `beta`")
    );
    // The second server's cached answer (TTL: 5 minutes) is dropped by its
    // scope watcher, which runs every 100 ms here; the round itself is
    // tested on a paused clock (store `scope::…`, binary `periodic::…`).
    // Real servers cannot run on a paused clock, so the guard is generous:
    // 10 s, far under the TTL the cache alone would take.
    tokio::time::timeout(Duration::from_secs(10), async {
        let resolver = &second.state.resolver;
        while resolver
            .resolve(&agent)
            .await
            .unwrap()
            .project
            .slug
            .as_str()
            != "beta"
        {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await
    .expect("the second server sees the move within seconds, not the TTL");
    second.stop().await;
    first.stop().await;
}

#[tokio::test]
async fn reserved_and_case_twin_project_names_are_refused() {
    let app = spawn_app(Options::default()).await;
    let h = admin_headers();
    let create = async |slug: &str, name: &str| {
        let body = serde_json::json!({"slug": slug, "name": name}).to_string();
        let r = app
            .send(Req::new("POST", "/admin/projects").headers(&h).json(&body))
            .await;
        (r.status, r.json())
    };
    // The trash, in any case, and every other hidden name: never a project
    // folder (its mount root would lie inside the trash).
    for (i, reserved) in [".acdm-trash", ".ACDM-TRASH", ".Acdm-Trash", ".git"]
        .into_iter()
        .enumerate()
    {
        let (status, v) = create(&format!("reserved-{i}"), reserved).await;
        assert_eq!(
            (status, v["code"].as_str()),
            (422, Some("validation_error")),
            "{reserved}: {v}"
        );
        assert_eq!(v["data"]["errors"][0]["field"], "name", "{v}");
    }
    let (status, v) = create("alpha", "Alpha").await;
    assert_eq!(status, 200, "{v}");
    for (slug, twin) in [("alpha-upper", "ALPHA"), ("alpha-lower", "alpha")] {
        let (status, v) = create(slug, twin).await;
        assert_eq!(
            (status, v["code"].as_str()),
            (409, Some("conflict")),
            "{twin}: {v}"
        );
        let message = v["message"].as_str().unwrap();
        assert!(
            message.contains("`Alpha` (slug `alpha`)") && message.contains("only in case"),
            "{message}"
        );
    }
    let list = app
        .send(Req::get("/admin/projects").headers(&h))
        .await
        .json();
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    app.stop().await;
}

#[tokio::test]
async fn the_kill_switch_names_its_operator_user_id_like_a_revert_does() {
    let app = spawn_app(Options::default()).await;
    let off = app
        .send(
            Req::new("PUT", "/admin/kill-switch")
                .headers(&admin_headers())
                .json(r#"{"nc_writes_enabled":false,"reason":"drill","user_id":"u-ops"}"#),
        )
        .await;
    assert_eq!(off.status, 200, "{}", off.body);
    let shown = app
        .send(Req::get("/admin/kill-switch").headers(&admin_headers()))
        .await
        .json();
    for report in [&off.json(), &shown] {
        let operator = &report["data"]["operator"];
        assert_eq!(operator["user_id"], "u-ops", "{report}");
        assert!(operator.get("changed_by").is_none(), "{report}");
    }

    // The old name is still accepted, as a deprecated alias.
    let on = app
        .send(
            Req::new("PUT", "/admin/kill-switch")
                .headers(&admin_headers())
                .json(r#"{"nc_writes_enabled":true,"changed_by":"u-old"}"#),
        )
        .await;
    assert_eq!(on.status, 200, "{}", on.body);
    assert_eq!(on.json()["data"]["operator"]["user_id"], "u-old");
    app.stop().await;
}

/// Provisions `alpha` with its agent and makes `writes` agent writes;
/// returns the agent's headers.
pub(crate) async fn alpha_with_writes(
    app: &crate::helpers::TestApp,
    writes: usize,
) -> [(&'static str, &'static str); 4] {
    for (path, body) in [
        ("/admin/projects", r#"{"slug":"alpha","name":"Alpha"}"#),
        (
            "/admin/agents",
            r#"{"agent_name":"project-alpha","project":"alpha"}"#,
        ),
        (
            "/admin/projects/alpha/members",
            r#"{"user_id":"u-1","role":"member"}"#,
        ),
    ] {
        let r = app
            .send(Req::new("POST", path).headers(&admin_headers()).json(body))
            .await;
        assert!(r.status < 300, "{path}: {}", r.body);
    }
    let agent = [
        ("X-ACDM-Service-Auth", TOKEN),
        ("X-ACDM-User-Id", "u-1"),
        ("X-ACDM-Agent-Name", "project-alpha"),
        ("X-ACDM-Thread-Id", "t-1"),
    ];
    for n in 0..writes {
        let body = format!(r#"{{"rel_path":"notes/{n}.md","content":"hello"}}"#);
        let written = app
            .send(
                Req::new("POST", "/agent-tools/nc/write")
                    .headers(&agent)
                    .json(&body),
            )
            .await;
        assert_eq!(written.status, 200, "{}", written.body);
    }
    agent
}

#[tokio::test]
async fn an_event_can_be_named_by_a_unique_prefix_of_its_id() {
    let app = spawn_app(Options::default()).await;
    alpha_with_writes(&app, 1).await;
    let listed = app
        .send(Req::get("/admin/events").headers(&admin_headers()))
        .await
        .json();
    let id = listed["data"]["events"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for prefix in [&id[..8], &id[..4], id.to_uppercase().get(..13).unwrap()] {
        let shown = app
            .send(Req::get(&format!("/admin/events/{prefix}")).headers(&admin_headers()))
            .await;
        assert_eq!(shown.status, 200, "{prefix}: {}", shown.body);
        assert_eq!(shown.json()["data"]["id"], id.as_str());
    }
    let short = app
        .send(Req::get(&format!("/admin/events/{}", &id[..3])).headers(&admin_headers()))
        .await;
    assert_eq!(short.status, 422, "{}", short.body);
    assert!(short.body.contains("at least 4"), "{}", short.body);
    let other = if id.starts_with('0') { "1111" } else { "0000" };
    let missing = app
        .send(Req::get(&format!("/admin/events/{other}")).headers(&admin_headers()))
        .await;
    assert_eq!(missing.status, 404, "{}", missing.body);
    app.stop().await;
}

#[tokio::test]
async fn every_bff_operation_is_counted_and_timed_by_op_and_outcome() {
    let app = spawn_app(Options::default()).await;
    let agent = alpha_with_writes(&app, 2).await;
    let anonymous = [("X-ACDM-Service-Auth", TOKEN)];
    let refused = app
        .send(
            Req::new("POST", "/agent-tools/nc/write")
                .headers(&anonymous)
                .json(r#"{"rel_path":"x.md","content":"x"}"#),
        )
        .await;
    assert_eq!(refused.status, 401, "{}", refused.body);
    let listed = app
        .send(
            Req::new("POST", "/agent-tools/nc/list")
                .headers(&agent)
                .json(r#"{"rel_path":"notes"}"#),
        )
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let unknown = app
        .send(
            Req::new("POST", "/agent-tools/nc/no-such-op")
                .headers(&agent)
                .json("{}"),
        )
        .await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);

    let metrics = app.send(Req::get("/metrics")).await.body;
    for line in [
        r#"acdm_bff_operations_total{op="nc.write",outcome="ok"} 2"#,
        r#"acdm_bff_operations_total{op="nc.write",outcome="missing_identity_headers"} 1"#,
        r#"acdm_bff_operations_total{op="nc.list",outcome="ok"} 1"#,
        r#"acdm_bff_operations_total{op="unknown",outcome="not_found"} 1"#,
        r#"acdm_bff_operation_duration_seconds_count{op="nc.write"} 3"#,
        r#"acdm_bff_operation_duration_seconds_count{op="nc.list"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    assert!(!metrics.contains("no-such-op"), "labels are bounded");
    app.stop().await;
}
