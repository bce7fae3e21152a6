//! The cluster's child processes (replicas, nginx, wsgidav).
//!
//! Each child runs in a process group of its own, so a Ctrl-C typed at the
//! terminal reaches only the harness, which then stops the children in
//! order (the balancer first, the database last). The suite signals one
//! child by its pid — `SIGTERM` for a drain, `SIGKILL` for a crash — and a
//! child still running when its handle is dropped is killed with its whole
//! group (nginx's workers too), so an error in the harness leaves nothing
//! behind. Output goes to a log file per child, appended across restarts.

use std::fs::OpenOptions;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use tokio::process::{Child, Command};

/// A running child and where its output goes.
pub(crate) struct Process {
    /// What it is, for messages (`replica 1`, `nginx`).
    name: String,
    child: Child,
    pid: Pid,
    /// Its standard output and error.
    log: PathBuf,
    /// How it ended, once it has.
    status: Option<ExitStatus>,
}

impl Process {
    /// Starts `command` in a new process group, its output appended to `log`.
    pub(crate) fn spawn(name: &str, mut command: Command, log: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        let child = command
            .spawn()
            .with_context(|| format!("cannot start {name}"))?;
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw)
            .ok_or_else(|| anyhow!("{name} has no pid"))?;
        Ok(Self {
            name: name.to_owned(),
            child,
            pid,
            log: log.to_owned(),
            status: None,
        })
    }

    /// Its process id (also its process group's).
    pub(crate) fn pid(&self) -> i32 {
        self.pid.as_raw_nonzero().get()
    }

    /// Sends `signal` to the process itself (not its group).
    pub(crate) fn signal(&self, signal: Signal) -> Result<()> {
        kill_process(self.pid, signal)
            .with_context(|| format!("cannot signal {} (pid {})", self.name, self.pid()))
    }

    /// How it ended, if it has (without waiting).
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Waits until it ends, for at most `limit`; `None` if it still runs.
    pub(crate) async fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        if self.status.is_none()
            && let Ok(Ok(status)) = tokio::time::timeout(limit, self.child.wait()).await
        {
            self.status = Some(status);
        }
        self.status
    }

    /// Asks it to stop (`signal`), waits for at most `grace`, then kills
    /// its whole group. Returns how it ended.
    pub(crate) async fn stop(&mut self, signal: Signal, grace: Duration) -> Option<ExitStatus> {
        if self.exited().is_some() {
            return self.status;
        }
        let _ = self.signal(signal);
        if self.wait_for(grace).await.is_none() {
            let _ = kill_process_group(self.pid, Signal::KILL);
            self.wait_for(Duration::from_secs(5)).await;
        }
        self.status
    }

    /// The last `lines` lines of its output, for a failure's message.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = kill_process_group(self.pid, Signal::KILL);
        }
    }
}

/// The last `lines` lines of the file at `path` (empty if unreadable).
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all.get(all.len().saturating_sub(lines)..)
        .unwrap_or_default()
        .join("\n")
}

/// Waits until `addr` accepts connections, for at most `limit`; fails at
/// once if `process` exits.
pub(crate) async fn wait_for_port(
    addr: SocketAddr,
    process: &mut Process,
    limit: Duration,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(status) = process.exited() {
            anyhow::bail!("exited ({status}):\n{}", process.log_tail(30));
        }
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!(
                "no connection to {addr} within {limit:?}:\n{}",
                process.log_tail(30)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
