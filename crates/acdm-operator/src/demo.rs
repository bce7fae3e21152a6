//! The demo's sample project: who is in it, and its business data.
//!
//! `acdm-backend demo` provisions this project and fills it through
//! [`crate::import`]; the data lives here, beside the import it must pass.

use acdm_core::domain::MemberRole;

use crate::import::Document;

/// The sample project's slug.
pub const SLUG: &str = "alpha";
/// Its name (its folder's too).
pub const NAME: &str = "Alpha";
/// Its manager agent.
pub const AGENT: &str = "project-alpha";
/// Its members and their roles.
pub const MEMBERS: &[(&str, MemberRole)] = &[
    ("u-alice", MemberRole::Owner),
    ("u-bob", MemberRole::Admin),
    ("u-carol", MemberRole::Member),
    ("u-dave", MemberRole::Viewer),
];

/// Who fills the demo's business data: its owner, a member (the BFF
/// requires membership by default).
pub const DEMO_OPERATOR: &str = "u-alice";

/// The demo's business data, dated from the Monday after `now` (so runs
/// within one week write the same document, and every meeting lies ahead).
pub fn business_document(
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Document, serde_json::Error> {
    use chrono::{Datelike, Duration, NaiveTime};
    let today = now.date_naive();
    let monday = today - Duration::days(i64::from(today.weekday().num_days_from_monday()))
        + Duration::days(7);
    let day = |offset: i64| monday + Duration::days(offset);
    let at = |offset: i64, hour: u32, minutes: i64| {
        let start = day(offset)
            .and_time(NaiveTime::from_hms_opt(hour, 0, 0).unwrap_or_default())
            .and_utc();
        (
            start.to_rfc3339(),
            (start + Duration::minutes(minutes)).to_rfc3339(),
        )
    };
    let meeting = |key: &str,
                   title: &str,
                   (starts, ends): (String, String),
                   location: &str,
                   agenda: &str,
                   attendees: &[&str]| {
        serde_json::json!({
            "key": key, "title": title, "starts_at": starts, "ends_at": ends,
            "location": location, "agenda": agenda, "attendees": attendees,
        })
    };
    let mut meetings = vec![
        meeting(
            "weekly-1",
            "Weekly status",
            at(0, 9, 30),
            "Room 2.14",
            "- progress since last week\n- risks\n- next steps",
            &["u-alice", "u-bob", "u-carol"],
        ),
        meeting(
            "design-review-2",
            "Design review: data model",
            at(2, 14, 90),
            "https://meet.example.com/alpha-design",
            "Review the report and meeting tables before the pilot.",
            &["u-alice", "u-bob"],
        ),
        meeting(
            "weekly-2",
            "Weekly status",
            at(7, 9, 30),
            "Room 2.14",
            "- progress since last week\n- risks\n- next steps",
            &["u-alice", "u-bob", "u-carol"],
        ),
        meeting(
            "steering-1",
            "Steering committee",
            at(9, 10, 60),
            "Board room",
            "Budget and the pilot's go/no-go.",
            &["u-alice", "u-bob", "u-dave"],
        ),
        meeting(
            "weekly-3",
            "Weekly status",
            at(14, 9, 30),
            "Room 2.14",
            "- progress since last week\n- risks\n- next steps",
            &["u-alice", "u-bob", "u-carol"],
        ),
        meeting(
            "pilot-kickoff",
            "Pilot kick-off",
            at(21, 13, 120),
            "Site A, building 3",
            "Pilot scope, users, support rota.",
            &["u-alice", "u-bob", "u-carol", "u-dave"],
        ),
    ];
    if let Some(review) = meetings.get_mut(1) {
        review["attachments"] = serde_json::json!([{
            "name": "data-model.md",
            "content": "# Data model (draft)\n\n- meetings: title, time, attendees, files\n- reports: draft → submitted → approved | rejected\n- milestones: one current at a time\n",
        }]);
    }
    if let Some(steering) = meetings.get_mut(3) {
        steering["attachments"] = serde_json::json!([{
            "name": "budget-summary.txt",
            "content": "Budget 2026: 120k planned, 47k spent, 8k committed.\nPilot needs 15k more.\n",
        }]);
    }
    let week = |offset: i64| (day(offset).to_string(), day(offset + 6).to_string());
    let report =
        |key: &str, title: &str, (start, end): (String, String), status: &str, body: &str| {
            serde_json::json!({
                "key": key, "title": title, "kind": "weekly", "period_start": start,
                "period_end": end, "status": status, "body": body,
            })
        };
    let document = serde_json::json!({
        "meta": {
            "status": "active",
            "description": "Alpha replaces the paper meeting minutes and weekly reports of the site teams with a shared project space that people and agents work in together.",
            "start_date": day(-63).to_string(),
            "end_date": day(120).to_string(),
            "time_zone": "Europe/Paris",
        },
        "members": [
            { "user_id": "u-alice", "display_name": "Alice Martin" },
            { "user_id": "u-bob", "display_name": "Bob Nguyen" },
            { "user_id": "u-carol", "display_name": "Carol Diaz" },
            { "user_id": "u-dave", "display_name": "Dave Okafor" },
        ],
        "milestones": [
            { "seq": 1, "title": "Discovery", "due_date": day(-35).to_string(), "status": "done",
              "acceptance_criteria": ["Interviews with the three site teams", "Requirements signed off"] },
            { "seq": 2, "title": "Build", "due_date": day(18).to_string(), "status": "current",
              "acceptance_criteria": ["Meetings and reports usable end to end", "Agent tools reviewed by security"] },
            { "seq": 3, "title": "Pilot", "due_date": day(60).to_string(), "status": "planned",
              "acceptance_criteria": ["Two sites use it for a month", "No open blocker"] },
        ],
        "sow": {
            "summary": "Give the site teams one shared place for meeting minutes and weekly reports, where people and agents work together, with every agent change recorded and revertible.",
            "deliverables": [
                { "title": "Requirements", "description": "The site teams' needs, signed off.", "milestone": 1 },
                { "title": "Meetings and reports", "description": "Meetings with attendees and files; reports with their approval flow.", "milestone": 2 },
                { "title": "Agent tools", "description": "The agent's tools over files, meetings and reports, reviewed by security.", "milestone": 2 },
                { "title": "Pilot at two sites", "description": "A month of use at two sites, with feedback collected.", "milestone": 3 },
            ],
        },
        "reports": [
            report("week-minus-4", "Weekly report", week(-28), "approved", "Discovery closed; requirements signed off."),
            report("week-minus-3", "Weekly report", week(-21), "rejected", "Build started. (Rejected: add the budget figures.)"),
            report("week-minus-2", "Weekly report", week(-14), "submitted", "Data model drafted; review planned."),
            report("week-minus-1", "Weekly report", week(-7), "draft", "Meetings API done; reports in progress."),
        ],
        "meetings": meetings,
    });
    serde_json::from_value(document)
}

#[cfg(test)]
mod tests {
    use super::*;
    use acdm_core::UserId;

    #[test]
    fn the_business_document_is_valid_complete_ahead_and_stable_within_a_week() {
        use acdm_core::business::{MemberInfo, MilestoneStatus, ReportStatus};
        let members: Vec<MemberInfo> = MEMBERS
            .iter()
            .map(|(user, role)| MemberInfo {
                user_id: UserId::parse(user).unwrap(),
                display_name: None,
                role: *role,
            })
            .collect();
        // A Wednesday and the Sunday after it: the same document.
        let wednesday = "2026-11-25T16:00:00Z".parse().unwrap();
        let doc = business_document(wednesday).unwrap();
        let problems = crate::import::check(&doc, &members, &[]);
        assert!(problems.is_empty(), "{:?}", problems.list());
        assert_eq!(
            doc,
            business_document("2026-11-29T23:59:00Z".parse().unwrap()).unwrap()
        );
        let current = doc
            .milestones
            .iter()
            .filter(|m| m.status == Some(MilestoneStatus::Current))
            .count();
        assert_eq!(current, 1);
        for status in ReportStatus::ALL {
            assert!(
                doc.reports.iter().any(|r| r.status == Some(*status)),
                "{status}"
            );
        }
        assert_eq!(doc.meetings.len(), 6);
        assert!(doc.meetings.iter().all(|m| m.starts_at > wednesday));
        let with_files = doc
            .meetings
            .iter()
            .filter(|m| !m.attachments.is_empty())
            .count();
        assert_eq!(with_files, 2);
        assert!(doc.meta.is_some());
        let sow = doc.sow.as_ref().expect("a statement of work");
        assert!(!sow.summary.is_empty() && sow.deliverables.len() >= 3);
    }
}
