//! The project operations (spec §6.3): `GET /agent-tools/project/overview`,
//! `GET /agent-tools/project/sow` and
//! `POST /agent-tools/project/milestone/advance`.
//!
//! The overview is called while an engine builds a prompt: it reads only
//! the database (a few indexed queries that select what it shows), never
//! an upstream. The advance is a manager's write (§6.5), one journalled
//! event with the milestones' (and, after the last one, the project
//! meta's) before-images, so a revert restores both.

use acdm_core::business::wire::EmptyRequest;
use acdm_core::business::{Milestone, MilestoneStatus, ProjectStatus, RowImage, limits};
use acdm_core::events::{Actor, EventOp};
use acdm_core::project::{
    AdvanceData, AdvanceMilestoneRequest, MembersByRole, MilestoneCriteria, OverviewData,
    ProjectOp, ReportsOverview, SowData,
};
use acdm_core::{ErrorCode, ToolResponse};
use acdm_journal::{Change, Journal, JournalError, Record};
use acdm_store::Store;
use axum::extract::{FromRequest, Request, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, any};
use axum::{Extension, Router};
use chrono::TimeDelta;
use serde::Serialize;
use serde_json::json;

use crate::envelope::{Envelope, Failure};
use crate::extract::{StrictJson, invalid_field};
use crate::pipeline::Caller;
use crate::switch::KillSwitch;

/// What the project operations need.
#[derive(Clone)]
pub struct ProjectState {
    store: Store,
    journal: Journal,
    switch: KillSwitch,
}

impl ProjectState {
    /// The project operations over `journal` (and its store), reporting
    /// `switch` in the overview.
    pub fn new(journal: Journal, switch: KillSwitch) -> Self {
        Self {
            store: journal.store().clone(),
            journal,
            switch,
        }
    }
}

/// The project routes, one per operation at its own path (the agent
/// pipeline is put in front by [`crate::agent_tools`]). Each path answers
/// its own method; another is a `validation_error` naming the right one.
pub(crate) fn routes(state: ProjectState) -> Router {
    ProjectOp::ALL
        .iter()
        .fold(Router::new(), |router, op| {
            router.route(&format!("/{}", op.path()), endpoint(*op))
        })
        .with_state(state)
}

fn endpoint(op: ProjectOp) -> MethodRouter<ProjectState> {
    any(
        move |State(state): State<ProjectState>,
              Extension(caller): Extension<Caller>,
              req: Request| async move {
            dispatch(state, op, caller, req)
                .await
                .unwrap_or_else(IntoResponse::into_response)
        },
    )
}

type Reply = Result<Response, Failure>;

fn ok<T: Serialize>(data: T, message: impl Into<String>) -> Reply {
    Ok(Envelope(ToolResponse::ok(data, message)).into_response())
}

async fn dispatch(state: ProjectState, op: ProjectOp, caller: Caller, req: Request) -> Reply {
    tracing::Span::current().record("op", op.label());
    if req.method().as_str() != op.method() {
        return Err(Failure::new(
            ErrorCode::MethodNotAllowed,
            format!(
                "{} is called with {}, not {}",
                op.path(),
                op.method(),
                req.method()
            ),
        ));
    }
    caller.allow(op.access(), &describe(op))?;
    let ctx = Ctx {
        actor: caller.actor(),
        state,
        caller,
    };
    // Exhaustive: an operation without a handler does not compile.
    match op {
        ProjectOp::Overview => ctx.overview(no_body(req).await?).await,
        ProjectOp::Sow => ctx.sow(no_body(req).await?).await,
        ProjectOp::AdvanceMilestone => ctx.advance(body(req).await?).await,
    }
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
}

impl Ctx {
    async fn overview(&self, _body: EmptyRequest) -> Reply {
        let store = &self.state.store;
        let project = self.caller.project.id;
        let now = store.now();
        let meta = store.project_meta(&self.caller.project).await?;
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
        let members = MembersByRole::group(store.members_info(project).await?);
        let recent_agent_writes = store
            .recent_agent_writes(project, limits::OVERVIEW_WRITES)
            .await?;
        let current_milestone = milestones
            .iter()
            .find(|m| m.status == MilestoneStatus::Current)
            .map(|m| m.seq);
        let message = overview_message(&meta.name, meta.status, &milestones, &reports);
        ok(
            OverviewData {
                meta,
                current_milestone,
                milestones,
                upcoming_meetings,
                reports,
                members,
                acting_role: self.caller.role,
                recent_agent_writes,
                file_writes_enabled: self.state.switch.writes_enabled(),
            },
            message,
        )
    }

    async fn sow(&self, _body: EmptyRequest) -> Reply {
        let store = &self.state.store;
        let project = self.caller.project.id;
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

    async fn advance(&self, body: AdvanceMilestoneRequest) -> Reply {
        if body.if_current == 0 {
            return Err(invalid_field(
                "if_current",
                "must be the seq of the current milestone (1 or more)",
            ));
        }
        let store = &self.state.store;
        let project = self.caller.project.id;
        let milestones = store.milestones(project).await?;
        let current = milestones
            .iter()
            .find(|m| m.status == MilestoneStatus::Current)
            .ok_or_else(|| no_current(&milestones))?;
        if current.seq != body.if_current {
            return Err(Failure::new(
                ErrorCode::Conflict,
                format!(
                    "milestone {} \"{}\" is current, not {}",
                    current.seq, current.title, body.if_current
                ),
            )
            .with_suggested_action(format!(
                "Check with the user that milestone {} is the one to close, then retry with if_current: {}.",
                current.seq, current.seq
            ))
            .with_data(json!({ "current": current.seq, "title": current.title })));
        }
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
        let meta = store.project_meta(&self.caller.project).await?;
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
                    project: &self.caller.project,
                    target: format!("milestone:{}", current.seq),
                    params,
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
