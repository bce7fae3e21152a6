//! `acdm-backend demo`: a working service within a minute of cloning.
//!
//! Provisions a sample project (`alpha`, "Alpha"), its manager agent
//! (`project-alpha`) and members, fills the local wiki and the project
//! folder with a handful of realistic pages and files (never overwriting
//! what is already there), prints the tokens and ready-to-paste calls, and
//! serves. It uses the embedded local folders only: with GitLab or
//! Nextcloud configured it refuses, rather than write samples into them.

use acdm_core::domain::MemberRole;
use acdm_core::{AbsPath, AgentName, ProjectName, ProjectSlug, UserId};
use acdm_sources::local::LocalFileStore;
use acdm_sources::{FileWriter, Precondition, SourceError};
use acdm_store::{Store, StoreError};
use anyhow::Context;
use bytes::Bytes;
use secrecy::{ExposeSecret, SecretString};

use crate::app;
use crate::config::Config;

const SLUG: &str = "alpha";
const NAME: &str = "Alpha";
const AGENT: &str = "project-alpha";
const MEMBERS: &[(&str, MemberRole)] = &[
    ("u-alice", MemberRole::Owner),
    ("u-bob", MemberRole::Admin),
    ("u-carol", MemberRole::Member),
    ("u-dave", MemberRole::Viewer),
];

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

/// A random 64-character hex token.
fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Writes `content` at `base` + `rel` unless something is there already.
async fn seed(
    store: &LocalFileStore,
    base: &AbsPath,
    rel: &str,
    content: &'static str,
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
            Bytes::from_static(content.as_bytes()),
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
    if config.gitlab.is_some() || config.nextcloud.is_some() {
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
        added += usize::from(seed(&wiki, &AbsPath::root(), rel, content).await?);
    }
    for (path, content) in FILES {
        let rel = path.trim_start_matches("files/");
        added += usize::from(seed(&files, &project_folder, rel, content).await?);
    }
    tracing::info!(added, "demo data ready");
    Ok(project_folder)
}

/// Prepares the sample data and serves until stopped.
pub async fn run(config: &Config) -> anyhow::Result<()> {
    let mut config = config.clone();
    let service_token = config
        .service_token
        .get_or_insert_with(|| SecretString::from(random_token()))
        .expose_secret()
        .to_owned();
    let admin_token = config
        .admin_token
        .get_or_insert_with(|| SecretString::from(random_token()))
        .expose_secret()
        .to_owned();
    let project_folder = prepare(&config).await?;

    let data_dir = config.data_dir.display().to_string();
    app::serve(&config, move |address| {
        print_banner(
            &address.to_string(),
            &data_dir,
            &project_folder,
            &service_token,
            &admin_token,
        );
    })
    .await
}

/// Prints the banner on standard output. A closed or broken standard
/// output (`demo | head`) must not stop the server, so write errors are
/// ignored rather than panicking as `println!` would.
fn print_banner(
    address: &str,
    data_dir: &str,
    folder: &AbsPath,
    service_token: &str,
    admin_token: &str,
) {
    use std::io::Write;
    let base = format!("http://{address}");
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "\nacdm-backend demo is running on {base}\n\n\
         project  {SLUG} \"{NAME}\", folder {folder} ({data_dir}/files{folder}), wiki {data_dir}/wiki\n\
         agent    {AGENT} (manager of {SLUG})\n\
         members  u-alice owner, u-bob admin, u-carol member, u-dave viewer\n\n\
         Tokens for this run (set ACDM_MCP_SERVICE_TOKEN and ACDM_ADMIN_TOKEN to choose your own):\n\n\
         export ACDM_MCP_SERVICE_TOKEN={service_token}\n\
         export ACDM_ADMIN_TOKEN={admin_token}\n\n\
         Try, in another terminal after the two exports:\n\n\
         curl -s {base}/readyz\n\
         curl -s {base}/mcp/health\n\
         curl -s -H \"Authorization: Bearer $ACDM_ADMIN_TOKEN\" {base}/admin/projects/{SLUG}\n\
         curl -s -H \"Authorization: Bearer $ACDM_ADMIN_TOKEN\" {base}/admin/agents\n\
         curl -s -X POST {base}/mcp                     # refused: no service token\n\n\
         The Knowledge MCP server (any MCP client, endpoint {base}/mcp, header X-ACDM-Service-Auth):\n\n\
         curl -s {base}/mcp -H \"X-ACDM-Service-Auth: $ACDM_MCP_SERVICE_TOKEN\" \\\n  \
         -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \\\n  \
         -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"acdm_search_nextcloud\",\"arguments\":{{\"project_name\":\"{NAME}\",\"query\":\"kickoff\"}}}}}}'\n\n\
         The Agent Tools BFF (the engine's harness client; the project comes from the agent's name):\n\n\
         curl -s {base}/agent-tools/nc/list -H \"X-ACDM-Service-Auth: $ACDM_MCP_SERVICE_TOKEN\" \\\n  \
         -H 'X-ACDM-User-Id: u-alice' -H 'X-ACDM-Agent-Name: project-alpha' -H 'X-ACDM-Thread-Id: demo-1' \\\n  \
         -H 'Content-Type: application/json' -d '{{\"rel_path\":\"meetings\"}}'\n\
         curl -s -H \"Authorization: Bearer $ACDM_ADMIN_TOKEN\" {base}/admin/events    # every write, revertible\n\n\
         Stop with Ctrl-C.\n"
    );
    let _ = out.flush();
}
