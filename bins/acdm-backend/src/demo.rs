//! `acdm-backend demo`: a working service within a minute of cloning.
//!
//! Provisions a sample project (`alpha`, "Alpha"), its manager agent
//! (`project-alpha`) and members, fills the local wiki and the project
//! folder with a handful of realistic pages and files (never overwriting
//! what is already there), fills its business data through the `import`
//! code (meta, members' names, milestones with one current, reports in
//! every status, a statement of work, six meetings over the coming weeks, two with an
//! attachment), prints the tokens and ready-to-paste calls, and serves. It uses the embedded local folders only: with GitLab or
//! Nextcloud configured it refuses, rather than write samples into them.
//!
//! The tokens it makes are kept in `<data dir>/demo-tokens.env` (mode
//! 0600) and reused by every later run, so the exports in another terminal
//! and a connected MCP client keep working across restarts. Deleting the
//! file rotates them; tokens set in the environment win over the file.

use acdm_core::{AbsPath, AgentName, ProjectName, ProjectSlug, UserId};
use acdm_sources::local::LocalFileStore;
use acdm_sources::{FileWriter, Precondition, SourceError};
use acdm_store::{Store, StoreError};
use anyhow::Context;
use bytes::Bytes;
use secrecy::{ExposeSecret, SecretString};

use crate::app;
use crate::config::Config;

use acdm_operator::demo::{AGENT, DEMO_OPERATOR, MEMBERS, NAME, SLUG};

macro_rules! embedded {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!("../demo/", $path)))),*]
    };
}

/// Wiki pages: (path under `wiki/`, content).
const WIKI: &[(&str, &str)] = embedded!(
    "wiki/README.md",
    "wiki/glossary.md",
    "wiki/guides/project-kickoff.md",
    "wiki/guides/weekly-reports.md",
    "wiki/guides/milestones.md",
    "wiki/policies/security.md",
    "wiki/policies/document-retention.md",
);

/// Project files: (path under `files/`, content).
const FILES: &[(&str, &str)] = embedded!(
    "files/README.md",
    "files/meetings/2026-11-03-kickoff.md",
    "files/meetings/2026-11-17-design-review.md",
    "files/reports/2026-W46-weekly.md",
    "files/plans/schedule.md",
    "files/specs/requirements.md",
    "files/budget/budget-2026.csv",
);

/// Project documents: (path under `files/`, bytes). Real files, written by
/// python-docx, openpyxl and reportlab (`xtask/fixtures/make_documents.py`,
/// the script that makes the test suite's document fixtures), so the
/// README's first calls show documents searched and read as text.
const DOCUMENTS: &[(&str, &[u8])] = &[
    (
        "files/meetings/2026-11-03-kickoff-minutes.docx",
        include_bytes!("../demo/files/meetings/2026-11-03-kickoff-minutes.docx"),
    ),
    (
        "files/meetings/2026-11-03-kickoff-minutes-zh.docx",
        include_bytes!("../demo/files/meetings/2026-11-03-kickoff-minutes-zh.docx"),
    ),
    (
        "files/budget/budget-2026.xlsx",
        include_bytes!("../demo/files/budget/budget-2026.xlsx"),
    ),
    (
        "files/reports/2026-Q3-report.pdf",
        include_bytes!("../demo/files/reports/2026-Q3-report.pdf"),
    ),
    (
        "files/reports/2026-Q3-report-zh.pdf",
        include_bytes!("../demo/files/reports/2026-Q3-report-zh.pdf"),
    ),
];

/// The file in the data dir that keeps the demo's tokens.
pub const TOKENS_FILE: &str = "demo-tokens.env";

/// A random 64-character hex token.
fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The demo's own tokens, as kept in [`TOKENS_FILE`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct DemoTokens {
    service: String,
    admin: String,
}

impl DemoTokens {
    const SERVICE: &str = "ACDM_MCP_SERVICE_TOKEN";
    const ADMIN: &str = "ACDM_ADMIN_TOKEN";

    fn random() -> Self {
        Self {
            service: random_token(),
            admin: random_token(),
        }
    }

    /// The file's text: shell `export` lines, so `. <file>` sets both.
    fn render(&self) -> String {
        format!(
            "# acdm-backend demo tokens. Delete this file and restart the demo to rotate them.\n\
             export {}={}\n\
             export {}={}\n",
            Self::SERVICE,
            self.service,
            Self::ADMIN,
            self.admin
        )
    }

    /// Reads the file's text; `Err` says what is wrong (never a token).
    fn parse(text: &str) -> Result<Self, String> {
        let mut service = None;
        let mut admin = None;
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let assignment = line.strip_prefix("export ").unwrap_or(line);
            let Some((name, value)) = assignment.split_once('=') else {
                return Err("a line is neither a comment nor NAME=value".to_owned());
            };
            let slot = match name.trim() {
                Self::SERVICE => &mut service,
                Self::ADMIN => &mut admin,
                other => return Err(format!("unknown setting `{other}`")),
            };
            if let Some(problem) = crate::config::token_problem(value) {
                return Err(format!("{} {problem}", name.trim()));
            }
            *slot = Some(value.to_owned());
        }
        match (service, admin) {
            (Some(service), Some(admin)) if service != admin => Ok(Self { service, admin }),
            (Some(_), Some(_)) => Err("the two tokens are the same".to_owned()),
            _ => Err(format!(
                "{} and {} are both needed",
                Self::SERVICE,
                Self::ADMIN
            )),
        }
    }

    /// The tokens kept in `path`, or new ones written there (mode 0600)
    /// when the file does not exist. A file others could read holds tokens
    /// that may have leaked: they are replaced by new ones, with a warning.
    /// A link, anything but a regular file, or a malformed file is an error
    /// naming the file (delete it for new tokens).
    fn load_or_create(path: &std::path::Path) -> anyhow::Result<Self> {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let tokens = Self::random();
                write_private(path, &tokens.render())?;
                return Ok(tokens);
            }
            Err(error) => {
                return Err(error).with_context(|| {
                    format!("cannot read the demo's token file {}", path.display())
                });
            }
        };
        if !meta.file_type().is_file() {
            anyhow::bail!(
                "the demo's token file {} is a link or not a regular file; delete it to get new tokens",
                path.display()
            );
        }
        if readable_by_others(&meta) {
            tracing::warn!(
                file = %path.display(),
                "the demo's token file was readable by others; its tokens were replaced by new ones (0600)"
            );
            let tokens = Self::random();
            write_private(path, &tokens.render())?;
            return Ok(tokens);
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the demo's token file {}", path.display()))?;
        Self::parse(&text).map_err(|problem| {
            anyhow::anyhow!(
                "the demo's token file {} is not usable ({problem}); delete it to get new tokens",
                path.display()
            )
        })
    }
}

/// Writes `text` to `path` readable by the owner only, through a
/// temporary file and a rename, so a crash never leaves half a file.
fn write_private(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let folder = path.parent().unwrap_or_else(|| std::path::Path::new("."));
    std::fs::create_dir_all(folder)
        .with_context(|| format!("cannot create the data dir {}", folder.display()))?;
    let temporary = folder.join(format!(".{TOKENS_FILE}.{}", uuid::Uuid::new_v4().simple()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options
        .open(&temporary)
        .and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written.with_context(|| format!("cannot write the demo's token file {}", path.display()))
}

/// Whether a file's mode lets its group or others read or write it.
fn readable_by_others(meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o077 != 0
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        false
    }
}

/// Writes `content` at `base` + `rel` unless something is there already.
async fn seed(
    store: &LocalFileStore,
    base: &AbsPath,
    rel: &str,
    content: &'static [u8],
) -> anyhow::Result<bool> {
    let path = acdm_core::RelPath::parse(rel)
        .map(|r| base.join(&r))
        .with_context(|| format!("sample path {rel}"))?;
    if let Some(parent) = acdm_core::RelPath::parse(rel).ok().and_then(|r| r.parent()) {
        store.make_folders(&base.join(&parent)).await?;
    }
    match store
        .write(
            &path,
            Bytes::from_static(content),
            &Precondition::CreateOnly,
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(SourceError::PreconditionFailed(_)) => Ok(false),
        Err(error) => Err(error).with_context(|| format!("writing the sample {path}")),
    }
}

async fn provision(store: &Store, config: &Config) -> anyhow::Result<()> {
    let slug = ProjectSlug::parse(SLUG)?;
    match store.project(&slug).await {
        Ok(_) => {}
        Err(StoreError::NotFound { .. }) => {
            store
                .create_project(&slug, &ProjectName::parse(NAME)?, &config.files_base)
                .await?;
        }
        Err(error) => return Err(error.into()),
    }
    for (user, role) in MEMBERS {
        store
            .set_member(&slug, &UserId::parse(user)?, *role)
            .await?;
    }
    store.mount_agent(&AgentName::parse(AGENT)?, &slug).await?;
    Ok(())
}

/// Provisions the sample project, agent and members in the database and
/// writes the sample pages and files (leaving existing ones alone); returns
/// the project folder. The service itself is not started.
/// Refuses when GitLab or Nextcloud is configured.
pub async fn prepare(config: &Config) -> anyhow::Result<AbsPath> {
    if config.gitlab().is_some() || config.nextcloud().is_some() {
        anyhow::bail!(
            "the demo writes sample pages and files into the local folders; unset GITLAB_WIKI_BASE_URL and NEXTCLOUD_URL to run it"
        );
    }
    let store = app::open_store(config).await?;
    provision(&store, config).await?;
    store.close().await;

    let wiki = LocalFileStore::open(config.data_dir.join("wiki"))?;
    let files = LocalFileStore::open(config.data_dir.join("files"))?;
    let project_folder = config.files_base.child(&ProjectName::parse(NAME)?);
    let mut added = 0;
    for (path, content) in WIKI {
        let rel = path.trim_start_matches("wiki/");
        added += usize::from(seed(&wiki, &AbsPath::root(), rel, content.as_bytes()).await?);
    }
    for (path, content) in FILES {
        let rel = path.trim_start_matches("files/");
        added += usize::from(seed(&files, &project_folder, rel, content.as_bytes()).await?);
    }
    for (path, content) in DOCUMENTS {
        let rel = path.trim_start_matches("files/");
        added += usize::from(seed(&files, &project_folder, rel, content).await?);
    }
    let store = app::open_store(config).await?;
    let filled = fill_business(config, &store).await;
    store.close().await;
    let filled = filled?;
    tracing::info!(
        added,
        business_changes = filled.changed.len(),
        "demo data ready"
    );
    Ok(project_folder)
}

/// Writes the demo's business data through the `import` code, as
/// [`DEMO_OPERATOR`]: a second run in the same week changes nothing.
async fn fill_business(
    config: &Config,
    store: &Store,
) -> anyhow::Result<acdm_operator::import::Imported> {
    let sources = app::build_sources(config)?;
    let journal =
        acdm_journal::Journal::new(store.clone(), sources.files, config.files_base.clone());
    let project = store
        .project(&ProjectSlug::parse(SLUG)?)
        .await?
        .project
        .to_ref();
    let doc = acdm_operator::demo::business_document(chrono::Utc::now())
        .context("the demo's business document")?;
    acdm_operator::import::apply(&journal, project, UserId::parse(DEMO_OPERATOR)?, &doc)
        .await
        .context("filling the demo's business data")
}

/// Prepares the sample data and serves until stopped.
pub async fn run(config: &Config) -> anyhow::Result<()> {
    let mut config = config.clone();
    let tokens_file = config.data_dir.join(TOKENS_FILE);
    // Only a token the environment does not set comes from the file.
    if config.service_token.is_none() || config.admin_token.is_none() {
        let kept = DemoTokens::load_or_create(&tokens_file)?;
        config
            .service_token
            .get_or_insert_with(|| SecretString::from(kept.service));
        config
            .admin_token
            .get_or_insert_with(|| SecretString::from(kept.admin));
    }
    let service_token = config
        .service_token
        .as_ref()
        .map(|t| t.expose_secret().to_owned())
        .unwrap_or_default();
    let admin_token = config
        .admin_token
        .as_ref()
        .map(|t| t.expose_secret().to_owned())
        .unwrap_or_default();
    let project_folder = prepare(&config).await?;

    let data_dir = config.data_dir.display().to_string();
    let tokens_file = tokens_file.display().to_string();
    app::serve(&config, move |address| {
        print_banner(
            &address.to_string(),
            &data_dir,
            &project_folder,
            &Tokens {
                service: &service_token,
                admin: &admin_token,
                file: &tokens_file,
            },
        );
    })
    .await
}

/// The tokens the banner shows, and the file that keeps them.
struct Tokens<'a> {
    service: &'a str,
    admin: &'a str,
    file: &'a str,
}

/// Prints the banner on standard output. A closed or broken standard
/// output (`demo | head`) must not stop the server, so write errors are
/// ignored rather than panicking as `println!` would.
fn print_banner(address: &str, data_dir: &str, folder: &AbsPath, tokens: &Tokens<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(banner(address, data_dir, folder, tokens).as_bytes());
    let _ = out.flush();
}

/// The banner's text.
fn banner(address: &str, data_dir: &str, folder: &AbsPath, tokens: &Tokens<'_>) -> String {
    let base = format!("http://{address}");
    let Tokens {
        service: service_token,
        admin: admin_token,
        file: tokens_file,
    } = tokens;
    format!(
        "\nacdm-backend demo is running on {base}\n\n\
         project  {SLUG} \"{NAME}\", folder {folder} ({data_dir}/files{folder}), wiki {data_dir}/wiki\n\
         agent    {AGENT} (manager of {SLUG})\n\
         members  u-alice owner, u-bob admin, u-carol member, u-dave viewer\n\n\
         Tokens (the same on every run: kept in {tokens_file}, readable by you only;\n\
         delete that file and restart to rotate them; ACDM_MCP_SERVICE_TOKEN and\n\
         ACDM_ADMIN_TOKEN in the environment win over it):\n\n\
         export ACDM_MCP_SERVICE_TOKEN={service_token}\n\
         export ACDM_ADMIN_TOKEN={admin_token}\n\n\
         Try, in another terminal after the two exports (or `. {tokens_file}`):\n\n\
         curl -s {base}/readyz\n\
         curl -s {base}/mcp/health\n\
         curl -s -H \"Authorization: Bearer $ACDM_ADMIN_TOKEN\" {base}/admin/projects/{SLUG}\n\
         curl -s -H \"Authorization: Bearer $ACDM_ADMIN_TOKEN\" {base}/admin/agents\n\
         curl -s -X POST {base}/mcp                     # refused: no service token\n\n\
         The Knowledge MCP server (any MCP client, endpoint {base}/mcp, header X-ACDM-Service-Auth):\n\n\
         curl -s {base}/mcp -H \"X-ACDM-Service-Auth: $ACDM_MCP_SERVICE_TOKEN\" \\\n  \
         -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \\\n  \
         -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"acdm_search_nextcloud\",\"arguments\":{{\"project_name\":\"{NAME}\",\"query\":\"budget approved\"}}}}}}'\n\n\
         That searches the files' contents, Word, Excel and PDF documents included, best first\n\
         (the content index is built in the first seconds after the start).\n\n\
         The Agent Tools BFF (the engine's harness client; the project comes from the agent's name):\n\n\
         curl -s {base}/agent-tools/nc/list -H \"X-ACDM-Service-Auth: $ACDM_MCP_SERVICE_TOKEN\" \\\n  \
         -H 'X-ACDM-User-Id: u-alice' -H 'X-ACDM-Agent-Name: project-alpha' -H 'X-ACDM-Thread-Id: demo-1' \\\n  \
         -H 'Content-Type: application/json' -d '{{\"rel_path\":\"meetings\"}}'\n\
         curl -s {base}/agent-tools/nc/read -H \"X-ACDM-Service-Auth: $ACDM_MCP_SERVICE_TOKEN\" \\\n  \
         -H 'X-ACDM-User-Id: u-alice' -H 'X-ACDM-Agent-Name: project-alpha' -H 'X-ACDM-Thread-Id: demo-1' \\\n  \
         -H 'Content-Type: application/json' -d '{{\"rel_path\":\"budget/budget-2026.xlsx\"}}'    # a spreadsheet as Markdown tables\n\
         curl -s {base}/agent-tools/business/list_meetings -H \"X-ACDM-Service-Auth: $ACDM_MCP_SERVICE_TOKEN\" \\\n  \
         -H 'X-ACDM-User-Id: u-alice' -H 'X-ACDM-Agent-Name: project-alpha' -H 'X-ACDM-Thread-Id: demo-1' \\\n  \
         -H 'Content-Type: application/json' -d '{{}}'    # the meetings of the next 30 days\n\
         curl -s {base}/agent-tools/project/overview -H \"X-ACDM-Service-Auth: $ACDM_MCP_SERVICE_TOKEN\" \\\n  \
         -H 'X-ACDM-User-Id: u-alice' -H 'X-ACDM-Agent-Name: project-alpha' -H 'X-ACDM-Thread-Id: demo-1'    # what the agent's prompt starts from\n\
         curl -s -H \"Authorization: Bearer $ACDM_ADMIN_TOKEN\" {base}/admin/events    # every write, revertible\n\n\
         Stop with Ctrl-C.\n\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_shows_a_business_call_as_a_member() {
        let text = banner(
            "127.0.0.1:8002",
            "/data",
            &AbsPath::parse("/Projects/Alpha").unwrap(),
            &Tokens {
                service: "s",
                admin: "a",
                file: "/data/demo-tokens.env",
            },
        );
        assert!(
            text.contains("http://127.0.0.1:8002/agent-tools/business/list_meetings"),
            "{text}"
        );
        assert!(
            text.contains("curl -s http://127.0.0.1:8002/agent-tools/project/overview -H"),
            "{text}"
        );
        assert!(text.contains(&format!("X-ACDM-User-Id: {DEMO_OPERATOR}")));
        assert!(MEMBERS.iter().any(|(user, _)| *user == DEMO_OPERATOR));
    }

    #[test]
    fn the_tokens_are_made_once_kept_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data").join(TOKENS_FILE);
        let first = DemoTokens::load_or_create(&file).unwrap();
        assert_eq!(first.service.len(), 64);
        assert_ne!(first.service, first.admin);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        }
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains(&format!("export ACDM_ADMIN_TOKEN={}", first.admin)));
        assert_eq!(DemoTokens::load_or_create(&file).unwrap(), first);

        // Deleting the file rotates them.
        std::fs::remove_file(&file).unwrap();
        let rotated = DemoTokens::load_or_create(&file).unwrap();
        assert_ne!(rotated.service, first.service);
        assert_ne!(rotated.admin, first.admin);
    }

    #[cfg(unix)]
    #[test]
    fn tokens_others_could_read_are_replaced_by_new_private_ones() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(TOKENS_FILE);
        let exposed = DemoTokens::load_or_create(&file).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let fresh = DemoTokens::load_or_create(&file).unwrap();
        assert_ne!(fresh.service, exposed.service);
        assert_ne!(fresh.admin, exposed.admin);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        assert_eq!(DemoTokens::load_or_create(&file).unwrap(), fresh);
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_that_is_a_link_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "not tokens").unwrap();
        let file = dir.path().join(TOKENS_FILE);
        std::os::unix::fs::symlink(&target, &file).unwrap();
        let error = DemoTokens::load_or_create(&file).unwrap_err().to_string();
        assert!(error.contains("link or not a regular file"), "{error}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "not tokens");
    }

    #[test]
    fn a_malformed_token_file_is_named_without_echoing_a_token() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(TOKENS_FILE);
        for (text, problem) in [
            (
                "export ACDM_MCP_SERVICE_TOKEN=short\n".to_owned(),
                "ACDM_MCP_SERVICE_TOKEN must be at least 32 characters",
            ),
            // Longer than a token can be: it would never match.
            (
                format!("ACDM_MCP_SERVICE_TOKEN={}\n", "0123456789abcdef".repeat(33)),
                "ACDM_MCP_SERVICE_TOKEN must be at most 512 characters",
            ),
            (
                "ACDM_MCP_SERVICE_TOKEN=0123456789abcdef0123456789abcdef\n".to_owned(),
                "are both needed",
            ),
            ("nonsense\n".to_owned(), "neither a comment"),
        ] {
            std::fs::write(&file, text).unwrap();
            // Private, as the demo writes it (a file others could read is
            // replaced, not parsed).
            #[cfg(unix)]
            std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .unwrap();
            let error = format!("{:#}", DemoTokens::load_or_create(&file).unwrap_err());
            assert!(error.contains(problem), "{error}");
            assert!(error.contains("delete it to get new tokens"), "{error}");
            assert!(!error.contains("0123456789abcdef"), "{error}");
        }
    }
}
