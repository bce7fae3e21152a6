//! MCP resources: the wiki's files, project files and a person's project
//! overviews, by URI.
//!
//! - `wiki://{path}`: a wiki file (the path percent-encoded or not:
//!   `wiki://guides%2Fweekly.md` and `wiki://guides/weekly.md` are one);
//! - `nextcloud://{project}/{path}`: a file of a project's folder, the
//!   project by its name as the tools take it, the path inside its folder;
//! - `project://{slug}/overview`: a project's overview, for a person who
//!   is a member (the engine reads it at `/agent-tools/project/overview`).
//!
//! `resources/read` goes through the read tools themselves
//! ([`Tools::read_wiki`], [`Tools::read_nextcloud`]): the same scope and
//! membership checks, the same text extraction, one window of at most the
//! largest a read tool serves (`_meta.truncated` and `continue_with` say
//! how to read on). `resources/list` lists, a page at a time, a person's
//! overviews and then every file of the wiki at its head; project files
//! are found by search (a project folder can hold far more files than a
//! list is useful for).

use std::sync::{Arc, Mutex};

use acdm_core::{ErrorCode, ProjectSlug};
use acdm_sources::{SourceError, WikiBlob};
use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};

use crate::people::{Person, PersonDirectory};
use crate::tools::{Failure, ReadNextcloudInput, ReadWikiInput, Structured, Success, Tools};

/// Resources per `resources/list` page.
pub(crate) const PAGE: usize = 100;

/// What a URI names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A wiki file, by its path in the wiki.
    Wiki(String),
    /// A project's file: the project's name and the path inside its
    /// folder, both decoded.
    File { project: String, path: String },
    /// A project's overview.
    Overview(String),
}

/// Characters a URI segment leaves encoded: controls, space and what
/// would end or split it.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'/');

fn encode(segment: &str) -> String {
    utf8_percent_encode(segment, SEGMENT).to_string()
}

/// A path's segments each encoded, the slashes kept.
fn encode_path(path: &str) -> String {
    path.split('/').map(encode).collect::<Vec<_>>().join("/")
}

/// The URI of the wiki file `path`.
pub(crate) fn wiki_uri(path: &str) -> String {
    format!("wiki://{}", encode_path(path))
}

/// The URI of the file `path` (inside its folder) of the project `name`.
pub(crate) fn file_uri(name: &str, path: &str) -> String {
    format!("nextcloud://{}/{}", encode(name), encode_path(path))
}

/// The URI of the project `slug`'s overview.
pub(crate) fn overview_uri(slug: &ProjectSlug) -> String {
    format!("project://{}/overview", encode(slug.as_str()))
}

fn invalid_uri(uri: &str, problem: &str) -> Failure {
    Failure::new(
        ErrorCode::ValidationError,
        format!(
            "invalid resource URI {:?}: {problem}",
            crate::tools::clip(uri, 300)
        ),
        "Use a URI of the forms resources/templates/list gives (wiki://{path}, nextcloud://{project}/{path}, project://{slug}/overview), or one resources/list returned.",
    )
}

fn decoded<'a>(uri: &str, raw: &'a str) -> Result<std::borrow::Cow<'a, str>, Failure> {
    percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| invalid_uri(uri, "its percent-encoding is not UTF-8"))
}

/// Parses a resource URI.
pub(crate) fn parse(uri: &str) -> Result<Target, Failure> {
    if uri.contains(['?', '#']) {
        return Err(invalid_uri(
            uri,
            "it has a query or a fragment (percent-encode `?` and `#` in names)",
        ));
    }
    if let Some(rest) = uri.strip_prefix("wiki://") {
        let path = decoded(uri, rest)?;
        if path.is_empty() {
            return Err(invalid_uri(uri, "it names no wiki file"));
        }
        return Ok(Target::Wiki(path.into_owned()));
    }
    if let Some(rest) = uri.strip_prefix("nextcloud://") {
        let Some((project, path)) = rest.split_once('/') else {
            return Err(invalid_uri(uri, "it names a project but no file in it"));
        };
        let (project, path) = (decoded(uri, project)?, decoded(uri, path)?);
        if project.is_empty() || path.is_empty() {
            return Err(invalid_uri(uri, "it needs a project and a file in it"));
        }
        return Ok(Target::File {
            project: project.into_owned(),
            path: path.into_owned(),
        });
    }
    if let Some(rest) = uri.strip_prefix("project://") {
        let Some(slug) = rest.strip_suffix("/overview") else {
            return Err(invalid_uri(
                uri,
                "a project's resource is its overview: project://{slug}/overview",
            ));
        };
        return Ok(Target::Overview(decoded(uri, slug)?.into_owned()));
    }
    Err(invalid_uri(
        uri,
        "its scheme is none of wiki, nextcloud, project",
    ))
}

/// The templates (`resources/templates/list`).
pub(crate) fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new("wiki://{path}", "wiki-file")
            .with_title("Wiki file")
            .with_description(
                "A file of the company wiki by its path in the wiki (as acdm_search_wiki returns it), e.g. wiki://guides/weekly-reports.md. Documents are read as text.",
            ),
        ResourceTemplate::new("nextcloud://{project}/{path}", "project-file")
            .with_title("Project file")
            .with_description(
                "A file of a project's folder: the project by its name (as acdm_list_projects gives it), the path inside the project's folder, e.g. nextcloud://Alpha/meetings/kickoff.md. Word, Excel, PowerPoint, OpenDocument, PDF and HTML files are read as their text in Markdown. People read only their own projects.",
            ),
        ResourceTemplate::new("project://{slug}/overview", "project-overview")
            .with_title("Project overview")
            .with_description(
                "A project's overview for a member signed in with their own account: status, milestones, meetings of the next 14 days, reports awaiting approval, members, recent agent writes (JSON).",
            )
            .with_mime_type("application/json"),
    ])
}

/// The wiki's file list at its last head, kept while the head stays.
#[derive(Default)]
pub(crate) struct WikiListing(Mutex<Option<(String, Arc<Vec<WikiBlob>>)>>);

impl WikiListing {
    /// Every file of the wiki at its head (the tree fetched again only
    /// when the head moved).
    async fn files(&self, tools: &Tools) -> Result<Arc<Vec<WikiBlob>>, SourceError> {
        let head = tools.sources.wiki.head().await?;
        if let Some((commit, files)) = self.kept()
            && commit == head.commit
        {
            return Ok(files);
        }
        let files = Arc::new(tools.sources.wiki.tree(&head.commit).await?);
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((head.commit, files.clone()));
        Ok(files)
    }

    fn kept(&self) -> Option<(String, Arc<Vec<WikiBlob>>)> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// A MIME type by a file's extension, for the list (a read says the
/// type the source gives).
fn mime_of(path: &str) -> Option<&'static str> {
    let extension = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match extension.as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" => "text/plain",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "svg" => "image/svg+xml",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        _ => return None,
    })
}

/// Where a page starts: the cursor a previous page gave, or the start.
fn start_of(cursor: Option<&str>) -> Result<usize, Failure> {
    match cursor {
        None => Ok(0),
        Some(cursor) => cursor.parse::<usize>().map_err(|_| {
            Failure::new(
                ErrorCode::ValidationError,
                "invalid cursor: pass nextCursor exactly as the previous page gave it",
                "List again from the start (no cursor).",
            )
        }),
    }
}

/// One page of `resources/list`: a person's overviews, then the wiki's
/// files. The cursor is where the next page starts.
pub(crate) async fn list(
    tools: &Tools,
    wiki: &WikiListing,
    person: Option<&Person>,
    cursor: Option<&str>,
) -> Result<ListResourcesResult, Failure> {
    let start = start_of(cursor)?;
    let mut overviews: Vec<Resource> = person
        .map(|p| {
            p.memberships
                .iter()
                .map(|m| {
                    Resource::new(overview_uri(&m.slug), format!("{}-overview", m.slug))
                        .with_title(format!("{} — project overview", m.name))
                        .with_description(format!(
                            "Project {:?} (your role: {}): status, milestones, upcoming meetings, reports awaiting approval.",
                            m.name.as_str(),
                            m.role
                        ))
                        .with_mime_type("application/json")
                })
                .collect()
        })
        .unwrap_or_default();
    let files = wiki.files(tools).await?;
    // A cursor past the end (the wiki shrank since it was given) is an
    // empty last page.
    let total = overviews.len() + files.len();
    let first_file = start.saturating_sub(overviews.len());
    let mut page: Vec<Resource> = overviews.drain(..).skip(start).take(PAGE).collect();
    let room = PAGE - page.len();
    page.extend(files.iter().skip(first_file).take(room).map(|blob| {
        let path = blob.path.to_string();
        let resource = Resource::new(wiki_uri(&path), path.clone()).with_title(path.clone());
        match mime_of(&path) {
            Some(mime) => resource.with_mime_type(mime),
            None => resource,
        }
    }));
    let end = start.saturating_add(page.len());
    let mut result = ListResourcesResult::with_all_items(page);
    result.next_cursor = (end < total).then(|| end.to_string());
    Ok(result)
}

/// A read tool's success as the contents of the resource `uri`, and
/// whether the file goes on after its window; `continue_with` is the read
/// tool's call that reads on.
fn window(
    success: Success,
    uri: &str,
    continue_with: &str,
) -> Result<(ResourceContents, bool), Failure> {
    let Structured::Read(output) = success.structured else {
        // Not reached: the read tools answer with `Read`.
        return Err(crate::tools::not_encoded());
    };
    let truncated = output.truncated();
    Ok((output.into_contents(uri, continue_with), truncated))
}

/// `resources/read`.
pub(crate) async fn read(
    tools: &Tools,
    directory: Option<&dyn PersonDirectory>,
    person: Option<&Person>,
    uri: &str,
) -> Result<ReadResourceResult, Failure> {
    let max_bytes = Some(tools.limits.max_bytes);
    let contents = match parse(uri)? {
        Target::Wiki(path) => {
            let read = tools
                .read_wiki(ReadWikiInput {
                    path: path.clone(),
                    git_ref: crate::tools::default_ref(),
                    offset: 0,
                    max_bytes,
                })
                .await?;
            let continue_with = format!("acdm_read_wiki_file with path={path:?}");
            vec![window(read, uri, &continue_with)?.0]
        }
        Target::File { project, path } => {
            let full = format!(
                "{}{}/{}",
                tools.files_base.as_prefix(),
                project,
                path.trim_start_matches('/')
            );
            vec![project_file(tools, person, &project, &full, uri).await?.0]
        }
        Target::Overview(slug) => {
            let (data, message) = overview(directory, person, &slug).await?;
            vec![overview_contents(uri, &data, &message)?]
        }
    };
    Ok(ReadResourceResult::new(contents))
}

/// The project file at `full` (its whole path) of the project named
/// `project`, as the contents of the resource `uri`: one window of the
/// largest read, through [`Tools::read_nextcloud`] and its checks; and
/// whether the file goes on after it.
pub(crate) async fn project_file(
    tools: &Tools,
    person: Option<&Person>,
    project: &str,
    full: &str,
    uri: &str,
) -> Result<(ResourceContents, bool), Failure> {
    let read = tools
        .read_nextcloud(
            ReadNextcloudInput {
                path: full.to_owned(),
                project_name: project.to_owned(),
                offset: 0,
                max_bytes: Some(tools.limits.max_bytes),
            },
            person,
        )
        .await?;
    let continue_with =
        format!("acdm_read_nextcloud_file with project_name={project:?}, path={full:?}");
    window(read, uri, &continue_with)
}

/// A project's overview as the contents of the resource `uri`: JSON of
/// its summary (`message`) and `data`.
pub(crate) fn overview_contents(
    uri: &str,
    data: &acdm_core::project::OverviewData,
    message: &str,
) -> Result<ResourceContents, Failure> {
    let text = serde_json::to_string_pretty(&serde_json::json!({"message": message, "data": data}))
        .map_err(|_| crate::tools::not_encoded())?;
    Ok(ResourceContents::text(text, uri).with_mime_type("application/json"))
}

/// The overview of the project `slug` for `person`, a member of it; any
/// other slug is answered word for word as one no project has.
pub(crate) async fn overview(
    directory: Option<&dyn PersonDirectory>,
    person: Option<&Person>,
    slug: &str,
) -> Result<(acdm_core::project::OverviewData, String), Failure> {
    let missing = || {
        Failure::new(
            ErrorCode::NotFound,
            format!(
                "no project of yours has the slug {:?}",
                crate::tools::clip(slug, 100)
            ),
            "Take a project's overview URI from resources/list, or its slug from acdm_list_projects.",
        )
    };
    let (Some(directory), Some(person)) = (directory, person) else {
        return Err(Failure::new(
            ErrorCode::NotFound,
            "project overviews are served to people signed in with their own account",
            "The engine reads a project's overview at /agent-tools/project/overview.",
        ));
    };
    let Some(member) = person.memberships.iter().find(|m| m.slug.as_str() == slug) else {
        return Err(missing());
    };
    match directory.overview(&person.user, &member.slug).await {
        Ok(Some(overview)) => Ok(overview),
        Ok(None) => Err(missing()),
        Err(error) => {
            tracing::warn!(error = %error, "a project's overview cannot be read");
            Err(Failure::new(
                ErrorCode::ServiceUnavailable,
                "the project's overview cannot be read now",
                "Retry in a few seconds.",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_names_what_its_template_says_encoded_or_not() {
        assert_eq!(
            parse("wiki://guides/weekly.md").unwrap(),
            Target::Wiki("guides/weekly.md".into())
        );
        assert_eq!(
            parse("wiki://guides%2Fweekly.md").unwrap(),
            Target::Wiki("guides/weekly.md".into())
        );
        assert_eq!(
            parse("nextcloud://Alpha%20One/meetings/%E4%BC%9A%E8%AE%AE.md").unwrap(),
            Target::File {
                project: "Alpha One".into(),
                path: "meetings/会议.md".into()
            }
        );
        assert_eq!(
            parse("project://alpha/overview").unwrap(),
            Target::Overview("alpha".into())
        );
        for bad in [
            "file:///etc/passwd",
            "wiki://",
            "nextcloud://Alpha",
            "nextcloud:///x.md",
            "project://alpha",
            "wiki://a.md?ref=x",
            "wiki://a.md#top",
            "wiki://%FF",
        ] {
            let failure = parse(bad).unwrap_err();
            assert_eq!(failure.code(), ErrorCode::ValidationError, "{bad}");
        }
    }

    #[test]
    fn the_uris_made_for_names_parse_back_to_them() {
        for (name, path) in [
            ("Alpha", "plan.md"),
            ("Alpha One", "会议 纪要/第 1 次.docx"),
            ("50% #1?", "a b/c%d.md"),
        ] {
            assert_eq!(
                parse(&file_uri(name, path)).unwrap(),
                Target::File {
                    project: name.into(),
                    path: path.into()
                }
            );
        }
        assert_eq!(
            parse(&wiki_uri("guides/a b?.md")).unwrap(),
            Target::Wiki("guides/a b?.md".into())
        );
    }

    #[test]
    fn a_cursor_is_a_position_and_anything_else_is_refused() {
        assert_eq!(start_of(None).unwrap(), 0);
        assert_eq!(start_of(Some("200")).unwrap(), 200);
        assert_eq!(
            start_of(Some("abc")).unwrap_err().code(),
            ErrorCode::ValidationError
        );
    }
}
