//! The wiki contract: the local-folder wiki and the GitLab client (against
//! a double following GitLab's documented wire format) answer the same
//! searches and reads the same way. Then what only GitLab has: refs, the
//! token, the exact requests, pagination, and its error forms.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use acdm_core::RelPath;
use acdm_sources::gitlab::{GitLabConfig, GitLabWiki};
use acdm_sources::http::{HttpClient, HttpSettings};
use acdm_sources::local::LocalWiki;
use acdm_sources::{GitRef, ReadRange, SourceError, WikiHit, WikiQuery, WikiSource};
use secrecy::SecretString;

use crate::harness::test_http;
use acdm_test_support::gitlab::{GitLabDouble, Mode};

const TOKEN: &str = "glpat-valid-test-token";

fn fixture() -> BTreeMap<String, Vec<u8>> {
    let mut big = String::new();
    for n in 1..=300 {
        big.push_str(&format!("line {n}: filler text for windows\n"));
    }
    [
        (
            "README.md",
            "# LLM wiki\nStart here.\nSee guides/deploy/rollout.md for deployments.\n".to_owned(),
        ),
        (
            "guides/deploy/rollout.md",
            "# Rollout\nfirst\nDeploy the service with the blue/green switch.\nlast\n".to_owned(),
        ),
        (
            "guides/deploy-old/legacy.md",
            "Old deploy notes.\n".to_owned(),
        ),
        (
            "guides/onboarding.md",
            "Welcome to the team.\nAsk in #ops before you deploy.\n".to_owned(),
        ),
        (
            "policies/security.md",
            "Rotate tokens every 90 days.\n".to_owned(),
        ),
        ("big.md", big),
    ]
    .into_iter()
    .map(|(p, c)| (p.to_owned(), c.into_bytes()))
    .collect()
}

/// One wiki under test, with what keeps it alive.
struct Wiki {
    name: &'static str,
    wiki: Arc<dyn WikiSource>,
    _keep: Box<dyn std::any::Any>,
}

async fn gitlab_with(
    settings: Option<HttpSettings>,
    token: Option<&str>,
) -> (GitLabWiki, GitLabDouble) {
    let mut refs = BTreeMap::new();
    refs.insert("main".to_owned(), fixture());
    let mut v1 = BTreeMap::new();
    v1.insert("README.md".to_owned(), b"# LLM wiki (v1)\n".to_vec());
    refs.insert("v1".to_owned(), v1);
    let double = GitLabDouble::start("docs/wiki", TOKEN, refs).await;
    let http = settings.map_or_else(test_http, |s| HttpClient::new(s).unwrap());
    let wiki = GitLabWiki::new(
        GitLabConfig {
            base_url: double.base_url.clone(),
            project: "docs/wiki".to_owned(),
            token: token.map(|t| SecretString::from(t.to_owned())),
            default_ref: GitRef::parse("main").unwrap(),
        },
        http,
    )
    .unwrap();
    (wiki, double)
}

async fn wikis() -> Vec<Wiki> {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in fixture() {
        let file = dir.path().join(&path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }
    let local = LocalWiki::open(dir.path(), GitRef::parse("main").unwrap()).unwrap();
    let (gitlab, double) = gitlab_with(None, Some(TOKEN)).await;
    vec![
        Wiki {
            name: "local",
            wiki: Arc::new(local),
            _keep: Box::new(dir),
        },
        Wiki {
            name: "gitlab",
            wiki: Arc::new(gitlab),
            _keep: Box::new(double),
        },
    ]
}

fn query(term: &str, limit: usize, prefix: Option<&str>) -> WikiQuery {
    WikiQuery {
        term: term.to_owned(),
        limit,
        path_prefix: prefix.map(|p| RelPath::parse(p).unwrap()),
        git_ref: None,
    }
}

fn summary(hits: &[WikiHit]) -> Vec<(String, u64)> {
    hits.iter()
        .map(|h| (h.path.to_string(), h.start_line))
        .collect()
}

#[tokio::test]
async fn searches_find_paths_first_then_content_with_line_numbers() {
    for w in wikis().await {
        let found = w.wiki.search(&query("deploy", 20, None)).await.unwrap();
        assert_eq!(
            summary(&found.hits),
            vec![
                ("guides/deploy-old/legacy.md".to_owned(), 1),
                ("guides/deploy/rollout.md".to_owned(), 1),
                ("README.md".to_owned(), 2),
                ("guides/deploy-old/legacy.md".to_owned(), 1),
                ("guides/deploy/rollout.md".to_owned(), 2),
                ("guides/onboarding.md".to_owned(), 1),
            ],
            "{}",
            w.name
        );
        assert_eq!(found.total, Some(6), "{}", w.name);
        let rollout = &found.hits[4];
        assert_eq!(
            rollout.snippet, "first\nDeploy the service with the blue/green switch.\nlast",
            "{}",
            w.name
        );
        assert!(
            found.hits[0].snippet.is_empty(),
            "{}: a path match has no snippet",
            w.name
        );
    }
}

#[tokio::test]
async fn the_limit_caps_hits_and_the_total_still_counts_all() {
    for w in wikis().await {
        let found = w.wiki.search(&query("deploy", 2, None)).await.unwrap();
        assert_eq!(found.hits.len(), 2, "{}", w.name);
        assert_eq!(found.total, Some(6), "{}", w.name);
        let none = w
            .wiki
            .search(&query("no such words anywhere", 10, None))
            .await
            .unwrap();
        assert!(none.hits.is_empty(), "{}", w.name);
    }
}

#[tokio::test]
async fn a_path_prefix_keeps_whole_folders_only() {
    for w in wikis().await {
        let found = w
            .wiki
            .search(&query("deploy", 20, Some("guides/deploy")))
            .await
            .unwrap();
        assert_eq!(
            summary(&found.hits),
            vec![
                ("guides/deploy/rollout.md".to_owned(), 1),
                ("guides/deploy/rollout.md".to_owned(), 2)
            ],
            "{}: guides/deploy-old is a sibling, not inside",
            w.name
        );
        let found = w
            .wiki
            .search(&query("tokens", 20, Some("guides")))
            .await
            .unwrap();
        assert!(found.hits.is_empty(), "{}", w.name);
    }
}

#[tokio::test]
async fn reads_return_windows_of_the_file() {
    for w in wikis().await {
        let path = RelPath::parse("big.md").unwrap();
        let whole = w
            .wiki
            .read(&path, None, ReadRange::new(0, 1 << 20))
            .await
            .unwrap();
        let size = whole.window.bytes.len() as u64;
        assert_eq!(whole.window.size, Some(size), "{}", w.name);
        assert_eq!(whole.git_ref.as_str(), "main");
        assert!(whole.window.bytes.starts_with(b"line 1: filler"));
        let middle = w
            .wiki
            .read(&path, None, ReadRange::new(100, 50))
            .await
            .unwrap();
        assert_eq!(
            &middle.window.bytes[..],
            &whole.window.bytes[100..150],
            "{}",
            w.name
        );
        assert!(middle.window.has_more(50));
        let tail = w
            .wiki
            .read(&path, None, ReadRange::new(size - 10, 100))
            .await
            .unwrap();
        assert_eq!(tail.window.bytes.len(), 10, "{}", w.name);
        assert!(!tail.window.has_more(100));
        let past = w
            .wiki
            .read(&path, None, ReadRange::new(size + 5, 10))
            .await
            .unwrap();
        assert!(past.window.bytes.is_empty(), "{}", w.name);
    }
}

#[tokio::test]
async fn missing_files_unknown_refs_and_empty_terms_are_typed_errors() {
    for w in wikis().await {
        let missing = w
            .wiki
            .read(
                &RelPath::parse("nope.md").unwrap(),
                None,
                ReadRange::new(0, 10),
            )
            .await;
        assert!(
            matches!(missing, Err(SourceError::NotFound(_))),
            "{}: {missing:?}",
            w.name
        );
        let bad_ref = GitRef::parse("no-such-branch").unwrap();
        let unknown = w
            .wiki
            .read(
                &RelPath::parse("README.md").unwrap(),
                Some(&bad_ref),
                ReadRange::new(0, 10),
            )
            .await;
        assert!(
            matches!(unknown, Err(SourceError::NotFound(ref m)) if m.contains("no-such-branch")),
            "{}: {unknown:?}",
            w.name
        );
        let empty = w.wiki.search(&query("   ", 10, None)).await;
        assert!(
            matches!(empty, Err(SourceError::InvalidRequest(_))),
            "{}",
            w.name
        );
        w.wiki.check().await.unwrap();
    }
}

#[tokio::test]
async fn gitlab_reads_other_refs_and_sends_the_documented_requests() {
    let (wiki, double) = gitlab_with(None, Some(TOKEN)).await;
    let v1 = GitRef::parse("v1").unwrap();
    let read = wiki
        .read(
            &RelPath::parse("README.md").unwrap(),
            Some(&v1),
            ReadRange::new(0, 100),
        )
        .await
        .unwrap();
    assert_eq!(&read.window.bytes[..], b"# LLM wiki (v1)\n");
    wiki.read(
        &RelPath::parse("guides/deploy/rollout.md").unwrap(),
        None,
        ReadRange::new(0, 10),
    )
    .await
    .unwrap();
    wiki.search(&WikiQuery {
        git_ref: Some(v1),
        ..query("wiki", 5, Some("guides/deploy"))
    })
    .await
    .unwrap();
    let requests = double.requests();
    let paths: Vec<&str> = requests.iter().map(|r| r.path_and_query.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "/api/v4/projects/docs%2Fwiki/repository/files/README%2Emd/raw?ref=v1",
            "/api/v4/projects/docs%2Fwiki/repository/files/guides%2Fdeploy%2Frollout%2Emd/raw?ref=main",
            "/api/v4/projects/docs%2Fwiki/search?scope=blobs&search=wiki+path%3Aguides%2Fdeploy&ref=v1&per_page=20&page=1",
        ]
    );
    for r in &requests {
        assert_eq!(r.header("private-token"), Some(TOKEN));
        assert!(
            r.headers.iter().all(|(k, _)| !k.starts_with("x-acdm")),
            "no caller header is forwarded"
        );
        assert!(
            r.header("user-agent")
                .is_some_and(|ua| ua.starts_with("acdm-backend"))
        );
    }
}

/// A prefix with a space cannot go into GitLab's `path:` filter, so every
/// match comes back and the client re-checks and pages on `X-Next-Page`.
#[tokio::test]
async fn gitlab_search_pages_on_x_next_page_while_the_recheck_drops_hits() {
    let mut main = BTreeMap::new();
    for n in 0..60 {
        main.insert(format!("other/f{n:02}.md"), b"a needle here\n".to_vec());
    }
    for n in 0..5 {
        main.insert(format!("zz notes/n{n}.md"), b"the needle\n".to_vec());
    }
    let double = GitLabDouble::start(
        "docs/wiki",
        TOKEN,
        BTreeMap::from([("main".to_owned(), main)]),
    )
    .await;
    let wiki = GitLabWiki::new(
        GitLabConfig {
            base_url: double.base_url.clone(),
            project: "42".to_owned(),
            token: Some(SecretString::from(TOKEN)),
            default_ref: GitRef::parse("main").unwrap(),
        },
        test_http(),
    )
    .unwrap();
    let found = wiki
        .search(&query("needle", 5, Some("zz notes")))
        .await
        .unwrap();
    let paths: Vec<String> = found.hits.iter().map(|h| h.path.to_string()).collect();
    assert_eq!(
        paths,
        (0..5)
            .map(|n| format!("zz notes/n{n}.md"))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        found.total, None,
        "GitLab's total counted hits outside the prefix"
    );
    let pages: Vec<String> = double
        .requests()
        .iter()
        .map(|r| r.path_and_query.clone())
        .collect();
    assert_eq!(pages.len(), 4, "{pages:?}");
    for (i, page) in pages.iter().enumerate() {
        assert!(
            page.starts_with(
                "/api/v4/projects/42/search?scope=blobs&search=needle&per_page=20&page="
            ),
            "{page}"
        );
        assert!(page.ends_with(&format!("page={}", i + 1)), "{page}");
    }
}

#[tokio::test]
async fn gitlab_errors_are_typed_and_never_echo_the_token() {
    let (wiki, double) = gitlab_with(None, Some("glpat-wrong")).await;
    let e = wiki.search(&query("deploy", 5, None)).await.unwrap_err();
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
    assert!(
        e.to_string().contains("GITLAB_WIKI_PAT") && !e.to_string().contains("glpat"),
        "{e}"
    );
    assert_eq!(double.requests().len(), 1, "a 401 is not retried");

    let (wiki, double) = gitlab_with(None, None).await;
    let e = wiki
        .read(
            &RelPath::parse("README.md").unwrap(),
            None,
            ReadRange::new(0, 1),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, SourceError::NotConfigured(ref m) if m.contains("GITLAB_WIKI_PAT")),
        "{e:?}"
    );
    assert!(double.requests().is_empty(), "nothing sent without a token");

    let no_retry = HttpSettings {
        retries: 0,
        ..HttpSettings::default()
    };
    let (wiki, double) = gitlab_with(Some(no_retry.clone()), Some(TOKEN)).await;
    double.set_mode(Mode::RackAttack429);
    let e = wiki.search(&query("deploy", 5, None)).await.unwrap_err();
    assert!(
        matches!(e, SourceError::RateLimited { retry_after: Some(d), .. } if d <= Duration::from_secs(2)),
        "{e:?}"
    );
    double.set_mode(Mode::AppLimit429);
    let e = wiki.search(&query("deploy", 5, None)).await.unwrap_err();
    assert!(
        matches!(
            e,
            SourceError::RateLimited {
                retry_after: None,
                ..
            }
        ),
        "{e:?}"
    );
    double.set_mode(Mode::Timeout408);
    let e = wiki.search(&query("deploy", 5, None)).await.unwrap_err();
    assert!(matches!(e, SourceError::Timeout(_)), "{e:?}");
    double.set_mode(Mode::Status(403));
    let e = wiki
        .read(
            &RelPath::parse("README.md").unwrap(),
            None,
            ReadRange::new(0, 1),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, SourceError::PermissionDenied(_)), "{e:?}");
    double.set_mode(Mode::Status(500));
    let e = wiki.check().await.unwrap_err();
    assert!(
        matches!(
            e,
            SourceError::Upstream {
                status: Some(500),
                ..
            }
        ),
        "{e:?}"
    );

    // A project the token cannot see is a configuration problem.
    let (_, double) = gitlab_with(Some(no_retry.clone()), Some(TOKEN)).await;
    let elsewhere = GitLabWiki::new(
        GitLabConfig {
            base_url: double.base_url.clone(),
            project: "other/project".to_owned(),
            token: Some(SecretString::from(TOKEN)),
            default_ref: GitRef::parse("main").unwrap(),
        },
        HttpClient::new(no_retry).unwrap(),
    )
    .unwrap();
    let e = elsewhere.check().await.unwrap_err();
    assert!(
        matches!(e, SourceError::NotConfigured(ref m) if m.contains("GITLAB_WIKI_PROJECT_ID")),
        "{e:?}"
    );
}

// The clock is paused: the wait for Retry-After is measured on tokio's
// clock, which only the retry's sleep (or a timeout, none of which fires
// against this prompt double) moves, so the test waits for nothing real.
/// The default budget of a whole call.
fn settings_timeout() -> Duration {
    HttpSettings::default().timeout
}

#[tokio::test(start_paused = true)]
async fn a_short_retry_after_is_waited_out_then_reported() {
    let settings = HttpSettings {
        retries: 1,
        max_retry_after: Duration::from_secs(2),
        ..HttpSettings::default()
    };
    let (wiki, double) = gitlab_with(Some(settings), Some(TOKEN)).await;
    double.set_mode(Mode::RackAttack429);
    let started = tokio::time::Instant::now();
    let e = wiki.search(&query("deploy", 5, None)).await.unwrap_err();
    assert!(matches!(e, SourceError::RateLimited { .. }), "{e:?}");
    assert_eq!(double.requests().len(), 2, "one retry after Retry-After");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(1) && waited < settings_timeout(),
        "waited for Retry-After (1 s), within the budget: {waited:?}"
    );
}
