//! `--human` for the business operations: a table for every list (one row
//! per item, then how many there are and the cursor of the next page), and
//! `key: value` lines for one object, followed by its files (a meeting) or
//! its body and history (a report).

use acdm_core::business::wire::{
    CalendarEntry, CalendarKind, DeleteMeetingData, MeetingData, MeetingFileWritten,
    MeetingWritten, Paged, ReportStatusData,
};
use acdm_core::business::{
    Meeting, MeetingFile, MemberInfo, ProjectMeta, Report, ReportDetails, ReportTransition,
};
use chrono::{DateTime, Utc};

use super::{Human, clean, clean_text, dash, line, pairs, table};

/// An item of a list: its table's header and its row.
pub(crate) trait Row {
    /// The column names.
    const HEADER: &'static [&'static str];
    /// What an empty list says.
    const NONE: &'static str;
    /// The cells, cleaned.
    fn row(&self) -> Vec<String>;
}

impl<T: Row> Human for Paged<T> {
    fn human(&self, out: &mut String) {
        if self.items.is_empty() {
            line(out, format_args!("{}", T::NONE));
        } else {
            table(out, T::HEADER, self.items.iter().map(Row::row));
        }
        match &self.next_cursor {
            Some(cursor) => line(
                out,
                format_args!(
                    "({} of {}; next page: --cursor {})",
                    self.items.len(),
                    self.total_count,
                    clean(cursor)
                ),
            ),
            None if self.items.len() as u64 != self.total_count => line(
                out,
                format_args!("({} of {})", self.items.len(), self.total_count),
            ),
            None => {}
        }
    }
}

fn time(at: &DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M").to_string()
}

fn or_dash(value: Option<&str>) -> String {
    value.map(clean).unwrap_or_else(dash)
}

impl Row for Meeting {
    const HEADER: &'static [&'static str] = &[
        "MEETING_ID",
        "STARTS (UTC)",
        "ENDS (UTC)",
        "VERSION",
        "TITLE",
    ];
    const NONE: &'static str = "(no meetings)";
    fn row(&self) -> Vec<String> {
        vec![
            self.meeting_id.to_string(),
            time(&self.starts_at),
            time(&self.ends_at),
            self.version.to_string(),
            clean(&self.title),
        ]
    }
}

impl Row for MeetingFile {
    const HEADER: &'static [&'static str] = &["FILE_ID", "SIZE", "ADDED (UTC)", "STATE", "PATH"];
    const NONE: &'static str = "(no files)";
    fn row(&self) -> Vec<String> {
        vec![
            self.file_id.to_string(),
            self.size.to_string(),
            time(&self.added_at),
            if self.missing { "missing" } else { "ok" }.to_owned(),
            format!("{}:/{}", clean(&self.mount), clean(&self.rel_path)),
        ]
    }
}

impl Row for CalendarEntry {
    const HEADER: &'static [&'static str] = &["AT (UTC)", "ENDS (UTC)", "KIND", "ID", "TITLE"];
    const NONE: &'static str = "(nothing in this window)";
    fn row(&self) -> Vec<String> {
        let (kind, id) = match self.kind {
            CalendarKind::Meeting => (
                "meeting",
                self.meeting_id
                    .map(|id| id.to_string())
                    .unwrap_or_else(dash),
            ),
            CalendarKind::MilestoneDue => (
                "milestone due",
                self.milestone_seq
                    .map(|seq| format!("milestone {seq}"))
                    .unwrap_or_else(dash),
            ),
        };
        vec![
            time(&self.at),
            self.ends_at.as_ref().map(time).unwrap_or_else(dash),
            kind.to_owned(),
            id,
            clean(&self.title),
        ]
    }
}

impl Row for Report {
    const HEADER: &'static [&'static str] =
        &["REPORT_ID", "STATUS", "KIND", "PERIOD", "VERSION", "TITLE"];
    const NONE: &'static str = "(no reports)";
    fn row(&self) -> Vec<String> {
        vec![
            self.report_id.to_string(),
            self.status.to_string(),
            self.kind.to_string(),
            format!("{}..{}", self.period_start, self.period_end),
            self.version.to_string(),
            clean(&self.title),
        ]
    }
}

impl Row for MemberInfo {
    const HEADER: &'static [&'static str] = &["USER_ID", "ROLE", "NAME"];
    const NONE: &'static str = "(no members)";
    fn row(&self) -> Vec<String> {
        vec![
            clean(self.user_id.as_str()),
            self.role.to_string(),
            or_dash(self.display_name.as_deref()),
        ]
    }
}

impl Row for ReportTransition {
    const HEADER: &'static [&'static str] = &["SEQ", "AT (UTC)", "MOVE", "BY", "COMMENT"];
    const NONE: &'static str = "(no moves yet)";
    fn row(&self) -> Vec<String> {
        vec![
            self.seq.to_string(),
            time(&self.at),
            format!("{} -> {}", self.from, self.to),
            or_dash(self.user_id.as_ref().map(|u| u.as_str())),
            or_dash(self.comment.as_deref()),
        ]
    }
}

/// A meeting's fields as `key: value` lines (agenda and notes last, as
/// text).
fn meeting(out: &mut String, meeting: &Meeting, extra: Vec<(&str, String)>) {
    let attendees: Vec<String> = meeting
        .attendees
        .iter()
        .map(|u| clean(u.as_str()))
        .collect();
    let mut fields = vec![
        ("meeting_id", meeting.meeting_id.to_string()),
        ("title", clean(&meeting.title)),
        ("starts_at", time(&meeting.starts_at) + " UTC"),
        ("ends_at", time(&meeting.ends_at) + " UTC"),
        ("location", or_dash(meeting.location.as_deref())),
        (
            "attendees",
            if attendees.is_empty() {
                dash()
            } else {
                attendees.join(", ")
            },
        ),
        ("version", meeting.version.to_string()),
        (
            "updated",
            format!(
                "{} UTC by {}",
                time(&meeting.updated_at),
                or_dash(meeting.updated_by.as_ref().map(|u| u.as_str()))
            ),
        ),
    ];
    fields.extend(extra);
    pairs(out, &fields);
    for (name, text) in [("agenda", &meeting.agenda), ("notes", &meeting.notes)] {
        if let Some(text) = text.as_deref().filter(|t| !t.is_empty()) {
            line(out, format_args!("{name}:"));
            block(out, text);
        }
    }
}

/// Multi-line server text, indented by two spaces.
fn block(out: &mut String, text: &str) {
    for text_line in clean_text(text).lines() {
        line(out, format_args!("  {text_line}"));
    }
}

/// A list of files under a heading.
fn files(out: &mut String, heading: &str, files: &[MeetingFile]) {
    line(out, format_args!("{heading}:"));
    if files.is_empty() {
        line(out, format_args!("{}", MeetingFile::NONE));
    } else {
        table(out, MeetingFile::HEADER, files.iter().map(Row::row));
    }
}

fn file(out: &mut String, file: &MeetingFile, event_id: String) {
    pairs(
        out,
        &[
            ("file_id", file.file_id.to_string()),
            ("meeting_id", file.meeting_id.to_string()),
            (
                "path",
                format!("{}:/{}", clean(&file.mount), clean(&file.rel_path)),
            ),
            ("size", file.size.to_string()),
            ("content_type", or_dash(file.content_type.as_deref())),
            ("missing", file.missing.to_string()),
            ("event_id", event_id),
        ],
    );
}

fn report(out: &mut String, report: &Report) {
    pairs(
        out,
        &[
            ("report_id", report.report_id.to_string()),
            ("title", clean(&report.title)),
            ("kind", report.kind.to_string()),
            (
                "period",
                format!("{} to {}", report.period_start, report.period_end),
            ),
            ("status", report.status.to_string()),
            ("version", report.version.to_string()),
            (
                "created",
                format!(
                    "{} UTC by {}",
                    time(&report.created_at),
                    or_dash(report.created_by.as_ref().map(|u| u.as_str()))
                ),
            ),
        ],
    );
}

impl Human for MeetingData {
    fn human(&self, out: &mut String) {
        meeting(out, &self.meeting, Vec::new());
        files(out, "files", &self.files);
    }
}

impl Human for MeetingWritten {
    fn human(&self, out: &mut String) {
        meeting(
            out,
            &self.meeting,
            vec![
                ("changed", self.changed.join(", ")),
                ("event_id", self.event_id.to_string()),
            ],
        );
    }
}

impl Human for DeleteMeetingData {
    fn human(&self, out: &mut String) {
        let mut extra = vec![("dry_run", self.dry_run.to_string())];
        if let Some(event_id) = self.event_id {
            extra.push(("event_id", event_id.to_string()));
        }
        meeting(out, &self.meeting, extra);
        let heading = if self.dry_run {
            "files that would be removed with it"
        } else {
            "files removed with it"
        };
        files(out, heading, &self.files);
    }
}

impl Human for MeetingFileWritten {
    fn human(&self, out: &mut String) {
        file(out, &self.file, self.event_id.to_string());
    }
}

impl Human for ReportDetails {
    fn human(&self, out: &mut String) {
        report(out, &self.report);
        line(out, format_args!("history:"));
        if self.history.is_empty() {
            line(out, format_args!("{}", ReportTransition::NONE));
        } else {
            table(
                out,
                ReportTransition::HEADER,
                self.history.iter().map(Row::row),
            );
        }
        line(out, format_args!("body:"));
        block(out, &self.report.body);
    }
}

impl Human for ReportStatusData {
    fn human(&self, out: &mut String) {
        report(out, &self.report);
        pairs(
            out,
            &[
                (
                    "moved",
                    format!("{} -> {}", self.transition.from, self.transition.to),
                ),
                ("comment", or_dash(self.transition.comment.as_deref())),
                ("event_id", self.event_id.to_string()),
            ],
        );
    }
}

impl Human for ProjectMeta {
    fn human(&self, out: &mut String) {
        let date = |d: &Option<chrono::NaiveDate>| d.map(|d| d.to_string()).unwrap_or_else(dash);
        pairs(
            out,
            &[
                ("slug", clean(&self.slug)),
                ("name", clean(&self.name)),
                ("status", self.status.to_string()),
                ("start_date", date(&self.start_date)),
                ("end_date", date(&self.end_date)),
                ("time_zone", clean(&self.time_zone)),
                ("updated_at", time(&self.updated_at) + " UTC"),
            ],
        );
        if !self.description.is_empty() {
            line(out, format_args!("description:"));
            block(out, &self.description);
        }
    }
}
