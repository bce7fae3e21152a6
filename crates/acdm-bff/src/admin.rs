//! The operator API at `/admin` (spec §9): provisioning, the scope-cache
//! reset, storage events (list, show, revert), the kill switch and the
//! business data a person edits (members' names, project meta, milestones,
//! reports, meetings: journalled, actor `direct`), behind
//! `Authorization: Bearer <ACDM_ADMIN_TOKEN>`.
//!
//! The binary mounts this router only when an admin token is configured;
//! without one every `/admin` path is 404. The service token never opens
//! it.

use std::sync::Arc;

use acdm_core::approval::{ApprovalId, ApprovalPolicy, ApprovalStatus, WriteOp};
use acdm_core::domain::MemberRole;
use acdm_core::events::{Actor, EventId, EventRef, EventStatus, StorageEvent};
use acdm_core::{
    AbsPath, AgentName, ErrorCode, MountName, ProjectName, ProjectSlug, ScopeResolver, SharedToken,
    ToolResponse, UserId,
};
use acdm_journal::Journal;
use acdm_store::{ApprovalFilter, EventFilter, NC_WRITES_SWITCH, Store};

use crate::approval::ApprovalView;
use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::envelope::{Envelope, Failure, Outcome, failure};
use crate::extract::{StrictJson, invalid_field, path_param};
use crate::operator::{
    AttachmentInput, MeetingInput, MetaInput, MilestoneInput, Operator, ReportInput, SowInput,
    Written,
};
use crate::switch::KillSwitch;
use acdm_core::business::{FileId, MeetingId, ReportId};

/// What the operator API needs.
#[derive(Clone)]
pub struct AdminState {
    store: Store,
    resolver: Arc<ScopeResolver>,
    files_base: AbsPath,
    token: SharedToken,
    journal: Journal,
    switch: KillSwitch,
    approvals: crate::approval::Approvals,
}

impl AdminState {
    /// The operator API over `journal`'s store, invalidating `resolver` on
    /// agent changes; default mounts go under `files_base`; callers must
    /// present `token`.
    pub fn new(
        journal: Journal,
        switch: KillSwitch,
        resolver: Arc<ScopeResolver>,
        files_base: AbsPath,
        token: SharedToken,
        approvals: crate::approval::Approvals,
    ) -> Self {
        Self {
            store: journal.store().clone(),
            resolver,
            files_base,
            token,
            journal,
            switch,
            approvals,
        }
    }
}

/// The `/admin` routes, with their bearer-token check: one route per
/// [`AdminOp`], so the router and the OpenAPI document list the same ones.
pub fn router(state: AdminState) -> Router {
    AdminOp::ALL
        .iter()
        .fold(Router::new(), |router, op| {
            router.route(op.path(), op.handler())
        })
        .method_not_allowed_fallback(method_not_allowed)
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_admin_token,
        ))
        .route_layer(axum::middleware::from_fn(crate::envelope::request_scope))
        .with_state(state)
}

/// Refuses requests without exactly one `Authorization: Bearer <token>`
/// carrying the admin token. The scheme name is case-insensitive (RFC 9110
/// §11.1). The refusal says what was wrong — no header, more than one, not
/// the `Bearer` form, or a token that is not the admin token — and words a
/// wrong token the same whatever it is, so nobody learns which other tokens
/// the service knows.
async fn require_admin_token(
    State(state): State<AdminState>,
    req: Request,
    next: Next,
) -> Response {
    let mut values = req.headers().get_all(header::AUTHORIZATION).iter();
    let problem = match (values.next(), values.next()) {
        (None, _) => "this request has no `Authorization` header",
        (Some(_), Some(_)) => "this request has more than one `Authorization` header; send one",
        (Some(value), None) => match bearer_token(value.as_bytes()) {
            None => "this request's `Authorization` header is not `Bearer <token>`",
            Some(token) if state.token.matches(token) => return next.run(req).await,
            Some(_) => "the bearer token this request sent is not the admin token",
        },
    };
    let mut response = failure(
        ErrorCode::Unauthorized,
        format!("the operator API needs `Authorization: Bearer <ACDM_ADMIN_TOKEN>`; {problem}"),
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"acdm-admin\""),
    );
    response
        .extensions_mut()
        .insert(Outcome("admin_auth_failed"));
    response
}

/// The token of `Bearer <token>` (scheme in any case, one or more spaces),
/// or `None` when the value has another form or no token.
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let scheme = value.get(..6)?;
    let rest = value.get(6..)?;
    if !scheme.eq_ignore_ascii_case(b"Bearer") || rest.first() != Some(&b' ') {
        return None;
    }
    let token = rest.trim_ascii_start();
    (!token.is_empty() && token.iter().all(u8::is_ascii_graphic)).then_some(token)
}

async fn method_not_allowed() -> Response {
    failure(
        ErrorCode::MethodNotAllowed,
        "this method is not allowed on this operator API path",
    )
}

type Reply = Result<Response, Failure>;

fn ok<T: Serialize>(data: T, message: impl Into<String>) -> Reply {
    Ok(Envelope(ToolResponse::ok(data, message)).into_response())
}

fn slug_param(raw: &str) -> Result<ProjectSlug, Failure> {
    path_param("slug", raw, ProjectSlug::parse)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateProject {
    slug: ProjectSlug,
    name: ProjectName,
}

async fn create_project(
    State(state): State<AdminState>,
    StrictJson(body): StrictJson<CreateProject>,
) -> Reply {
    let details = state
        .store
        .create_project(&body.slug, &body.name, &state.files_base)
        .await?;
    ok(details, format!("project `{}` created", body.slug))
}

async fn list_projects(State(state): State<AdminState>) -> Reply {
    let projects = state.store.list_projects().await?;
    let message = format!("{} project(s)", projects.len());
    ok(projects, message)
}

async fn show_project(State(state): State<AdminState>, Path(slug): Path<String>) -> Reply {
    let slug = slug_param(&slug)?;
    let details = state.store.project(&slug).await?;
    ok(details, format!("project `{slug}`"))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct SetMember {
    user_id: UserId,
    role: MemberRole,
}

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(rename = "Changed{T}")]
struct Changed<T> {
    #[serde(flatten)]
    record: T,
    change: acdm_store::Upsert,
}

async fn set_member(
    State(state): State<AdminState>,
    Path(slug): Path<String>,
    StrictJson(body): StrictJson<SetMember>,
) -> Reply {
    let slug = slug_param(&slug)?;
    let (member, change) = state
        .store
        .set_member(&slug, &body.user_id, body.role)
        .await?;
    // Roles are cached with each agent's scope: this server follows at
    // once, the others when the scope epoch (moved by the change) reaches
    // them.
    state.resolver.reset();
    let message = format!("`{}` is {} of `{slug}`", member.user_id, member.role);
    ok(
        Changed {
            record: member,
            change,
        },
        message,
    )
}

async fn remove_member(
    State(state): State<AdminState>,
    Path((slug, user_id)): Path<(String, String)>,
) -> Reply {
    let slug = slug_param(&slug)?;
    let user_id = path_param("user_id", &user_id, UserId::parse)?;
    state.store.remove_member(&slug, &user_id).await?;
    state.resolver.reset();
    let message = format!("`{user_id}` removed from `{slug}`");
    ok(Removed { user_id }, message)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct SetMount {
    name: MountName,
    #[serde(default)]
    root: Option<AbsPath>,
    #[serde(default = "default_writable")]
    writable: bool,
}

fn default_writable() -> bool {
    true
}

async fn set_mount(
    State(state): State<AdminState>,
    Path(slug): Path<String>,
    StrictJson(body): StrictJson<SetMount>,
) -> Reply {
    let slug = slug_param(&slug)?;
    let (mount, change) = state
        .store
        .set_mount(
            &slug,
            &body.name,
            body.root.as_ref(),
            body.writable,
            &state.files_base,
        )
        .await?;
    state.resolver.reset();
    let message = format!(
        "mount `{}` of `{slug}` is {} ({})",
        mount.name,
        mount.root,
        if mount.writable {
            "writable"
        } else {
            "read-only"
        }
    );
    ok(
        Changed {
            record: mount,
            change,
        },
        message,
    )
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct MountAgent {
    agent_name: AgentName,
    project: ProjectSlug,
}

async fn mount_agent(
    State(state): State<AdminState>,
    StrictJson(body): StrictJson<MountAgent>,
) -> Reply {
    let change = state
        .store
        .mount_agent(&body.agent_name, &body.project)
        .await?;
    // Other servers follow through the scope epoch; this one at once.
    state.resolver.invalidate(&body.agent_name);
    let message = match (&change.previous, change.unchanged) {
        (_, true) => format!("`{}` already manages `{}`", body.agent_name, body.project),
        (Some(previous), _) => format!(
            "`{}` moved from `{}` to `{}`",
            body.agent_name, previous.project, body.project
        ),
        (None, _) => format!("`{}` now manages `{}`", body.agent_name, body.project),
    };
    ok(change, message)
}

async fn list_agents(State(state): State<AdminState>) -> Reply {
    let agents = state.store.list_agents().await?;
    let message = format!("{} active agent mount(s)", agents.len());
    ok(agents, message)
}

async fn unmount_agent(State(state): State<AdminState>, Path(agent): Path<String>) -> Reply {
    let agent = path_param("agent_name", &agent, AgentName::parse)?;
    let ended = state.store.unmount_agent(&agent).await?;
    state.resolver.invalidate(&agent);
    let message = format!("`{agent}` no longer manages `{}`", ended.project);
    ok(ended, message)
}

async fn reset_scope_cache(State(state): State<AdminState>) -> Reply {
    let dropped = state.resolver.cached_len();
    state.resolver.reset();
    ok(
        CacheReset { dropped },
        format!("scope cache reset ({dropped} entries dropped on this server)"),
    )
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    /// Only this project's events (its slug).
    #[serde(default)]
    #[schemars(regex(pattern = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"))]
    project: Option<String>,
    /// Only this agent's events.
    #[serde(default)]
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"))]
    agent: Option<String>,
    /// Only events with this status.
    #[serde(default)]
    #[schemars(with = "Option<EventStatus>")]
    status: Option<String>,
    /// How many, newest first (default 50).
    #[serde(default)]
    #[schemars(range(min = 1, max = 500))]
    limit: Option<u32>,
    /// The page after this event (the previous page's `next_before`).
    #[serde(default)]
    #[schemars(with = "Option<EventId>")]
    before: Option<String>,
}

fn event_id_param(field: &str, raw: &str) -> Result<EventId, Failure> {
    raw.parse::<EventId>()
        .map_err(|_| invalid_field(field, "must be an event id (a UUID)"))
}

/// The event a path names by its id or a unique prefix of it.
async fn resolve_event_param(state: &AdminState, raw: &str) -> Result<EventId, Failure> {
    let reference = raw
        .parse::<EventRef>()
        .map_err(|e| invalid_field("id", e.to_string()))?;
    Ok(state.store.resolve_event(&reference).await?)
}

async fn list_events(
    State(state): State<AdminState>,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
) -> Reply {
    let Query(query) = query.map_err(|e| invalid_field("query", e.body_text()))?;
    let limit = query.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(invalid_field("limit", "must be between 1 and 500"));
    }
    let filter = EventFilter {
        project: query
            .project
            .as_deref()
            .map(|p| ProjectSlug::parse(p).map_err(|e| invalid_field("project", e.to_string())))
            .transpose()?,
        project_id: None,
        agent: query
            .agent
            .as_deref()
            .map(|a| AgentName::parse(a).map_err(|e| invalid_field("agent", e.to_string())))
            .transpose()?,
        status: query
            .status
            .as_deref()
            .map(|s| {
                s.parse::<EventStatus>()
                    .map_err(|e| invalid_field("status", e.to_string()))
            })
            .transpose()?,
        before: query
            .before
            .as_deref()
            .map(|b| event_id_param("before", b))
            .transpose()?,
        limit,
        ..EventFilter::default()
    };
    let events = state.store.list_events(&filter).await?;
    let next_before = (events.len() == limit as usize)
        .then(|| events.last().map(|e| e.id))
        .flatten();
    let message = format!("{} storage event(s), newest first", events.len());
    ok(
        EventsPage {
            events,
            next_before,
        },
        message,
    )
}

async fn show_event(State(state): State<AdminState>, Path(id): Path<String>) -> Reply {
    let id = resolve_event_param(&state, &id).await?;
    let event = state.store.event(id).await?;
    let message = format!(
        "event {id}: {} {} ({})",
        event.op, event.target, event.status
    );
    ok(event, message)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RevertBody {
    user_id: UserId,
}

async fn revert_event(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    StrictJson(body): StrictJson<RevertBody>,
) -> Reply {
    let id = resolve_event_param(&state, &id).await?;
    let revert = state
        .journal
        .revert(&Actor::direct(body.user_id.clone()), id, None)
        .await?;
    tracing::warn!(event = %id, revert = %revert.id, user = %body.user_id, "storage event reverted by an operator");
    let message = format!(
        "event {id} reverted by event {} ({})",
        revert.id, revert.status
    );
    ok(
        Reverted {
            revert,
            reverted: id,
        },
        message,
    )
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ApprovalsQuery {
    /// Only approvals in this status (`expired`: pending or approved ones
    /// past their expiry).
    #[serde(default)]
    #[schemars(with = "Option<ApprovalStatus>")]
    status: Option<String>,
    /// Only this project's approvals (its slug).
    #[serde(default)]
    #[schemars(regex(pattern = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"))]
    project: Option<String>,
    /// Only approvals of this operation (`nc.delete`, …).
    #[serde(default)]
    #[schemars(with = "Option<WriteOp>")]
    op: Option<String>,
    /// How many, newest first (default 50).
    #[serde(default)]
    #[schemars(range(min = 1, max = 500))]
    limit: Option<u32>,
    /// The page after this approval (the previous page's `next_before`).
    #[serde(default)]
    #[schemars(with = "Option<ApprovalId>")]
    before: Option<String>,
}

/// A page of approvals, newest first.
#[derive(Serialize, schemars::JsonSchema)]
struct ApprovalsPage {
    /// The approvals.
    approvals: Vec<ApprovalView>,
    /// Pass as `before` for the next page; `null` at the end.
    next_before: Option<ApprovalId>,
}

fn approval_id_param(field: &str, raw: &str) -> Result<ApprovalId, Failure> {
    raw.parse::<ApprovalId>()
        .map_err(|_| invalid_field(field, "must be an approval id (a UUID)"))
}

async fn list_approvals(
    State(state): State<AdminState>,
    query: Result<Query<ApprovalsQuery>, axum::extract::rejection::QueryRejection>,
) -> Reply {
    let Query(query) = query.map_err(|e| invalid_field("query", e.body_text()))?;
    let limit = query.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(invalid_field("limit", "must be between 1 and 500"));
    }
    let filter = ApprovalFilter {
        project: query
            .project
            .as_deref()
            .map(|p| ProjectSlug::parse(p).map_err(|e| invalid_field("project", e.to_string())))
            .transpose()?,
        status: query
            .status
            .as_deref()
            .map(|s| {
                s.parse::<ApprovalStatus>()
                    .map_err(|e| invalid_field("status", e.to_string()))
            })
            .transpose()?,
        op: query
            .op
            .as_deref()
            .map(|o| {
                o.parse::<WriteOp>()
                    .map_err(|e| invalid_field("op", e.to_string()))
            })
            .transpose()?,
        before: query
            .before
            .as_deref()
            .map(|b| approval_id_param("before", b))
            .transpose()?,
        limit,
    };
    let approvals = state.store.list_approvals(&filter).await?;
    let next_before = (approvals.len() == limit as usize)
        .then(|| approvals.last().map(|a| a.approval_id))
        .flatten();
    let mut views = Vec::with_capacity(approvals.len());
    for approval in approvals {
        views.push(state.approvals.view(approval).await?);
    }
    let message = format!("{} approval(s), newest first", views.len());
    ok(
        ApprovalsPage {
            approvals: views,
            next_before,
        },
        message,
    )
}

async fn show_approval(State(state): State<AdminState>, Path(id): Path<String>) -> Reply {
    let id = approval_id_param("id", &id)?;
    let approval = state.store.approval(id).await?;
    let view = state.approvals.view(approval).await?;
    let message = format!(
        "approval {id}: {} in project `{}` ({})",
        view.approval.request.op, view.approval.request.project, view.current_status
    );
    ok(view, message)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    /// The approver: an owner or admin of the project, not the user who
    /// asked.
    user_id: UserId,
    /// Why, for the record.
    #[serde(default)]
    #[schemars(length(max = 2000))]
    note: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RejectBody {
    /// Who rejects: an owner or admin of the project, not the user who
    /// asked.
    user_id: UserId,
    /// Why (the agent is told): some text that is not only blanks.
    #[schemars(length(min = 1, max = 2000), regex(pattern = r"\S"))]
    reason: String,
}

/// A decision's note or reason: one bounded piece of text.
fn decision_text(field: &str, text: &str) -> Result<(), Failure> {
    // Blank as the schema's `\S` reads it (ECMAScript's white space).
    let ecma_space = |c: char| (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}';
    if text.chars().all(ecma_space) {
        return Err(invalid_field(field, "must not be blank"));
    }
    if text.chars().count() > 2000 {
        return Err(invalid_field(field, "must be at most 2000 characters"));
    }
    Ok(())
}

async fn approve_approval(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    StrictJson(body): StrictJson<ApproveBody>,
) -> Reply {
    let id = approval_id_param("id", &id)?;
    // A blank note is no note.
    let note = body
        .note
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty() && *n != "\u{feff}");
    if let Some(note) = note {
        decision_text("note", note)?;
    }
    let decided = state
        .approvals
        .decide(id, true, &body.user_id, note)
        .await?;
    let view = state.approvals.view(decided).await?;
    ok(
        view,
        format!("approval {id} approved by `{}`", body.user_id),
    )
}

async fn reject_approval(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    StrictJson(body): StrictJson<RejectBody>,
) -> Reply {
    let id = approval_id_param("id", &id)?;
    decision_text("reason", &body.reason)?;
    let decided = state
        .approvals
        .decide(id, false, &body.user_id, Some(&body.reason))
        .await?;
    let view = state.approvals.view(decided).await?;
    ok(
        view,
        format!("approval {id} rejected by `{}`", body.user_id),
    )
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct SetPolicy {
    /// The write operations that need approval in this project (replaces
    /// the deployment's list for it; empty: none).
    ops: Vec<WriteOp>,
}

async fn show_approval_policy(State(state): State<AdminState>, Path(slug): Path<String>) -> Reply {
    let slug = slug_param(&slug)?;
    let view = state.approvals.policy(&slug).await?;
    let message = format!(
        "project `{slug}`: approval needed for [{}] ({:?})",
        view.ops.to_list(),
        view.source
    );
    ok(view, message)
}

async fn set_approval_policy(
    State(state): State<AdminState>,
    Path(slug): Path<String>,
    StrictJson(body): StrictJson<SetPolicy>,
) -> Reply {
    let slug = slug_param(&slug)?;
    let policy = ApprovalPolicy::of(body.ops);
    let view = state
        .approvals
        .set_policy(&slug, Some(&policy), Some("operator API"))
        .await?;
    ok(
        view,
        format!("project `{slug}` has its own approval policy"),
    )
}

async fn clear_approval_policy(State(state): State<AdminState>, Path(slug): Path<String>) -> Reply {
    let slug = slug_param(&slug)?;
    let view = state
        .approvals
        .set_policy(&slug, None, Some("operator API"))
        .await?;
    ok(
        view,
        format!("project `{slug}` follows the deployment's approval policy"),
    )
}

async fn show_kill_switch(State(state): State<AdminState>) -> Reply {
    let row = state.switch.refresh(&state.store).await?;
    let report = state.switch.report(row);
    let message = if report.nc_writes_enabled {
        "agents' file writes are enabled".to_owned()
    } else {
        format!(
            "agents' file writes are OFF (decided by the {})",
            report.decided_by
        )
    };
    ok(report, message)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct SetKillSwitch {
    nc_writes_enabled: bool,
    #[serde(default)]
    reason: Option<String>,
    /// Who, as in a revert's body; `changed_by` is its deprecated name.
    #[serde(default, alias = "changed_by")]
    user_id: Option<UserId>,
}

async fn set_kill_switch(
    State(state): State<AdminState>,
    StrictJson(body): StrictJson<SetKillSwitch>,
) -> Reply {
    if body.nc_writes_enabled && !state.switch.environment() {
        return Err(Failure::new(
            ErrorCode::Conflict,
            "ACDM_AI_NC_WRITES_ENABLED=false in this deployment's environment; writes can only be enabled there",
        ));
    }
    if body
        .reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > 500)
    {
        return Err(invalid_field("reason", "must be at most 500 characters"));
    }
    let user_id = body.user_id.as_ref().map(UserId::as_str);
    state
        .store
        .set_switch(
            NC_WRITES_SWITCH,
            body.nc_writes_enabled,
            user_id,
            body.reason.as_deref(),
        )
        .await?;
    let row = state.switch.refresh(&state.store).await?;
    tracing::warn!(
        nc_writes_enabled = body.nc_writes_enabled,
        user_id,
        reason = body.reason.as_deref(),
        "kill switch set by an operator"
    );
    let report = state.switch.report(row);
    let message = format!(
        "agents' file writes are now {} on every server (others follow within seconds)",
        if report.nc_writes_enabled {
            "enabled"
        } else {
            "OFF"
        }
    );
    ok(report, message)
}

// ---- business data, as a person -------------------------------------------

/// A business body: the acting operator's `user_id` (recorded as a direct
/// actor, as in a revert's body) beside the object's own fields, which
/// are parsed strictly into `T` (an unknown field is named).
fn acting<T: DeserializeOwned>(
    mut body: serde_json::Map<String, serde_json::Value>,
) -> Result<(UserId, T), Failure> {
    let user = body.remove("user_id").ok_or_else(|| {
        invalid_field(
            "user_id",
            "is required: the operator making the change (recorded as the event's direct actor)",
        )
    })?;
    let user: UserId =
        serde_json::from_value(user).map_err(|e| invalid_field("user_id", e.to_string()))?;
    let value = serde_path_to_error::deserialize(serde_json::Value::Object(body))
        .map_err(|e| invalid_field(&e.path().to_string(), e.inner().to_string()))?;
    Ok((user, value))
}

type Body = StrictJson<serde_json::Map<String, serde_json::Value>>;

/// The operator `user` acting on the project `slug`.
async fn operator<'a>(
    state: &'a AdminState,
    slug: &str,
    user: UserId,
) -> Result<Operator<'a>, Failure> {
    let slug = slug_param(slug)?;
    let project = state.store.project(&slug).await?.project.to_ref();
    Ok(Operator::new(&state.journal, project, user))
}

fn written<T: Serialize>(written: Written<T>, what: String) -> Reply {
    let message = match written.event_id {
        Some(event) => format!("{what} (event {event}, revertible)"),
        None => format!("{what}: unchanged, nothing recorded"),
    };
    ok(written, message)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct MemberName {
    /// The member's name for people (empty or absent: none); one line.
    #[serde(default)]
    #[schemars(
        length(max = acdm_core::business::limits::DISPLAY_NAME_CHARS),
        regex(pattern = acdm_core::business::OPTIONAL_LINE_PATTERN)
    )]
    display_name: Option<String>,
}

async fn set_member_name(
    State(state): State<AdminState>,
    Path((slug, member)): Path<(String, String)>,
    StrictJson(body): Body,
) -> Reply {
    let member = path_param("user_id", &member, UserId::parse)?;
    let (user, input): (_, MemberName) = acting(body)?;
    let operator = operator(&state, &slug, user).await?;
    let result = operator
        .set_member_name(&member, input.display_name)
        .await?;
    let what = match &result.record.display_name {
        Some(name) => format!("`{member}` is called \"{name}\""),
        None => format!("`{member}` has no display name"),
    };
    written(result, what)
}

async fn set_meta(
    State(state): State<AdminState>,
    Path(slug): Path<String>,
    StrictJson(body): Body,
) -> Reply {
    let (user, input): (_, MetaInput) = acting(body)?;
    let operator = operator(&state, &slug, user).await?;
    let result = operator.set_meta(&input).await?;
    let what = format!(
        "project \"{}\" is {}",
        result.record.name, result.record.status
    );
    written(result, what)
}

async fn set_sow(
    State(state): State<AdminState>,
    Path(slug): Path<String>,
    StrictJson(body): Body,
) -> Reply {
    let (user, input): (_, SowInput) = acting(body)?;
    let operator = operator(&state, &slug, user).await?;
    let result = operator.set_sow(&input).await?;
    let what = format!(
        "the statement of work has {} deliverable(s)",
        result.record.deliverables.len()
    );
    written(result, what)
}

async fn set_milestone(
    State(state): State<AdminState>,
    Path((slug, seq)): Path<(String, String)>,
    StrictJson(body): Body,
) -> Reply {
    let seq = path_param("seq", &seq, |s| {
        s.parse::<u32>()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or("must be a whole number from 1")
    })?;
    let (user, input): (_, MilestoneInput) = acting(body)?;
    let operator = operator(&state, &slug, user).await?;
    let result = operator.set_milestone(seq, &input).await?;
    let what = format!(
        "milestone {seq} \"{}\" is {}",
        result.record.title, result.record.status
    );
    written(result, what)
}

async fn create_report(
    State(state): State<AdminState>,
    Path(slug): Path<String>,
    StrictJson(body): Body,
) -> Reply {
    let (user, input): (_, ReportInput) = acting(body)?;
    let operator = operator(&state, &slug, user).await?;
    let result = operator
        .create_report(ReportId::new_random(), &input)
        .await?;
    let what = format!(
        "report \"{}\" created ({})",
        result.record.title, result.record.status
    );
    written(result, what)
}

/// Splits an optional `if_version` off a body.
fn if_version(
    body: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<Option<i64>, Failure> {
    body.remove("if_version")
        .filter(|v| !v.is_null())
        .map(|v| {
            v.as_i64()
                .filter(|n| *n >= 1)
                .ok_or_else(|| invalid_field("if_version", "must be a version number (1 or more)"))
        })
        .transpose()
}

async fn update_report(
    State(state): State<AdminState>,
    Path((slug, id)): Path<(String, String)>,
    StrictJson(mut body): Body,
) -> Reply {
    let id = path_param("id", &id, |s| s.parse::<ReportId>())?;
    let if_version = if_version(&mut body)?;
    let (user, input): (_, ReportInput) = acting(body)?;
    let operator = operator(&state, &slug, user).await?;
    let result = operator.update_report(id, &input, if_version).await?;
    let what = format!(
        "report \"{}\" is {} (version {})",
        result.record.title, result.record.status, result.record.version
    );
    written(result, what)
}

async fn create_meeting(
    State(state): State<AdminState>,
    Path(slug): Path<String>,
    StrictJson(body): Body,
) -> Reply {
    let (user, input): (_, MeetingInput) = acting(body)?;
    let operator = operator(&state, &slug, user).await?;
    let result = operator
        .create_meeting(MeetingId::new_random(), &input)
        .await?;
    let what = format!(
        "meeting \"{}\" created for {}",
        result.record.title,
        result.record.starts_at.to_rfc3339()
    );
    written(result, what)
}

async fn update_meeting(
    State(state): State<AdminState>,
    Path((slug, id)): Path<(String, String)>,
    StrictJson(mut body): Body,
) -> Reply {
    let id = path_param("id", &id, |s| s.parse::<MeetingId>())?;
    let if_version = if_version(&mut body)?;
    let (user, input): (_, MeetingInput) = acting(body)?;
    let operator = operator(&state, &slug, user).await?;
    let result = operator.update_meeting(id, &input, if_version).await?;
    let what = format!(
        "meeting \"{}\" is at version {}",
        result.record.title, result.record.version
    );
    written(result, what)
}

async fn attach_meeting_file(
    State(state): State<AdminState>,
    Path((slug, id)): Path<(String, String)>,
    StrictJson(body): Body,
) -> Reply {
    let id = path_param("id", &id, |s| s.parse::<MeetingId>())?;
    let (user, input): (_, AttachmentInput) = acting(body)?;
    let operator = operator(&state, &slug, user).await?;
    let result = operator.attach(id, FileId::new_random(), &input).await?;
    let what = format!(
        "`{}` attached to meeting {id} at {}:/{}",
        result.record.name, result.record.mount, result.record.rel_path
    );
    written(result, what)
}

// ---- the operations, as one table ------------------------------------------

/// A member removed from a project.
#[derive(Serialize, schemars::JsonSchema)]
struct Removed {
    /// Who.
    user_id: UserId,
}

/// What a scope-cache reset dropped.
#[derive(Serialize, schemars::JsonSchema)]
struct CacheReset {
    /// Entries dropped on the server that answered (the others drop theirs
    /// when they next see the scope epoch move).
    dropped: usize,
}

/// A page of storage events, newest first.
#[derive(Serialize, schemars::JsonSchema)]
struct EventsPage {
    /// The events.
    events: Vec<StorageEvent>,
    /// Pass as `before` for the next page; `null` at the end.
    next_before: Option<EventId>,
}

/// A revert and the event it undid.
#[derive(Serialize, schemars::JsonSchema)]
struct Reverted {
    /// The revert, itself an event.
    revert: StorageEvent,
    /// The event it undid.
    reverted: EventId,
}

/// The body of a business edit: the acting operator beside the object's
/// own fields (parsed apart by [`acting`]; this type only describes it).
#[derive(schemars::JsonSchema)]
#[schemars(rename = "Acting{T}", deny_unknown_fields)]
#[expect(dead_code, reason = "a schema of what `acting` parses, never built")]
struct Acting<T> {
    /// The operator making the change (recorded as the event's direct actor).
    user_id: UserId,
    #[serde(flatten)]
    input: T,
}

/// The body of an edit of a versioned object: as [`Acting`], with the
/// version the operator read.
#[derive(schemars::JsonSchema)]
#[expect(
    dead_code,
    reason = "a schema of what `acting` and `if_version` parse, never built"
)]
struct ActingVersioned<T> {
    /// The operator making the change (recorded as the event's direct actor).
    user_id: UserId,
    /// The version the operator read; a stale one is a `conflict`.
    #[serde(default)]
    #[schemars(range(min = 1))]
    if_version: Option<i64>,
    #[serde(flatten)]
    input: T,
}

macro_rules! admin_ops {
    ($( #[doc = $summary:literal] $variant:ident = ($method:literal, $path:literal, $handler:expr) ),* $(,)?) => {
        /// The operations of the operator API: each one's method, path and
        /// handler in one table, from which both the router and the
        /// OpenAPI document are built (so neither can list a route the
        /// other lacks).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum AdminOp { $( #[doc = $summary] $variant, )* }

        impl AdminOp {
            /// Every operation, in documentation order.
            pub const ALL: &'static [AdminOp] = &[ $( AdminOp::$variant, )* ];

            /// The HTTP method (`GET`, `POST`, `PUT`, `DELETE`).
            pub const fn method(self) -> &'static str {
                match self { $( AdminOp::$variant => $method, )* }
            }

            /// The path as the router matches it (`/admin/projects/{slug}`).
            pub const fn path(self) -> &'static str {
                match self { $( AdminOp::$variant => $path, )* }
            }

            /// What it does, in a line (its documentation).
            pub fn summary(self) -> &'static str {
                match self { $( AdminOp::$variant => $summary.trim(), )* }
            }

            fn handler(self) -> axum::routing::MethodRouter<AdminState> {
                match self { $( AdminOp::$variant => $handler, )* }
            }
        }
    };
}

admin_ops! {
    /// Create a project (and its default mount).
    CreateProject = ("POST", "/admin/projects", post(create_project)),
    /// Every project.
    ListProjects = ("GET", "/admin/projects", get(list_projects)),
    /// A project with its members, mounts and agents.
    ShowProject = ("GET", "/admin/projects/{slug}", get(show_project)),
    /// Add a member or change a member's role.
    SetMember = ("POST", "/admin/projects/{slug}/members", post(set_member)),
    /// Remove a member.
    RemoveMember = ("DELETE", "/admin/projects/{slug}/members/{user_id}", delete(remove_member)),
    /// Set a member's display name (journalled).
    SetMemberName = ("PUT", "/admin/projects/{slug}/members/{user_id}/name", put(set_member_name)),
    /// Add or change a mount.
    SetMount = ("POST", "/admin/projects/{slug}/mounts", post(set_mount)),
    /// Set the project's meta (journalled).
    SetMeta = ("PUT", "/admin/projects/{slug}/meta", put(set_meta)),
    /// Write the statement of work (journalled).
    SetSow = ("PUT", "/admin/projects/{slug}/sow", put(set_sow)),
    /// Create or edit a milestone (journalled).
    SetMilestone = ("PUT", "/admin/projects/{slug}/milestones/{seq}", put(set_milestone)),
    /// Create a report (journalled).
    CreateReport = ("POST", "/admin/projects/{slug}/reports", post(create_report)),
    /// Edit a report (journalled).
    UpdateReport = ("PUT", "/admin/projects/{slug}/reports/{id}", put(update_report)),
    /// Create a meeting (journalled).
    CreateMeeting = ("POST", "/admin/projects/{slug}/meetings", post(create_meeting)),
    /// Edit a meeting (journalled).
    UpdateMeeting = ("PUT", "/admin/projects/{slug}/meetings/{id}", put(update_meeting)),
    /// Attach a file to a meeting (journalled).
    AttachMeetingFile = ("POST", "/admin/projects/{slug}/meetings/{id}/files", post(attach_meeting_file)),
    /// Mount an agent as a project's manager.
    MountAgent = ("POST", "/admin/agents", post(mount_agent)),
    /// Every active agent mount.
    ListAgents = ("GET", "/admin/agents", get(list_agents)),
    /// Unmount an agent.
    UnmountAgent = ("DELETE", "/admin/agents/{agent_name}", delete(unmount_agent)),
    /// Drop the scope resolver's cache on this server.
    ResetScopeCache = ("POST", "/admin/scope-cache/reset", post(reset_scope_cache)),
    /// Storage events, newest first.
    ListEvents = ("GET", "/admin/events", get(list_events)),
    /// One storage event.
    ShowEvent = ("GET", "/admin/events/{id}", get(show_event)),
    /// Revert a storage event (itself an event).
    RevertEvent = ("POST", "/admin/events/{id}/revert", post(revert_event)),
    /// The kill switch for agents' file writes.
    ShowKillSwitch = ("GET", "/admin/kill-switch", get(show_kill_switch)),
    /// Flip the kill switch, with a reason.
    SetKillSwitch = ("PUT", "/admin/kill-switch", put(set_kill_switch)),
    /// Approval requests, newest first.
    ListApprovals = ("GET", "/admin/approvals", get(list_approvals)),
    /// One approval request.
    ShowApproval = ("GET", "/admin/approvals/{id}", get(show_approval)),
    /// Approve a pending request (an owner or admin of its project, not its requester).
    ApproveApproval = ("POST", "/admin/approvals/{id}/approve", post(approve_approval)),
    /// Reject a pending request, with the reason.
    RejectApproval = ("POST", "/admin/approvals/{id}/reject", post(reject_approval)),
    /// The write operations that need approval in a project, and where that list comes from.
    ShowApprovalPolicy = ("GET", "/admin/projects/{slug}/approval-policy", get(show_approval_policy)),
    /// Give a project its own list of operations that need approval.
    SetApprovalPolicy = ("PUT", "/admin/projects/{slug}/approval-policy", put(set_approval_policy)),
    /// Drop a project's own list: the deployment's applies again.
    ClearApprovalPolicy = ("DELETE", "/admin/projects/{slug}/approval-policy", delete(clear_approval_policy)),
}

/// A path parameter of the operator API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathParam {
    /// `{slug}`: a project's slug.
    Slug,
    /// `{user_id}`: a member.
    UserId,
    /// `{agent_name}`: an agent.
    AgentName,
    /// `{seq}`: a milestone's number.
    Seq,
    /// `{id}` of a report or a meeting: a UUID.
    ObjectId,
    /// `{id}` of an event: its UUID or a unique prefix of it.
    EventRef,
}

impl PathParam {
    /// The name in the path template.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Slug => "slug",
            Self::UserId => "user_id",
            Self::AgentName => "agent_name",
            Self::Seq => "seq",
            Self::ObjectId | Self::EventRef => "id",
        }
    }

    /// Its schema, from the type it is parsed into.
    pub fn schema(self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        match self {
            Self::Slug => generator.subschema_for::<ProjectSlug>(),
            Self::UserId => generator.subschema_for::<UserId>(),
            Self::AgentName => generator.subschema_for::<AgentName>(),
            Self::Seq => {
                schemars::json_schema!({ "type": "integer", "minimum": 1, "maximum": u32::MAX })
            }
            Self::ObjectId => schemars::json_schema!({ "type": "string", "format": "uuid" }),
            Self::EventRef => schemars::json_schema!({
                "type": "string",
                "description": "the event's id, or a unique prefix of at least 4 hex digits",
                "pattern": "^[0-9a-fA-F]{4}[0-9a-fA-F-]{0,32}$"
            }),
        }
    }
}

impl AdminOp {
    /// `admin_<name>`: the OpenAPI operation id.
    pub fn operation_id(self) -> String {
        let name = format!("{self:?}");
        let mut id = String::from("admin");
        for ch in name.chars() {
            if ch.is_ascii_uppercase() {
                id.push('_');
            }
            id.push(ch.to_ascii_lowercase());
        }
        id
    }

    /// The path parameters, in path order.
    pub fn path_params(self) -> Vec<PathParam> {
        let event = matches!(self, Self::ShowEvent | Self::RevertEvent);
        self.path()
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| match name {
                "slug" => PathParam::Slug,
                "user_id" => PathParam::UserId,
                "agent_name" => PathParam::AgentName,
                "seq" => PathParam::Seq,
                _ if event => PathParam::EventRef,
                _ => PathParam::ObjectId,
            })
            .collect()
    }

    /// The JSON Schema of the request body, from the type the handler
    /// parses; `None` for operations without a body.
    pub fn request_subschema(
        self,
        generator: &mut schemars::SchemaGenerator,
    ) -> Option<schemars::Schema> {
        Some(match self {
            Self::CreateProject => generator.subschema_for::<CreateProject>(),
            Self::SetMember => generator.subschema_for::<SetMember>(),
            Self::SetMemberName => generator.subschema_for::<Acting<MemberName>>(),
            Self::SetMount => generator.subschema_for::<SetMount>(),
            Self::SetMeta => generator.subschema_for::<Acting<MetaInput>>(),
            Self::SetSow => generator.subschema_for::<Acting<SowInput>>(),
            Self::SetMilestone => generator.subschema_for::<Acting<MilestoneInput>>(),
            Self::CreateReport => generator.subschema_for::<Acting<ReportInput>>(),
            Self::UpdateReport => generator.subschema_for::<ActingVersioned<ReportInput>>(),
            Self::CreateMeeting => generator.subschema_for::<Acting<MeetingInput>>(),
            Self::UpdateMeeting => generator.subschema_for::<ActingVersioned<MeetingInput>>(),
            Self::AttachMeetingFile => generator.subschema_for::<Acting<AttachmentInput>>(),
            Self::MountAgent => generator.subschema_for::<MountAgent>(),
            Self::RevertEvent => generator.subschema_for::<RevertBody>(),
            Self::SetKillSwitch => generator.subschema_for::<SetKillSwitch>(),
            Self::ApproveApproval => generator.subschema_for::<ApproveBody>(),
            Self::RejectApproval => generator.subschema_for::<RejectBody>(),
            Self::SetApprovalPolicy => generator.subschema_for::<SetPolicy>(),
            Self::ListApprovals
            | Self::ShowApproval
            | Self::ShowApprovalPolicy
            | Self::ClearApprovalPolicy
            | Self::ListProjects
            | Self::ShowProject
            | Self::RemoveMember
            | Self::ListAgents
            | Self::UnmountAgent
            | Self::ResetScopeCache
            | Self::ListEvents
            | Self::ShowEvent
            | Self::ShowKillSwitch => return None,
        })
    }

    /// The schema of the query string's parameters (an object whose
    /// properties are the parameters), for the operations that take one.
    pub fn query_schema(
        self,
        generator: &mut schemars::SchemaGenerator,
    ) -> Option<schemars::Schema> {
        match self {
            Self::ListEvents => Some(generator.root_schema_for::<EventsQuery>()),
            Self::ListApprovals => Some(generator.root_schema_for::<ApprovalsQuery>()),
            _ => None,
        }
    }

    /// The JSON Schema of the `data` of its success.
    pub fn data_subschema(self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        use acdm_core::business::{
            Meeting, MeetingFile, MemberInfo, Milestone, ProjectMeta, Report, StatementOfWork,
        };
        use acdm_core::domain::{AgentMount, Member, Mount, Project, ProjectDetails};
        match self {
            Self::CreateProject | Self::ShowProject => generator.subschema_for::<ProjectDetails>(),
            Self::ListProjects => generator.subschema_for::<Vec<Project>>(),
            Self::SetMember => generator.subschema_for::<Changed<Member>>(),
            Self::RemoveMember => generator.subschema_for::<Removed>(),
            Self::SetMemberName => generator.subschema_for::<Written<MemberInfo>>(),
            Self::SetMount => generator.subschema_for::<Changed<Mount>>(),
            Self::SetMeta => generator.subschema_for::<Written<ProjectMeta>>(),
            Self::SetSow => generator.subschema_for::<Written<StatementOfWork>>(),
            Self::SetMilestone => generator.subschema_for::<Written<Milestone>>(),
            Self::CreateReport | Self::UpdateReport => generator.subschema_for::<Written<Report>>(),
            Self::CreateMeeting | Self::UpdateMeeting => {
                generator.subschema_for::<Written<Meeting>>()
            }
            Self::AttachMeetingFile => generator.subschema_for::<Written<MeetingFile>>(),
            Self::MountAgent => generator.subschema_for::<acdm_store::AgentMountChange>(),
            Self::ListAgents => generator.subschema_for::<Vec<AgentMount>>(),
            Self::UnmountAgent => generator.subschema_for::<AgentMount>(),
            Self::ResetScopeCache => generator.subschema_for::<CacheReset>(),
            Self::ListEvents => generator.subschema_for::<EventsPage>(),
            Self::ShowEvent => generator.subschema_for::<StorageEvent>(),
            Self::RevertEvent => generator.subschema_for::<Reverted>(),
            Self::ShowKillSwitch | Self::SetKillSwitch => {
                generator.subschema_for::<crate::switch::SwitchReport>()
            }
            Self::ListApprovals => generator.subschema_for::<ApprovalsPage>(),
            Self::ShowApproval | Self::ApproveApproval | Self::RejectApproval => {
                generator.subschema_for::<ApprovalView>()
            }
            Self::ShowApprovalPolicy | Self::SetApprovalPolicy | Self::ClearApprovalPolicy => {
                generator.subschema_for::<crate::approval::PolicyView>()
            }
        }
    }

    /// The failure codes the operation itself can answer with, beyond the
    /// ones every operator call can (a missing or wrong token, a browser,
    /// the database down, a bug, and 404 when the operator API is off).
    pub fn failures(self) -> &'static [ErrorCode] {
        use ErrorCode::*;
        match self {
            Self::ListProjects
            | Self::ListAgents
            | Self::ResetScopeCache
            | Self::ShowKillSwitch => &[],
            Self::ShowProject | Self::RemoveMember | Self::UnmountAgent => &[ValidationError],
            Self::ListEvents | Self::ListApprovals => &[ValidationError],
            Self::ShowApproval | Self::ShowApprovalPolicy | Self::ClearApprovalPolicy => {
                &[ValidationError]
            }
            Self::ApproveApproval | Self::RejectApproval => {
                &[ValidationError, PayloadTooLarge, PermissionDenied, Conflict]
            }
            Self::SetApprovalPolicy => &[ValidationError, PayloadTooLarge],
            Self::ShowEvent => &[ValidationError, Conflict],
            Self::CreateProject | Self::MountAgent => &[ValidationError, PayloadTooLarge, Conflict],
            Self::SetMember | Self::SetMount => &[ValidationError, PayloadTooLarge, Conflict],
            Self::SetKillSwitch => &[ValidationError, PayloadTooLarge, Conflict],
            Self::SetMemberName
            | Self::SetMeta
            | Self::SetSow
            | Self::SetMilestone
            | Self::CreateReport
            | Self::UpdateReport
            | Self::CreateMeeting
            | Self::UpdateMeeting => &[ValidationError, PayloadTooLarge, Conflict],
            Self::AttachMeetingFile | Self::RevertEvent => &[
                ValidationError,
                PayloadTooLarge,
                Conflict,
                UpstreamError,
                UpstreamTimeout,
                SourceNotConfigured,
            ],
        }
    }
}
