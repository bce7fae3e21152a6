//! The wiki's incremental-sync contract: `head` says whether anything
//! changed, `tree` lists every file with its blob id, and `read` at the
//! commit fetches a file as it was. The local-folder wiki and the GitLab
//! client (against the shared GitLab double, whose repository changes while
//! it runs) answer the same way; then what only GitLab has: history, keyset
//! pages, a next-page link that must not lead elsewhere, and the exact
//! requests.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use acdm_core::RelPath;
use acdm_sources::gitlab::{GitLabConfig, GitLabWiki};
use acdm_sources::http::{HttpClient, HttpSettings};
use acdm_sources::local::LocalWiki;
use acdm_sources::{GitRef, ReadRange, SourceError, WikiBlob, WikiSource};
use acdm_test_support::gitlab::{GitLabDouble, Mode, git_blob_id};
use secrecy::SecretString;

use crate::harness::test_http;

const TOKEN: &str = "glpat-valid-test-token";
const PROJECT: &str = "docs/wiki";

fn fixture() -> BTreeMap<String, Vec<u8>> {
    [
        ("README.md", "# LLM wiki\nStart here.\n"),
        ("guides/deploy/rollout.md", "# Rollout\nBlue/green.\n"),
        ("guides/onboarding.md", "Welcome to the team.\n"),
        ("policies/security.md", "Rotate tokens every 90 days.\n"),
    ]
    .into_iter()
    .map(|(p, c)| (p.to_owned(), c.as_bytes().to_vec()))
    .collect()
}

/// A wiki under test, and how to change it behind the source's back.
struct Wiki {
    name: &'static str,
    wiki: Arc<dyn WikiSource>,
    editor: Editor,
}

enum Editor {
    Local(tempfile::TempDir),
    GitLab(GitLabDouble),
}

impl Editor {
    fn disk(&self, path: &str) -> PathBuf {
        match self {
            Editor::Local(dir) => dir.path().join(path),
            Editor::GitLab(_) => unreachable!("only the local wiki has a folder"),
        }
    }

    fn put(&self, path: &str, bytes: &[u8]) {
        match self {
            Editor::Local(_) => {
                let file = self.disk(path);
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(file, bytes).unwrap();
            }
            Editor::GitLab(double) => {
                double.put_file(path, bytes);
            }
        }
    }

    fn delete(&self, path: &str) {
        match self {
            Editor::Local(_) => std::fs::remove_file(self.disk(path)).unwrap(),
            Editor::GitLab(double) => {
                double.delete_file(path);
            }
        }
    }
}

fn gitlab_wiki(double: &GitLabDouble, default_ref: &str, http: HttpClient) -> GitLabWiki {
    GitLabWiki::new(
        GitLabConfig {
            base_url: double.base_url.clone(),
            project: PROJECT.to_owned(),
            token: Some(SecretString::from(TOKEN)),
            default_ref: GitRef::parse(default_ref).unwrap(),
        },
        http,
    )
    .unwrap()
}

async fn gitlab_with(files: BTreeMap<String, Vec<u8>>) -> (GitLabWiki, GitLabDouble) {
    let double =
        GitLabDouble::start(PROJECT, TOKEN, BTreeMap::from([("main".to_owned(), files)])).await;
    (gitlab_wiki(&double, "main", test_http()), double)
}

async fn wikis() -> Vec<Wiki> {
    let dir = tempfile::tempdir().unwrap();
    let local = LocalWiki::open(dir.path(), GitRef::parse("main").unwrap()).unwrap();
    let editor = Editor::Local(dir);
    for (path, content) in fixture() {
        editor.put(&path, &content);
    }
    // Hidden entries are not part of the wiki: the search skips them, and
    // so does the tree.
    editor.put(".acdm-trash/old.md", b"gone\n");
    editor.put(".hidden.md", b"hidden\n");
    let (gitlab, double) = gitlab_with(fixture()).await;
    vec![
        Wiki {
            name: "local",
            wiki: Arc::new(local),
            editor,
        },
        Wiki {
            name: "gitlab",
            wiki: Arc::new(gitlab),
            editor: Editor::GitLab(double),
        },
    ]
}

fn ids(tree: &[WikiBlob]) -> BTreeMap<String, String> {
    tree.iter()
        .map(|b| (b.path.to_string(), b.blob_id.clone()))
        .collect()
}

fn is_hex_id(id: &str) -> bool {
    id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

async fn read_all(wiki: &dyn WikiSource, path: &str, git_ref: Option<&GitRef>) -> Vec<u8> {
    wiki.read(
        &RelPath::parse(path).unwrap(),
        git_ref,
        ReadRange::new(0, 1 << 20),
    )
    .await
    .unwrap()
    .window
    .bytes
    .to_vec()
}

#[tokio::test]
async fn head_then_tree_lists_every_file_with_its_blob_id() {
    for w in wikis().await {
        let head = w.wiki.head().await.unwrap();
        assert!(is_hex_id(&head.commit), "{}: {head:?}", w.name);
        assert_eq!(head.ref_name.as_str(), "main", "{}", w.name);
        assert!(head.committed_at.is_some(), "{}: {head:?}", w.name);
        let tree = w.wiki.tree(&head.commit).await.unwrap();
        let paths: Vec<String> = tree.iter().map(|b| b.path.to_string()).collect();
        assert_eq!(
            paths,
            fixture().into_keys().collect::<Vec<_>>(),
            "{}: files only, sorted, hidden ones left out",
            w.name
        );
        assert!(tree.iter().all(|b| is_hex_id(&b.blob_id)), "{}", w.name);
        let distinct: std::collections::BTreeSet<&str> =
            tree.iter().map(|b| b.blob_id.as_str()).collect();
        assert_eq!(distinct.len(), tree.len(), "{}", w.name);
        // Nothing changed: the same head and the same ids.
        let again = w.wiki.head().await.unwrap();
        assert_eq!(again.commit, head.commit, "{}", w.name);
        assert_eq!(
            w.wiki.tree(&again.commit).await.unwrap(),
            tree,
            "{}",
            w.name
        );
        // A whole file at the commit, through the ordinary read.
        let at = GitRef::parse(&head.commit).unwrap();
        let read = w
            .wiki
            .read(
                &RelPath::parse("README.md").unwrap(),
                Some(&at),
                ReadRange::new(0, 1 << 20),
            )
            .await
            .unwrap();
        assert_eq!(&read.window.bytes[..], b"# LLM wiki\nStart here.\n");
        assert_eq!(read.git_ref, at, "{}", w.name);
    }
}

#[tokio::test]
async fn gitlab_blob_ids_are_gits() {
    let (wiki, double) = gitlab_with(fixture()).await;
    let head = wiki.head().await.unwrap();
    assert_eq!(Some(head.commit.clone()), double.head());
    let tree = wiki.tree(&head.commit).await.unwrap();
    let expected: BTreeMap<String, String> = fixture()
        .into_iter()
        .map(|(p, c)| (p, git_blob_id(&c)))
        .collect();
    assert_eq!(ids(&tree), expected);
}

#[tokio::test]
async fn a_change_moves_the_head_and_that_files_blob_id_only() {
    for w in wikis().await {
        let before_head = w.wiki.head().await.unwrap();
        let before = ids(&w.wiki.tree(&before_head.commit).await.unwrap());
        w.editor
            .put("guides/onboarding.md", b"Welcome to the team, again.\n");
        let after_head = w.wiki.head().await.unwrap();
        assert_ne!(after_head.commit, before_head.commit, "{}", w.name);
        let after = ids(&w.wiki.tree(&after_head.commit).await.unwrap());
        assert_eq!(
            after.keys().collect::<Vec<_>>(),
            before.keys().collect::<Vec<_>>(),
            "{}",
            w.name
        );
        let changed: Vec<&String> = after
            .iter()
            .filter(|(path, id)| before.get(*path) != Some(*id))
            .map(|(path, _)| path)
            .collect();
        assert_eq!(changed, vec!["guides/onboarding.md"], "{}", w.name);
        let at = GitRef::parse(&after_head.commit).unwrap();
        assert_eq!(
            read_all(w.wiki.as_ref(), "guides/onboarding.md", Some(&at)).await,
            b"Welcome to the team, again.\n",
            "{}",
            w.name
        );
    }
}

#[tokio::test]
async fn a_deletion_removes_the_file_from_the_tree() {
    for w in wikis().await {
        let before_head = w.wiki.head().await.unwrap();
        let before = ids(&w.wiki.tree(&before_head.commit).await.unwrap());
        w.editor.delete("policies/security.md");
        let after_head = w.wiki.head().await.unwrap();
        assert_ne!(after_head.commit, before_head.commit, "{}", w.name);
        let after = ids(&w.wiki.tree(&after_head.commit).await.unwrap());
        let mut expected = before.clone();
        expected.remove("policies/security.md");
        assert_eq!(after, expected, "{}: the rest unchanged", w.name);
    }
}

#[tokio::test]
async fn an_unknown_commit_is_not_found() {
    for w in wikis().await {
        let unknown = "0123456789abcdef0123456789abcdef01234567";
        let e = w.wiki.tree(unknown).await.unwrap_err();
        assert!(matches!(e, SourceError::NotFound(_)), "{}: {e:?}", w.name);
        let e = w
            .wiki
            .read(
                &RelPath::parse("README.md").unwrap(),
                Some(&GitRef::parse(unknown).unwrap()),
                ReadRange::new(0, 10),
            )
            .await
            .unwrap_err();
        assert!(matches!(e, SourceError::NotFound(_)), "{}: {e:?}", w.name);
        let e = w.wiki.tree("not a commit").await.unwrap_err();
        assert!(
            matches!(e, SourceError::InvalidRequest(_)),
            "{}: {e:?}",
            w.name
        );
    }
}

#[tokio::test]
async fn an_unknown_branch_is_not_found() {
    let (_, double) = gitlab_with(fixture()).await;
    let wiki = gitlab_wiki(&double, "no-such-branch", test_http());
    let e = wiki.head().await.unwrap_err();
    assert!(
        matches!(e, SourceError::NotFound(ref m) if m.contains("no-such-branch")),
        "{e:?}"
    );
    let requests = double.requests();
    assert_eq!(requests.len(), 1, "a 404 is not retried");
    assert_eq!(
        requests[0].path_and_query,
        "/api/v4/projects/docs%2Fwiki/repository/branches/no-such-branch"
    );
}

#[tokio::test]
async fn a_commit_read_returns_that_commits_content_after_later_changes() {
    let (wiki, double) = gitlab_with(fixture()).await;
    let first = wiki.head().await.unwrap();
    double.put_file("README.md", b"# LLM wiki, rewritten\n".to_vec());
    double.delete_file("guides/onboarding.md");
    let second = wiki.head().await.unwrap();
    assert_ne!(first.commit, second.commit);
    let at_first = GitRef::parse(&first.commit).unwrap();
    assert_eq!(
        read_all(&wiki, "README.md", Some(&at_first)).await,
        b"# LLM wiki\nStart here.\n"
    );
    assert_eq!(
        read_all(&wiki, "guides/onboarding.md", Some(&at_first)).await,
        b"Welcome to the team.\n",
        "deleted since, still there at the old commit"
    );
    assert_eq!(
        read_all(&wiki, "README.md", None).await,
        b"# LLM wiki, rewritten\n"
    );
    // The old tree is still the old tree.
    let old = ids(&wiki.tree(&first.commit).await.unwrap());
    assert_eq!(
        old.get("README.md"),
        Some(&git_blob_id(b"# LLM wiki\nStart here.\n"))
    );
    assert!(old.contains_key("guides/onboarding.md"));
    let raw = double
        .requests()
        .into_iter()
        .find(|r| r.path_and_query.contains("/raw?"))
        .unwrap();
    assert_eq!(
        raw.path_and_query,
        format!(
            "/api/v4/projects/docs%2Fwiki/repository/files/README%2Emd/raw?ref={}",
            first.commit
        )
    );
}

#[tokio::test]
async fn a_refresh_with_nothing_changed_makes_one_branch_request_and_downloads_nothing() {
    let (wiki, double) = gitlab_with(fixture()).await;
    let head = wiki.head().await.unwrap();
    let tree = wiki.tree(&head.commit).await.unwrap();
    for blob in &tree {
        let at = GitRef::parse(&head.commit).unwrap();
        read_all(&wiki, &blob.path.to_string(), Some(&at)).await;
    }
    let first_sync: Vec<String> = double
        .requests()
        .iter()
        .map(|r| r.path_and_query.clone())
        .collect();
    assert_eq!(
        first_sync.get(..2).unwrap(),
        [
            "/api/v4/projects/docs%2Fwiki/repository/branches/main".to_owned(),
            format!(
                "/api/v4/projects/docs%2Fwiki/repository/tree?ref={}&recursive=true&per_page=100&pagination=keyset",
                head.commit
            ),
        ]
    );
    assert_eq!(first_sync.len(), 2 + tree.len());

    double.clear_requests();
    let again = wiki.head().await.unwrap();
    assert_eq!(again.commit, head.commit, "nothing changed");
    let requests = double.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(
        requests[0].path_and_query,
        "/api/v4/projects/docs%2Fwiki/repository/branches/main"
    );
    assert_eq!(requests[0].header("private-token"), Some(TOKEN));
    assert!(
        requests.iter().all(|r| !r.path().ends_with("/raw")),
        "nothing downloaded"
    );
}

#[tokio::test]
async fn the_tree_pages_by_keyset_and_lists_every_file_exactly_once() {
    let mut files = BTreeMap::new();
    for folder in 0..5 {
        for n in 0..50 {
            files.insert(
                format!("section-{folder}/page-{n:02}.md"),
                format!("# Page {folder}.{n}\n").into_bytes(),
            );
        }
    }
    let (wiki, double) = gitlab_with(files.clone()).await;
    let head = wiki.head().await.unwrap();
    let tree = wiki.tree(&head.commit).await.unwrap();
    assert_eq!(tree.len(), 250);
    let expected: BTreeMap<String, String> = files
        .iter()
        .map(|(p, c)| (p.clone(), git_blob_id(c)))
        .collect();
    assert_eq!(ids(&tree), expected, "every file once, with git's id");

    // 250 files and 5 folders: three pages of at most 100 entries, the
    // later ones reached through the `Link` header's page token.
    let pages: Vec<String> = double
        .requests()
        .iter()
        .filter(|r| r.path().ends_with("/repository/tree"))
        .map(|r| r.path_and_query.clone())
        .collect();
    assert_eq!(pages.len(), 3, "{pages:#?}");
    assert!(!pages[0].contains("page_token"));
    for page in &pages[1..] {
        assert!(
            page.contains("page_token=") && page.contains("pagination=keyset"),
            "{page}"
        );
        assert!(page.contains(&format!("ref={}", head.commit)), "{page}");
    }
}

#[tokio::test]
async fn a_next_link_to_another_host_is_not_followed() {
    let mut files = BTreeMap::new();
    for n in 0..150 {
        files.insert(format!("f{n:03}.md"), b"x\n".to_vec());
    }
    let (wiki, double) = gitlab_with(files.clone()).await;
    // Another server that would answer the same requests, token and all.
    let elsewhere =
        GitLabDouble::start(PROJECT, TOKEN, BTreeMap::from([("main".to_owned(), files)])).await;
    double.set_link_base(Some(elsewhere.base_url.as_str()));
    let head = wiki.head().await.unwrap();
    let e = wiki.tree(&head.commit).await.unwrap_err();
    assert!(
        matches!(e, SourceError::InvalidResponse { .. }),
        "an error, not a tree cut short: {e:?}"
    );
    let message = e.to_string();
    assert!(
        !message.contains("127.0.0.1") && !message.contains(TOKEN),
        "{message}"
    );
    assert!(
        elsewhere.requests().is_empty(),
        "the token went nowhere else"
    );
    // Back on the instance's own origin, the same tree pages fine.
    double.set_link_base(None);
    assert_eq!(wiki.tree(&head.commit).await.unwrap().len(), 150);
}

#[tokio::test]
async fn head_and_tree_errors_are_typed_and_never_echo_the_token() {
    let no_retry = HttpSettings {
        retries: 0,
        ..HttpSettings::default()
    };
    let (_, double) = gitlab_with(fixture()).await;
    let wiki = gitlab_wiki(&double, "main", HttpClient::new(no_retry).unwrap());
    let head = wiki.head().await.unwrap();

    let wrong = GitLabWiki::new(
        GitLabConfig {
            base_url: double.base_url.clone(),
            project: PROJECT.to_owned(),
            token: Some(SecretString::from("glpat-wrong")),
            default_ref: GitRef::parse("main").unwrap(),
        },
        test_http(),
    )
    .unwrap();
    let e = wrong.head().await.unwrap_err();
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
    assert!(!e.to_string().contains("glpat"), "{e}");

    double.set_mode(Mode::Status(403));
    let e = wiki.head().await.unwrap_err();
    assert!(matches!(e, SourceError::PermissionDenied(_)), "{e:?}");
    double.set_mode(Mode::RackAttack429);
    let e = wiki.tree(&head.commit).await.unwrap_err();
    assert!(
        matches!(
            e,
            SourceError::RateLimited {
                retry_after: Some(_),
                ..
            }
        ),
        "{e:?}"
    );
    double.set_mode(Mode::Timeout408);
    let e = wiki.tree(&head.commit).await.unwrap_err();
    assert!(matches!(e, SourceError::Timeout(_)), "{e:?}");
    double.set_mode(Mode::Status(500));
    let e = wiki.head().await.unwrap_err();
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
    let text = e.to_string();
    assert!(!text.contains(TOKEN) && !text.contains("http://"), "{text}");
}

#[tokio::test]
async fn the_local_wiki_answers_to_the_commits_its_head_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.md"), b"one\n").unwrap();
    let wiki = LocalWiki::open(dir.path(), GitRef::parse("main").unwrap()).unwrap();
    let head = wiki.head().await.unwrap();
    // Another instance over the same folder (a restart) knows it too: the
    // folder's current head is recognised without having been named.
    let restarted = LocalWiki::open(dir.path(), GitRef::parse("main").unwrap()).unwrap();
    assert_eq!(restarted.tree(&head.commit).await.unwrap().len(), 1);
    let at = GitRef::parse(&head.commit).unwrap();
    assert_eq!(read_all(&restarted, "a.md", Some(&at)).await, b"one\n");
    // With no history, a named commit reads what is there now.
    std::fs::write(dir.path().join("a.md"), b"two, longer\n").unwrap();
    assert_eq!(read_all(&wiki, "a.md", Some(&at)).await, b"two, longer\n");
    assert_ne!(wiki.head().await.unwrap().commit, head.commit);
    // An empty wiki has a head and an empty tree.
    let empty = tempfile::tempdir().unwrap();
    let wiki = LocalWiki::open(empty.path(), GitRef::parse("main").unwrap()).unwrap();
    let head = wiki.head().await.unwrap();
    assert!(head.committed_at.is_none());
    assert!(wiki.tree(&head.commit).await.unwrap().is_empty());
}
