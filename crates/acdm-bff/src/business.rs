//! The fourteen business operations (spec §6.2):
//! `POST /agent-tools/business/{op}`.
//!
//! Every id a caller gives is looked up **in the caller's project**: an id
//! from another project is `not_found`, never another project's row. Every
//! write checks the acting user's role (§6.5), goes through the journal as
//! one event with the rows' before-images (and, for meeting files, the
//! file steps), and answers with what changed and its event. Writes that
//! touch files obey the kill switch for agents' file writes.

use std::sync::Arc;

use acdm_core::approval::{ApprovalId, WriteOp};
use acdm_core::business::wire::{
    AttachMeetingFileRequest, BusinessOp, CalendarEntry, CalendarKind, CreateMeetingRequest,
    DeleteMeetingData, DeleteMeetingFileRequest, DeleteMeetingRequest, EmptyRequest,
    ListCalendarRequest, ListMeetingsRequest, ListReportsRequest, MeetingData, MeetingFileWritten,
    MeetingRequest, MeetingWritten, Paged, ReportRequest, ReportStatusData, UpdateMeetingRequest,
    UpdateReportStatusRequest,
};
use acdm_core::business::{
    Cursor, FieldError, FileId, Meeting, MeetingFile, MeetingId, ReportStatus, ReportTransition,
    RowImage, check_line, check_meeting_span, check_text, check_window, limits,
};
use acdm_core::domain::{DEFAULT_MOUNT, Mount};
use acdm_core::events::{Actor, EventOp};
use acdm_core::nc::Encoding;
use acdm_core::{AbsPath, ErrorCode, RelPath, ToolResponse, UserId};
use acdm_journal::{Approved, Change, Journal, JournalError, Record};
use acdm_sources::{FileReader, SourceError};
use acdm_store::{CalendarItem, Page, Store};
use axum::Router;
use axum::extract::{FromRequest, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use bytes::Bytes;
use chrono::{DateTime, FixedOffset, TimeDelta, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::approval::{Approvals, target};
use crate::envelope::{Envelope, Failure};
use crate::extract::{StrictJson, invalid_field, route_op, write_body};
use crate::pipeline::{Behind, Caller, PipelineState};
use crate::switch::KillSwitch;

/// What a dry-run `delete_meeting` suggests.
const DELETE_CONFIRMATION: &str = "Call again with dry_run: false to delete the meeting and these files (the files are kept in the backend's trash and an operator can restore everything).";

/// What the business operations need.
#[derive(Clone)]
pub struct BusinessState {
    store: Store,
    /// Reads only (is an attachment still there?); changes go through the
    /// journal.
    files: Arc<dyn FileReader>,
    journal: Journal,
    switch: KillSwitch,
    /// Which writes wait for a person's approval.
    approvals: Approvals,
}

impl BusinessState {
    /// The business operations over `journal` (its store and file store),
    /// with `switch` guarding the writes that touch files and `approvals`
    /// the writes a person must approve first.
    pub fn new(journal: Journal, switch: KillSwitch, approvals: Approvals) -> Self {
        Self {
            store: journal.store().clone(),
            files: journal.files().clone(),
            journal,
            switch,
            approvals,
        }
    }
}

/// The business routes, each call through the agent pipeline first.
pub(crate) fn routes(state: BusinessState, pipeline: PipelineState) -> Router {
    Router::new()
        .route("/agent-tools/business/{op}", post(dispatch))
        .with_state(Behind::new(state, pipeline))
}

type Reply = Result<Response, Failure>;

fn ok<T: Serialize>(data: T, message: impl Into<String>) -> Reply {
    Ok(Envelope(ToolResponse::ok(data, message)).into_response())
}

async fn body<T: DeserializeOwned>(req: Request) -> Result<T, Failure> {
    StrictJson::<T>::from_request(req, &())
        .await
        .map(|StrictJson(v)| v)
}

/// One call: the state, the caller and the actor its writes record.
#[derive(Clone)]
struct Ctx {
    state: BusinessState,
    actor: Actor,
    caller: Caller,
    /// The approval this call's write runs under, once checked.
    approval: Option<Approved>,
}

pub(crate) async fn dispatch(
    State(behind): State<Arc<Behind<BusinessState>>>,
    req: Request,
) -> Response {
    behind
        .run(req, |family, caller, req| {
            answer(family.clone(), caller, req)
        })
        .await
}

/// One call, once the pipeline admitted its caller.
async fn answer(state: BusinessState, caller: Caller, req: Request) -> Response {
    let (op, req) = match route_op(req).await {
        Ok(found) => found,
        Err(rejection) => return rejection,
    };
    let op = match op.parse::<BusinessOp>() {
        Ok(op) => op,
        Err(unknown) => {
            return Failure::new(ErrorCode::NotFound, unknown.to_string()).into_response();
        }
    };
    if let Err(refused) = caller.allow(op.access(), &describe(op)) {
        return refused.into_response();
    }
    let ctx = Ctx {
        state,
        actor: caller.actor(),
        caller,
        approval: None,
    };
    ctx.run(op, req)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

impl Ctx {
    async fn run(&self, op: BusinessOp, req: Request) -> Reply {
        let ctx = self;
        // Exhaustive: an operation without a handler does not compile.
        // Each operation's future is boxed, as in `nc::dispatch`: inline,
        // every call's future would be as large as the largest
        // operation's, and axum moves it whole into a box on every call.
        match op {
            BusinessOp::ListMeetings => {
                Box::pin(async move { ctx.list_meetings(body(req).await?).await }).await
            }
            BusinessOp::GetMeeting => {
                Box::pin(async move { ctx.get_meeting(body(req).await?).await }).await
            }
            BusinessOp::CreateMeeting => {
                Box::pin(async move {
                    let (body, approval) = write_body::<CreateMeetingRequest>(req).await?;
                    let ctx = ctx
                        .approved(op, &body, approval, ctx.preview_create_meeting(&body))
                        .await?;
                    ctx.create_meeting(body).await
                })
                .await
            }
            BusinessOp::UpdateMeeting => {
                Box::pin(async move {
                    let (body, approval) = write_body::<UpdateMeetingRequest>(req).await?;
                    let ctx = ctx
                        .approved(op, &body, approval, ctx.preview_update_meeting(&body))
                        .await?;
                    ctx.update_meeting(body).await
                })
                .await
            }
            BusinessOp::DeleteMeeting => {
                Box::pin(async move {
                    let (body, approval) = write_body::<DeleteMeetingRequest>(req).await?;
                    if body.dry_run {
                        return ctx.delete_meeting(body).await;
                    }
                    ctx.files_writable()?;
                    let ctx = ctx
                        .approved(op, &body, approval, ctx.preview_delete_meeting(&body))
                        .await?;
                    ctx.delete_meeting(body).await
                })
                .await
            }
            BusinessOp::ListMeetingFiles => {
                Box::pin(async move { ctx.list_meeting_files(body(req).await?).await }).await
            }
            BusinessOp::AttachMeetingFile => {
                Box::pin(async move {
                    let (body, approval) = write_body::<AttachMeetingFileRequest>(req).await?;
                    ctx.files_writable()?;
                    let ctx = ctx
                        .approved(op, &body, approval, ctx.preview_attach(&body))
                        .await?;
                    ctx.attach_meeting_file(body).await
                })
                .await
            }
            BusinessOp::DeleteMeetingFile => {
                Box::pin(async move {
                    let (body, approval) = write_body::<DeleteMeetingFileRequest>(req).await?;
                    ctx.files_writable()?;
                    let ctx = ctx
                        .approved(op, &body, approval, ctx.preview_delete_file(&body))
                        .await?;
                    ctx.delete_meeting_file(body).await
                })
                .await
            }
            BusinessOp::ListCalendar => {
                Box::pin(async move { ctx.list_calendar(body(req).await?).await }).await
            }
            BusinessOp::ListReports => {
                Box::pin(async move { ctx.list_reports(body(req).await?).await }).await
            }
            BusinessOp::GetReport => {
                Box::pin(async move { ctx.get_report(body(req).await?).await }).await
            }
            BusinessOp::UpdateReportStatus => {
                Box::pin(async move {
                    let (body, approval) = write_body::<UpdateReportStatusRequest>(req).await?;
                    let ctx = ctx
                        .approved(op, &body, approval, ctx.preview_report_status(&body))
                        .await?;
                    ctx.update_report_status(body).await
                })
                .await
            }
            BusinessOp::ListMembers => {
                Box::pin(async move { ctx.list_members(body(req).await?).await }).await
            }
            BusinessOp::GetProjectMeta => {
                Box::pin(async move { ctx.get_project_meta(body(req).await?).await }).await
            }
        }
    }
}

/// How an operation reads in a refusal ("to delete a meeting needs …").
fn describe(op: BusinessOp) -> String {
    match op {
        BusinessOp::DeleteMeeting => "delete a meeting".to_owned(),
        BusinessOp::CreateMeeting => "create a meeting".to_owned(),
        BusinessOp::UpdateMeeting => "change a meeting".to_owned(),
        BusinessOp::AttachMeetingFile => "attach a file to a meeting".to_owned(),
        BusinessOp::DeleteMeetingFile => "remove a meeting's file".to_owned(),
        BusinessOp::UpdateReportStatus => "move a report's status".to_owned(),
        other => format!("call {}", other.label()),
    }
}

fn field(name: &str, result: Result<(), FieldError>) -> Result<(), Failure> {
    result.map_err(|e| invalid_field(name, e.to_string()))
}

fn utc(time: DateTime<FixedOffset>) -> DateTime<Utc> {
    time.with_timezone(&Utc).trunc_subsecs_micros()
}

trait Micros {
    fn trunc_subsecs_micros(self) -> Self;
}

impl Micros for DateTime<Utc> {
    /// Both databases keep microseconds; keep no more, so what is answered
    /// is what is stored.
    fn trunc_subsecs_micros(self) -> Self {
        chrono::SubsecRound::trunc_subsecs(self, 6)
    }
}

fn page_limit(limit: Option<u32>) -> Result<u32, Failure> {
    let limit = limit.unwrap_or(limits::PAGE_DEFAULT);
    if (1..=limits::PAGE_MAX).contains(&limit) {
        Ok(limit)
    } else {
        Err(invalid_field(
            "limit",
            format!("must be between 1 and {}", limits::PAGE_MAX),
        ))
    }
}

fn cursor(raw: Option<&str>) -> Result<Option<Cursor>, Failure> {
    raw.map(|c| Cursor::decode(c).map_err(|e| invalid_field("cursor", e.to_string())))
        .transpose()
}

fn paged<T>(page: Page<T>) -> Paged<T> {
    Paged {
        items: page.items,
        next_cursor: page.next.as_ref().map(Cursor::encode),
        total_count: page.total,
    }
}

/// An optional one-line field: absent or empty is `None`.
fn optional_line(name: &str, value: Option<String>, max: usize) -> Result<Option<String>, Failure> {
    match value {
        Some(text) if !text.is_empty() => {
            field(name, check_line(&text, max))?;
            Ok(Some(text))
        }
        _ => Ok(None),
    }
}

/// An optional multi-line field: absent or empty is `None`.
fn optional_text(name: &str, value: Option<String>, max: usize) -> Result<Option<String>, Failure> {
    match value {
        Some(text) if !text.is_empty() => {
            field(name, check_text(&text, max))?;
            Ok(Some(text))
        }
        _ => Ok(None),
    }
}

fn meeting_target(id: MeetingId) -> String {
    format!("meeting:{id}")
}

fn report_not_found(id: impl std::fmt::Display) -> Failure {
    Failure::new(
        ErrorCode::NotFound,
        format!("report {id} not found in this project"),
    )
    .with_suggested_action("Use a report_id returned by list_reports.")
}

fn meeting_not_found(id: MeetingId) -> Failure {
    Failure::new(
        ErrorCode::NotFound,
        format!("meeting {id} not found in this project"),
    )
    .with_suggested_action("Use a meeting_id returned by list_meetings or list_calendar.")
}

fn guess_content_type(name: &str) -> Option<String> {
    let extension = name.rsplit_once('.')?.1.to_ascii_lowercase();
    let kind = match extension.as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" | "log" => "text/plain",
        "csv" => "text/csv",
        "json" => "application/json",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        _ => return None,
    };
    Some(kind.to_owned())
}

impl Ctx {
    fn record(&self, target: String, params: serde_json::Value) -> Record<'_> {
        Record {
            actor: &self.actor,
            project: self.caller.project(),
            target,
            params,
            approval: self.approval.clone(),
        }
    }

    fn user(&self) -> UserId {
        self.caller.identity.user_id().clone()
    }

    fn project(&self) -> acdm_core::domain::ProjectId {
        self.caller.project().id
    }

    /// Writes that touch files obey the kill switch for agents' file writes.
    fn files_writable(&self) -> Result<(), Failure> {
        if self.state.switch.writes_enabled() {
            Ok(())
        } else {
            Err(Failure::new(
                ErrorCode::KillSwitchOff,
                "file writes by agents are switched off on this service right now, and this operation changes files",
            ))
        }
    }

    async fn meeting(&self, id: MeetingId) -> Result<Meeting, Failure> {
        self.state
            .store
            .meeting(self.project(), id)
            .await?
            .ok_or_else(|| meeting_not_found(id))
    }

    /// The project's mounts, from the caller's cached scope.
    async fn mounts(&self) -> Result<Vec<Mount>, Failure> {
        Ok(self.caller.mounts().to_vec())
    }

    /// Where a meeting file lives in the file store.
    fn file_path(mounts: &[Mount], file: &MeetingFile) -> Option<AbsPath> {
        let mount = mounts.iter().find(|m| m.name.as_str() == file.mount)?;
        let rel = RelPath::parse(&file.rel_path).ok()?;
        Some(mount.root.join(&rel))
    }

    /// A meeting's files, each checked against the file store: one found
    /// gone is shown (and recorded) as `missing: true`, one back again as
    /// not missing.
    async fn checked_files(&self, meeting: MeetingId) -> Result<Vec<MeetingFile>, Failure> {
        let mut files = self
            .state
            .store
            .meeting_files(self.project(), meeting)
            .await?;
        if files.is_empty() {
            return Ok(files);
        }
        let mounts = self.mounts().await?;
        for file in &mut files {
            let Some(path) = Self::file_path(&mounts, file) else {
                continue;
            };
            let missing = match self.state.files.stat(&path).await {
                Ok(_) => false,
                Err(SourceError::NotFound(_)) => true,
                // The store cannot tell now: show what was last known.
                Err(error) => {
                    tracing::warn!(error = %error, file = %file.file_id, "cannot check a meeting file");
                    continue;
                }
            };
            if missing != file.missing {
                self.state
                    .store
                    .mark_file_checked(file.file_id, missing, Utc::now())
                    .await?;
                file.missing = missing;
            }
        }
        Ok(files)
    }

    /// Attendees as user ids of members (in the order given, no repeats).
    async fn attendees(&self, given: Vec<String>) -> Result<Vec<UserId>, Failure> {
        if given.len() > limits::ATTENDEES {
            return Err(invalid_field(
                "attendees",
                format!("at most {} attendees", limits::ATTENDEES),
            ));
        }
        let mut ids = Vec::with_capacity(given.len());
        for (index, raw) in given.iter().enumerate() {
            let id = UserId::parse(raw)
                .map_err(|e| invalid_field(&format!("attendees[{index}]"), e.to_string()))?;
            if ids.contains(&id) {
                return Err(invalid_field(
                    &format!("attendees[{index}]"),
                    format!("`{id}` is listed twice"),
                ));
            }
            ids.push(id);
        }
        if ids.is_empty() {
            return Ok(ids);
        }
        let members = self.state.store.members_info(self.project()).await?;
        let strangers: Vec<&str> = ids
            .iter()
            .filter(|id| !members.iter().any(|m| &m.user_id == *id))
            .map(UserId::as_str)
            .collect();
        if !strangers.is_empty() {
            return Err(invalid_field(
                "attendees",
                format!("not members of this project: {}", strangers.join(", ")),
            )
            .with_suggested_action(
                "Use user ids from list_members; people outside the project cannot be attendees.",
            ));
        }
        Ok(ids)
    }

    fn journal_failure(error: JournalError) -> Failure {
        Failure::from(error)
    }

    // ---- meetings -------------------------------------------------------

    async fn list_meetings(&self, body: ListMeetingsRequest) -> Reply {
        let from = body
            .from
            .map_or_else(|| Utc::now().trunc_subsecs_micros(), utc);
        let to = body.to.map_or(from + TimeDelta::days(30), utc);
        check_window(from, to).map_err(|e| invalid_field("to", e.to_string()))?;
        let limit = page_limit(body.limit)?;
        let cursor = cursor(body.cursor.as_deref())?;
        let page = self
            .state
            .store
            .meetings_page(self.project(), from, to, limit, cursor.as_ref())
            .await?;
        let message = format!(
            "{} of {} meeting(s) starting from {} to {}{}",
            page.items.len(),
            page.total,
            from.to_rfc3339(),
            to.to_rfc3339(),
            if page.next.is_some() {
                "; more with next_cursor"
            } else {
                ""
            }
        );
        ok(paged(page), message)
    }

    async fn get_meeting(&self, body: MeetingRequest) -> Reply {
        let meeting = self.meeting(body.meeting_id).await?;
        let files = self.checked_files(meeting.meeting_id).await?;
        let missing = files.iter().filter(|f| f.missing).count();
        let message = format!(
            "meeting \"{}\" (version {}) with {} file(s){}",
            meeting.title,
            meeting.version,
            files.len(),
            if missing > 0 {
                format!("; {missing} missing from the file store (removed outside this service)")
            } else {
                String::new()
            }
        );
        ok(MeetingData { meeting, files }, message)
    }

    async fn list_meeting_files(&self, body: MeetingRequest) -> Reply {
        let meeting = self.meeting(body.meeting_id).await?;
        let files = self.checked_files(meeting.meeting_id).await?;
        let message = format!("{} file(s) of meeting \"{}\"", files.len(), meeting.title);
        let total = files.len() as u64;
        ok(
            Paged {
                items: files,
                next_cursor: None,
                total_count: total,
            },
            message,
        )
    }

    async fn create_meeting(&self, body: CreateMeetingRequest) -> Reply {
        field("title", check_line(&body.title, limits::TITLE_CHARS))?;
        let (starts_at, ends_at) = (utc(body.starts_at), utc(body.ends_at));
        check_meeting_span(starts_at, ends_at)
            .map_err(|e| invalid_field("ends_at", e.to_string()))?;
        let location = optional_line("location", body.location, limits::LOCATION_CHARS)?;
        let agenda = optional_text("agenda", body.agenda, limits::MEETING_TEXT_CHARS)?;
        let notes = optional_text("notes", body.notes, limits::MEETING_TEXT_CHARS)?;
        let attendees = self.attendees(body.attendees.unwrap_or_default()).await?;
        let now = Utc::now().trunc_subsecs_micros();
        let meeting = Meeting {
            meeting_id: MeetingId::new_random(),
            title: body.title,
            starts_at,
            ends_at,
            location,
            agenda,
            notes,
            attendees,
            version: 1,
            created_by: Some(self.user()),
            created_at: now,
            updated_by: Some(self.user()),
            updated_at: now,
        };
        let params = json!({ "meeting_id": meeting.meeting_id, "title": meeting.title, "starts_at": starts_at, "ends_at": ends_at });
        let changed = self
            .state
            .journal
            .change(
                self.record(meeting_target(meeting.meeting_id), params),
                Change {
                    op: EventOp::CreateMeeting,
                    remove: vec![],
                    create: None,
                    rows: vec![(None, Some(RowImage::Meeting(meeting.clone())))],
                },
            )
            .await
            .map_err(Self::journal_failure)?;
        let message = format!(
            "created meeting \"{}\" ({}) on {}",
            meeting.title,
            meeting.meeting_id,
            meeting.starts_at.to_rfc3339()
        );
        ok(
            MeetingWritten {
                meeting,
                changed: [
                    "title",
                    "starts_at",
                    "ends_at",
                    "location",
                    "agenda",
                    "notes",
                    "attendees",
                ]
                .map(str::to_owned)
                .to_vec(),
                event_id: changed.event.id,
            },
            message,
        )
    }

    /// The meeting as it was at `version`, from the journal (for a
    /// conflict that says what changed since).
    async fn meeting_at(&self, id: MeetingId, version: i64) -> Option<Meeting> {
        let events = self
            .state
            .store
            .events_about(self.project(), &meeting_target(id), 100)
            .await
            .ok()?;
        events
            .iter()
            .flat_map(|e| e.plan.iter())
            .find_map(|step| match step {
                acdm_core::events::Step::Row { before, after } => [before, after]
                    .into_iter()
                    .flatten()
                    .find_map(|row| match row.as_ref() {
                        RowImage::Meeting(m) if m.meeting_id == id && m.version == version => {
                            Some(m.clone())
                        }
                        _ => None,
                    }),
                _ => None,
            })
    }

    async fn stale_meeting(&self, current: &Meeting, asked: i64) -> Failure {
        let differing = match self.meeting_at(current.meeting_id, asked).await {
            Some(old) => old.differing_fields(current),
            None => Vec::new(),
        };
        let what = if differing.is_empty() {
            String::new()
        } else {
            format!("; changed since: {}", differing.join(", "))
        };
        Failure::new(
            ErrorCode::Conflict,
            format!(
                "meeting {} is at version {}, not {asked}{what}",
                current.meeting_id, current.version
            ),
        )
        .with_suggested_action(format!(
            "Read it again with get_meeting, check the changes, then retry with if_version: {}.",
            current.version
        ))
        .with_data(json!({
            "current_version": current.version,
            "differing_fields": differing,
            "meeting": current,
        }))
    }

    async fn update_meeting(&self, body: UpdateMeetingRequest) -> Reply {
        // What the request alone decides is checked before anything is
        // looked up: a malformed request is a validation_error whatever
        // the meeting's state.
        let UpdateMeetingRequest {
            title,
            starts_at,
            ends_at,
            location,
            agenda,
            notes,
            attendees,
            ..
        } = &body;
        if title.is_none()
            && starts_at.is_none()
            && ends_at.is_none()
            && location.is_none()
            && agenda.is_none()
            && notes.is_none()
            && attendees.is_none()
        {
            return Err(invalid_field(".", "nothing to change: give at least one field")
                .with_suggested_action("Give at least one of title, starts_at, ends_at, location, agenda, notes, attendees with a new value."));
        }
        if let Some(title) = &body.title {
            field("title", check_line(title, limits::TITLE_CHARS))?;
        }
        optional_line("location", body.location.clone(), limits::LOCATION_CHARS)?;
        optional_text("agenda", body.agenda.clone(), limits::MEETING_TEXT_CHARS)?;
        optional_text("notes", body.notes.clone(), limits::MEETING_TEXT_CHARS)?;
        let current = self.meeting(body.meeting_id).await?;
        if current.version != body.if_version {
            return Err(self.stale_meeting(&current, body.if_version).await);
        }
        let mut next = current.clone();
        if let Some(title) = body.title {
            field("title", check_line(&title, limits::TITLE_CHARS))?;
            next.title = title;
        }
        if let Some(at) = body.starts_at {
            next.starts_at = utc(at);
        }
        if let Some(at) = body.ends_at {
            next.ends_at = utc(at);
        }
        check_meeting_span(next.starts_at, next.ends_at)
            .map_err(|e| invalid_field("ends_at", e.to_string()))?;
        if let Some(location) = body.location {
            next.location = optional_line("location", Some(location), limits::LOCATION_CHARS)?;
        }
        if let Some(agenda) = body.agenda {
            next.agenda = optional_text("agenda", Some(agenda), limits::MEETING_TEXT_CHARS)?;
        }
        if let Some(notes) = body.notes {
            next.notes = optional_text("notes", Some(notes), limits::MEETING_TEXT_CHARS)?;
        }
        if let Some(attendees) = body.attendees {
            next.attendees = self.attendees(attendees).await?;
        }
        let changed: Vec<String> = current
            .differing_fields(&next)
            .into_iter()
            .map(str::to_owned)
            .collect();
        if changed.is_empty() {
            return Err(invalid_field(
                ".",
                "nothing to change: every field given already has that value",
            )
            .with_suggested_action("Give at least one of title, starts_at, ends_at, location, agenda, notes, attendees with a new value."));
        }
        next.version = current.version + 1;
        next.updated_by = Some(self.user());
        next.updated_at = Utc::now().trunc_subsecs_micros();
        let params = json!({ "meeting_id": current.meeting_id, "if_version": body.if_version, "changed": changed });
        let written = self
            .state
            .journal
            .change(
                self.record(meeting_target(current.meeting_id), params),
                Change {
                    op: EventOp::UpdateMeeting,
                    remove: vec![],
                    create: None,
                    rows: vec![(
                        Some(RowImage::Meeting(current.clone())),
                        Some(RowImage::Meeting(next.clone())),
                    )],
                },
            )
            .await;
        let event = match written {
            Ok(changed) => changed.event,
            // Changed by someone else between our read and our write.
            Err(JournalError::Conflict(_)) => {
                let now = self.meeting(current.meeting_id).await?;
                return Err(self.stale_meeting(&now, body.if_version).await);
            }
            Err(error) => return Err(error.into()),
        };
        let message = format!(
            "updated meeting \"{}\" to version {} ({})",
            next.title,
            next.version,
            changed.join(", ")
        );
        ok(
            MeetingWritten {
                meeting: next,
                changed,
                event_id: event.id,
            },
            message,
        )
    }

    async fn delete_meeting(&self, body: DeleteMeetingRequest) -> Reply {
        let meeting = self.meeting(body.meeting_id).await?;
        let files = self.checked_files(meeting.meeting_id).await?;
        if body.dry_run {
            let message = format!(
                "dry run: deleting meeting \"{}\" would also remove its {} file(s); nothing was deleted",
                meeting.title,
                files.len()
            );
            let mut reply = ToolResponse::ok(
                DeleteMeetingData {
                    dry_run: true,
                    meeting,
                    files,
                    event_id: None,
                },
                message,
            );
            reply = reply.with_suggested_action(DELETE_CONFIRMATION);
            return Ok(Envelope(reply).into_response());
        }
        self.files_writable()?;
        let mounts = self.mounts().await?;
        let mut remove = Vec::new();
        let mut rows = Vec::new();
        for file in &files {
            if !file.missing
                && let Some(path) = Self::file_path(&mounts, file)
            {
                remove.push(path);
            }
            rows.push((Some(RowImage::MeetingFile(file.clone())), None));
        }
        rows.push((Some(RowImage::Meeting(meeting.clone())), None));
        let params = json!({ "meeting_id": meeting.meeting_id, "files": files.iter().map(|f| &f.rel_path).collect::<Vec<_>>() });
        let changed = self
            .state
            .journal
            .change(
                self.record(meeting_target(meeting.meeting_id), params),
                Change {
                    op: EventOp::DeleteMeeting,
                    remove,
                    create: None,
                    rows,
                },
            )
            .await
            .map_err(|e| self.changed_meanwhile(e, "the meeting or its files"))?;
        let message = format!(
            "deleted meeting \"{}\" and its {} file(s) (kept in the trash; an operator can revert event {})",
            meeting.title,
            files.len(),
            changed.event.id
        );
        ok(
            DeleteMeetingData {
                dry_run: false,
                meeting,
                files,
                event_id: Some(changed.event.id),
            },
            message,
        )
    }

    fn changed_meanwhile(&self, error: JournalError, what: &str) -> Failure {
        match error {
            JournalError::Conflict(message) => Failure::new(ErrorCode::Conflict, message)
                .with_suggested_action(format!("Read {what} again, then retry.")),
            other => other.into(),
        }
    }

    async fn attach_meeting_file(&self, body: AttachMeetingFileRequest) -> Reply {
        self.files_writable()?;
        let meeting = self.meeting(body.meeting_id).await?;
        let name = RelPath::parse(&body.name)
            .ok()
            .filter(|p| p.segments().len() == 1)
            // The trash's name is never a file's, in any case (as for nc).
            .filter(|p| !p.to_string().eq_ignore_ascii_case(acdm_core::events::TRASH_FOLDER))
            .ok_or_else(|| {
                invalid_field(
                    "name",
                    "must be one file name (no folders, no `..`, not the reserved `.acdm-trash`), e.g. `minutes.md`",
                )
            })?;
        let content = match body.encoding.unwrap_or_default() {
            Encoding::Text => Bytes::from(body.content.into_bytes()),
            Encoding::Base64 => base64::engine::general_purpose::STANDARD
                .decode(body.content.as_bytes())
                .map(Bytes::from)
                .map_err(|e| invalid_field("content", format!("is not valid base64 ({e})")))?,
        };
        if content.len() > limits::FILE_BYTES {
            return Err(invalid_field(
                "content",
                format!("is larger than {} bytes", limits::FILE_BYTES),
            ));
        }
        let existing = self
            .state
            .store
            .meeting_files(self.project(), meeting.meeting_id)
            .await?;
        if existing.len() >= limits::FILES_PER_MEETING {
            return Err(Failure::new(
                ErrorCode::Conflict,
                format!(
                    "meeting \"{}\" has {} files already, the most it can have",
                    meeting.title,
                    existing.len()
                ),
            ));
        }
        let file_name = name.to_string();
        if existing.iter().any(|f| f.name == file_name) {
            return Err(Failure::new(
                ErrorCode::Conflict,
                format!(
                    "meeting \"{}\" already has a file named `{file_name}`",
                    meeting.title
                ),
            )
            .with_suggested_action(
                "Choose another name, or remove the old one with delete_meeting_file first.",
            ));
        }
        let mounts = self.mounts().await?;
        let mount = mounts
            .iter()
            .find(|m| m.name.as_str() == DEFAULT_MOUNT)
            .ok_or_else(|| {
                Failure::new(
                    ErrorCode::Conflict,
                    format!("this project has no `{DEFAULT_MOUNT}` mount to keep meeting files in"),
                )
            })?;
        if !mount.writable {
            return Err(Failure::new(
                ErrorCode::PermissionDenied,
                format!("mount `{DEFAULT_MOUNT}` is read-only, so no file can be attached"),
            ));
        }
        let rel_path = format!("meetings/{}/{file_name}", meeting.meeting_id);
        let rel = RelPath::parse(&rel_path).map_err(|e| invalid_field("name", e.to_string()))?;
        let path = mount.root.join(&rel);
        let row = MeetingFile {
            file_id: FileId::new_random(),
            meeting_id: meeting.meeting_id,
            mount: DEFAULT_MOUNT.to_owned(),
            rel_path: rel_path.clone(),
            name: file_name.clone(),
            size: content.len() as u64,
            etag: None,
            content_type: guess_content_type(&file_name),
            added_by: Some(self.user()),
            added_at: Utc::now().trunc_subsecs_micros(),
            missing: false,
        };
        let params = json!({ "meeting_id": meeting.meeting_id, "file_id": row.file_id, "rel_path": rel_path, "size": row.size });
        let changed = self
            .state
            .journal
            .change(
                self.record(
                    format!(
                        "{}/file:{}",
                        meeting_target(meeting.meeting_id),
                        row.file_id
                    ),
                    params,
                ),
                Change {
                    op: EventOp::AttachMeetingFile,
                    remove: vec![],
                    create: Some((path, content)),
                    rows: vec![(None, Some(RowImage::MeetingFile(row.clone())))],
                },
            )
            .await
            .map_err(|e| self.changed_meanwhile(e, "the meeting"))?;
        let file = self
            .state
            .store
            .meeting_file(self.project(), row.file_id)
            .await?
            .unwrap_or(row);
        let message = format!(
            "attached `{}` ({} bytes) to meeting \"{}\" at {DEFAULT_MOUNT}:/{}",
            file.name, file.size, meeting.title, file.rel_path
        );
        ok(
            MeetingFileWritten {
                file,
                event_id: changed.event.id,
            },
            message,
        )
    }

    async fn delete_meeting_file(&self, body: DeleteMeetingFileRequest) -> Reply {
        self.files_writable()?;
        let (meeting, file) = self.meeting_and_file(&body).await?;
        let mounts = self.mounts().await?;
        let mut remove = Vec::new();
        if let Some(path) = Self::file_path(&mounts, &file) {
            // Only a file surely gone is left out: a store that cannot
            // answer now must not leave the file without its row.
            match self.state.files.stat(&path).await {
                Ok(_) => remove.push(path),
                Err(SourceError::NotFound(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        let params = json!({ "meeting_id": meeting.meeting_id, "file_id": file.file_id, "rel_path": file.rel_path });
        let changed = self
            .state
            .journal
            .change(
                self.record(
                    format!(
                        "{}/file:{}",
                        meeting_target(meeting.meeting_id),
                        file.file_id
                    ),
                    params,
                ),
                Change {
                    op: EventOp::DeleteMeetingFile,
                    remove,
                    create: None,
                    rows: vec![(Some(RowImage::MeetingFile(file.clone())), None)],
                },
            )
            .await
            .map_err(|e| self.changed_meanwhile(e, "the meeting's files"))?;
        let message = format!(
            "removed `{}` from meeting \"{}\" (kept in the trash; an operator can revert event {})",
            file.name, meeting.title, changed.event.id
        );
        ok(
            MeetingFileWritten {
                file,
                event_id: changed.event.id,
            },
            message,
        )
    }

    async fn list_calendar(&self, body: ListCalendarRequest) -> Reply {
        let (from, to) = (utc(body.from), utc(body.to));
        check_window(from, to).map_err(|e| invalid_field("to", e.to_string()))?;
        const MOST: u32 = 500;
        let (items, truncated) = self
            .state
            .store
            .calendar(self.project(), from, to, MOST)
            .await?;
        let entries: Vec<CalendarEntry> = items
            .into_iter()
            .map(|item| match item {
                CalendarItem::Meeting(m) => CalendarEntry {
                    kind: CalendarKind::Meeting,
                    at: m.starts_at,
                    ends_at: Some(m.ends_at),
                    title: m.title,
                    meeting_id: Some(m.meeting_id),
                    milestone_seq: None,
                },
                CalendarItem::Milestone(m) => CalendarEntry {
                    kind: CalendarKind::MilestoneDue,
                    at: m
                        .due_date
                        .map_or(from, |d| d.and_time(chrono::NaiveTime::MIN).and_utc()),
                    ends_at: None,
                    title: m.title,
                    meeting_id: None,
                    milestone_seq: Some(m.seq),
                },
            })
            .collect();
        let message = format!(
            "{} calendar entr{} from {} to {}{}",
            entries.len(),
            if entries.len() == 1 { "y" } else { "ies" },
            from.to_rfc3339(),
            to.to_rfc3339(),
            if truncated {
                format!(" (only the first {MOST} meetings; ask for a shorter window)")
            } else {
                String::new()
            }
        );
        let total = entries.len() as u64;
        ok(
            Paged {
                items: entries,
                next_cursor: None,
                total_count: total,
            },
            message,
        )
    }

    // ---- reports ------------------------------------------------------------

    async fn list_reports(&self, body: ListReportsRequest) -> Reply {
        let limit = page_limit(body.limit)?;
        let cursor = cursor(body.cursor.as_deref())?;
        let page = self
            .state
            .store
            .reports_page(self.project(), body.status, limit, cursor.as_ref())
            .await?;
        let message = format!(
            "{} of {} report(s){}, newest first{}",
            page.items.len(),
            page.total,
            body.status
                .map(|s| format!(" in status {s}"))
                .unwrap_or_default(),
            if page.next.is_some() {
                "; more with next_cursor"
            } else {
                ""
            }
        );
        ok(paged(page), message)
    }

    async fn get_report(&self, body: ReportRequest) -> Reply {
        let details = self
            .state
            .store
            .report(self.project(), body.report_id)
            .await?
            .ok_or_else(|| report_not_found(body.report_id))?;
        let message = format!(
            "report \"{}\" is {} (version {}, {} status change(s))",
            details.report.title,
            details.report.status,
            details.report.version,
            details.history.len()
        );
        ok(details, message)
    }

    async fn update_report_status(&self, body: UpdateReportStatusRequest) -> Reply {
        let comment = optional_text("comment", body.comment, limits::COMMENT_CHARS)?;
        let details = self
            .state
            .store
            .report(self.project(), body.report_id)
            .await?
            .ok_or_else(|| report_not_found(body.report_id))?;
        let report = details.report;
        if let Some(asked) = body.if_version
            && asked != report.version
        {
            return Err(Failure::new(
                ErrorCode::Conflict,
                format!(
                    "report {} is at version {} (status {}), not {asked}",
                    report.report_id, report.version, report.status
                ),
            )
            .with_suggested_action(format!(
                "Read it again with get_report, then retry with if_version: {}.",
                report.version
            ))
            .with_data(json!({ "current_version": report.version, "status": report.status })));
        }
        let from = report.status;
        if !from.may_move_to(body.to) {
            let allowed: Vec<&str> = from.allowed_moves().iter().map(|s| s.as_str()).collect();
            let (message, action) = if allowed.is_empty() {
                (
                    format!(
                        "report \"{}\" is {from}, which is final: it cannot move to {}",
                        report.title, body.to
                    ),
                    "Tell the user an approved report cannot change; a new report is needed."
                        .to_owned(),
                )
            } else {
                (
                    format!(
                        "report \"{}\" is {from}; from {from} it can only move to {}",
                        report.title,
                        allowed.join(" or ")
                    ),
                    format!("Use to: {}.", allowed.join(" or to: ")),
                )
            };
            return Err(Failure::new(ErrorCode::Conflict, message)
                .with_suggested_action(action)
                .with_data(json!({ "status": from, "allowed": allowed })));
        }
        self.caller.allow(
            from.move_needs(body.to),
            &format!("move a report from {from} to {}", body.to),
        )?;
        if body.to == ReportStatus::Rejected
            && comment.as_deref().is_none_or(|c| c.trim().is_empty())
        {
            return Err(invalid_field("comment", "is required to reject a report")
                .with_suggested_action(
                    "Call again with a comment that tells the author what to change.",
                ));
        }
        let now = Utc::now().trunc_subsecs_micros();
        let next = acdm_core::business::Report {
            status: body.to,
            version: report.version + 1,
            updated_at: now,
            ..report.clone()
        };
        let transition = ReportTransition {
            report_id: report.report_id,
            seq: u32::try_from(details.history.len() + 1).unwrap_or(u32::MAX),
            from,
            to: body.to,
            user_id: Some(self.user()),
            comment,
            at: now,
        };
        let params = json!({ "report_id": report.report_id, "from": from, "to": body.to, "if_version": body.if_version });
        let changed = self
            .state
            .journal
            .change(
                self.record(format!("report:{}", report.report_id), params),
                Change {
                    op: EventOp::UpdateReportStatus,
                    remove: vec![],
                    create: None,
                    rows: vec![
                        (
                            Some(RowImage::Report(report.clone())),
                            Some(RowImage::Report(next.clone())),
                        ),
                        (None, Some(RowImage::ReportTransition(transition.clone()))),
                    ],
                },
            )
            .await
            .map_err(|e| self.changed_meanwhile(e, "the report"))?;
        let message = format!(
            "report \"{}\" moved from {from} to {} (version {})",
            next.title, next.status, next.version
        );
        ok(
            ReportStatusData {
                report: next,
                transition,
                event_id: changed.event.id,
            },
            message,
        )
    }

    // ---- approval previews --------------------------------------------------

    /// This call, with the approval it may run under (see
    /// [`Approvals::check`]); `preview` is computed only when needed.
    async fn approved<B: Serialize>(
        &self,
        op: BusinessOp,
        body: &B,
        approval: Option<ApprovalId>,
        preview: impl Future<Output = Result<serde_json::Value, Failure>>,
    ) -> Result<Ctx, Failure> {
        let approval = self
            .state
            .approvals
            .check(&self.caller, WriteOp::Business(op), body, approval, || {
                preview
            })
            .await?;
        Ok(Ctx {
            approval,
            ..self.clone()
        })
    }

    async fn preview_create_meeting(
        &self,
        body: &CreateMeetingRequest,
    ) -> Result<serde_json::Value, Failure> {
        Ok(json!({
            "summary": format!("create meeting \"{}\" from {} to {}", body.title, body.starts_at, body.ends_at),
            "meeting": body,
            "targets": [],
        }))
    }

    async fn preview_update_meeting(
        &self,
        body: &UpdateMeetingRequest,
    ) -> Result<serde_json::Value, Failure> {
        let meeting = self.meeting(body.meeting_id).await?;
        Ok(json!({
            "summary": format!("change meeting \"{}\" (version {})", meeting.title, meeting.version),
            "meeting": meeting,
            "changes": body,
            "targets": [target(meeting_target(meeting.meeting_id), Some(meeting.version))],
        }))
    }

    /// The meeting with its version and its files, as the dry run lists
    /// them.
    async fn preview_delete_meeting(
        &self,
        body: &DeleteMeetingRequest,
    ) -> Result<serde_json::Value, Failure> {
        let meeting = self.meeting(body.meeting_id).await?;
        let files = self.checked_files(meeting.meeting_id).await?;
        let mut targets = vec![target(
            meeting_target(meeting.meeting_id),
            Some(meeting.version),
        )];
        targets.extend(files.iter().map(|f| {
            target(
                format!("{}/file:{}", meeting_target(meeting.meeting_id), f.file_id),
                Some(json!({ "etag": f.etag, "size": f.size, "missing": f.missing })),
            )
        }));
        Ok(json!({
            "summary": format!("delete meeting \"{}\" and its {} file(s)", meeting.title, files.len()),
            "meeting": meeting,
            "files": files,
            "targets": targets,
        }))
    }

    async fn preview_attach(
        &self,
        body: &AttachMeetingFileRequest,
    ) -> Result<serde_json::Value, Failure> {
        let meeting = self.meeting(body.meeting_id).await?;
        Ok(json!({
            "summary": format!("attach \"{}\" to meeting \"{}\"", body.name, meeting.title),
            "meeting": meeting,
            "name": body.name,
            "targets": [target(meeting_target(meeting.meeting_id), Some(meeting.version))],
        }))
    }

    /// The meeting and its file the request names (`not_found` when the
    /// file is not that meeting's).
    async fn meeting_and_file(
        &self,
        body: &DeleteMeetingFileRequest,
    ) -> Result<(Meeting, MeetingFile), Failure> {
        let meeting = self.meeting(body.meeting_id).await?;
        let file = self
            .state
            .store
            .meeting_file(self.project(), body.file_id)
            .await?
            .filter(|f| f.meeting_id == meeting.meeting_id)
            .ok_or_else(|| {
                Failure::new(
                    ErrorCode::NotFound,
                    format!(
                        "file {} not found in meeting \"{}\"",
                        body.file_id, meeting.title
                    ),
                )
                .with_suggested_action(
                    "Use a file_id from get_meeting or list_meeting_files of this meeting.",
                )
            })?;
        Ok((meeting, file))
    }

    async fn preview_delete_file(
        &self,
        body: &DeleteMeetingFileRequest,
    ) -> Result<serde_json::Value, Failure> {
        let (meeting, file) = self.meeting_and_file(body).await?;
        Ok(json!({
            "summary": format!("remove \"{}\" from meeting \"{}\"", file.name, meeting.title),
            "meeting": meeting,
            "file": file,
            "targets": [target(
                format!("{}/file:{}", meeting_target(meeting.meeting_id), file.file_id),
                Some(json!({ "etag": file.etag, "size": file.size })),
            )],
        }))
    }

    /// The report as it stands and the move asked for (refused at once
    /// when the flow does not allow it: no person is asked for an
    /// impossible move).
    async fn preview_report_status(
        &self,
        body: &UpdateReportStatusRequest,
    ) -> Result<serde_json::Value, Failure> {
        let details = self
            .state
            .store
            .report(self.project(), body.report_id)
            .await?
            .ok_or_else(|| report_not_found(body.report_id))?;
        let report = details.report;
        if !report.status.may_move_to(body.to) {
            let allowed: Vec<&str> = report
                .status
                .allowed_moves()
                .iter()
                .map(|s| s.as_str())
                .collect();
            return Err(Failure::new(
                ErrorCode::Conflict,
                format!(
                    "report \"{}\" is {}; it cannot move to {}",
                    report.title, report.status, body.to
                ),
            )
            .with_data(json!({ "status": report.status, "allowed": allowed })));
        }
        // Who may make this move, and a rejection's comment: no person is
        // asked for a move the caller may not make.
        self.caller.allow(
            report.status.move_needs(body.to),
            &format!("move a report from {} to {}", report.status, body.to),
        )?;
        if body.to == ReportStatus::Rejected
            && body.comment.as_deref().is_none_or(|c| c.trim().is_empty())
        {
            return Err(invalid_field("comment", "is required to reject a report"));
        }
        Ok(json!({
            "summary": format!("move report \"{}\" from {} to {}", report.title, report.status, body.to),
            "report": report,
            "to": body.to,
            "comment": body.comment,
            "targets": [target(
                format!("report:{}", report.report_id),
                Some(json!({ "version": report.version, "status": report.status })),
            )],
        }))
    }

    // ---- members and meta -----------------------------------------------------

    async fn list_members(&self, _body: EmptyRequest) -> Reply {
        let members = self.state.store.members_info(self.project()).await?;
        let message = format!("{} member(s)", members.len());
        let total = members.len() as u64;
        ok(
            Paged {
                items: members,
                next_cursor: None,
                total_count: total,
            },
            message,
        )
    }

    async fn get_project_meta(&self, _body: EmptyRequest) -> Reply {
        let meta = self.state.store.project_meta(self.caller.project()).await?;
        let message = format!("project \"{}\" is {}", meta.name, meta.status);
        ok(meta, message)
    }
}

/// What one round of the attachment sweep found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    /// Files looked at.
    pub checked: usize,
    /// Files found gone (now shown as `missing: true`).
    pub missing: usize,
    /// Files found back after being missing.
    pub back: usize,
}

/// The periodic sweep for attachments removed behind the service's back
/// (spec §6.2): each round looks at the `batch` least recently checked
/// meeting files and records whether each is still there.
#[derive(Clone)]
pub struct AttachmentSweep {
    state: BusinessState,
    batch: u32,
}

impl AttachmentSweep {
    /// A sweep over `state`'s files, `batch` files per round.
    pub fn new(state: BusinessState, batch: u32) -> Self {
        Self { state, batch }
    }

    /// One round. A file the store cannot answer for now is left as it
    /// was (and looked at again in a later round).
    pub async fn poll_once(&self) -> Result<Swept, acdm_store::StoreError> {
        let store = &self.state.store;
        let mut swept = Swept::default();
        let mut mounts: std::collections::HashMap<acdm_core::domain::ProjectId, Vec<Mount>> =
            std::collections::HashMap::new();
        for (project, file) in store.files_to_check(self.batch).await? {
            let known = match mounts.entry(project) {
                std::collections::hash_map::Entry::Occupied(known) => known.into_mut(),
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(store.project_mounts(project).await?)
                }
            };
            let Some(path) = Ctx::file_path(known, &file) else {
                continue;
            };
            let missing = match self.state.files.stat(&path).await {
                Ok(_) => false,
                Err(SourceError::NotFound(_)) => true,
                Err(_) => continue,
            };
            swept.checked += 1;
            match (file.missing, missing) {
                (false, true) => swept.missing += 1,
                (true, false) => swept.back += 1,
                _ => {}
            }
            store
                .mark_file_checked(file.file_id, missing, Utc::now())
                .await?;
        }
        if swept.missing > 0 || swept.back > 0 {
            tracing::warn!(
                missing = swept.missing,
                back = swept.back,
                "meeting files found removed or restored outside the service"
            );
        }
        Ok(swept)
    }
}
