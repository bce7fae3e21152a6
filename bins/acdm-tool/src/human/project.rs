//! `--human` for the project operations and the tool catalog: the
//! overview as sections (meta, milestones, meetings, reports, members,
//! recent agent writes), the statement of work with each milestone's
//! criteria, and the advance as what was closed and what is current.

use acdm_core::business::{MemberInfo, Milestone};
use acdm_core::project::{AdvanceData, OverviewData, SowData};
use acdm_harness_client::ToolDefinition;

use super::{Human, clean, dash, line, pairs, table};

fn milestone_rows<'a>(milestones: impl Iterator<Item = &'a Milestone>) -> Vec<Vec<String>> {
    milestones
        .map(|m| {
            vec![
                m.seq.to_string(),
                m.status.to_string(),
                m.due_date.map_or_else(dash, |d| d.to_string()),
                clean(&m.title),
            ]
        })
        .collect()
}

fn names(members: &[MemberInfo]) -> String {
    if members.is_empty() {
        return dash();
    }
    members
        .iter()
        .map(|m| match &m.display_name {
            Some(name) => format!("{} ({})", clean(name), clean(m.user_id.as_str())),
            None => clean(m.user_id.as_str()),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Human for OverviewData {
    fn human(&self, out: &mut String) {
        let meta = &self.meta;
        pairs(
            out,
            &[
                (
                    "project",
                    format!("{} ({})", clean(&meta.name), clean(&meta.slug)),
                ),
                ("status", meta.status.to_string()),
                (
                    "dates",
                    format!(
                        "{} → {}",
                        meta.start_date.map_or_else(dash, |d| d.to_string()),
                        meta.end_date.map_or_else(dash, |d| d.to_string())
                    ),
                ),
                ("time zone", clean(&meta.time_zone)),
                (
                    "your role",
                    self.acting_role.map_or_else(dash, |r| r.to_string()),
                ),
                (
                    "file writes",
                    if self.file_writes_enabled {
                        "enabled"
                    } else {
                        "switched off"
                    }
                    .to_owned(),
                ),
            ],
        );
        line(out, format_args!("\nmilestones"));
        if self.milestones.is_empty() {
            line(out, format_args!("(none)"));
        } else {
            table(
                out,
                &["seq", "status", "due", "title"],
                milestone_rows(self.milestones.iter()).into_iter(),
            );
        }
        line(out, format_args!("\nmeetings of the next 14 days"));
        if self.upcoming_meetings.is_empty() {
            line(out, format_args!("(none)"));
        } else {
            table(
                out,
                &["starts (UTC)", "attendees", "meeting_id", "title"],
                self.upcoming_meetings.iter().map(|m| {
                    vec![
                        m.starts_at.format("%Y-%m-%d %H:%M").to_string(),
                        m.attendees.to_string(),
                        m.meeting_id.to_string(),
                        clean(&m.title),
                    ]
                }),
            );
        }
        let r = &self.reports;
        line(
            out,
            format_args!(
                "\nreports: {} draft, {} submitted, {} approved, {} rejected",
                r.draft, r.submitted, r.approved, r.rejected
            ),
        );
        for report in &r.awaiting_approval {
            line(
                out,
                format_args!(
                    "  awaiting approval: {} (v{}) {}",
                    report.report_id,
                    report.version,
                    clean(&report.title)
                ),
            );
        }
        let m = &self.members;
        line(out, format_args!("\nmembers"));
        pairs(
            out,
            &[
                ("owners", names(&m.owners)),
                ("admins", names(&m.admins)),
                ("members", names(&m.members)),
                ("viewers", names(&m.viewers)),
            ],
        );
        line(out, format_args!("\nrecent agent writes"));
        if self.recent_agent_writes.is_empty() {
            line(out, format_args!("(none)"));
        } else {
            table(
                out,
                &["when (UTC)", "status", "op", "user", "target"],
                self.recent_agent_writes.iter().map(|w| {
                    vec![
                        w.at.format("%Y-%m-%d %H:%M:%S").to_string(),
                        w.status.to_string(),
                        clean(&w.op),
                        w.user_id.as_ref().map_or_else(dash, |u| clean(u.as_str())),
                        clean(&w.target),
                    ]
                }),
            );
        }
    }
}

impl Human for SowData {
    fn human(&self, out: &mut String) {
        if self.summary.is_empty() {
            line(out, format_args!("(no summary)"));
        } else {
            line(out, format_args!("{}", super::clean_text(&self.summary)));
        }
        line(out, format_args!("\ndeliverables"));
        if self.deliverables.is_empty() {
            line(out, format_args!("(none)"));
        } else {
            table(
                out,
                &["milestone", "title"],
                self.deliverables.iter().map(|d| {
                    vec![
                        d.milestone.map_or_else(dash, |m| m.to_string()),
                        clean(&d.title),
                    ]
                }),
            );
        }
        for m in &self.milestones {
            line(
                out,
                format_args!("\nmilestone {} ({}): {}", m.seq, m.status, clean(&m.title)),
            );
            for criterion in &m.acceptance_criteria {
                line(out, format_args!("  - {}", clean(criterion)));
            }
        }
    }
}

impl Human for AdvanceData {
    fn human(&self, out: &mut String) {
        pairs(
            out,
            &[
                (
                    "done",
                    format!("{} {}", self.done.seq, clean(&self.done.title)),
                ),
                (
                    "current",
                    self.current
                        .as_ref()
                        .map_or_else(dash, |m| format!("{} {}", m.seq, clean(&m.title))),
                ),
                ("project status", self.project_status.to_string()),
                ("event", self.event_id.to_string()),
            ],
        );
    }
}

/// The catalog as a readable list: name, method and path, risk, purpose.
pub(crate) fn catalog(tools: &[ToolDefinition]) -> String {
    let mut out = String::new();
    table(
        &mut out,
        &["tool", "endpoint", "risk", "role", "purpose"],
        tools.iter().map(|t| {
            let a = t.annotations;
            let risk = if a.read_only {
                "read-only"
            } else if a.destructive {
                "destructive"
            } else {
                "additive"
            };
            vec![
                t.name.clone(),
                format!("{} /{}", t.method, t.path),
                risk.to_owned(),
                a.least_role.to_owned(),
                t.description.lines().next().unwrap_or_default().to_owned(),
            ]
        }),
    );
    out
}
