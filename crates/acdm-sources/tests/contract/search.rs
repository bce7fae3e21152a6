//! The file-search contract: the local search and the Nextcloud client
//! (against a double of the OCS unified search over the same folder tree)
//! find the same names, and only inside the scope asked for — whatever the
//! server returns.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use acdm_sources::local::{LocalFileSearch, LocalFileStore};
use acdm_sources::nextcloud::{NextcloudConfig, NextcloudSearch};
use acdm_sources::{FileSearch, SourceError};
use secrecy::SecretString;
use serde_json::json;

use crate::harness::{abs, test_http};
use crate::ocs_double::OcsDouble;

fn tree(root: &Path) {
    for (path, content) in [
        ("Projects/Alpha/notes/plan.md", "the plan for the kickoff"),
        ("Projects/Alpha/notes/Plan-old.md", "archived"),
        ("Projects/Alpha/Planning/x.md", "x"),
        ("Projects/Alpha/other.md", "nothing here"),
        ("Projects/Alpha-evil/plan.md", "outside"),
        ("Projects/Beta/plan.md", "outside"),
    ] {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }
}

struct Searcher {
    name: &'static str,
    search: Arc<dyn FileSearch>,
    double: Option<OcsDouble>,
    _dir: tempfile::TempDir,
}

async fn searchers() -> Vec<Searcher> {
    let local_dir = tempfile::tempdir().unwrap();
    tree(local_dir.path());
    let local = LocalFileSearch::new(LocalFileStore::open(local_dir.path()).unwrap());
    let nc_dir = tempfile::tempdir().unwrap();
    tree(nc_dir.path());
    let double = OcsDouble::start(nc_dir.path().to_owned(), "u", "p").await;
    let nextcloud = NextcloudSearch::new(config(&double, Some("p")), test_http()).unwrap();
    vec![
        Searcher {
            name: "local",
            search: Arc::new(local),
            double: None,
            _dir: local_dir,
        },
        Searcher {
            name: "nextcloud",
            search: Arc::new(nextcloud),
            double: Some(double),
            _dir: nc_dir,
        },
    ]
}

fn config(double: &OcsDouble, password: Option<&str>) -> NextcloudConfig {
    NextcloudConfig {
        url: double.base_url.clone(),
        user: "u".to_owned(),
        app_password: password.map(|p| SecretString::from(p.to_owned())),
    }
}

/// The paths found; each path appears once (a file matching by name and
/// by content is one hit).
async fn paths(search: &dyn FileSearch, term: &str, limit: usize, scope: &str) -> BTreeSet<String> {
    let hits = search.search(term, limit, &abs(scope)).await.unwrap();
    let paths: BTreeSet<String> = hits.iter().map(|h| h.path.to_string()).collect();
    assert_eq!(paths.len(), hits.len(), "one hit per path: {hits:?}");
    paths
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn names_are_found_inside_the_scope_only() {
    for s in searchers().await {
        let found = paths(s.search.as_ref(), "PLAN", 10, "/Projects/Alpha").await;
        assert_eq!(
            found,
            set(&[
                "/Projects/Alpha/Planning",
                "/Projects/Alpha/notes/Plan-old.md",
                "/Projects/Alpha/notes/plan.md"
            ]),
            "{}: not Alpha-evil, not Beta",
            s.name
        );
        let narrower = paths(s.search.as_ref(), "plan", 10, "/Projects/Alpha/notes").await;
        assert_eq!(
            narrower,
            set(&[
                "/Projects/Alpha/notes/Plan-old.md",
                "/Projects/Alpha/notes/plan.md"
            ]),
            "{}",
            s.name
        );
        assert!(
            paths(
                s.search.as_ref(),
                "nothing-matches-this",
                10,
                "/Projects/Alpha"
            )
            .await
            .is_empty()
        );
        assert!(
            paths(s.search.as_ref(), "plan", 10, "/Projects/Gamma")
                .await
                .is_empty(),
            "{}: missing scope",
            s.name
        );
    }
}

#[tokio::test]
async fn hostile_results_from_the_server_are_dropped() {
    for s in searchers().await {
        let Some(double) = &s.double else { continue };
        let entry = |path: serde_json::Value| json!({"title": "plan.md", "icon": "/core/img/filetypes/text.svg", "attributes": {"fileId": "9", "path": path}});
        double.inject_entries(vec![
            entry(json!("/Projects/Alpha/../Beta/plan.md")),
            entry(json!("/Projects/Alpha/%2e%2e/Beta/plan.md")),
            entry(json!("/Projects/Alpha-evil/plan.md")),
            entry(json!("/Projects/Beta/plan.md")),
            entry(json!("../../etc/passwd")),
            entry(json!("/Projects/Alpha")),
            entry(json!("/Projects/Alpha/notes/plan.md")),
            entry(json!(42)),
            json!({"title": "no attributes"}),
            json!({"title": "odd", "attributes": {"path": "/Projects/Alpha/\u{202e}dm.nalp"}}),
        ]);
        let found = paths(s.search.as_ref(), "plan", 20, "/Projects/Alpha").await;
        assert_eq!(
            found,
            set(&[
                "/Projects/Alpha/Planning",
                "/Projects/Alpha/notes/Plan-old.md",
                "/Projects/Alpha/notes/plan.md"
            ]),
            "{}",
            s.name
        );
    }
}

#[tokio::test]
async fn the_limit_is_kept_across_pages() {
    for s in searchers().await {
        let root = s._dir.path().join("Projects/Alpha/bulk");
        std::fs::create_dir_all(&root).unwrap();
        for n in 0..30 {
            std::fs::write(root.join(format!("plan-{n:02}.md")), "x").unwrap();
        }
        let hits = s
            .search
            .search("plan-", 28, &abs("/Projects/Alpha"))
            .await
            .unwrap();
        assert_eq!(hits.len(), 28, "{}", s.name);
        let unique: BTreeSet<_> = hits.iter().map(|h| h.path.to_string()).collect();
        assert_eq!(unique.len(), 28, "{}: no duplicates", s.name);
        if let Some(double) = &s.double {
            let cursors: Vec<String> = double
                .requests()
                .iter()
                .map(|r| {
                    r.path_and_query
                        .rsplit("cursor=")
                        .next()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect();
            assert_eq!(cursors, vec!["0", "25"], "two pages of 25");
            for r in double.requests() {
                assert_eq!(r.header("ocs-apirequest"), Some("true"));
                assert_eq!(r.header("accept"), Some("application/json"));
                assert!(
                    r.header("authorization")
                        .is_some_and(|v| v.starts_with("Basic "))
                );
                assert!(r.path_and_query.contains("limit=25"));
            }
        }
    }
}

#[tokio::test]
async fn search_errors_are_typed() {
    for s in searchers().await {
        let empty = s.search.search("  ", 5, &abs("/Projects/Alpha")).await;
        assert!(
            matches!(empty, Err(SourceError::InvalidRequest(_))),
            "{}: {empty:?}",
            s.name
        );
    }
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let double = OcsDouble::start(dir.path().to_owned(), "u", "p").await;
    let wrong = NextcloudSearch::new(config(&double, Some("wrong")), test_http()).unwrap();
    let e = wrong
        .search("plan", 5, &abs("/Projects/Alpha"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            SourceError::Upstream {
                status: Some(401),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(!e.to_string().contains("wrong"), "{e}");
    let before = double.requests().len();
    let unset = NextcloudSearch::new(config(&double, None), test_http()).unwrap();
    let e = unset
        .search("plan", 5, &abs("/Projects/Alpha"))
        .await
        .unwrap_err();
    assert!(
        matches!(e, SourceError::NotConfigured(ref m) if m.contains("NEXTCLOUD_APP_PASSWORD")),
        "{e:?}"
    );
    assert_eq!(
        double.requests().len(),
        before,
        "nothing sent without a password"
    );
}
