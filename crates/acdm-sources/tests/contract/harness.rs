//! What the contract tests run against: the local-folder store and the
//! Nextcloud client talking to a real WebDAV server (wsgidav, started per
//! test on a loopback port and mounted at Nextcloud's
//! `/remote.php/dav/files/<user>` path), plus shared settings.
//!
//! wsgidav is installed by `cargo xtask setup` into `.test-tools/venv`
//! (or found through `ACDM_WSGIDAV`). Without it the WebDAV back-end is
//! left out with a message — unless `ACDM_REQUIRE_WEBDAV` is set (CI), in
//! which case its absence fails the test.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use acdm_core::AbsPath;
use acdm_sources::FileStore;
use acdm_sources::http::{HttpClient, HttpSettings};
use acdm_sources::local::LocalFileStore;
use acdm_sources::nextcloud::{NextcloudConfig, NextcloudFiles};
use secrecy::SecretString;

pub(crate) const DAV_USER: &str = "u";
pub(crate) const DAV_PASSWORD: &str = "p";

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
    })
    .unwrap()
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wsgidav_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("ACDM_WSGIDAV") {
        return Some(PathBuf::from(path));
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.test-tools/venv/bin/wsgidav");
    local.is_file().then_some(local)
}

/// A running wsgidav serving a temporary folder.
pub(crate) struct Wsgidav {
    pub(crate) addr: SocketAddr,
    /// The folder it serves (the user's home: `/` in paths).
    pub(crate) root: PathBuf,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Wsgidav {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Wsgidav {
    /// Starts wsgidav, or says why not (`None`) when it is not installed
    /// and not required.
    pub(crate) async fn start() -> Option<Self> {
        let Some(binary) = wsgidav_binary() else {
            assert!(
                std::env::var_os("ACDM_REQUIRE_WEBDAV").is_none(),
                "ACDM_REQUIRE_WEBDAV is set but wsgidav is not installed; run `cargo xtask setup`"
            );
            eprintln!(
                "wsgidav is not installed (cargo xtask setup): the WebDAV back-end is left out"
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("home");
        std::fs::create_dir_all(&root).unwrap();
        for _ in 0..5 {
            let port = free_port();
            let config = dir.path().join("wsgidav.yaml");
            std::fs::write(
                &config,
                format!(
                    "host: 127.0.0.1\nport: {port}\nserver: cheroot\nverbose: 1\n\
                     provider_mapping:\n  \"/remote.php/dav/files/{DAV_USER}\": \"{}\"\n\
                     simple_dc:\n  user_mapping:\n    \"*\":\n      \"{DAV_USER}\":\n        password: \"{DAV_PASSWORD}\"\n\
                     http_authenticator:\n  domain_controller: null\n  accept_basic: true\n  accept_digest: false\n  default_to_digest: false\n\
                     lock_storage: true\nproperty_manager: true\ndir_browser:\n  enable: false\n",
                    root.display()
                ),
            )
            .unwrap();
            let log = std::fs::File::create(dir.path().join("wsgidav.log")).unwrap();
            let mut child = Command::new(&binary)
                .arg("--config")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(20) {
                if child.try_wait().unwrap().is_some() {
                    break; // exited: probably the port was taken; try another
                }
                if tokio::net::TcpStream::connect(addr).await.is_ok() {
                    return Some(Self {
                        addr,
                        root,
                        child,
                        _dir: dir,
                    });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let log = std::fs::read_to_string(dir.path().join("wsgidav.log")).unwrap_or_default();
        panic!("wsgidav did not start:\n{log}");
    }

    /// The Nextcloud configuration pointing at this server.
    pub(crate) fn config(&self, password: Option<&str>) -> NextcloudConfig {
        NextcloudConfig {
            url: url::Url::parse(&format!("http://{}/", self.addr)).unwrap(),
            user: DAV_USER.to_owned(),
            app_password: password.map(|p| SecretString::from(p.to_owned())),
        }
    }
}

/// One file store under test, with what keeps it alive.
pub(crate) struct Backend {
    pub(crate) name: &'static str,
    pub(crate) store: Arc<dyn FileStore>,
    /// The folder on disk behind `/`, to check effects directly.
    pub(crate) disk_root: PathBuf,
    _keep: Keep,
}

#[allow(dead_code, reason = "held only to be dropped with the backend")]
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
        let store = NextcloudFiles::new(server.config(Some(DAV_PASSWORD)), test_http()).unwrap();
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
