//! The `nc` file tools (`POST /agent-tools/nc/{op}`, spec §6.1) against a
//! real WebDAV server behind a recording proxy (see `dav.rs`): every op's
//! success path checked on the WebDAV disk itself, every failure code,
//! reverts (and reverts of reverts) through the operator API, one applied
//! event per change attributed to the agent's user and thread, and the kill
//! switch (spec §3.5), which must stop writes before anything reaches the
//! upstream or the database.

use std::collections::BTreeSet;

use acdm_core::ErrorCode;
use serde_json::{Value, json};

use crate::dav::{
    ALPHA, BETA, NcEnv, Scope, THREAD, USER, assert_confined, assert_no_writes,
    assert_nothing_destroyed, base64_decode, base64_encode, code, outside_alpha,
};
use crate::helpers::TOKEN;

const README: &[u8] = b"# Alpha\nThe alpha project.\n";
const PLAN: &[u8] = b"alpha plan\nline two\n";
const ODD: &str = "docs/a b#c%d.md";
const ODD_BYTES: &[u8] = b"odd name: space, hash, percent\n";
const UNICODE: &str = "docs/caf\u{e9} \u{fc}.txt";

fn alpha(path: &str) -> String {
    format!("Projects/Alpha/{path}")
}

fn names(entries: &Value) -> BTreeSet<String> {
    entries
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {entries}"))
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect()
}

fn entry<'a>(entries: &'a Value, name: &str) -> &'a Value {
    entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {entries}"))
}

/// The `data.event_id` of a successful change.
fn event_id(body: &Value) -> String {
    body["data"]["event_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no event id: {body}"))
        .to_owned()
}

async fn ok(env: &NcEnv, op: &str, body: Value) -> Value {
    let (status, answer) = env.nc(ALPHA, op, body.clone()).await;
    assert_eq!(status, 200, "nc/{op} {body}: {answer}");
    assert_eq!(answer["success"], true);
    answer
}

async fn fails(env: &NcEnv, op: &str, body: Value, status: u16, expected: &str) -> Value {
    let (got, answer) = env.nc(ALPHA, op, body.clone()).await;
    assert_eq!(
        (got, code(&answer)),
        (status, expected),
        "nc/{op} {body}: {answer}"
    );
    assert_eq!(answer["success"], false);
    assert!(
        !answer["message"].as_str().unwrap_or_default().is_empty(),
        "a failure says why: {answer}"
    );
    answer
}

/// The etag `read` reports for `rel_path`.
async fn etag_of(env: &NcEnv, rel_path: &str) -> String {
    let r = ok(env, "read", json!({"rel_path": rel_path})).await;
    r["data"]["etag"]
        .as_str()
        .unwrap_or_else(|| panic!("no etag: {r}"))
        .to_owned()
}

#[tokio::test]
async fn list_mounts_list_read_and_search_see_the_project_folder() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let big: String = "0123456789 é ü ✓ 😀\n".repeat(150); // multi-byte text over windows
    std::fs::write(env.disk(&alpha("big.txt")), &big).unwrap();
    let before = env.disk_snapshot();

    let mounts = ok(&env, "list_mounts", json!({})).await;
    let list = mounts["data"]["mounts"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{mounts}");
    assert_eq!(
        (&list[0]["name"], &list[0]["writable"]),
        (&json!("project"), &json!(true))
    );

    // The project root.
    let root = ok(&env, "list", json!({"rel_path": ""})).await;
    let data = &root["data"];
    assert_eq!(data["mount"], "project");
    assert_eq!(data["rel_path"], "");
    assert_eq!(data["truncated"], false);
    assert_eq!(
        names(&data["entries"]),
        ["big.txt", "docs", "image.bin", "readme.md", "ref"]
            .map(str::to_owned)
            .into(),
        "exactly the Alpha folder, nothing beside it: {root}"
    );
    let readme = entry(&data["entries"], "readme.md");
    assert_eq!(readme["rel_path"], "readme.md");
    assert_eq!(readme["is_dir"], false);
    assert_eq!(readme["size"], README.len());
    assert!(readme["etag"].as_str().is_some_and(|e| !e.is_empty()));
    assert!(readme["modified"].is_string(), "{readme}");
    assert_eq!(entry(&data["entries"], "docs")["is_dir"], true);

    // A sub-folder with awkward names, naming the mount explicitly.
    let docs = ok(
        &env,
        "list",
        json!({"rel_path": "docs", "mount": "project"}),
    )
    .await;
    let entries = &docs["data"]["entries"];
    assert_eq!(docs["data"]["rel_path"], "docs");
    assert_eq!(
        names(entries),
        ["a b#c%d.md", "caf\u{e9} \u{fc}.txt", "plan.md", "sub"]
            .map(str::to_owned)
            .into(),
        "{docs}"
    );
    let odd = entry(entries, "a b#c%d.md");
    assert_eq!(odd["rel_path"], ODD);
    assert_eq!(odd["size"], ODD_BYTES.len());
    assert_eq!(entry(entries, "sub")["rel_path"], "docs/sub");
    assert_eq!(entry(entries, "sub")["is_dir"], true);

    // Reads: text with awkward names, unicode, the same etag as the listing.
    let read = ok(&env, "read", json!({"rel_path": ODD})).await;
    let d = &read["data"];
    assert_eq!(d["encoding"], "text");
    assert_eq!(d["content"].as_str().unwrap().as_bytes(), ODD_BYTES);
    assert_eq!(d["size"], ODD_BYTES.len());
    assert_eq!(d["etag"], odd["etag"], "read and list agree on the etag");
    assert_eq!(
        (&d["offset"], &d["returned_bytes"], &d["truncated"]),
        (&json!(0), &json!(ODD_BYTES.len()), &json!(false))
    );
    assert!(d["next_offset"].is_null(), "{read}");
    assert_eq!(d["rel_path"], ODD);
    assert_eq!(d["mount"], "project");
    let unicode = ok(&env, "read", json!({"rel_path": UNICODE})).await;
    assert_eq!(unicode["data"]["content"], "unicode name\n");

    // Binary comes back as base64.
    let image = ok(&env, "read", json!({"rel_path": "image.bin"})).await;
    assert_eq!(image["data"]["encoding"], "base64");
    assert_eq!(
        base64_decode(image["data"]["content"].as_str().unwrap()),
        env.disk_read(&alpha("image.bin")).unwrap()
    );

    // Windows reassemble the file and never cut a character.
    let mut offset = 0u64;
    let mut text = String::new();
    let mut windows = 0;
    loop {
        let w = ok(
            &env,
            "read",
            json!({"rel_path": "big.txt", "offset": offset, "max_bytes": 1024}),
        )
        .await;
        let d = &w["data"];
        assert_eq!(d["offset"], offset);
        assert_eq!(d["size"], big.len());
        let returned = d["returned_bytes"].as_u64().unwrap();
        assert!(returned <= 1024 && returned > 0, "{w}");
        let chunk = d["content"].as_str().unwrap();
        assert_eq!(
            chunk.len() as u64,
            returned,
            "text windows are whole characters"
        );
        text.push_str(chunk);
        windows += 1;
        if d["truncated"] == false {
            assert!(d["next_offset"].is_null(), "{w}");
            assert_eq!(
                w["message"],
                format!("{returned} bytes of project:/big.txt from offset {offset} (end of file)"),
                "{w}"
            );
            break;
        }
        assert_eq!(d["next_offset"], offset + returned, "{w}");
        assert_eq!(
            w["message"],
            format!(
                "{returned} bytes of project:/big.txt from offset {offset}; continue with offset {}",
                offset + returned
            ),
            "{w}"
        );
        offset += returned;
        assert!(windows < 100, "never ends");
    }
    assert_eq!(text, big);
    assert!(windows >= 3, "{windows} windows for {} bytes", big.len());
    // Past the end: a failure naming the size, never an empty success the
    // caller could take for content (the MCP read tools' rule too).
    let past = fails(
        &env,
        "read",
        json!({"rel_path": "big.txt", "offset": big.len()}),
        422,
        "validation_error",
    )
    .await;
    let message = past["message"].as_str().unwrap();
    assert_eq!(
        message,
        format!(
            "offset: {} is past the end of `/big.txt` ({} bytes)",
            big.len(),
            big.len()
        ),
        "{past}"
    );
    assert_eq!(past["data"]["errors"][0]["field"], "offset", "{past}");

    // Search: names inside this project only, relative to the mount.
    let found = ok(&env, "search", json!({"query": "plan"})).await;
    let hits = found["data"]["hits"].as_array().unwrap();
    let paths: Vec<&str> = hits
        .iter()
        .map(|h| h["rel_path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["docs/plan.md"],
        "Beta's, Alpha-evil's and hostile hits are dropped: {found}"
    );
    assert_eq!(hits[0]["mount"], "project");
    assert_eq!(hits[0]["is_dir"], false);
    assert_eq!(found["data"]["returned"], 1);
    let folders = ok(&env, "search", json!({"query": "DOCS", "limit": 5})).await;
    let hit = &folders["data"]["hits"][0];
    assert_eq!(
        (&hit["rel_path"], &hit["is_dir"]),
        (&json!("docs"), &json!(true))
    );
    let nothing = ok(&env, "search", json!({"query": "secret"})).await;
    assert_eq!(
        nothing["data"]["hits"],
        json!([]),
        "Beta's secret.md: {nothing}"
    );
    assert_eq!(nothing["data"]["returned"], 0);
    // Beta sees its own plan, under the same relative name.
    let (status, beta) = env.nc(BETA, "search", json!({"query": "secret"})).await;
    assert_eq!(status, 200, "{beta}");
    assert_eq!(beta["data"]["hits"][0]["rel_path"], "secret.md");

    let seen = env.recorder().all();
    assert!(!seen.is_empty());
    assert_no_writes(&seen, "reads");
    assert_confined(&seen, &Scope::alpha(), "reads");
    assert_eq!(env.disk_snapshot(), before, "reads change nothing");
    env.stop().await;
}

#[tokio::test]
async fn write_creates_parents_and_overwrites_only_with_the_current_etag() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let path = "new/deeper/notes b#1.md";
    let created = ok(
        &env,
        "write",
        json!({"rel_path": path, "content": "hello\n"}),
    )
    .await;
    let d = &created["data"];
    assert_eq!(
        (&d["mount"], &d["rel_path"], &d["created"], &d["size"]),
        (&json!("project"), &json!(path), &json!(true), &json!(6))
    );
    assert!(
        d["etag"].as_str().is_some_and(|e| !e.is_empty()),
        "{created}"
    );
    event_id(&created);
    assert_eq!(
        env.disk_read(&alpha(path)).as_deref(),
        Some(&b"hello\n"[..])
    );
    assert!(env.disk(&alpha("new/deeper")).is_dir());

    // Binary through base64.
    let bytes = [0u8, 1, 2, 0xff, 0xfe, b'\n', 0x80];
    let bin = ok(
        &env,
        "write",
        json!({"rel_path": "bin/blob.bin", "content": base64_encode(&bytes), "encoding": "base64"}),
    )
    .await;
    assert_eq!(bin["data"]["size"], bytes.len());
    assert_eq!(
        env.disk_read(&alpha("bin/blob.bin")).as_deref(),
        Some(&bytes[..])
    );

    // Overwrite with the current etag.
    let first = etag_of(&env, path).await;
    let replaced = ok(
        &env,
        "write",
        json!({"rel_path": path, "content": "second version\n", "if_match": first}),
    )
    .await;
    assert_eq!(replaced["data"]["created"], false, "{replaced}");
    assert_eq!(replaced["data"]["size"], 15);
    assert_eq!(
        env.disk_read(&alpha(path)).as_deref(),
        Some(&b"second version\n"[..])
    );
    let second = etag_of(&env, path).await;
    assert_ne!(first, second, "the etag changes with the content");

    // A stale etag is a conflict and changes nothing.
    let stale = fails(
        &env,
        "write",
        json!({"rel_path": path, "content": "lost update\n", "if_match": first}),
        409,
        "conflict",
    )
    .await;
    assert!(stale["suggested_action"].is_string(), "{stale}");
    assert_eq!(
        env.disk_read(&alpha(path)).as_deref(),
        Some(&b"second version\n"[..])
    );

    // A write that names an existing folder as a file, or a file as a folder.
    let (status, answer) = env
        .nc(ALPHA, "write", json!({"rel_path": "docs", "content": "x"}))
        .await;
    assert!(
        matches!(
            code(&answer),
            "conflict" | "invalid_path" | "permission_denied"
        ),
        "{status} {answer}"
    );
    let (_, answer) = env
        .nc(
            ALPHA,
            "write",
            json!({"rel_path": "readme.md/inner.md", "content": "x"}),
        )
        .await;
    assert!(
        matches!(code(&answer), "conflict" | "not_found" | "invalid_path"),
        "{answer}"
    );
    assert!(env.disk(&alpha("docs")).is_dir());
    assert_eq!(env.disk_read(&alpha("readme.md")).as_deref(), Some(README));

    assert_confined(&env.recorder().all(), &Scope::alpha(), "writes");

    assert_nothing_destroyed(&env.recorder().all(), "writes");
    env.stop().await;
}

#[tokio::test]
async fn delete_is_a_dry_run_by_default_and_a_real_delete_keeps_the_file_in_the_trash() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let before = env.disk_snapshot();
    let mark = env.recorder().mark();

    // The default is a dry run: a report, and nothing changes.
    let preview = ok(&env, "delete", json!({"rel_path": "docs"})).await;
    let d = &preview["data"];
    assert_eq!(d["dry_run"], true, "{preview}");
    assert!(
        preview["suggested_action"]
            .as_str()
            .is_some_and(|a| a.contains("dry_run: false")),
        "the preview says how to delete for real: {preview}"
    );
    assert_eq!(
        (&d["mount"], &d["rel_path"]),
        (&json!("project"), &json!("docs"))
    );
    let would: Vec<&Value> = d["would_delete"].as_array().unwrap().iter().collect();
    let listed: BTreeSet<&str> = would
        .iter()
        .map(|w| w["rel_path"].as_str().unwrap())
        .collect();
    for file in ["docs/plan.md", ODD, UNICODE, "docs/sub/deep.txt"] {
        assert!(listed.contains(file), "{file} missing from {preview}");
    }
    assert!(!listed.iter().any(|p| !p.starts_with("docs")), "{preview}");
    let plan = would
        .iter()
        .find(|w| w["rel_path"] == "docs/plan.md")
        .unwrap();
    assert_eq!(
        (&plan["is_dir"], &plan["size"]),
        (&json!(false), &json!(PLAN.len()))
    );
    assert_eq!(d["truncated"], false);
    assert_eq!(d["count"], would.len());
    let single = ok(
        &env,
        "delete",
        json!({"rel_path": "readme.md", "dry_run": true}),
    )
    .await;
    let mut listed = single["data"]["would_delete"].clone();
    // Each item's etag is listed (an approval binds the delete to them).
    let etag = listed[0]
        .as_object_mut()
        .unwrap()
        .remove("etag")
        .expect("the dry run lists the etag");
    assert!(etag.as_str().is_some_and(|e| !e.is_empty()), "{single}");
    assert_eq!(
        listed,
        json!([{"rel_path": "readme.md", "is_dir": false, "size": README.len()}])
    );
    assert_eq!(single["data"]["count"], 1);
    assert_no_writes(&env.recorder().since(mark), "dry runs");
    assert_eq!(env.disk_snapshot(), before, "a dry run changes nothing");
    assert!(
        env.events("project=alpha").await.is_empty(),
        "a dry run records nothing"
    );

    // A real delete moves the file into the project's trash, under its event.
    let gone = ok(&env, "delete", json!({"rel_path": ODD, "dry_run": false})).await;
    let d = &gone["data"];
    assert_eq!(
        (&d["dry_run"], &d["rel_path"]),
        (&json!(false), &json!(ODD))
    );
    let id = event_id(&gone);
    assert!(
        env.disk_read(&alpha(ODD)).is_none(),
        "removed from the project"
    );
    let kept = env.trash_of("alpha", &id);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let (name, content) = kept.iter().next().unwrap();
    assert!(
        name.ends_with("a b#c%d.md"),
        "kept under its own name: {name}"
    );
    assert_eq!(content.as_slice(), ODD_BYTES, "kept byte for byte");

    // A folder goes with its content.
    let folder = ok(
        &env,
        "delete",
        json!({"rel_path": "docs/sub", "dry_run": false}),
    )
    .await;
    assert!(!env.disk(&alpha("docs/sub")).exists());
    let kept = env.trash_of("alpha", &event_id(&folder));
    assert!(
        kept.iter()
            .any(|(k, v)| k.ends_with("sub/deep.txt") && v == b"deep\n"),
        "{kept:?}"
    );

    // Nothing else moved; Beta and the rest are untouched.
    let after = env.disk_snapshot();
    assert_eq!(outside_alpha(&after), outside_alpha(&before));
    assert_eq!(after.get(&alpha("readme.md")), Some(&Some(README.to_vec())));
    assert_eq!(
        after.get(&alpha("docs/plan.md")),
        Some(&Some(PLAN.to_vec()))
    );

    fails(
        &env,
        "delete",
        json!({"rel_path": "docs/sub", "dry_run": false}),
        404,
        "not_found",
    )
    .await;
    fails(
        &env,
        "delete",
        json!({"rel_path": "nope.md"}),
        404,
        "not_found",
    )
    .await;
    assert_confined(&env.recorder().all(), &Scope::alpha(), "deletes");
    assert_nothing_destroyed(&env.recorder().all(), "deletes");
    env.stop().await;
}

#[tokio::test]
async fn move_renames_and_never_overwrites_unless_asked() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let moved = ok(
        &env,
        "move",
        json!({"from_rel_path": "readme.md", "to_rel_path": "docs/read me#1.md"}),
    )
    .await;
    let d = &moved["data"];
    assert_eq!(
        (
            &d["mount"],
            &d["from_rel_path"],
            &d["to_rel_path"],
            &d["overwritten"]
        ),
        (
            &json!("project"),
            &json!("readme.md"),
            &json!("docs/read me#1.md"),
            &json!(false)
        )
    );
    event_id(&moved);
    assert!(env.disk_read(&alpha("readme.md")).is_none());
    assert_eq!(
        env.disk_read(&alpha("docs/read me#1.md")).as_deref(),
        Some(README)
    );

    // An existing target is a conflict without `overwrite`; nothing moves.
    // A move has no etag: the suggestion is another target or overwrite.
    let mark = env.recorder().mark();
    let occupied = fails(
        &env,
        "move",
        json!({"from_rel_path": "docs/plan.md", "to_rel_path": "docs/read me#1.md"}),
        409,
        "conflict",
    )
    .await;
    let action = occupied["suggested_action"].as_str().unwrap_or_default();
    assert!(
        action.contains("another to_rel_path") && action.contains("overwrite: true"),
        "{occupied}"
    );
    assert!(!action.contains("etag"), "{occupied}");
    fails(
        &env,
        "move",
        json!({"from_rel_path": "docs/plan.md", "to_rel_path": "docs/read me#1.md", "overwrite": false}),
        409,
        "conflict",
    )
    .await;
    assert_no_writes(&env.recorder().since(mark), "a refused move");
    assert_eq!(env.disk_read(&alpha("docs/plan.md")).as_deref(), Some(PLAN));
    assert_eq!(
        env.disk_read(&alpha("docs/read me#1.md")).as_deref(),
        Some(README)
    );

    // With `overwrite`, the old target is kept in the trash.
    let over = ok(
        &env,
        "move",
        json!({"from_rel_path": "docs/plan.md", "to_rel_path": "docs/read me#1.md", "overwrite": true}),
    )
    .await;
    assert_eq!(over["data"]["overwritten"], true, "{over}");
    assert!(env.disk_read(&alpha("docs/plan.md")).is_none());
    assert_eq!(
        env.disk_read(&alpha("docs/read me#1.md")).as_deref(),
        Some(PLAN)
    );
    let kept = env.trash_of("alpha", &event_id(&over));
    assert!(
        kept.values().any(|v| v == README),
        "the replaced file is kept: {kept:?}"
    );

    // Folders move with their content; unicode names survive.
    ok(
        &env,
        "move",
        json!({"from_rel_path": "docs/sub", "to_rel_path": "sübfolder"}),
    )
    .await;
    assert_eq!(
        env.disk_read(&alpha("sübfolder/deep.txt")).as_deref(),
        Some(&b"deep\n"[..])
    );
    assert!(!env.disk(&alpha("docs/sub")).exists());

    fails(
        &env,
        "move",
        json!({"from_rel_path": "nope.md", "to_rel_path": "x.md"}),
        404,
        "not_found",
    )
    .await;
    assert!(env.disk_read(&alpha("x.md")).is_none());
    assert_confined(&env.recorder().all(), &Scope::alpha(), "moves");
    assert_nothing_destroyed(&env.recorder().all(), "moves");
    env.stop().await;
}

/// Every op refuses these paths, which name the trash folder, as an
/// invalid path or a permission problem.
async fn refuses_the_trash_name(env: &NcEnv, paths: &[&str]) {
    for trash in paths {
        for (op, body) in [
            ("list", json!({"rel_path": trash})),
            ("read", json!({"rel_path": trash})),
            ("write", json!({"rel_path": trash, "content": "x"})),
            ("delete", json!({"rel_path": trash, "dry_run": false})),
            (
                "move",
                json!({"from_rel_path": "readme.md", "to_rel_path": trash}),
            ),
        ] {
            let (status, answer) = env.nc(ALPHA, op, body.clone()).await;
            assert!(
                matches!(
                    (status, code(&answer)),
                    (400, "invalid_path") | (403, "permission_denied")
                ),
                "{op} {body}: {answer}"
            );
        }
    }
}

/// The reserved name is compared case-insensitively (after NFC), as
/// `shared/reference/security-notes.md` §3.2 asks of every protected path:
/// on case-insensitive storage (external or object storage behind
/// Nextcloud, a Windows sync client) `.ACDM-TRASH` *is* the trash.
#[tokio::test]
async fn the_trash_name_is_reserved_in_any_case() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let before = env.disk_snapshot();
    refuses_the_trash_name(
        &env,
        &[".ACDM-TRASH", ".Acdm-Trash/alpha", "docs/.ACDM-trash/x.md"],
    )
    .await;
    assert_eq!(env.disk_snapshot(), before);
    env.stop().await;
}

#[tokio::test]
async fn every_failure_has_its_code_and_touches_nothing() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let before = env.disk_snapshot();
    let read_body = r#"{"rel_path":"readme.md"}"#;

    // Identity headers: each missing or empty one is named.
    for missing in ["X-ACDM-User-Id", "X-ACDM-Agent-Name", "X-ACDM-Thread-Id"] {
        for empty in [false, true] {
            let mut headers: Vec<(&str, &str)> = vec![
                ("X-ACDM-Service-Auth", TOKEN),
                ("X-ACDM-User-Id", USER),
                ("X-ACDM-Agent-Name", ALPHA),
                ("X-ACDM-Thread-Id", THREAD),
            ];
            if empty {
                headers
                    .iter_mut()
                    .filter(|(k, _)| *k == missing)
                    .for_each(|h| h.1 = "");
            } else {
                headers.retain(|(k, _)| *k != missing);
            }
            let (status, body) = env.nc_with(&headers, "read", read_body).await;
            assert_eq!(
                (status, code(&body)),
                (401, "missing_identity_headers"),
                "{missing} (empty: {empty}): {body}"
            );
            assert!(
                body["message"]
                    .as_str()
                    .unwrap()
                    .to_ascii_lowercase()
                    .contains(&missing.to_ascii_lowercase()),
                "names {missing}: {body}"
            );
        }
    }

    // An agent that manages no project.
    let (status, body) = env
        .nc("project-gamma", "list", json!({"rel_path": ""}))
        .await;
    assert_eq!((status, code(&body)), (403, "scope_violation"), "{body}");

    // Paths that break a rule never reach the upstream.
    let mark = env.recorder().mark();
    for bad in [
        "../Beta/secret.md",
        "/readme.md",
        "/Projects/Alpha/readme.md",
        "docs\\plan.md",
        "docs/../readme.md",
        "docs/../../Beta/secret.md",
        "a\u{0}b",
        "%2e%2e/Beta/secret.md",
        "docs/%2e%2e/readme.md",
        "..%2fBeta",
        "docs//plan.md",
        "\u{ff0e}\u{ff0e}/Beta",
    ] {
        for op in ["list", "read"] {
            fails(&env, op, json!({"rel_path": bad}), 400, "invalid_path").await;
        }
        fails(
            &env,
            "write",
            json!({"rel_path": bad, "content": "x"}),
            400,
            "invalid_path",
        )
        .await;
        fails(
            &env,
            "delete",
            json!({"rel_path": bad, "dry_run": false}),
            400,
            "invalid_path",
        )
        .await;
        fails(
            &env,
            "move",
            json!({"from_rel_path": "readme.md", "to_rel_path": bad}),
            400,
            "invalid_path",
        )
        .await;
        fails(
            &env,
            "move",
            json!({"from_rel_path": bad, "to_rel_path": "x.md"}),
            400,
            "invalid_path",
        )
        .await;
    }
    let sent = env.recorder().since(mark);
    assert!(
        sent.is_empty(),
        "refused paths send nothing upstream: {sent:?}"
    );

    // The trash folder's name is reserved everywhere.
    refuses_the_trash_name(
        &env,
        &[".acdm-trash", ".acdm-trash/alpha", "docs/.acdm-trash/x.md"],
    )
    .await;
    assert!(!env.disk(&alpha(".acdm-trash")).exists());
    assert!(!env.disk(&alpha("docs/.acdm-trash")).exists());

    // Mounts: unknown ones are not found; read-only ones refuse writes.
    fails(
        &env,
        "list",
        json!({"rel_path": "", "mount": "nope"}),
        404,
        "not_found",
    )
    .await;
    fails(
        &env,
        "write",
        json!({"rel_path": "x.md", "content": "x", "mount": "nope"}),
        404,
        "not_found",
    )
    .await;
    let (status, added) = env
        .admin(
            "POST",
            "/admin/projects/alpha/mounts",
            Some(json!({"name": "ref", "root": "/Projects/Alpha/ref", "writable": false})),
        )
        .await;
    assert_eq!(status, 200, "{added}");
    let mounts = ok(&env, "list_mounts", json!({})).await;
    assert!(
        mounts["data"]["mounts"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "ref", "writable": false})),
        "{mounts}"
    );
    let manual = ok(
        &env,
        "read",
        json!({"rel_path": "manual.md", "mount": "ref"}),
    )
    .await;
    assert_eq!(manual["data"]["content"], "read-only manual\n");
    assert_eq!(manual["data"]["mount"], "ref");
    let mark = env.recorder().mark();
    fails(
        &env,
        "write",
        json!({"rel_path": "manual.md", "content": "x", "mount": "ref"}),
        403,
        "permission_denied",
    )
    .await;
    fails(
        &env,
        "write",
        json!({"rel_path": "new.md", "content": "x", "mount": "ref"}),
        403,
        "permission_denied",
    )
    .await;
    fails(
        &env,
        "delete",
        json!({"rel_path": "manual.md", "mount": "ref", "dry_run": false}),
        403,
        "permission_denied",
    )
    .await;
    fails(
        &env,
        "move",
        json!({"from_rel_path": "manual.md", "to_rel_path": "m2.md", "mount": "ref"}),
        403,
        "permission_denied",
    )
    .await;
    assert_no_writes(&env.recorder().since(mark), "read-only mount");

    // Missing things.
    fails(
        &env,
        "read",
        json!({"rel_path": "nope.md"}),
        404,
        "not_found",
    )
    .await;
    fails(&env, "list", json!({"rel_path": "nope"}), 404, "not_found").await;
    fails(
        &env,
        "delete",
        json!({"rel_path": "nope.md"}),
        404,
        "not_found",
    )
    .await;
    fails(
        &env,
        "delete",
        json!({"rel_path": "nope.md", "dry_run": false}),
        404,
        "not_found",
    )
    .await;
    fails(
        &env,
        "move",
        json!({"from_rel_path": "nope.md", "to_rel_path": "x.md"}),
        404,
        "not_found",
    )
    .await;

    // Bodies are strict, and problems name the field.
    for (op, body, field) in [
        (
            "read",
            json!({"rel_path": "readme.md", "project_id": "beta"}),
            "project_id",
        ),
        (
            "list",
            json!({"rel_path": "", "project": "beta"}),
            "project",
        ),
        (
            "write",
            json!({"rel_path": "x.md", "content": "x", "project_id": "beta"}),
            "project_id",
        ),
        ("list_mounts", json!({"project_id": "beta"}), "project_id"),
        ("read", json!({}), "rel_path"),
        ("write", json!({"rel_path": "x.md"}), "content"),
        ("move", json!({"from_rel_path": "readme.md"}), "to_rel_path"),
        ("read", json!({"rel_path": 5}), "rel_path"),
        (
            "delete",
            json!({"rel_path": "readme.md", "dry_run": "no"}),
            "dry_run",
        ),
        (
            "write",
            json!({"rel_path": "x.md", "content": "x", "encoding": "rot13"}),
            "encoding",
        ),
    ] {
        let answer = fails(&env, op, body.clone(), 422, "validation_error").await;
        assert!(
            answer.to_string().contains(field),
            "{op} {body} names {field}: {answer}"
        );
    }
    let (status, answer) = env
        .nc_with(
            &[
                ("X-ACDM-Service-Auth", TOKEN),
                ("X-ACDM-User-Id", USER),
                ("X-ACDM-Agent-Name", ALPHA),
                ("X-ACDM-Thread-Id", THREAD),
            ],
            "read",
            r#"{"rel_path": "readme.md""#,
        )
        .await;
    assert_eq!(
        (status, code(&answer)),
        (422, "validation_error"),
        "{answer}"
    );
    let (status, answer) = env
        .nc(
            ALPHA,
            "write",
            json!({"rel_path": "x.bin", "content": "***", "encoding": "base64"}),
        )
        .await;
    assert!(
        matches!(
            (status, code(&answer)),
            (422, "validation_error") | (400, "invalid_path")
        ),
        "bad base64: {answer}"
    );

    // Unknown ops.
    for op in ["nope", "delete_all", "list%2Fmounts"] {
        let (status, answer) = env.nc(ALPHA, op, json!({})).await;
        assert_eq!(
            (status, code(&answer)),
            (404, "not_found"),
            "{op}: {answer}"
        );
    }

    let all = env.recorder().all();
    assert_no_writes(&all, "failures");
    assert_confined(&all, &Scope::alpha(), "failures");
    assert_eq!(env.disk_snapshot(), before, "no failure changed the disk");
    assert!(
        env.events("").await.is_empty(),
        "no failure recorded an applied change"
    );
    env.stop().await;
}

/// Checks the event is a via-agent change of project alpha by `u-1` in
/// `t-1`, with this op and status.
fn assert_agent_event(event: &Value, id: &str, op: &str, status: &str) {
    assert_eq!(event["id"], id, "{event}");
    assert_eq!(event["op"], op, "{event}");
    assert_eq!(event["status"], status, "{event}");
    assert_eq!(event["project"], "alpha", "{event}");
    assert_eq!(
        event["actor"],
        json!({"kind": "via_agent", "user_id": USER, "agent_name": ALPHA, "thread_id": THREAD}),
        "{event}"
    );
    for key in [
        "target",
        "params",
        "plan",
        "undo",
        "result",
        "error",
        "reverts",
        "reverted_by",
        "created_at",
        "updated_at",
    ] {
        assert!(event.get(key).is_some(), "event without {key}: {event}");
    }
    assert!(event["reverts"].is_null(), "{event}");
    assert!(event["error"].is_null(), "{event}");
    assert!(event["created_at"].is_string() && event["updated_at"].is_string());
}

#[tokio::test]
async fn every_change_is_one_applied_event_attributed_to_the_agent() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let secret_content = "content-never-stored-in-an-event";
    let mut expected: Vec<String> = Vec::new(); // oldest first

    for (op, body, event_op) in [
        (
            "write",
            json!({"rel_path": "notes/a.md", "content": secret_content}),
            "nc_write",
        ),
        (
            "delete",
            json!({"rel_path": "docs/plan.md", "dry_run": false}),
            "nc_delete",
        ),
        (
            "move",
            json!({"from_rel_path": "readme.md", "to_rel_path": "notes/readme.md"}),
            "nc_move",
        ),
    ] {
        let before = env.events("project=alpha").await;
        let answer = ok(&env, op, body).await;
        let id = event_id(&answer);
        let after = env.events("project=alpha").await;
        assert_eq!(
            after.len(),
            before.len() + 1,
            "{op}: exactly one new event: {after:?}"
        );
        assert_eq!(
            &after[1..],
            &before[..],
            "{op}: older events unchanged, newest first"
        );
        assert_agent_event(&after[0], &id, event_op, "applied");
        assert_eq!(
            env.event(&id).await,
            after[0],
            "GET /admin/events/{{id}} agrees"
        );
        assert!(
            !after[0].to_string().contains(secret_content),
            "file contents never go into an event: {}",
            after[0]
        );
        expected.push(id);
    }

    // Reads, dry runs and refused changes record no applied event.
    let before = env.events("").await;
    ok(&env, "read", json!({"rel_path": "notes/a.md"})).await;
    ok(&env, "list", json!({"rel_path": "notes"})).await;
    ok(&env, "delete", json!({"rel_path": "notes/a.md"})).await;
    fails(
        &env,
        "move",
        json!({"from_rel_path": "notes/a.md", "to_rel_path": "notes/readme.md"}),
        409,
        "conflict",
    )
    .await;
    fails(
        &env,
        "write",
        json!({"rel_path": "notes/a.md", "content": "x", "if_match": "\"stale\""}),
        409,
        "conflict",
    )
    .await;
    let after = env.events("").await;
    let applied = |events: &[Value]| {
        events
            .iter()
            .filter(|e| e["status"] != "failed")
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(applied(&after), applied(&before), "no new applied event");

    // Another agent's change is its own, in its own project.
    let (status, beta) = env
        .nc(
            BETA,
            "write",
            json!({"rel_path": "b.md", "content": "beta"}),
        )
        .await;
    assert_eq!(status, 200, "{beta}");
    let beta_event = env.event(&event_id(&beta)).await;
    assert_eq!(beta_event["project"], "beta");
    assert_eq!(beta_event["actor"]["agent_name"], BETA);
    assert_eq!(beta_event["status"], "applied");
    assert_eq!(
        env.disk_read("Projects/Beta/b.md").as_deref(),
        Some(&b"beta"[..])
    );

    // Filters and paging.
    let alpha_ids: Vec<String> = applied(&env.events("project=alpha").await)
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    let newest_first: Vec<String> = expected.iter().rev().cloned().collect();
    assert_eq!(alpha_ids, newest_first);
    let by_agent: Vec<Value> = env.events(&format!("agent={ALPHA}")).await;
    assert!(by_agent.iter().all(|e| e["actor"]["agent_name"] == ALPHA));
    assert_eq!(applied(&by_agent).len(), 3);
    let beta_only = env.events("project=beta").await;
    assert_eq!(beta_only.len(), 1, "{beta_only:?}");
    let (page, next) = env.events_page("project=alpha&limit=1").await;
    assert_eq!(page.len(), 1);
    let next = next.expect("a next page");
    let (page2, _) = env
        .events_page(&format!("project=alpha&limit=1&before={next}"))
        .await;
    assert_eq!(page2.len(), 1);
    assert_ne!(page[0]["id"], page2[0]["id"], "the second page is older");
    let all = env.events("").await;
    let position = |id: &Value| all.iter().position(|e| &e["id"] == id).unwrap();
    assert!(position(&page[0]["id"]) < position(&page2[0]["id"]));
    env.stop().await;
}

#[tokio::test]
async fn reverting_a_write_restores_the_old_bytes_or_the_absence() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    // Overwrite → revert → the original bytes.
    let etag = etag_of(&env, "readme.md").await;
    let write = ok(
        &env,
        "write",
        json!({"rel_path": "readme.md", "content": "rewritten\n", "if_match": etag}),
    )
    .await;
    let w = event_id(&write);
    assert_eq!(
        env.disk_read(&alpha("readme.md")).as_deref(),
        Some(&b"rewritten\n"[..])
    );
    let (status, reverted) = env.revert(&w).await;
    assert_eq!(status, 200, "{reverted}");
    assert_eq!(reverted["data"]["reverted"], w.as_str());
    let revert = &reverted["data"]["revert"];
    let r = revert["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (&revert["op"], &revert["status"], &revert["reverts"]),
        (&json!("revert"), &json!("applied"), &json!(w)),
        "{revert}"
    );
    assert_eq!(revert["actor"]["kind"], "direct");
    assert_eq!(revert["actor"]["user_id"], "op-1");
    assert_eq!(
        env.disk_read(&alpha("readme.md")).as_deref(),
        Some(README),
        "byte-identical"
    );
    let original = env.event(&w).await;
    assert_eq!(original["status"], "reverted");
    assert_eq!(original["reverted_by"], r.as_str());

    // A second revert of the same event does nothing.
    let (status, again) = env.revert(&w).await;
    assert_ne!(status, 200, "reverted twice: {again}");
    assert_eq!(env.disk_read(&alpha("readme.md")).as_deref(), Some(README));

    // Reverting the revert re-applies the write.
    let (status, redo) = env.revert(&r).await;
    assert_eq!(status, 200, "{redo}");
    assert_eq!(redo["data"]["revert"]["reverts"], r.as_str());
    assert_eq!(
        env.disk_read(&alpha("readme.md")).as_deref(),
        Some(&b"rewritten\n"[..])
    );
    assert_eq!(env.event(&r).await["status"], "reverted");

    // Create → revert → absent; revert of the revert → back.
    let create = ok(
        &env,
        "write",
        json!({"rel_path": "fresh/new file.md", "content": "brand new\n"}),
    )
    .await;
    let c = event_id(&create);
    let (status, undone) = env.revert(&c).await;
    assert_eq!(status, 200, "{undone}");
    assert!(
        env.disk_read(&alpha("fresh/new file.md")).is_none(),
        "the created file is gone"
    );
    fails(
        &env,
        "read",
        json!({"rel_path": "fresh/new file.md"}),
        404,
        "not_found",
    )
    .await;
    let rc = undone["data"]["revert"]["id"].as_str().unwrap().to_owned();
    let (status, back) = env.revert(&rc).await;
    assert_eq!(status, 200, "{back}");
    assert_eq!(
        env.disk_read(&alpha("fresh/new file.md")).as_deref(),
        Some(&b"brand new\n"[..])
    );

    // The agent's read still agrees with the disk afterwards.
    let read = ok(&env, "read", json!({"rel_path": "fresh/new file.md"})).await;
    assert_eq!(read["data"]["content"], "brand new\n");
    assert_confined(&env.recorder().all(), &Scope::alpha(), "reverts");
    assert_nothing_destroyed(&env.recorder().all(), "reverts");
    env.stop().await;
}

#[tokio::test]
async fn reverting_a_delete_or_a_move_puts_everything_back() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let start = env.disk_snapshot();

    // Delete → revert → back; revert of the revert → gone again.
    let delete = ok(&env, "delete", json!({"rel_path": ODD, "dry_run": false})).await;
    let d = event_id(&delete);
    assert!(env.disk_read(&alpha(ODD)).is_none());
    let (status, undone) = env.revert(&d).await;
    assert_eq!(status, 200, "{undone}");
    assert_eq!(env.disk_read(&alpha(ODD)).as_deref(), Some(ODD_BYTES));
    let rd = undone["data"]["revert"]["id"].as_str().unwrap().to_owned();
    let (status, redo) = env.revert(&rd).await;
    assert_eq!(status, 200, "{redo}");
    assert!(env.disk_read(&alpha(ODD)).is_none(), "deleted again");
    let (status, _) = env
        .revert(redo["data"]["revert"]["id"].as_str().unwrap())
        .await;
    assert_eq!(status, 200);
    assert_eq!(env.disk_read(&alpha(ODD)).as_deref(), Some(ODD_BYTES));

    // A folder delete.
    let folder = ok(
        &env,
        "delete",
        json!({"rel_path": "docs/sub", "dry_run": false}),
    )
    .await;
    let (status, _) = env.revert(&event_id(&folder)).await;
    assert_eq!(status, 200);
    assert_eq!(
        env.disk_read(&alpha("docs/sub/deep.txt")).as_deref(),
        Some(&b"deep\n"[..])
    );

    // Move → revert → back; revert of the revert → moved again.
    let mv = ok(
        &env,
        "move",
        json!({"from_rel_path": "readme.md", "to_rel_path": "docs/readme.md"}),
    )
    .await;
    let m = event_id(&mv);
    let (status, undone) = env.revert(&m).await;
    assert_eq!(status, 200, "{undone}");
    assert_eq!(env.disk_read(&alpha("readme.md")).as_deref(), Some(README));
    assert!(env.disk_read(&alpha("docs/readme.md")).is_none());
    let rm = undone["data"]["revert"]["id"].as_str().unwrap().to_owned();
    let (status, _) = env.revert(&rm).await;
    assert_eq!(status, 200);
    assert!(env.disk_read(&alpha("readme.md")).is_none());
    assert_eq!(
        env.disk_read(&alpha("docs/readme.md")).as_deref(),
        Some(README)
    );
    ok(
        &env,
        "move",
        json!({"from_rel_path": "docs/readme.md", "to_rel_path": "readme.md"}),
    )
    .await;

    // A move that overwrote: both files come back.
    let over = ok(
        &env,
        "move",
        json!({"from_rel_path": "docs/plan.md", "to_rel_path": ODD, "overwrite": true}),
    )
    .await;
    assert_eq!(env.disk_read(&alpha(ODD)).as_deref(), Some(PLAN));
    let (status, undone) = env.revert(&event_id(&over)).await;
    assert_eq!(status, 200, "{undone}");
    assert_eq!(env.disk_read(&alpha("docs/plan.md")).as_deref(), Some(PLAN));
    assert_eq!(env.disk_read(&alpha(ODD)).as_deref(), Some(ODD_BYTES));

    // The project folder is as it began (the trash keeps what reverts set aside).
    let end = env.disk_snapshot();
    let project = |s: &std::collections::BTreeMap<String, Option<Vec<u8>>>| {
        s.iter()
            .filter(|(k, _)| k.starts_with("Projects/Alpha/"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(project(&end), project(&start));
    assert_eq!(outside_alpha(&end), outside_alpha(&start));
    assert_confined(&env.recorder().all(), &Scope::alpha(), "reverts");
    assert_nothing_destroyed(&env.recorder().all(), "reverts");
    env.stop().await;
}

#[tokio::test]
async fn the_kill_switch_stops_every_write_before_it_reaches_storage() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    ok(
        &env,
        "write",
        json!({"rel_path": "before.md", "content": "written while on\n"}),
    )
    .await;
    let (status, shown) = env.admin("GET", "/admin/kill-switch", None).await;
    assert_eq!(
        (status, &shown["data"]["nc_writes_enabled"]),
        (200, &json!(true))
    );

    env.set_writes_enabled(false).await;
    let (_, shown) = env.admin("GET", "/admin/kill-switch", None).await;
    assert_eq!(shown["data"]["nc_writes_enabled"], false, "{shown}");
    let disk = env.disk_snapshot();
    let events = env.events("").await;
    let etag = etag_of(&env, "readme.md").await;
    let mark = env.recorder().mark();

    for (op, body) in [
        ("write", json!({"rel_path": "new.md", "content": "x"})),
        (
            "write",
            json!({"rel_path": "readme.md", "content": "x", "if_match": etag}),
        ),
        (
            "write",
            json!({"rel_path": "deep/er/new.md", "content": "x"}),
        ),
        ("delete", json!({"rel_path": "readme.md", "dry_run": false})),
        ("delete", json!({"rel_path": "docs", "dry_run": false})),
        (
            "move",
            json!({"from_rel_path": "readme.md", "to_rel_path": "moved.md"}),
        ),
        (
            "move",
            json!({"from_rel_path": "readme.md", "to_rel_path": "docs/plan.md", "overwrite": true}),
        ),
    ] {
        let answer = fails(&env, op, body.clone(), 403, "kill_switch_off").await;
        let numeric = code(&answer).parse::<ErrorCode>().unwrap().numeric();
        assert_eq!(numeric, 40310, "{op} {body}");
    }
    let during = env.recorder().since(mark);
    assert_no_writes(&during, "kill switch off");

    // Reads still work.
    ok(&env, "list", json!({"rel_path": ""})).await;
    let read = ok(&env, "read", json!({"rel_path": "readme.md"})).await;
    assert_eq!(read["data"]["content"].as_str().unwrap().as_bytes(), README);
    ok(&env, "search", json!({"query": "plan"})).await;
    let preview = ok(&env, "delete", json!({"rel_path": "readme.md"})).await;
    assert_eq!(preview["data"]["dry_run"], true);
    assert_no_writes(&env.recorder().since(mark), "kill switch off, reads");

    assert_eq!(env.disk_snapshot(), disk, "storage unchanged");
    let after = env.events("").await;
    assert_eq!(after.len(), events.len(), "no event recorded: {after:?}");
    assert_eq!(after, events, "the database is unchanged");

    // Back on: writes work again.
    env.set_writes_enabled(true).await;
    let back = ok(
        &env,
        "write",
        json!({"rel_path": "after.md", "content": "on again\n"}),
    )
    .await;
    assert_eq!(back["data"]["created"], true);
    assert_eq!(
        env.disk_read(&alpha("after.md")).as_deref(),
        Some(&b"on again\n"[..])
    );
    ok(
        &env,
        "move",
        json!({"from_rel_path": "after.md", "to_rel_path": "after2.md"}),
    )
    .await;
    ok(
        &env,
        "delete",
        json!({"rel_path": "after2.md", "dry_run": false}),
    )
    .await;
    assert!(env.disk_read(&alpha("after2.md")).is_none());
    assert_confined(&env.recorder().all(), &Scope::alpha(), "kill switch");
    assert_nothing_destroyed(&env.recorder().all(), "kill switch");
    env.stop().await;
}

#[tokio::test]
async fn the_environment_can_start_with_writes_off() {
    let Some(env) =
        NcEnv::start_with(vec![("ACDM_AI_NC_WRITES_ENABLED", "false".to_owned())]).await
    else {
        return;
    };
    let (_, shown) = env.admin("GET", "/admin/kill-switch", None).await;
    assert_eq!(shown["data"]["nc_writes_enabled"], false, "{shown}");
    let mark = env.recorder().mark();
    fails(
        &env,
        "write",
        json!({"rel_path": "x.md", "content": "x"}),
        403,
        "kill_switch_off",
    )
    .await;
    fails(
        &env,
        "delete",
        json!({"rel_path": "readme.md", "dry_run": false}),
        403,
        "kill_switch_off",
    )
    .await;
    fails(
        &env,
        "move",
        json!({"from_rel_path": "readme.md", "to_rel_path": "y.md"}),
        403,
        "kill_switch_off",
    )
    .await;
    assert_no_writes(&env.recorder().since(mark), "writes off from the start");
    ok(&env, "read", json!({"rel_path": "readme.md"})).await;
    assert!(env.disk_read(&alpha("x.md")).is_none());
    assert!(env.events("").await.is_empty());
    env.stop().await;
}

/// The typed methods of the harness client against the real service: the
/// request and response types are the ones the backend uses, so a drift
/// between the two sides fails here (as `internal_error`, "expected shape").
#[tokio::test]
async fn the_harness_clients_typed_methods_round_trip_every_operation() {
    use acdm_core::nc::{
        DeleteRequest, Encoding, ListRequest, MoveRequest, ReadRequest, SearchRequest, WriteRequest,
    };
    let Some(env) = NcEnv::start().await else {
        return;
    };
    let identity = acdm_core::Identity::new(
        acdm_core::UserId::parse("u-1").unwrap(),
        acdm_core::AgentName::parse("project-alpha").unwrap(),
        acdm_core::ThreadId::parse("t-1").unwrap(),
    );
    let client = &env.harness;
    let run = async {
        let mounts = client.nc_list_mounts().await;
        assert!(mounts.is_success(), "{mounts:?}");
        assert_eq!(mounts.data().unwrap().mounts[0].name, "project");

        let written = client
            .nc_write(&WriteRequest {
                rel_path: "typed/hello.bin".into(),
                content: "AAEC/w==".into(),
                encoding: Some(Encoding::Base64),
                ..WriteRequest::default()
            })
            .await;
        assert!(written.is_success(), "{written:?}");
        let written = written.into_data().unwrap();
        assert!(written.created);
        assert_eq!(written.size, 4);

        let read = client
            .nc_read(&ReadRequest {
                rel_path: "typed/hello.bin".into(),
                ..ReadRequest::default()
            })
            .await
            .into_data()
            .unwrap();
        assert_eq!(
            (read.encoding, read.content.as_str()),
            (Encoding::Base64, "AAEC/w==")
        );
        assert_eq!(read.etag, written.etag);

        let listed = client
            .nc_list(&ListRequest {
                rel_path: "typed".into(),
                ..ListRequest::default()
            })
            .await
            .into_data()
            .unwrap();
        assert_eq!(listed.entries.len(), 1);
        assert_eq!(listed.entries[0].rel_path, "typed/hello.bin");

        let found = client
            .nc_search(&SearchRequest {
                query: "hello".into(),
                ..SearchRequest::default()
            })
            .await;
        assert!(found.is_success(), "{found:?}");

        let moved = client
            .nc_move(&MoveRequest {
                from_rel_path: "typed/hello.bin".into(),
                to_rel_path: "typed/renamed.bin".into(),
                ..MoveRequest::default()
            })
            .await
            .into_data()
            .unwrap();
        assert!(!moved.overwritten);

        let preview = client
            .nc_delete(&DeleteRequest {
                rel_path: "typed".into(),
                ..DeleteRequest::default()
            })
            .await
            .into_data()
            .unwrap();
        assert!(preview.dry_run);
        assert_eq!(preview.count, Some(2));
        let deleted = client
            .nc_delete(&DeleteRequest {
                rel_path: "typed".into(),
                dry_run: false,
                ..DeleteRequest::default()
            })
            .await
            .into_data()
            .unwrap();
        assert!(deleted.event_id.is_some());

        // A failure keeps its code and message through the typed path.
        let conflict = client
            .nc_move(&MoveRequest {
                from_rel_path: "readme.md".into(),
                to_rel_path: "readme.md".into(),
                ..MoveRequest::default()
            })
            .await;
        assert_eq!(conflict.error_code(), Some(acdm_core::ErrorCode::Conflict));
    };
    acdm_harness_client::with_identity(identity, run).await;
    env.stop().await;
}
