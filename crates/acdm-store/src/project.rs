//! Reads for the project family (spec §6.3): the overview's pieces that
//! the business reads do not already serve, each one indexed query that
//! selects only what the overview shows (no agenda, body or plan), and
//! the statement of work.

use acdm_core::business::{
    MeetingId, MemberInfo, ReportId, ReportKind, RowImage, RowKey, StatementOfWork,
};
use acdm_core::domain::ProjectId;
use acdm_core::events::{ActorKind, EventId, EventStatus};
use acdm_core::project::{RecentWrite, ReportBrief, UpcomingMeeting};
use chrono::{DateTime, NaiveDate, Utc};

use crate::Store;
use crate::business::{MemberRow, corrupt, parse, user};
use crate::db::with_pool;
use crate::error::StoreError;

crate::db::row! {
    /// A row of the stamp-and-members query: an event count by status, or a
    /// member.
    struct StampOrMemberRow {
        kind: String,
        key: String,
        count: i64,
        role: Option<String>,
        display_name: Option<String>,
    }
}

crate::db::row! {
    struct UpcomingRow {
        id: String,
        title: String,
        starts_at: DateTime<Utc>,
        ends_at: DateTime<Utc>,
        location: Option<String>,
        version: i64,
        attendees: i64,
    }
}

crate::db::row! {
    struct BriefRow {
        id: String,
        title: String,
        kind: String,
        period_start: NaiveDate,
        period_end: NaiveDate,
        version: i64,
        updated_at: DateTime<Utc>,
    }
}

crate::db::row! {
    struct WriteRow {
        id: String,
        op: String,
        target: String,
        user_id: Option<String>,
        agent_name: Option<String>,
        status: String,
        created_at: DateTime<Utc>,
    }
}

/// A project's events counted by status ([`Store::journal_stamp`]): equal
/// stamps mean nothing in the project's business tables changed between
/// the two reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JournalStamp([u64; EventStatus::ALL.len()]);

impl JournalStamp {
    /// The stamp of `(status, count)` rows.
    fn of(rows: Vec<(String, i64)>) -> Result<Self, StoreError> {
        let mut counts = [0u64; EventStatus::ALL.len()];
        for (status, count) in rows {
            let status = parse::<EventStatus>("user_storage_events", "status", &status)?;
            if let Some(slot) = EventStatus::ALL
                .iter()
                .position(|s| *s == status)
                .and_then(|i| counts.get_mut(i))
            {
                *slot = u64::try_from(count).unwrap_or(0);
            }
        }
        Ok(Self(counts))
    }
}

fn limit_of(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

impl Store {
    /// Meetings of `project` starting in `[from, to)`, soonest first, at
    /// most `limit`, with their number of attendees.
    pub async fn upcoming_meetings(
        &self,
        project: ProjectId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<UpcomingMeeting>, StoreError> {
        let rows: Vec<UpcomingRow> = with_pool!(&self.pool, p => sqlx::query_as(
            "SELECT m.id, m.title, m.starts_at, m.ends_at, m.location, m.version, \
             (SELECT COUNT(*) FROM meeting_attendees a WHERE a.meeting_id = m.id) AS attendees \
             FROM meetings m WHERE m.project_id = $1 AND m.starts_at >= $2 AND m.starts_at < $3 \
             ORDER BY m.starts_at, m.id LIMIT $4",
        )
        .bind(project.to_string())
        .bind(from)
        .bind(to)
        .bind(limit_of(limit))
        .fetch_all(p)
        .await?);
        rows.into_iter()
            .map(|row| {
                Ok(UpcomingMeeting {
                    meeting_id: row
                        .id
                        .parse::<MeetingId>()
                        .map_err(|e| corrupt("meetings", format!("id: {e}")))?,
                    title: row.title,
                    starts_at: row.starts_at,
                    ends_at: row.ends_at,
                    location: row.location,
                    attendees: usize::try_from(row.attendees).unwrap_or(0),
                    version: row.version,
                })
            })
            .collect()
    }

    /// The submitted reports of `project` (waiting for approval), newest
    /// first, at most `limit`.
    pub async fn reports_awaiting_approval(
        &self,
        project: ProjectId,
        limit: usize,
    ) -> Result<Vec<ReportBrief>, StoreError> {
        let rows: Vec<BriefRow> = with_pool!(&self.pool, p => sqlx::query_as(
            "SELECT id, title, kind, period_start, period_end, version, updated_at FROM reports \
             WHERE project_id = $1 AND status = 'submitted' ORDER BY created_at DESC, id DESC LIMIT $2",
        )
        .bind(project.to_string())
        .bind(limit_of(limit))
        .fetch_all(p)
        .await?);
        rows.into_iter()
            .map(|row| {
                Ok(ReportBrief {
                    report_id: row
                        .id
                        .parse::<ReportId>()
                        .map_err(|e| corrupt("reports", format!("id: {e}")))?,
                    title: row.title,
                    kind: parse::<ReportKind>("reports", "kind", &row.kind)?,
                    period_start: row.period_start,
                    period_end: row.period_end,
                    version: row.version,
                    updated_at: row.updated_at,
                })
            })
            .collect()
    }

    /// The last `limit` writes agents made in `project` (any status),
    /// newest first.
    pub async fn recent_agent_writes(
        &self,
        project: ProjectId,
        limit: usize,
    ) -> Result<Vec<RecentWrite>, StoreError> {
        let rows: Vec<WriteRow> = with_pool!(&self.pool, p => sqlx::query_as(
            "SELECT id, op, target, user_id, agent_name, status, created_at FROM user_storage_events \
             WHERE project_id = $1 AND actor_kind = $2 ORDER BY created_at DESC, id DESC LIMIT $3",
        )
        .bind(project.to_string())
        .bind(ActorKind::ViaAgent.as_str())
        .bind(limit_of(limit))
        .fetch_all(p)
        .await?);
        rows.into_iter()
            .map(|row| {
                Ok(RecentWrite {
                    event_id: row
                        .id
                        .parse::<EventId>()
                        .map_err(|e| corrupt("user_storage_events", format!("id: {e}")))?,
                    op: row.op,
                    target: row.target,
                    user_id: user("user_storage_events", row.user_id)?,
                    agent_name: row.agent_name,
                    status: parse::<EventStatus>("user_storage_events", "status", &row.status)?,
                    at: row.created_at,
                })
            })
            .collect()
    }

    /// The project's events counted by status, in [`EventStatus::ALL`]'s
    /// order: a stamp that changes with every change to the business
    /// tables of the project. Every such change is an event's step, and
    /// each step either records an event (the total grows) or moves one
    /// along pending → applied/failed, applied → reverted (the counts
    /// shift), so no sequence of changes leaves the stamp as it was. One
    /// index-only query.
    pub async fn journal_stamp(&self, project: ProjectId) -> Result<JournalStamp, StoreError> {
        let rows: Vec<(String, i64)> = with_pool!(&self.pool, p => sqlx::query_as(
            "SELECT status, COUNT(*) FROM user_storage_events WHERE project_id = $1 GROUP BY status",
        )
        .bind(project.to_string())
        .fetch_all(p)
        .await?);
        JournalStamp::of(rows)
    }

    /// [`Store::journal_stamp`] and the project's members (by user id) in
    /// one round trip: what the overview reads on every call.
    pub async fn journal_stamp_and_members(
        &self,
        project: ProjectId,
    ) -> Result<(JournalStamp, Vec<MemberInfo>), StoreError> {
        let rows: Vec<StampOrMemberRow> = with_pool!(&self.pool, p => sqlx::query_as(
            "SELECT 'event' AS kind, status AS key, COUNT(*) AS count, CAST(NULL AS TEXT) AS role, \
             CAST(NULL AS TEXT) AS display_name \
             FROM user_storage_events WHERE project_id = $1 GROUP BY status \
             UNION ALL \
             SELECT 'member', user_id, 0, role, display_name FROM project_members WHERE project_id = $1",
        )
        .bind(project.to_string())
        .fetch_all(p)
        .await?);
        let mut counts = Vec::new();
        let mut members = Vec::new();
        for row in rows {
            if row.kind == "event" {
                counts.push((row.key, row.count));
            } else {
                members.push(
                    MemberRow {
                        user_id: row.key,
                        role: row.role.unwrap_or_default(),
                        display_name: row.display_name,
                    }
                    .into_domain()?,
                );
            }
        }
        members.sort_by(|a, b| a.user_id.as_str().cmp(b.user_id.as_str()));
        Ok((JournalStamp::of(counts)?, members))
    }

    /// The statement of work of `project` (empty until written).
    pub async fn sow(&self, project: ProjectId) -> Result<StatementOfWork, StoreError> {
        match self.row(project, &RowKey::Sow).await? {
            Some(RowImage::Sow(sow)) => Ok(sow),
            _ => Err(StoreError::NotFound {
                what: "project",
                key: project.to_string(),
            }),
        }
    }
}
