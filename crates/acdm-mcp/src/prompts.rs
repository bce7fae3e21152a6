//! MCP prompts: conversations a person starts from their client's prompt
//! menu, each with typed arguments, each embedding the resources it is
//! about (read through the same checks as the tools and resources).
//!
//! - `prepare_meeting` (people): the project's overview, and what to do
//!   with it before the next meeting (or the one named);
//! - `review_reports` (people): the reports awaiting approval, with the
//!   overview;
//! - `summarise_file` (everyone): a project file's text and how to
//!   summarise it.

use acdm_core::project::OverviewData;
use acdm_core::{ErrorCode, ProjectName};
use rmcp::model::{
    ContentBlock, GetPromptResult, ListPromptsResult, Prompt, PromptArgument, PromptMessage,
    ResourceContents, Role,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::people::{Person, PersonDirectory};
use crate::resources;
use crate::tools::{Failure, Tools};

/// `prepare_meeting`.
pub(crate) const PREPARE_MEETING: &str = "prepare_meeting";
/// `review_reports`.
pub(crate) const REVIEW_REPORTS: &str = "review_reports";
/// `summarise_file`.
pub(crate) const SUMMARISE_FILE: &str = "summarise_file";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrepareMeetingArgs {
    project_name: String,
    #[serde(default)]
    meeting: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReviewReportsArgs {
    project_name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SummariseFileArgs {
    project_name: String,
    path: String,
    #[serde(default)]
    focus: Option<String>,
}

fn argument(name: &str, description: &str, required: bool) -> PromptArgument {
    PromptArgument::new(name)
        .with_description(description)
        .with_required(required)
}

const PROJECT_ARGUMENT: &str =
    "The project's name, exactly as acdm_list_projects gives it (case-sensitive).";

/// The prompts a caller is offered: people all three, the engine the one
/// that needs no person.
pub(crate) fn catalog(person: bool) -> ListPromptsResult {
    let mut prompts = vec![
        Prompt::new(
            SUMMARISE_FILE,
            Some("Summarise a document of one of your projects (Word, Excel, PowerPoint, PDF… read as text), optionally with a focus."),
            Some(vec![
                argument("project_name", PROJECT_ARGUMENT, true),
                argument("path", "The file: its full path as acdm_search_nextcloud returns it (/Projects/Alpha/…), or its path inside the project's folder.", true),
                argument("focus", "What the summary should concentrate on, e.g. \"risks and deadlines\" (at most 500 characters).", false),
            ]),
        )
        .with_title("Summarise a project document"),
    ];
    if person {
        prompts.insert(
            0,
            Prompt::new(
                PREPARE_MEETING,
                Some("Prepare for a project's next meeting (or the one named): agenda, open points, decisions needed, what to read first."),
                Some(vec![
                    argument("project_name", PROJECT_ARGUMENT, true),
                    argument("meeting", "Words of the meeting's title, when it is not the next one (at most 200 characters).", false),
                ]),
            )
            .with_title("Prepare for the next meeting"),
        );
        prompts.insert(
            1,
            Prompt::new(
                REVIEW_REPORTS,
                Some("Summarise the project's reports awaiting approval, each with what to check before it is approved or sent back."),
                Some(vec![argument("project_name", PROJECT_ARGUMENT, true)]),
            )
            .with_title("Review reports awaiting approval"),
        );
    }
    ListPromptsResult::with_all_items(prompts)
}

/// The prompt's arguments, strictly: unknown ones, a missing required one
/// or a value that is not a string are refused, named.
fn arguments<T: DeserializeOwned>(
    prompt: &str,
    arguments: Option<rmcp::model::JsonObject>,
) -> Result<T, Failure> {
    crate::tools::parse_strictly(
        arguments.unwrap_or_default(),
        &format!("invalid arguments for {prompt}"),
        "Pass the arguments prompts/list describes, each a string.",
    )
}

fn too_long(name: &str, value: Option<&str>, max: usize) -> Result<(), Failure> {
    match value {
        Some(value) if value.chars().count() > max => Err(Failure::new(
            ErrorCode::ValidationError,
            format!("{name} is longer than {max} characters"),
            format!("Shorten {name}."),
        )),
        _ => Ok(()),
    }
}

/// `prompts/get`. `Err` with `None` for a prompt that does not exist (or
/// is not offered to this caller).
pub(crate) async fn get(
    tools: &Tools,
    directory: Option<&dyn PersonDirectory>,
    person: Option<&Person>,
    name: &str,
    args: Option<rmcp::model::JsonObject>,
) -> Result<Option<GetPromptResult>, Failure> {
    Ok(Some(match (name, person) {
        (SUMMARISE_FILE, _) => summarise_file(tools, person, arguments(name, args)?).await?,
        (PREPARE_MEETING, Some(person)) => {
            prepare_meeting(tools, directory, person, arguments(name, args)?).await?
        }
        (REVIEW_REPORTS, Some(person)) => {
            review_reports(tools, directory, person, arguments(name, args)?).await?
        }
        _ => return Ok(None),
    }))
}

/// The overview of the project named `project_name`, which must be one
/// of the person's (any other is answered as the tools answer a project
/// that does not exist), and its URI.
async fn member_overview(
    tools: &Tools,
    directory: Option<&dyn PersonDirectory>,
    person: &Person,
    project_name: &str,
) -> Result<(ProjectName, OverviewData, ResourceContents), Failure> {
    let (name, _) = crate::tools::project_scope(&tools.files_base, project_name.trim())?;
    tools.check_member(Some(person), &name)?;
    let Some(member) = person.memberships.iter().find(|m| m.name == name) else {
        // check_member has just found it.
        return Err(crate::tools::not_encoded());
    };
    let uri = resources::overview_uri(&member.slug);
    let (data, message) =
        resources::overview(directory, Some(person), member.slug.as_str()).await?;
    let embedded = resources::overview_contents(&uri, &data, &message)?;
    Ok((name, data, embedded))
}

fn messages(text: String, embedded: ResourceContents) -> Vec<PromptMessage> {
    vec![
        PromptMessage::new(Role::User, ContentBlock::text(text)),
        PromptMessage::new(Role::User, ContentBlock::resource(embedded)),
    ]
}

async fn prepare_meeting(
    tools: &Tools,
    directory: Option<&dyn PersonDirectory>,
    person: &Person,
    args: PrepareMeetingArgs,
) -> Result<GetPromptResult, Failure> {
    too_long("meeting", args.meeting.as_deref(), 200)?;
    let (name, data, embedded) =
        member_overview(tools, directory, person, &args.project_name).await?;
    let wanted = args
        .meeting
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty());
    let meeting = data.upcoming_meetings.iter().find(|m| {
        wanted.is_none_or(|w| {
            let title = m.title.to_lowercase();
            w.to_lowercase()
                .split_whitespace()
                .all(|word| title.contains(word))
        })
    });
    let which = match wanted {
        Some(w) => format!("the meeting {w:?}"),
        None => "the next meeting".to_owned(),
    };
    let mut text = format!("Prepare me for {which} of project {:?}.\n\n", name.as_str());
    match meeting {
        Some(m) => text.push_str(&format!(
            "The meeting: {:?}, {} to {} UTC{}, {} attendee(s) (meeting_id {}).\n",
            m.title,
            m.starts_at.format("%Y-%m-%d %H:%M"),
            m.ends_at.format("%H:%M"),
            m.location
                .as_deref()
                .map(|l| format!(", at {l}"))
                .unwrap_or_default(),
            m.attendees,
            m.meeting_id
        )),
        None => text.push_str(
            "No such meeting starts in the next 14 days: tell me so, and list what is coming up instead.\n",
        ),
    }
    text.push_str(&format!(
        "\nThe project's overview is attached (status, milestones, meetings of the next 14 days, reports awaiting approval).\n\
         1. Search the project's files for the meeting's topics and the last minutes (acdm_search_nextcloud with project_name {:?}) and read what matters (acdm_read_nextcloud_file).\n\
         2. Look in the wiki for a procedure the meeting follows (acdm_search_wiki).\n\
         Then give me: a short agenda; what was decided and what was left open last time; the decisions this meeting needs and who should bring what; and what I should read before it, with the files' paths. Say where you are unsure rather than guessing.",
        name.as_str()
    ));
    Ok(GetPromptResult::new(messages(text, embedded))
        .with_description(format!("Prepare for {which} of {}", name.as_str())))
}

async fn review_reports(
    tools: &Tools,
    directory: Option<&dyn PersonDirectory>,
    person: &Person,
    args: ReviewReportsArgs,
) -> Result<GetPromptResult, Failure> {
    let (name, data, embedded) =
        member_overview(tools, directory, person, &args.project_name).await?;
    let waiting = &data.reports.awaiting_approval;
    let mut text = format!(
        "Review the reports of project {:?} that are waiting for approval.\n\n",
        name.as_str()
    );
    if waiting.is_empty() {
        text.push_str("No report is waiting for approval: tell me so, with how many are drafts, approved or rejected (in the attached overview).\n");
    } else {
        text.push_str(&format!(
            "{} report(s) waiting (the oldest first):\n",
            data.reports.submitted
        ));
        for report in waiting {
            text.push_str(&format!(
                "- {:?} ({}, {} to {}, report_id {})\n",
                report.title, report.kind, report.period_start, report.period_end, report.report_id
            ));
        }
        text.push_str(&format!(
            "\nFor each: find its documents in the project's files (acdm_search_nextcloud with project_name {:?} and words of its title), read them, and summarise it in at most five bullets; compare it with the current milestone's criteria in the attached overview; list what is missing, inconsistent or late; and say what I should check before approving it or sending it back, with reasons. Do not approve or reject anything yourself: the decision is mine, in a-cdm.\n",
            name.as_str()
        ));
    }
    Ok(GetPromptResult::new(messages(text, embedded))
        .with_description(format!("Reports awaiting approval in {}", name.as_str())))
}

async fn summarise_file(
    tools: &Tools,
    person: Option<&Person>,
    args: SummariseFileArgs,
) -> Result<GetPromptResult, Failure> {
    too_long("focus", args.focus.as_deref(), 500)?;
    let project = args.project_name.trim().to_owned();
    let path = args.path.trim();
    let full = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{}{}/{}", tools.files_base.as_prefix(), project, path)
    };
    let inside = full
        .strip_prefix(&format!("{}{}/", tools.files_base.as_prefix(), project))
        .unwrap_or(&full);
    let uri = resources::file_uri(&project, inside);
    let (embedded, truncated) =
        resources::project_file(tools, person, &project, &full, &uri).await?;
    let mut text = format!("Summarise the attached document {full:?} of project {project:?}");
    match args
        .focus
        .as_deref()
        .map(str::trim)
        .filter(|f| !f.is_empty())
    {
        Some(focus) => text.push_str(&format!(", concentrating on: {focus}.\n")),
        None => text.push_str(".\n"),
    }
    text.push_str("Start with what it is and its date, then its main points, decisions, figures and deadlines, each with the section it comes from. Quote numbers exactly. If the document is binary or unreadable, say so instead.\n");
    if truncated {
        text.push_str("Only the beginning of the document is attached: read on with acdm_read_nextcloud_file from the next_offset in the attachment's _meta before summarising the whole.\n");
    }
    Ok(GetPromptResult::new(messages(text, embedded))
        .with_description(format!("Summary of {full}")))
}
