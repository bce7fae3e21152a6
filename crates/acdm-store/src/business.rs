//! Business objects (spec §6.2): reads for the BFF, the operator API and
//! the overview, and the one write path — [`Store::apply_rows`], which
//! applies an event's row changes and marks the event applied in one
//! transaction (the journal calls it; nothing else writes these tables).
//!
//! Every read takes the project's id and filters on it: an id from another
//! project is simply not found.

use acdm_core::UserId;
use acdm_core::business::{
    Cursor, FileId, Meeting, MeetingFile, MeetingId, MemberInfo, Milestone, MilestoneStatus,
    ProjectMeta, ProjectStatus, Report, ReportDetails, ReportId, ReportKind, ReportStatus,
    ReportTransition, RowImage, RowKey, StatementOfWork,
};
use acdm_core::domain::{MemberRole, ProjectId, ProjectRef};
use acdm_core::events::{EventId, Step, StorageEvent};
use chrono::{DateTime, NaiveDate, Utc};

use crate::Store;
use crate::db::{Tx, with_pool, with_tx};
use crate::error::StoreError;

/// A page of a list: the items, where the next page starts, how many
/// there are in all (for the same filters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The items of this page.
    pub items: Vec<T>,
    /// The cursor of the next page; `None` at the end.
    pub next: Option<Cursor>,
    /// How many items the filters select, across all pages.
    pub total: u64,
}

/// A meeting or a milestone due date, for the calendar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CalendarItem {
    /// A meeting in the window.
    Meeting(Meeting),
    /// A milestone due in the window.
    Milestone(Milestone),
}

pub(crate) fn corrupt(table: &'static str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::corrupt(table, detail)
}

pub(crate) fn user(
    table: &'static str,
    value: Option<String>,
) -> Result<Option<UserId>, StoreError> {
    value
        .as_deref()
        .map(UserId::parse)
        .transpose()
        .map_err(|e| corrupt(table, format!("user id: {e}")))
}

pub(crate) fn parse<T: std::str::FromStr>(
    table: &'static str,
    column: &str,
    value: &str,
) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    value
        .parse()
        .map_err(|e| corrupt(table, format!("{column}: {e}")))
}

crate::db::row! {
    struct MeetingRow {
        id: String,
        title: String,
        starts_at: DateTime<Utc>,
        ends_at: DateTime<Utc>,
        location: Option<String>,
        agenda: Option<String>,
        notes: Option<String>,
        version: i64,
        created_by: Option<String>,
        created_at: DateTime<Utc>,
        updated_by: Option<String>,
        updated_at: DateTime<Utc>,
    }
}

const MEETING_COLUMNS: &str = "id, title, starts_at, ends_at, location, agenda, notes, version, \
     created_by, created_at, updated_by, updated_at";

impl MeetingRow {
    fn into_domain(self, attendees: Vec<UserId>) -> Result<Meeting, StoreError> {
        Ok(Meeting {
            meeting_id: parse("meetings", "id", &self.id)?,
            title: self.title,
            starts_at: self.starts_at,
            ends_at: self.ends_at,
            location: self.location,
            agenda: self.agenda,
            notes: self.notes,
            attendees,
            version: self.version,
            created_by: user("meetings", self.created_by)?,
            created_at: self.created_at,
            updated_by: user("meetings", self.updated_by)?,
            updated_at: self.updated_at,
        })
    }
}

crate::db::row! {
    struct FileRow {
        id: String,
        meeting_id: String,
        mount: String,
        rel_path: String,
        name: String,
        size: i64,
        etag: Option<String>,
        content_type: Option<String>,
        added_by: Option<String>,
        added_at: DateTime<Utc>,
        missing: bool,
    }
}

const FILE_COLUMNS: &str =
    "id, meeting_id, mount, rel_path, name, size, etag, content_type, added_by, added_at, missing";

impl FileRow {
    fn into_domain(self) -> Result<MeetingFile, StoreError> {
        Ok(MeetingFile {
            file_id: parse("meeting_files", "id", &self.id)?,
            meeting_id: parse("meeting_files", "meeting_id", &self.meeting_id)?,
            mount: self.mount,
            rel_path: self.rel_path,
            name: self.name,
            size: u64::try_from(self.size).map_err(|e| corrupt("meeting_files", e))?,
            etag: self.etag,
            content_type: self.content_type,
            added_by: user("meeting_files", self.added_by)?,
            added_at: self.added_at,
            missing: self.missing,
        })
    }
}

crate::db::row! {
    struct ReportRow {
        id: String,
        title: String,
        kind: String,
        period_start: NaiveDate,
        period_end: NaiveDate,
        body: String,
        status: String,
        version: i64,
        created_by: Option<String>,
        created_at: DateTime<Utc>,
        updated_at: DateTime<Utc>,
    }
}

const REPORT_COLUMNS: &str = "id, title, kind, period_start, period_end, body, status, version, \
     created_by, created_at, updated_at";

impl ReportRow {
    fn into_domain(self) -> Result<Report, StoreError> {
        Ok(Report {
            report_id: parse("reports", "id", &self.id)?,
            title: self.title,
            kind: parse::<ReportKind>("reports", "kind", &self.kind)?,
            period_start: self.period_start,
            period_end: self.period_end,
            body: self.body,
            status: parse::<ReportStatus>("reports", "status", &self.status)?,
            version: self.version,
            created_by: user("reports", self.created_by)?,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

crate::db::row! {
    struct TransitionRow {
        report_id: String,
        seq: i64,
        from_status: String,
        to_status: String,
        user_id: Option<String>,
        comment: Option<String>,
        at: DateTime<Utc>,
    }
}

impl TransitionRow {
    fn into_domain(self) -> Result<ReportTransition, StoreError> {
        Ok(ReportTransition {
            report_id: parse("report_transitions", "report_id", &self.report_id)?,
            seq: u32::try_from(self.seq).map_err(|e| corrupt("report_transitions", e))?,
            from: parse("report_transitions", "from_status", &self.from_status)?,
            to: parse("report_transitions", "to_status", &self.to_status)?,
            user_id: user("report_transitions", self.user_id)?,
            comment: self.comment,
            at: self.at,
        })
    }
}

crate::db::row! {
    struct MilestoneRow {
        seq: i64,
        title: String,
        due_date: Option<NaiveDate>,
        status: String,
        acceptance_criteria: String,
        closed_at: Option<DateTime<Utc>>,
        closed_by: Option<String>,
    }
}

impl MilestoneRow {
    fn into_domain(self) -> Result<Milestone, StoreError> {
        Ok(Milestone {
            seq: u32::try_from(self.seq).map_err(|e| corrupt("milestones", e))?,
            title: self.title,
            due_date: self.due_date,
            status: parse::<MilestoneStatus>("milestones", "status", &self.status)?,
            acceptance_criteria: serde_json::from_str(&self.acceptance_criteria)
                .map_err(|e| corrupt("milestones", format!("acceptance_criteria: {e}")))?,
            closed_at: self.closed_at,
            closed_by: user("milestones", self.closed_by)?,
        })
    }
}

crate::db::row! {
    struct MetaRow {
        status: String,
        description: String,
        start_date: Option<NaiveDate>,
        end_date: Option<NaiveDate>,
        time_zone: String,
        updated_at: DateTime<Utc>,
    }
}

crate::db::row! {
    struct SowRow {
        summary: String,
        deliverables: String,
        updated_at: DateTime<Utc>,
    }
}

impl SowRow {
    fn into_domain(self) -> Result<StatementOfWork, StoreError> {
        Ok(StatementOfWork {
            summary: self.summary,
            deliverables: serde_json::from_str(&self.deliverables)
                .map_err(|e| corrupt("statements_of_work", format!("deliverables: {e}")))?,
            updated_at: self.updated_at,
        })
    }
}

/// The statement of work a project has before anyone writes it.
fn empty_sow(created_at: DateTime<Utc>) -> StatementOfWork {
    StatementOfWork {
        summary: String::new(),
        deliverables: Vec::new(),
        updated_at: created_at,
    }
}

crate::db::row! {
    /// A project joined with its meta row (absent until someone sets it).
    struct JoinedMetaRow {
        created_at: DateTime<Utc>,
        status: Option<String>,
        description: Option<String>,
        start_date: Option<NaiveDate>,
        end_date: Option<NaiveDate>,
        time_zone: Option<String>,
        updated_at: Option<DateTime<Utc>>,
    }
}

crate::db::row! {
    pub(crate) struct MemberRow {
        pub(crate) user_id: String,
        pub(crate) role: String,
        pub(crate) display_name: Option<String>,
    }
}

impl MemberRow {
    pub(crate) fn into_domain(self) -> Result<MemberInfo, StoreError> {
        Ok(MemberInfo {
            user_id: UserId::parse(&self.user_id)
                .map_err(|e| corrupt("project_members", format!("user_id: {e}")))?,
            display_name: self.display_name,
            role: parse::<MemberRole>("project_members", "role", &self.role)?,
        })
    }
}

/// The meta a project has before anyone sets it.
fn default_meta(project: &ProjectRef, created_at: DateTime<Utc>) -> ProjectMeta {
    ProjectMeta {
        slug: project.slug.to_string(),
        name: project.name.to_string(),
        status: ProjectStatus::Planning,
        description: String::new(),
        start_date: None,
        end_date: None,
        time_zone: "UTC".to_owned(),
        updated_at: created_at,
    }
}

fn cursor_of(key: DateTime<Utc>, id: impl std::fmt::Display) -> Cursor {
    Cursor {
        key: key.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        id: id.to_string(),
    }
}

/// The sort key and id a cursor names; a cursor whose key is no time is
/// not one this store handed out.
fn cursor_parts(cursor: &Cursor) -> Result<(DateTime<Utc>, String), StoreError> {
    let at = DateTime::parse_from_rfc3339(&cursor.key)
        .map_err(|_| StoreError::InvalidCursor)?
        .with_timezone(&Utc);
    uuid::Uuid::parse_str(&cursor.id).map_err(|_| StoreError::InvalidCursor)?;
    Ok((at, cursor.id.clone()))
}

// ---------------------------------------------------------------------
// Reads inside a transaction: the row as it is now, by key.
// ---------------------------------------------------------------------

async fn attendees_in(tx: &mut Tx, meeting: &str) -> Result<Vec<UserId>, StoreError> {
    let ids: Vec<String> = with_tx!(tx, t => sqlx::query_scalar(
        "SELECT user_id FROM meeting_attendees WHERE meeting_id = $1 ORDER BY position",
    )
    .bind(meeting)
    .fetch_all(&mut **t)
    .await?);
    ids.iter()
        .map(|id| UserId::parse(id).map_err(|e| corrupt("meeting_attendees", e)))
        .collect()
}

async fn load_row(
    tx: &mut Tx,
    project: ProjectId,
    key: &RowKey,
) -> Result<Option<RowImage>, StoreError> {
    let project_id = project.to_string();
    // PostgreSQL: lock what is read, so a concurrent change waits and then
    // sees this one (SQLite's write transactions are serial already).
    let lock = match tx {
        Tx::Postgres(_, true) => " FOR UPDATE",
        _ => "",
    };
    Ok(match key {
        RowKey::Meeting(id) => {
            let sql = format!(
                "SELECT {MEETING_COLUMNS} FROM meetings WHERE id = $1 AND project_id = $2{lock}"
            );
            let row: Option<MeetingRow> = with_tx!(tx, t => sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id.to_string())
                .bind(&project_id)
                .fetch_optional(&mut **t)
                .await?);
            match row {
                Some(row) => {
                    let attendees = attendees_in(tx, &id.to_string()).await?;
                    Some(RowImage::Meeting(row.into_domain(attendees)?))
                }
                None => None,
            }
        }
        RowKey::MeetingFile(id) => {
            let sql = format!(
                "SELECT {FILE_COLUMNS} FROM meeting_files WHERE id = $1 AND project_id = $2{lock}"
            );
            let row: Option<FileRow> = with_tx!(tx, t => sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id.to_string())
                .bind(&project_id)
                .fetch_optional(&mut **t)
                .await?);
            row.map(FileRow::into_domain)
                .transpose()?
                .map(RowImage::MeetingFile)
        }
        RowKey::Report(id) => {
            let sql = format!(
                "SELECT {REPORT_COLUMNS} FROM reports WHERE id = $1 AND project_id = $2{lock}"
            );
            let row: Option<ReportRow> = with_tx!(tx, t => sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id.to_string())
                .bind(&project_id)
                .fetch_optional(&mut **t)
                .await?);
            row.map(ReportRow::into_domain)
                .transpose()?
                .map(RowImage::Report)
        }
        RowKey::ReportTransition(id, seq) => {
            let row: Option<TransitionRow> = with_tx!(tx, t => sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT t.report_id, t.seq, t.from_status, t.to_status, t.user_id, t.comment, t.at \
                 FROM report_transitions t JOIN reports r ON r.id = t.report_id \
                 WHERE t.report_id = $1 AND t.seq = $2 AND r.project_id = $3{lock}",
            )))
            .bind(id.to_string())
            .bind(i64::from(*seq))
            .bind(&project_id)
            .fetch_optional(&mut **t)
            .await?);
            row.map(TransitionRow::into_domain)
                .transpose()?
                .map(RowImage::ReportTransition)
        }
        RowKey::Milestone(seq) => {
            let row: Option<MilestoneRow> = with_tx!(tx, t => sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT seq, title, due_date, status, acceptance_criteria, closed_at, closed_by \
                 FROM milestones WHERE project_id = $1 AND seq = $2{lock}",
            )))
            .bind(&project_id)
            .bind(i64::from(*seq))
            .fetch_optional(&mut **t)
            .await?);
            row.map(MilestoneRow::into_domain)
                .transpose()?
                .map(RowImage::Milestone)
        }
        RowKey::ProjectMeta => {
            let project_row: Option<(String, String, DateTime<Utc>)> = with_tx!(tx, t => sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT slug, name, created_at FROM projects WHERE id = $1{lock}",
            )))
            .bind(&project_id)
            .fetch_optional(&mut **t)
            .await?);
            let Some((slug, name, created_at)) = project_row else {
                return Ok(None);
            };
            let row: Option<MetaRow> = with_tx!(tx, t => sqlx::query_as(
                "SELECT status, description, start_date, end_date, time_zone, updated_at \
                 FROM project_meta WHERE project_id = $1",
            )
            .bind(&project_id)
            .fetch_optional(&mut **t)
            .await?);
            let mut meta = ProjectMeta {
                slug,
                name,
                status: ProjectStatus::Planning,
                description: String::new(),
                start_date: None,
                end_date: None,
                time_zone: "UTC".to_owned(),
                updated_at: created_at,
            };
            if let Some(row) = row {
                meta.status = parse("project_meta", "status", &row.status)?;
                meta.description = row.description;
                meta.start_date = row.start_date;
                meta.end_date = row.end_date;
                meta.time_zone = row.time_zone;
                meta.updated_at = row.updated_at;
            }
            // The meta always exists: writing it is an update.
            Some(RowImage::ProjectMeta(meta))
        }
        RowKey::Sow => {
            let created: Option<DateTime<Utc>> = with_tx!(tx, t => sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT created_at FROM projects WHERE id = $1{lock}",
            )))
            .bind(&project_id)
            .fetch_optional(&mut **t)
            .await?);
            let Some(created) = created else {
                return Ok(None);
            };
            let row: Option<SowRow> = with_tx!(tx, t => sqlx::query_as(
                "SELECT summary, deliverables, updated_at FROM statements_of_work WHERE project_id = $1",
            )
            .bind(&project_id)
            .fetch_optional(&mut **t)
            .await?);
            // The statement always exists (empty until written): writing it
            // is an update.
            Some(RowImage::Sow(match row {
                Some(row) => row.into_domain()?,
                None => empty_sow(created),
            }))
        }
        RowKey::Member(user_id) => {
            let row: Option<MemberRow> = with_tx!(tx, t => sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT user_id, role, display_name FROM project_members \
                 WHERE project_id = $1 AND user_id = $2{lock}",
            )))
            .bind(&project_id)
            .bind(user_id.as_str())
            .fetch_optional(&mut **t)
            .await?);
            row.map(MemberRow::into_domain)
                .transpose()?
                .map(RowImage::Member)
        }
    })
}

// ---------------------------------------------------------------------
// Writes inside a transaction.
// ---------------------------------------------------------------------

async fn write_attendees(tx: &mut Tx, meeting: &Meeting) -> Result<(), StoreError> {
    let id = meeting.meeting_id.to_string();
    with_tx!(tx, t => sqlx::query("DELETE FROM meeting_attendees WHERE meeting_id = $1")
        .bind(&id)
        .execute(&mut **t)
        .await?.rows_affected());
    for (position, attendee) in meeting.attendees.iter().enumerate() {
        let position = i64::try_from(position).map_err(|e| corrupt("meeting_attendees", e))?;
        with_tx!(tx, t => sqlx::query(
            "INSERT INTO meeting_attendees (meeting_id, user_id, position) VALUES ($1, $2, $3)",
        )
        .bind(&id)
        .bind(attendee.as_str())
        .bind(position)
        .execute(&mut **t)
        .await?.rows_affected());
    }
    Ok(())
}

async fn insert_row(tx: &mut Tx, project: ProjectId, row: &RowImage) -> Result<(), StoreError> {
    let project_id = project.to_string();
    match row {
        RowImage::Meeting(m) => {
            with_tx!(tx, t => sqlx::query(
                "INSERT INTO meetings (id, project_id, title, starts_at, ends_at, location, agenda, notes, \
                 version, created_by, created_at, updated_by, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            )
            .bind(m.meeting_id.to_string())
            .bind(&project_id)
            .bind(&m.title)
            .bind(m.starts_at)
            .bind(m.ends_at)
            .bind(m.location.as_deref())
            .bind(m.agenda.as_deref())
            .bind(m.notes.as_deref())
            .bind(m.version)
            .bind(m.created_by.as_ref().map(UserId::as_str))
            .bind(m.created_at)
            .bind(m.updated_by.as_ref().map(UserId::as_str))
            .bind(m.updated_at)
            .execute(&mut **t)
            .await?.rows_affected());
            write_attendees(tx, m).await?;
        }
        RowImage::MeetingFile(f) => {
            let inserted = with_tx!(tx, t => sqlx::query(
                "INSERT INTO meeting_files (id, meeting_id, project_id, mount, rel_path, name, size, etag, \
                 content_type, added_by, added_at, missing, checked_at) \
                 SELECT $1, m.id, m.project_id, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL \
                 FROM meetings m WHERE m.id = $2 AND m.project_id = $12",
            )
            .bind(f.file_id.to_string())
            .bind(f.meeting_id.to_string())
            .bind(&f.mount)
            .bind(&f.rel_path)
            .bind(&f.name)
            .bind(i64::try_from(f.size).map_err(|e| corrupt("meeting_files", e))?)
            .bind(f.etag.as_deref())
            .bind(f.content_type.as_deref())
            .bind(f.added_by.as_ref().map(UserId::as_str))
            .bind(f.added_at)
            .bind(f.missing)
            .bind(&project_id)
            .execute(&mut **t)
            .await?.rows_affected());
            if inserted == 0 {
                return Err(StoreError::Stale {
                    what: row.key().to_string(),
                    detail: format!("its meeting {} is gone", f.meeting_id),
                });
            }
        }
        RowImage::Report(r) => {
            with_tx!(tx, t => sqlx::query(
                "INSERT INTO reports (id, project_id, title, kind, period_start, period_end, body, status, \
                 version, created_by, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            )
            .bind(r.report_id.to_string())
            .bind(&project_id)
            .bind(&r.title)
            .bind(r.kind.as_str())
            .bind(r.period_start)
            .bind(r.period_end)
            .bind(&r.body)
            .bind(r.status.as_str())
            .bind(r.version)
            .bind(r.created_by.as_ref().map(UserId::as_str))
            .bind(r.created_at)
            .bind(r.updated_at)
            .execute(&mut **t)
            .await?.rows_affected());
        }
        RowImage::ReportTransition(tr) => {
            let inserted = with_tx!(tx, t => sqlx::query(
                "INSERT INTO report_transitions (report_id, seq, from_status, to_status, user_id, comment, at) \
                 SELECT r.id, $2, $3, $4, $5, $6, $7 FROM reports r WHERE r.id = $1 AND r.project_id = $8",
            )
            .bind(tr.report_id.to_string())
            .bind(i64::from(tr.seq))
            .bind(tr.from.as_str())
            .bind(tr.to.as_str())
            .bind(tr.user_id.as_ref().map(UserId::as_str))
            .bind(tr.comment.as_deref())
            .bind(tr.at)
            .bind(&project_id)
            .execute(&mut **t)
            .await?.rows_affected());
            if inserted == 0 {
                return Err(StoreError::Stale {
                    what: row.key().to_string(),
                    detail: format!("its report {} is gone", tr.report_id),
                });
            }
        }
        RowImage::Milestone(m) => {
            with_tx!(tx, t => sqlx::query(
                "INSERT INTO milestones (project_id, seq, title, due_date, status, acceptance_criteria, \
                 closed_at, closed_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(&project_id)
            .bind(i64::from(m.seq))
            .bind(&m.title)
            .bind(m.due_date)
            .bind(m.status.as_str())
            .bind(serde_json::to_string(&m.acceptance_criteria).map_err(|e| corrupt("milestones", e))?)
            .bind(m.closed_at)
            .bind(m.closed_by.as_ref().map(UserId::as_str))
            .execute(&mut **t)
            .await?.rows_affected());
        }
        RowImage::ProjectMeta(_) | RowImage::Member(_) | RowImage::Sow(_) => {
            return Err(StoreError::Conflict(format!(
                "{} always exists; it can only be changed",
                row.key()
            )));
        }
    }
    Ok(())
}

async fn update_row(tx: &mut Tx, project: ProjectId, row: &RowImage) -> Result<(), StoreError> {
    let project_id = project.to_string();
    let changed = match row {
        RowImage::Meeting(m) => {
            let n = with_tx!(tx, t => sqlx::query(
                "UPDATE meetings SET title = $1, starts_at = $2, ends_at = $3, location = $4, agenda = $5, \
                 notes = $6, version = $7, created_by = $8, created_at = $9, updated_by = $10, updated_at = $11 \
                 WHERE id = $12 AND project_id = $13",
            )
            .bind(&m.title)
            .bind(m.starts_at)
            .bind(m.ends_at)
            .bind(m.location.as_deref())
            .bind(m.agenda.as_deref())
            .bind(m.notes.as_deref())
            .bind(m.version)
            .bind(m.created_by.as_ref().map(UserId::as_str))
            .bind(m.created_at)
            .bind(m.updated_by.as_ref().map(UserId::as_str))
            .bind(m.updated_at)
            .bind(m.meeting_id.to_string())
            .bind(&project_id)
            .execute(&mut **t)
            .await?
            .rows_affected());
            write_attendees(tx, m).await?;
            n
        }
        RowImage::MeetingFile(f) => with_tx!(tx, t => sqlx::query(
            "UPDATE meeting_files SET mount = $1, rel_path = $2, name = $3, size = $4, etag = $5, \
             content_type = $6, added_by = $7, added_at = $8, missing = $9 \
             WHERE id = $10 AND project_id = $11 AND meeting_id = $12",
        )
        .bind(&f.mount)
        .bind(&f.rel_path)
        .bind(&f.name)
        .bind(i64::try_from(f.size).map_err(|e| corrupt("meeting_files", e))?)
        .bind(f.etag.as_deref())
        .bind(f.content_type.as_deref())
        .bind(f.added_by.as_ref().map(UserId::as_str))
        .bind(f.added_at)
        .bind(f.missing)
        .bind(f.file_id.to_string())
        .bind(&project_id)
        .bind(f.meeting_id.to_string())
        .execute(&mut **t)
        .await?
        .rows_affected()),
        RowImage::Report(r) => with_tx!(tx, t => sqlx::query(
            "UPDATE reports SET title = $1, kind = $2, period_start = $3, period_end = $4, body = $5, \
             status = $6, version = $7, created_by = $8, created_at = $9, updated_at = $10 \
             WHERE id = $11 AND project_id = $12",
        )
        .bind(&r.title)
        .bind(r.kind.as_str())
        .bind(r.period_start)
        .bind(r.period_end)
        .bind(&r.body)
        .bind(r.status.as_str())
        .bind(r.version)
        .bind(r.created_by.as_ref().map(UserId::as_str))
        .bind(r.created_at)
        .bind(r.updated_at)
        .bind(r.report_id.to_string())
        .bind(&project_id)
        .execute(&mut **t)
        .await?
        .rows_affected()),
        RowImage::ReportTransition(tr) => with_tx!(tx, t => sqlx::query(
            "UPDATE report_transitions SET from_status = $1, to_status = $2, user_id = $3, comment = $4, at = $5 \
             WHERE report_id = $6 AND seq = $7 \
             AND report_id IN (SELECT id FROM reports WHERE project_id = $8)",
        )
        .bind(tr.from.as_str())
        .bind(tr.to.as_str())
        .bind(tr.user_id.as_ref().map(UserId::as_str))
        .bind(tr.comment.as_deref())
        .bind(tr.at)
        .bind(tr.report_id.to_string())
        .bind(i64::from(tr.seq))
        .bind(&project_id)
        .execute(&mut **t)
        .await?
        .rows_affected()),
        RowImage::Milestone(m) => with_tx!(tx, t => sqlx::query(
            "UPDATE milestones SET title = $1, due_date = $2, status = $3, acceptance_criteria = $4, \
             closed_at = $5, closed_by = $6 WHERE project_id = $7 AND seq = $8",
        )
        .bind(&m.title)
        .bind(m.due_date)
        .bind(m.status.as_str())
        .bind(serde_json::to_string(&m.acceptance_criteria).map_err(|e| corrupt("milestones", e))?)
        .bind(m.closed_at)
        .bind(m.closed_by.as_ref().map(UserId::as_str))
        .bind(&project_id)
        .bind(i64::from(m.seq))
        .execute(&mut **t)
        .await?
        .rows_affected()),
        RowImage::ProjectMeta(meta) => with_tx!(tx, t => sqlx::query(
            "INSERT INTO project_meta (project_id, status, description, start_date, end_date, time_zone, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (project_id) DO UPDATE SET status = excluded.status, description = excluded.description, \
             start_date = excluded.start_date, end_date = excluded.end_date, time_zone = excluded.time_zone, \
             updated_at = excluded.updated_at",
        )
        .bind(&project_id)
        .bind(meta.status.as_str())
        .bind(&meta.description)
        .bind(meta.start_date)
        .bind(meta.end_date)
        .bind(&meta.time_zone)
        .bind(meta.updated_at)
        .execute(&mut **t)
        .await?
        .rows_affected()),
        RowImage::Sow(sow) => with_tx!(tx, t => sqlx::query(
            "INSERT INTO statements_of_work (project_id, summary, deliverables, updated_at) \
             VALUES ($1, $2, $3, $4) \
             ON CONFLICT (project_id) DO UPDATE SET summary = excluded.summary, \
             deliverables = excluded.deliverables, updated_at = excluded.updated_at",
        )
        .bind(&project_id)
        .bind(&sow.summary)
        .bind(serde_json::to_string(&sow.deliverables).map_err(|e| corrupt("statements_of_work", e))?)
        .bind(sow.updated_at)
        .execute(&mut **t)
        .await?
        .rows_affected()),
        RowImage::Member(member) => with_tx!(tx, t => sqlx::query(
            "UPDATE project_members SET display_name = $1 WHERE project_id = $2 AND user_id = $3",
        )
        .bind(member.display_name.as_deref())
        .bind(&project_id)
        .bind(member.user_id.as_str())
        .execute(&mut **t)
        .await?
        .rows_affected()),
    };
    if changed == 0 {
        return Err(StoreError::Stale {
            what: row.key().to_string(),
            detail: "it is no longer there".to_owned(),
        });
    }
    Ok(())
}

async fn delete_row(tx: &mut Tx, project: ProjectId, key: &RowKey) -> Result<(), StoreError> {
    let project_id = project.to_string();
    match key {
        RowKey::Meeting(id) => {
            // Its files must have been removed by earlier steps of the same
            // event (the foreign key refuses otherwise: no ghosts).
            with_tx!(tx, t => sqlx::query("DELETE FROM meetings WHERE id = $1 AND project_id = $2")
                .bind(id.to_string())
                .bind(&project_id)
                .execute(&mut **t)
                .await?.rows_affected());
        }
        RowKey::MeetingFile(id) => {
            with_tx!(tx, t => sqlx::query("DELETE FROM meeting_files WHERE id = $1 AND project_id = $2")
                .bind(id.to_string())
                .bind(&project_id)
                .execute(&mut **t)
                .await?.rows_affected());
        }
        RowKey::Report(id) => {
            with_tx!(tx, t => sqlx::query("DELETE FROM reports WHERE id = $1 AND project_id = $2")
                .bind(id.to_string())
                .bind(&project_id)
                .execute(&mut **t)
                .await?.rows_affected());
        }
        RowKey::ReportTransition(id, seq) => {
            with_tx!(tx, t => sqlx::query(
                "DELETE FROM report_transitions WHERE report_id = $1 AND seq = $2 \
                 AND report_id IN (SELECT id FROM reports WHERE project_id = $3)",
            )
            .bind(id.to_string())
            .bind(i64::from(*seq))
            .bind(&project_id)
            .execute(&mut **t)
            .await?.rows_affected());
        }
        RowKey::Milestone(seq) => {
            with_tx!(tx, t => sqlx::query("DELETE FROM milestones WHERE project_id = $1 AND seq = $2")
                .bind(&project_id)
                .bind(i64::from(*seq))
                .execute(&mut **t)
                .await?.rows_affected());
        }
        RowKey::ProjectMeta | RowKey::Member(_) | RowKey::Sow => {
            return Err(StoreError::Conflict(format!(
                "{key} always exists; it can only be changed"
            )));
        }
    }
    Ok(())
}

/// Applies one row change, after checking the row still matches `before`.
async fn apply_row(
    tx: &mut Tx,
    project: ProjectId,
    before: Option<&RowImage>,
    after: Option<&RowImage>,
) -> Result<(), StoreError> {
    let key = match (before, after) {
        (Some(row), _) | (None, Some(row)) => row.key(),
        (None, None) => return Ok(()),
    };
    let current = load_row(tx, project, &key).await?;
    match (before, &current) {
        (None, None) => {}
        (Some(want), Some(now)) if want.still_matches(now) => {}
        (None, Some(_)) => {
            return Err(StoreError::Stale {
                what: key.to_string(),
                detail: "it exists already".to_owned(),
            });
        }
        (Some(_), None) => {
            return Err(StoreError::Stale {
                what: key.to_string(),
                detail: "it is no longer there".to_owned(),
            });
        }
        (Some(_), Some(now)) => {
            return Err(StoreError::Stale {
                what: key.to_string(),
                detail: match now {
                    RowImage::Meeting(m) => format!("it is at version {} now", m.version),
                    RowImage::Report(r) => format!("it is at version {} now", r.version),
                    _ => "it was changed since".to_owned(),
                },
            });
        }
    }
    let written = match (current.is_some(), after) {
        (_, None) => delete_row(tx, project, &key).await,
        (false, Some(row)) => insert_row(tx, project, row).await,
        (true, Some(row)) => update_row(tx, project, row).await,
    };
    written.map_err(|error| broken_rule(error, &key))
}

/// A write the database refused for one of its rules (a foreign key — a
/// meeting that still has files, a file whose meeting is gone —, a
/// uniqueness — a second current milestone —, a check) is a plan that no
/// longer fits the data: `Stale`, answered as a conflict, with the whole
/// transaction rolled back. The same on both databases (PostgreSQL meets
/// some of these races only here; SQLite's serial writers see them as a
/// changed row first).
fn broken_rule(error: StoreError, key: &RowKey) -> StoreError {
    let rule = match &error {
        StoreError::Conflict(_) => Some("another row has the same key"),
        StoreError::Database(sqlx::Error::Database(db)) => match db.kind() {
            sqlx::error::ErrorKind::ForeignKeyViolation => {
                Some("rows that belong to it (or that it belongs to) changed")
            }
            sqlx::error::ErrorKind::UniqueViolation => Some("another row has the same key"),
            sqlx::error::ErrorKind::CheckViolation | sqlx::error::ErrorKind::NotNullViolation => {
                Some("the new values break a rule of the data")
            }
            _ => None,
        },
        _ => None,
    };
    match rule {
        Some(rule) => StoreError::Stale {
            what: key.to_string(),
            detail: rule.to_owned(),
        },
        None => error,
    }
}

impl Store {
    /// Applies the row steps of event `id` (of `project`) and marks it
    /// applied with `result`, all in one transaction: either every row
    /// changes and the event is applied, or nothing changes and the event
    /// stays pending. A row that no longer matches its step's `before` is
    /// [`StoreError::Stale`] (nothing changed).
    pub async fn apply_rows(
        &self,
        id: EventId,
        project: ProjectId,
        steps: &[Step],
        result: Option<&serde_json::Value>,
    ) -> Result<StorageEvent, StoreError> {
        let mut tx = Tx::begin(&self.pool).await?;
        for step in steps {
            if let Step::Row { before, after } = step {
                apply_row(&mut tx, project, before.as_deref(), after.as_deref()).await?;
            }
        }
        let result = result
            .map(|r| serde_json::to_string(r).map_err(|e| corrupt("user_storage_events", e)))
            .transpose()?;
        let event = self
            .finish_in(
                &mut tx,
                id,
                acdm_core::events::EventStatus::Applied,
                result,
                None,
            )
            .await?;
        tx.commit().await?;
        Ok(event)
    }

    /// Whether every row step's `before` still matches the stored row (a
    /// revert's early check; [`Store::apply_rows`] checks again).
    pub async fn rows_still_match(
        &self,
        project: ProjectId,
        steps: &[Step],
    ) -> Result<(), StoreError> {
        let mut tx = Tx::begin_read(&self.pool).await?;
        for step in steps {
            let Step::Row { before, after } = step else {
                continue;
            };
            let key = match (before, after) {
                (Some(row), _) | (None, Some(row)) => row.key(),
                (None, None) => continue,
            };
            let current = load_row(&mut tx, project, &key).await?;
            let fine = match (before, &current) {
                (None, None) => true,
                (Some(want), Some(now)) => want.still_matches(now),
                _ => false,
            };
            if !fine {
                return Err(StoreError::Stale {
                    what: key.to_string(),
                    detail: "it was changed since".to_owned(),
                });
            }
        }
        Ok(())
    }

    /// The current image of one row (`None` when absent).
    pub async fn row(
        &self,
        project: ProjectId,
        key: &RowKey,
    ) -> Result<Option<RowImage>, StoreError> {
        let mut tx = Tx::begin_read(&self.pool).await?;
        load_row(&mut tx, project, key).await
    }

    /// The acting user's role in `project`, `None` for a non-member.
    pub async fn member_role(
        &self,
        project: ProjectId,
        user: &UserId,
    ) -> Result<Option<MemberRole>, StoreError> {
        let role: Option<String> = with_pool!(&self.pool, p => sqlx::query_scalar(
            "SELECT role FROM project_members WHERE project_id = $1 AND user_id = $2",
        )
        .bind(project.to_string())
        .bind(user.as_str())
        .fetch_optional(p)
        .await?);
        role.map(|r| parse::<MemberRole>("project_members", "role", &r))
            .transpose()
    }

    /// The project's members with their names, by user id.
    pub async fn members_info(&self, project: ProjectId) -> Result<Vec<MemberInfo>, StoreError> {
        let rows: Vec<MemberRow> = with_pool!(&self.pool, p => sqlx::query_as(
            "SELECT user_id, role, display_name FROM project_members WHERE project_id = $1 ORDER BY user_id",
        )
        .bind(project.to_string())
        .fetch_all(p)
        .await?);
        rows.into_iter().map(MemberRow::into_domain).collect()
    }

    /// The project's meta (the defaults until someone sets it).
    /// One query (the project joined with its meta row, if any), not a
    /// transaction: the overview reads it on every prompt.
    pub async fn project_meta(&self, project: &ProjectRef) -> Result<ProjectMeta, StoreError> {
        let row: Option<JoinedMetaRow> = with_pool!(&self.pool, p => sqlx::query_as(
            "SELECT p.created_at, m.status, m.description, m.start_date, m.end_date, m.time_zone, \
             m.updated_at FROM projects p LEFT JOIN project_meta m ON m.project_id = p.id WHERE p.id = $1",
        )
        .bind(project.id.to_string())
        .fetch_optional(p)
        .await?);
        let Some(row) = row else {
            return Ok(default_meta(project, self.now()));
        };
        let mut meta = default_meta(project, row.created_at);
        if let (Some(status), Some(description), Some(time_zone), Some(updated_at)) =
            (row.status, row.description, row.time_zone, row.updated_at)
        {
            meta.status = parse("project_meta", "status", &status)?;
            meta.description = description;
            meta.start_date = row.start_date;
            meta.end_date = row.end_date;
            meta.time_zone = time_zone;
            meta.updated_at = updated_at;
        }
        Ok(meta)
    }

    /// The project's milestones, by `seq`.
    pub async fn milestones(&self, project: ProjectId) -> Result<Vec<Milestone>, StoreError> {
        let rows: Vec<MilestoneRow> = with_pool!(&self.pool, p => sqlx::query_as(
            "SELECT seq, title, due_date, status, acceptance_criteria, closed_at, closed_by \
             FROM milestones WHERE project_id = $1 ORDER BY seq",
        )
        .bind(project.to_string())
        .fetch_all(p)
        .await?);
        rows.into_iter().map(MilestoneRow::into_domain).collect()
    }

    /// One meeting with its attendees.
    pub async fn meeting(
        &self,
        project: ProjectId,
        id: MeetingId,
    ) -> Result<Option<Meeting>, StoreError> {
        match self.row(project, &RowKey::Meeting(id)).await? {
            Some(RowImage::Meeting(m)) => Ok(Some(m)),
            _ => Ok(None),
        }
    }

    /// Meetings starting in `[from, to)`, by start then id, `limit` after
    /// `cursor`.
    pub async fn meetings_page(
        &self,
        project: ProjectId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: u32,
        cursor: Option<&Cursor>,
    ) -> Result<Page<Meeting>, StoreError> {
        let project_id = project.to_string();
        let after = cursor.map(cursor_parts).transpose()?;
        let fetch = i64::from(limit) + 1;
        let (rows, total): (Vec<MeetingRow>, i64) = with_pool!(&self.pool, p => {
            let rows: Vec<MeetingRow> = match &after {
                None => sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT {MEETING_COLUMNS} FROM meetings WHERE project_id = $1 AND starts_at >= $2 AND starts_at < $3 \
                     ORDER BY starts_at, id LIMIT $4"
                )))
                .bind(&project_id)
                .bind(from)
                .bind(to)
                .bind(fetch)
                .fetch_all(p)
                .await?,
                Some((at, id)) => sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT {MEETING_COLUMNS} FROM meetings WHERE project_id = $1 AND starts_at >= $2 AND starts_at < $3 \
                     AND (starts_at > $4 OR (starts_at = $4 AND id > $5)) ORDER BY starts_at, id LIMIT $6"
                )))
                .bind(&project_id)
                .bind(from)
                .bind(to)
                .bind(*at)
                .bind(id)
                .bind(fetch)
                .fetch_all(p)
                .await?,
            };
            let total: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM meetings WHERE project_id = $1 AND starts_at >= $2 AND starts_at < $3",
            )
            .bind(&project_id)
            .bind(from)
            .bind(to)
            .fetch_one(p)
            .await?;
            (rows, total)
        });
        let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        let mut attendees = self.attendees_of(&ids).await?;
        let mut items = Vec::with_capacity(rows.len());
        for row in rows {
            let of_this = attendees.remove(&row.id).unwrap_or_default();
            items.push(row.into_domain(of_this)?);
        }
        let next = page_end(&mut items, limit, |m| cursor_of(m.starts_at, m.meeting_id));
        Ok(Page {
            items,
            next,
            total: u64::try_from(total).unwrap_or(0),
        })
    }

    /// The attendees of each of `meetings`, in one query (not one per
    /// meeting), each list in the order given.
    async fn attendees_of(
        &self,
        meetings: &[&str],
    ) -> Result<std::collections::HashMap<String, Vec<UserId>>, StoreError> {
        let mut found: std::collections::HashMap<String, Vec<UserId>> =
            std::collections::HashMap::new();
        if meetings.is_empty() {
            return Ok(found);
        }
        let placeholders: Vec<String> = (1..=meetings.len()).map(|n| format!("${n}")).collect();
        let sql = format!(
            "SELECT meeting_id, user_id FROM meeting_attendees WHERE meeting_id IN ({}) \
             ORDER BY meeting_id, position",
            placeholders.join(", ")
        );
        let rows: Vec<(String, String)> = with_pool!(&self.pool, p => {
            let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()));
            for id in meetings {
                query = query.bind(*id);
            }
            query.fetch_all(p).await?
        });
        for (meeting, user) in rows {
            let user = UserId::parse(&user).map_err(|e| corrupt("meeting_attendees", e))?;
            found.entry(meeting).or_default().push(user);
        }
        Ok(found)
    }

    /// A meeting's files, oldest first.
    pub async fn meeting_files(
        &self,
        project: ProjectId,
        meeting: MeetingId,
    ) -> Result<Vec<MeetingFile>, StoreError> {
        let rows: Vec<FileRow> = with_pool!(&self.pool, p => sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {FILE_COLUMNS} FROM meeting_files WHERE project_id = $1 AND meeting_id = $2 ORDER BY added_at, id"
        )))
        .bind(project.to_string())
        .bind(meeting.to_string())
        .fetch_all(p)
        .await?);
        rows.into_iter().map(FileRow::into_domain).collect()
    }

    /// One meeting file.
    pub async fn meeting_file(
        &self,
        project: ProjectId,
        id: FileId,
    ) -> Result<Option<MeetingFile>, StoreError> {
        match self.row(project, &RowKey::MeetingFile(id)).await? {
            Some(RowImage::MeetingFile(f)) => Ok(Some(f)),
            _ => Ok(None),
        }
    }

    /// The first registered attachment at `rel_path` in `mount` or below
    /// it (`rel_path` empty: anywhere in the mount), if any: what an nc
    /// delete or move of that path would orphan.
    pub async fn attachment_at_or_under(
        &self,
        project: ProjectId,
        mount: &str,
        rel_path: &str,
    ) -> Result<Option<MeetingFile>, StoreError> {
        let prefix = if rel_path.is_empty() {
            String::new()
        } else {
            format!("{rel_path}/")
        };
        let prefix_chars = i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX);
        // substr, not LIKE: a path may contain `%` or `_`.
        let row: Option<FileRow> = with_pool!(&self.pool, p => sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {FILE_COLUMNS} FROM meeting_files WHERE project_id = $1 AND mount = $2 \
             AND (rel_path = $3 OR substr(rel_path, 1, $4) = $5) ORDER BY rel_path LIMIT 1"
        )))
        .bind(project.to_string())
        .bind(mount)
        .bind(rel_path)
        .bind(prefix_chars)
        .bind(&prefix)
        .fetch_optional(p)
        .await?);
        row.map(FileRow::into_domain).transpose()
    }

    /// Records what a look at a file found: `missing` when it is gone.
    pub async fn mark_file_checked(
        &self,
        id: FileId,
        missing: bool,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        with_pool!(&self.pool, p => sqlx::query(
            "UPDATE meeting_files SET missing = $1, checked_at = $2 WHERE id = $3",
        )
        .bind(missing)
        .bind(at)
        .bind(id.to_string())
        .execute(p)
        .await?
        .rows_affected());
        Ok(())
    }

    /// Up to `limit` meeting files, least recently checked first, with
    /// their project's id: the sweep's next batch.
    pub async fn files_to_check(
        &self,
        limit: u32,
    ) -> Result<Vec<(ProjectId, MeetingFile)>, StoreError> {
        struct Checked {
            project_id: String,
            file: FileRow,
        }
        impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for Checked
        where
            &'r str: sqlx::ColumnIndex<R>,
            String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
            FileRow: sqlx::FromRow<'r, R>,
        {
            fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
                Ok(Self {
                    project_id: row.try_get("project_id")?,
                    file: FileRow::from_row(row)?,
                })
            }
        }
        let rows: Vec<Checked> = with_pool!(&self.pool, p => sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT project_id, {FILE_COLUMNS} FROM meeting_files \
             ORDER BY checked_at IS NOT NULL, checked_at, id LIMIT $1"
        )))
        .bind(i64::from(limit))
        .fetch_all(p)
        .await?);
        rows.into_iter()
            .map(|row| {
                Ok((
                    parse::<ProjectId>("meeting_files", "project_id", &row.project_id)?,
                    row.file.into_domain()?,
                ))
            })
            .collect()
    }

    /// Meetings starting and milestones due in `[from, to)`, by time.
    pub async fn calendar(
        &self,
        project: ProjectId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: u32,
    ) -> Result<(Vec<CalendarItem>, bool), StoreError> {
        let meetings = self.meetings_page(project, from, to, limit, None).await?;
        let truncated = meetings.next.is_some();
        let milestones = self.milestones(project).await?;
        let mut items: Vec<(DateTime<Utc>, CalendarItem)> = meetings
            .items
            .into_iter()
            .map(|m| (m.starts_at, CalendarItem::Meeting(m)))
            .collect();
        for milestone in milestones {
            let Some(due) = milestone.due_date else {
                continue;
            };
            let at = due.and_time(chrono::NaiveTime::MIN).and_utc();
            if at >= from && at < to {
                items.push((at, CalendarItem::Milestone(milestone)));
            }
        }
        items.sort_by_key(|(at, _)| *at);
        Ok((items.into_iter().map(|(_, item)| item).collect(), truncated))
    }

    /// Reports, newest first, optionally of one status, `limit` after `cursor`.
    pub async fn reports_page(
        &self,
        project: ProjectId,
        status: Option<ReportStatus>,
        limit: u32,
        cursor: Option<&Cursor>,
    ) -> Result<Page<Report>, StoreError> {
        let project_id = project.to_string();
        let after = cursor.map(cursor_parts).transpose()?;
        let fetch = i64::from(limit) + 1;
        let status = status.map(ReportStatus::as_str);
        // `$2 IS NULL OR status = $2` keeps one statement for both cases.
        let (rows, total): (Vec<ReportRow>, i64) = with_pool!(&self.pool, p => {
            let rows: Vec<ReportRow> = match &after {
                None => sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT {REPORT_COLUMNS} FROM reports WHERE project_id = $1 AND ($2 IS NULL OR status = $2) \
                     ORDER BY created_at DESC, id DESC LIMIT $3"
                )))
                .bind(&project_id)
                .bind(status)
                .bind(fetch)
                .fetch_all(p)
                .await?,
                Some((at, id)) => sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT {REPORT_COLUMNS} FROM reports WHERE project_id = $1 AND ($2 IS NULL OR status = $2) \
                     AND (created_at < $3 OR (created_at = $3 AND id < $4)) \
                     ORDER BY created_at DESC, id DESC LIMIT $5"
                )))
                .bind(&project_id)
                .bind(status)
                .bind(*at)
                .bind(id)
                .bind(fetch)
                .fetch_all(p)
                .await?,
            };
            let total: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM reports WHERE project_id = $1 AND ($2 IS NULL OR status = $2)",
            )
            .bind(&project_id)
            .bind(status)
            .fetch_one(p)
            .await?;
            (rows, total)
        });
        let mut items = rows
            .into_iter()
            .map(ReportRow::into_domain)
            .collect::<Result<Vec<_>, _>>()?;
        let next = page_end(&mut items, limit, |r| cursor_of(r.created_at, r.report_id));
        Ok(Page {
            items,
            next,
            total: u64::try_from(total).unwrap_or(0),
        })
    }

    /// How many reports of each status the project has.
    pub async fn report_counts(
        &self,
        project: ProjectId,
    ) -> Result<Vec<(ReportStatus, u64)>, StoreError> {
        let rows: Vec<(String, i64)> = with_pool!(&self.pool, p => sqlx::query_as(
            "SELECT status, COUNT(*) FROM reports WHERE project_id = $1 GROUP BY status",
        )
        .bind(project.to_string())
        .fetch_all(p)
        .await?);
        let mut counts: Vec<(ReportStatus, u64)> =
            ReportStatus::ALL.iter().map(|s| (*s, 0)).collect();
        for (status, count) in rows {
            let status = parse::<ReportStatus>("reports", "status", &status)?;
            if let Some(slot) = counts.iter_mut().find(|(s, _)| *s == status) {
                slot.1 = u64::try_from(count).unwrap_or(0);
            }
        }
        Ok(counts)
    }

    /// One report with its history.
    pub async fn report(
        &self,
        project: ProjectId,
        id: ReportId,
    ) -> Result<Option<ReportDetails>, StoreError> {
        let Some(RowImage::Report(report)) = self.row(project, &RowKey::Report(id)).await? else {
            return Ok(None);
        };
        let history: Vec<TransitionRow> = with_pool!(&self.pool, p => sqlx::query_as(
            "SELECT report_id, seq, from_status, to_status, user_id, comment, at \
             FROM report_transitions WHERE report_id = $1 ORDER BY seq",
        )
        .bind(id.to_string())
        .fetch_all(p)
        .await?);
        Ok(Some(ReportDetails {
            report,
            history: history
                .into_iter()
                .map(TransitionRow::into_domain)
                .collect::<Result<_, _>>()?,
        }))
    }
}

/// Trims the one extra item fetched to learn whether a next page exists,
/// and returns the cursor after the page's last item.
fn page_end<T>(items: &mut Vec<T>, limit: u32, cursor: impl Fn(&T) -> Cursor) -> Option<Cursor> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    if items.len() > limit {
        items.truncate(limit);
        items.last().map(cursor)
    } else {
        None
    }
}
