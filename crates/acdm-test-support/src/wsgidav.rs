//! A real WebDAV server for tests: wsgidav (pinned, installed by `cargo
//! xtask setup` into `.test-tools/venv`, or found through `ACDM_WSGIDAV`),
//! started per test on a free loopback port, serving a temporary folder at
//! Nextcloud's path `/remote.php/dav/files/<user>` with basic auth.
//!
//! Without wsgidav, [`Wsgidav::start`] answers `None` and says so — unless
//! `ACDM_REQUIRE_WEBDAV` is set (CI), where its absence fails the test.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The WebDAV user (the Nextcloud account whose files are served).
pub const DAV_USER: &str = "u";
/// That user's password.
pub const DAV_PASSWORD: &str = "p";

/// How long a starting server may take to accept connections. cheroot
/// under a loaded machine (a parallel test run on two cores) can be slow.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How many ports to try when a picked port turns out to be taken.
const PORT_ATTEMPTS: usize = 5;
/// cheroot's worker threads. Its default (10) stalls for seconds when
/// concurrent tests or corpus runs open many connections at once.
const THREADS: usize = 96;
/// Log lines shown when a test fails while the server runs.
const LOG_TAIL_LINES: usize = 60;

/// A running wsgidav serving a temporary folder; stopped when dropped.
#[derive(Debug)]
pub struct Wsgidav {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The folder it serves: the user's home, `/` in WebDAV paths.
    pub root: PathBuf,
    child: Child,
    dir: tempfile::TempDir,
}

impl Drop for Wsgidav {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            // The server's side of a failure: its last log lines.
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines
                .get(lines.len().saturating_sub(LOG_TAIL_LINES)..)
                .unwrap_or_default();
            #[expect(clippy::print_stderr, reason = "a failing test's diagnostics")]
            {
                eprintln!("--- wsgidav log (last lines) ---\n{}", tail.join("\n"));
            }
        }
    }
}

impl Wsgidav {
    /// Starts wsgidav, or says why not (`None`) when it is not installed
    /// and `ACDM_REQUIRE_WEBDAV` is not set.
    ///
    /// # Panics
    ///
    /// When wsgidav is required but missing, or does not start.
    pub async fn start() -> Option<Self> {
        let Some(binary) = binary() else {
            assert!(
                crate::setting("ACDM_REQUIRE_WEBDAV").is_none(),
                "ACDM_REQUIRE_WEBDAV is set but wsgidav is not installed; run `cargo xtask setup`"
            );
            #[expect(clippy::print_stderr, reason = "tells why a back-end is left out")]
            {
                eprintln!(
                    "wsgidav is not installed (cargo xtask setup): the WebDAV back-end is left out"
                );
            }
            return None;
        };
        let dir = must(tempfile::tempdir(), "a temporary folder");
        let root = dir.path().join("home");
        must(std::fs::create_dir_all(&root), "the served folder");
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port();
            let config = dir.path().join("wsgidav.yaml");
            must(
                std::fs::write(&config, config_text(port, &root)),
                "the wsgidav configuration",
            );
            let log = must(
                std::fs::File::create(dir.path().join("wsgidav.log")),
                "the wsgidav log",
            );
            let mut child = must(
                Command::new(&binary)
                    .arg("--config")
                    .arg(&config)
                    .stdin(Stdio::null())
                    .stdout(must(log.try_clone(), "the wsgidav log"))
                    .stderr(log)
                    .spawn(),
                "wsgidav",
            );
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let ready = tokio::time::timeout(START_TIMEOUT, async {
                loop {
                    if child.try_wait().ok().flatten().is_some() {
                        return false; // exited: probably the port was taken
                    }
                    if tokio::net::TcpStream::connect(addr).await.is_ok() {
                        return true;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
            .await;
            if ready == Ok(true) {
                return Some(Self {
                    addr,
                    root,
                    child,
                    dir,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let log = std::fs::read_to_string(dir.path().join("wsgidav.log")).unwrap_or_default();
        panic!("wsgidav did not start:\n{log}");
    }

    /// The base URL of the server (`http://127.0.0.1:<port>/`).
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// What the server has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("wsgidav.log")).unwrap_or_default()
    }
}

/// The installed wsgidav: `ACDM_WSGIDAV`, else the project's `.test-tools`.
fn binary() -> Option<PathBuf> {
    if let Some(path) = crate::setting("ACDM_WSGIDAV") {
        return Some(PathBuf::from(path));
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.test-tools/venv/bin/wsgidav");
    local.is_file().then_some(local)
}

fn config_text(port: u16, root: &Path) -> String {
    format!(
        "host: 127.0.0.1\nport: {port}\nserver: cheroot\nverbose: 1\n\
         server_args:\n  numthreads: {THREADS}\n\
         provider_mapping:\n  \"/remote.php/dav/files/{DAV_USER}\": \"{}\"\n\
         simple_dc:\n  user_mapping:\n    \"*\":\n      \"{DAV_USER}\":\n        password: \"{DAV_PASSWORD}\"\n\
         http_authenticator:\n  domain_controller: null\n  accept_basic: true\n  accept_digest: false\n  default_to_digest: false\n\
         lock_storage: true\nproperty_manager: true\ndir_browser:\n  enable: false\n",
        root.display()
    )
}

/// A port free at this moment. wsgidav binds it itself a moment later, so
/// [`Wsgidav::start`] tries another when it was taken in between.
fn free_port() -> u16 {
    let listener = must(TcpListener::bind("127.0.0.1:0"), "a loopback port");
    must(listener.local_addr(), "a loopback port").port()
}

/// The value, or a panic naming what could not be had (test support: a
/// failure here is the test environment's, and must be loud).
#[track_caller]
fn must<T, E: std::fmt::Display>(result: Result<T, E>, what: &str) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("test support: cannot get {what}: {error}"),
    }
}
