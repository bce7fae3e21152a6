//! Configuration: settings from an optional TOML file and the environment
//! (the environment wins), validated into typed values at start.
//!
//! A setting has one name everywhere — the environment variable of spec §8,
//! and the same key in the TOML file — so every error names exactly what an
//! operator has to change. Secrets become [`SecretString`]s as they are
//! read and are never printed; `check-config` shows whether they are set.
//! Environment values are taken literally (no quote or escape processing).
//!
//! Each setting is declared once, in the `settings!` block below: its doc
//! comment, [`Config`] field and type, name, documented default and kind
//! (`kinds.rs`: parsing, range, secrecy, display). From that one
//! declaration come the field, its reading (`reader.rs`), its row in
//! [`SETTINGS`] and `docs/config.md`, and its entry in
//! [`Config::redacted`]. Rules between settings are in
//! `Config::check_together`.

mod kinds;
mod reader;
mod unknown;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use acdm_core::AbsPath;
pub use acdm_server::telemetry::{LogFormat, LogSettings};
use acdm_store::{DatabaseConfig, DatabaseTarget};
use figment::Figment;
use figment::providers::{Format, Toml};
use figment::value::Dict;
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use url::Url;

pub use kinds::CaCertificates;
use kinds::{
    Address, Bool, CaFile, Checked, Count, DatabaseUrl, Folder, Hosts, InstanceUrl, Issuer,
    IssuerUrl, LogFilter, LogFormats, Millis, Optional, Policy, Seconds, Secret, StorePath, Token,
    WebhookSecret, WebhookUrl, check_nextcloud_user, check_project_id, number,
};
pub use reader::Setting;
use reader::{EnvironmentStrings, Reader};
pub use unknown::{UnknownVariable, unknown_variables};

/// What is wrong with `text` as a token (`ACDM_MCP_SERVICE_TOKEN`,
/// `ACDM_ADMIN_TOKEN`) by the settings' own rule, or `None` (the demo's
/// token file holds such tokens outside the settings).
pub fn token_problem(text: &str) -> Option<String> {
    kinds::Kind::parse(&Token, text).err()
}

/// Declares every setting once. Each entry is its doc comment (the
/// operator-facing text of `docs/config.md`, also the field's rustdoc) and
/// `field: Type = "NAME", default "text", kind;`. It generates:
///
/// - the [`Config`] field;
/// - its reading in `Config::read_declared`: unset or empty gives the
///   documented default, read by the same kind, so the two cannot differ;
///   a bad value is a problem naming the setting and its source;
/// - its row in [`SETTINGS`] (the secret column comes from the kind);
/// - its entry in [`Config::shown`] (a secret kind shows only whether it
///   is set).
macro_rules! settings {
    (
        $(#[$meta:meta])*
        pub struct $config:ident {
            $(
                $(#[doc = $doc:literal])+
                $field:ident: $ty:ty = $name:literal, default $default:literal, $kind:expr;
            )+
        }
    ) => {
        $(#[$meta])*
        pub struct $config {
            $(
                $(#[doc = $doc])+
                #[doc = ""]
                #[doc = concat!("Setting `", $name, "`, default ", $default, ".")]
                pub $field: $ty,
            )+
        }

        /// Every setting the service reads, in declaration order.
        /// `docs/config.md` is generated from this table (and a test keeps it
        /// current).
        pub const SETTINGS: &[Setting] = &[
            $(
                Setting {
                    name: $name,
                    default: $default,
                    secret: kinds::is_secret(&$kind),
                    doc_lines: concat!($($doc),+),
                },
            )+
        ];

        impl $config {
            /// Reads every declared setting; `None` when any has a problem
            /// (each one is recorded in `r`, so all are reported at once).
            fn read_declared(r: &mut Reader) -> Option<Self> {
                $( let $field = r.read($name, $default, &$kind); )+
                Some(Self { $( $field: $field?, )+ })
            }

            /// Every setting's value as `check-config` shows it, in
            /// declaration order; secrets show only whether they are set.
            pub fn shown(&self) -> Vec<(&'static str, serde_json::Value)> {
                vec![$( ($name, kinds::Kind::show(&$kind, &self.$field)), )+]
            }

            /// Every setting's accepted range, when it is a bounded number.
            #[cfg(test)]
            fn declared_ranges() -> Vec<(&'static str, Option<std::ops::RangeInclusive<u64>>)> {
                vec![$( ($name, kinds::Kind::range(&$kind)), )+]
            }
        }
    };
}

settings! {
    /// The validated configuration: one field per setting. Groups that
    /// other crates take as one value are built on demand
    /// ([`Config::database`], [`Config::gitlab`], [`Config::nextcloud`],
    /// [`Config::upstream`], [`Config::log`]).
    #[derive(Debug, Clone)]
    pub struct Config {
        /// Address and port to listen on. Containers set `0.0.0.0:8002`.
        listen_addr: SocketAddr = "ACDM_LISTEN_ADDR", default "127.0.0.1:8002", Address;
        /// Folder for the embedded SQLite database, local-folder sources and trash. Created if
        /// missing.
        data_dir: PathBuf = "ACDM_DATA_DIR", default "./data", Folder;
        /// Shared service token callers send in `X-ACDM-Service-Auth`. Empty refuses every `/mcp`
        /// and `/agent-tools` request (and `/readyz` says so). Otherwise 32 to 512 visible ASCII
        /// characters: `openssl rand -hex 32`.
        service_token: Option<SecretString> = "ACDM_MCP_SERVICE_TOKEN",
            default "(empty)", Optional(Token);
        /// Bearer token of the operator API at `/admin`. Empty disables the API (every `/admin`
        /// path is 404). 32 to 512 visible ASCII characters, and never the service token.
        admin_token: Option<SecretString> = "ACDM_ADMIN_TOKEN", default "(empty)", Optional(Token);
        /// The operator console (`/console`, enabled with the admin token) is reached over HTTPS
        /// (a TLS-terminating proxy in front): its session cookie is marked `Secure`. Set it
        /// wherever the console is served over TLS; the cookie is `HttpOnly` and
        /// `SameSite=Strict` either way.
        console_secure_cookie: bool = "ACDM_CONSOLE_SECURE_COOKIE", default "false", Bool;
        /// Kill switch for file writes made through agents. `false` refuses them with
        /// `kill_switch_off` and operators cannot enable them at run time; with `true`, operators
        /// can switch writes off (and on again) at run time for every server (`PUT
        /// /admin/kill-switch`, `acdm-backend kill-switch`). Off wins.
        nc_writes_enabled: bool = "ACDM_AI_NC_WRITES_ENABLED", default "true", Bool;
        /// Whether the acting user (`X-ACDM-User-Id`) must be a member of the agent's project for
        /// any `/agent-tools` call. `true`: non-members get `permission_denied`. `false`: non-members
        /// are treated as members (the original deployment's behaviour). Either way, viewers only
        /// read, and deleting meetings and approving or rejecting reports need an admin or owner.
        bff_require_membership: bool = "ACDM_BFF_REQUIRE_MEMBERSHIP", default "true", Bool;
        /// `postgres://…` for PostgreSQL, or `sqlite:<path>`. Unset: the SQLite file
        /// `<ACDM_DATA_DIR>/acdm.sqlite3`. May carry a password, so it is treated as a secret.
        database_url: Option<DatabaseTarget> = "DATABASE_URL",
            default "(unset)", Optional(DatabaseUrl);
        /// Size of the database connection pool (1–200).
        database_max_connections: u32 = "DATABASE_MAX_CONNECTIONS",
            default "10", number::<u32>(1..=200);
        /// Apply pending database migrations when `serve` or a provisioning command starts. With
        /// `false`, run `acdm-backend migrate` yourself; `/readyz` reports pending migrations.
        auto_migrate: bool = "ACDM_AUTO_MIGRATE", default "true", Bool;
        /// Root of the GitLab instance holding the wiki (`https://gitlab.example.com`); the client
        /// adds `/api/v4/…`. Unset: the wiki is the local folder `<ACDM_DATA_DIR>/wiki`.
        gitlab_wiki_base_url: Option<Url> = "GITLAB_WIKI_BASE_URL",
            default "(unset)", Optional(InstanceUrl);
        /// The wiki's GitLab project: a numeric id or a `group/project` path. Required with
        /// `GITLAB_WIKI_BASE_URL`.
        gitlab_wiki_project_id: Option<String> = "GITLAB_WIKI_PROJECT_ID",
            default "(unset)", Optional(Checked(check_project_id));
        /// GitLab personal access token with `read_api` (sent as `PRIVATE-TOKEN`). Missing while
        /// GitLab is configured: `/mcp/health` reports the wiki source as failing.
        gitlab_wiki_pat: Option<SecretString> = "GITLAB_WIKI_PAT",
            default "(empty)", Optional(Secret);
        /// Root of the Nextcloud instance (`https://cloud.example.com`). Unset: files live in the
        /// local folder `<ACDM_DATA_DIR>/files`.
        nextcloud_url: Option<Url> = "NEXTCLOUD_URL", default "(unset)", Optional(InstanceUrl);
        /// The Nextcloud service account whose files hold the projects. Required with
        /// `NEXTCLOUD_URL`.
        nextcloud_user: Option<String> = "NEXTCLOUD_USER",
            default "(unset)", Optional(Checked(check_nextcloud_user));
        /// App password of the service account. Missing while Nextcloud is configured:
        /// `/mcp/health` reports the file source as failing.
        nextcloud_app_password: Option<SecretString> = "NEXTCLOUD_APP_PASSWORD",
            default "(empty)", Optional(Secret);
        /// Folder inside the service account's files that holds one folder per project:
        /// `<NEXTCLOUD_BASE_PATH>/<project name>/`.
        files_base: AbsPath = "NEXTCLOUD_BASE_PATH", default "/Projects", StorePath;
        /// Use local folders under ACDM_DATA_DIR for the wiki and files when GitLab or Nextcloud is
        /// not configured. Production sets `false`: an unconfigured source then answers
        /// `source_not_configured` instead of serving an empty folder.
        local_sources: bool = "ACDM_LOCAL_SOURCES", default "true", Bool;
        /// Keep MCP sessions (SSE streams, `Mcp-Session-Id`). Default: stateless with JSON
        /// responses, so any replica answers any request.
        mcp_sessions: bool = "ACDM_MCP_SESSIONS", default "false", Bool;
        /// Largest window the MCP read tools return in one call (1024–4194304); the default window
        /// is 32 KiB or this, whichever is smaller.
        mcp_max_read_bytes: u64 = "ACDM_MCP_MAX_READ_BYTES",
            default "131072", number::<u64>(1024..=4_194_304);
        /// How often the content index looks for changes in the wiki and the project folders
        /// (0–86400): a refresh with nothing changed costs one branch lookup on GitLab and one
        /// folder listing per project folder. A write through `/agent-tools` is indexed at once.
        /// 0 turns the index off: searches are the upstreams' own (documents are still read as
        /// text).
        search_refresh: Duration = "ACDM_SEARCH_REFRESH_SECONDS", default "60",
            Seconds(0..=86_400);
        /// Folder of the content index. Unset: `<ACDM_DATA_DIR>/search-index`. Each server keeps
        /// its own; it is a cache (deleting it loses nothing: it is rebuilt from the upstreams).
        search_index_dir: Option<PathBuf> = "ACDM_SEARCH_INDEX_DIR", default "(unset)",
            Optional(Folder);
        /// The program that turns documents into text, run with the argument `extract` in a child
        /// process per document. Unset: this service's own binary, which is what it is for; set it
        /// only where the binary is run from a copy that cannot start itself again (and in tests
        /// that run the service inside another program).
        extract_program: Option<PathBuf> = "ACDM_EXTRACT_PROGRAM", default "(unset)",
            Optional(Folder);
        /// Documents turned into text at once (1–64), each in a child process of its own; as many
        /// are held in the service's memory at once (each at most `ACDM_EXTRACT_MAX_FILE_BYTES`
        /// and its text), the others wait their turn.
        extract_processes: usize = "ACDM_EXTRACT_PROCESSES", default "2", Count(1..=64);
        /// Time one document may take to become text (1–600): the child's CPU time and its
        /// wall-clock time are both bounded by it; past it the read is `document_unreadable`.
        extract_timeout: Duration = "ACDM_EXTRACT_TIMEOUT_SECONDS", default "20",
            Seconds(1..=600);
        /// Memory one extraction child may map, in MiB (64–65536); past it the child is stopped
        /// and the read is `document_unreadable`.
        extract_memory_mib: u64 = "ACDM_EXTRACT_MEMORY_MIB", default "1024",
            number::<u64>(64..=65_536);
        /// Largest document read as text, in bytes (1024–1073741824); larger ones are
        /// `document_unreadable` (their bytes stay readable through the BFF's `nc/read` with
        /// `"as": "raw"`), and indexed by name only.
        extract_max_file_bytes: u64 = "ACDM_EXTRACT_MAX_FILE_BYTES", default "33554432",
            number::<u64>(1024..=1_073_741_824);
        /// Largest text one document may give, in bytes (1024–268435456): a document that
        /// unpacks into more is `document_unreadable`, never cut short.
        extract_max_text_bytes: u64 = "ACDM_EXTRACT_MAX_TEXT_BYTES", default "8388608",
            number::<u64>(1024..=268_435_456);
        /// Text kept from recent extractions, by file and etag, in bytes (0–4294967296; 0: none).
        extract_cache_bytes: u64 = "ACDM_EXTRACT_CACHE_BYTES", default "33554432",
            number::<u64>(0..=4_294_967_296);
        /// Time allowed to connect to GitLab or Nextcloud (1–60).
        upstream_connect_timeout: Duration = "ACDM_UPSTREAM_CONNECT_TIMEOUT_SECONDS",
            default "5", Seconds(1..=60);
        /// Longest silence allowed while GitLab or Nextcloud answers (1–300).
        upstream_read_timeout: Duration = "ACDM_UPSTREAM_READ_TIMEOUT_SECONDS",
            default "10", Seconds(1..=300);
        /// Deadline of one upstream call, retries, the waits between them and the response body
        /// included (1–600); past it the call is `upstream_timeout`. A request's own deadline
        /// (`ACDM_REQUEST_TIMEOUT_SECONDS`) can end it sooner.
        upstream_timeout: Duration = "ACDM_UPSTREAM_TIMEOUT_SECONDS",
            default "20", Seconds(1..=600);
        /// Requests in flight at once to one GitLab or Nextcloud host (1–1024), from sending until
        /// the response is read; more wait for a free one within their deadline. Keep it at or
        /// below what the upstream serves at once (a Nextcloud's PHP workers).
        upstream_max_connections: usize = "ACDM_UPSTREAM_MAX_CONNECTIONS",
            default "32", Count(1..=1024);
        /// Egress proxy for `https` GitLab and Nextcloud instances:
        /// `http://[user:password@]host:port` (the port is required: clients disagree on its
        /// default), asked for a `CONNECT` tunnel. The lower-case
        /// `https_proxy` is read too and wins. Unset: direct.
        https_proxy: Option<SecretString> = "HTTPS_PROXY", default "(unset)", Optional(Secret);
        /// Egress proxy for plain `http` GitLab and Nextcloud instances, same form (`http_proxy`
        /// is read too and wins). Unset: direct.
        http_proxy: Option<SecretString> = "HTTP_PROXY", default "(unset)", Optional(Secret);
        /// Hosts reached without the proxy: comma-separated names (`gitlab.internal`), domains
        /// (`.corp.example`), IP addresses, CIDR blocks (`10.0.0.0/8`) or `*` for all
        /// (`no_proxy` is read too and wins).
        no_proxy: Option<String> = "NO_PROXY", default "(unset)", Optional(Checked(check_no_proxy));
        /// A PEM file of certificate authorities trusted for `https` GitLab and Nextcloud
        /// instances besides the public ones (a company's own CA, or a TLS-inspecting proxy's);
        /// read and checked at start. Unset: the public authorities only.
        upstream_ca_file: Option<CaCertificates> = "ACDM_UPSTREAM_CA_FILE",
            default "(unset)", Optional(CaFile);
        /// Deadline of a whole request to `/mcp` or `/agent-tools`, every upstream call it makes
        /// included (1–600). A caller that says how long it waits (`X-ACDM-Timeout-Ms`, which the
        /// harness client sends) is answered within nine tenths of that when it is less. Keep it
        /// below the callers' own timeout (the harness client's `NC_OP_TIMEOUT_SECONDS`, 30 s),
        /// so they read `upstream_timeout` rather than give up.
        request_timeout: Duration = "ACDM_REQUEST_TIMEOUT_SECONDS",
            default "25", Seconds(1..=600);
        /// Extra attempts for upstream reads after a transient failure (0–5); writes are never
        /// retried blindly.
        upstream_retries: u32 = "ACDM_UPSTREAM_RETRIES", default "2", number::<u32>(0..=5);
        /// Comma-separated `Host` values the MCP endpoint accepts (`host` or `host:port`).
        /// In-network callers use the service hostname.
        mcp_allowed_hosts: Vec<String> = "ACDM_MCP_ALLOWED_HOSTS",
            default "localhost,127.0.0.1,::1,acdm-backend", Hosts;
        /// How long a resolved agent → project mapping is cached (1–3600). Misses are never cached.
        scope_cache_ttl: Duration = "ACDM_SCOPE_CACHE_TTL_SECONDS",
            default "300", Seconds(1..=3600);
        /// How often each server checks whether agent mounts changed elsewhere (100–60000); an
        /// unmount reaches every server within this time.
        scope_poll_interval: Duration = "ACDM_SCOPE_POLL_MILLIS",
            default "2000", Millis(100..=60_000);
        /// Storage events still `pending` this long after they were recorded are settled by the
        /// reconciler (at start-up and every 30 s): found done ⇒ `applied`, otherwise rolled back ⇒
        /// `failed` (60–86400). Keep it well above the longest write (a handful of upstream calls,
        /// each up to `ACDM_UPSTREAM_TIMEOUT_SECONDS`), so no replica settles another's write in
        /// flight. `acdm-backend events reconcile` settles everything now, after a crash.
        events_settle_after: Duration = "ACDM_EVENTS_SETTLE_AFTER_SECONDS",
            default "600", Seconds(60..=86_400);
        /// BFF write operations that run only after a project owner or admin approved exactly
        /// that call, comma-separated labels (`nc.delete`, `nc.move`, `nc.write`,
        /// `business.delete_meeting`, `business.update_report_status`, `project.milestone/advance`,
        /// any write); empty: none. A project's own list (`PUT
        /// /admin/projects/{slug}/approval-policy`) replaces it for that project. Dry runs never
        /// need approval.
        approval_required_ops: acdm_core::approval::ApprovalPolicy =
            "ACDM_APPROVAL_REQUIRED_OPS", default "", Policy;
        /// How long an approval request lives, decided or not, until its write runs (1–2592000,
        /// 30 days); past it the agent gets `approval_expired`.
        approval_ttl: Duration = "ACDM_APPROVAL_TTL_SECONDS", default "86400",
            Seconds(1..=2_592_000);
        /// Where each new approval request is POSTed as JSON, signed as Standard Webhooks
        /// describes (`webhook-id`, `webhook-timestamp`, `webhook-signature`). Unset: no
        /// notifications; requests show in the console and `GET /admin/approvals`.
        approval_webhook_url: Option<Url> = "ACDM_APPROVAL_WEBHOOK_URL", default "(unset)",
            Optional(WebhookUrl);
        /// The webhook's signing secret, `whsec_` and 24–64 random bytes in base64 (Standard
        /// Webhooks' form). Required with `ACDM_APPROVAL_WEBHOOK_URL`.
        approval_webhook_secret: Option<SecretString> = "ACDM_APPROVAL_WEBHOOK_SECRET",
            default "(empty)", Optional(WebhookSecret);
        /// The service's address as people reach it (`https://acdm.example.com`), for the
        /// console links in approval notifications. Unset: `http://<ACDM_LISTEN_ADDR>`.
        public_url: Option<Url> = "ACDM_PUBLIC_URL", default "(unset)", Optional(InstanceUrl);
        /// The OpenID Connect issuer whose access tokens open `/mcp` to people's own MCP
        /// clients, exactly as its tokens' `iss` says it (`https://idp.example.com/realms/acdm`;
        /// plain `http://` only on a loopback address). Needs `ACDM_PUBLIC_URL`. Unset: `/mcp`
        /// takes the service token only. A person's token reads only the projects they are a
        /// member of, and opens neither `/agent-tools` nor `/admin`.
        oidc_issuer: Option<String> = "ACDM_OIDC_ISSUER", default "(unset)", Optional(Issuer);
        /// The audience people's tokens must name in `aud` (RFC 8707). Unset: this server's
        /// resource URI, `<ACDM_PUBLIC_URL>/mcp`.
        oidc_audience: Option<String> = "ACDM_OIDC_AUDIENCE", default "(unset)",
            Optional(Checked(check_audience));
        /// The issuer's JWKS, when its discovery document
        /// (`<issuer>/.well-known/openid-configuration`) should not be read.
        oidc_jwks_url: Option<Url> = "ACDM_OIDC_JWKS_URL", default "(unset)", Optional(IssuerUrl);
        /// The token claim holding the user's id, as project members are named. Use a claim
        /// the person cannot change: `sub` (or Entra ID's `oid`). `email` is accepted only
        /// with `email_verified: true` in the token; `preferred_username` and other claims a
        /// person may edit at some issuers would let them take another's memberships.
        oidc_user_claim: String = "ACDM_OIDC_USER_CLAIM", default "sub",
            Checked(check_claim_name);
        /// The issuer's token introspection endpoint (RFC 7662), for access tokens that are
        /// not JWTs (opaque tokens): each is asked about there, the answer kept for a minute at
        /// most (a revoked token stops working within that). JWTs are still verified by the
        /// issuer's keys. Needs `ACDM_OIDC_CLIENT_ID` and `ACDM_OIDC_CLIENT_SECRET`. Unset:
        /// opaque tokens are refused.
        oidc_introspection_url: Option<Url> = "ACDM_OIDC_INTROSPECTION_URL", default "(unset)",
            Optional(IssuerUrl);
        /// This service's client id at the issuer, for introspection (HTTP Basic).
        oidc_client_id: Option<String> = "ACDM_OIDC_CLIENT_ID", default "(unset)",
            Optional(Checked(check_client_id));
        /// This service's client secret at the issuer, for introspection.
        oidc_client_secret: Option<SecretString> = "ACDM_OIDC_CLIENT_SECRET",
            default "(empty)", Optional(Secret);
        /// Largest request body accepted, in bytes (1024–268435456); larger bodies get
        /// `payload_too_large`.
        max_request_bytes: usize = "ACDM_MAX_REQUEST_BYTES",
            default "10485760", Count(1024..=268_435_456);
        /// Time a client has to send a complete request head (1–300); slower clients get `408` and
        /// are disconnected, however they dribble. It is also how long an idle keep-alive
        /// connection stays open, so a load balancer's idle timeout towards this service must be
        /// shorter.
        header_read_timeout: Duration = "ACDM_HEADER_READ_TIMEOUT_SECONDS",
            default "30", Seconds(1..=300);
        /// Connections served at once (1–65536). When reached, new connections wait in the listen
        /// backlog until one closes (they are not refused). Keep it below the process's
        /// file-descriptor limit, leaving room for the database pool and upstream calls.
        max_connections: usize = "ACDM_MAX_CONNECTIONS", default "512", Count(1..=65_536);
        /// Threads that serve connections (0–256; 0: one per CPU core the process may use). Each
        /// runs its own event loop, and a connection stays on the thread it was handed to when
        /// accepted (the one with the fewest open), as nginx's worker processes do.
        connection_threads: usize = "ACDM_CONNECTION_THREADS", default "0", Count(0..=256);
        /// On SIGTERM, how long the server goes on serving while `/readyz` answers 503 `draining`
        /// (0–300), so a load balancer that probes it stops sending before the listener closes;
        /// responses meanwhile ask their client to close the connection. SIGINT (Ctrl-C) skips it.
        shutdown_prestop: Duration = "ACDM_SHUTDOWN_PRESTOP_SECONDS", default "5", Seconds(0..=300);
        /// Once the listener is closed, how long in-flight requests (MCP calls included) may finish
        /// before open connections are closed (0–300): a request still running then is cut off
        /// (its deadline, `ACDM_REQUEST_TIMEOUT_SECONDS`, may be longer). A stop takes at most the
        /// pre-stop delay plus this, plus two seconds for a background round in progress and one
        /// for file work a cut-off request left running.
        shutdown_grace: Duration = "ACDM_SHUTDOWN_GRACE_SECONDS", default "10", Seconds(0..=300);
        /// Calls one agent may make to `/agent-tools` per minute (0–1000000; 0: no limit), counted
        /// for the whole deployment whatever the number of replicas. Beyond it: 429
        /// `rate_limited` with `Retry-After`.
        bff_rate_per_minute: u32 = "ACDM_BFF_RATE_PER_MINUTE", default "600",
            number::<u32>(0..=1_000_000);
        /// Calls one agent may make at once after a quiet spell, within its rate (1–1000000).
        bff_rate_burst: u32 = "ACDM_BFF_RATE_BURST", default "60", number::<u32>(1..=1_000_000);
        /// Writes one agent may make per minute (nc writes, deletes and moves, business writes,
        /// milestone advances), on top of its calls' limit (0–1000000; 0: no limit of its own).
        bff_write_rate_per_minute: u32 = "ACDM_BFF_WRITE_RATE_PER_MINUTE", default "120",
            number::<u32>(0..=1_000_000);
        /// Writes one agent may make at once after a quiet spell (1–1000000).
        bff_write_rate_burst: u32 = "ACDM_BFF_WRITE_RATE_BURST", default "20",
            number::<u32>(1..=1_000_000);
        /// Calls of one MCP tool per minute, all callers together (0–1000000; 0: no limit);
        /// beyond it the call is a tool error `rate_limited` saying how long to wait.
        mcp_tool_rate_per_minute: u32 = "ACDM_MCP_TOOL_RATE_PER_MINUTE", default "6000",
            number::<u32>(0..=1_000_000);
        /// Calls of one MCP tool at once after a quiet spell (1–1000000).
        mcp_tool_rate_burst: u32 = "ACDM_MCP_TOOL_RATE_BURST", default "300",
            number::<u32>(1..=1_000_000);
        /// A server takes from a shared rate bucket as many calls as it was asked for in this many
        /// milliseconds before (at least one, at most half the burst), and drops what it did not
        /// use within as long again unless it leased again ahead (0–10000): a busy agent or tool
        /// costs about one database round trip per this period and server, taken ahead in the
        /// background in the period's last quarter (the calls left then carry over), a quiet one a
        /// round trip per call. 0: a round trip per call.
        rate_lease: Duration = "ACDM_RATE_LIMIT_LEASE_MILLIS", default "1000", Millis(0..=10_000);
        /// `json` (one object per line), `pretty`, or `auto`: pretty on a terminal, JSON otherwise.
        /// Logs go to standard error.
        log_format: LogFormat = "ACDM_LOG_FORMAT", default "auto", LogFormats;
        /// Log filter in `tracing` syntax. Unset (here and in `RUST_LOG`, its fallback): this
        /// service's crates at `info` and libraries (rmcp, sqlx, hyper, …) at `warn`. A value
        /// replaces that whole default: `info` shows the libraries' INFO lines too;
        /// `warn,acdm_store=debug` narrows to one crate.
        log_filter: Option<String> = "ACDM_LOG", default "(unset)", Optional(LogFilter);
    }
}

/// The GitLab wiki source, when configured.
#[derive(Debug, Clone)]
pub struct GitlabSettings {
    /// Instance root.
    pub base_url: Url,
    /// Numeric id or `group/project`.
    pub project_id: String,
    /// The token; `None` is reported by health checks.
    pub pat: Option<SecretString>,
}

/// The Nextcloud file source, when configured.
#[derive(Debug, Clone)]
pub struct NextcloudSettings {
    /// Instance root.
    pub url: Url,
    /// Service account.
    pub user: String,
    /// App password; `None` is reported by health checks.
    pub app_password: Option<SecretString>,
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

/// Settings also read under a lower-case name, which wins: the egress
/// proxy's variables, which tools spell both ways.
const LOWER_CASE_NAMES: [(&str, &str); 3] = [
    ("https_proxy", "HTTPS_PROXY"),
    ("http_proxy", "HTTP_PROXY"),
    ("no_proxy", "NO_PROXY"),
];

/// `NO_PROXY`: a list of names, addresses and blocks, one line of text.
fn check_no_proxy(text: &str) -> Result<(), String> {
    if text.chars().any(char::is_control) {
        return Err(
            "must be one line: comma-separated hosts, domains, addresses, CIDR blocks or *"
                .to_owned(),
        );
    }
    Ok(())
}

/// `ACDM_OIDC_AUDIENCE`: one value, as tokens carry it.
fn check_audience(text: &str) -> Result<(), String> {
    if text.trim().is_empty() || text.trim() != text || text.chars().any(char::is_control) {
        return Err("must be one value without surrounding spaces (the resource URI, usually <ACDM_PUBLIC_URL>/mcp)".to_owned());
    }
    Ok(())
}

/// `ACDM_OIDC_CLIENT_ID`: printable, no spaces, at most 255 characters.
fn check_client_id(text: &str) -> Result<(), String> {
    let ok = !text.is_empty() && text.len() <= 255 && text.chars().all(|c| c.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err("must be a client id: 1–255 printable ASCII characters, no spaces".to_owned())
    }
}

/// `ACDM_OIDC_USER_CLAIM`: a claim's name.
fn check_claim_name(text: &str) -> Result<(), String> {
    let ok = !text.is_empty()
        && text.len() <= 64
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
    if ok {
        Ok(())
    } else {
        Err("must be a claim name such as sub, preferred_username or email".to_owned())
    }
}

impl Config {
    /// Reads the optional TOML `file` and the given environment: the binary
    /// passes the process's (the one place the service reads it), tests
    /// their own.
    pub fn load_from(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<Self, ConfigError> {
        let mut problems = Vec::new();
        let mut env_values = BTreeMap::new();
        let mut lower_case = Vec::new();
        for (key, value) in env {
            let Some(key) = key.to_str() else { continue };
            if let Some(&(_, upper)) = LOWER_CASE_NAMES.iter().find(|(lower, _)| *lower == key) {
                lower_case.push((upper, value));
                continue;
            }
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
        // The proxy variables' lower-case spelling wins, as curl reads them.
        for (key, value) in lower_case {
            match value.into_string() {
                Ok(value) => {
                    env_values.insert(key.to_owned(), value);
                }
                Err(_) => problems.push(format!(
                    "{} (from environment): is not valid UTF-8",
                    key.to_ascii_lowercase()
                )),
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
        let mut r = Reader::new(SETTINGS, figment, values, problems);
        let config = Self::read_declared(&mut r);
        Self::check_together(&mut r);
        let problems = r.finish();
        match config {
            Some(config) if problems.is_empty() => Ok(config),
            _ => Err(ConfigError { problems }),
        }
    }

    /// The rules between settings, on their raw values so they are reported
    /// alongside problems with the values themselves.
    fn check_together(r: &mut Reader) {
        let service = r.valid_text("ACDM_MCP_SERVICE_TOKEN", &Token);
        let admin = r.valid_text("ACDM_ADMIN_TOKEN", &Token);
        if service.is_some() && service == admin {
            r.problem(
                "ACDM_ADMIN_TOKEN",
                "must differ from ACDM_MCP_SERVICE_TOKEN",
            );
        }

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

        let webhook_url_set = r.is_set("ACDM_APPROVAL_WEBHOOK_URL");
        let webhook_secret_set = r.is_set("ACDM_APPROVAL_WEBHOOK_SECRET");
        if webhook_url_set && !webhook_secret_set {
            r.require("ACDM_APPROVAL_WEBHOOK_SECRET", "ACDM_APPROVAL_WEBHOOK_URL");
        }
        if !webhook_url_set && webhook_secret_set {
            r.require("ACDM_APPROVAL_WEBHOOK_URL", "ACDM_APPROVAL_WEBHOOK_SECRET");
        }

        let issuer_set = r.is_set("ACDM_OIDC_ISSUER");
        for dependent in [
            "ACDM_OIDC_AUDIENCE",
            "ACDM_OIDC_JWKS_URL",
            "ACDM_OIDC_INTROSPECTION_URL",
        ] {
            if !issuer_set && r.is_set(dependent) {
                r.require("ACDM_OIDC_ISSUER", dependent);
            }
        }
        if r.is_set("ACDM_OIDC_INTROSPECTION_URL") {
            for credential in ["ACDM_OIDC_CLIENT_ID", "ACDM_OIDC_CLIENT_SECRET"] {
                if !r.is_set(credential) {
                    r.require(credential, "ACDM_OIDC_INTROSPECTION_URL");
                }
            }
        } else {
            for credential in ["ACDM_OIDC_CLIENT_ID", "ACDM_OIDC_CLIENT_SECRET"] {
                if r.is_set(credential) {
                    r.require("ACDM_OIDC_INTROSPECTION_URL", credential);
                }
            }
        }
        if issuer_set {
            // The resource people's clients are told of and tokens are
            // for: never a listen address, and at the host's root (RFC
            // 9728 puts the metadata of `https://h/p/mcp` at
            // `https://h/.well-known/oauth-protected-resource/p/mcp`,
            // which the gate does not open).
            let public = r
                .valid_text("ACDM_PUBLIC_URL", &InstanceUrl)
                .and_then(|text| Url::parse(&text).ok());
            match public {
                None if !r.is_set("ACDM_PUBLIC_URL") => {
                    r.require("ACDM_PUBLIC_URL", "ACDM_OIDC_ISSUER");
                }
                Some(url) if url.path() != "/" => r.problem(
                    "ACDM_PUBLIC_URL",
                    "must be the service's root (no path) when ACDM_OIDC_ISSUER is set",
                ),
                Some(url) if !acdm_sources::oidc::secure_or_loopback(&url) => r.problem(
                    "ACDM_PUBLIC_URL",
                    "must be https:// (plain http:// only on a loopback address) when ACDM_OIDC_ISSUER is set",
                ),
                _ => {}
            }
        }

        let nc_url_set = r.is_set("NEXTCLOUD_URL");
        let nc_user_set = r.is_set("NEXTCLOUD_USER");
        let nc_password_set = r.is_set("NEXTCLOUD_APP_PASSWORD");
        if nc_url_set && !nc_user_set {
            r.require("NEXTCLOUD_USER", "NEXTCLOUD_URL");
        }
        if !nc_url_set && (nc_user_set || nc_password_set) {
            r.require("NEXTCLOUD_URL", "NEXTCLOUD_USER or NEXTCLOUD_APP_PASSWORD");
        }
    }

    /// `DATABASE_URL` (unset: the SQLite file `acdm.sqlite3` in the data
    /// folder) and `DATABASE_MAX_CONNECTIONS`.
    pub fn database(&self) -> DatabaseConfig {
        let target = self
            .database_url
            .clone()
            .unwrap_or_else(|| DatabaseTarget::Sqlite {
                path: self.data_dir.join("acdm.sqlite3"),
            });
        let mut database = DatabaseConfig::new(target);
        database.max_connections = self.database_max_connections;
        database
    }

    /// The service's own address as people reach it, without a trailing
    /// slash: `ACDM_PUBLIC_URL`, or `http://<ACDM_LISTEN_ADDR>`.
    pub fn public_base(&self) -> String {
        self.public_url.as_ref().map_or_else(
            || format!("http://{}", self.listen_addr),
            |url| url.as_str().trim_end_matches('/').to_owned(),
        )
    }

    /// `ACDM_OIDC_*`, when people's access tokens open `/mcp`.
    pub fn oidc(&self) -> Option<acdm_sources::oidc::OidcSettings> {
        let issuer = self.oidc_issuer.clone()?;
        let audience = self
            .oidc_audience
            .clone()
            .unwrap_or_else(|| format!("{}/mcp", self.public_base()));
        let mut settings = acdm_sources::oidc::OidcSettings::new(issuer, audience);
        settings.jwks_url = self.oidc_jwks_url.clone();
        settings.user_claim = self.oidc_user_claim.clone();
        settings.introspection = match (
            &self.oidc_introspection_url,
            &self.oidc_client_id,
            &self.oidc_client_secret,
        ) {
            (Some(url), Some(client_id), Some(client_secret)) => {
                Some(acdm_sources::oidc::IntrospectionSettings {
                    url: url.clone(),
                    client_id: client_id.clone(),
                    client_secret: client_secret.clone(),
                    cache_for: std::time::Duration::from_secs(60),
                })
            }
            _ => None,
        };
        Some(settings)
    }

    /// `GITLAB_WIKI_*`, when the wiki is on GitLab.
    pub fn gitlab(&self) -> Option<GitlabSettings> {
        Some(GitlabSettings {
            base_url: self.gitlab_wiki_base_url.clone()?,
            project_id: self.gitlab_wiki_project_id.clone()?,
            pat: self.gitlab_wiki_pat.clone(),
        })
    }

    /// `NEXTCLOUD_*`, when the files are on Nextcloud.
    pub fn nextcloud(&self) -> Option<NextcloudSettings> {
        Some(NextcloudSettings {
            url: self.nextcloud_url.clone()?,
            user: self.nextcloud_user.clone()?,
            app_password: self.nextcloud_app_password.clone(),
        })
    }

    /// `ACDM_UPSTREAM_*`: timeouts and retries of GitLab and Nextcloud calls.
    pub fn upstream(&self) -> acdm_sources::http::HttpSettings {
        acdm_sources::http::HttpSettings {
            connect_timeout: self.upstream_connect_timeout,
            read_timeout: self.upstream_read_timeout,
            timeout: self.upstream_timeout,
            retries: self.upstream_retries,
            max_connections_per_host: self.upstream_max_connections,
            proxy: acdm_sources::http::ProxySettings {
                http: self
                    .http_proxy
                    .as_ref()
                    .map(|p| p.expose_secret().to_owned()),
                https: self
                    .https_proxy
                    .as_ref()
                    .map(|p| p.expose_secret().to_owned()),
                no_proxy: self.no_proxy.clone(),
            },
            extra_root_certificates: self
                .upstream_ca_file
                .as_ref()
                .map(|file| file.der.clone())
                .unwrap_or_default(),
            ..acdm_sources::http::HttpSettings::default()
        }
    }

    /// The rate of `per_minute` calls with bursts of `burst`; `None` (no
    /// limit) when `per_minute` is 0.
    fn rate(per_minute: u32, burst: u32) -> Option<acdm_core::limit::Rate> {
        acdm_core::limit::Rate::new(per_minute, burst)
    }

    /// `ACDM_BFF_RATE_*`: an agent's calls.
    pub fn bff_calls_rate(&self) -> Option<acdm_core::limit::Rate> {
        Self::rate(self.bff_rate_per_minute, self.bff_rate_burst)
    }

    /// `ACDM_BFF_WRITE_RATE_*`: an agent's writes.
    pub fn bff_writes_rate(&self) -> Option<acdm_core::limit::Rate> {
        Self::rate(self.bff_write_rate_per_minute, self.bff_write_rate_burst)
    }

    /// `ACDM_MCP_TOOL_RATE_*`: an MCP tool's calls.
    pub fn mcp_tool_rate(&self) -> Option<acdm_core::limit::Rate> {
        Self::rate(self.mcp_tool_rate_per_minute, self.mcp_tool_rate_burst)
    }

    /// `ACDM_LOG_FORMAT` and `ACDM_LOG`, with `rust_log` (`RUST_LOG`, the
    /// filter's conventional fallback, which `main` reads) behind it.
    pub fn log(&self, rust_log: Option<String>) -> LogSettings {
        LogSettings {
            format: self.log_format,
            filter: self.log_filter.clone(),
            fallback_filter: rust_log,
        }
    }

    /// The configuration with every secret replaced by whether it is set,
    /// for `check-config` and the start-up log: every setting by name, and
    /// which database and sources that makes.
    pub fn redacted(&self) -> serde_json::Value {
        let source = |configured: bool, name: &str| {
            if configured {
                json!({ "source": name })
            } else if self.local_sources {
                json!({ "source": "local folder" })
            } else {
                json!({ "source": "not configured" })
            }
        };
        let mut out: serde_json::Map<String, serde_json::Value> = self
            .shown()
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect();
        out.insert(
            "database".to_owned(),
            json!(self.database().target.describe()),
        );
        out.insert("wiki".to_owned(), source(self.gitlab().is_some(), "gitlab"));
        out.insert(
            "files".to_owned(),
            source(self.nextcloud().is_some(), "nextcloud"),
        );
        serde_json::Value::Object(out)
    }
}

/// `docs/config.md`, generated from [`SETTINGS`].
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "# Configuration reference\n\n\
         <!-- Generated from the settings! declarations in crates/acdm-config/src/lib.rs; \
         regenerate with `ACDM_UPDATE_DOCS=1 cargo test -p acdm-config`. -->\n\n\
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
            s.doc()
        ));
    }
    out
}

#[cfg(test)]
mod tests;
