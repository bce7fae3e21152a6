//! `acdm-backend import --project <slug> <file>`: a project's business
//! data from one JSON or TOML document (by the file's extension) — meta,
//! members' names, milestones, the statement of work, reports with their
//! status, meetings with optional text attachments.
//!
//! The document is checked whole before anything is written, and every
//! problem is reported with its path (`meetings[2].ends_at`). Then each
//! object is written through [`acdm_bff::operator::Operator`] (one
//! journalled event each, actor `direct`). Reports and meetings carry a
//! `key`; their ids are derived from the project and that key, so a second
//! run finds what the first one wrote, compares, and records nothing when
//! nothing differs: importing is idempotent. The demo fills its project
//! through [`apply`].

use std::collections::HashSet;
use std::path::Path;

use acdm_bff::envelope::Failure;
use acdm_bff::operator::{
    AttachmentInput, MeetingInput, MetaInput, MilestoneInput, Operator, Problems, ReportInput,
    SowInput, Written, path,
};
use acdm_core::business::{
    FileId, MeetingId, MemberInfo, MilestoneStatus, ReportId, ReportKind, ReportStatus, check_line,
    limits,
};
use acdm_core::domain::ProjectRef;
use acdm_core::events::EventId;
use acdm_core::{ProjectSlug, UserId};
use acdm_journal::Journal;
use acdm_store::StoreError;
use chrono::{DateTime, FixedOffset, NaiveDate};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The longest `key` of a report or a meeting, in characters.
const KEY_CHARS: usize = 100;

/// What a file holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Document {
    /// The project's meta (absent fields keep their value).
    #[serde(default)]
    pub meta: Option<MetaInput>,
    /// Members' display names (the members must exist).
    #[serde(default)]
    pub members: Vec<MemberEntry>,
    /// Milestones by `seq`.
    #[serde(default)]
    pub milestones: Vec<MilestoneEntry>,
    /// The statement of work (written whole; its deliverables may name the
    /// document's milestones or the project's).
    #[serde(default)]
    pub sow: Option<SowInput>,
    /// Reports by `key`.
    #[serde(default)]
    pub reports: Vec<ReportEntry>,
    /// Meetings by `key`.
    #[serde(default)]
    pub meetings: Vec<MeetingEntry>,
}

/// A member's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberEntry {
    /// The member.
    pub user_id: UserId,
    /// Their name for people.
    pub display_name: String,
}

/// A milestone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MilestoneEntry {
    /// Its place in the sequence, from 1.
    pub seq: u32,
    /// Its title.
    pub title: String,
    /// When it is due.
    #[serde(default)]
    pub due_date: Option<NaiveDate>,
    /// planned (default), current (at most one) or done.
    #[serde(default)]
    pub status: Option<MilestoneStatus>,
    /// What must hold for it to be done.
    #[serde(default)]
    pub acceptance_criteria: Vec<String>,
}

/// A report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportEntry {
    /// Names it across runs (its id is derived from it).
    pub key: String,
    /// Its title.
    pub title: String,
    /// weekly, monthly, milestone or other.
    pub kind: ReportKind,
    /// First day covered.
    pub period_start: NaiveDate,
    /// Last day covered.
    pub period_end: NaiveDate,
    /// The text (markdown).
    #[serde(default)]
    pub body: String,
    /// draft (default), submitted, approved or rejected.
    #[serde(default)]
    pub status: Option<ReportStatus>,
}

/// A meeting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeetingEntry {
    /// Names it across runs (its id is derived from it).
    pub key: String,
    /// Its title.
    pub title: String,
    /// When it starts (RFC 3339 with an offset).
    pub starts_at: DateTime<FixedOffset>,
    /// When it ends.
    pub ends_at: DateTime<FixedOffset>,
    /// Where.
    #[serde(default)]
    pub location: Option<String>,
    /// What will be discussed.
    #[serde(default)]
    pub agenda: Option<String>,
    /// What was said.
    #[serde(default)]
    pub notes: Option<String>,
    /// User ids of members.
    #[serde(default)]
    pub attendees: Vec<UserId>,
    /// Text files to attach (`meetings/<meeting id>/<name>` in the
    /// `project` mount).
    #[serde(default)]
    pub attachments: Vec<AttachmentInput>,
}

impl MilestoneEntry {
    fn input(&self) -> MilestoneInput {
        MilestoneInput {
            title: self.title.clone(),
            due_date: self.due_date,
            status: self.status.unwrap_or(MilestoneStatus::Planned),
            acceptance_criteria: self.acceptance_criteria.clone(),
        }
    }
}

impl ReportEntry {
    fn input(&self) -> ReportInput {
        ReportInput {
            title: self.title.clone(),
            kind: self.kind,
            period_start: self.period_start,
            period_end: self.period_end,
            body: self.body.clone(),
            status: Some(self.status.unwrap_or(ReportStatus::Draft)),
        }
    }
}

impl MeetingEntry {
    fn input(&self) -> MeetingInput {
        MeetingInput {
            title: self.title.clone(),
            starts_at: self.starts_at,
            ends_at: self.ends_at,
            location: self.location.clone(),
            agenda: self.agenda.clone(),
            notes: self.notes.clone(),
            attendees: self.attendees.clone(),
        }
    }
}

/// Reads a document: `.json` or `.toml`, refused otherwise. A file that
/// does not parse is refused saying where (the line and column of a syntax
/// error; the path of a field of the wrong shape, `meetings[1].starts_at`).
/// In TOML, dates and times may be written bare (`2026-12-01T09:00:00Z`)
/// or quoted.
pub fn read(file: &Path) -> Result<Document, ImportError> {
    let text = std::fs::read_to_string(file).map_err(|error| {
        ImportError::Unreadable(format!("cannot read {}: {error}", file.display()))
    })?;
    let extension = file
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let value: serde_json::Value = match extension.as_deref() {
        Some("json") => serde_json::from_str(&text).map_err(|e| {
            ImportError::Unreadable(format!(
                "{} is not valid JSON; nothing was written: {e}",
                file.display()
            ))
        })?,
        Some("toml") => toml::from_str::<toml::Value>(&text)
            .map(json_of_toml)
            .map_err(|e| {
                ImportError::Unreadable(format!(
                    "{} is not valid TOML; nothing was written: {e}",
                    file.display()
                ))
            })?,
        _ => {
            return Err(ImportError::Unreadable(format!(
                "{}: the file must end in .json or .toml (that says how to read it)",
                file.display()
            )));
        }
    };
    serde_path_to_error::deserialize(value).map_err(|e| {
        ImportError::Unreadable(format!(
            "{} is not a valid import document; nothing was written: {}: {}",
            file.display(),
            e.path(),
            e.inner()
        ))
    })
}

/// A TOML value as JSON; TOML's dates and times become their RFC 3339
/// text, which is how the document's fields read them.
fn json_of_toml(value: toml::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(n) => Value::from(n),
        toml::Value::Float(f) => Value::from(f),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.into_iter().map(json_of_toml).collect()),
        toml::Value::Table(table) => Value::Object(
            table
                .into_iter()
                .map(|(k, v)| (k, json_of_toml(v)))
                .collect(),
        ),
    }
}

/// Every problem of `doc` for a project with `members` and the milestones
/// numbered `milestones`, each naming its path in the document.
pub fn check(doc: &Document, members: &[MemberInfo], milestones: &[u32]) -> Problems {
    let mut problems = Problems::new();
    if let Some(meta) = &doc.meta {
        meta.check("meta", &mut problems);
    }
    let mut seen = HashSet::new();
    for (i, entry) in doc.members.iter().enumerate() {
        let at = format!("members[{i}]");
        if !seen.insert(&entry.user_id) {
            problems.push(
                path(&at, "user_id"),
                format!("`{}` is listed twice", entry.user_id),
            );
        } else if !members.iter().any(|m| m.user_id == entry.user_id) {
            problems.push(
                path(&at, "user_id"),
                format!(
                    "`{}` is not a member of this project (add them first with `member add`)",
                    entry.user_id
                ),
            );
        }
        if let Err(e) = check_line(&entry.display_name, limits::DISPLAY_NAME_CHARS) {
            problems.push(path(&at, "display_name"), e.to_string());
        }
    }
    let mut seqs = HashSet::new();
    let mut current = None;
    for (i, entry) in doc.milestones.iter().enumerate() {
        let at = format!("milestones[{i}]");
        if entry.seq == 0 {
            problems.push(path(&at, "seq"), "must be 1 or more");
        } else if !seqs.insert(entry.seq) {
            problems.push(
                path(&at, "seq"),
                format!("milestone {} is listed twice", entry.seq),
            );
        }
        if entry.status == Some(MilestoneStatus::Current) {
            match current {
                Some(first) => problems.push(
                    path(&at, "status"),
                    format!("only one milestone can be current, and milestones[{first}] is"),
                ),
                None => current = Some(i),
            }
        }
        entry.input().check(&at, &mut problems);
    }
    if let Some(sow) = &doc.sow {
        let mut known: Vec<u32> = milestones.to_vec();
        known.extend(doc.milestones.iter().map(|m| m.seq));
        sow.check("sow", &known, &mut problems);
    }
    let mut keys = HashSet::new();
    for (i, entry) in doc.reports.iter().enumerate() {
        let at = format!("reports[{i}]");
        check_key(&at, &entry.key, &mut keys, &mut problems);
        entry.input().check(&at, &mut problems);
    }
    let mut keys = HashSet::new();
    for (i, entry) in doc.meetings.iter().enumerate() {
        let at = format!("meetings[{i}]");
        check_key(&at, &entry.key, &mut keys, &mut problems);
        entry.input().check(&at, members, &mut problems);
        if entry.attachments.len() > limits::FILES_PER_MEETING {
            problems.push(
                path(&at, "attachments"),
                format!("at most {} files", limits::FILES_PER_MEETING),
            );
        }
        let mut names = HashSet::new();
        for (j, file) in entry.attachments.iter().enumerate() {
            let at = format!("{at}.attachments[{j}]");
            if !names.insert(&file.name) {
                problems.push(
                    path(&at, "name"),
                    format!("`{}` is listed twice", file.name),
                );
            }
            file.check(&at, &mut problems);
        }
    }
    problems
}

fn check_key<'a>(at: &str, key: &'a str, keys: &mut HashSet<&'a str>, problems: &mut Problems) {
    if let Err(e) = check_line(key, KEY_CHARS) {
        problems.push(path(at, "key"), e.to_string());
    } else if !keys.insert(key) {
        problems.push(path(at, "key"), format!("`{key}` is used twice"));
    }
}

/// An id that is the same on every run: the first 16 bytes of
/// SHA-256(`acdm-import`, project, kind, key), as a UUID of version 8
/// (custom; version 5 would need SHA-1).
fn stable_id(project: &ProjectRef, kind: &str, key: &str) -> uuid::Uuid {
    let mut hash = Sha256::new();
    for part in ["acdm-import", &project.id.to_string(), kind, key] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    let digest = hash.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(digest.get(..16).unwrap_or(&[0; 16]));
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// What an import did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Imported {
    /// The project.
    pub project: String,
    /// Objects written (created or changed), one event each.
    pub changed: Vec<String>,
    /// Objects already as the document says.
    pub unchanged: usize,
    /// The events recorded, in order.
    pub events: Vec<EventId>,
}

impl Imported {
    fn note<T>(&mut self, what: String, written: &Written<T>) {
        match written.event_id {
            Some(event) => {
                self.changed.push(what);
                self.events.push(event);
            }
            None => self.unchanged += 1,
        }
    }
}

/// Why an import stopped.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file cannot be read as a document; nothing was written.
    #[error("{0}")]
    Unreadable(String),
    /// The database (finding the project).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The document has problems; nothing was written.
    #[error("the document has {} problem(s); nothing was written:\n{}", .0.list().len(), lines(.0))]
    Invalid(Problems),
    /// A write was refused (earlier ones stay, each its own event).
    #[error(
        "{what} could not be written ({written} object(s) written before it stay, each its own revertible event): {message}"
    )]
    Refused {
        /// The object.
        what: String,
        /// How many were written before.
        written: usize,
        /// Why.
        message: String,
    },
}

fn lines(problems: &Problems) -> String {
    problems
        .list()
        .iter()
        .map(|p| format!("  {}: {}", p.field, p.problem))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Checks `doc` whole for `project`, then writes what differs as `user`.
pub async fn apply(
    journal: &Journal,
    project: ProjectRef,
    user: UserId,
    doc: &Document,
) -> Result<Imported, ImportError> {
    let slug = project.slug.to_string();
    let op = Operator::new(journal, project, user);
    let members = op
        .members()
        .await
        .map_err(|e| refused("the members", 0, &e))?;
    let milestones: Vec<u32> = journal
        .store()
        .milestones(op.project().id)
        .await
        .map_err(|e| refused("the milestones", 0, &Failure::from(e)))?
        .iter()
        .map(|m| m.seq)
        .collect();
    let problems = check(doc, &members, &milestones);
    if !problems.is_empty() {
        return Err(ImportError::Invalid(problems));
    }
    let mut done = Imported {
        project: slug,
        ..Imported::default()
    };
    macro_rules! write {
        ($what:expr, $call:expr) => {{
            let what: String = $what;
            match $call.await {
                Ok(written) => {
                    done.note(what, &written);
                    written
                }
                Err(e) => return Err(refused(&what, done.changed.len(), &e)),
            }
        }};
    }
    if let Some(meta) = &doc.meta {
        write!("meta".to_owned(), op.set_meta(meta));
    }
    for entry in &doc.members {
        write!(
            format!("member {}", entry.user_id),
            op.set_member_name(&entry.user_id, Some(entry.display_name.clone()))
        );
    }
    for entry in &doc.milestones {
        write!(
            format!("milestone {}", entry.seq),
            op.set_milestone(entry.seq, &entry.input())
        );
    }
    if let Some(sow) = &doc.sow {
        write!("the statement of work".to_owned(), op.set_sow(sow));
    }
    for entry in &doc.reports {
        let id = ReportId::from(stable_id(op.project(), "report", &entry.key));
        let what = format!("report {}", entry.key);
        let exists = op
            .report(id)
            .await
            .map_err(|e| refused(&what, done.changed.len(), &e))?
            .is_some();
        if exists {
            write!(what, op.update_report(id, &entry.input(), None));
        } else {
            write!(what, op.create_report(id, &entry.input()));
        }
    }
    for entry in &doc.meetings {
        let id = MeetingId::from(stable_id(op.project(), "meeting", &entry.key));
        let what = format!("meeting {}", entry.key);
        let exists = op
            .meeting(id)
            .await
            .map_err(|e| refused(&what, done.changed.len(), &e))?
            .is_some();
        if exists {
            write!(what, op.update_meeting(id, &entry.input(), None));
        } else {
            write!(what, op.create_meeting(id, &entry.input()));
        }
        for file in &entry.attachments {
            let file_id = FileId::from(stable_id(
                op.project(),
                "meeting-file",
                &format!("{}\u{0}{}", entry.key, file.name),
            ));
            write!(
                format!("meeting {} file {}", entry.key, file.name),
                op.attach(id, file_id, file)
            );
        }
    }
    Ok(done)
}

fn refused(what: &str, written: usize, failure: &Failure) -> ImportError {
    ImportError::Refused {
        what: what.to_owned(),
        written,
        message: failure.envelope().message().to_owned(),
    }
}

/// The `import` command: read `file`, find `slug`, apply.
pub async fn run(
    journal: &Journal,
    slug: &ProjectSlug,
    user: UserId,
    file: &Path,
) -> Result<Imported, ImportError> {
    let doc = read(file)?;
    let project = journal.store().project(slug).await?.project.to_ref();
    apply(journal, project, user, &doc).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members() -> Vec<MemberInfo> {
        vec![MemberInfo {
            user_id: UserId::parse("u-alice").unwrap(),
            display_name: None,
            role: acdm_core::domain::MemberRole::Owner,
        }]
    }

    #[test]
    fn every_problem_of_a_document_is_named_by_its_path() {
        let doc: Document = serde_json::from_value(serde_json::json!({
            "meta": { "end_date": "2026-01-01", "start_date": "2026-02-01" },
            "members": [{ "user_id": "u-zed", "display_name": " Zed" }],
            "milestones": [
                { "seq": 1, "title": "A", "status": "current" },
                { "seq": 1, "title": "", "status": "current" }
            ],
            "reports": [{ "key": "r", "title": "R", "kind": "weekly",
                          "period_start": "2026-01-08", "period_end": "2026-01-01" }],
            "meetings": [{ "key": "m", "title": "M",
                           "starts_at": "2026-01-01T10:00:00Z", "ends_at": "2026-01-01T09:00:00Z",
                           "attendees": ["u-bob"],
                           "attachments": [{ "name": "a/b.md", "content": "x" }] }]
        }))
        .unwrap();
        let problems = check(&doc, &members(), &[]);
        let fields: Vec<&str> = problems.list().iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "meta.end_date",
                "members[0].user_id",
                "members[0].display_name",
                "milestones[1].seq",
                "milestones[1].status",
                "milestones[1].title",
                "reports[0].period_end",
                "meetings[0].ends_at",
                "meetings[0].attendees[0]",
                "meetings[0].attachments[0].name",
            ]
        );
    }

    #[test]
    fn a_statement_of_work_may_name_the_documents_milestones_or_the_projects() {
        let doc: Document = serde_json::from_value(serde_json::json!({
            "milestones": [{ "seq": 2, "title": "Build" }],
            "sow": { "summary": "S", "deliverables": [
                { "title": "From the document", "milestone": 2 },
                { "title": "From the project", "milestone": 1 },
                { "title": "Nowhere", "milestone": 7 },
                { "title": "", "description": "no title" }
            ] }
        }))
        .unwrap();
        let problems = check(&doc, &members(), &[1]);
        let fields: Vec<&str> = problems.list().iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            ["sow.deliverables[2].milestone", "sow.deliverables[3].title"]
        );
        assert!(
            check(&doc, &members(), &[]).list().len() == 3,
            "milestone 1 unknown too"
        );
    }

    #[test]
    fn stable_ids_depend_on_the_project_kind_and_key_only() {
        let project = |id| ProjectRef {
            id,
            slug: ProjectSlug::parse("p").unwrap(),
            name: acdm_core::ProjectName::parse("P").unwrap(),
        };
        let one = project(acdm_core::domain::ProjectId::new_random());
        let two = project(acdm_core::domain::ProjectId::new_random());
        assert_eq!(
            stable_id(&one, "report", "a"),
            stable_id(&one, "report", "a")
        );
        assert_ne!(
            stable_id(&one, "report", "a"),
            stable_id(&one, "report", "b")
        );
        assert_ne!(
            stable_id(&one, "report", "a"),
            stable_id(&one, "meeting", "a")
        );
        assert_ne!(
            stable_id(&one, "report", "a"),
            stable_id(&two, "report", "a")
        );
        assert_eq!(stable_id(&one, "report", "a").get_version_num(), 8);
    }
}
