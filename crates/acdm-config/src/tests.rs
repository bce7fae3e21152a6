//! The settings' unit tests: reading, validation, redaction, and
//! `docs/config.md` against the declarations (`ACDM_UPDATE_DOCS=1`
//! rewrites it).

use super::*;
use secrecy::ExposeSecret;

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
        c.database().target.describe(),
        "sqlite file ./data/acdm.sqlite3"
    );
    assert_eq!(c.files_base.to_string(), "/Projects");
    assert!(c.gitlab().is_none() && c.nextcloud().is_none());
    assert_eq!(
        c.mcp_allowed_hosts,
        ["localhost", "127.0.0.1", "::1", "acdm-backend"]
    );
    assert_eq!(c.scope_cache_ttl, Duration::from_secs(300));
    assert_eq!(c.log(None).format, LogFormat::Auto);
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
    // The longest token a `SharedToken` holds is accepted, one more is not.
    let longest = "a".repeat(acdm_core::SharedToken::MAX_LEN);
    let c = load(&[("ACDM_MCP_SERVICE_TOKEN", &longest)]).unwrap();
    let kept = acdm_core::SharedToken::of(c.service_token.unwrap().expose_secret()).unwrap();
    assert!(kept.matches(longest.as_bytes()));
    check_invalid(
        &[("ACDM_MCP_SERVICE_TOKEN", &"a".repeat(513))],
        "ACDM_MCP_SERVICE_TOKEN (from environment): must be at most 512 characters",
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
    assert_eq!(c.gitlab().unwrap().project_id, "docs/llm-wiki");
    assert!(
        c.gitlab().unwrap().pat.is_none(),
        "a missing PAT is for health to report"
    );
    assert_eq!(c.nextcloud().unwrap().user, "acdm-service");
    assert_eq!(c.files_base.to_string(), "/Projects");
    assert_eq!(
        c.mcp_allowed_hosts,
        ["acdm-backend", "backend.internal:8002"]
    );
    assert_eq!(c.database().target.describe(), "postgresql (DATABASE_URL)");
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
    let c = Config::load_from(Some(&file), env(&[("ACDM_LISTEN_ADDR", "127.0.0.1:9001")])).unwrap();
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

/// A configuration with every secret setting set (and what they need).
fn every_secret_set() -> Config {
    load(&[
        ("ACDM_MCP_SERVICE_TOKEN", TOKEN),
        ("ACDM_ADMIN_TOKEN", ADMIN),
        ("DATABASE_URL", "postgres://u:hunter2@db/acdm"),
        ("GITLAB_WIKI_BASE_URL", "https://gitlab.example.com"),
        ("GITLAB_WIKI_PROJECT_ID", "42"),
        ("GITLAB_WIKI_PAT", "glpat-secret-value"),
        ("NEXTCLOUD_URL", "https://cloud.example.com"),
        ("NEXTCLOUD_USER", "svc"),
        ("NEXTCLOUD_APP_PASSWORD", "nc-app-password"),
        ("HTTPS_PROXY", "http://u:proxy-pass@proxy.example:3128"),
        ("HTTP_PROXY", "http://u:proxy-pass@proxy.example:3128"),
        (
            "ACDM_APPROVAL_WEBHOOK_URL",
            "https://hooks.example.com/acdm",
        ),
        (
            "ACDM_APPROVAL_WEBHOOK_SECRET",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        ),
        ("ACDM_OIDC_ISSUER", "https://idp.example.com/realms/acdm"),
        ("ACDM_PUBLIC_URL", "https://acdm.example.com"),
        (
            "ACDM_OIDC_INTROSPECTION_URL",
            "https://idp.example.com/realms/acdm/introspect",
        ),
        ("ACDM_OIDC_CLIENT_ID", "acdm-backend"),
        ("ACDM_OIDC_CLIENT_SECRET", "oidc-client-secret"),
    ])
    .unwrap()
}

#[test]
fn secrets_never_appear_in_debug_or_redacted_output() {
    let c = every_secret_set();
    let outputs = [format!("{c:?}"), c.redacted().to_string()];
    for out in outputs {
        for secret in [
            TOKEN,
            ADMIN,
            "hunter2",
            "glpat-secret-value",
            "nc-app-password",
            "proxy-pass",
        ] {
            assert!(!out.contains(secret), "{secret} leaked: {out}");
        }
    }
    assert_eq!(c.redacted()["ACDM_MCP_SERVICE_TOKEN"], "set (redacted)");
}

#[test]
fn the_egress_proxy_reaches_the_upstream_settings_and_the_lower_case_names_win() {
    let c = load(&[
        ("HTTPS_PROXY", "http://upper.example:3128"),
        (
            "https_proxy",
            "http://proxy-user:proxy-pass@lower.example:3128",
        ),
        ("HTTP_PROXY", "http://plain.example:3128"),
        ("NO_PROXY", ".corp.example"),
        ("no_proxy", "gitlab.internal,10.0.0.0/8"),
    ])
    .unwrap();
    let proxy = c.upstream().proxy;
    assert_eq!(
        proxy.https.as_deref(),
        Some("http://proxy-user:proxy-pass@lower.example:3128")
    );
    assert_eq!(proxy.http.as_deref(), Some("http://plain.example:3128"));
    assert_eq!(
        proxy.no_proxy.as_deref(),
        Some("gitlab.internal,10.0.0.0/8")
    );
    // A proxy's credentials are a secret like any other.
    for out in [format!("{c:?}"), c.redacted().to_string()] {
        assert!(!out.contains("proxy-pass"), "leaked: {out}");
    }
    assert_eq!(c.redacted()["HTTPS_PROXY"], "set (redacted)");
    // Unset: every call goes direct.
    assert_eq!(
        load(&[]).unwrap().upstream().proxy,
        acdm_sources::http::ProxySettings::default()
    );
    check_invalid(&[("no_proxy", "a,\nb")], "NO_PROXY");
}

#[test]
fn a_certificate_authority_file_is_read_at_start_and_reaches_the_upstream_settings() {
    const CA_PEM: &str = include_str!("../../acdm-sources/tests/contract/tls/ca.pem");
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    // Other PEM blocks (a key left in a bundle) are skipped.
    let bundle = write(
        "bundle.pem",
        &format!("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n{CA_PEM}"),
    );
    let c = load(&[("ACDM_UPSTREAM_CA_FILE", &bundle)]).unwrap();
    let der = c.upstream().extra_root_certificates;
    assert_eq!(der.len(), 1);
    assert_eq!(
        der,
        acdm_sources::http::root_certificates_from_pem(CA_PEM.as_bytes()).unwrap()
    );
    assert_eq!(
        c.redacted()["ACDM_UPSTREAM_CA_FILE"],
        format!("{bundle} (1 certificate)")
    );
    assert!(
        load(&[])
            .unwrap()
            .upstream()
            .extra_root_certificates
            .is_empty()
    );

    // Each bad file stops the start, naming the setting and what is wrong.
    let missing = dir.path().join("missing.pem");
    let missing = missing.to_str().unwrap();
    let empty = write("empty.pem", "no certificate here\n");
    let not_a_certificate = write(
        "garbage.pem",
        "-----BEGIN CERTIFICATE-----\nAAAAAAAA\n-----END CERTIFICATE-----\n",
    );
    let oversized = write("huge.pem", &"x".repeat(4 * 1024 * 1024 + 1));
    let folder = dir.path().to_str().unwrap();
    for (path, problem) in [
        (missing, "cannot read"),
        (folder, "is not a regular file"),
        ("/dev/zero", "is not a regular file"),
        (
            oversized.as_str(),
            "is larger than a certificate file may be",
        ),
        (
            empty.as_str(),
            "holds no `-----BEGIN CERTIFICATE-----` block",
        ),
        (
            not_a_certificate.as_str(),
            "certificate 1 is not a usable X.509 root certificate",
        ),
    ] {
        let err = load(&[("ACDM_UPSTREAM_CA_FILE", path)]).unwrap_err();
        let message = err
            .problems
            .iter()
            .find(|p| p.starts_with("ACDM_UPSTREAM_CA_FILE"))
            .unwrap_or_else(|| panic!("{path}: {err}"));
        assert!(message.contains(problem), "{path}: {message}");
    }
}

/// Whether `ACDM_UPDATE_DOCS` asks for `docs/config.md` to be rewritten.
#[expect(
    clippy::disallowed_methods,
    reason = "a test switch: regenerate the docs"
)]
fn updating_docs() -> bool {
    // tidy:allow-env: a test switch; ACDM_UPDATE_DOCS regenerates docs/config.md.
    std::env::var_os("ACDM_UPDATE_DOCS").is_some()
}

#[test]
fn the_config_reference_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md");
    let expected = reference_markdown();
    if updating_docs() {
        std::fs::write(&path, &expected).unwrap();
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "docs/config.md is out of date; run `ACDM_UPDATE_DOCS=1 cargo test -p acdm-config`"
    );
}

#[test]
fn the_example_config_file_in_deploy_is_valid() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/acdm-backend.example.toml");
    let c = Config::load_from(Some(&file), env(&[])).unwrap();
    assert_eq!(c.listen_addr.to_string(), "0.0.0.0:8002");
    assert!(c.gitlab().is_some() && c.nextcloud().is_some());
}

#[test]
fn every_setting_is_read_and_documented_once() {
    let mut names: Vec<_> = SETTINGS.iter().map(|s| s.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), SETTINGS.len(), "duplicate setting");
    // Loading checks that every declared setting was read and every name
    // read is declared (`Reader::finish`, whose own tests show it fails
    // otherwise); an empty configuration must pass that check.
    let err = load(&[]).err();
    assert!(err.is_none(), "{err:?}");
    // Setting any documented name must not be reported as unknown, nor
    // break the declared/read check.
    for s in SETTINGS {
        if let Err(err) = load(&[(s.name, "x")]) {
            assert!(
                !err.problems
                    .iter()
                    .any(|p| p.contains("unknown setting") || p.contains("this is a bug")),
                "{}: {err}",
                s.name
            );
        }
    }
    let documented: Vec<_> = documented_defaults().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        documented,
        SETTINGS.iter().map(|s| s.name).collect::<Vec<_>>(),
        "docs/config.md lists exactly the declared settings, in order"
    );
}

/// The (setting, default) cells of the table in `docs/config.md`. While
/// `ACDM_UPDATE_DOCS` regenerates it, the text being written instead,
/// so tests running beside the_config_reference_is_current do not read
/// a half-written file.
fn documented_defaults() -> Vec<(String, String)> {
    let text = if updating_docs() {
        reference_markdown()
    } else {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md");
        std::fs::read_to_string(&path).unwrap()
    };
    text.lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .map(|row| {
            let mut cells = row.splitn(3, " | ");
            let name = cells.next().unwrap().trim_end_matches('`');
            let default = cells.next().unwrap().trim_matches('`');
            (name.to_owned(), default.to_owned())
        })
        .collect()
}

/// A shown value as the docs write it: lists comma-separated, unset
/// optional values as `(unset)` or `(empty)`.
fn as_documented(value: &serde_json::Value) -> Vec<String> {
    match value {
        serde_json::Value::String(s) if s == kinds::NOT_SET => {
            vec!["(unset)".to_owned(), "(empty)".to_owned()]
        }
        serde_json::Value::String(s) => vec![s.clone()],
        serde_json::Value::Array(items) => {
            let items: Vec<_> = items.iter().filter_map(|i| i.as_str()).collect();
            vec![items.join(",")]
        }
        other => vec![other.to_string()],
    }
}

#[test]
fn every_default_in_the_docs_is_what_an_empty_configuration_loads() {
    let c = Config::load_from(None, Vec::new()).unwrap();
    let shown: BTreeMap<_, _> = c.shown().into_iter().collect();
    let documented = documented_defaults();
    assert_eq!(documented.len(), SETTINGS.len());
    for (name, default) in documented {
        let value = shown.get(name.as_str()).unwrap_or_else(|| panic!("{name}"));
        assert!(
            as_documented(value).contains(&default),
            "{name}: docs/config.md says `{default}`, an empty configuration loads {value}"
        );
    }
}

#[test]
fn the_docs_state_every_range() {
    for (name, range) in Config::declared_ranges() {
        let Some(range) = range else { continue };
        let setting = SETTINGS.iter().find(|s| s.name == name).unwrap();
        let stated = format!("{}–{}", range.start(), range.end());
        assert!(
            setting.doc().contains(&stated),
            "{name}: the doc text should state the range {stated}"
        );
    }
}

#[test]
fn secrets_are_secret_in_the_docs_and_redacted_in_the_output() {
    let secrets: Vec<_> = SETTINGS
        .iter()
        .filter(|s| s.secret)
        .map(|s| s.name)
        .collect();
    assert_eq!(
        secrets,
        [
            "ACDM_MCP_SERVICE_TOKEN",
            "ACDM_ADMIN_TOKEN",
            "DATABASE_URL",
            "GITLAB_WIKI_PAT",
            "NEXTCLOUD_APP_PASSWORD",
            "HTTPS_PROXY",
            "HTTP_PROXY",
            "ACDM_APPROVAL_WEBHOOK_SECRET",
            "ACDM_OIDC_CLIENT_SECRET"
        ]
    );
    let c = every_secret_set();
    for (name, value) in c.shown() {
        if secrets.contains(&name) {
            assert_eq!(value, kinds::REDACTED, "{name}");
        } else {
            assert_ne!(value, kinds::REDACTED, "{name}");
        }
    }
}

#[test]
fn approval_settings_are_checked_at_start_naming_them() {
    let problems = |pairs: &[(&str, &str)]| match load(pairs) {
        Ok(_) => Vec::new(),
        Err(error) => error.problems,
    };
    let found = problems(&[("ACDM_APPROVAL_REQUIRED_OPS", "nc.delete, nc.read")]);
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("ACDM_APPROVAL_REQUIRED_OPS") && p.contains("nc.read")),
        "{found:?}"
    );
    for ttl in ["0", "2592001"] {
        let found = problems(&[("ACDM_APPROVAL_TTL_SECONDS", ttl)]);
        assert!(
            found
                .iter()
                .any(|p| p.starts_with("ACDM_APPROVAL_TTL_SECONDS")),
            "{ttl}: {found:?}"
        );
    }
    let found = problems(&[(
        "ACDM_APPROVAL_WEBHOOK_URL",
        "https://hooks.example.com/acdm",
    )]);
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("ACDM_APPROVAL_WEBHOOK_SECRET")),
        "a URL without its secret: {found:?}"
    );
    let found = problems(&[
        (
            "ACDM_APPROVAL_WEBHOOK_URL",
            "https://hooks.example.com/acdm",
        ),
        ("ACDM_APPROVAL_WEBHOOK_SECRET", "not-whsec"),
    ]);
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("ACDM_APPROVAL_WEBHOOK_SECRET") && p.contains("whsec_")),
        "{found:?}"
    );
    let config = load(&[
        (
            "ACDM_APPROVAL_REQUIRED_OPS",
            "nc.delete,project.milestone/advance",
        ),
        ("ACDM_APPROVAL_TTL_SECONDS", "1"),
        (
            "ACDM_APPROVAL_WEBHOOK_URL",
            "https://hooks.example.com/acdm?key=k",
        ),
        (
            "ACDM_APPROVAL_WEBHOOK_SECRET",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        ),
    ])
    .unwrap();
    assert_eq!(
        config.approval_required_ops.to_list(),
        "nc.delete,project.milestone/advance"
    );
    assert_eq!(config.approval_ttl, std::time::Duration::from_secs(1));
    let shown = config.shown();
    let url = shown
        .iter()
        .find(|(name, _)| *name == "ACDM_APPROVAL_WEBHOOK_URL")
        .unwrap();
    assert!(
        !url.1.to_string().contains("key=k"),
        "the receiver's key is not shown: {url:?}"
    );
}

#[test]
fn people_token_settings_are_checked_at_start_naming_them() {
    let problems = |pairs: &[(&str, &str)]| match load(pairs) {
        Ok(_) => Vec::new(),
        Err(error) => error.problems,
    };
    let names = |pairs: &[(&str, &str)], name: &str, says: &str| {
        let found = problems(pairs);
        assert!(
            found
                .iter()
                .any(|p| p.starts_with(name) && p.contains(says)),
            "{pairs:?}: {found:?}"
        );
    };
    let issuer = ("ACDM_OIDC_ISSUER", "https://idp.example.com/realms/acdm");
    names(
        &[issuer],
        "ACDM_PUBLIC_URL",
        "required when ACDM_OIDC_ISSUER",
    );
    names(
        &[issuer, ("ACDM_PUBLIC_URL", "https://h.example.com/acdm")],
        "ACDM_PUBLIC_URL",
        "no path",
    );
    names(
        &[issuer, ("ACDM_PUBLIC_URL", "http://h.example.com")],
        "ACDM_PUBLIC_URL",
        "https://",
    );
    names(
        &[
            ("ACDM_OIDC_ISSUER", "http://idp.example.com/realms/acdm"),
            ("ACDM_PUBLIC_URL", "https://h.example.com"),
        ],
        "ACDM_OIDC_ISSUER",
        "https://",
    );
    names(
        &[("ACDM_OIDC_AUDIENCE", "https://h.example.com/mcp")],
        "ACDM_OIDC_ISSUER",
        "required when ACDM_OIDC_AUDIENCE",
    );
    names(
        &[
            issuer,
            ("ACDM_PUBLIC_URL", "https://h.example.com"),
            ("ACDM_OIDC_USER_CLAIM", "a claim"),
        ],
        "ACDM_OIDC_USER_CLAIM",
        "claim name",
    );
    for (pairs, name, says) in [
        (
            vec![
                issuer,
                ("ACDM_PUBLIC_URL", "https://h.example.com"),
                (
                    "ACDM_OIDC_INTROSPECTION_URL",
                    "https://idp.example.com/introspect",
                ),
            ],
            "ACDM_OIDC_CLIENT_ID",
            "required when ACDM_OIDC_INTROSPECTION_URL",
        ),
        (
            vec![
                issuer,
                ("ACDM_PUBLIC_URL", "https://h.example.com"),
                (
                    "ACDM_OIDC_INTROSPECTION_URL",
                    "https://idp.example.com/introspect",
                ),
                ("ACDM_OIDC_CLIENT_ID", "acdm"),
            ],
            "ACDM_OIDC_CLIENT_SECRET",
            "required when ACDM_OIDC_INTROSPECTION_URL",
        ),
        (
            vec![
                issuer,
                ("ACDM_PUBLIC_URL", "https://h.example.com"),
                ("ACDM_OIDC_CLIENT_ID", "acdm"),
            ],
            "ACDM_OIDC_INTROSPECTION_URL",
            "required when ACDM_OIDC_CLIENT_ID",
        ),
        (
            vec![
                issuer,
                ("ACDM_PUBLIC_URL", "https://h.example.com"),
                (
                    "ACDM_OIDC_INTROSPECTION_URL",
                    "http://idp.example.com/introspect",
                ),
                ("ACDM_OIDC_CLIENT_ID", "acdm"),
                ("ACDM_OIDC_CLIENT_SECRET", "s"),
            ],
            "ACDM_OIDC_INTROSPECTION_URL",
            "https://",
        ),
        (
            vec![(
                "ACDM_OIDC_INTROSPECTION_URL",
                "https://idp.example.com/introspect",
            )],
            "ACDM_OIDC_ISSUER",
            "required when ACDM_OIDC_INTROSPECTION_URL",
        ),
    ] {
        names(&pairs, name, says);
    }
    let config = load(&[
        issuer,
        ("ACDM_PUBLIC_URL", "https://h.example.com"),
        (
            "ACDM_OIDC_INTROSPECTION_URL",
            "https://idp.example.com/introspect",
        ),
        ("ACDM_OIDC_CLIENT_ID", "acdm"),
        ("ACDM_OIDC_CLIENT_SECRET", "s3cret"),
    ])
    .unwrap();
    let introspection = config.oidc().unwrap().introspection.unwrap();
    assert_eq!(introspection.client_id, "acdm");
    assert_eq!(
        introspection.url.as_str(),
        "https://idp.example.com/introspect"
    );
    // A local identity provider on loopback may be plain HTTP; the issuer
    // is kept as written, and the audience defaults to the resource.
    let config = load(&[
        ("ACDM_OIDC_ISSUER", "http://127.0.0.1:8080/realms/dev/"),
        ("ACDM_PUBLIC_URL", "https://acdm.example.com/"),
    ])
    .unwrap();
    let oidc = config.oidc().unwrap();
    assert_eq!(oidc.issuer, "http://127.0.0.1:8080/realms/dev/");
    assert_eq!(oidc.audience, "https://acdm.example.com/mcp");
    assert_eq!(oidc.user_claim, "sub");
}
