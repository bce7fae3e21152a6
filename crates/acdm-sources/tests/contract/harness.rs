//! What the contract tests run against: the local-folder store and the
//! Nextcloud client talking to a real WebDAV server (wsgidav, started per
//! test on a loopback port and mounted at Nextcloud's
//! `/remote.php/dav/files/<user>` path), plus shared settings.
//!
//! The server is `acdm_test_support::Wsgidav`: without wsgidav the WebDAV
//! back-end is left out with a message — unless `ACDM_REQUIRE_WEBDAV` is
//! set (CI), in which case its absence fails the test.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use acdm_core::AbsPath;
use acdm_sources::FileWriter;
use acdm_sources::http::{HttpClient, HttpSettings};
use acdm_sources::local::LocalFileStore;
use acdm_sources::nextcloud::{NextcloudConfig, NextcloudFiles};
use secrecy::SecretString;

pub(crate) use acdm_test_support::{DAV_PASSWORD, DAV_USER, Wsgidav};

/// Short timeouts so fault tests end quickly; one retry for reads.
pub(crate) fn test_http() -> HttpClient {
    HttpClient::new(HttpSettings {
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(5),
        timeout: Duration::from_secs(10),
        retries: 1,
        backoff: Duration::from_millis(50),
        max_retry_after: Duration::from_secs(2),
        user_agent: "acdm-backend-tests".to_owned(),
        ..HttpSettings::default()
    })
    .unwrap()
}

/// The Nextcloud configuration pointing at `server`.
pub(crate) fn nextcloud_config(server: &Wsgidav, password: Option<&str>) -> NextcloudConfig {
    NextcloudConfig {
        url: url::Url::parse(&server.url()).unwrap(),
        user: DAV_USER.to_owned(),
        app_password: password.map(|p| SecretString::from(p.to_owned())),
    }
}

/// One file store under test, with what keeps it alive.
pub(crate) struct Backend {
    pub(crate) name: &'static str,
    pub(crate) store: Arc<dyn FileWriter>,
    /// The folder on disk behind `/`, to check effects directly.
    pub(crate) disk_root: PathBuf,
    _keep: Keep,
}

#[expect(dead_code, reason = "held only to be dropped with the backend")]
enum Keep {
    Dir(tempfile::TempDir),
    Server(Wsgidav),
}

/// Every file store the contract runs against.
pub(crate) async fn backends() -> Vec<Backend> {
    let dir = tempfile::tempdir().unwrap();
    let disk_root = dir.path().join("files");
    let local = LocalFileStore::open(&disk_root).unwrap();
    let mut all = vec![Backend {
        name: "local",
        store: Arc::new(local),
        disk_root,
        _keep: Keep::Dir(dir),
    }];
    if let Some(server) = Wsgidav::start().await {
        let store = NextcloudFiles::new(nextcloud_config(&server, Some(DAV_PASSWORD)), test_http())
            .unwrap();
        all.push(Backend {
            name: "webdav",
            store: Arc::new(store),
            disk_root: server.root.clone(),
            _keep: Keep::Server(server),
        });
    }
    all
}

pub(crate) fn abs(path: &str) -> AbsPath {
    AbsPath::parse(path).unwrap()
}
