//! The `acdm-tool` suite: the built binary against a loopback double of the
//! backend (`double.rs`), checking what it sends, what it prints and how it
//! exits. Every run also checks that the service token appears in neither
//! stdout nor stderr.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "tests fail loudly"
)]

mod business;
mod double;
mod nc;
mod project;
mod refusals;

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

/// The service token the tool is given (≥ 32 visible characters, as the
/// backend requires).
pub(crate) const TOKEN: &str = "svc-token-for-acdm-tool-tests-0123456789";

/// Variables the tool reads; removed from every run unless a test sets them.
const TOOL_ENV: [&str; 6] = [
    "ACDM_BACKEND_URL",
    "ACDM_MCP_SERVICE_TOKEN",
    "NC_OP_TIMEOUT_SECONDS",
    "ACDM_USER_ID",
    "ACDM_AGENT_NAME",
    "ACDM_THREAD_ID",
];

/// Proxy variables that would send loopback calls elsewhere.
const PROXY_ENV: [&str; 6] = [
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
];

/// One invocation of the built `acdm-tool`.
pub(crate) struct Tool {
    args: Vec<String>,
    globals: Vec<String>,
    env: Vec<(String, String)>,
    stdin: Option<Vec<u8>>,
}

impl Tool {
    /// `acdm-tool <args>` against `url`, with the token in the environment
    /// and no identity.
    pub(crate) fn bare(url: &str, args: &[&str]) -> Self {
        Self {
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            globals: vec!["--url".into(), url.into()],
            env: vec![("ACDM_MCP_SERVICE_TOKEN".into(), TOKEN.into())],
            stdin: None,
        }
    }

    /// `acdm-tool <args>` with the token in the environment and no option:
    /// everything else comes from variables the test sets.
    pub(crate) fn env_only(args: &[&str]) -> Self {
        let mut tool = Self::bare("", args);
        tool.globals.clear();
        tool
    }

    /// [`Tool::bare`] with the identity given as options after the
    /// subcommand (`--user u1 --agent project-alpha --thread t1`).
    pub(crate) fn new(url: &str, args: &[&str]) -> Self {
        let mut tool = Self::bare(url, args);
        for arg in ["--user", "u1", "--agent", "project-alpha", "--thread", "t1"] {
            tool.globals.push(arg.into());
        }
        tool
    }

    /// Sets an environment variable (replacing an earlier setting).
    pub(crate) fn env(mut self, name: &str, value: &str) -> Self {
        self.env.retain(|(n, _)| n != name);
        self.env.push((name.into(), value.into()));
        self
    }

    /// Leaves an environment variable unset.
    pub(crate) fn without_env(mut self, name: &str) -> Self {
        self.env.retain(|(n, _)| n != name);
        self
    }

    /// Feeds `bytes` on stdin (default: no stdin at all).
    pub(crate) fn stdin(mut self, bytes: &[u8]) -> Self {
        self.stdin = Some(bytes.to_vec());
        self
    }

    /// Runs the binary to completion (off the runtime, so a double on this
    /// runtime keeps answering).
    pub(crate) async fn run(self) -> Ran {
        tokio::task::spawn_blocking(move || self.run_blocking())
            .await
            .unwrap()
    }

    fn run_blocking(self) -> Ran {
        let mut command = Command::new(env!("CARGO_BIN_EXE_acdm-tool"));
        command.args(&self.args).args(&self.globals);
        for name in TOOL_ENV.iter().chain(&PROXY_ENV) {
            command.env_remove(name);
        }
        command.envs(self.env.iter().map(|(n, v)| (n, v)));
        command
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().unwrap();
        if let Some(bytes) = &self.stdin {
            // The tool may exit without reading it (`--from-file`).
            let _ = child.stdin.take().unwrap().write_all(bytes);
        }
        let output = child.wait_with_output().unwrap();
        let ran = Ran {
            args: self.args.join(" "),
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        };
        ran.assert_no_token();
        ran
    }
}

/// What a run printed and how it exited.
#[derive(Debug)]
pub(crate) struct Ran {
    /// The subcommand's arguments, for messages.
    pub(crate) args: String,
    /// The exit status (`None` when killed by a signal).
    pub(crate) code: Option<i32>,
    /// Everything on stdout.
    pub(crate) stdout: String,
    /// Everything on stderr.
    pub(crate) stderr: String,
}

impl Ran {
    /// stdout as JSON.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("`{}` printed no JSON ({e}): {self:#?}", self.args))
    }

    /// Asserts the exit status.
    pub(crate) fn exits(&self, code: i32) -> &Self {
        assert_eq!(self.code, Some(code), "`{}`: {self:#?}", self.args);
        self
    }

    /// Asserts the run failed with an envelope of `code` whose message
    /// contains each of `words`.
    pub(crate) fn fails_with(&self, code: &str, words: &[&str]) {
        self.exits(1);
        let json = self.json();
        assert_eq!(json["success"], false, "{json:#}");
        assert_eq!(json["code"], code, "{json:#}");
        let message = json["message"].as_str().unwrap();
        for word in words {
            assert!(message.contains(word), "`{word}` not in: {message}");
        }
    }

    fn assert_no_token(&self) {
        assert!(
            !self.stdout.contains(TOKEN) && !self.stderr.contains(TOKEN),
            "the token was printed by `{}`: {self:#?}",
            self.args
        );
    }
}
