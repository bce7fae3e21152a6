//! Approval requests, their decisions, each project's own policy, and the
//! outbox of their notifications.
//!
//! A request is stored `pending`; a person moves it once to `approved` or
//! `rejected`, before it expires (a conditional update: of two deciders,
//! one wins). Using an approval is not done here but in the transaction
//! that records the write's intent ([`crate::Store::record_intent`] with
//! `NewEvent::approval`): the approval becomes `used` and names the event
//! in the same commit, so a write and its approval's use are one fact —
//! a crash leaves either both or neither. When that event is marked
//! failed (nothing was written), the approval is `approved` again in the
//! same commit, and may be used again until it expires.

use acdm_core::approval::{
    Approval, ApprovalId, ApprovalPolicy, ApprovalRequest, ApprovalStatus, ApprovalTtl, WriteOp,
};
use acdm_core::domain::{EventId, ProjectId};
use acdm_core::{AgentName, ProjectSlug, ThreadId, UserId};
use chrono::{DateTime, Utc};

use crate::db::{WritePool as _, with_pool};
use crate::error::StoreError;
use crate::{Store, events::to_json};

const TABLE: &str = "approvals";

/// The most approvals one listing returns.
const MAX_LIMIT: u32 = 500;

macro_rules! select_approvals {
    () => {
        "SELECT a.id, p.slug, a.op, a.arguments, a.requested_by, a.agent_name, a.thread_id, \
         a.preview, a.status, a.created_at, a.expires_at, a.decided_by, a.decided_at, a.note, \
         a.event_id FROM approvals a JOIN projects p ON p.id = a.project_id "
    };
}

crate::db::row! {
    struct ApprovalRow {
        id: String,
        slug: String,
        op: String,
        arguments: String,
        requested_by: String,
        agent_name: String,
        thread_id: String,
        preview: String,
        status: String,
        created_at: DateTime<Utc>,
        expires_at: DateTime<Utc>,
        decided_by: Option<String>,
        decided_at: Option<DateTime<Utc>>,
        note: Option<String>,
        event_id: Option<String>,
    }
}

fn bad(detail: String) -> StoreError {
    StoreError::corrupt(TABLE, detail)
}

impl ApprovalRow {
    fn into_domain(self) -> Result<Approval, StoreError> {
        let parsed = |column: &str, e: &dyn std::fmt::Display| bad(format!("{column}: {e}"));
        Ok(Approval {
            approval_id: self.id.parse().map_err(|e| parsed("id", &e))?,
            request: ApprovalRequest {
                project: ProjectSlug::parse(&self.slug).map_err(|e| parsed("slug", &e))?,
                op: self.op.parse::<WriteOp>().map_err(|e| parsed("op", &e))?,
                arguments: serde_json::from_str(&self.arguments)
                    .map_err(|e| parsed("arguments", &e))?,
                requested_by: UserId::parse(&self.requested_by)
                    .map_err(|e| parsed("requested_by", &e))?,
                agent: AgentName::parse(&self.agent_name).map_err(|e| parsed("agent_name", &e))?,
                thread: ThreadId::parse(&self.thread_id).map_err(|e| parsed("thread_id", &e))?,
                preview: serde_json::from_str(&self.preview).map_err(|e| parsed("preview", &e))?,
            },
            status: self
                .status
                .parse::<ApprovalStatus>()
                .map_err(|e| parsed("status", &e))?,
            created_at: self.created_at,
            expires_at: self.expires_at,
            decided_by: self
                .decided_by
                .as_deref()
                .map(UserId::parse)
                .transpose()
                .map_err(|e| parsed("decided_by", &e))?,
            decided_at: self.decided_at,
            note: self.note,
            event_id: self
                .event_id
                .as_deref()
                .map(str::parse::<EventId>)
                .transpose()
                .map_err(|e| parsed("event_id", &e))?,
        })
    }
}

fn not_found(id: ApprovalId) -> StoreError {
    StoreError::NotFound {
        what: "approval",
        key: id.to_string(),
    }
}

/// Which approvals a listing returns, newest first.
#[derive(Debug, Clone, Default)]
pub struct ApprovalFilter {
    /// Only this project.
    pub project: Option<ProjectSlug>,
    /// Only this status (`expired`: pending or approved ones past their
    /// expiry; `pending` and `approved` leave those out).
    pub status: Option<ApprovalStatus>,
    /// Only this operation.
    pub op: Option<WriteOp>,
    /// Keyset cursor: only approvals strictly older than this one.
    pub before: Option<ApprovalId>,
    /// At most this many (clamped to 1..=500).
    pub limit: u32,
}

/// A notification to send: its id (the `webhook-id`), its body, and how
/// many times it was tried before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxMessage {
    /// Stable across retries.
    pub id: String,
    /// The approval it announces.
    pub approval_id: ApprovalId,
    /// The JSON body.
    pub payload: String,
    /// Earlier attempts.
    pub attempts: u32,
}

/// How the outbox stands: messages waiting, and of those the ones whose
/// last attempt failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxBacklog {
    /// Not yet delivered.
    pub waiting: u64,
    /// Not yet delivered, and tried at least once.
    pub failing: u64,
    /// Delivered since the start of the table.
    pub delivered: u64,
}

impl Store {
    /// Stores a new `pending` request of `project_id`, expiring `ttl` from
    /// now; with `notify`, its notification (the body `notify` makes of
    /// the stored approval) goes into the outbox in the same transaction.
    pub async fn create_approval(
        &self,
        project_id: ProjectId,
        request: &ApprovalRequest,
        ttl: ApprovalTtl,
        notify: Option<&(dyn Fn(&Approval) -> String + Send + Sync)>,
    ) -> Result<Approval, StoreError> {
        let now = self.now();
        let approval = Approval {
            approval_id: ApprovalId::new_random(),
            request: request.clone(),
            status: ApprovalStatus::Pending,
            created_at: now,
            expires_at: ttl.expiry_from(now),
            decided_by: None,
            decided_at: None,
            note: None,
            event_id: None,
        };
        let id = approval.approval_id.to_string();
        let arguments = to_json("arguments", &request.arguments)?;
        let preview = to_json("preview", &request.preview)?;
        let payload = notify.map(|make| make(&approval));
        with_pool!(&self.pool, p => {
            let mut tx = p.begin_write().await?;
            sqlx::query(
                "INSERT INTO approvals (id, project_id, op, arguments, requested_by, agent_name, \
                 thread_id, preview, status, created_at, expires_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $10)",
            )
            .bind(&id)
            .bind(project_id.to_string())
            .bind(request.op.label())
            .bind(&arguments)
            .bind(request.requested_by.as_str())
            .bind(request.agent.as_str())
            .bind(request.thread.as_str())
            .bind(&preview)
            .bind(ApprovalStatus::Pending.as_str())
            .bind(now)
            .bind(approval.expires_at)
            .execute(&mut *tx)
            .await?;
            if let Some(payload) = &payload {
                sqlx::query(
                    "INSERT INTO approval_outbox (id, approval_id, payload, created_at, \
                     next_attempt_at, attempts) VALUES ($1, $2, $3, $4, $4, 0)",
                )
                .bind(format!("msg_{}", uuid::Uuid::new_v4().simple()))
                .bind(&id)
                .bind(payload)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
        });
        tracing::info!(
            approval = %approval.approval_id,
            project = %request.project,
            op = %request.op,
            user = %request.requested_by,
            agent = %request.agent,
            "approval requested"
        );
        Ok(approval)
    }

    /// A request of `project` still pending and not expired for exactly
    /// this call (operation, user, agent, arguments), if one was made:
    /// asking again returns it rather than a second request.
    pub async fn pending_approval_for(
        &self,
        project: ProjectId,
        request: &ApprovalRequest,
    ) -> Result<Option<Approval>, StoreError> {
        let arguments = to_json("arguments", &request.arguments)?;
        let row: Option<ApprovalRow> = with_pool!(&self.pool, p => {
            sqlx::query_as(concat!(
                select_approvals!(),
                "WHERE a.project_id = $1 AND a.op = $2 AND a.requested_by = $3 AND a.agent_name = $4 \
                 AND a.arguments = $5 AND a.status = 'pending' AND a.expires_at > $6 \
                 ORDER BY a.created_at DESC LIMIT 1"
            ))
            .bind(project.to_string())
            .bind(request.op.label())
            .bind(request.requested_by.as_str())
            .bind(request.agent.as_str())
            .bind(&arguments)
            .bind(self.now())
            .fetch_optional(p)
            .await?
        });
        row.map(ApprovalRow::into_domain).transpose()
    }

    /// Requests waiting for a decision (pending, not expired), all
    /// projects.
    pub async fn pending_approval_count(&self) -> Result<u64, StoreError> {
        let count: i64 = with_pool!(&self.pool, p => {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM approvals WHERE status = 'pending' AND expires_at > $1",
            )
            .bind(self.now())
            .fetch_one(p)
            .await?
        });
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// The approval `id`, of any project.
    pub async fn approval(&self, id: ApprovalId) -> Result<Approval, StoreError> {
        let row: Option<ApprovalRow> = with_pool!(&self.pool, p => {
            sqlx::query_as(concat!(select_approvals!(), "WHERE a.id = $1"))
                .bind(id.to_string())
                .fetch_optional(p)
                .await?
        });
        row.ok_or_else(|| not_found(id))?.into_domain()
    }

    /// The approval `id` when it belongs to `project`; another project's
    /// is not found, exactly as one that does not exist.
    pub async fn approval_of(
        &self,
        project: ProjectId,
        id: ApprovalId,
    ) -> Result<Approval, StoreError> {
        let row: Option<ApprovalRow> = with_pool!(&self.pool, p => {
            sqlx::query_as(concat!(select_approvals!(), "WHERE a.id = $1 AND a.project_id = $2"))
                .bind(id.to_string())
                .bind(project.to_string())
                .fetch_optional(p)
                .await?
        });
        row.ok_or_else(|| not_found(id))?.into_domain()
    }

    /// Approvals matching `filter`, newest first by (created_at, id).
    pub async fn list_approvals(
        &self,
        filter: &ApprovalFilter,
    ) -> Result<Vec<Approval>, StoreError> {
        let now = self.now();
        let mut conditions: Vec<String> = Vec::new();
        let mut binds: Vec<Bind> = Vec::new();
        // Each `$?` is the next bound value, in order.
        let mut push = |condition: &str, values: Vec<Bind>| {
            let mut condition = condition.to_owned();
            for value in values {
                binds.push(value);
                condition = condition.replacen("$?", &format!("${}", binds.len()), 1);
            }
            conditions.push(condition);
        };
        if let Some(project) = &filter.project {
            push("p.slug = $?", vec![Bind::Text(project.to_string())]);
        }
        if let Some(op) = filter.op {
            push("a.op = $?", vec![Bind::Text(op.label().to_owned())]);
        }
        match filter.status {
            None => {}
            Some(ApprovalStatus::Expired) => push(
                "a.status IN ('pending', 'approved') AND a.expires_at <= $?",
                vec![Bind::Time(now)],
            ),
            Some(status @ (ApprovalStatus::Pending | ApprovalStatus::Approved)) => push(
                "a.status = $? AND a.expires_at > $?",
                vec![Bind::Text(status.as_str().to_owned()), Bind::Time(now)],
            ),
            Some(status) => push(
                "a.status = $?",
                vec![Bind::Text(status.as_str().to_owned())],
            ),
        }
        if let Some(before) = filter.before {
            let at = self.approval(before).await?.created_at;
            push(
                "(a.created_at < $? OR (a.created_at = $? AND a.id < $?))",
                vec![
                    Bind::Time(at),
                    Bind::Time(at),
                    Bind::Text(before.to_string()),
                ],
            );
        }
        let limit = i64::from(filter.limit.clamp(1, MAX_LIMIT));
        let mut sql = String::from(select_approvals!());
        if !conditions.is_empty() {
            sql.push_str("WHERE ");
            sql.push_str(&conditions.join(" AND "));
        }
        sql.push_str(&format!(
            " ORDER BY a.created_at DESC, a.id DESC LIMIT ${}",
            binds.len() + 1
        ));
        let rows: Vec<ApprovalRow> = with_pool!(&self.pool, p => {
            // Only fixed fragments and numbered placeholders: every value is bound.
            let mut query = sqlx::query_as::<_, ApprovalRow>(sqlx::AssertSqlSafe(sql));
            for value in binds {
                query = match value {
                    Bind::Text(text) => query.bind(text),
                    Bind::Time(time) => query.bind(time),
                };
            }
            query.bind(limit).fetch_all(p).await?
        });
        rows.into_iter().map(ApprovalRow::into_domain).collect()
    }

    /// Records a person's decision on a pending request that has not
    /// expired: `approve`, or reject with the reason in `note`. Of two
    /// decisions, the first wins; the other is a conflict.
    pub async fn decide_approval(
        &self,
        id: ApprovalId,
        approve: bool,
        by: &UserId,
        note: Option<&str>,
    ) -> Result<Approval, StoreError> {
        let now = self.now();
        let status = if approve {
            ApprovalStatus::Approved
        } else {
            ApprovalStatus::Rejected
        };
        let changed = with_pool!(&self.pool, p => {
            sqlx::query(
                "UPDATE approvals SET status = $1, decided_by = $2, decided_at = $3, note = $4, \
                 updated_at = $3 WHERE id = $5 AND status = 'pending' AND expires_at > $3",
            )
            .bind(status.as_str())
            .bind(by.as_str())
            .bind(now)
            .bind(note)
            .bind(id.to_string())
            .execute(p)
            .await?
            .rows_affected()
        });
        let approval = self.approval(id).await?;
        if changed == 0 {
            return Err(StoreError::Conflict(format!(
                "approval {id} is {}; only a pending approval can be decided",
                approval.status_at(now)
            )));
        }
        tracing::info!(approval = %id, decision = %status, by = %by, "approval decided");
        Ok(approval)
    }

    /// Voids an approved request whose target changed since its preview:
    /// it can no longer be used. `false` when it was not `approved`.
    pub async fn void_approval(&self, id: ApprovalId, reason: &str) -> Result<bool, StoreError> {
        let now = self.now();
        let changed = with_pool!(&self.pool, p => {
            sqlx::query(
                "UPDATE approvals SET status = 'voided', note = $1, updated_at = $2 \
                 WHERE id = $3 AND status = 'approved'",
            )
            .bind(reason)
            .bind(now)
            .bind(id.to_string())
            .execute(p)
            .await?
            .rows_affected()
        });
        if changed > 0 {
            tracing::warn!(approval = %id, reason, "approval voided: its target changed since the preview");
        }
        Ok(changed > 0)
    }

    /// The project's own policy, if it has one.
    pub async fn approval_policy(
        &self,
        project: ProjectId,
    ) -> Result<Option<ApprovalPolicy>, StoreError> {
        let ops: Option<String> = with_pool!(&self.pool, p => {
            sqlx::query_scalar("SELECT ops FROM approval_policies WHERE project_id = $1")
                .bind(project.to_string())
                .fetch_optional(p)
                .await?
        });
        ops.map(|list| {
            ApprovalPolicy::parse_list(&list)
                .map_err(|e| StoreError::corrupt("approval_policies", format!("ops: {e}")))
        })
        .transpose()
    }

    /// Sets the project's own policy (replacing the deployment's list for
    /// it).
    pub async fn set_approval_policy(
        &self,
        project: ProjectId,
        policy: &ApprovalPolicy,
        by: Option<&str>,
    ) -> Result<(), StoreError> {
        let now = self.now();
        with_pool!(&self.pool, p => {
            sqlx::query(
                "INSERT INTO approval_policies (project_id, ops, changed_at, changed_by) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (project_id) DO UPDATE \
                 SET ops = excluded.ops, changed_at = excluded.changed_at, changed_by = excluded.changed_by",
            )
            .bind(project.to_string())
            .bind(policy.to_list())
            .bind(now)
            .bind(by)
            .execute(p)
            .await?;
        });
        Ok(())
    }

    /// Drops the project's own policy: the deployment's list applies
    /// again. `false` when it had none.
    pub async fn clear_approval_policy(&self, project: ProjectId) -> Result<bool, StoreError> {
        let removed = with_pool!(&self.pool, p => {
            sqlx::query("DELETE FROM approval_policies WHERE project_id = $1")
                .bind(project.to_string())
                .execute(p)
                .await?
                .rows_affected()
        });
        Ok(removed > 0)
    }

    /// Leases up to `limit` notifications that are due, for `lease`: no
    /// other replica takes them until it ends (so a sender that dies
    /// leaves them to another after the lease).
    pub async fn lease_due_notifications(
        &self,
        limit: u32,
        lease: std::time::Duration,
    ) -> Result<Vec<OutboxMessage>, StoreError> {
        let now = self.now();
        let until =
            now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::seconds(60));
        let mut leased = Vec::new();
        let candidates: Vec<(String, String, String, i64)> = with_pool!(&self.pool, p => {
            sqlx::query_as(
                "SELECT id, approval_id, payload, attempts FROM approval_outbox \
                 WHERE delivered_at IS NULL AND next_attempt_at <= $1 \
                 AND (lease_until IS NULL OR lease_until <= $1) \
                 ORDER BY next_attempt_at LIMIT $2",
            )
            .bind(now)
            .bind(i64::from(limit))
            .fetch_all(p)
            .await?
        });
        for (id, approval_id, payload, attempts) in candidates {
            let taken = with_pool!(&self.pool, p => {
                sqlx::query(
                    "UPDATE approval_outbox SET lease_until = $1 WHERE id = $2 \
                     AND delivered_at IS NULL AND (lease_until IS NULL OR lease_until <= $3)",
                )
                .bind(until)
                .bind(&id)
                .bind(now)
                .execute(p)
                .await?
                .rows_affected()
            });
            if taken == 1 {
                leased.push(OutboxMessage {
                    id,
                    approval_id: approval_id.parse().map_err(|e| {
                        StoreError::corrupt("approval_outbox", format!("approval_id: {e}"))
                    })?,
                    payload,
                    attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                });
            }
        }
        Ok(leased)
    }

    /// Marks a notification delivered.
    pub async fn notification_delivered(&self, id: &str) -> Result<(), StoreError> {
        let now = self.now();
        with_pool!(&self.pool, p => {
            sqlx::query(
                "UPDATE approval_outbox SET delivered_at = $1, attempts = attempts + 1, \
                 lease_until = NULL, last_error = NULL WHERE id = $2",
            )
            .bind(now)
            .bind(id)
            .execute(p)
            .await?;
        });
        Ok(())
    }

    /// Records a failed attempt (`error` in our words) and when to try
    /// again.
    pub async fn notification_failed(
        &self,
        id: &str,
        error: &str,
        retry_in: std::time::Duration,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let next = now + chrono::Duration::from_std(retry_in).unwrap_or(chrono::Duration::hours(1));
        with_pool!(&self.pool, p => {
            sqlx::query(
                "UPDATE approval_outbox SET attempts = attempts + 1, last_error = $1, \
                 next_attempt_at = $2, lease_until = NULL WHERE id = $3",
            )
            .bind(error)
            .bind(next)
            .bind(id)
            .execute(p)
            .await?;
        });
        Ok(())
    }

    /// How the outbox stands.
    pub async fn outbox_backlog(&self) -> Result<OutboxBacklog, StoreError> {
        let (waiting, failing, delivered): (i64, i64, i64) = with_pool!(&self.pool, p => {
            sqlx::query_as(
                "SELECT \
                 COALESCE(SUM(CASE WHEN delivered_at IS NULL THEN 1 ELSE 0 END), 0), \
                 COALESCE(SUM(CASE WHEN delivered_at IS NULL AND attempts > 0 THEN 1 ELSE 0 END), 0), \
                 COALESCE(SUM(CASE WHEN delivered_at IS NOT NULL THEN 1 ELSE 0 END), 0) \
                 FROM approval_outbox",
            )
            .fetch_one(p)
            .await?
        });
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(OutboxBacklog {
            waiting: count(waiting),
            failing: count(failing),
            delivered: count(delivered),
        })
    }

    /// The last delivery error of each undelivered notification of
    /// `approval` (for the console), newest attempt first.
    pub async fn notification_errors(
        &self,
        approval: ApprovalId,
    ) -> Result<Vec<(u32, String)>, StoreError> {
        let rows: Vec<(i64, Option<String>)> = with_pool!(&self.pool, p => {
            sqlx::query_as(
                "SELECT attempts, last_error FROM approval_outbox \
                 WHERE approval_id = $1 AND delivered_at IS NULL AND last_error IS NOT NULL",
            )
            .bind(approval.to_string())
            .fetch_all(p)
            .await?
        });
        Ok(rows
            .into_iter()
            .filter_map(|(attempts, error)| {
                error.map(|e| (u32::try_from(attempts).unwrap_or(u32::MAX), e))
            })
            .collect())
    }
}

/// A value bound into a listing's query.
enum Bind {
    Text(String),
    Time(DateTime<Utc>),
}
