//! A real WebDAV server for tests: wsgidav (pinned, installed by `cargo
//! xtask setup` into `.test-tools/venv`, or found through `ACDM_WSGIDAV`),
//! started per test on a free loopback port, serving a temporary folder at
//! Nextcloud's path `/remote.php/dav/files/<user>` with basic auth.
//!
//! Without wsgidav, [`Wsgidav::start`] answers `None` and says so — unless
//! `ACDM_REQUIRE_WEBDAV` is set (CI), where its absence fails the test.
//! [`Wsgidav::start_in`] is the same server for a harness that keeps its
//! run folder (the cluster's): its files in a folder of the caller's, and
//! an error instead of a panic.

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

/// A running wsgidav serving a folder (a temporary one unless started
/// with [`Wsgidav::start_in`]); stopped when dropped.
#[derive(Debug)]
pub struct Wsgidav {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The folder it serves: the user's home, `/` in WebDAV paths.
    pub root: PathBuf,
    child: Child,
    /// Its configuration and log (and `root`, `home` in it).
    dir: PathBuf,
    /// The temporary folder `dir` is, removed when it stops.
    _temp: Option<tempfile::TempDir>,
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
        let temp = must(tempfile::tempdir(), "a temporary folder");
        let dir = temp.path().to_owned();
        match Self::launch(&binary, dir).await {
            Ok(mut server) => {
                server._temp = Some(temp);
                Some(server)
            }
            Err(why) => panic!("{why}"),
        }
    }

    /// Starts wsgidav with its configuration, its log (`wsgidav.log`) and
    /// the folder it serves (`home`) in `dir`, which it leaves in place
    /// when it stops: for a harness that keeps its run folder.
    ///
    /// # Errors
    ///
    /// When wsgidav is not installed or does not start (with its log).
    pub async fn start_in(dir: &Path) -> Result<Self, String> {
        let binary = binary()
            .ok_or("wsgidav is not installed (run `cargo xtask setup`, or set ACDM_WSGIDAV)")?;
        Self::launch(&binary, dir.to_owned()).await
    }

    /// Starts `binary` in `dir` on a free port, trying another when the
    /// one picked was taken meanwhile.
    async fn launch(binary: &Path, dir: PathBuf) -> Result<Self, String> {
        let root = dir.join("home");
        std::fs::create_dir_all(&root)
            .map_err(|e| format!("cannot make the served folder {}: {e}", root.display()))?;
        let log_path = dir.join("wsgidav.log");
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port()?;
            let config = dir.join("wsgidav.yaml");
            std::fs::write(&config, config_text(port, &root))
                .map_err(|e| format!("cannot write the wsgidav configuration: {e}"))?;
            let log = std::fs::File::create(&log_path)
                .map_err(|e| format!("cannot create the wsgidav log: {e}"))?;
            let out = log
                .try_clone()
                .map_err(|e| format!("cannot share the wsgidav log: {e}"))?;
            let mut child = Command::new(binary)
                .arg("--config")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(log)
                .spawn()
                .map_err(|e| format!("cannot start wsgidav ({}): {e}", binary.display()))?;
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
                return Ok(Self {
                    addr,
                    root,
                    child,
                    dir,
                    _temp: None,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        Err(format!("wsgidav did not start:\n{log}"))
    }

    /// The base URL of the server (`http://127.0.0.1:<port>/`).
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// What the server has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("wsgidav.log")).unwrap_or_default()
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
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| format!("cannot get a loopback port: {e}"))
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

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    #[tokio::test]
    async fn a_server_started_in_a_folder_serves_it_and_leaves_it_when_dropped() {
        if binary().is_none() {
            assert!(
                crate::setting("ACDM_REQUIRE_WEBDAV").is_none(),
                "ACDM_REQUIRE_WEBDAV is set but wsgidav is not installed"
            );
            return;
        }
        let dir = must(tempfile::tempdir(), "a temporary folder");
        let server = match Wsgidav::start_in(dir.path()).await {
            Ok(server) => server,
            Err(why) => panic!("{why}"),
        };
        assert_eq!(server.root, dir.path().join("home"));
        must(
            std::fs::write(server.root.join("a.txt"), "hello"),
            "a served file",
        );
        // `u:p` in basic auth, at Nextcloud's path.
        let mut stream = must(
            tokio::net::TcpStream::connect(server.addr).await,
            "a connection",
        );
        let request = format!(
            "GET /remote.php/dav/files/{DAV_USER}/a.txt HTTP/1.1\r\nHost: x\r\n\
             Authorization: Basic dTpw\r\nConnection: close\r\n\r\n"
        );
        must(stream.write_all(request.as_bytes()).await, "a request");
        let mut answer = String::new();
        must(stream.read_to_string(&mut answer).await, "an answer");
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("hello"),
            "{answer}"
        );
        let addr = server.addr;
        drop(server);
        // Stopped, its folder and log left for the harness that keeps them.
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
        assert!(dir.path().join("home").join("a.txt").is_file());
        assert!(dir.path().join("wsgidav.log").is_file());
    }
}
