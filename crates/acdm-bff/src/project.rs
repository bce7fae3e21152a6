//! The project operations (spec §6.3): `GET /agent-tools/project/overview`,
//! `GET /agent-tools/project/sow` and
//! `POST /agent-tools/project/milestone/advance`.
//!
//! The overview is called while an engine builds a prompt: it reads only
//! the database, never an upstream. What it shows of the business tables
//! (meta, milestones, upcoming meetings, reports, recent agent writes)
//! changes only through journalled events, so it is kept per project with
//! the project's [`JournalStamp`] and reused while the stamp read (one query,
//! which also brings the members) finds it unchanged — exact across replicas, since the stamp is read
//! from the shared database. Members (roles change through provisioning,
//! not events), the acting user's role and the kill switch are read live.
//! A kept overview also expires when its first upcoming meeting starts,
//! and after [`OVERVIEW_MAX_AGE`] at most (a meeting entering the 14-day
//! horizon shows within that). The advance is a manager's write (§6.5), one journalled
//! event with the milestones' (and, after the last one, the project
//! meta's) before-images, so a revert restores both.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use acdm_core::approval::WriteOp;
use acdm_core::business::wire::EmptyRequest;
use acdm_core::business::{
    Milestone, MilestoneStatus, ProjectMeta, ProjectStatus, RowImage, limits,
};
use acdm_core::domain::{MemberRole, ProjectId, ProjectRef};
use acdm_core::events::{Actor, EventOp};
use acdm_core::project::{
    AdvanceData, AdvanceMilestoneRequest, MembersByRole, MilestoneCriteria, OverviewData,
    ProjectOp, RecentWrite, ReportsOverview, SowData, UpcomingMeeting,
};
use acdm_core::{ErrorCode, ToolResponse};
use acdm_journal::{Change, Journal, JournalError, Record};
use acdm_store::{JournalStamp, Store};
use axum::Router;
use axum::extract::{FromRequest, Request, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, any};
use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;
use serde_json::json;

use crate::approval::{Approvals, target};
use crate::envelope::{Envelope, Failure};
use crate::extract::{StrictJson, invalid_field, write_body};
use crate::pipeline::{Behind, Caller, PipelineState};
use crate::switch::KillSwitch;

/// The longest a kept overview is reused (see the module docs).
pub const OVERVIEW_MAX_AGE: TimeDelta = TimeDelta::seconds(60);
/// Projects whose overview is kept at most (the map is emptied when full).
const OVERVIEW_CACHE_PROJECTS: usize = 4096;

/// What the project operations need.
#[derive(Clone)]
pub struct ProjectState {
    store: Store,
    journal: Journal,
    switch: KillSwitch,
    kept: Arc<Mutex<HashMap<ProjectId, Arc<Snapshot>>>>,
    /// Which writes wait for a person's approval.
    approvals: Approvals,
}

impl ProjectState {
    /// The project operations over `journal` (and its store), reporting
    /// `switch` in the overview; `approvals` says which writes a person
    /// must approve first.
    pub fn new(journal: Journal, switch: KillSwitch, approvals: Approvals) -> Self {
        Self {
            store: journal.store().clone(),
            journal,
            switch,
            kept: Arc::default(),
            approvals,
        }
    }

    fn kept(
        &self,
        project: ProjectId,
        stamp: JournalStamp,
        now: DateTime<Utc>,
    ) -> Option<Arc<Snapshot>> {
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.get(&project).filter(|s| s.serves(stamp, now)).cloned()
    }

    fn keep(&self, project: ProjectId, snapshot: Arc<Snapshot>) {
        let mut kept = self
            .kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if kept.len() >= OVERVIEW_CACHE_PROJECTS && !kept.contains_key(&project) {
            kept.clear();
        }
        kept.insert(project, snapshot);
    }

    /// The overview of `project` as a user of `role` sees it, with its
    /// one-line summary: what `GET /agent-tools/project/overview` answers,
    /// for the other channels (a person's MCP client reads it as a
    /// resource). Reads only the database.
    pub async fn overview_for(
        &self,
        project: &ProjectRef,
        role: Option<MemberRole>,
    ) -> Result<(OverviewData, String), ToolResponse<serde_json::Value>> {
        self.overview(project, role)
            .await
            .map_err(|failure| failure.envelope().clone())
    }

    async fn overview(
        &self,
        project: &ProjectRef,
        role: Option<MemberRole>,
    ) -> Result<(OverviewData, String), Failure> {
        let store = &self.store;
        let now = store.now();
        // The stamp is read before the parts, so a snapshot is never older
        // than the stamp it is kept with.
        let (stamp, members) = store.journal_stamp_and_members(project.id).await?;
        let snapshot = match self.kept(project.id, stamp, now) {
            Some(snapshot) => snapshot,
            None => {
                let snapshot = Arc::new(self.read_snapshot(project, stamp, now).await?);
                self.keep(project.id, snapshot.clone());
                snapshot
            }
        };
        let members = MembersByRole::group(members);
        let current_milestone = snapshot
            .milestones
            .iter()
            .find(|m| m.status == MilestoneStatus::Current)
            .map(|m| m.seq);
        let message = overview_message(
            &snapshot.meta.name,
            snapshot.meta.status,
            &snapshot.milestones,
            &snapshot.reports,
        );
        let data = OverviewData {
            meta: snapshot.meta.clone(),
            current_milestone,
            milestones: snapshot.milestones.clone(),
            upcoming_meetings: snapshot.upcoming_meetings.clone(),
            reports: snapshot.reports.clone(),
            members,
            acting_role: role,
            recent_agent_writes: snapshot.recent_agent_writes.clone(),
            file_writes_enabled: self.switch.writes_enabled(),
        };
        Ok((data, message))
    }

    /// The overview's event-driven parts, read from the tables.
    async fn read_snapshot(
        &self,
        project_ref: &ProjectRef,
        stamp: JournalStamp,
        now: DateTime<Utc>,
    ) -> Result<Snapshot, Failure> {
        let store = &self.store;
        let project = project_ref.id;
        let meta = store.project_meta(project_ref).await?;
        let milestones = store.milestones(project).await?;
        let upcoming_meetings = store
            .upcoming_meetings(
                project,
                now,
                now + TimeDelta::days(limits::OVERVIEW_DAYS),
                limits::OVERVIEW_MEETINGS,
            )
            .await?;
        let mut reports = ReportsOverview::default();
        for (status, count) in store.report_counts(project).await? {
            use acdm_core::business::ReportStatus as S;
            *match status {
                S::Draft => &mut reports.draft,
                S::Submitted => &mut reports.submitted,
                S::Approved => &mut reports.approved,
                S::Rejected => &mut reports.rejected,
            } = count;
        }
        if reports.submitted > 0 {
            reports.awaiting_approval = store
                .reports_awaiting_approval(project, limits::OVERVIEW_AWAITING)
                .await?;
        }
        let recent_agent_writes = store
            .recent_agent_writes(project, limits::OVERVIEW_WRITES)
            .await?;
        Ok(Snapshot {
            stamp,
            expires: Snapshot::expiry(now, &upcoming_meetings),
            meta,
            milestones,
            upcoming_meetings,
            reports,
            recent_agent_writes,
        })
    }
}

/// The overview's parts that only journalled events change, as read for
/// one stamp.
#[derive(Debug)]
struct Snapshot {
    stamp: JournalStamp,
    /// When it stops being served whatever the stamp says.
    expires: DateTime<Utc>,
    meta: ProjectMeta,
    milestones: Vec<Milestone>,
    upcoming_meetings: Vec<UpcomingMeeting>,
    reports: ReportsOverview,
    recent_agent_writes: Vec<RecentWrite>,
}

impl Snapshot {
    /// Whether this snapshot is still the overview at `now` for `stamp`.
    fn serves(&self, stamp: JournalStamp, now: DateTime<Utc>) -> bool {
        self.stamp == stamp && now < self.expires
    }

    /// When a snapshot read at `read_at` must be read again even with no
    /// change: when its first upcoming meeting starts (it is no longer
    /// upcoming), or after [`OVERVIEW_MAX_AGE`].
    fn expiry(read_at: DateTime<Utc>, upcoming: &[UpcomingMeeting]) -> DateTime<Utc> {
        let cap = read_at + OVERVIEW_MAX_AGE;
        upcoming
            .iter()
            .map(|m| m.starts_at)
            .min()
            .map_or(cap, |start| start.min(cap))
    }
}

/// The project routes, one per operation at its own path, each call
/// through the agent pipeline first. Each path answers its own method;
/// another is a `method_not_allowed` naming the right one.
pub(crate) fn routes(state: ProjectState, pipeline: PipelineState) -> Router {
    ProjectOp::ALL
        .iter()
        .fold(Router::new(), |router, op| {
            router.route(&format!("/{}", op.path()), endpoint(*op))
        })
        .with_state(Behind::new(state, pipeline))
}

fn endpoint(op: ProjectOp) -> MethodRouter<Arc<Behind<ProjectState>>> {
    any(
        move |State(behind): State<Arc<Behind<ProjectState>>>, req: Request| async move {
            behind
                .run(req, |family, caller, req| {
                    let state = family.clone();
                    async move {
                        dispatch(state, op, caller, req)
                            .await
                            .unwrap_or_else(IntoResponse::into_response)
                    }
                })
                .await
        },
    )
}

type Reply = Result<Response, Failure>;

fn ok<T: Serialize>(data: T, message: impl Into<String>) -> Reply {
    Ok(Envelope(ToolResponse::ok(data, message)).into_response())
}

async fn dispatch(state: ProjectState, op: ProjectOp, caller: Caller, req: Request) -> Reply {
    if req.method().as_str() != op.method() {
        let mut refusal = Failure::new(
            ErrorCode::MethodNotAllowed,
            format!(
                "{} is called with {}, not {}",
                op.path(),
                op.method(),
                req.method()
            ),
        )
        .into_response();
        // RFC 9110 §15.5.6: a 405 lists the methods the resource allows.
        refusal.headers_mut().insert(
            axum::http::header::ALLOW,
            axum::http::HeaderValue::from_static(op.method()),
        );
        return Ok(refusal);
    }
    caller.allow(op.access(), &describe(op))?;
    let mut ctx = Ctx {
        actor: caller.actor(),
        state,
        caller,
        approval: None,
    };
    // Exhaustive: an operation without a handler does not compile.
    match op {
        ProjectOp::Overview => ctx.overview(no_body(req).await?).await,
        ProjectOp::Sow => ctx.sow(no_body(req).await?).await,
        ProjectOp::AdvanceMilestone => {
            let (body, approval) = write_body::<AdvanceMilestoneRequest>(req).await?;
            let preview = ctx.preview_advance(&body);
            let approved = ctx
                .state
                .approvals
                .check(&ctx.caller, WriteOp::Project(op), &body, approval, || {
                    preview
                })
                .await?;
            ctx.approval = approved;
            ctx.advance(body).await
        }
    }
}

/// The current milestone, when it is the one `if_current` names
/// (`conflict` otherwise, naming the current one).
fn current_milestone(milestones: &[Milestone], if_current: u32) -> Result<&Milestone, Failure> {
    let current = milestones
        .iter()
        .find(|m| m.status == MilestoneStatus::Current)
        .ok_or_else(|| no_current(milestones))?;
    if current.seq != if_current {
        return Err(Failure::new(
            ErrorCode::Conflict,
            format!(
                "milestone {} \"{}\" is current, not {if_current}",
                current.seq, current.title
            ),
        )
        .with_suggested_action(format!(
            "Check with the user that milestone {} is the one to close, then retry with if_current: {}.",
            current.seq, current.seq
        ))
        .with_data(json!({ "current": current.seq, "title": current.title })));
    }
    Ok(current)
}

/// How an operation reads in a refusal.
fn describe(op: ProjectOp) -> String {
    match op {
        ProjectOp::AdvanceMilestone => "advance the project's milestone".to_owned(),
        other => format!("call {}", other.label()),
    }
}

async fn body<T: serde::de::DeserializeOwned>(req: Request) -> Result<T, Failure> {
    StrictJson::<T>::from_request(req, &())
        .await
        .map(|StrictJson(v)| v)
}

/// A `GET` takes no input: no query string, and no body beyond an empty
/// one or `{}` (what a generic client may send).
async fn no_body(req: Request) -> Result<EmptyRequest, Failure> {
    if req.uri().query().is_some_and(|q| !q.is_empty()) {
        return Err(invalid_field(
            "query",
            "this operation takes no parameters; call it without a query string",
        ));
    }
    if req.method() == Method::GET {
        let bytes = axum::body::to_bytes(req.into_body(), 1024)
            .await
            .map_err(|_| invalid_field("body", "this operation takes no body"))?;
        let text = std::str::from_utf8(&bytes).unwrap_or("?").trim();
        return if text.is_empty() || text == "{}" {
            Ok(EmptyRequest {})
        } else {
            Err(invalid_field("body", "this operation takes no body"))
        };
    }
    body(req).await
}

/// One call: the state, the caller and the actor its writes record.
struct Ctx {
    state: ProjectState,
    actor: Actor,
    caller: Caller,
    /// The approval this call's write runs under, once checked.
    approval: Option<acdm_journal::Approved>,
}

impl Ctx {
    async fn overview(&self, _body: EmptyRequest) -> Reply {
        let (data, message) = self
            .state
            .overview(self.caller.project(), self.caller.role)
            .await?;
        ok(data, message)
    }

    async fn sow(&self, _body: EmptyRequest) -> Reply {
        let store = &self.state.store;
        let project = self.caller.project().id;
        let sow = store.sow(project).await?;
        let milestones = store.milestones(project).await?;
        let message = if sow.summary.is_empty() && sow.deliverables.is_empty() {
            "no statement of work has been written for this project yet".to_owned()
        } else {
            format!(
                "statement of work: {} deliverable(s) over {} milestone(s)",
                sow.deliverables.len(),
                milestones.len()
            )
        };
        ok(
            SowData {
                summary: sow.summary,
                deliverables: sow.deliverables,
                milestones: milestones.iter().map(MilestoneCriteria::from).collect(),
                updated_at: sow.updated_at,
            },
            message,
        )
    }

    /// The current milestone, the one that would follow, and the
    /// project's status (refused at once when `if_current` is not the
    /// current one: no person is asked for an impossible advance).
    async fn preview_advance(
        &self,
        body: &AdvanceMilestoneRequest,
    ) -> Result<serde_json::Value, Failure> {
        let store = &self.state.store;
        let milestones = store.milestones(self.caller.project().id).await?;
        let current = current_milestone(&milestones, body.if_current)?;
        let next = milestones
            .iter()
            .filter(|m| m.status == MilestoneStatus::Planned)
            .min_by_key(|m| m.seq);
        let meta = store.project_meta(self.caller.project()).await?;
        Ok(json!({
            "summary": match next {
                Some(next) => format!("close milestone {} \"{}\" and make {} \"{}\" current", current.seq, current.title, next.seq, next.title),
                None => format!("close milestone {} \"{}\", the last one: the project becomes completed", current.seq, current.title),
            },
            "current": current,
            "next": next,
            "project_status": meta.status,
            "targets": [
                target(format!("milestone:{}", current.seq), Some(json!({ "status": current.status, "closed_at": current.closed_at }))),
                target("project", Some(json!({ "status": meta.status }))),
            ],
        }))
    }

    async fn advance(&self, body: AdvanceMilestoneRequest) -> Reply {
        if body.if_current == 0 {
            return Err(invalid_field(
                "if_current",
                "must be the seq of the current milestone (1 or more)",
            ));
        }
        let store = &self.state.store;
        let project = self.caller.project().id;
        let milestones = store.milestones(project).await?;
        let current = current_milestone(&milestones, body.if_current)?;
        let now = store.now();
        let done = Milestone {
            status: MilestoneStatus::Done,
            closed_at: Some(now),
            closed_by: Some(self.caller.identity.user_id().clone()),
            ..current.clone()
        };
        // The next one is the first not yet done nor current: normally
        // `seq + 1`; none left means the project is complete.
        let next = milestones
            .iter()
            .filter(|m| m.status == MilestoneStatus::Planned)
            .min_by_key(|m| m.seq)
            .map(|m| Milestone {
                status: MilestoneStatus::Current,
                ..m.clone()
            });
        let mut rows = vec![(
            Some(RowImage::Milestone(current.clone())),
            Some(RowImage::Milestone(done.clone())),
        )];
        let meta = store.project_meta(self.caller.project()).await?;
        let mut project_status = meta.status;
        match &next {
            Some(next) => {
                let before = milestones.iter().find(|m| m.seq == next.seq).cloned();
                rows.push((
                    before.map(RowImage::Milestone),
                    Some(RowImage::Milestone(next.clone())),
                ));
            }
            None if meta.status != ProjectStatus::Completed => {
                project_status = ProjectStatus::Completed;
                let after = acdm_core::business::ProjectMeta {
                    status: ProjectStatus::Completed,
                    updated_at: now,
                    ..meta.clone()
                };
                rows.push((
                    Some(RowImage::ProjectMeta(meta)),
                    Some(RowImage::ProjectMeta(after)),
                ));
            }
            None => {}
        }
        let params = json!({
            "if_current": body.if_current,
            "next": next.as_ref().map(|m| m.seq),
            "completes_project": next.is_none(),
        });
        let changed = self
            .state
            .journal
            .change(
                Record {
                    actor: &self.actor,
                    project: self.caller.project(),
                    target: format!("milestone:{}", current.seq),
                    params,
                    approval: self.approval.clone(),
                },
                Change {
                    op: EventOp::AdvanceMilestone,
                    remove: vec![],
                    create: None,
                    rows,
                },
            )
            .await
            .map_err(changed_meanwhile)?;
        let message = match &next {
            Some(next) => format!(
                "milestone {} \"{}\" is done; milestone {} \"{}\" is now current",
                done.seq, done.title, next.seq, next.title
            ),
            None => format!(
                "milestone {} \"{}\" is done; it was the last one, so the project is now {project_status}",
                done.seq, done.title
            ),
        };
        ok(
            AdvanceData {
                done,
                current: next,
                project_status,
                event_id: changed.event.id,
            },
            message,
        )
    }
}

/// Why there is nothing to advance.
fn no_current(milestones: &[Milestone]) -> Failure {
    let (message, action) = if milestones.is_empty() {
        (
            "this project has no milestones".to_owned(),
            "Tell the user an operator must define the project's milestones first.",
        )
    } else if milestones.iter().all(|m| m.status == MilestoneStatus::Done) {
        (
            format!("all {} milestones are done already", milestones.len()),
            "Nothing is left to advance; tell the user the milestones are complete.",
        )
    } else {
        (
            "no milestone is current in this project".to_owned(),
            "Tell the user an operator must mark the milestone in progress as current.",
        )
    };
    Failure::new(ErrorCode::Conflict, message)
        .with_suggested_action(action)
        .with_data(json!({ "current": null }))
}

fn changed_meanwhile(error: JournalError) -> Failure {
    match error {
        JournalError::Conflict(message) => Failure::new(ErrorCode::Conflict, message)
            .with_suggested_action(
                "The milestones changed meanwhile: call overview again, then retry.",
            ),
        other => other.into(),
    }
}

fn overview_message(
    name: &str,
    status: ProjectStatus,
    milestones: &[Milestone],
    reports: &ReportsOverview,
) -> String {
    let current = milestones
        .iter()
        .find(|m| m.status == MilestoneStatus::Current)
        .map_or_else(
            || "no current milestone".to_owned(),
            |m| {
                format!(
                    "milestone {} of {} \"{}\" current",
                    m.seq,
                    milestones.len(),
                    m.title
                )
            },
        );
    format!(
        "project \"{name}\" is {status}; {current}; {} report(s) waiting for approval",
        reports.submitted
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meeting_at(starts_at: DateTime<Utc>) -> UpcomingMeeting {
        UpcomingMeeting {
            meeting_id: acdm_core::business::MeetingId::new_random(),
            title: "m".into(),
            starts_at,
            ends_at: starts_at + TimeDelta::hours(1),
            location: None,
            attendees: 0,
            version: 1,
        }
    }

    #[test]
    fn a_kept_overview_expires_when_its_first_meeting_starts_or_at_its_maximum_age() {
        let now: DateTime<Utc> = "2026-12-01T09:00:00Z".parse().unwrap();
        assert_eq!(Snapshot::expiry(now, &[]), now + OVERVIEW_MAX_AGE);
        let soon = now + TimeDelta::seconds(20);
        let later = now + TimeDelta::days(2);
        assert_eq!(
            Snapshot::expiry(now, &[meeting_at(later), meeting_at(soon)]),
            soon
        );
        assert_eq!(
            Snapshot::expiry(now, &[meeting_at(later)]),
            now + OVERVIEW_MAX_AGE
        );
    }
}
