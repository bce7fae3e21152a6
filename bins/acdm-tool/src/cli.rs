//! The command line: where the backend is, who is calling, how to print,
//! and one subcommand per nc operation (spec §6.1). The service token is
//! deliberately not an option — command lines show in `ps` — and is read
//! from `ACDM_MCP_SERVICE_TOKEN` only.

use std::path::PathBuf;

use acdm_harness_client::{ClientConfig, DEFAULT_BACKEND_URL, DEFAULT_TIMEOUT};
use clap::{Args, Parser, Subcommand};

/// The environment variable the service token is read from.
pub(crate) const TOKEN_ENV: &str = "ACDM_MCP_SERVICE_TOKEN";

/// The help heading of the options every subcommand accepts.
const GLOBAL: &str = "Global options";

/// Call the Agent Tools BFF as an agent, through acdm-harness-client.
#[derive(Debug, Parser)]
#[command(
    name = "acdm-tool",
    version,
    about,
    after_help = "The service token is read from ACDM_MCP_SERVICE_TOKEN only (never an option: \
                  command lines show in `ps`).\n\
                  Prints the ToolResponse as JSON (or readable with --human); exits 0 when \
                  `success` is true, 1 for a failure, 2 for a usage error."
)]
pub(crate) struct Cli {
    /// The backend's root URL.
    #[arg(
        long,
        global = true,
        help_heading = GLOBAL,
        env = "ACDM_BACKEND_URL",
        hide_env_values = true,
        default_value = DEFAULT_BACKEND_URL,
        value_name = "URL",
        value_parser = backend_url,
    )]
    pub(crate) url: String,

    /// The budget of one call, connect included, in seconds (1-3600).
    #[arg(
        long,
        global = true,
        help_heading = GLOBAL,
        env = "NC_OP_TIMEOUT_SECONDS",
        hide_env_values = true,
        default_value_t = DEFAULT_TIMEOUT.as_secs(),
        value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..=3600),
    )]
    pub(crate) timeout: u64,

    /// The user on whose behalf the agent acts (X-ACDM-User-Id).
    #[arg(long, global = true, help_heading = GLOBAL, env = "ACDM_USER_ID", hide_env_values = true, value_name = "ID")]
    pub(crate) user: Option<String>,

    /// The agent's name; the project is resolved from it (X-ACDM-Agent-Name).
    #[arg(long, global = true, help_heading = GLOBAL, env = "ACDM_AGENT_NAME", hide_env_values = true, value_name = "NAME")]
    pub(crate) agent: Option<String>,

    /// The conversation thread, for attribution (X-ACDM-Thread-Id).
    #[arg(long, global = true, help_heading = GLOBAL, env = "ACDM_THREAD_ID", hide_env_values = true, value_name = "ID")]
    pub(crate) thread: Option<String>,

    /// Print a readable rendering instead of the JSON envelope.
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub(crate) human: bool,

    /// What to call.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The endpoint families.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// The file primitives: POST /agent-tools/nc/{op}.
    #[command(subcommand)]
    Nc(NcCommand),
}

/// The seven nc operations.
#[derive(Debug, Subcommand)]
pub(crate) enum NcCommand {
    /// The project's mounts: name, writable.
    ListMounts,
    /// One folder level: name, size, modified, etag.
    List {
        /// The folder, relative to the mount root (default: the root).
        #[arg(value_name = "REL_PATH")]
        rel_path: Option<String>,
        #[command(flatten)]
        mount: MountArg,
    },
    /// A window of a file: text, or base64 for binary content.
    Read {
        /// The file, relative to the mount root.
        #[arg(value_name = "REL_PATH")]
        rel_path: String,
        /// First byte to return.
        #[arg(long, default_value_t = 0, value_name = "N")]
        offset: u64,
        /// Most bytes to return (the server's default and cap apply).
        #[arg(long, value_name = "N")]
        max_bytes: Option<u64>,
        #[command(flatten)]
        mount: MountArg,
    },
    /// Files inside the project's mounts.
    Search {
        /// What to look for.
        #[arg(value_name = "QUERY")]
        query: String,
        /// Most hits (the server allows 1-100, default 20).
        #[arg(long, value_name = "N")]
        limit: Option<u32>,
        /// Only this mount (default: every mount).
        #[arg(long, value_name = "MOUNT")]
        mount: Option<String>,
    },
    /// Create or overwrite a whole file (recorded, revertible).
    Write(WriteArgs),
    /// Delete a file or folder (kept in the trash); a dry run unless --yes.
    Delete {
        /// The file or folder, relative to the mount root.
        #[arg(value_name = "REL_PATH")]
        rel_path: String,
        /// Really delete; without it the server only reports what would go.
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        mount: MountArg,
    },
    /// Rename or move a file or folder inside a mount.
    Move {
        /// The item, relative to the mount root.
        #[arg(value_name = "FROM")]
        from: String,
        /// Where it goes.
        #[arg(value_name = "TO")]
        to: String,
        /// Replace an existing destination (kept in the trash).
        #[arg(long)]
        overwrite: bool,
        #[command(flatten)]
        mount: MountArg,
    },
}

/// `--mount`, shared by the operations on one mount.
#[derive(Debug, Args)]
pub(crate) struct MountArg {
    /// The mount (default: `project`).
    #[arg(long, value_name = "MOUNT")]
    pub(crate) mount: Option<String>,
}

/// `nc write`: the content comes from --content, --from-file or stdin.
#[derive(Debug, Args)]
pub(crate) struct WriteArgs {
    /// The file, relative to the mount root.
    #[arg(value_name = "REL_PATH")]
    pub(crate) rel_path: String,
    /// The content, as text (default: --from-file, else stdin).
    #[arg(long, value_name = "TEXT", conflicts_with = "from_file")]
    pub(crate) content: Option<String>,
    /// Read the content from this file.
    #[arg(long, value_name = "PATH")]
    pub(crate) from_file: Option<PathBuf>,
    /// Send the bytes of --from-file (or stdin) base64-encoded, for binary
    /// files; without it they must be UTF-8 text.
    #[arg(long, conflicts_with = "content")]
    pub(crate) base64: bool,
    /// Only overwrite when the file still has this etag (else `conflict`).
    #[arg(long, value_name = "ETAG")]
    pub(crate) if_match: Option<String>,
    #[command(flatten)]
    pub(crate) mount: MountArg,
}

/// `--url` must be an http(s) URL with a host (what the client accepts).
fn backend_url(value: &str) -> Result<String, String> {
    ClientConfig::new(value, None, DEFAULT_TIMEOUT)
        .map(|_| value.to_owned())
        .map_err(|_| "not an http(s) URL with a host".to_owned())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn there_is_no_option_for_the_token() {
        let help = Cli::command().render_long_help().to_string();
        assert!(!help.contains("--token"), "{help}");
        assert!(help.contains(TOKEN_ENV), "{help}");
    }
}
