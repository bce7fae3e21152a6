//! What a command does: read the content to write, check the identity,
//! build the typed request of `acdm_core::nc`, `acdm_core::business::wire`
//! or `acdm_core::project`, call the harness client as that identity
//! and print the ToolResponse it returns.
//!
//! Nothing is sent when the identity is incomplete (a ToolResponse
//! `internal_error` naming the option and variable) or when the token is
//! missing (the client's own `internal_error`). Local input problems — an
//! unreadable `--from-file`, non-UTF-8 content without `--base64` — are
//! usage errors, like clap's.

use std::io::{self, IsTerminal, Read, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use acdm_core::approval::{ApprovalId, WithApproval};
use acdm_core::business::wire::{
    AttachMeetingFileRequest, CreateMeetingRequest, DeleteMeetingData, DeleteMeetingFileRequest,
    DeleteMeetingRequest, ListCalendarRequest, ListMeetingsRequest, ListReportsRequest,
    MeetingRequest, ReportRequest, UpdateMeetingRequest, UpdateReportStatusRequest,
};
use acdm_core::business::wire::{BusinessOp, MeetingFileWritten, MeetingWritten, ReportStatusData};
use acdm_core::identity::headers;
use acdm_core::nc::{
    DeleteData, DeleteRequest, Encoding, ListRequest, MoveRequest, ReadAs, ReadRequest,
    SearchRequest, WriteRequest,
};
use acdm_core::nc::{MoveData, NcOp, WriteData};
use acdm_core::project::{AdvanceData, AdvanceMilestoneRequest, ProjectOp};
use acdm_core::{ErrorCode, Identity, IdentityError, ToolResponse};
use acdm_harness_client::{ClientConfig, HarnessClient};
use base64::Engine as _;
use clap::CommandFactory;
use clap::error::ErrorKind;
use secrecy::SecretString;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cli::{
    BusinessCommand, Cli, Command, ContentArgs, NcCommand, ProjectCommand, TOKEN_ENV, WriteArgs,
};
use crate::human::{self, Human};

/// One typed call, ready to send.
enum Call {
    ListMounts,
    List(ListRequest),
    Read(ReadRequest),
    Search(SearchRequest),
    Write(WriteRequest),
    Delete(DeleteRequest),
    Move(MoveRequest),
    ListMeetings(ListMeetingsRequest),
    GetMeeting(MeetingRequest),
    CreateMeeting(CreateMeetingRequest),
    UpdateMeeting(UpdateMeetingRequest),
    DeleteMeeting(DeleteMeetingRequest),
    ListMeetingFiles(MeetingRequest),
    AttachMeetingFile(AttachMeetingFileRequest),
    DeleteMeetingFile(DeleteMeetingFileRequest),
    ListCalendar(ListCalendarRequest),
    ListReports(ListReportsRequest),
    GetReport(ReportRequest),
    UpdateReportStatus(UpdateReportStatusRequest),
    ListMembers,
    GetProjectMeta,
    Overview,
    Sow,
    Advance(AdvanceMilestoneRequest),
}

/// Runs the command and returns the process's exit status.
pub(crate) async fn run(cli: Cli) -> ExitCode {
    let call = match cli.command {
        Command::Nc(nc) => call(nc),
        Command::Business(business) => business_call(business),
        Command::Project(ProjectCommand::Overview) => Ok(Call::Overview),
        Command::Project(ProjectCommand::Sow) => Ok(Call::Sow),
        Command::Project(ProjectCommand::Advance { if_current }) => {
            Ok(Call::Advance(AdvanceMilestoneRequest { if_current }))
        }
        Command::Catalog => return print_catalog(cli.human),
    };
    let call = match call {
        Ok(call) => call,
        Err(problem) => return usage_error(&problem),
    };
    let human = cli.human;
    let identity = match identity(cli.user, cli.agent, cli.thread) {
        Ok(identity) => identity,
        Err(failure) => return emit(&failure, human),
    };
    let client = ClientConfig::new(&cli.url, service_token(), Duration::from_secs(cli.timeout))
        .and_then(HarnessClient::new);
    let client = match client {
        Ok(client) => client,
        Err(error) => {
            let failure = ToolResponse::<()>::failure(
                ErrorCode::InternalError,
                format!("the harness client cannot be set up: {error}; no request was sent"),
            );
            return emit(&failure, human);
        }
    };
    let client = client.as_identity(identity);
    let approval = match cli.approval_id.as_deref().map(str::parse::<ApprovalId>) {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(_)) => {
            return usage_error(
                "--approval-id must be the approval_id an approval_required answer gave (a UUID)",
            );
        }
    };
    let w = Writes {
        client: &client,
        approval,
        human,
    };
    match call {
        Call::ListMounts => emit(&client.nc_list_mounts().await, human),
        Call::List(request) => emit(&client.nc_list(&request).await, human),
        Call::Read(request) => emit(&client.nc_read(&request).await, human),
        Call::Search(request) => emit(&client.nc_search(&request).await, human),
        Call::Write(r) => w.send::<_, WriteData>(NcOp::Write.path(), &r, same).await,
        Call::Delete(r) => w.send(NcOp::Delete.path(), &r, confirm_with_yes).await,
        Call::Move(r) => w.send::<_, MoveData>(NcOp::Move.path(), &r, same).await,
        Call::ListMeetings(r) => emit(&client.business_list_meetings(&r).await, human),
        Call::GetMeeting(r) => emit(&client.business_get_meeting(&r).await, human),
        Call::CreateMeeting(r) => {
            w.send::<_, MeetingWritten>(BusinessOp::CreateMeeting.path(), &r, same)
                .await
        }
        Call::UpdateMeeting(r) => {
            w.send::<_, MeetingWritten>(BusinessOp::UpdateMeeting.path(), &r, same)
                .await
        }
        Call::DeleteMeeting(r) => {
            w.send(
                BusinessOp::DeleteMeeting.path(),
                &r,
                confirm_meeting_delete_with_yes,
            )
            .await
        }
        Call::ListMeetingFiles(r) => emit(&client.business_list_meeting_files(&r).await, human),
        Call::AttachMeetingFile(r) => {
            w.send::<_, MeetingFileWritten>(BusinessOp::AttachMeetingFile.path(), &r, same)
                .await
        }
        Call::DeleteMeetingFile(r) => {
            w.send::<_, MeetingFileWritten>(BusinessOp::DeleteMeetingFile.path(), &r, same)
                .await
        }
        Call::ListCalendar(r) => emit(&client.business_list_calendar(&r).await, human),
        Call::ListReports(r) => emit(&client.business_list_reports(&r).await, human),
        Call::GetReport(r) => emit(&client.business_get_report(&r).await, human),
        Call::UpdateReportStatus(r) => {
            w.send::<_, ReportStatusData>(BusinessOp::UpdateReportStatus.path(), &r, same)
                .await
        }
        Call::ListMembers => emit(&client.business_list_members().await, human),
        Call::GetProjectMeta => emit(&client.business_get_project_meta().await, human),
        Call::Overview => emit(&client.project_overview().await, human),
        Call::Sow => emit(&client.project_sow().await, human),
        Call::Advance(r) => {
            w.send::<_, AdvanceData>(ProjectOp::AdvanceMilestone.path(), &r, same)
                .await
        }
    }
}

/// How writes are sent: with `--approval-id` when given, and a failure's
/// data printed whatever its shape (an `approval_required` answer's
/// approval id and preview are what the user needs).
struct Writes<'a> {
    client: &'a acdm_harness_client::Scoped<'a>,
    approval: Option<ApprovalId>,
    human: bool,
}

impl Writes<'_> {
    async fn send<Req: Serialize, Resp: DeserializeOwned + Serialize + Human>(
        &self,
        path: &str,
        request: &Req,
        adjust: fn(ToolResponse<Resp>) -> ToolResponse<Resp>,
    ) -> ExitCode {
        let answer: ToolResponse<serde_json::Value> = match self.approval {
            Some(approval_id) => {
                self.client
                    .call(
                        path,
                        &WithApproval {
                            approval_id,
                            request,
                        },
                    )
                    .await
            }
            None => self.client.call(path, request).await,
        };
        if !answer.is_success() {
            return emit(&answer, self.human);
        }
        let typed = serde_json::to_value(&answer)
            .ok()
            .and_then(|value| serde_json::from_value::<ToolResponse<Resp>>(value).ok());
        match typed {
            Some(typed) => emit(&adjust(typed), self.human),
            None => emit(&answer, self.human),
        }
    }
}

/// An answer printed as it came.
fn same<T>(response: ToolResponse<T>) -> ToolResponse<T> {
    response
}

/// `catalog`: the tool definitions, as JSON or a readable list.
fn print_catalog(human: bool) -> ExitCode {
    let tools = acdm_harness_client::catalog();
    let text = if human {
        human::catalog(&tools)
    } else {
        serde_json::to_string_pretty(&tools).unwrap_or_default() + "\n"
    };
    let _ = io::stdout().lock().write_all(text.as_bytes());
    ExitCode::SUCCESS
}

/// A dry-run preview's suggested action names this tool's flag (`--yes`)
/// instead of the wire's `dry_run: false`; every other answer is printed
/// as the server sent it.
fn confirm_with_yes(response: ToolResponse<DeleteData>) -> ToolResponse<DeleteData> {
    if response.data().is_some_and(|data| data.dry_run) {
        response.with_suggested_action(
            "Run the same command again with --yes to delete (the item is kept in the backend's trash and can be restored).",
        )
    } else {
        response
    }
}

/// The same for `business delete-meeting`: the preview's suggested action
/// names `--yes`, the server's `dry_run: false` does not apply here.
fn confirm_meeting_delete_with_yes(
    response: ToolResponse<DeleteMeetingData>,
) -> ToolResponse<DeleteMeetingData> {
    if response.data().is_some_and(|data| data.dry_run) {
        response.with_suggested_action(
            "Run the same command again with --yes to delete the meeting and these files (the files are kept in the backend's trash and an operator can restore everything).",
        )
    } else {
        response
    }
}

/// The typed request of a business subcommand; `Err` is a usage problem.
fn business_call(command: BusinessCommand) -> Result<Call, String> {
    Ok(match command {
        BusinessCommand::ListMeetings { from, to, page } => {
            Call::ListMeetings(ListMeetingsRequest {
                from,
                to,
                limit: page.limit,
                cursor: page.cursor,
            })
        }
        BusinessCommand::GetMeeting { meeting_id } => {
            Call::GetMeeting(MeetingRequest { meeting_id })
        }
        BusinessCommand::CreateMeeting {
            title,
            starts_at,
            ends_at,
            fields,
            attendees,
        } => Call::CreateMeeting(CreateMeetingRequest {
            title,
            starts_at,
            ends_at,
            location: fields.location,
            agenda: fields.agenda,
            notes: fields.notes,
            attendees: (!attendees.is_empty()).then_some(attendees),
        }),
        BusinessCommand::UpdateMeeting {
            meeting_id,
            if_version,
            title,
            starts_at,
            ends_at,
            fields,
            attendees,
            no_attendees,
        } => Call::UpdateMeeting(UpdateMeetingRequest {
            meeting_id,
            if_version,
            title,
            starts_at,
            ends_at,
            location: fields.location,
            agenda: fields.agenda,
            notes: fields.notes,
            attendees: (no_attendees || !attendees.is_empty()).then_some(attendees),
        }),
        BusinessCommand::DeleteMeeting { meeting_id, yes } => {
            Call::DeleteMeeting(DeleteMeetingRequest {
                meeting_id,
                dry_run: !yes,
            })
        }
        BusinessCommand::ListMeetingFiles { meeting_id } => {
            Call::ListMeetingFiles(MeetingRequest { meeting_id })
        }
        BusinessCommand::AttachMeetingFile {
            meeting_id,
            name,
            content,
        } => {
            let (content, encoding) = content_of(content)?;
            Call::AttachMeetingFile(AttachMeetingFileRequest {
                meeting_id,
                name,
                content,
                encoding,
            })
        }
        BusinessCommand::DeleteMeetingFile {
            meeting_id,
            file_id,
        } => Call::DeleteMeetingFile(DeleteMeetingFileRequest {
            meeting_id,
            file_id,
        }),
        BusinessCommand::ListCalendar { from, to } => {
            Call::ListCalendar(ListCalendarRequest { from, to })
        }
        BusinessCommand::ListReports { status, page } => Call::ListReports(ListReportsRequest {
            status,
            limit: page.limit,
            cursor: page.cursor,
        }),
        BusinessCommand::GetReport { report_id } => Call::GetReport(ReportRequest { report_id }),
        BusinessCommand::UpdateReportStatus {
            report_id,
            to,
            comment,
            if_version,
        } => Call::UpdateReportStatus(UpdateReportStatusRequest {
            report_id,
            to,
            comment,
            if_version,
        }),
        BusinessCommand::ListMembers => Call::ListMembers,
        BusinessCommand::GetProjectMeta => Call::GetProjectMeta,
    })
}

/// The typed request of a subcommand; `Err` is a usage problem.
fn call(command: NcCommand) -> Result<Call, String> {
    Ok(match command {
        NcCommand::ListMounts => Call::ListMounts,
        NcCommand::List { rel_path, mount } => Call::List(ListRequest {
            rel_path: rel_path.unwrap_or_default(),
            mount: mount.mount,
        }),
        NcCommand::Read {
            rel_path,
            offset,
            max_bytes,
            raw,
            mount,
        } => Call::Read(ReadRequest {
            rel_path,
            mount: mount.mount,
            offset,
            max_bytes,
            read_as: raw.then_some(ReadAs::Raw),
        }),
        NcCommand::Search {
            query,
            limit,
            mount,
        } => Call::Search(SearchRequest {
            query,
            mount,
            limit,
        }),
        NcCommand::Write(args) => Call::Write(write_request(args)?),
        NcCommand::Delete {
            rel_path,
            yes,
            mount,
        } => Call::Delete(DeleteRequest {
            rel_path,
            mount: mount.mount,
            dry_run: !yes,
        }),
        NcCommand::Move {
            from,
            to,
            overwrite,
            mount,
        } => Call::Move(MoveRequest {
            from_rel_path: from,
            to_rel_path: to,
            overwrite,
            mount: mount.mount,
        }),
    })
}

/// `nc write`'s request, with the content from --content, --from-file or
/// stdin.
fn write_request(args: WriteArgs) -> Result<WriteRequest, String> {
    let (content, encoding) = content_of(args.content)?;
    Ok(WriteRequest {
        rel_path: args.rel_path,
        content,
        encoding,
        if_match: args.if_match,
        mount: args.mount.mount,
    })
}

/// The content to send and its encoding, from --content, --from-file or
/// stdin (clap keeps --content apart from the other two).
fn content_of(args: ContentArgs) -> Result<(String, Option<Encoding>), String> {
    Ok(match (args.content, &args.from_file) {
        (Some(text), _) => (text, None),
        (None, source) => {
            let (bytes, what) = match source {
                Some(path) => (
                    read_file(path)?,
                    format!("--from-file `{}`", path.display()),
                ),
                None => (read_stdin()?, "stdin".to_owned()),
            };
            if args.base64 {
                let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
                (encoded, Some(Encoding::Base64))
            } else {
                let text = String::from_utf8(bytes).map_err(|_| {
                    format!("{what} is not UTF-8 text; pass --base64 to send its bytes")
                })?;
                (text, None)
            }
        }
    })
}

fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read --from-file `{}`: {e}", path.display()))
}

fn read_stdin() -> Result<Vec<u8>, String> {
    let stdin = io::stdin();
    if stdin.is_terminal() {
        return Err("give the content with --content or --from-file, or pipe it on stdin".into());
    }
    let mut bytes = Vec::new();
    stdin
        .lock()
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the content from stdin: {e}"))?;
    Ok(bytes)
}

/// The caller from the three options (or their variables); an incomplete
/// or invalid one is an `internal_error` naming the option, and nothing is
/// sent — the same class of answer the client gives without an identity.
fn identity(
    user: Option<String>,
    agent: Option<String>,
    thread: Option<String>,
) -> Result<Identity, ToolResponse<()>> {
    Identity::from_headers(user.as_deref(), agent.as_deref(), thread.as_deref()).map_err(|error| {
        let message = match error {
            IdentityError::Missing { headers } => {
                let names: Vec<&str> = headers.into_iter().map(option_for).collect();
                let verb = if names.len() == 1 { "is" } else { "are" };
                format!(
                    "no caller identity: {} {verb} missing or empty; no request was sent",
                    names.join(", ")
                )
            }
            IdentityError::Invalid { header, problem } => format!(
                "{} is not a valid {header}: {problem}; no request was sent",
                option_for(header)
            ),
        };
        ToolResponse::failure(ErrorCode::InternalError, message).with_suggested_action(
            "Pass --user, --agent and --thread, or set ACDM_USER_ID, ACDM_AGENT_NAME and ACDM_THREAD_ID.",
        )
    })
}

/// The option and variable that set an identity header.
fn option_for(header: &str) -> &'static str {
    match header {
        headers::USER_ID => "--user (ACDM_USER_ID)",
        headers::AGENT_NAME => "--agent (ACDM_AGENT_NAME)",
        _ => "--thread (ACDM_THREAD_ID)",
    }
}

/// `ACDM_MCP_SERVICE_TOKEN`; unset or blank leaves it to the client to
/// refuse (an `internal_error`, nothing sent).
#[expect(
    clippy::disallowed_methods,
    reason = "a binary: the token comes from the environment, never the command line"
)]
fn service_token() -> Option<SecretString> {
    std::env::var(TOKEN_ENV)
        .ok()
        .filter(|token| !token.trim().is_empty())
        .map(SecretString::from)
}

/// Prints `response` (JSON or `--human`) and maps it to the exit status.
fn emit<T: Serialize + Human>(response: &ToolResponse<T>, human: bool) -> ExitCode {
    let text = if human {
        human::render(response)
    } else {
        match serde_json::to_string_pretty(response) {
            Ok(json) => json + "\n",
            Err(error) => {
                let failure = ToolResponse::<()>::failure(
                    ErrorCode::InternalError,
                    format!("the answer cannot be printed as JSON: {error}"),
                );
                serde_json::to_string_pretty(&failure).unwrap_or_default() + "\n"
            }
        }
    };
    // A closed pipe (`| head`) is not an error of the call.
    let _ = io::stdout().lock().write_all(text.as_bytes());
    if response.is_success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// A usage problem found after parsing, reported the way clap reports its
/// own (stderr, exit status 2).
fn usage_error(problem: &str) -> ExitCode {
    let error = Cli::command().error(ErrorKind::ValueValidation, problem);
    let _ = error.print();
    ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2))
}
