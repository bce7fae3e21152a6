//! Storage events (spec §6.4): the intent of every write, recorded before
//! the write happens, and its fate; plus the run-time switches operators
//! flip without a restart (the kill switch).
//!
//! An event is stored `pending`, then marked `applied` or `failed` exactly
//! once. A revert is itself an event: recording its intent **claims** the
//! original (`reverted_by`) in the same transaction, so two reverts of one
//! event cannot both start; applying the revert marks the original
//! `reverted`, failing it frees the original for another attempt.
//!
//! Timestamps order correctly on both backends: PostgreSQL compares
//! `TIMESTAMPTZ`; SQLite compares the RFC 3339 text sqlx writes (always
//! `+00:00`, 0, 3 or 6 fraction digits), whose byte order is time order.

use acdm_core::domain::{Mount, ProjectId, ProjectRef};
use acdm_core::events::{
    Actor, ActorKind, EventId, EventOp, EventRef, EventStatus, NewEvent, Step, StorageEvent,
};
use acdm_core::{AgentName, ProjectSlug, ThreadId, UserId};
use chrono::{DateTime, Utc};

use crate::Store;
use crate::db::{Tx, WritePool, with_pool, with_tx};
use crate::error::StoreError;
use crate::provisioning::{MountRow, project_ref};

/// The switch that turns via-agent file writes off (spec §3.5). An absent
/// row means no operator override: the configured default applies.
pub const NC_WRITES_SWITCH: &str = "nc_writes_enabled";

const TABLE: &str = "user_storage_events";

/// The most events one listing returns.
const MAX_LIMIT: u32 = 500;

/// `SELECT` of every event column and the project's slug; callers append
/// `WHERE …`.
macro_rules! select_events {
    () => {
        "SELECT e.id, e.actor_kind, e.user_id, e.agent_name, e.thread_id, e.project_id, \
         p.slug, e.op, e.target, e.params, e.plan, e.undo, e.status, e.result, e.error, \
         e.reverts, e.reverted_by, e.created_at, e.updated_at \
         FROM user_storage_events e JOIN projects p ON p.id = e.project_id "
    };
}

/// The event `id`, read inside a transaction (`None` if absent).
macro_rules! fetch_event {
    ($conn:expr, $id:expr) => {
        sqlx::query_as::<_, EventRow>(concat!(select_events!(), "WHERE e.id = $1"))
            .bind($id)
            .fetch_optional(&mut *$conn)
            .await?
    };
}

crate::db::row! {
    struct EventRow {
        id: String,
        actor_kind: String,
        user_id: Option<String>,
        agent_name: Option<String>,
        thread_id: Option<String>,
        project_id: String,
        slug: String,
        op: String,
        target: String,
        params: String,
        plan: String,
        undo: String,
        status: String,
        result: Option<String>,
        error: Option<String>,
        reverts: Option<String>,
        reverted_by: Option<String>,
        created_at: DateTime<Utc>,
        updated_at: DateTime<Utc>,
    }
}

fn bad(detail: String) -> StoreError {
    StoreError::corrupt(TABLE, detail)
}

fn parse_id(column: &str, value: &str) -> Result<EventId, StoreError> {
    value
        .parse::<EventId>()
        .map_err(|e| bad(format!("{column}: {e}")))
}

fn parse_json<T: serde::de::DeserializeOwned>(column: &str, value: &str) -> Result<T, StoreError> {
    serde_json::from_str(value).map_err(|e| bad(format!("{column}: {e}")))
}

/// Serialises a column value. Steps and JSON values always serialise; the
/// error exists only in the signature.
pub(crate) fn to_json<T: serde::Serialize>(column: &str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| bad(format!("{column}: {e}")))
}

impl EventRow {
    fn into_domain(self) -> Result<StorageEvent, StoreError> {
        let actor = Actor {
            kind: self
                .actor_kind
                .parse::<ActorKind>()
                .map_err(|e| bad(format!("actor_kind: {e}")))?,
            user_id: self
                .user_id
                .as_deref()
                .map(UserId::parse)
                .transpose()
                .map_err(|e| bad(format!("user_id: {e}")))?,
            agent_name: self
                .agent_name
                .as_deref()
                .map(AgentName::parse)
                .transpose()
                .map_err(|e| bad(format!("agent_name: {e}")))?,
            thread_id: self
                .thread_id
                .as_deref()
                .map(ThreadId::parse)
                .transpose()
                .map_err(|e| bad(format!("thread_id: {e}")))?,
        };
        Ok(StorageEvent {
            id: parse_id("id", &self.id)?,
            actor,
            project_id: self
                .project_id
                .parse::<ProjectId>()
                .map_err(|e| bad(format!("project_id: {e}")))?,
            project: ProjectSlug::parse(&self.slug)
                .map_err(|e| StoreError::corrupt("projects", format!("slug: {e}")))?,
            op: self
                .op
                .parse::<EventOp>()
                .map_err(|e| bad(format!("op: {e}")))?,
            target: self.target,
            params: parse_json("params", &self.params)?,
            plan: parse_json::<Vec<Step>>("plan", &self.plan)?,
            undo: parse_json::<Vec<Step>>("undo", &self.undo)?,
            status: self
                .status
                .parse::<EventStatus>()
                .map_err(|e| bad(format!("status: {e}")))?,
            result: self
                .result
                .as_deref()
                .map(|r| parse_json("result", r))
                .transpose()?,
            error: self.error,
            reverts: self
                .reverts
                .as_deref()
                .map(|r| parse_id("reverts", r))
                .transpose()?,
            reverted_by: self
                .reverted_by
                .as_deref()
                .map(|r| parse_id("reverted_by", r))
                .transpose()?,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// Which events [`Store::list_events`] returns. Every filter that is set
/// must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFilter {
    /// Only this project (by slug).
    pub project: Option<ProjectSlug>,
    /// Only this project (by id).
    pub project_id: Option<ProjectId>,
    /// Only events of this agent.
    pub agent: Option<AgentName>,
    /// Only events in this status.
    pub status: Option<EventStatus>,
    /// Keyset cursor: only events strictly older than this one, in the
    /// listing's (created_at, id) order.
    pub before: Option<EventId>,
    /// At most this many (clamped to 1..=500).
    pub limit: u32,
    /// Only events of this acting user.
    pub user: Option<UserId>,
    /// Only events of this conversation thread.
    pub thread: Option<ThreadId>,
    /// Only events of this kind.
    pub op: Option<EventOp>,
    /// Only events recorded at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only events recorded before this time.
    pub until: Option<DateTime<Utc>>,
}

impl Default for EventFilter {
    fn default() -> Self {
        Self {
            project: None,
            project_id: None,
            agent: None,
            status: None,
            before: None,
            limit: 50,
            user: None,
            thread: None,
            op: None,
            since: None,
            until: None,
        }
    }
}

/// A run-time switch as an operator last set it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct SwitchState {
    /// On or off.
    pub enabled: bool,
    /// When it was last set.
    pub changed_at: DateTime<Utc>,
    /// Who set it, when known: a user id, serialised as `user_id` like
    /// the actor of every other operator action (the column keeps its
    /// first name, `changed_by`).
    #[serde(rename = "user_id")]
    pub changed_by: Option<String>,
    /// Why, when given.
    pub reason: Option<String>,
}

crate::db::row! {
    struct SwitchRow {
        enabled: bool,
        changed_at: DateTime<Utc>,
        changed_by: Option<String>,
        reason: Option<String>,
    }
}

/// A value bound into a query built at run time.
enum Bind {
    Text(String),
    Time(DateTime<Utc>),
}

fn not_found_event(id: EventId) -> StoreError {
    StoreError::NotFound {
        what: "storage event",
        key: id.to_string(),
    }
}

fn not_found_project_id(id: ProjectId) -> StoreError {
    StoreError::NotFound {
        what: "project",
        key: id.to_string(),
    }
}

/// Why a status change from `pending` was refused.
fn not_pending(id: EventId, status: &str) -> StoreError {
    StoreError::Conflict(format!("event {id} is {status}, not pending"))
}

impl Store {
    /// Records the intent of a write, as `pending`. For a revert (an event
    /// with `reverts`), this claims the original exactly as
    /// [`Store::record_revert_intent`] does.
    pub async fn record_intent(&self, event: &NewEvent) -> Result<StorageEvent, StoreError> {
        self.insert_event(event).await
    }

    /// Records the intent of a revert of `event.reverts`, claiming the
    /// original in the same transaction: only an `applied` event of the same
    /// project that no other revert has claimed can be reverted.
    pub async fn record_revert_intent(&self, event: &NewEvent) -> Result<StorageEvent, StoreError> {
        if event.reverts.is_none() {
            return Err(StoreError::Conflict(format!(
                "event {} does not name the event it reverts",
                event.id
            )));
        }
        self.insert_event(event).await
    }

    async fn insert_event(&self, event: &NewEvent) -> Result<StorageEvent, StoreError> {
        let at = self.now();
        let id = event.id.to_string();
        let project_id = event.project_id.to_string();
        let params = to_json("params", &event.params)?;
        let plan = to_json("plan", &event.plan)?;
        let undo = to_json("undo", &event.undo)?;
        let slug: String = with_pool!(&self.pool, p => {
            let mut tx = p.begin_write().await?;
            let slug: String = sqlx::query_scalar("SELECT slug FROM projects WHERE id = $1")
                .bind(&project_id)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or_else(|| not_found_project_id(event.project_id))?;
            if let Some(original) = event.reverts {
                let claimed = sqlx::query(
                    "UPDATE user_storage_events SET reverted_by = $1, updated_at = $2 \
                     WHERE id = $3 AND project_id = $4 AND status = 'applied' AND reverted_by IS NULL",
                )
                .bind(&id)
                .bind(at)
                .bind(original.to_string())
                .bind(&project_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if claimed == 0 {
                    let found: Option<(String, Option<String>)> = sqlx::query_as(
                        "SELECT status, reverted_by FROM user_storage_events \
                         WHERE id = $1 AND project_id = $2",
                    )
                    .bind(original.to_string())
                    .bind(&project_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                    return Err(match found {
                        // Another project's event is not there, for this project.
                        None => not_found_event(original),
                        Some((status, Some(by))) if status == EventStatus::Applied.as_str() => {
                            StoreError::Conflict(format!(
                                "event {original} is already being reverted by {by}"
                            ))
                        }
                        Some((status, _)) if status == EventStatus::Applied.as_str() => {
                            StoreError::Conflict(format!(
                                "event {original} changed while being claimed; try again"
                            ))
                        }
                        Some((status, _)) => StoreError::Conflict(format!(
                            "event {original} is {status}; only an applied event can be reverted"
                        )),
                    });
                }
            }
            if let Some(approval) = event.approval {
                // The approval's use and the write's intent are one commit
                // (an approval whose write failed is `approved` again:
                // `finish_in` frees it with the failure).
                let claimed = sqlx::query(
                    "UPDATE approvals SET status = 'used', event_id = $1, updated_at = $2 \
                     WHERE id = $3 AND project_id = $4 AND expires_at > $2 AND status = 'approved'",
                )
                .bind(&id)
                .bind(at)
                .bind(approval.to_string())
                .bind(&project_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if claimed == 0 {
                    return Err(StoreError::ApprovalSpent(format!(
                        "approval {approval} cannot be used now: it was used by another call, or it expired"
                    )));
                }
            }
            sqlx::query(
                "INSERT INTO user_storage_events (id, actor_kind, user_id, agent_name, thread_id, \
                 project_id, op, target, params, plan, undo, status, result, error, reverts, \
                 reverted_by, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, NULL, NULL, $13, NULL, $14, $14)",
            )
            .bind(&id)
            .bind(event.actor.kind.as_str())
            .bind(event.actor.user_id.as_ref().map(UserId::as_str))
            .bind(event.actor.agent_name.as_ref().map(AgentName::as_str))
            .bind(event.actor.thread_id.as_ref().map(ThreadId::as_str))
            .bind(&project_id)
            .bind(event.op.as_str())
            .bind(&event.target)
            .bind(&params)
            .bind(&plan)
            .bind(&undo)
            .bind(EventStatus::Pending.as_str())
            .bind(event.reverts.map(|r| r.to_string()))
            .bind(at)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            slug
        });
        let project = ProjectSlug::parse(&slug)
            .map_err(|e| StoreError::corrupt("projects", format!("slug: {e}")))?;
        tracing::info!(
            event = %event.id,
            project = %project,
            op = %event.op,
            reverts = ?event.reverts,
            "storage event recorded"
        );
        Ok(StorageEvent {
            id: event.id,
            actor: event.actor.clone(),
            project_id: event.project_id,
            project,
            op: event.op,
            target: event.target.clone(),
            params: event.params.clone(),
            plan: event.plan.clone(),
            undo: event.undo.clone(),
            status: EventStatus::Pending,
            result: None,
            error: None,
            reverts: event.reverts,
            reverted_by: None,
            created_at: at,
            updated_at: at,
        })
    }

    /// Marks a pending event applied, with what it produced. For a revert,
    /// the original becomes `reverted` in the same transaction.
    pub async fn mark_applied(
        &self,
        id: EventId,
        result: Option<&serde_json::Value>,
    ) -> Result<StorageEvent, StoreError> {
        let result = result.map(|r| to_json("result", r)).transpose()?;
        self.finish_event(id, EventStatus::Applied, result, None)
            .await
    }

    /// Marks a pending event failed, with why (our words). For a revert,
    /// the original is freed in the same transaction, so it can be reverted
    /// again later.
    pub async fn mark_failed(&self, id: EventId, error: &str) -> Result<StorageEvent, StoreError> {
        self.finish_event(id, EventStatus::Failed, None, Some(error))
            .await
    }

    /// Moves a pending event to `applied` or `failed`, and its original
    /// (for a revert) to `reverted` or back to unclaimed.
    async fn finish_event(
        &self,
        id: EventId,
        status: EventStatus,
        result: Option<String>,
        error: Option<&str>,
    ) -> Result<StorageEvent, StoreError> {
        let mut tx = Tx::begin(&self.pool).await?;
        let event = self.finish_in(&mut tx, id, status, result, error).await?;
        tx.commit().await?;
        Ok(event)
    }

    /// [`Store::finish_event`] inside the caller's transaction (which
    /// [`Store::apply_rows`] also uses for the rows it changes).
    pub(crate) async fn finish_in(
        &self,
        tx: &mut Tx,
        id: EventId,
        status: EventStatus,
        result: Option<String>,
        error: Option<&str>,
    ) -> Result<StorageEvent, StoreError> {
        let at = self.now();
        let key = id.to_string();
        let row: EventRow = with_tx!(tx, tx => {
            let reverts: Option<Option<String>> = sqlx::query_scalar(
                "UPDATE user_storage_events SET status = $1, result = $2, error = $3, updated_at = $4 \
                 WHERE id = $5 AND status = 'pending' RETURNING reverts",
            )
            .bind(status.as_str())
            .bind(result.as_deref())
            .bind(error)
            .bind(at)
            .bind(&key)
            .fetch_optional(&mut **tx)
            .await?;
            if status == EventStatus::Failed {
                // Nothing was written: the approval the write used is
                // usable again (until it expires), in the same commit.
                sqlx::query(
                    "UPDATE approvals SET status = 'approved', event_id = NULL, updated_at = $1 \
                     WHERE event_id = $2 AND status = 'used'",
                )
                .bind(at)
                .bind(&key)
                .execute(&mut **tx)
                .await?;
            }
            let Some(reverts) = reverts else {
                let current: Option<String> =
                    sqlx::query_scalar("SELECT status FROM user_storage_events WHERE id = $1")
                        .bind(&key)
                        .fetch_optional(&mut **tx)
                        .await?;
                return Err(match current {
                    None => not_found_event(id),
                    Some(current) => not_pending(id, &current),
                });
            };
            if let Some(original) = reverts {
                if status == EventStatus::Applied {
                    let marked = sqlx::query(
                        "UPDATE user_storage_events SET status = 'reverted', updated_at = $1 \
                         WHERE id = $2 AND reverted_by = $3",
                    )
                    .bind(at)
                    .bind(&original)
                    .bind(&key)
                    .execute(&mut **tx)
                    .await?
                    .rows_affected();
                    if marked == 0 {
                        return Err(bad(format!(
                            "event {original} is not claimed by its revert {id}"
                        )));
                    }
                } else {
                    sqlx::query(
                        "UPDATE user_storage_events SET reverted_by = NULL, updated_at = $1 \
                         WHERE id = $2 AND reverted_by = $3",
                    )
                    .bind(at)
                    .bind(&original)
                    .bind(&key)
                    .execute(&mut **tx)
                    .await?;
                }
            }
            let conn = &mut **tx;
            fetch_event!(conn, &key).ok_or_else(|| not_found_event(id))?
        });
        let event = row.into_domain()?;
        tracing::info!(
            event = %id,
            project = %event.project,
            op = %event.op,
            %status,
            reverts = ?event.reverts,
            "storage event finished"
        );
        Ok(event)
    }

    /// The event `reference` names: a whole id as it is, a prefix when
    /// exactly one event id starts with it. No match is `NotFound`; more
    /// than one is a `Conflict` saying how many (up to ten are counted).
    pub async fn resolve_event(&self, reference: &EventRef) -> Result<EventId, StoreError> {
        const COUNTED: i64 = 10;
        let prefix = match reference {
            EventRef::Id(id) => return Ok(*id),
            EventRef::Prefix(prefix) => prefix,
        };
        // A prefix holds only hex digits and hyphens, so it carries no
        // LIKE wildcard.
        let ids: Vec<String> = with_pool!(&self.pool, p => {
            sqlx::query_scalar(
                "SELECT id FROM user_storage_events WHERE id LIKE $1 ORDER BY id LIMIT $2",
            )
            .bind(format!("{prefix}%"))
            .bind(COUNTED + 1)
            .fetch_all(p)
            .await?
        });
        match ids.as_slice() {
            [] => Err(StoreError::NotFound {
                what: "storage event",
                key: reference.to_string(),
            }),
            [id] => id.parse().map_err(|e| StoreError::corrupt(TABLE, e)),
            several => {
                let count = if several.len() as i64 > COUNTED {
                    format!("more than {COUNTED}")
                } else {
                    several.len().to_string()
                };
                Err(StoreError::Conflict(format!(
                    "the event id prefix `{prefix}` is ambiguous: {count} events start with it; give more characters"
                )))
            }
        }
    }

    /// The newest `limit` events of `project` about `target`, newest first
    /// (a business object's history: `meeting:<id>`).
    pub async fn events_about(
        &self,
        project: ProjectId,
        target: &str,
        limit: u32,
    ) -> Result<Vec<StorageEvent>, StoreError> {
        let rows: Vec<EventRow> = with_pool!(&self.pool, p => {
            sqlx::query_as::<_, EventRow>(concat!(
                select_events!(),
                "WHERE e.project_id = $1 AND e.target = $2 ORDER BY e.created_at DESC, e.id DESC LIMIT $3"
            ))
            .bind(project.to_string())
            .bind(target)
            .bind(i64::from(limit.clamp(1, MAX_LIMIT)))
            .fetch_all(p)
            .await?
        });
        rows.into_iter().map(EventRow::into_domain).collect()
    }

    /// One event.
    pub async fn event(&self, id: EventId) -> Result<StorageEvent, StoreError> {
        let row: Option<EventRow> = with_pool!(&self.pool, p => {
            let mut conn = p.acquire().await?;
            fetch_event!(conn, id.to_string())
        });
        row.ok_or_else(|| not_found_event(id))?.into_domain()
    }

    /// Events matching `filter`, newest first by (created_at, id).
    pub async fn list_events(&self, filter: &EventFilter) -> Result<Vec<StorageEvent>, StoreError> {
        let mut conditions: Vec<String> = Vec::new();
        let mut binds: Vec<Bind> = Vec::new();
        let mut push = |condition: &str, value: Bind| {
            binds.push(value);
            conditions.push(condition.replace("$?", &format!("${}", binds.len())));
        };
        if let Some(project) = &filter.project {
            push("p.slug = $?", Bind::Text(project.to_string()));
        }
        if let Some(project_id) = filter.project_id {
            push("e.project_id = $?", Bind::Text(project_id.to_string()));
        }
        if let Some(agent) = &filter.agent {
            push("e.agent_name = $?", Bind::Text(agent.to_string()));
        }
        if let Some(status) = filter.status {
            push("e.status = $?", Bind::Text(status.as_str().to_owned()));
        }
        if let Some(user) = &filter.user {
            push("e.user_id = $?", Bind::Text(user.to_string()));
        }
        if let Some(thread) = &filter.thread {
            push("e.thread_id = $?", Bind::Text(thread.to_string()));
        }
        if let Some(op) = filter.op {
            push("e.op = $?", Bind::Text(op.as_str().to_owned()));
        }
        if let Some(since) = filter.since {
            push("e.created_at >= $?", Bind::Time(since));
        }
        if let Some(until) = filter.until {
            push("e.created_at < $?", Bind::Time(until));
        }
        let limit = i64::from(filter.limit.clamp(1, MAX_LIMIT));
        let rows: Vec<EventRow> = with_pool!(&self.pool, p => {
            let mut conn = p.acquire().await?;
            if let Some(before) = filter.before {
                let cursor: (DateTime<Utc>, String) = sqlx::query_as(
                    "SELECT created_at, id FROM user_storage_events WHERE id = $1",
                )
                .bind(before.to_string())
                .fetch_optional(&mut *conn)
                .await?
                .ok_or_else(|| not_found_event(before))?;
                binds.push(Bind::Time(cursor.0));
                let at = binds.len();
                binds.push(Bind::Text(cursor.1));
                let id = binds.len();
                conditions.push(format!(
                    "(e.created_at < ${at} OR (e.created_at = ${at} AND e.id < ${id}))"
                ));
            }
            let mut sql = String::from(select_events!());
            if !conditions.is_empty() {
                sql.push_str("WHERE ");
                sql.push_str(&conditions.join(" AND "));
            }
            sql.push_str(&format!(
                " ORDER BY e.created_at DESC, e.id DESC LIMIT ${}",
                binds.len() + 1
            ));
            // Only fixed fragments and numbered placeholders: every value is bound.
            let mut query = sqlx::query_as::<_, EventRow>(sqlx::AssertSqlSafe(sql));
            for value in binds {
                query = match value {
                    Bind::Text(text) => query.bind(text),
                    Bind::Time(time) => query.bind(time),
                };
            }
            query.bind(limit).fetch_all(&mut *conn).await?
        });
        rows.into_iter().map(EventRow::into_domain).collect()
    }

    /// Pending events recorded at or before `older_than`, oldest first: the
    /// intents a reconciler must settle.
    pub async fn pending_events(
        &self,
        older_than: DateTime<Utc>,
    ) -> Result<Vec<StorageEvent>, StoreError> {
        let rows: Vec<EventRow> = with_pool!(&self.pool, p => {
            sqlx::query_as(concat!(
                select_events!(),
                "WHERE e.status = 'pending' AND e.created_at <= $1 ORDER BY e.created_at, e.id"
            ))
            .bind(older_than)
            .fetch_all(p)
            .await?
        });
        rows.into_iter().map(EventRow::into_domain).collect()
    }

    /// A project by its id.
    pub async fn project_by_id(&self, id: ProjectId) -> Result<ProjectRef, StoreError> {
        let row: Option<(String, String, String)> = with_pool!(&self.pool, p => {
            sqlx::query_as("SELECT id, slug, name FROM projects WHERE id = $1")
                .bind(id.to_string())
                .fetch_optional(p)
                .await?
        });
        let (id_text, slug, name) = row.ok_or_else(|| not_found_project_id(id))?;
        project_ref(&id_text, &slug, &name)
    }

    /// A project's mounts, by name (`NotFound` for an unknown project).
    pub async fn project_mounts(&self, id: ProjectId) -> Result<Vec<Mount>, StoreError> {
        let key = id.to_string();
        let rows: Vec<MountRow> = with_pool!(&self.pool, p => {
            let mut conn = p.acquire().await?;
            let exists: Option<String> = sqlx::query_scalar("SELECT id FROM projects WHERE id = $1")
                .bind(&key)
                .fetch_optional(&mut *conn)
                .await?;
            if exists.is_none() {
                return Err(not_found_project_id(id));
            }
            sqlx::query_as(
                "SELECT name, root, writable FROM project_mounts WHERE project_id = $1 ORDER BY name",
            )
            .bind(&key)
            .fetch_all(&mut *conn)
            .await?
        });
        rows.into_iter().map(MountRow::into_domain).collect()
    }

    /// The operator's setting of the switch `name`, or `None` when no
    /// operator has set it (the configured default applies).
    pub async fn switch(&self, name: &str) -> Result<Option<SwitchState>, StoreError> {
        let row: Option<SwitchRow> = with_pool!(&self.pool, p => {
            sqlx::query_as(
                "SELECT enabled, changed_at, changed_by, reason FROM runtime_switches WHERE name = $1",
            )
            .bind(name)
            .fetch_optional(p)
            .await?
        });
        Ok(row.map(|row| SwitchState {
            enabled: row.enabled,
            changed_at: row.changed_at,
            changed_by: row.changed_by,
            reason: row.reason,
        }))
    }

    /// Sets the switch `name` (creating its row the first time).
    pub async fn set_switch(
        &self,
        name: &str,
        enabled: bool,
        changed_by: Option<&str>,
        reason: Option<&str>,
    ) -> Result<SwitchState, StoreError> {
        let changed_at = self.now();
        with_pool!(&self.pool, p => {
            sqlx::query(
                "INSERT INTO runtime_switches (name, enabled, changed_at, changed_by, reason) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (name) DO UPDATE SET enabled = $2, changed_at = $3, changed_by = $4, reason = $5",
            )
            .bind(name)
            .bind(enabled)
            .bind(changed_at)
            .bind(changed_by)
            .bind(reason)
            .execute(p)
            .await?;
        });
        tracing::warn!(
            switch = name,
            enabled,
            changed_by,
            reason,
            "runtime switch set"
        );
        Ok(SwitchState {
            enabled,
            changed_at,
            changed_by: changed_by.map(str::to_owned),
            reason: reason.map(str::to_owned),
        })
    }
}
