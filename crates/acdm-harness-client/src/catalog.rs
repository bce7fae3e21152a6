//! The tool catalog (spec §7): for every BFF operation, the tool an engine
//! registers as it is — a name, a description written for an LLM, the JSON
//! Schema of the input and risk annotations — so tools are defined in one
//! place and their schemas cannot drift from the server's.
//!
//! - **Schemas** come from the very types the BFF parses
//!   (`op.request_schema()` in `acdm_core`), with every `$ref` inlined and
//!   the `$schema`/`$defs`/root `title` keys dropped: several LLM tool APIs
//!   accept only a self-contained object schema. Unknown fields are refused
//!   (`additionalProperties: false`), as the BFF refuses them.
//! - **Descriptions** say in a line what the tool does, when to use it and
//!   when not, give a good and a bad call with why, list the pitfalls
//!   (dry-run deletes, `if_version`/`if_match`/`if_current` preconditions,
//!   attachments only through the business operations), and the least role.
//! - **Annotations** follow MCP's hints: `read_only`, `destructive` (may
//!   change or remove what exists, rather than only add), `idempotent`
//!   (repeating the same call changes nothing more), `open_world: false`
//!   (the tools act only inside the agent's project), plus the least role.
//!
//! Every family is listed with an exhaustive `match`: an operation added to
//! `acdm_core` without its entry here does not compile.
//!
//! ```
//! let tools = acdm_harness_client::catalog();
//! assert_eq!(tools.len(), 24);
//! let read = tools.iter().find(|t| t.name == "nc_read").unwrap();
//! assert!(read.annotations.read_only);
//! assert_eq!(read.input_schema["additionalProperties"], false);
//! ```

use acdm_core::business::Access;
use acdm_core::business::wire::BusinessOp;
use acdm_core::nc::NcOp;
use acdm_core::project::ProjectOp;
use serde::Serialize;
use serde_json::{Map, Value};

/// One tool an engine registers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    /// The tool's name (`nc_read`, `business_create_meeting`,
    /// `project_overview`): `[a-z_]`, unique, stable.
    pub name: String,
    /// `nc`, `business` or `project`.
    pub family: &'static str,
    /// The operation's wire name (`read`, `milestone/advance`).
    pub operation: &'static str,
    /// `GET` or `POST`.
    pub method: &'static str,
    /// The endpoint relative to the backend's root.
    pub path: &'static str,
    /// What the LLM reads: purpose, when (not) to use it, a good and a bad
    /// example, the pitfalls, the role needed.
    pub description: String,
    /// The JSON Schema of the input (self-contained, no `$ref`).
    pub input_schema: Value,
    /// The risk hints.
    pub annotations: Annotations,
}

/// A tool's risk hints (MCP's tool annotations, plus the least role).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Annotations {
    /// It changes nothing.
    pub read_only: bool,
    /// It may change or remove what exists (not only add).
    pub destructive: bool,
    /// Repeating the same call changes nothing more.
    pub idempotent: bool,
    /// It reaches outside the agent's project: never.
    pub open_world: bool,
    /// The least role of the acting user that may call it (`viewer`,
    /// `member`, `admin`).
    pub least_role: &'static str,
}

/// How a tool is described; rendered into [`ToolDefinition::description`].
struct Doc {
    purpose: &'static str,
    use_when: &'static str,
    not_when: &'static str,
    good: &'static str,
    bad: &'static str,
    pitfalls: &'static [&'static str],
    destructive: bool,
    idempotent: bool,
}

/// Every BFF operation as a tool, nc first, then business, then project.
pub fn catalog() -> Vec<ToolDefinition> {
    let mut tools = Vec::new();
    for op in NcOp::ALL {
        tools.push(tool(
            NcOp::FAMILY,
            op.as_str(),
            op.method(),
            op.path(),
            op.writes(),
            op.access(),
            op.request_schema(),
            &nc_doc(*op),
        ));
    }
    for op in BusinessOp::ALL {
        tools.push(tool(
            BusinessOp::FAMILY,
            op.as_str(),
            op.method(),
            op.path(),
            op.writes(),
            op.access(),
            op.request_schema(),
            &business_doc(*op),
        ));
    }
    for op in ProjectOp::ALL {
        tools.push(tool(
            ProjectOp::FAMILY,
            op.as_str(),
            op.method(),
            op.path(),
            op.writes(),
            op.access(),
            op.request_schema(),
            &project_doc(*op),
        ));
    }
    tools
}

#[expect(
    clippy::too_many_arguments,
    reason = "one operation's facts, from three enums that share no trait"
)]
fn tool(
    family: &'static str,
    operation: &'static str,
    method: &'static str,
    path: &'static str,
    writes: bool,
    access: Access,
    schema: schemars::Schema,
    doc: &Doc,
) -> ToolDefinition {
    let least_role = access.least_role().as_str();
    ToolDefinition {
        name: format!("{family}_{}", operation.replace('/', "_")),
        family,
        operation,
        method,
        path,
        description: render(doc, least_role),
        input_schema: portable(schema.to_value()),
        annotations: Annotations {
            read_only: !writes,
            destructive: writes && doc.destructive,
            idempotent: !writes || doc.idempotent,
            open_world: false,
            least_role,
        },
    }
}

fn render(doc: &Doc, role: &str) -> String {
    let mut text = format!(
        "{}\n\nUse it when: {}\nNot when: {}\nGood: {}\nBad: {}\n",
        doc.purpose, doc.use_when, doc.not_when, doc.good, doc.bad
    );
    if !doc.pitfalls.is_empty() {
        text.push_str("Pitfalls:\n");
        for pitfall in doc.pitfalls {
            text.push_str("- ");
            text.push_str(pitfall);
            text.push('\n');
        }
    }
    text.push_str(&format!(
        "Needs the user's role to be {role} or above. Every outcome is a ToolResponse: read `code`, `message` and `suggested_action` when `success` is false."
    ));
    text
}

/// `schema` with every `#/$defs/…` reference replaced by its definition
/// and the keys a tool API does not want removed.
fn portable(schema: Value) -> Value {
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut out = inline(schema, &defs, 0);
    if let Some(object) = out.as_object_mut() {
        object.remove("$schema");
        object.remove("$defs");
        object.remove("title");
    }
    out
}

fn inline(value: Value, defs: &Map<String, Value>, depth: usize) -> Value {
    match value {
        Value::Object(mut object) => {
            if depth < 16
                && let Some(target) = object
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .and_then(|name| defs.get(name))
                    .cloned()
            {
                object.remove("$ref");
                if let Value::Object(fields) = inline(target, defs, depth + 1) {
                    for (key, field) in fields {
                        object.entry(key).or_insert(field);
                    }
                }
            }
            Value::Object(
                object
                    .into_iter()
                    .map(|(k, v)| (k, inline(v, defs, depth + 1)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|v| inline(v, defs, depth + 1))
                .collect(),
        ),
        other => other,
    }
}

const NO_ATTACHMENTS: &str = "Files under `meetings/<meeting_id>/` that are registered as a meeting's attachments are refused with `conflict`: use business_delete_meeting_file or business_delete_meeting for them.";
const PATHS: &str = "Paths are relative to the mount's root (`notes/plan.md`, no leading slash, no `..`); `mount` defaults to `project` (see nc_list_mounts).";
const IDS: &str =
    "Ids come from list and get calls; never invent one — an id from elsewhere is `not_found`.";
const TIMES: &str =
    "Times are RFC 3339 with an offset (`2026-12-01T09:00:00+01:00` or `…Z`); answers are in UTC.";
const PAGES: &str =
    "Lists are paged: pass `next_cursor` back as `cursor` until it is null; `limit` is 1–100.";

fn nc_doc(op: NcOp) -> Doc {
    match op {
        NcOp::ListMounts => Doc {
            purpose: "List the project's file mounts (name, writable).",
            use_when: "you need to know which file areas exist or whether one is writable, before listing or writing.",
            not_when: "you already know the mount; every nc tool defaults to `project`.",
            good: "{}",
            bad: "{\"project\": \"alpha\"} — the project comes from the agent, never from the input (refused).",
            pitfalls: &[],
            destructive: false,
            idempotent: true,
        },
        NcOp::List => Doc {
            purpose: "List one folder level of the project's files: name, is_dir, size, modified, etag.",
            use_when: "you need to see what a folder holds before reading or writing.",
            not_when: "you look for a file by name or content anywhere (use nc_search).",
            good: "{\"rel_path\": \"meetings\"} (or \"\" for the root).",
            bad: "{\"rel_path\": \"/Projects/Alpha/meetings\"} — absolute paths are refused.",
            pitfalls: &[PATHS],
            destructive: false,
            idempotent: true,
        },
        NcOp::Read => Doc {
            purpose: "Read a window of a file (text, or base64 for binary), with its etag; Word, Excel, PowerPoint, OpenDocument, PDF and HTML documents as their text in Markdown.",
            use_when: "you need a file's content, or its etag before nc_write with `if_match`.",
            not_when: "the file is a meeting's attachment you only need listed (business_get_meeting lists them).",
            good: "{\"rel_path\": \"notes/plan.md\"}; for a long file continue with {\"rel_path\": \"notes/plan.md\", \"offset\": <next_offset>}.",
            bad: "{\"rel_path\": \"notes\"} — a folder is `conflict`: list it instead.",
            pitfalls: &[
                PATHS,
                "A truncated answer says `truncated: true` and `next_offset`; an offset past the end is a `validation_error` naming the size.",
                "A document's answer has `extracted_from` (its format): `offset`, `size` and `next_offset` count bytes of its text and `file_size` is the file's; `\"as\": \"raw\"` gives its exact bytes (base64). A document that cannot be read as text is `document_unreadable`, saying why: do not retry it.",
            ],
            destructive: false,
            idempotent: true,
        },
        NcOp::Search => Doc {
            purpose: "Find the project's files by the words in their contents and names (documents' text included, English and Chinese), best first, each with a snippet and a score.",
            use_when: "you do not know where a file is, or which file says something.",
            not_when: "you know the folder (nc_list is exact) or look for meetings or reports (use the business tools).",
            good: "{\"query\": \"supplier late delivery penalty\", \"limit\": 10}",
            bad: "{\"query\": \"\"} — 1 to 500 characters are needed.",
            pitfalls: &[
                "Hits are inside the project's mounts only.",
                "`searched: \"upstream\"` means the content index is still being built: the file store's own search answered, which may match names only.",
            ],
            destructive: false,
            idempotent: true,
        },
        NcOp::Write => Doc {
            purpose: "Create or overwrite a file (parents are created); recorded and revertible by an operator.",
            use_when: "the user asked for a document to be written or updated.",
            not_when: "attaching a file to a meeting (use business_attach_meeting_file, which registers it).",
            good: "{\"rel_path\": \"notes/summary.md\", \"content\": \"# Summary\\n…\", \"if_match\": \"<etag from nc_read>\"}",
            bad: "overwriting a file you have not read without `if_match` — you may erase someone's change.",
            pitfalls: &[
                "Pass `if_match` with the etag you read to overwrite safely: a changed file is `conflict`, nothing written.",
                "`encoding: base64` for binary content; up to the server's size limit.",
                "`kill_switch_off` means operators have paused agents' file writes: tell the user, do not retry.",
                NO_ATTACHMENTS,
                PATHS,
            ],
            destructive: true,
            idempotent: true,
        },
        NcOp::Delete => Doc {
            purpose: "Delete a file or folder — a dry run unless `dry_run` is false; what goes is kept for operators to restore.",
            use_when: "the user asked for a file to be removed; first call with the default dry run and show what would go.",
            not_when: "the file is a meeting's attachment (use business_delete_meeting_file).",
            good: "{\"rel_path\": \"drafts/old.md\"} (dry run), then {\"rel_path\": \"drafts/old.md\", \"dry_run\": false} once the user agreed.",
            bad: "{\"rel_path\": \"\", \"dry_run\": false} — never delete a whole mount.",
            pitfalls: &[
                "The default is a dry run: nothing is deleted until you pass `dry_run: false`.",
                NO_ATTACHMENTS,
                PATHS,
            ],
            destructive: true,
            idempotent: true,
        },
        NcOp::Move => Doc {
            purpose: "Move or rename a file or folder inside a mount; never over an existing item unless `overwrite` is true.",
            use_when: "the user asked to rename or reorganise files.",
            not_when: "the item is a meeting's attachment or a folder holding one (refused).",
            good: "{\"from_rel_path\": \"drafts/plan.md\", \"to_rel_path\": \"notes/plan.md\"}",
            bad: "{\"from_rel_path\": \"a.md\", \"to_rel_path\": \"b.md\", \"overwrite\": true} without checking what b.md holds.",
            pitfalls: &[
                "An existing target is `conflict` unless `overwrite: true` (the replaced item is kept for operators).",
                NO_ATTACHMENTS,
                PATHS,
            ],
            destructive: true,
            idempotent: true,
        },
    }
}

fn business_doc(op: BusinessOp) -> Doc {
    match op {
        BusinessOp::ListMeetings => Doc {
            purpose: "List the project's meetings starting in a time window, soonest first (default: the next 30 days).",
            use_when: "you need meetings by date, or a meeting_id.",
            not_when: "you also need milestone due dates (business_list_calendar merges both).",
            good: "{\"from\": \"2026-12-01T00:00:00+01:00\", \"to\": \"2026-12-15T00:00:00+01:00\", \"limit\": 20}",
            bad: "{\"from\": \"2026-12-01\"} — a date alone is refused: give a time with an offset.",
            pitfalls: &[TIMES, PAGES],
            destructive: false,
            idempotent: true,
        },
        BusinessOp::GetMeeting => Doc {
            purpose: "Read one meeting with its attachments (`missing: true` for a file found gone).",
            use_when: "you need a meeting's agenda, notes, attendees, version or files.",
            not_when: "you do not have its meeting_id yet (list meetings first).",
            good: "{\"meeting_id\": \"<id from business_list_meetings>\"}",
            bad: "{\"title\": \"Kick-off\"} — meetings are read by id.",
            pitfalls: &[IDS],
            destructive: false,
            idempotent: true,
        },
        BusinessOp::CreateMeeting => Doc {
            purpose: "Create a meeting (recorded, revertible); returns it with its event.",
            use_when: "the user asked to schedule a meeting.",
            not_when: "the meeting exists already (update it with business_update_meeting).",
            good: "{\"title\": \"Site visit\", \"starts_at\": \"2026-12-03T09:00:00+01:00\", \"ends_at\": \"2026-12-03T10:00:00+01:00\", \"attendees\": [\"u-alice\"]}",
            bad: "{\"title\": \"Site visit\", \"starts_at\": \"2026-12-03T09:00:00\", \"ends_at\": \"2026-12-04T12:00:00\"} — no offset, and longer than 24 hours.",
            pitfalls: &[
                TIMES,
                "`ends_at` must be after `starts_at` and at most 24 hours later; title 1–200 characters.",
                "Attendees are user ids of project members (business_list_members).",
            ],
            destructive: false,
            idempotent: false,
        },
        BusinessOp::UpdateMeeting => Doc {
            purpose: "Change a meeting's fields; only the fields given change (an empty location, agenda or notes clears it).",
            use_when: "the user asked to move, rename or annotate a meeting.",
            not_when: "you have not read the meeting: you need its current `version`.",
            good: "{\"meeting_id\": \"<id>\", \"if_version\": 3, \"starts_at\": \"2026-12-03T14:00:00+01:00\", \"ends_at\": \"2026-12-03T15:00:00+01:00\"}",
            bad: "{\"meeting_id\": \"<id>\", \"if_version\": 1, …} with a version you guessed — a stale version is `conflict`.",
            pitfalls: &[
                "`if_version` is required: a stale one answers `conflict` with the current version and the fields changed since; read again, check with the user, retry.",
                "`attendees` replaces the whole list.",
                TIMES,
            ],
            destructive: true,
            idempotent: true,
        },
        BusinessOp::DeleteMeeting => Doc {
            purpose: "Delete a meeting with its attachments, in one revertible event — a dry run unless `dry_run` is false.",
            use_when: "the user asked to cancel and remove a meeting; show the dry run first.",
            not_when: "only one attachment should go (business_delete_meeting_file).",
            good: "{\"meeting_id\": \"<id>\"} (dry run), then {\"meeting_id\": \"<id>\", \"dry_run\": false} once the user agreed.",
            bad: "{\"meeting_id\": \"<id>\", \"dry_run\": false} without telling the user which files go with it.",
            pitfalls: &[
                "The default is a dry run: nothing is deleted until you pass `dry_run: false`.",
                "Needs an admin or owner.",
                IDS,
            ],
            destructive: true,
            idempotent: true,
        },
        BusinessOp::ListMeetingFiles => Doc {
            purpose: "List a meeting's attachments (name, size, path, `missing`).",
            use_when: "you need a meeting's files without the rest of the meeting.",
            not_when: "you read the meeting anyway (business_get_meeting includes them).",
            good: "{\"meeting_id\": \"<id>\"}",
            bad: "nc_list on `meetings/<id>` to find attachments — it does not say which files are registered.",
            pitfalls: &[IDS],
            destructive: false,
            idempotent: true,
        },
        BusinessOp::AttachMeetingFile => Doc {
            purpose: "Write a file under the meeting's folder and register it as an attachment, in one revertible event.",
            use_when: "the user wants minutes, slides or a document attached to a meeting.",
            not_when: "the file is not about a meeting (use nc_write).",
            good: "{\"meeting_id\": \"<id>\", \"name\": \"minutes.md\", \"content\": \"# Minutes\\n…\"}",
            bad: "{\"meeting_id\": \"<id>\", \"name\": \"notes/minutes.md\", …} — one file name, no folders.",
            pitfalls: &[
                "`encoding: base64` for binary content; at most 10 MiB.",
                "`kill_switch_off` means agents' file writes are paused: tell the user.",
                IDS,
            ],
            destructive: false,
            idempotent: false,
        },
        BusinessOp::DeleteMeetingFile => Doc {
            purpose: "Remove one attachment of a meeting: the file (kept for operators) and its registration, in one event.",
            use_when: "the user asked to remove a file from a meeting.",
            not_when: "removing the whole meeting (business_delete_meeting).",
            good: "{\"meeting_id\": \"<id>\", \"file_id\": \"<file_id from business_get_meeting>\"}",
            bad: "nc_delete on the attachment's path — refused with `conflict`; this tool is the way.",
            pitfalls: &[IDS, "There is no dry run: confirm with the user first."],
            destructive: true,
            idempotent: true,
        },
        BusinessOp::ListCalendar => Doc {
            purpose: "The project's calendar in a window (at most 366 days): meetings and milestone due dates, by time.",
            use_when: "the user asks what is coming up, including deadlines.",
            not_when: "you only need meetings with paging (business_list_meetings).",
            good: "{\"from\": \"2026-12-01T00:00:00Z\", \"to\": \"2027-01-01T00:00:00Z\"}",
            bad: "{\"from\": \"2026-01-01T00:00:00Z\", \"to\": \"2028-01-01T00:00:00Z\"} — wider than 366 days.",
            pitfalls: &[TIMES],
            destructive: false,
            idempotent: true,
        },
        BusinessOp::ListReports => Doc {
            purpose: "List the project's reports, newest first, optionally by status.",
            use_when: "you need a report_id or the reports waiting for approval (`status: submitted`).",
            not_when: "you need one report's body and history (business_get_report).",
            good: "{\"status\": \"submitted\"}",
            bad: "{\"status\": \"pending\"} — the statuses are draft, submitted, approved, rejected.",
            pitfalls: &[PAGES],
            destructive: false,
            idempotent: true,
        },
        BusinessOp::GetReport => Doc {
            purpose: "Read one report with its body, version and status history.",
            use_when: "you need a report's content or its current version before moving its status.",
            not_when: "you only need counts (project_overview has them).",
            good: "{\"report_id\": \"<id from business_list_reports>\"}",
            bad: "{\"report_id\": \"weekly-47\"} — ids are UUIDs from list calls.",
            pitfalls: &[IDS],
            destructive: false,
            idempotent: true,
        },
        BusinessOp::UpdateReportStatus => Doc {
            purpose: "Move a report along its approval flow: draft→submitted, submitted→approved or rejected, rejected→draft.",
            use_when: "the user asks to submit, approve, reject or reopen a report.",
            not_when: "the move is not one of those (any other is `conflict` naming the allowed ones).",
            good: "{\"report_id\": \"<id>\", \"to\": \"rejected\", \"comment\": \"Add the budget figures.\", \"if_version\": 4}",
            bad: "{\"report_id\": \"<id>\", \"to\": \"rejected\"} — rejecting needs a comment.",
            pitfalls: &[
                "Approving and rejecting need an admin or owner; members submit and reopen.",
                "Pass `if_version` from business_get_report: a stale one is `conflict`.",
            ],
            destructive: true,
            idempotent: true,
        },
        BusinessOp::ListMembers => Doc {
            purpose: "List the project's members with their names and roles.",
            use_when: "you need user ids for attendees, or who may approve.",
            not_when: "the overview is at hand (project_overview groups members by role).",
            good: "{}",
            bad: "{\"role\": \"admin\"} — no filters; unknown fields are refused.",
            pitfalls: &[],
            destructive: false,
            idempotent: true,
        },
        BusinessOp::GetProjectMeta => Doc {
            purpose: "Read the project's meta: name, status, description, dates, time zone.",
            use_when: "you need the project's dates or time zone (to write times with the right offset).",
            not_when: "the overview is at hand (it includes the meta).",
            good: "{}",
            bad: "{\"slug\": \"alpha\"} — the project is the agent's; unknown fields are refused.",
            pitfalls: &[],
            destructive: false,
            idempotent: true,
        },
    }
}

fn project_doc(op: ProjectOp) -> Doc {
    match op {
        ProjectOp::Overview => Doc {
            purpose: "Everything to know about the project in one cheap call: meta, milestones with the current one, meetings of the next 14 days, reports by status and those awaiting approval, members by role, the last 10 agent writes, and whether file writes are enabled.",
            use_when: "you start a task or need the project's state; it is cheap enough for every turn.",
            not_when: "you need full meeting or report content (use the get tools with the ids it gives).",
            good: "GET with no input: {}",
            bad: "{\"project\": \"alpha\"} — it takes no input.",
            pitfalls: &["`acting_role` says what you may do for this user."],
            destructive: false,
            idempotent: true,
        },
        ProjectOp::Sow => Doc {
            purpose: "The statement of work: summary, deliverables (with their milestone) and each milestone's acceptance criteria.",
            use_when: "you check whether work meets what was agreed, or explain what a milestone needs.",
            not_when: "you only need the milestones' status (project_overview).",
            good: "GET with no input: {}",
            bad: "{\"milestone\": 2} — it takes no input; filter the answer yourself.",
            pitfalls: &["An empty summary means no statement has been written yet."],
            destructive: false,
            idempotent: true,
        },
        ProjectOp::AdvanceMilestone => Doc {
            purpose: "Mark the current milestone done and the next one current (after the last, the project becomes completed); recorded, revertible.",
            use_when: "an admin or owner confirms the current milestone's acceptance criteria are met.",
            not_when: "the user is a member or viewer (refused), or has not confirmed.",
            good: "{\"if_current\": 2} after project_overview showed milestone 2 current.",
            bad: "{\"if_current\": 3} guessed — if 2 is current the answer is `conflict` naming it, and nothing changes.",
            pitfalls: &[
                "`if_current` must be the seq of the milestone that is current now (from project_overview).",
                "Check the acceptance criteria (project_sow) with the user before advancing.",
            ],
            destructive: true,
            idempotent: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_is_one_tool_with_a_unique_name() {
        let tools = catalog();
        assert_eq!(
            tools.len(),
            NcOp::ALL.len() + BusinessOp::ALL.len() + ProjectOp::ALL.len()
        );
        assert_eq!(tools.len(), 24);
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 24, "names are unique");
        for tool in &tools {
            assert!(
                tool.name.len() <= 64
                    && tool
                        .name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '_'),
                "{}",
                tool.name
            );
        }
        assert!(tools.iter().any(|t| t.name == "project_milestone_advance"));
    }

    #[test]
    fn the_annotations_follow_what_each_operation_does() {
        for tool in catalog() {
            let a = tool.annotations;
            let writes = match tool.family {
                "nc" => tool.operation.parse::<NcOp>().map(NcOp::writes),
                "business" => tool.operation.parse::<BusinessOp>().map(BusinessOp::writes),
                _ => tool.operation.parse::<ProjectOp>().map(ProjectOp::writes),
            };
            assert_eq!(a.read_only, !writes.unwrap(), "{}", tool.name);
            assert!(!a.open_world);
            if a.read_only {
                assert!(!a.destructive && a.idempotent, "{}", tool.name);
                assert_eq!(a.least_role, "viewer", "{}", tool.name);
            }
            if tool.name.contains("delete") || tool.name.ends_with("_move") {
                assert!(a.destructive && !a.read_only, "{}", tool.name);
            }
        }
        let create = catalog()
            .into_iter()
            .find(|t| t.name == "business_create_meeting")
            .unwrap();
        assert!(!create.annotations.destructive && !create.annotations.idempotent);
        assert_eq!(create.annotations.least_role, "member");
    }

    #[test]
    fn every_description_has_its_parts_and_the_deletes_say_dry_run() {
        for tool in catalog() {
            let d = &tool.description;
            for part in [
                "Use it when: ",
                "Not when: ",
                "Good: ",
                "Bad: ",
                "Needs the user's role",
            ] {
                assert!(d.contains(part), "{}: no {part:?}", tool.name);
            }
            if tool.operation.starts_with("delete") && tool.name != "business_delete_meeting_file" {
                assert!(
                    d.contains("dry run") && d.contains("dry_run: false"),
                    "{}",
                    tool.name
                );
            }
        }
        let nc_delete = catalog()
            .into_iter()
            .find(|t| t.name == "nc_delete")
            .unwrap();
        assert!(
            nc_delete
                .description
                .contains("business_delete_meeting_file")
        );
    }

    #[test]
    fn schemas_are_self_contained_objects_that_refuse_unknown_fields() {
        for tool in catalog() {
            let text = tool.input_schema.to_string();
            assert!(
                !text.contains("$ref") && !text.contains("$defs"),
                "{}: {text}",
                tool.name
            );
            assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
            assert_eq!(
                tool.input_schema["additionalProperties"], false,
                "{}",
                tool.name
            );
        }
        let update = catalog()
            .into_iter()
            .find(|t| t.name == "business_update_report_status")
            .unwrap();
        // The status enum was a `$ref`; it is inline now.
        let to = &update.input_schema["properties"]["to"];
        assert!(to.to_string().contains("approved"), "{to}");
    }
}
