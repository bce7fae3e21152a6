//! Configuration: settings from an optional TOML file and the environment
//! (the environment wins), validated into typed values at start.
//!
//! A setting has one name everywhere — the environment variable of spec §8,
//! and the same key in the TOML file — so every error names exactly what an
//! operator has to change. Secrets become [`SecretString`]s as they are
//! read and are never printed; `check-config` shows whether they are set.
//! Environment values are taken literally (no quote or escape processing).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use acdm_core::AbsPath;
use acdm_store::{DatabaseConfig, DatabaseTarget};
use figment::providers::{Format, Toml};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

/// One setting, as documented in `docs/config.md`.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// Environment variable and TOML key.
    pub name: &'static str,
    /// The default, as shown to operators.
    pub default: &'static str,
    /// Never printed.
    pub secret: bool,
    /// What it does.
    pub doc: &'static str,
}

const fn setting(name: &'static str, default: &'static str, doc: &'static str) -> Setting {
    Setting {
        name,
        default,
        secret: false,
        doc,
    }
}

const fn secret(name: &'static str, doc: &'static str) -> Setting {
    Setting {
        name,
        default: "(empty)",
        secret: true,
        doc,
    }
}

/// Every setting the service reads. `docs/config.md` is generated from this
/// table (and a test keeps it current).
pub const SETTINGS: &[Setting] = &[
    setting(
        "ACDM_LISTEN_ADDR",
        "127.0.0.1:8002",
        "Address and port to listen on. Containers set `0.0.0.0:8002`.",
    ),
    setting(
        "ACDM_DATA_DIR",
        "./data",
        "Folder for the embedded SQLite database, local-folder sources and trash. Created if missing.",
    ),
    secret(
        "ACDM_MCP_SERVICE_TOKEN",
        "Shared service token callers send in `X-ACDM-Service-Auth`. Empty refuses every `/mcp` and `/agent-tools` request (and `/readyz` says so). Otherwise at least 32 visible ASCII characters: `openssl rand -hex 32`.",
    ),
    secret(
        "ACDM_ADMIN_TOKEN",
        "Bearer token of the operator API at `/admin`. Empty disables the API (every `/admin` path is 404). At least 32 visible ASCII characters, and never the service token.",
    ),
    setting(
        "ACDM_AI_NC_WRITES_ENABLED",
        "true",
        "Kill switch for file writes made through agents. `false` refuses them with `kill_switch_off` and operators cannot enable them at run time; with `true`, operators can switch writes off (and on again) at run time for every server (`PUT /admin/kill-switch`, `acdm-backend kill-switch`). Off wins.",
    ),
    Setting {
        secret: true,
        default: "(unset)",
        ..secret(
            "DATABASE_URL",
            "`postgres://…` for PostgreSQL, or `sqlite:<path>`. Unset: the SQLite file `<ACDM_DATA_DIR>/acdm.sqlite3`. May carry a password, so it is treated as a secret.",
        )
    },
    setting(
        "DATABASE_MAX_CONNECTIONS",
        "10",
        "Size of the database connection pool (1–200).",
    ),
    setting(
        "ACDM_AUTO_MIGRATE",
        "true",
        "Apply pending database migrations when `serve` or a provisioning command starts. With `false`, run `acdm-backend migrate` yourself; `/readyz` reports pending migrations.",
    ),
    setting(
        "GITLAB_WIKI_BASE_URL",
        "(unset)",
        "Root of the GitLab instance holding the wiki (`https://gitlab.example.com`); the client adds `/api/v4/…`. Unset: the wiki is the local folder `<ACDM_DATA_DIR>/wiki`.",
    ),
    setting(
        "GITLAB_WIKI_PROJECT_ID",
        "(unset)",
        "The wiki's GitLab project: a numeric id or a `group/project` path. Required with `GITLAB_WIKI_BASE_URL`.",
    ),
    secret(
        "GITLAB_WIKI_PAT",
        "GitLab personal access token with `read_api` (sent as `PRIVATE-TOKEN`). Missing while GitLab is configured: `/mcp/health` reports the wiki source as failing.",
    ),
    setting(
        "NEXTCLOUD_URL",
        "(unset)",
        "Root of the Nextcloud instance (`https://cloud.example.com`). Unset: files live in the local folder `<ACDM_DATA_DIR>/files`.",
    ),
    setting(
        "NEXTCLOUD_USER",
        "(unset)",
        "The Nextcloud service account whose files hold the projects. Required with `NEXTCLOUD_URL`.",
    ),
    secret(
        "NEXTCLOUD_APP_PASSWORD",
        "App password of the service account. Missing while Nextcloud is configured: `/mcp/health` reports the file source as failing.",
    ),
    setting(
        "NEXTCLOUD_BASE_PATH",
        "/Projects",
        "Folder inside the service account's files that holds one folder per project: `<NEXTCLOUD_BASE_PATH>/<project name>/`.",
    ),
    setting(
        "ACDM_LOCAL_SOURCES",
        "true",
        "Use local folders under ACDM_DATA_DIR for the wiki and files when GitLab or Nextcloud is not configured. Production sets `false`: an unconfigured source then answers `source_not_configured` instead of serving an empty folder.",
    ),
    setting(
        "ACDM_MCP_SESSIONS",
        "false",
        "Keep MCP sessions (SSE streams, `Mcp-Session-Id`). Default: stateless with JSON responses, so any replica answers any request.",
    ),
    setting(
        "ACDM_MCP_MAX_READ_BYTES",
        "131072",
        "Largest window the MCP read tools return in one call (1024–4194304); the default window is 32 KiB or this, whichever is smaller.",
    ),
    setting(
        "ACDM_UPSTREAM_CONNECT_TIMEOUT_SECONDS",
        "5",
        "Time allowed to connect to GitLab or Nextcloud (1–60).",
    ),
    setting(
        "ACDM_UPSTREAM_READ_TIMEOUT_SECONDS",
        "15",
        "Longest silence allowed while GitLab or Nextcloud answers (1–300).",
    ),
    setting(
        "ACDM_UPSTREAM_TIMEOUT_SECONDS",
        "30",
        "Budget for one upstream call, retries included (1–600).",
    ),
    setting(
        "ACDM_UPSTREAM_RETRIES",
        "2",
        "Extra attempts for upstream reads after a transient failure (0–5); writes are never retried blindly.",
    ),
    setting(
        "ACDM_MCP_ALLOWED_HOSTS",
        "localhost,127.0.0.1,::1,acdm-backend",
        "Comma-separated `Host` values the MCP endpoint accepts (`host` or `host:port`). In-network callers use the service hostname.",
    ),
    setting(
        "ACDM_SCOPE_CACHE_TTL_SECONDS",
        "300",
        "How long a resolved agent → project mapping is cached (1–3600). Misses are never cached.",
    ),
    setting(
        "ACDM_SCOPE_POLL_MILLIS",
        "2000",
        "How often each server checks whether agent mounts changed elsewhere (100–60000); an unmount reaches every server within this time.",
    ),
    setting(
        "ACDM_EVENTS_SETTLE_AFTER_SECONDS",
        "600",
        "Storage events still `pending` this long after they were recorded are settled by the reconciler (at start-up and every 30 s): found done ⇒ `applied`, otherwise rolled back ⇒ `failed` (60–86400). Keep it well above the longest write (a handful of upstream calls, each up to `ACDM_UPSTREAM_TIMEOUT_SECONDS`), so no replica settles another's write in flight. `acdm-backend events reconcile` settles everything now, after a crash.",
    ),
    setting(
        "ACDM_MAX_REQUEST_BYTES",
        "10485760",
        "Largest request body accepted, in bytes (1024–268435456); larger bodies get `payload_too_large`.",
    ),
    setting(
        "ACDM_HEADER_READ_TIMEOUT_SECONDS",
        "30",
        "Time a client has to send a complete request head (1–300); slower clients get `408` and are disconnected, however they dribble. It is also how long an idle keep-alive connection stays open, so a load balancer's idle timeout towards this service must be shorter.",
    ),
    setting(
        "ACDM_MAX_CONNECTIONS",
        "512",
        "Connections served at once (1–65536). When reached, new connections wait in the listen backlog until one closes (they are not refused). Keep it below the process's file-descriptor limit, leaving room for the database pool and upstream calls.",
    ),
    setting(
        "ACDM_SHUTDOWN_GRACE_SECONDS",
        "10",
        "On SIGTERM/SIGINT, how long in-flight requests may finish before open connections are closed (0–300).",
    ),
    setting(
        "ACDM_LOG_FORMAT",
        "auto",
        "`json` (one object per line), `pretty`, or `auto`: pretty on a terminal, JSON otherwise. Logs go to standard error.",
    ),
    setting(
        "ACDM_LOG",
        "info",
        "Log filter in `tracing` syntax. Unset (here and in `RUST_LOG`, its fallback): this service's crates at `info` and libraries (rmcp, sqlx, hyper, …) at `warn`. A value replaces that whole default: `info` shows the libraries' INFO lines too; `warn,acdm_store=debug` narrows to one crate.",
    ),
];

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Pretty on a terminal, JSON otherwise.
    Auto,
    /// One JSON object per line.
    Json,
    /// Human-readable.
    Pretty,
}

/// Logging settings.
#[derive(Debug, Clone)]
pub struct LogSettings {
    /// Output format.
    pub format: LogFormat,
    /// `ACDM_LOG`, if set.
    pub filter: Option<String>,
}

/// The GitLab wiki source, when configured.
#[derive(Debug, Clone)]
pub struct GitlabSettings {
    /// Instance root.
    pub base_url: url::Url,
    /// Numeric id or `group/project`.
    pub project_id: String,
    /// The token; `None` is reported by health checks.
    pub pat: Option<SecretString>,
}

/// The Nextcloud file source, when configured.
#[derive(Debug, Clone)]
pub struct NextcloudSettings {
    /// Instance root.
    pub url: url::Url,
    /// Service account.
    pub user: String,
    /// App password; `None` is reported by health checks.
    pub app_password: Option<SecretString>,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `ACDM_LISTEN_ADDR`.
    pub listen_addr: SocketAddr,
    /// `ACDM_DATA_DIR`.
    pub data_dir: PathBuf,
    /// `ACDM_MCP_SERVICE_TOKEN`; `None` refuses all gated traffic.
    pub service_token: Option<SecretString>,
    /// `ACDM_ADMIN_TOKEN`; `None` disables the operator API.
    pub admin_token: Option<SecretString>,
    /// `ACDM_AI_NC_WRITES_ENABLED` at start.
    pub nc_writes_enabled: bool,
    /// `DATABASE_URL` and `DATABASE_MAX_CONNECTIONS`.
    pub database: DatabaseConfig,
    /// `ACDM_AUTO_MIGRATE`.
    pub auto_migrate: bool,
    /// `NEXTCLOUD_BASE_PATH`.
    pub files_base: AbsPath,
    /// `GITLAB_WIKI_*`.
    pub gitlab: Option<GitlabSettings>,
    /// `NEXTCLOUD_*`.
    pub nextcloud: Option<NextcloudSettings>,
    /// `ACDM_LOCAL_SOURCES`: local folders stand in for unconfigured sources.
    pub local_sources: bool,
    /// `ACDM_MCP_SESSIONS`.
    pub mcp_sessions: bool,
    /// `ACDM_MCP_MAX_READ_BYTES`.
    pub mcp_max_read_bytes: u64,
    /// `ACDM_UPSTREAM_*`: timeouts and retries of GitLab and Nextcloud calls.
    pub upstream: acdm_sources::http::HttpSettings,
    /// `ACDM_MCP_ALLOWED_HOSTS`, lowercased.
    pub mcp_allowed_hosts: Vec<String>,
    /// `ACDM_SCOPE_CACHE_TTL_SECONDS`.
    pub scope_cache_ttl: Duration,
    /// `ACDM_SCOPE_POLL_MILLIS`.
    pub scope_poll_interval: Duration,
    /// `ACDM_EVENTS_SETTLE_AFTER_SECONDS`.
    pub events_settle_after: Duration,
    /// `ACDM_MAX_REQUEST_BYTES`.
    pub max_request_bytes: usize,
    /// `ACDM_HEADER_READ_TIMEOUT_SECONDS`.
    pub header_read_timeout: Duration,
    /// `ACDM_MAX_CONNECTIONS`.
    pub max_connections: usize,
    /// `ACDM_SHUTDOWN_GRACE_SECONDS`.
    pub shutdown_grace: Duration,
    /// `ACDM_LOG_FORMAT` and `ACDM_LOG`.
    pub log: LogSettings,
}

/// Everything wrong with a configuration, each line naming its setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// One line per problem: `SETTING (source): problem`.
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "invalid configuration:")?;
        for problem in &self.problems {
            writeln!(f, "  - {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// The environment as a figment provider: only known names, values taken
/// literally (figment's own `Env` would parse quotes, escapes and numbers,
/// which would change a token like `"0123…"`).
struct EnvironmentStrings(BTreeMap<String, String>);

impl Provider for EnvironmentStrings {
    fn metadata(&self) -> Metadata {
        Metadata::named("environment")
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let dict: Dict = self
            .0
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect();
        Ok(Map::from([(Profile::Default, dict)]))
    }
}

/// Collects problems while reading settings.
struct Reader {
    figment: Figment,
    values: Dict,
    problems: Vec<String>,
}

impl Reader {
    fn source(&self, name: &str) -> String {
        match self.figment.find_metadata(name) {
            Some(meta) => match &meta.source {
                Some(source) => format!("{source}"),
                None => meta.name.to_string(),
            },
            None => "default".to_owned(),
        }
    }

    fn problem(&mut self, name: &str, problem: impl fmt::Display) {
        let source = self.source(name);
        self.problems
            .push(format!("{name} (from {source}): {problem}"));
    }

    /// The raw text of a setting; `None` when unset or empty.
    fn text(&mut self, name: &str) -> Option<String> {
        let value = self.values.get(name)?.clone();
        let text = match value {
            Value::String(_, s) => s,
            Value::Bool(_, b) => b.to_string(),
            Value::Num(_, n) => match (n.to_i128(), n.to_f64()) {
                (Some(i), _) => i.to_string(),
                (None, Some(f)) => f.to_string(),
                _ => {
                    self.problem(name, "is not a number this service can read");
                    return None;
                }
            },
            Value::Char(_, c) => c.to_string(),
            Value::Empty(..) => return None,
            Value::Dict(..) | Value::Array(..) => {
                self.problem(name, "must be a single value, not a table or a list");
                return None;
            }
        };
        (!text.is_empty()).then_some(text)
    }

    fn parse<T>(
        &mut self,
        name: &str,
        default: T,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> T {
        match self.text(name) {
            None => default,
            Some(text) => parse(&text).unwrap_or_else(|problem| {
                self.problem(name, problem);
                default
            }),
        }
    }

    fn bool(&mut self, name: &str, default: bool) -> bool {
        self.parse(name, default, |t| match t.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err(format!("`{t}` is not a boolean; use true or false")),
        })
    }

    fn number(&mut self, name: &str, default: u64, range: std::ops::RangeInclusive<u64>) -> u64 {
        self.parse(name, default, |t| match t.parse::<u64>() {
            Ok(n) if range.contains(&n) => Ok(n),
            Ok(n) => Err(format!("{n} is outside {}–{}", range.start(), range.end())),
            Err(_) => Err(format!("`{t}` is not a whole number")),
        })
    }

    fn token(&mut self, name: &str) -> Option<SecretString> {
        let text = self.text(name)?;
        let problem = if text.trim().is_empty() {
            Some("is blank; leave it empty or set a real token")
        } else if text.trim().len() != text.len() {
            Some("has leading or trailing whitespace; callers must send it byte for byte")
        } else if !text.bytes().all(|b| b.is_ascii_graphic()) {
            Some("must be visible ASCII without spaces (it travels in an HTTP header)")
        } else if text.len() < 32 {
            Some("must be at least 32 characters; generate one with `openssl rand -hex 32`")
        } else if text.len() > 512 {
            Some("must be at most 512 characters")
        } else {
            None
        };
        match problem {
            Some(problem) => {
                self.problem(name, problem);
                None
            }
            None => Some(SecretString::from(text)),
        }
    }

    fn secret(&mut self, name: &str) -> Option<SecretString> {
        self.text(name).map(SecretString::from)
    }

    fn url(&mut self, name: &str) -> Option<url::Url> {
        let text = self.text(name)?;
        let parsed = url::Url::parse(&text).map_err(|e| format!("is not a URL ({e})"));
        let checked = parsed.and_then(|url| {
            if !matches!(url.scheme(), "http" | "https") {
                Err("must start with http:// or https://".to_owned())
            } else if url.host_str().is_none_or(str::is_empty) {
                Err("has no host".to_owned())
            } else if !url.username().is_empty() || url.password().is_some() {
                Err("must not carry credentials; use the token or password setting".to_owned())
            } else if url.query().is_some() || url.fragment().is_some() {
                Err("must not have a query or fragment; give the instance root".to_owned())
            } else {
                Ok(url)
            }
        });
        checked.map_err(|problem| self.problem(name, problem)).ok()
    }

    fn plain(
        &mut self,
        name: &str,
        check: impl FnOnce(&str) -> Result<(), String>,
    ) -> Option<String> {
        let text = self.text(name)?;
        match check(&text) {
            Ok(()) => Some(text),
            Err(problem) => {
                self.problem(name, problem);
                None
            }
        }
    }

    /// True when the setting has a non-empty value (without reporting anything).
    fn is_set(&self, name: &str) -> bool {
        match self.values.get(name) {
            None | Some(Value::Empty(..)) => false,
            Some(Value::String(_, s)) => !s.is_empty(),
            Some(_) => true,
        }
    }

    fn require(&mut self, name: &str, because: &str) {
        self.problems
            .push(format!("{name}: required when {because} is set"));
    }
}

fn check_project_id(text: &str) -> Result<(), String> {
    let numeric = text.bytes().all(|b| b.is_ascii_digit());
    let path_like = text.split('/').count() >= 2
        && text.split('/').all(|segment| {
            !segment.is_empty()
                && segment != "."
                && segment != ".."
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        });
    if numeric || path_like {
        Ok(())
    } else {
        Err("must be a numeric project id or a `group/project` path".to_owned())
    }
}

fn check_nextcloud_user(text: &str) -> Result<(), String> {
    if text.len() > 64 {
        return Err("is longer than 64 characters".to_owned());
    }
    if text
        .chars()
        .any(|c| c.is_control() || c == '/' || c == '\\' || c.is_whitespace())
    {
        return Err("must not contain slashes, whitespace or control characters".to_owned());
    }
    if text == "." || text == ".." {
        return Err("is not a user name".to_owned());
    }
    Ok(())
}

fn parse_hosts(text: &str) -> Result<Vec<String>, String> {
    let hosts: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    if hosts.is_empty() {
        return Err("lists no host".to_owned());
    }
    if let Some(bad) = hosts.iter().find(|h| {
        !h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
    }) {
        return Err(format!("`{bad}` is not a host or host:port"));
    }
    Ok(hosts)
}

impl Config {
    /// Reads the optional TOML `file` and the process environment.
    #[expect(
        clippy::disallowed_methods,
        reason = "the binary is where configuration is read; everything else gets a Config"
    )]
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_from(file, std::env::vars_os())
    }

    /// Reads the optional TOML `file` and the given environment (tests pass
    /// their own, so they never touch the process environment).
    pub fn load_from(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<Self, ConfigError> {
        let mut problems = Vec::new();
        let mut env_values = BTreeMap::new();
        for (key, value) in env {
            let Some(key) = key.to_str() else { continue };
            if !SETTINGS.iter().any(|s| s.name == key) {
                continue;
            }
            match value.into_string() {
                Ok(value) => {
                    env_values.insert(key.to_owned(), value);
                }
                Err(_) => problems.push(format!("{key} (from environment): is not valid UTF-8")),
            }
        }
        let mut figment = Figment::new();
        if let Some(file) = file {
            if !file.is_file() {
                problems.push(format!("config file {} does not exist", file.display()));
            }
            figment = figment.merge(Toml::file_exact(file));
        }
        figment = figment.merge(EnvironmentStrings(env_values));
        let values: Dict = match figment.extract() {
            Ok(values) => values,
            Err(error) => {
                problems.push(format!("cannot read the configuration: {error}"));
                Dict::new()
            }
        };
        for key in values.keys() {
            if !SETTINGS.iter().any(|s| s.name == key.as_str()) {
                let hint = SETTINGS
                    .iter()
                    .find(|s| s.name.eq_ignore_ascii_case(key))
                    .map(|s| format!(" (did you mean {}?)", s.name))
                    .unwrap_or_default();
                problems.push(format!(
                    "{key}: unknown setting{hint}; see docs/config.md for the list"
                ));
            }
        }
        let mut r = Reader {
            figment,
            values,
            problems,
        };
        let config = Self::read(&mut r);
        if r.problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError {
                problems: r.problems,
            })
        }
    }

    fn read(r: &mut Reader) -> Self {
        let listen_addr = r.parse(
            "ACDM_LISTEN_ADDR",
            SocketAddr::from(([127, 0, 0, 1], 8002)),
            |t| {
                t.parse()
                    .map_err(|_| format!("`{t}` is not an address:port such as 127.0.0.1:8002"))
            },
        );
        let data_dir = PathBuf::from(
            r.text("ACDM_DATA_DIR")
                .unwrap_or_else(|| "./data".to_owned()),
        );

        let service_token = r.token("ACDM_MCP_SERVICE_TOKEN");
        let admin_token = r.token("ACDM_ADMIN_TOKEN");
        if let (Some(service), Some(admin)) = (&service_token, &admin_token)
            && service.expose_secret() == admin.expose_secret()
        {
            r.problem(
                "ACDM_ADMIN_TOKEN",
                "must differ from ACDM_MCP_SERVICE_TOKEN",
            );
        }
        let nc_writes_enabled = r.bool("ACDM_AI_NC_WRITES_ENABLED", true);

        let target = match r.secret("DATABASE_URL") {
            None => DatabaseTarget::Sqlite {
                path: data_dir.join("acdm.sqlite3"),
            },
            Some(url) => DatabaseTarget::from_url(&url).unwrap_or_else(|e| {
                r.problem("DATABASE_URL", e);
                DatabaseTarget::Sqlite {
                    path: data_dir.join("acdm.sqlite3"),
                }
            }),
        };
        let mut database = DatabaseConfig::new(target);
        database.max_connections =
            u32::try_from(r.number("DATABASE_MAX_CONNECTIONS", 10, 1..=200)).unwrap_or(10);
        let auto_migrate = r.bool("ACDM_AUTO_MIGRATE", true);

        let default_base = AbsPath::parse("/Projects").unwrap_or_else(|_| AbsPath::root());
        let files_base = r.parse("NEXTCLOUD_BASE_PATH", default_base, |t| {
            AbsPath::parse(t).map_err(|e| e.to_string())
        });

        let gitlab_url_set = r.is_set("GITLAB_WIKI_BASE_URL");
        let gitlab_project_set = r.is_set("GITLAB_WIKI_PROJECT_ID");
        let gitlab_pat_set = r.is_set("GITLAB_WIKI_PAT");
        if gitlab_url_set && !gitlab_project_set {
            r.require("GITLAB_WIKI_PROJECT_ID", "GITLAB_WIKI_BASE_URL");
        }
        if !gitlab_url_set && (gitlab_project_set || gitlab_pat_set) {
            r.require(
                "GITLAB_WIKI_BASE_URL",
                "GITLAB_WIKI_PROJECT_ID or GITLAB_WIKI_PAT",
            );
        }
        let gitlab = match (
            r.url("GITLAB_WIKI_BASE_URL"),
            r.plain("GITLAB_WIKI_PROJECT_ID", check_project_id),
            r.secret("GITLAB_WIKI_PAT"),
        ) {
            (Some(base_url), Some(project_id), pat) => Some(GitlabSettings {
                base_url,
                project_id,
                pat,
            }),
            _ => None,
        };

        let nc_url_set = r.is_set("NEXTCLOUD_URL");
        let nc_user_set = r.is_set("NEXTCLOUD_USER");
        let nc_password_set = r.is_set("NEXTCLOUD_APP_PASSWORD");
        if nc_url_set && !nc_user_set {
            r.require("NEXTCLOUD_USER", "NEXTCLOUD_URL");
        }
        if !nc_url_set && (nc_user_set || nc_password_set) {
            r.require("NEXTCLOUD_URL", "NEXTCLOUD_USER or NEXTCLOUD_APP_PASSWORD");
        }
        let nextcloud = match (
            r.url("NEXTCLOUD_URL"),
            r.plain("NEXTCLOUD_USER", check_nextcloud_user),
            r.secret("NEXTCLOUD_APP_PASSWORD"),
        ) {
            (Some(url), Some(user), app_password) => Some(NextcloudSettings {
                url,
                user,
                app_password,
            }),
            _ => None,
        };

        let local_sources = r.bool("ACDM_LOCAL_SOURCES", true);
        let mcp_sessions = r.bool("ACDM_MCP_SESSIONS", false);
        let mcp_max_read_bytes = r.number("ACDM_MCP_MAX_READ_BYTES", 128 * 1024, 1024..=4 << 20);
        let upstream = acdm_sources::http::HttpSettings {
            connect_timeout: Duration::from_secs(r.number(
                "ACDM_UPSTREAM_CONNECT_TIMEOUT_SECONDS",
                5,
                1..=60,
            )),
            read_timeout: Duration::from_secs(r.number(
                "ACDM_UPSTREAM_READ_TIMEOUT_SECONDS",
                15,
                1..=300,
            )),
            timeout: Duration::from_secs(r.number("ACDM_UPSTREAM_TIMEOUT_SECONDS", 30, 1..=600)),
            retries: u32::try_from(r.number("ACDM_UPSTREAM_RETRIES", 2, 0..=5)).unwrap_or(2),
            ..acdm_sources::http::HttpSettings::default()
        };
        let mcp_allowed_hosts = r.parse(
            "ACDM_MCP_ALLOWED_HOSTS",
            ["localhost", "127.0.0.1", "::1", "acdm-backend"]
                .map(str::to_owned)
                .to_vec(),
            parse_hosts,
        );
        let scope_cache_ttl =
            Duration::from_secs(r.number("ACDM_SCOPE_CACHE_TTL_SECONDS", 300, 1..=3600));
        let scope_poll_interval =
            Duration::from_millis(r.number("ACDM_SCOPE_POLL_MILLIS", 2000, 100..=60_000));
        let events_settle_after =
            Duration::from_secs(r.number("ACDM_EVENTS_SETTLE_AFTER_SECONDS", 600, 60..=86_400));
        let max_request_bytes =
            usize::try_from(r.number("ACDM_MAX_REQUEST_BYTES", 10 << 20, 1024..=256 << 20))
                .unwrap_or(10 << 20);
        let header_read_timeout =
            Duration::from_secs(r.number("ACDM_HEADER_READ_TIMEOUT_SECONDS", 30, 1..=300));
        let max_connections =
            usize::try_from(r.number("ACDM_MAX_CONNECTIONS", 512, 1..=65_536)).unwrap_or(512);
        let shutdown_grace =
            Duration::from_secs(r.number("ACDM_SHUTDOWN_GRACE_SECONDS", 10, 0..=300));
        let format = r.parse("ACDM_LOG_FORMAT", LogFormat::Auto, |t| {
            match t.to_ascii_lowercase().as_str() {
                "auto" => Ok(LogFormat::Auto),
                "json" => Ok(LogFormat::Json),
                "pretty" => Ok(LogFormat::Pretty),
                _ => Err(format!("`{t}` is not one of auto, json, pretty")),
            }
        });
        let filter = r.plain("ACDM_LOG", |t| {
            tracing_subscriber::EnvFilter::try_new(t)
                .map(|_| ())
                .map_err(|e| format!("is not a log filter ({e})"))
        });

        Self {
            listen_addr,
            data_dir,
            service_token,
            admin_token,
            nc_writes_enabled,
            database,
            auto_migrate,
            files_base,
            gitlab,
            nextcloud,
            local_sources,
            mcp_sessions,
            mcp_max_read_bytes,
            upstream,
            mcp_allowed_hosts,
            scope_cache_ttl,
            scope_poll_interval,
            events_settle_after,
            max_request_bytes,
            header_read_timeout,
            max_connections,
            shutdown_grace,
            log: LogSettings { format, filter },
        }
    }

    /// The configuration with every secret replaced by whether it is set,
    /// for `check-config` and the start-up log.
    pub fn redacted(&self) -> serde_json::Value {
        let set = |s: &Option<SecretString>| {
            if s.is_some() {
                "set (redacted)"
            } else {
                "not set"
            }
        };
        json!({
            "ACDM_LISTEN_ADDR": self.listen_addr.to_string(),
            "ACDM_DATA_DIR": self.data_dir.display().to_string(),
            "ACDM_MCP_SERVICE_TOKEN": set(&self.service_token),
            "ACDM_ADMIN_TOKEN": set(&self.admin_token),
            "ACDM_AI_NC_WRITES_ENABLED": self.nc_writes_enabled,
            "database": self.database.target.describe(),
            "DATABASE_MAX_CONNECTIONS": self.database.max_connections,
            "ACDM_AUTO_MIGRATE": self.auto_migrate,
            "NEXTCLOUD_BASE_PATH": self.files_base.to_string(),
            "wiki": match &self.gitlab {
                Some(g) => json!({
                    "source": "gitlab",
                    "GITLAB_WIKI_BASE_URL": g.base_url.as_str(),
                    "GITLAB_WIKI_PROJECT_ID": g.project_id,
                    "GITLAB_WIKI_PAT": set(&g.pat),
                }),
                None if self.local_sources => json!({ "source": "local folder" }),
                None => json!({ "source": "not configured" }),
            },
            "files": match &self.nextcloud {
                Some(n) => json!({
                    "source": "nextcloud",
                    "NEXTCLOUD_URL": n.url.as_str(),
                    "NEXTCLOUD_USER": n.user,
                    "NEXTCLOUD_APP_PASSWORD": set(&n.app_password),
                }),
                None if self.local_sources => json!({ "source": "local folder" }),
                None => json!({ "source": "not configured" }),
            },
            "ACDM_LOCAL_SOURCES": self.local_sources,
            "ACDM_MCP_SESSIONS": self.mcp_sessions,
            "ACDM_MCP_MAX_READ_BYTES": self.mcp_max_read_bytes,
            "ACDM_UPSTREAM_CONNECT_TIMEOUT_SECONDS": self.upstream.connect_timeout.as_secs(),
            "ACDM_UPSTREAM_READ_TIMEOUT_SECONDS": self.upstream.read_timeout.as_secs(),
            "ACDM_UPSTREAM_TIMEOUT_SECONDS": self.upstream.timeout.as_secs(),
            "ACDM_UPSTREAM_RETRIES": self.upstream.retries,
            "ACDM_MCP_ALLOWED_HOSTS": self.mcp_allowed_hosts,
            "ACDM_SCOPE_CACHE_TTL_SECONDS": self.scope_cache_ttl.as_secs(),
            "ACDM_SCOPE_POLL_MILLIS": u64::try_from(self.scope_poll_interval.as_millis()).unwrap_or(u64::MAX),
            "ACDM_EVENTS_SETTLE_AFTER_SECONDS": self.events_settle_after.as_secs(),
            "ACDM_MAX_REQUEST_BYTES": self.max_request_bytes,
            "ACDM_HEADER_READ_TIMEOUT_SECONDS": self.header_read_timeout.as_secs(),
            "ACDM_MAX_CONNECTIONS": self.max_connections,
            "ACDM_SHUTDOWN_GRACE_SECONDS": self.shutdown_grace.as_secs(),
        })
    }
}

/// `docs/config.md`, generated from [`SETTINGS`].
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "# Configuration reference\n\n\
         <!-- Generated from SETTINGS in bins/acdm-backend/src/config.rs; \
         regenerate with `ACDM_UPDATE_DOCS=1 cargo test -p acdm-backend --lib config`. -->\n\n\
         Every setting is read from the environment, or from the same key in a TOML file given \
         with `--config <file>` (or `ACDM_CONFIG`); the environment wins. Unknown keys in the \
         file are errors. Invalid values stop the service at start with a message naming the \
         setting. Secrets are never printed: `acdm-backend check-config` shows whether they are set.\n\n\
         | setting | default | secret | meaning |\n|---|---|---|---|\n",
    );
    for s in SETTINGS {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            s.name,
            if s.default.starts_with('(') {
                s.default.to_owned()
            } else {
                format!("`{}`", s.default)
            },
            if s.secret { "yes" } else { "" },
            s.doc
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    fn load(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::load_from(None, env(pairs))
    }

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";
    const ADMIN: &str = "fedcba9876543210fedcba9876543210";

    #[test]
    fn the_defaults_give_an_embedded_service_that_refuses_traffic() {
        let c = load(&[("HOME", "/root"), ("PATH", "/bin")]).unwrap();
        assert_eq!(c.listen_addr.to_string(), "127.0.0.1:8002");
        assert_eq!(c.data_dir, PathBuf::from("./data"));
        assert!(c.service_token.is_none() && c.admin_token.is_none());
        assert!(c.nc_writes_enabled && c.auto_migrate);
        assert_eq!(
            c.database.target.describe(),
            "sqlite file ./data/acdm.sqlite3"
        );
        assert_eq!(c.files_base.to_string(), "/Projects");
        assert!(c.gitlab.is_none() && c.nextcloud.is_none());
        assert_eq!(
            c.mcp_allowed_hosts,
            ["localhost", "127.0.0.1", "::1", "acdm-backend"]
        );
        assert_eq!(c.scope_cache_ttl, Duration::from_secs(300));
        assert_eq!(c.log.format, LogFormat::Auto);
    }

    /// Each bad value fails with a message that starts with its setting.
    fn check_invalid(pairs: &[(&str, &str)], expected_start: &str) {
        let err = load(pairs).unwrap_err();
        assert!(
            err.problems.iter().any(|p| p.starts_with(expected_start)),
            "{pairs:?}: {err}"
        );
    }

    #[test]
    fn slow_clients_are_bounded_by_default_and_the_bounds_are_validated() {
        let c = load(&[]).unwrap();
        assert_eq!(c.header_read_timeout, Duration::from_secs(30));
        assert_eq!(c.max_connections, 512);
        let c = load(&[
            ("ACDM_HEADER_READ_TIMEOUT_SECONDS", "5"),
            ("ACDM_MAX_CONNECTIONS", "2000"),
        ])
        .unwrap();
        assert_eq!(c.header_read_timeout, Duration::from_secs(5));
        assert_eq!(c.max_connections, 2000);
        check_invalid(
            &[("ACDM_HEADER_READ_TIMEOUT_SECONDS", "0")],
            "ACDM_HEADER_READ_TIMEOUT_SECONDS (from environment): 0 is outside 1–300",
        );
        check_invalid(
            &[("ACDM_MAX_CONNECTIONS", "0")],
            "ACDM_MAX_CONNECTIONS (from environment): 0 is outside 1–65536",
        );
        check_invalid(
            &[("ACDM_MAX_CONNECTIONS", "many")],
            "ACDM_MAX_CONNECTIONS (from environment): `many` is not a whole number",
        );
    }

    #[test]
    fn invalid_values_fail_naming_the_setting_and_its_source() {
        check_invalid(
            &[("ACDM_LISTEN_ADDR", "localhost")],
            "ACDM_LISTEN_ADDR (from environment): `localhost` is not",
        );
        check_invalid(
            &[("ACDM_MCP_SERVICE_TOKEN", "short")],
            "ACDM_MCP_SERVICE_TOKEN (from environment): must be at least 32",
        );
        check_invalid(
            &[("ACDM_MCP_SERVICE_TOKEN", "   ")],
            "ACDM_MCP_SERVICE_TOKEN (from environment): is blank",
        );
        check_invalid(
            &[("ACDM_MCP_SERVICE_TOKEN", &format!("{TOKEN}\n"))],
            "ACDM_MCP_SERVICE_TOKEN (from environment): has leading",
        );
        check_invalid(
            &[("ACDM_MCP_SERVICE_TOKEN", &format!("{TOKEN}é"))],
            "ACDM_MCP_SERVICE_TOKEN (from environment): must be visible ASCII",
        );
        check_invalid(
            &[
                ("ACDM_MCP_SERVICE_TOKEN", TOKEN),
                ("ACDM_ADMIN_TOKEN", TOKEN),
            ],
            "ACDM_ADMIN_TOKEN (from environment): must differ",
        );
        check_invalid(
            &[("ACDM_AI_NC_WRITES_ENABLED", "maybe")],
            "ACDM_AI_NC_WRITES_ENABLED",
        );
        check_invalid(
            &[("DATABASE_URL", "mysql://h/db")],
            "DATABASE_URL (from environment): unsupported scheme",
        );
        check_invalid(
            &[("DATABASE_MAX_CONNECTIONS", "0")],
            "DATABASE_MAX_CONNECTIONS (from environment): 0 is outside 1–200",
        );
        check_invalid(
            &[("NEXTCLOUD_BASE_PATH", "Projects")],
            "NEXTCLOUD_BASE_PATH (from environment): path must be absolute",
        );
        check_invalid(
            &[("NEXTCLOUD_BASE_PATH", "/Projects/../etc")],
            "NEXTCLOUD_BASE_PATH",
        );
        check_invalid(
            &[("GITLAB_WIKI_BASE_URL", "ftp://x")],
            "GITLAB_WIKI_BASE_URL (from environment): must start with http",
        );
        check_invalid(
            &[("GITLAB_WIKI_BASE_URL", "https://u:p@gitlab.example.com")],
            "GITLAB_WIKI_BASE_URL (from environment): must not carry credentials",
        );
        check_invalid(
            &[("GITLAB_WIKI_BASE_URL", "https://gitlab.example.com")],
            "GITLAB_WIKI_PROJECT_ID: required when GITLAB_WIKI_BASE_URL",
        );
        check_invalid(
            &[("GITLAB_WIKI_PAT", "glpat-x")],
            "GITLAB_WIKI_BASE_URL: required when",
        );
        check_invalid(
            &[
                ("GITLAB_WIKI_BASE_URL", "https://g.example"),
                ("GITLAB_WIKI_PROJECT_ID", "../x"),
            ],
            "GITLAB_WIKI_PROJECT_ID",
        );
        check_invalid(
            &[("NEXTCLOUD_URL", "https://cloud.example.com")],
            "NEXTCLOUD_USER: required when NEXTCLOUD_URL",
        );
        check_invalid(
            &[
                ("NEXTCLOUD_URL", "https://c.example"),
                ("NEXTCLOUD_USER", "a/b"),
            ],
            "NEXTCLOUD_USER (from environment): must not contain",
        );
        check_invalid(
            &[("ACDM_MCP_ALLOWED_HOSTS", " , ")],
            "ACDM_MCP_ALLOWED_HOSTS",
        );
        check_invalid(
            &[("ACDM_MCP_ALLOWED_HOSTS", "evil.example/x")],
            "ACDM_MCP_ALLOWED_HOSTS",
        );
        check_invalid(
            &[("ACDM_SCOPE_POLL_MILLIS", "10")],
            "ACDM_SCOPE_POLL_MILLIS",
        );
        check_invalid(&[("ACDM_LOG_FORMAT", "xml")], "ACDM_LOG_FORMAT");
        check_invalid(&[("ACDM_LOG", "info,[[[")], "ACDM_LOG");
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let err = load(&[
            ("ACDM_LISTEN_ADDR", "x"),
            ("DATABASE_MAX_CONNECTIONS", "many"),
        ])
        .unwrap_err();
        assert_eq!(err.problems.len(), 2, "{err}");
    }

    #[test]
    fn valid_sources_are_typed() {
        let c = load(&[
            ("ACDM_MCP_SERVICE_TOKEN", TOKEN),
            ("ACDM_ADMIN_TOKEN", ADMIN),
            ("ACDM_AI_NC_WRITES_ENABLED", "off"),
            ("DATABASE_URL", "postgres://u:hunter2@db/acdm"),
            ("GITLAB_WIKI_BASE_URL", "https://gitlab.example.com"),
            ("GITLAB_WIKI_PROJECT_ID", "docs/llm-wiki"),
            ("NEXTCLOUD_URL", "https://cloud.example.com/"),
            ("NEXTCLOUD_USER", "acdm-service"),
            ("NEXTCLOUD_BASE_PATH", "/Projects/"),
            (
                "ACDM_MCP_ALLOWED_HOSTS",
                "acdm-backend, Backend.internal:8002",
            ),
        ])
        .unwrap();
        assert_eq!(c.service_token.as_ref().unwrap().expose_secret(), TOKEN);
        assert!(!c.nc_writes_enabled);
        assert_eq!(c.gitlab.as_ref().unwrap().project_id, "docs/llm-wiki");
        assert!(
            c.gitlab.as_ref().unwrap().pat.is_none(),
            "a missing PAT is for health to report"
        );
        assert_eq!(c.nextcloud.as_ref().unwrap().user, "acdm-service");
        assert_eq!(c.files_base.to_string(), "/Projects");
        assert_eq!(
            c.mcp_allowed_hosts,
            ["acdm-backend", "backend.internal:8002"]
        );
        assert_eq!(c.database.target.describe(), "postgresql (DATABASE_URL)");
    }

    #[test]
    fn environment_values_are_taken_literally() {
        let quoted = "\"0123456789abcdef0123456789abcdef\"";
        let c = load(&[("ACDM_MCP_SERVICE_TOKEN", quoted)]).unwrap();
        assert_eq!(c.service_token.unwrap().expose_secret(), quoted);
        let digits = "00000000000000000000000000000000001";
        let c = load(&[("ACDM_MCP_SERVICE_TOKEN", digits)]).unwrap();
        assert_eq!(c.service_token.unwrap().expose_secret(), digits);
    }

    #[test]
    fn the_file_is_read_and_the_environment_wins() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("acdm.toml");
        std::fs::write(
            &file,
            format!(
                "ACDM_LISTEN_ADDR = \"0.0.0.0:9000\"\nACDM_AI_NC_WRITES_ENABLED = false\n\
                 ACDM_SCOPE_CACHE_TTL_SECONDS = 60\nACDM_MCP_SERVICE_TOKEN = \"{TOKEN}\"\n"
            ),
        )
        .unwrap();
        let c =
            Config::load_from(Some(&file), env(&[("ACDM_LISTEN_ADDR", "127.0.0.1:9001")])).unwrap();
        assert_eq!(c.listen_addr.to_string(), "127.0.0.1:9001");
        assert!(!c.nc_writes_enabled);
        assert_eq!(c.scope_cache_ttl, Duration::from_secs(60));
        assert!(c.service_token.is_some());

        std::fs::write(
            &file,
            "ACDM_LISTEN_ADRR = \"0.0.0.0:9000\"\nacdm_log = \"info\"\n",
        )
        .unwrap();
        let err = Config::load_from(Some(&file), env(&[])).unwrap_err();
        assert!(
            err.problems
                .iter()
                .any(|p| p.starts_with("ACDM_LISTEN_ADRR: unknown setting")),
            "{err}"
        );
        assert!(
            err.problems
                .iter()
                .any(|p| p.contains("did you mean ACDM_LOG?")),
            "{err}"
        );

        std::fs::write(&file, "ACDM_DATA_DIR = 7\nACDM_LISTEN_ADDR = \"nope\"\n").unwrap();
        let err = Config::load_from(Some(&file), env(&[])).unwrap_err();
        assert!(
            err.problems
                .iter()
                .any(|p| p.starts_with("ACDM_LISTEN_ADDR (from ") && p.contains("acdm.toml")),
            "names the file: {err}"
        );

        let missing = dir.path().join("missing.toml");
        let err = Config::load_from(Some(&missing), env(&[])).unwrap_err();
        assert!(err.problems[0].contains("does not exist"), "{err}");
    }

    #[test]
    fn secrets_never_appear_in_debug_or_redacted_output() {
        let c = load(&[
            ("ACDM_MCP_SERVICE_TOKEN", TOKEN),
            ("ACDM_ADMIN_TOKEN", ADMIN),
            ("DATABASE_URL", "postgres://u:hunter2@db/acdm"),
            ("GITLAB_WIKI_BASE_URL", "https://gitlab.example.com"),
            ("GITLAB_WIKI_PROJECT_ID", "42"),
            ("GITLAB_WIKI_PAT", "glpat-secret-value"),
            ("NEXTCLOUD_URL", "https://cloud.example.com"),
            ("NEXTCLOUD_USER", "svc"),
            ("NEXTCLOUD_APP_PASSWORD", "nc-app-password"),
        ])
        .unwrap();
        let outputs = [format!("{c:?}"), c.redacted().to_string()];
        for out in outputs {
            for secret in [
                TOKEN,
                ADMIN,
                "hunter2",
                "glpat-secret-value",
                "nc-app-password",
            ] {
                assert!(!out.contains(secret), "{secret} leaked: {out}");
            }
        }
        assert_eq!(c.redacted()["ACDM_MCP_SERVICE_TOKEN"], "set (redacted)");
    }

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "a test: ACDM_UPDATE_DOCS rewrites the reference"
    )]
    fn the_config_reference_is_current() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md");
        let expected = reference_markdown();
        if std::env::var_os("ACDM_UPDATE_DOCS").is_some() {
            std::fs::write(&path, &expected).unwrap();
        }
        let actual = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            actual == expected,
            "docs/config.md is out of date; run `ACDM_UPDATE_DOCS=1 cargo test -p acdm-backend --lib config`"
        );
    }

    #[test]
    fn the_example_config_file_in_deploy_is_valid() {
        let file =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/acdm-backend.example.toml");
        let c = Config::load_from(Some(&file), env(&[])).unwrap();
        assert_eq!(c.listen_addr.to_string(), "0.0.0.0:8002");
        assert!(c.gitlab.is_some() && c.nextcloud.is_some());
    }

    #[test]
    fn every_setting_is_read_and_documented_once() {
        let mut names: Vec<_> = SETTINGS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SETTINGS.len(), "duplicate setting");
        // Setting any documented name must not be reported as unknown.
        for s in SETTINGS {
            if let Err(err) = load(&[(s.name, "x")]) {
                assert!(
                    !err.problems.iter().any(|p| p.contains("unknown setting")),
                    "{}",
                    s.name
                );
            }
        }
    }
}
