//! The command line: where the backend is, who is calling, how to print,
//! one subcommand per nc operation (spec §6.1), business operation (spec
//! §6.2) and project operation (spec §6.3), and `catalog`, the tool
//! definitions an engine registers (spec §7). The service token is
//! deliberately not an option — command lines show in `ps` — and is read
//! from `ACDM_MCP_SERVICE_TOKEN` only.

use std::path::PathBuf;

use acdm_core::business::{FileId, MeetingId, ReportId, ReportStatus};
use acdm_harness_client::{ClientConfig, DEFAULT_BACKEND_URL, DEFAULT_TIMEOUT};
use chrono::{DateTime, FixedOffset};
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

    /// The approval of exactly this write, once a project owner or admin
    /// approved it (the approval_id an approval_required answer gave);
    /// send the same arguments as the call that asked.
    #[arg(long, global = true, help_heading = GLOBAL, value_name = "ID")]
    pub(crate) approval_id: Option<String>,

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
    /// Meetings, their files, the calendar, reports, members, project meta:
    /// POST /agent-tools/business/{op}. Times are RFC 3339 with an offset
    /// (`2026-12-01T09:00:00+01:00` or `…Z`).
    #[command(subcommand)]
    Business(BusinessCommand),
    /// The project overview, statement of work and milestone advance:
    /// /agent-tools/project/….
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Print the tool catalog an engine registers (JSON; a readable list
    /// with --human). Needs no backend, token or identity.
    Catalog,
}

/// The three project operations.
#[derive(Debug, Subcommand)]
pub(crate) enum ProjectCommand {
    /// Everything about the project in one call (GET project/overview).
    Overview,
    /// The statement of work (GET project/sow).
    Sow,
    /// Mark the current milestone done and the next one current (admins
    /// and owners).
    Advance {
        /// The seq of the milestone you believe is current.
        #[arg(long, value_name = "SEQ")]
        if_current: u32,
    },
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
        /// A document's exact bytes instead of its text (`"as": "raw"`).
        #[arg(long)]
        raw: bool,
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

/// The fourteen business operations.
#[derive(Debug, Subcommand)]
pub(crate) enum BusinessCommand {
    /// Meetings starting in a window, by start (default: from now, 30 days).
    ListMeetings {
        /// Meetings starting at or after this time (default: now).
        #[arg(long, value_name = "TIME")]
        from: Option<DateTime<FixedOffset>>,
        /// Meetings starting before this time (default: --from + 30 days).
        #[arg(long, value_name = "TIME")]
        to: Option<DateTime<FixedOffset>>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// One meeting with its files.
    GetMeeting {
        /// The meeting's id.
        #[arg(value_name = "MEETING_ID")]
        meeting_id: MeetingId,
    },
    /// Create a meeting (recorded, revertible).
    CreateMeeting {
        /// 1-200 characters, one line.
        #[arg(long, value_name = "TEXT")]
        title: String,
        /// When it starts.
        #[arg(long, value_name = "TIME")]
        starts_at: DateTime<FixedOffset>,
        /// When it ends (after the start, at most 24 hours later).
        #[arg(long, value_name = "TIME")]
        ends_at: DateTime<FixedOffset>,
        #[command(flatten)]
        fields: MeetingFields,
        /// An attendee's user id (a project member); repeat for several.
        #[arg(long = "attendee", value_name = "USER_ID")]
        attendees: Vec<String>,
    },
    /// Change a meeting: only the fields given change; an empty --location,
    /// --agenda or --notes clears it.
    UpdateMeeting {
        /// The meeting's id.
        #[arg(value_name = "MEETING_ID")]
        meeting_id: MeetingId,
        /// The version you read; a stale one is a `conflict` naming the
        /// current version.
        #[arg(long, value_name = "N")]
        if_version: i64,
        /// New title.
        #[arg(long, value_name = "TEXT")]
        title: Option<String>,
        /// New start.
        #[arg(long, value_name = "TIME")]
        starts_at: Option<DateTime<FixedOffset>>,
        /// New end.
        #[arg(long, value_name = "TIME")]
        ends_at: Option<DateTime<FixedOffset>>,
        #[command(flatten)]
        fields: MeetingFields,
        /// The whole new list of attendees, one --attendee per user id.
        #[arg(
            long = "attendee",
            value_name = "USER_ID",
            conflicts_with = "no_attendees"
        )]
        attendees: Vec<String>,
        /// Remove every attendee.
        #[arg(long)]
        no_attendees: bool,
    },
    /// Delete a meeting with its files (kept in the trash); a dry run
    /// unless --yes.
    DeleteMeeting {
        /// The meeting's id.
        #[arg(value_name = "MEETING_ID")]
        meeting_id: MeetingId,
        /// Really delete; without it the server only reports what would go.
        #[arg(long)]
        yes: bool,
    },
    /// A meeting's files.
    ListMeetingFiles {
        /// The meeting's id.
        #[arg(value_name = "MEETING_ID")]
        meeting_id: MeetingId,
    },
    /// Write a file under the meeting's folder and register it.
    AttachMeetingFile {
        /// The meeting's id.
        #[arg(value_name = "MEETING_ID")]
        meeting_id: MeetingId,
        /// The file's name (one name, no folders), e.g. `minutes.md`.
        #[arg(value_name = "NAME")]
        name: String,
        #[command(flatten)]
        content: ContentArgs,
    },
    /// Remove a meeting's file (kept in the trash) and its registration.
    DeleteMeetingFile {
        /// The meeting's id.
        #[arg(value_name = "MEETING_ID")]
        meeting_id: MeetingId,
        /// The file's id (from get-meeting or list-meeting-files).
        #[arg(value_name = "FILE_ID")]
        file_id: FileId,
    },
    /// Meetings and milestone due dates in a window (at most 366 days).
    ListCalendar {
        /// Start of the window (inclusive).
        #[arg(long, value_name = "TIME")]
        from: DateTime<FixedOffset>,
        /// End of the window (exclusive).
        #[arg(long, value_name = "TIME")]
        to: DateTime<FixedOffset>,
    },
    /// Reports, newest first.
    ListReports {
        /// Only reports in this status (draft, submitted, approved, rejected).
        #[arg(long, value_name = "STATUS")]
        status: Option<ReportStatus>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// One report with its history.
    GetReport {
        /// The report's id.
        #[arg(value_name = "REPORT_ID")]
        report_id: ReportId,
    },
    /// Move a report along its approval flow: draft→submitted,
    /// submitted→approved or rejected, rejected→draft.
    UpdateReportStatus {
        /// The report's id.
        #[arg(value_name = "REPORT_ID")]
        report_id: ReportId,
        /// The new status.
        #[arg(value_name = "STATUS")]
        to: ReportStatus,
        /// Why (required for `rejected`).
        #[arg(long, value_name = "TEXT")]
        comment: Option<String>,
        /// The version you read; a stale one is a `conflict`.
        #[arg(long, value_name = "N")]
        if_version: Option<i64>,
    },
    /// The project's members.
    ListMembers,
    /// The project's meta.
    GetProjectMeta,
}

/// The optional text fields of a meeting.
#[derive(Debug, Args)]
pub(crate) struct MeetingFields {
    /// Where (a room, a link).
    #[arg(long, value_name = "TEXT")]
    pub(crate) location: Option<String>,
    /// What will be discussed (markdown).
    #[arg(long, value_name = "TEXT")]
    pub(crate) agenda: Option<String>,
    /// Notes (markdown).
    #[arg(long, value_name = "TEXT")]
    pub(crate) notes: Option<String>,
}

/// `--limit` and `--cursor`, shared by the paged lists.
#[derive(Debug, Args)]
pub(crate) struct PageArgs {
    /// Page size (the server allows 1-100, default 20).
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<u32>,
    /// `next_cursor` of the previous page, as printed.
    #[arg(long, value_name = "CURSOR")]
    pub(crate) cursor: Option<String>,
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
    #[command(flatten)]
    pub(crate) content: ContentArgs,
    /// Only overwrite when the file still has this etag (else `conflict`).
    #[arg(long, value_name = "ETAG")]
    pub(crate) if_match: Option<String>,
    #[command(flatten)]
    pub(crate) mount: MountArg,
}

/// Where a file's content comes from: --content, --from-file or stdin.
#[derive(Debug, Args)]
pub(crate) struct ContentArgs {
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
