//! Which sources a server runs with: local folders by default, GitLab and
//! Nextcloud when configured — without contacting them at start.

use acdm_backend::app::build_sources;

use crate::helpers::{Options, test_config};

#[test]
fn sources_are_local_folders_until_gitlab_and_nextcloud_are_configured() {
    let dir = tempfile::tempdir().unwrap();
    let local = build_sources(&test_config(&Options::default(), dir.path())).unwrap();
    assert_eq!(
        (local.wiki.kind(), local.files.kind(), local.search.kind()),
        ("local", "local", "local")
    );
    assert!(dir.path().join("wiki").is_dir() && dir.path().join("files").is_dir());

    let remote = Options {
        extra_env: vec![
            (
                "GITLAB_WIKI_BASE_URL",
                "https://gitlab.example.com".to_owned(),
            ),
            ("GITLAB_WIKI_PROJECT_ID", "docs/wiki".to_owned()),
            ("NEXTCLOUD_URL", "https://cloud.example.com".to_owned()),
            ("NEXTCLOUD_USER", "svc".to_owned()),
        ],
        ..Options::default()
    };
    let configured = build_sources(&test_config(&remote, dir.path())).unwrap();
    assert_eq!(
        (
            configured.wiki.kind(),
            configured.files.kind(),
            configured.search.kind()
        ),
        ("gitlab", "nextcloud", "nextcloud")
    );
}
