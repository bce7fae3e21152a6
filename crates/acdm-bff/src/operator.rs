//! Business writes by a person (spec §6.6, §9): members' names, project
//! meta, milestones, the statement of work, reports and meetings, as the
//! operator API, the CLI and `import` make them.
//!
//! Every write is one journalled event (actor `direct`) with the rows'
//! before-images, so it is listed and revertible like an agent's. A write
//! that would change nothing records nothing and answers `changed: false`,
//! which is what makes `import` idempotent. Inputs are checked whole first:
//! every problem is reported, each naming its field (`meetings[2].ends_at`).

use acdm_core::business::{
    Deliverable, FieldError, FileId, Meeting, MeetingFile, MeetingId, MemberInfo, Milestone,
    MilestoneStatus, ProjectMeta, ProjectStatus, Report, ReportId, ReportKind, ReportStatus,
    ReportTransition, RowImage, StatementOfWork, check_line, check_meeting_span, check_text,
    limits,
};
use acdm_core::domain::{DEFAULT_MOUNT, ProjectRef};
use acdm_core::events::{Actor, EventId, EventOp};
use acdm_core::{ErrorCode, RelPath, UserId};
use acdm_journal::{Change, Journal, Record};
use bytes::Bytes;
use chrono::{DateTime, FixedOffset, NaiveDate, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::envelope::Failure;
use crate::extract::{FieldProblem, FieldProblems};

/// The longest project description, in characters.
pub const DESCRIPTION_CHARS: usize = 20_000;
/// The longest time zone name, in characters.
pub const TIME_ZONE_CHARS: usize = 64;
/// The most acceptance criteria of one milestone.
pub const CRITERIA: usize = 50;

/// Every problem found in an input, each naming its field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Problems(Vec<FieldProblem>);

impl Problems {
    /// No problem yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a problem with `field`.
    pub fn push(&mut self, field: impl Into<String>, problem: impl Into<String>) {
        self.0.push(FieldProblem {
            field: field.into(),
            problem: problem.into(),
        });
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The problems, in the order found.
    pub fn list(&self) -> &[FieldProblem] {
        &self.0
    }

    /// `Ok` when nothing was found, else a `validation_error` listing
    /// every problem (in its message and as `data.errors`).
    pub fn into_result(self) -> Result<(), Failure> {
        if self.0.is_empty() {
            return Ok(());
        }
        let lines: Vec<String> = self
            .0
            .iter()
            .map(|p| format!("{}: {}", p.field, p.problem))
            .collect();
        Err(Failure::new(ErrorCode::ValidationError, lines.join("; "))
            .with_data(FieldProblems { errors: self.0 }))
    }

    fn field(&mut self, at: &str, name: &str, result: Result<(), FieldError>) {
        if let Err(e) = result {
            self.push(path(at, name), e.to_string());
        }
    }

    fn line(&mut self, at: &str, name: &str, value: &str, max: usize) {
        self.field(at, name, check_line(value, max));
    }

    fn optional_line(&mut self, at: &str, name: &str, value: Option<&str>, max: usize) {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            self.line(at, name, value, max);
        }
    }

    fn text(&mut self, at: &str, name: &str, value: Option<&str>, max: usize) {
        if let Some(value) = value {
            self.field(at, name, check_text(value, max));
        }
    }
}

/// `at.name`, or `name` at the top.
pub fn path(at: &str, name: &str) -> String {
    if at.is_empty() {
        name.to_owned()
    } else {
        format!("{at}.{name}")
    }
}

/// A change of the project's meta; absent fields keep their value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetaInput {
    /// Where the project stands.
    #[serde(default)]
    pub status: Option<ProjectStatus>,
    /// What it is about (markdown).
    #[serde(default)]
    pub description: Option<String>,
    /// When it starts.
    #[serde(default)]
    pub start_date: Option<NaiveDate>,
    /// When it is due to end.
    #[serde(default)]
    pub end_date: Option<NaiveDate>,
    /// The IANA time zone people work in (`Europe/Paris`).
    #[serde(default)]
    pub time_zone: Option<String>,
}

impl MetaInput {
    /// Adds this input's problems, its fields named under `at`.
    pub fn check(&self, at: &str, problems: &mut Problems) {
        problems.text(
            at,
            "description",
            self.description.as_deref(),
            DESCRIPTION_CHARS,
        );
        if let Some(zone) = &self.time_zone {
            problems.line(at, "time_zone", zone, TIME_ZONE_CHARS);
            if zone.contains(char::is_whitespace) {
                problems.push(
                    path(at, "time_zone"),
                    "must be an IANA name such as Europe/Paris",
                );
            }
        }
        if let (Some(start), Some(end)) = (self.start_date, self.end_date)
            && end < start
        {
            problems.push(path(at, "end_date"), "must not be before start_date");
        }
    }

    fn apply(&self, meta: &ProjectMeta) -> ProjectMeta {
        ProjectMeta {
            status: self.status.unwrap_or(meta.status),
            description: self
                .description
                .clone()
                .unwrap_or_else(|| meta.description.clone()),
            start_date: self.start_date.or(meta.start_date),
            end_date: self.end_date.or(meta.end_date),
            time_zone: self
                .time_zone
                .clone()
                .unwrap_or_else(|| meta.time_zone.clone()),
            ..meta.clone()
        }
    }
}

fn planned() -> MilestoneStatus {
    MilestoneStatus::Planned
}

/// A milestone as a person sets it (its `seq` is given apart).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MilestoneInput {
    /// Its title.
    pub title: String,
    /// When it is due.
    #[serde(default)]
    pub due_date: Option<NaiveDate>,
    /// Planned (default), current (the one current milestone: another
    /// current one becomes planned) or done.
    #[serde(default = "planned")]
    pub status: MilestoneStatus,
    /// What must hold for it to be done.
    #[serde(default)]
    pub acceptance_criteria: Vec<String>,
}

impl MilestoneInput {
    /// Adds this input's problems, its fields named under `at`.
    pub fn check(&self, at: &str, problems: &mut Problems) {
        problems.line(at, "title", &self.title, limits::TITLE_CHARS);
        if self.acceptance_criteria.len() > CRITERIA {
            problems.push(
                path(at, "acceptance_criteria"),
                format!("at most {CRITERIA} criteria"),
            );
        }
        for (i, criterion) in self.acceptance_criteria.iter().enumerate() {
            problems.line(
                at,
                &format!("acceptance_criteria[{i}]"),
                criterion,
                limits::LOCATION_CHARS,
            );
        }
    }
}

/// The statement of work as a person writes it: the whole of it (what
/// is not given is emptied).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SowInput {
    /// What the project is to achieve (markdown).
    #[serde(default)]
    pub summary: String,
    /// What it delivers, in order; `milestone` names a milestone's `seq`.
    #[serde(default)]
    pub deliverables: Vec<Deliverable>,
}

impl SowInput {
    /// Adds this input's problems, its fields named under `at`; a
    /// deliverable's `milestone` must be one of `milestones` (seqs).
    pub fn check(&self, at: &str, milestones: &[u32], problems: &mut Problems) {
        problems.text(
            at,
            "summary",
            Some(&self.summary),
            limits::SOW_SUMMARY_CHARS,
        );
        if self.deliverables.len() > limits::DELIVERABLES {
            problems.push(
                path(at, "deliverables"),
                format!("at most {} deliverables", limits::DELIVERABLES),
            );
        }
        for (i, deliverable) in self.deliverables.iter().enumerate() {
            let at = path(at, &format!("deliverables[{i}]"));
            problems.line(&at, "title", &deliverable.title, limits::TITLE_CHARS);
            problems.text(
                &at,
                "description",
                Some(&deliverable.description),
                limits::DELIVERABLE_CHARS,
            );
            if let Some(seq) = deliverable.milestone
                && !milestones.contains(&seq)
            {
                problems.push(
                    path(&at, "milestone"),
                    format!("no milestone {seq} in this project (set the milestone first)"),
                );
            }
        }
    }
}

/// A report as a person writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportInput {
    /// Its title.
    pub title: String,
    /// Weekly, monthly, milestone or other.
    pub kind: ReportKind,
    /// First day covered.
    pub period_start: NaiveDate,
    /// Last day covered.
    pub period_end: NaiveDate,
    /// The text (markdown).
    #[serde(default)]
    pub body: String,
    /// Its status: `draft` for a new report unless given; an update without
    /// it keeps the current one.
    #[serde(default)]
    pub status: Option<ReportStatus>,
}

impl ReportInput {
    /// Adds this input's problems, its fields named under `at`.
    pub fn check(&self, at: &str, problems: &mut Problems) {
        problems.line(at, "title", &self.title, limits::TITLE_CHARS);
        problems.text(at, "body", Some(&self.body), limits::REPORT_BODY_CHARS);
        if self.period_end < self.period_start {
            problems.push(path(at, "period_end"), "must not be before period_start");
        }
    }
}

/// A meeting as a person plans it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MeetingInput {
    /// Its title.
    pub title: String,
    /// When it starts (RFC 3339 with an offset).
    pub starts_at: DateTime<FixedOffset>,
    /// When it ends: after the start, at most 24 h later.
    pub ends_at: DateTime<FixedOffset>,
    /// Where.
    #[serde(default)]
    pub location: Option<String>,
    /// What will be discussed (markdown).
    #[serde(default)]
    pub agenda: Option<String>,
    /// What was said (markdown).
    #[serde(default)]
    pub notes: Option<String>,
    /// User ids of project members.
    #[serde(default)]
    pub attendees: Vec<UserId>,
}

impl MeetingInput {
    /// Adds this input's problems, its fields named under `at`; attendees
    /// must be among `members`.
    pub fn check(&self, at: &str, members: &[MemberInfo], problems: &mut Problems) {
        problems.line(at, "title", &self.title, limits::TITLE_CHARS);
        if let Err(e) = check_meeting_span(utc(self.starts_at), utc(self.ends_at)) {
            problems.push(path(at, "ends_at"), e.to_string());
        }
        problems.optional_line(
            at,
            "location",
            self.location.as_deref(),
            limits::LOCATION_CHARS,
        );
        problems.text(
            at,
            "agenda",
            self.agenda.as_deref(),
            limits::MEETING_TEXT_CHARS,
        );
        problems.text(
            at,
            "notes",
            self.notes.as_deref(),
            limits::MEETING_TEXT_CHARS,
        );
        if self.attendees.len() > limits::ATTENDEES {
            problems.push(
                path(at, "attendees"),
                format!("at most {} attendees", limits::ATTENDEES),
            );
        }
        for (i, id) in self.attendees.iter().enumerate() {
            let field = path(at, &format!("attendees[{i}]"));
            if self.attendees.iter().take(i).any(|a| a == id) {
                problems.push(field, format!("`{id}` is listed twice"));
            } else if !members.iter().any(|m| &m.user_id == id) {
                problems.push(field, format!("`{id}` is not a member of this project"));
            }
        }
    }

    fn fields_of(&self, meeting: &Meeting) -> Meeting {
        Meeting {
            title: self.title.clone(),
            starts_at: utc(self.starts_at),
            ends_at: utc(self.ends_at),
            location: self.location.clone().filter(|v| !v.is_empty()),
            agenda: self.agenda.clone().filter(|v| !v.is_empty()),
            notes: self.notes.clone().filter(|v| !v.is_empty()),
            attendees: self.attendees.clone(),
            ..meeting.clone()
        }
    }
}

/// A text file to attach to a meeting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachmentInput {
    /// Its file name (one path segment).
    pub name: String,
    /// Its content, as UTF-8 text.
    pub content: String,
}

impl AttachmentInput {
    /// Adds this input's problems, its fields named under `at`.
    pub fn check(&self, at: &str, problems: &mut Problems) {
        if let Err(e) = RelPath::parse(&self.name) {
            problems.push(path(at, "name"), e.to_string());
        } else if self.name.contains('/') {
            problems.push(path(at, "name"), "must be a file name, without `/`");
        }
        if self.content.len() > limits::FILE_BYTES {
            problems.push(
                path(at, "content"),
                format!("is larger than {} bytes", limits::FILE_BYTES),
            );
        }
    }
}

/// What a write answers: the record as it is now, and the event that
/// changed it (none when nothing had to change).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(rename = "Written{T}")]
pub struct Written<T> {
    /// The record.
    #[serde(flatten)]
    pub record: T,
    /// Whether anything changed.
    pub changed: bool,
    /// The event that changed it.
    pub event_id: Option<EventId>,
}

impl<T> Written<T> {
    fn unchanged(record: T) -> Self {
        Self {
            record,
            changed: false,
            event_id: None,
        }
    }

    fn changed(record: T, event_id: EventId) -> Self {
        Self {
            record,
            changed: true,
            event_id: Some(event_id),
        }
    }
}

fn utc(time: DateTime<FixedOffset>) -> DateTime<Utc> {
    time.with_timezone(&Utc).trunc_subsecs(6)
}

fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

fn not_found(what: String) -> Failure {
    Failure::new(ErrorCode::NotFound, what)
}

/// A person changing one project's business data.
pub struct Operator<'a> {
    journal: &'a Journal,
    project: ProjectRef,
    user: UserId,
    actor: Actor,
}

impl<'a> Operator<'a> {
    /// `user` acting on `project` (recorded as a direct actor).
    pub fn new(journal: &'a Journal, project: ProjectRef, user: UserId) -> Self {
        Self {
            journal,
            project,
            actor: Actor::direct(user.clone()),
            user,
        }
    }

    /// The project.
    pub fn project(&self) -> &ProjectRef {
        &self.project
    }

    async fn record(
        &self,
        op: EventOp,
        target: String,
        params: serde_json::Value,
        rows: Vec<(Option<RowImage>, Option<RowImage>)>,
        create: Option<(acdm_core::AbsPath, Bytes)>,
    ) -> Result<EventId, Failure> {
        let changed = self
            .journal
            .change(
                Record {
                    actor: &self.actor,
                    project: &self.project,
                    target,
                    params,
                    approval: None,
                },
                Change {
                    op,
                    remove: vec![],
                    create,
                    rows,
                },
            )
            .await?;
        Ok(changed.event.id)
    }

    /// The project's members with their names.
    pub async fn members(&self) -> Result<Vec<MemberInfo>, Failure> {
        Ok(self.journal.store().members_info(self.project.id).await?)
    }

    /// Sets (or, with `None`, clears) a member's display name.
    pub async fn set_member_name(
        &self,
        member: &UserId,
        display_name: Option<String>,
    ) -> Result<Written<MemberInfo>, Failure> {
        let display_name = display_name.filter(|n| !n.is_empty());
        let mut problems = Problems::new();
        problems.optional_line(
            "",
            "display_name",
            display_name.as_deref(),
            limits::DISPLAY_NAME_CHARS,
        );
        problems.into_result()?;
        let before = self
            .members()
            .await?
            .into_iter()
            .find(|m| &m.user_id == member)
            .ok_or_else(|| {
                not_found(format!(
                    "`{member}` is not a member of `{}`",
                    self.project.slug
                ))
                .with_suggested_action(
                    "Add them first with `member add` or POST /admin/projects/{slug}/members.",
                )
            })?;
        if before.display_name == display_name {
            return Ok(Written::unchanged(before));
        }
        let after = MemberInfo {
            display_name,
            ..before.clone()
        };
        let event = self
            .record(
                EventOp::SetMemberName,
                format!("member:{member}"),
                json!({ "user_id": member, "display_name": after.display_name }),
                vec![(
                    Some(RowImage::Member(before)),
                    Some(RowImage::Member(after.clone())),
                )],
                None,
            )
            .await?;
        Ok(Written::changed(after, event))
    }

    /// Changes the project's meta (absent fields keep their value).
    pub async fn set_meta(&self, input: &MetaInput) -> Result<Written<ProjectMeta>, Failure> {
        let mut problems = Problems::new();
        input.check("", &mut problems);
        let before = self.journal.store().project_meta(&self.project).await?;
        let after = input.apply(&before);
        if let (Some(start), Some(end)) = (after.start_date, after.end_date)
            && end < start
            && problems.is_empty()
        {
            problems.push("end_date", "must not be before start_date");
        }
        problems.into_result()?;
        if after == before {
            return Ok(Written::unchanged(before));
        }
        let after = ProjectMeta {
            updated_at: now(),
            ..after
        };
        let event = self
            .record(
                EventOp::SetProjectMeta,
                "project_meta".to_owned(),
                serde_json::to_value(input).unwrap_or_default(),
                vec![(
                    Some(RowImage::ProjectMeta(before)),
                    Some(RowImage::ProjectMeta(after.clone())),
                )],
                None,
            )
            .await?;
        Ok(Written::changed(after, event))
    }

    /// Creates or replaces milestone `seq`; making it current makes the
    /// milestone that was current planned, in the same event.
    pub async fn set_milestone(
        &self,
        seq: u32,
        input: &MilestoneInput,
    ) -> Result<Written<Milestone>, Failure> {
        let mut problems = Problems::new();
        if seq == 0 {
            problems.push("seq", "must be 1 or more");
        }
        input.check("", &mut problems);
        problems.into_result()?;
        let milestones = self.journal.store().milestones(self.project.id).await?;
        let before = milestones.iter().find(|m| m.seq == seq).cloned();
        let (closed_at, closed_by) = match (&before, input.status) {
            (Some(old), MilestoneStatus::Done) if old.status == MilestoneStatus::Done => {
                (old.closed_at, old.closed_by.clone())
            }
            (_, MilestoneStatus::Done) => (Some(now()), Some(self.user.clone())),
            _ => (None, None),
        };
        let after = Milestone {
            seq,
            title: input.title.clone(),
            due_date: input.due_date,
            status: input.status,
            acceptance_criteria: input.acceptance_criteria.clone(),
            closed_at,
            closed_by,
        };
        if before.as_ref() == Some(&after) {
            return Ok(Written::unchanged(after));
        }
        let mut rows = Vec::new();
        if after.status == MilestoneStatus::Current {
            for other in milestones
                .iter()
                .filter(|m| m.seq != seq && m.status == MilestoneStatus::Current)
            {
                let demoted = Milestone {
                    status: MilestoneStatus::Planned,
                    ..other.clone()
                };
                rows.push((
                    Some(RowImage::Milestone(other.clone())),
                    Some(RowImage::Milestone(demoted)),
                ));
            }
        }
        rows.push((
            before.map(RowImage::Milestone),
            Some(RowImage::Milestone(after.clone())),
        ));
        let event = self
            .record(
                EventOp::SetMilestone,
                format!("milestone:{seq}"),
                json!({ "seq": seq, "title": after.title, "status": after.status }),
                rows,
                None,
            )
            .await?;
        Ok(Written::changed(after, event))
    }

    /// Writes the statement of work (the whole of it).
    pub async fn set_sow(&self, input: &SowInput) -> Result<Written<StatementOfWork>, Failure> {
        let store = self.journal.store();
        let milestones: Vec<u32> = store
            .milestones(self.project.id)
            .await?
            .iter()
            .map(|m| m.seq)
            .collect();
        let mut problems = Problems::new();
        input.check("", &milestones, &mut problems);
        problems.into_result()?;
        let before = store.sow(self.project.id).await?;
        if before.summary == input.summary && before.deliverables == input.deliverables {
            return Ok(Written::unchanged(before));
        }
        let after = StatementOfWork {
            summary: input.summary.clone(),
            deliverables: input.deliverables.clone(),
            updated_at: now(),
        };
        let event = self
            .record(
                EventOp::SetSow,
                "sow".to_owned(),
                json!({ "deliverables": after.deliverables.len() }),
                vec![(
                    Some(RowImage::Sow(before)),
                    Some(RowImage::Sow(after.clone())),
                )],
                None,
            )
            .await?;
        Ok(Written::changed(after, event))
    }

    /// The report `id` of this project, if any.
    pub async fn report(&self, id: ReportId) -> Result<Option<Report>, Failure> {
        Ok(self
            .journal
            .store()
            .report(self.project.id, id)
            .await?
            .map(|d| d.report))
    }

    /// Creates report `id` (a new id for the API; a stable one for import).
    pub async fn create_report(
        &self,
        id: ReportId,
        input: &ReportInput,
    ) -> Result<Written<Report>, Failure> {
        let mut problems = Problems::new();
        input.check("", &mut problems);
        problems.into_result()?;
        let at = now();
        let report = Report {
            report_id: id,
            title: input.title.clone(),
            kind: input.kind,
            period_start: input.period_start,
            period_end: input.period_end,
            body: input.body.clone(),
            status: input.status.unwrap_or(ReportStatus::Draft),
            version: 1,
            created_by: Some(self.user.clone()),
            created_at: at,
            updated_at: at,
        };
        let event = self
            .record(
                EventOp::CreateReport,
                format!("report:{id}"),
                json!({ "report_id": id, "title": report.title, "status": report.status }),
                vec![(None, Some(RowImage::Report(report.clone())))],
                None,
            )
            .await?;
        Ok(Written::changed(report, event))
    }

    /// Replaces report `id`'s fields (at version `if_version` when given).
    /// A status change is recorded in the report's history as this
    /// person's move, whatever the agents' flow allows.
    pub async fn update_report(
        &self,
        id: ReportId,
        input: &ReportInput,
        if_version: Option<i64>,
    ) -> Result<Written<Report>, Failure> {
        let mut problems = Problems::new();
        input.check("", &mut problems);
        problems.into_result()?;
        let details = self
            .journal
            .store()
            .report(self.project.id, id)
            .await?
            .ok_or_else(|| {
                not_found(format!("report {id} not found in `{}`", self.project.slug))
            })?;
        let before = details.report;
        if let Some(asked) = if_version
            && asked != before.version
        {
            return Err(Failure::new(
                ErrorCode::Conflict,
                format!("report {id} is at version {}, not {asked}", before.version),
            )
            .with_data(json!({ "current_version": before.version })));
        }
        let status = input.status.unwrap_or(before.status);
        let same = before.title == input.title
            && before.kind == input.kind
            && before.period_start == input.period_start
            && before.period_end == input.period_end
            && before.body == input.body
            && before.status == status;
        if same {
            return Ok(Written::unchanged(before));
        }
        let at = now();
        let after = Report {
            title: input.title.clone(),
            kind: input.kind,
            period_start: input.period_start,
            period_end: input.period_end,
            body: input.body.clone(),
            status,
            version: before.version + 1,
            updated_at: at,
            ..before.clone()
        };
        let mut rows = vec![(
            Some(RowImage::Report(before.clone())),
            Some(RowImage::Report(after.clone())),
        )];
        if status != before.status {
            rows.push((
                None,
                Some(RowImage::ReportTransition(ReportTransition {
                    report_id: id,
                    seq: u32::try_from(details.history.len() + 1).unwrap_or(u32::MAX),
                    from: before.status,
                    to: status,
                    user_id: Some(self.user.clone()),
                    comment: Some("set by an operator".to_owned()),
                    at,
                })),
            ));
        }
        let event = self
            .record(
                EventOp::UpdateReport,
                format!("report:{id}"),
                json!({ "report_id": id, "from_version": before.version, "status": status }),
                rows,
                None,
            )
            .await?;
        Ok(Written::changed(after, event))
    }

    /// The meeting `id` of this project, if any.
    pub async fn meeting(&self, id: MeetingId) -> Result<Option<Meeting>, Failure> {
        Ok(self.journal.store().meeting(self.project.id, id).await?)
    }

    async fn check_meeting(&self, input: &MeetingInput) -> Result<(), Failure> {
        let mut problems = Problems::new();
        let members = self.members().await?;
        input.check("", &members, &mut problems);
        problems.into_result()
    }

    /// Creates meeting `id`.
    pub async fn create_meeting(
        &self,
        id: MeetingId,
        input: &MeetingInput,
    ) -> Result<Written<Meeting>, Failure> {
        self.check_meeting(input).await?;
        let at = now();
        let empty = Meeting {
            meeting_id: id,
            title: String::new(),
            starts_at: at,
            ends_at: at,
            location: None,
            agenda: None,
            notes: None,
            attendees: vec![],
            version: 1,
            created_by: Some(self.user.clone()),
            created_at: at,
            updated_by: Some(self.user.clone()),
            updated_at: at,
        };
        let meeting = input.fields_of(&empty);
        let event = self
            .record(
                EventOp::CreateMeeting,
                format!("meeting:{id}"),
                json!({ "meeting_id": id, "title": meeting.title, "starts_at": meeting.starts_at }),
                vec![(None, Some(RowImage::Meeting(meeting.clone())))],
                None,
            )
            .await?;
        Ok(Written::changed(meeting, event))
    }

    /// Replaces meeting `id`'s fields (at version `if_version` when given).
    pub async fn update_meeting(
        &self,
        id: MeetingId,
        input: &MeetingInput,
        if_version: Option<i64>,
    ) -> Result<Written<Meeting>, Failure> {
        self.check_meeting(input).await?;
        let before = self.meeting(id).await?.ok_or_else(|| {
            not_found(format!("meeting {id} not found in `{}`", self.project.slug))
        })?;
        if let Some(asked) = if_version
            && asked != before.version
        {
            return Err(Failure::new(
                ErrorCode::Conflict,
                format!("meeting {id} is at version {}, not {asked}", before.version),
            )
            .with_data(json!({ "current_version": before.version })));
        }
        let fields = input.fields_of(&before);
        if before.differing_fields(&fields).is_empty() {
            return Ok(Written::unchanged(before));
        }
        let after = Meeting {
            version: before.version + 1,
            updated_by: Some(self.user.clone()),
            updated_at: now(),
            ..fields
        };
        let event = self
            .record(
                EventOp::UpdateMeeting,
                format!("meeting:{id}"),
                json!({ "meeting_id": id, "fields": before.differing_fields(&after) }),
                vec![(
                    Some(RowImage::Meeting(before)),
                    Some(RowImage::Meeting(after.clone())),
                )],
                None,
            )
            .await?;
        Ok(Written::changed(after, event))
    }

    /// Attaches a text file to meeting `id` at
    /// `project:/meetings/<id>/<name>`, unless the meeting has a file of
    /// that name already (then nothing changes).
    pub async fn attach(
        &self,
        id: MeetingId,
        file_id: FileId,
        input: &AttachmentInput,
    ) -> Result<Written<MeetingFile>, Failure> {
        let mut problems = Problems::new();
        input.check("", &mut problems);
        problems.into_result()?;
        let store = self.journal.store();
        let meeting = self.meeting(id).await?.ok_or_else(|| {
            not_found(format!("meeting {id} not found in `{}`", self.project.slug))
        })?;
        let existing = store.meeting_files(self.project.id, id).await?;
        if let Some(file) = existing.iter().find(|f| f.name == input.name) {
            return Ok(Written::unchanged(file.clone()));
        }
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
        let mounts = store.project_mounts(self.project.id).await?;
        let mount = mounts
            .iter()
            .find(|m| m.name.as_str() == DEFAULT_MOUNT)
            .ok_or_else(|| {
                Failure::new(
                    ErrorCode::Conflict,
                    format!("this project has no `{DEFAULT_MOUNT}` mount to keep meeting files in"),
                )
            })?;
        let rel_path = format!("meetings/{id}/{}", input.name);
        let rel = RelPath::parse(&rel_path)
            .map_err(|e| Failure::new(ErrorCode::ValidationError, format!("name: {e}")))?;
        let content = Bytes::from(input.content.clone().into_bytes());
        let row = MeetingFile {
            file_id,
            meeting_id: id,
            mount: DEFAULT_MOUNT.to_owned(),
            rel_path: rel_path.clone(),
            name: input.name.clone(),
            size: content.len() as u64,
            etag: None,
            content_type: Some(
                if input.name.ends_with(".md") {
                    "text/markdown"
                } else {
                    "text/plain"
                }
                .to_owned(),
            ),
            added_by: Some(self.user.clone()),
            added_at: now(),
            missing: false,
        };
        let event = self
            .record(
                EventOp::AttachMeetingFile,
                format!("meeting:{id}/file:{file_id}"),
                json!({ "meeting_id": id, "file_id": file_id, "rel_path": rel_path, "size": row.size }),
                vec![(None, Some(RowImage::MeetingFile(row.clone())))],
                Some((mount.root.join(&rel), content)),
            )
            .await?;
        let file = store
            .meeting_file(self.project.id, file_id)
            .await?
            .unwrap_or(row);
        Ok(Written::changed(file, event))
    }
}
