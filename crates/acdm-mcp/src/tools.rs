//! The four knowledge tools: their inputs (strict, bounded), outputs
//! (structured, with a readable text rendering), descriptions written for
//! an LLM, and how each runs against the sources.
//!
//! Nextcloud tools only ever touch `<NEXTCLOUD_BASE_PATH>/<project_name>/`:
//! the project name is validated (not just the bare regex of the spec),
//! read paths must lie inside that prefix segment by segment, and search
//! hits outside it are dropped — so a wrong `project_name` never leaks
//! another project's files; it is `not_found`, naming the one folder that
//! differs only in case when there is one. The trash beside the project
//! folders (`<base>/.acdm-trash/`) is never read or listed, whatever the
//! project name.
//!
//! Optional output fields are omitted when they have no value (never
//! `null`), so their schemas can say a plain type.

use std::time::Duration;

use acdm_core::events::trash_root;
use acdm_core::limit::{Admission, Rate};
use acdm_core::{AbsPath, ErrorCode, PrefixError, ProjectName, RelPath, ToolResponse};
use acdm_sources::render::past_the_end;
use acdm_sources::{EntryKind, GitRef, ReadRange, SourceError, Sources, WikiQuery, Window};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use acdm_knowledge::{DocumentText, Knowledge, KnowledgeError, search_suggestions};

use crate::people::Person;
use acdm_sources::render::{Encoding, render};
use rmcp::model::ResourceContents;

/// The tool names, as the LLM sees them.
pub(crate) const SEARCH_WIKI: &str = "acdm_search_wiki";
pub(crate) const READ_WIKI: &str = "acdm_read_wiki_file";
pub(crate) const SEARCH_NEXTCLOUD: &str = "acdm_search_nextcloud";
pub(crate) const READ_NEXTCLOUD: &str = "acdm_read_nextcloud_file";
/// Offered to people signed in with their own account only.
pub(crate) const LIST_PROJECTS: &str = "acdm_list_projects";

/// The longest query accepted, in characters.
const MAX_QUERY_CHARS: usize = 500;

fn default_limit() -> u32 {
    10
}

pub(crate) fn default_ref() -> String {
    "main".to_owned()
}

/// Input of `acdm_list_projects`: nothing.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListProjectsInput {}

/// One project in `acdm_list_projects`' answer.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ProjectOut {
    /// The name to pass as `project_name`.
    pub(crate) project_name: String,
    /// The project's slug.
    pub(crate) slug: String,
    /// The person's role in it.
    pub(crate) role: String,
    /// Its folder, the prefix of its files' paths.
    pub(crate) folder: String,
}

/// Output of `acdm_list_projects`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ListProjectsOutput {
    /// Who is asking.
    pub(crate) user: String,
    /// Their projects, by name.
    pub(crate) projects: Vec<ProjectOut>,
}

/// Input of `acdm_search_wiki`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchWikiInput {
    /// Words to find in wiki file names and contents (case-insensitive,
    /// matched literally). Use one or two distinctive words, e.g.
    /// "weekly report" or "milestone"; not a whole question.
    #[schemars(length(min = 1, max = 500))]
    pub(crate) query: String,
    /// How many hits to return (1–50, default 10).
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 50))]
    pub(crate) limit: u32,
    /// Only search under this folder of the wiki, e.g. "guides" or
    /// "policies/security". Omit to search the whole wiki.
    #[serde(default)]
    #[schemars(length(max = 1024))]
    pub(crate) path_prefix: Option<String>,
}

/// Input of `acdm_read_wiki_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadWikiInput {
    /// The file's path in the wiki, exactly as a search hit gave it, e.g.
    /// "guides/weekly-reports.md" (no leading slash).
    #[schemars(length(min = 1, max = 1024))]
    pub(crate) path: String,
    /// Branch, tag or commit to read (default "main").
    #[serde(default = "default_ref", rename = "ref")]
    #[schemars(length(min = 1, max = 255))]
    pub(crate) git_ref: String,
    /// First byte to read (default 0). To continue a truncated read, pass
    /// the `next_offset` of the previous answer.
    #[serde(default)]
    pub(crate) offset: u64,
    /// How many bytes to read at most: 1 up to the server's cap (the
    /// schema's `maximum`); default 32768. A larger value is refused, as a
    /// `limit` outside its range is.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub(crate) max_bytes: Option<u64>,
}

/// Input of `acdm_search_nextcloud`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchNextcloudInput {
    /// One or two distinctive words to find in the project's files, e.g.
    /// "kickoff" or "budget" (the tool's description says whether contents
    /// are searched or only names).
    #[schemars(length(min = 1, max = 500))]
    pub(crate) query: String,
    /// The project's name exactly as it appears in the conversation or
    /// workspace context, e.g. "Alpha". Never guess it: ask the user when
    /// unsure.
    #[schemars(length(min = 1, max = 100))]
    pub(crate) project_name: String,
    /// How many hits to return (1–50, default 10).
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 50))]
    pub(crate) limit: u32,
}

/// Input of `acdm_read_nextcloud_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadNextcloudInput {
    /// The file's full path as a search hit gave it, starting with the
    /// project's folder, e.g. "/Projects/Alpha/meetings/2026-11-03-kickoff.md".
    #[schemars(length(min = 1, max = 1024))]
    pub(crate) path: String,
    /// The project's name, the same as in the search, e.g. "Alpha".
    #[schemars(length(min = 1, max = 100))]
    pub(crate) project_name: String,
    /// First byte to read (default 0). To continue a truncated read, pass
    /// the `next_offset` of the previous answer.
    #[serde(default)]
    pub(crate) offset: u64,
    /// How many bytes to read at most: 1 up to the server's cap (the
    /// schema's `maximum`); default 32768. A larger value is refused, as a
    /// `limit` outside its range is.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub(crate) max_bytes: Option<u64>,
}

/// One wiki search hit.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WikiHitOut {
    /// Path in the wiki; pass it to acdm_read_wiki_file.
    path: String,
    /// The file name.
    title: String,
    /// 1-based line where the snippet starts, when GitLab's own search
    /// answered (absent for ranked hits from the content index).
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u64>,
    /// Text around the best match, the matched words in `**…**`; empty
    /// for a file-name match.
    snippet: String,
    /// Relevance (BM25; higher is better, comparable within one answer),
    /// for ranked hits from the content index (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f64>,
    /// Last change (RFC 3339), when known (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    modified: Option<String>,
}

/// Output of `acdm_search_wiki`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SearchWikiOutput {
    /// The query searched.
    query: String,
    /// The folder searched, if narrowed (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    path_prefix: Option<String>,
    /// How many matches the wiki counted in all, when it says (absent
    /// otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    total_count: Option<u64>,
    /// How many hits are returned here.
    returned: usize,
    /// The hits: best first from the content index; file-name matches
    /// first, then content matches, from GitLab's search.
    hits: Vec<WikiHitOut>,
    /// Ways to search better, when there were few hits.
    suggestions: Vec<String>,
    /// `index` (ranked by the content index) or `upstream` (GitLab's own
    /// search, while the index is first being built).
    searched: &'static str,
}

/// One Nextcloud search hit.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct FileHitOut {
    /// Full path; pass it to acdm_read_nextcloud_file.
    path: String,
    /// The file or folder name.
    title: String,
    /// `file` or `folder`; absent when unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    /// The 1-based matching line, for content matches of the upstream's
    /// search (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u64>,
    /// Text around the best match, the matched words in `**…**` (absent
    /// for a file-name match).
    #[serde(skip_serializing_if = "Option::is_none")]
    snippet: Option<String>,
    /// Relevance (BM25; higher is better, comparable within one answer),
    /// for ranked hits from the content index (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f64>,
    /// Last change (RFC 3339), when known (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    modified: Option<String>,
    /// The document format its text was read from (`docx`, `pdf`, …), for
    /// documents (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    extracted_from: Option<String>,
}

/// Output of `acdm_search_nextcloud`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SearchNextcloudOutput {
    /// The query searched.
    query: String,
    /// The project searched.
    project_name: String,
    /// The folder every hit lies in.
    scope: String,
    /// How many matches in all, when the search counts them; file searches
    /// do not, so it is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    total_count: Option<u64>,
    /// How many hits are returned here.
    returned: usize,
    /// The hits: best first from the content index.
    hits: Vec<FileHitOut>,
    /// Ways to search better, when there were few hits.
    suggestions: Vec<String>,
    /// `index` (file contents, ranked by the content index) or `upstream`
    /// (Nextcloud's own search, which matches names only: while the index
    /// is first being built, or for a folder no project provisions).
    searched: &'static str,
}

/// Output of the two read tools.
// Serialized by hand (`Structured`): its keys sorted, as a `Value`'s.
// (Not a doc comment: the doc is the schema's description.)
#[derive(Debug, JsonSchema)]
pub(crate) struct ReadOutput {
    /// The file read.
    path: String,
    /// The wiki ref read (wiki only).
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    git_ref: Option<String>,
    /// The project (Nextcloud only).
    #[serde(skip_serializing_if = "Option::is_none")]
    project_name: Option<String>,
    /// The size in bytes of what is read, when known (absent otherwise):
    /// the file's, or for a document read as text (`extracted_from`) the
    /// text's.
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    /// For a document read as text: the format its text was extracted
    /// from (`docx`, `xlsx`, `pptx`, `odt`, `ods`, `odp`, `pdf` or `html`);
    /// `offset`, `size` and `next_offset` then count bytes of that text
    /// (absent for other files).
    #[serde(skip_serializing_if = "Option::is_none")]
    extracted_from: Option<String>,
    /// For a document read as text, what to know about the extraction
    /// (for example that a fallback extractor was used); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    extraction_notes: Option<Vec<String>>,
    /// For a document read as text: the file's own size in bytes (absent
    /// otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    file_size: Option<u64>,
    /// For a document read as text: the file's etag, the version the text
    /// was made from (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    etag: Option<String>,
    /// First byte of `content` in the file.
    offset: u64,
    /// Bytes of the file `content` covers.
    returned_bytes: u64,
    /// True when the file continues after this window.
    truncated: bool,
    /// Where to continue (pass it as `offset`), when truncated (absent
    /// otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    next_offset: Option<u64>,
    /// `text` (UTF-8) or `base64` (binary content).
    #[schemars(with = "EncodingSchema")]
    encoding: Encoding,
    /// The MIME type, when known (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    content_type: Option<String>,
    /// The bytes, as text or base64.
    content: String,
}

impl ReadOutput {
    /// The read as a resource's contents at `uri` (`resources/read`): the
    /// text as read (a document's as its extracted Markdown), or base64
    /// for binary content. A window that does not reach the end says so in
    /// `_meta` (`truncated`, `next_offset`, `size`), with `continue_with`:
    /// the read tool's call that goes on from there.
    pub(crate) fn into_contents(self, uri: &str, continue_with: &str) -> ResourceContents {
        let mut meta = serde_json::Map::new();
        if let Some(format) = &self.extracted_from {
            meta.insert("extracted_from".into(), format.clone().into());
        }
        if let Some(notes) = &self.extraction_notes {
            meta.insert("extraction_notes".into(), notes.clone().into());
        }
        if let Some(next) = self.next_offset {
            meta.insert("truncated".into(), true.into());
            meta.insert("next_offset".into(), next.into());
            meta.insert(
                "continue_with".into(),
                format!("{continue_with}, offset={next}").into(),
            );
        }
        if let Some(size) = self.size {
            meta.insert("size".into(), size.into());
        }
        let contents = match self.encoding {
            Encoding::Text => ResourceContents::TextResourceContents {
                uri: uri.to_owned(),
                mime_type: self.content_type,
                text: self.content,
                meta: None,
            },
            Encoding::Base64 => ResourceContents::BlobResourceContents {
                uri: uri.to_owned(),
                mime_type: self.content_type,
                blob: self.content,
                meta: None,
            },
        };
        if meta.is_empty() {
            contents
        } else {
            contents.with_meta(rmcp::model::MetaObject(meta))
        }
    }

    /// Whether the window stops before the end of the file.
    pub(crate) fn truncated(&self) -> bool {
        self.truncated
    }
}

impl Serialize for ReadOutput {
    /// The fields in the order of their names, as a `serde_json::Value`
    /// object keeps them; the absent ones skipped as the schema says.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let present = [
            self.content_type.is_some(),
            self.etag.is_some(),
            self.extracted_from.is_some(),
            self.extraction_notes.is_some(),
            self.file_size.is_some(),
            self.next_offset.is_some(),
            self.project_name.is_some(),
            self.git_ref.is_some(),
            self.size.is_some(),
        ];
        let fields = 6 + present.iter().filter(|p| **p).count();
        let mut out = serializer.serialize_struct("ReadOutput", fields)?;
        out.serialize_field("content", &self.content)?;
        if let Some(content_type) = &self.content_type {
            out.serialize_field("content_type", content_type)?;
        }
        out.serialize_field("encoding", &self.encoding)?;
        if let Some(etag) = &self.etag {
            out.serialize_field("etag", etag)?;
        }
        if let Some(extracted_from) = &self.extracted_from {
            out.serialize_field("extracted_from", extracted_from)?;
        }
        if let Some(notes) = &self.extraction_notes {
            out.serialize_field("extraction_notes", notes)?;
        }
        if let Some(file_size) = self.file_size {
            out.serialize_field("file_size", &file_size)?;
        }
        if let Some(next_offset) = self.next_offset {
            out.serialize_field("next_offset", &next_offset)?;
        }
        out.serialize_field("offset", &self.offset)?;
        out.serialize_field("path", &self.path)?;
        if let Some(project_name) = &self.project_name {
            out.serialize_field("project_name", project_name)?;
        }
        if let Some(git_ref) = &self.git_ref {
            out.serialize_field("ref", git_ref)?;
        }
        out.serialize_field("returned_bytes", &self.returned_bytes)?;
        if let Some(size) = self.size {
            out.serialize_field("size", &size)?;
        }
        out.serialize_field("truncated", &self.truncated)?;
        out.end()
    }
}

/// How `content` is encoded, for the output schema (the renderer's
/// [`Encoding`] lives in acdm-sources, which knows nothing of schemas).
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[expect(dead_code, reason = "only its schema is used")]
enum EncodingSchema {
    /// UTF-8 text.
    Text,
    /// Base64 of binary bytes.
    Base64,
}

/// The structured content of a failed call.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ToolFailure {
    /// A stable code from the ToolResponse table (`not_found`, …).
    pub(crate) code: &'static str,
    /// What went wrong.
    pub(crate) message: String,
    /// What to do next, when there is advice (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) suggested_action: Option<String>,
    /// For `rate_limited`: the seconds to wait before calling the tool
    /// again (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) retry_after_seconds: Option<u64>,
}

/// A failed call, before it becomes a tool result: the protocol's failure
/// (`ToolResponse`: code, message, suggested action — the code's default
/// unless a tool gives better advice), built from a lower error by the same
/// mapping the BFF uses (`From<SourceError> for ToolResponse`).
#[derive(Debug)]
pub(crate) struct Failure(ToolResponse);

impl Failure {
    pub(crate) fn new(
        code: ErrorCode,
        message: impl Into<String>,
        action: impl Into<String>,
    ) -> Self {
        Self(ToolResponse::failure(code, message).with_suggested_action(action))
    }

    fn invalid(field: &str, problem: impl std::fmt::Display, action: &str) -> Self {
        Self::new(
            ErrorCode::ValidationError,
            format!("invalid {field}: {problem}"),
            action,
        )
    }

    /// A source error, with `action` instead of its code's default advice.
    fn source(error: SourceError, action: &str) -> Self {
        Self(ToolResponse::from(error).with_suggested_action(action))
    }

    /// The code (a failure always has one).
    pub(crate) fn code(&self) -> ErrorCode {
        self.0.error_code().unwrap_or(ErrorCode::InternalError)
    }

    /// What went wrong.
    pub(crate) fn message(&self) -> &str {
        self.0.message()
    }

    /// What to do next, when there is advice.
    pub(crate) fn suggested_action(&self) -> Option<&str> {
        self.0.suggested_action()
    }

    /// A call refused because the tool's rate limit is reached.
    pub(crate) fn rate_limited(tool: &str, rate: Rate, retry_after: Duration) -> Self {
        let seconds = Admission::retry_after_seconds(retry_after);
        Self(
            ToolResponse::failure(
                ErrorCode::RateLimited,
                format!("{tool} is called more than its limit of {rate} allows"),
            )
            .with_suggested_action(format!(
                "Wait {seconds} s before calling {tool} again; do not repeat calls whose answers you have."
            ))
            .with_data(serde_json::json!({ "retry_after_seconds": seconds })),
        )
    }

    pub(crate) fn to_structured(&self) -> ToolFailure {
        ToolFailure {
            code: self.code().as_str(),
            message: self.0.message().to_owned(),
            suggested_action: self.0.suggested_action().map(str::to_owned),
            retry_after_seconds: self
                .0
                .data()
                .and_then(|data| data.get("retry_after_seconds"))
                .and_then(serde_json::Value::as_u64),
        }
    }
}

impl From<SourceError> for Failure {
    fn from(error: SourceError) -> Self {
        Self(error.into())
    }
}

/// A successful call: structured content and its readable rendering.
pub(crate) struct Success {
    pub(crate) structured: Structured,
    pub(crate) text: String,
}

/// A successful call's structured content.
///
/// A file read's is kept as it is and written when the answer is, keys in
/// the order of a `serde_json::Value`'s object (sorted), so that its bytes
/// are the ones its `Value` writes; the direct path writes it without
/// building that `Value` (a copy of the window and an allocation per
/// key). The searches' are `Value`s.
#[expect(
    clippy::large_enum_variant,
    reason = "moved a few times per call; boxing the read would cost an allocation per read on the hot path"
)]
pub(crate) enum Structured {
    /// A file read, the wiki's or Nextcloud's.
    Read(ReadOutput),
    /// Any other result.
    Value(serde_json::Value),
}

impl Structured {
    /// The structured content as a `Value`, for rmcp's result type.
    pub(crate) fn into_value(self) -> Result<serde_json::Value, serde_json::Error> {
        match self {
            Self::Read(output) => serde_json::to_value(&output),
            Self::Value(value) => Ok(value),
        }
    }
}

impl Serialize for Structured {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Read(output) => output.serialize(serializer),
            Self::Value(value) => value.serialize(serializer),
        }
    }
}

/// The failure of a result that could not be encoded.
pub(crate) fn not_encoded() -> Failure {
    Failure::new(
        ErrorCode::InternalError,
        "the result could not be encoded",
        "Retry once.",
    )
}

fn success(value: &impl Serialize, text: String) -> Result<Success, Failure> {
    let structured = serde_json::to_value(value).map_err(|_| not_encoded())?;
    Ok(Success {
        structured: Structured::Value(structured),
        text,
    })
}

/// A file read's success: its output kept as it is ([`Structured`]).
fn read_success(output: ReadOutput, text: String) -> Result<Success, Failure> {
    Ok(Success {
        structured: Structured::Read(output),
        text,
    })
}

/// Parses arguments strictly (unknown fields and wrong types refused):
/// the failure says `heading`, then the problem (naming its field), and
/// suggests `action`.
pub(crate) fn parse_strictly<T: serde::de::DeserializeOwned>(
    arguments: serde_json::Map<String, serde_json::Value>,
    heading: &str,
    action: &str,
) -> Result<T, Failure> {
    serde_path_to_error::deserialize(serde_json::Value::Object(arguments)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let problem = if path == "." {
            inner
        } else {
            format!("{path}: {inner}")
        };
        Failure::new(
            ErrorCode::ValidationError,
            // serde quotes the offending value whole: keep the message short.
            format!("{heading}: {}", clip(&problem, 300)),
            action,
        )
    })
}

/// Limits on read windows.
#[derive(Debug, Clone, Copy)]
pub struct ReadLimits {
    /// Window when `max_bytes` is omitted.
    pub default_bytes: u64,
    /// Largest window served, whatever is asked.
    pub max_bytes: u64,
}

impl Default for ReadLimits {
    fn default() -> Self {
        Self {
            default_bytes: 32 * 1024,
            max_bytes: 128 * 1024,
        }
    }
}

impl ReadLimits {
    /// The window to read. One rule for every number a tool takes: a value
    /// outside the range the schema advertises is refused, naming the field
    /// and the range — `max_bytes` above the cap as `limit` above 50.
    fn window(&self, offset: u64, asked: Option<u64>) -> Result<ReadRange, Failure> {
        let cap = self.max_bytes;
        let len = asked.unwrap_or_else(|| self.default_bytes.min(cap));
        if len == 0 || len > cap {
            return Err(Failure::invalid(
                "max_bytes",
                format!("{len} is outside 1–{cap} (the server's window cap)"),
                &format!(
                    "Use max_bytes of at most {cap}, or omit it for the default window; read further windows with offset=next_offset."
                ),
            ));
        }
        Ok(ReadRange::new(offset, len))
    }
}

fn check_query(query: &str) -> Result<&str, Failure> {
    let trimmed = query.trim();
    if trimmed.is_empty() {
        return Err(Failure::invalid(
            "query",
            "is empty",
            "Give one or two distinctive words to search for.",
        ));
    }
    if trimmed.chars().count() > MAX_QUERY_CHARS {
        return Err(Failure::invalid(
            "query",
            format!("is longer than {MAX_QUERY_CHARS} characters"),
            "Search for one or two distinctive words, not a whole text.",
        ));
    }
    if trimmed.chars().any(char::is_control) {
        return Err(Failure::invalid(
            "query",
            "contains control characters",
            "Search for plain words.",
        ));
    }
    Ok(trimmed)
}

fn check_limit(limit: u32) -> Result<usize, Failure> {
    if (1..=50).contains(&limit) {
        Ok(limit as usize)
    } else {
        Err(Failure::invalid(
            "limit",
            format!("{limit} is outside 1–50"),
            "Use a limit between 1 and 50, or omit it for 10.",
        ))
    }
}

/// The project's folder: `<base>/<project_name>`, with the name checked
/// beyond the spec's regex (dot names, padding, invisible characters,
/// look-alike separators, 250 bytes).
pub(crate) fn project_scope(
    base: &AbsPath,
    project_name: &str,
) -> Result<(ProjectName, AbsPath), Failure> {
    let name = ProjectName::parse(project_name).map_err(|e| {
        Failure::invalid(
            "project_name",
            format!("{:?} {e}", project_name.chars().take(100).collect::<String>()),
            "Use the project's name exactly as the conversation or workspace shows it; if unsure, ask the user.",
        )
    })?;
    let scope = base.child(&name);
    Ok((name, scope))
}

/// `n` and the noun, singular for one: "1 file", "2 files".
fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A read that starts past the end of the file: a failure naming the
/// file's size, so the model does not take the empty window for content.
fn check_not_past_the_end(window: &Window, offset: u64) -> Result<(), Failure> {
    match past_the_end(window, offset) {
        Some(size) => Err(Failure::invalid(
            "offset",
            format!(
                "{offset} is past the end of the file ({})",
                count(size, "byte", "bytes")
            ),
            "Read from offset 0, or continue with the next_offset a truncated answer gave; there is nothing after the last byte.",
        )),
        None => Ok(()),
    }
}

/// At most `max` characters of `text`, with `…` when cut: one copy of
/// the kept part, not a string grown char by char.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let Some((cut, _)) = text.char_indices().nth(max) else {
        return text.to_owned();
    };
    let kept = text.get(..cut).unwrap_or_default();
    let mut out = String::with_capacity(kept.len() + '…'.len_utf8());
    out.push_str(kept);
    out.push('…');
    out
}

/// A query or path as it may appear in a log line: 64 characters at most,
/// control characters (line breaks, terminal escapes) replaced, so an
/// argument cannot forge or garble log lines.
fn shorten(query: &str) -> String {
    let clipped = clip(query, 64);
    if !clipped.contains(char::is_control) {
        return clipped;
    }
    clipped
        .chars()
        .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
        .collect()
}

/// Whether a refused read path would, once normalised (dot segments
/// resolved, `%2e`/`%2f`/`%5c` decoded, backslashes as separators), lie
/// outside `scope`. It only decides which error to report — a permission
/// error for an escape, as spec §3.4 asks — and never grants access: any
/// path with such segments is refused either way.
fn escapes_scope(raw: &str, scope: &AbsPath) -> bool {
    !raw.is_empty() && !lies_loosely_under(raw, scope)
}

/// Whether a read path, normalised as loosely as [`escapes_scope`] does and
/// compared without case, names something inside `trash` (the backend's
/// trash, `<base>/.acdm-trash/`). Such a path is refused whatever the project
/// name: the trash holds every project's kept copies.
fn names_the_trash(raw: &str, trash: &AbsPath) -> bool {
    lies_loosely_under(raw, trash)
}

/// Whether `raw`, resolved as loosely as [`resolve_loosely`] does, lies in
/// `folder` (or is it), compared segment by segment without case.
fn lies_loosely_under(raw: &str, folder: &AbsPath) -> bool {
    let loose = loosened(raw);
    let resolved = resolve_loosely(&loose);
    let folder = folder.segments();
    resolved.len() >= folder.len() && resolved.iter().zip(folder).all(|(a, b)| same_lowered(a, b))
}

/// Whether `lowered` (lower-cased already) is `segment` lower-cased. An
/// ASCII segment (the usual case, and `.acdm-trash` always) is compared
/// in place; a lower-cased copy per segment and call was most of a
/// read's check.
fn same_lowered(lowered: &str, segment: &str) -> bool {
    if segment.is_ascii() {
        // `lowered` has no upper-case ASCII letter, and its other bytes
        // match only themselves.
        lowered.eq_ignore_ascii_case(segment)
    } else {
        *lowered == segment.to_lowercase()
    }
}

/// `raw` lower-cased, with `%2e`/`%2f`/`%5c` decoded and backslashes as
/// separators, in one pass: what replacing each in turn gives, since no
/// replacement makes another one's pattern.
fn loosened(raw: &str) -> String {
    let lowered = raw.to_lowercase();
    if !lowered.contains(['%', '\\']) {
        return lowered;
    }
    let mut out = String::with_capacity(lowered.len());
    let mut rest = lowered.as_str();
    while let Some(at) = rest.find(['%', '\\']) {
        let (clean, from) = rest.split_at(at);
        out.push_str(clean);
        let (decoded, skip) = match from.as_bytes() {
            [b'\\', ..] => ('/', 1),
            [b'%', b'2', b'e', ..] => ('.', 3),
            [b'%', b'2', b'f', ..] | [b'%', b'5', b'c', ..] => ('/', 3),
            _ => ('%', 1),
        };
        out.push(decoded);
        rest = from.get(skip..).unwrap_or_default();
    }
    out.push_str(rest);
    out
}

/// The segments of a [`loosened`] path with dot segments resolved: where a
/// lenient server might take it. Only ever used to choose a refusal, never
/// to grant access.
fn resolve_loosely(loose: &str) -> Vec<&str> {
    let mut resolved = Vec::new();
    for segment in loose.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                resolved.pop();
            }
            other => resolved.push(other),
        }
    }
    resolved
}

fn file_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_owned()
}

/// Runs the tools against the sources.
#[derive(Clone)]
pub(crate) struct Tools {
    pub(crate) sources: Sources,
    pub(crate) files_base: AbsPath,
    pub(crate) limits: ReadLimits,
    /// The backend's trash under `files_base`, computed once.
    trash: AbsPath,
    /// Documents as text and the content index; without it, searches are
    /// the upstreams' and documents are read as bytes.
    knowledge: Option<Knowledge>,
}

impl Tools {
    pub(crate) fn new(
        sources: Sources,
        files_base: AbsPath,
        limits: ReadLimits,
        knowledge: Option<Knowledge>,
    ) -> Self {
        Self {
            trash: trash_root(&files_base),
            sources,
            files_base,
            limits,
            knowledge,
        }
    }

    pub(crate) async fn search_wiki(&self, input: SearchWikiInput) -> Result<Success, Failure> {
        let query = check_query(&input.query)?;
        let limit = check_limit(input.limit)?;
        let prefix = match input
            .path_prefix
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            None => None,
            Some(p) => Some(RelPath::parse_dir(p.trim_matches('/')).map_err(|e| {
                Failure::invalid(
                    "path_prefix",
                    e,
                    "Give a folder of the wiki such as \"guides\", or omit path_prefix.",
                )
            })?),
        };
        let indexed = match &self.knowledge {
            Some(knowledge) => knowledge
                .search_wiki(prefix.as_ref(), query, limit)
                .await
                .map_err(knowledge_failure)?,
            None => None,
        };
        let (hits, total, searched): (Vec<WikiHitOut>, Option<u64>, &'static str) = match indexed {
            Some(found) => (
                found
                    .hits
                    .into_iter()
                    .map(|h| WikiHitOut {
                        title: file_name(&h.path),
                        path: h.path,
                        line: None,
                        snippet: h.snippet,
                        score: Some(f64::from(h.score)),
                        modified: h.modified.map(rfc3339),
                    })
                    .collect(),
                Some(found.total_count),
                INDEX,
            ),
            None => {
                let found = self
                    .sources
                    .wiki
                    .search(&WikiQuery {
                        term: query.to_owned(),
                        limit,
                        path_prefix: prefix.clone().filter(|p| !p.is_root()),
                        git_ref: None,
                    })
                    .await?;
                let hits = found
                    .hits
                    .into_iter()
                    .map(|h| WikiHitOut {
                        title: h.path.file_name().unwrap_or_default().to_owned(),
                        path: h.path.to_string(),
                        line: Some(h.start_line),
                        snippet: h.snippet,
                        score: None,
                        modified: None,
                    })
                    .collect();
                (hits, found.total, UPSTREAM)
            }
        };
        let prefix_text = prefix.filter(|p| !p.is_root()).map(|p| p.to_string());
        let output = SearchWikiOutput {
            query: query.to_owned(),
            suggestions: search_suggestions(query, hits.len(), prefix_text.as_deref(), false),
            path_prefix: prefix_text,
            total_count: total,
            returned: hits.len(),
            hits,
            searched,
        };
        let mut text = match output.total_count {
            None | Some(0) if output.returned == 0 => {
                format!("No wiki matches for \"{query}\"")
            }
            Some(total) => format!(
                "{} of {} for \"{query}\"",
                output.returned,
                count(total, "wiki match", "wiki matches")
            ),
            None => format!(
                "{} for \"{query}\"",
                count(output.returned as u64, "wiki match", "wiki matches")
            ),
        };
        if let Some(p) = &output.path_prefix {
            text.push_str(&format!(" under {p}/"));
        }
        text.push_str(":\n");
        if output.searched == UPSTREAM && self.indexing() {
            text.push_str(BUILDING_NOTE);
        }
        for (i, hit) in output.hits.iter().enumerate() {
            match (hit.line, hit.score) {
                (Some(line), _) => {
                    text.push_str(&format!("{}. {} (line {line})\n", i + 1, hit.path));
                }
                (None, Some(score)) => {
                    text.push_str(&format!("{}. {} (score {score:.2})\n", i + 1, hit.path));
                }
                (None, None) => text.push_str(&format!("{}. {}\n", i + 1, hit.path)),
            }
            for line in hit.snippet.lines() {
                text.push_str(&format!("   > {line}\n"));
            }
        }
        for s in &output.suggestions {
            text.push_str(&format!("Suggestion: {s}\n"));
        }
        success(&output, text)
    }

    pub(crate) async fn read_wiki(&self, input: ReadWikiInput) -> Result<Success, Failure> {
        let path = RelPath::parse(input.path.trim().trim_start_matches('/')).map_err(|e| {
            Failure::invalid("path", e, "Use a path exactly as acdm_search_wiki returned it, e.g. \"guides/weekly-reports.md\".")
        })?;
        let git_ref = GitRef::parse(input.git_ref.trim()).map_err(|e| {
            Failure::invalid(
                "ref",
                e,
                "Use a branch or tag name such as \"main\", or omit ref.",
            )
        })?;
        let range = self.limits.window(input.offset, input.max_bytes)?;
        let read = self
            .sources
            .wiki
            .read(&path, Some(&git_ref), range)
            .await
            .map_err(|e| match e {
                SourceError::NotFound(_) => Failure::source(
                    e,
                    "Search the wiki with acdm_search_wiki to find the exact path.",
                ),
                other => other.into(),
            })?;
        check_not_past_the_end(&read.window, range.offset)?;
        let rendered = render(&read.window, range.len);
        let output = ReadOutput {
            extracted_from: None,
            extraction_notes: None,
            file_size: None,
            etag: None,
            path: path.to_string(),
            git_ref: Some(read.git_ref.to_string()),
            project_name: None,
            size: read.window.size,
            offset: read.window.offset,
            returned_bytes: rendered.returned_bytes,
            truncated: rendered.truncated,
            next_offset: rendered.next_offset,
            encoding: rendered.encoding,
            content_type: read.window.content_type,
            content: rendered.content,
        };
        let text = read_text(
            &output,
            &format!("wiki file {} at {}", output.path, git_ref),
        );
        read_success(output, text)
    }

    pub(crate) async fn search_nextcloud(
        &self,
        input: SearchNextcloudInput,
        person: Option<&Person>,
    ) -> Result<Success, Failure> {
        let query = check_query(&input.query)?;
        let limit = check_limit(input.limit)?;
        let (name, scope) = project_scope(&self.files_base, &input.project_name)?;
        self.check_member(person, &name)?;
        let indexed = match &self.knowledge {
            Some(knowledge) => knowledge
                .search_files(&scope, query, limit)
                .await
                .map_err(knowledge_failure)?,
            None => None,
        };
        // Either source filters already; this is the second, independent
        // check (and the trash is dropped whatever the scope).
        let inside =
            |path: &AbsPath| scope.contains(path) && *path != scope && !self.trash.contains(path);
        let (hits, total, searched): (Vec<FileHitOut>, Option<u64>, &'static str) = match indexed {
            Some(found) => {
                let hits = found
                    .hits
                    .into_iter()
                    .filter(|h| AbsPath::parse(&h.path).is_ok_and(|p| inside(&p)))
                    .take(limit)
                    .map(|h| FileHitOut {
                        title: file_name(&h.path),
                        path: h.path,
                        kind: Some("file".to_owned()),
                        line: None,
                        snippet: Some(h.snippet).filter(|s| !s.is_empty()),
                        score: Some(f64::from(h.score)),
                        modified: h.modified.map(rfc3339),
                        extracted_from: h.extracted_from,
                    })
                    .collect();
                (hits, Some(found.total_count), INDEX)
            }
            None => {
                let found = self.sources.search.search(query, limit, &scope).await?;
                let hits = found
                    .into_iter()
                    .filter(|h| inside(&h.path))
                    .take(limit)
                    .map(|h| {
                        let path = h.path.to_string();
                        FileHitOut {
                            title: file_name(&path),
                            path,
                            kind: h.kind.map(|k| match k {
                                EntryKind::File => "file".to_owned(),
                                EntryKind::Folder => "folder".to_owned(),
                            }),
                            line: h.line,
                            snippet: h.snippet,
                            score: None,
                            modified: None,
                            extracted_from: None,
                        }
                    })
                    .collect();
                (hits, None, UPSTREAM)
            }
        };
        if hits.is_empty()
            && let Some(missing) = self.missing_project(&name, &scope, person).await
        {
            return Err(missing);
        }
        let names_only = searched == UPSTREAM && self.sources.search.kind() == "nextcloud";
        let output = SearchNextcloudOutput {
            query: query.to_owned(),
            project_name: name.to_string(),
            scope: scope.as_prefix(),
            total_count: total,
            returned: hits.len(),
            suggestions: search_suggestions(query, hits.len(), None, names_only),
            hits,
            searched,
        };
        let mut text = match output.total_count {
            Some(total) => format!(
                "{} of {} matching \"{query}\" in {}, best first:\n",
                output.returned,
                count(total, "file", "files"),
                output.scope
            ),
            None => format!(
                "{} matching \"{query}\" in {}:\n",
                count(output.returned as u64, "file", "files"),
                output.scope
            ),
        };
        if output.searched == UPSTREAM && self.indexing() {
            text.push_str(BUILDING_NOTE);
        }
        for (i, hit) in output.hits.iter().enumerate() {
            let kind = hit
                .kind
                .as_deref()
                .map(|k| format!(" [{k}]"))
                .unwrap_or_default();
            match (&hit.line, &hit.snippet, hit.score) {
                (Some(line), Some(snippet), _) => text.push_str(&format!(
                    "{}. {}{kind} (line {line})\n   > {snippet}\n",
                    i + 1,
                    hit.path
                )),
                (None, snippet, Some(score)) => {
                    text.push_str(&format!(
                        "{}. {}{kind} (score {score:.2})\n",
                        i + 1,
                        hit.path
                    ));
                    for line in snippet.as_deref().unwrap_or_default().lines() {
                        text.push_str(&format!("   > {line}\n"));
                    }
                }
                _ => text.push_str(&format!("{}. {}{kind}\n", i + 1, hit.path)),
            }
        }
        for s in &output.suggestions {
            text.push_str(&format!("Suggestion: {s}\n"));
        }
        success(&output, text)
    }

    pub(crate) async fn read_nextcloud(
        &self,
        input: ReadNextcloudInput,
        person: Option<&Person>,
    ) -> Result<Success, Failure> {
        let (name, scope) = project_scope(&self.files_base, &input.project_name)?;
        self.check_member(person, &name)?;
        let outside = || {
            Failure::new(
                ErrorCode::PermissionDenied,
                format!(
                    "path outside project scope: {:?} (required prefix: {:?})",
                    clip(&input.path, 300),
                    scope.as_prefix()
                ),
                "Use a path that starts with the project's folder, as acdm_search_nextcloud returns it, and the same project_name.",
            )
        };
        if names_the_trash(input.path.trim(), &self.trash) {
            return Err(Failure::new(
                ErrorCode::PermissionDenied,
                format!(
                    "path inside the trash, which is not readable: {:?} (required prefix: {:?})",
                    clip(&input.path, 300),
                    scope.as_prefix()
                ),
                "The trash keeps replaced and deleted files for operators to restore; read files inside the project's folder, as acdm_search_nextcloud returns them.",
            ));
        }
        let rel = scope
            .strip_prefix_of(input.path.trim())
            .map_err(|e| match e {
                PrefixError::Outside { .. } => outside(),
                PrefixError::Invalid(_) if escapes_scope(input.path.trim(), &scope) => outside(),
                PrefixError::Invalid(problem) => Failure::new(
                    ErrorCode::InvalidPath,
                    format!("invalid path: {problem}"),
                    "Use a full path exactly as acdm_search_nextcloud returned it.",
                ),
            })?;
        if rel.is_root() {
            return Err(Failure::new(
                ErrorCode::InvalidPath,
                "the path names the project folder itself, not a file",
                "Search the project with acdm_search_nextcloud and read one of the files it finds.",
            ));
        }
        let range = self.limits.window(input.offset, input.max_bytes)?;
        let path = scope.join(&rel);
        if self.trash.contains(&path) {
            // Unreachable with a valid project name; kept as the last word.
            return Err(Failure::new(
                ErrorCode::PermissionDenied,
                "path inside the trash, which is not readable",
                "Read files inside the project's folder, as acdm_search_nextcloud returns them.",
            ));
        }
        let failure = |e: SourceError| match e {
            SourceError::NotFound(_) => Failure::source(
                e,
                "Search the project with acdm_search_nextcloud to find the exact path.",
            ),
            SourceError::Conflict(_) => Failure::source(
                e,
                "This is a folder; search inside it with acdm_search_nextcloud.",
            ),
            other => other.into(),
        };
        if let Some(knowledge) = &self.knowledge {
            let document = match knowledge.file_text(&path).await {
                Ok(document) => document,
                Err(KnowledgeError::Source(error)) => {
                    if matches!(error, SourceError::NotFound(_))
                        && let Some(missing) = self.missing_project(&name, &scope, person).await
                    {
                        return Err(missing);
                    }
                    return Err(failure(error));
                }
                Err(error) => return Err(document_failure(error, &path.to_string())),
            };
            if let Some(document) = document {
                return document_read(&name, &path, &document, range);
            }
        }
        let read = self.sources.files.read(&path, range).await;
        if matches!(read, Err(SourceError::NotFound(_)))
            && let Some(missing) = self.missing_project(&name, &scope, person).await
        {
            return Err(missing);
        }
        let stream = read.map_err(failure)?;
        let window = stream.collect(range.len).await?;
        check_not_past_the_end(&window, range.offset)?;
        let rendered = render(&window, range.len);
        let output = ReadOutput {
            extracted_from: None,
            extraction_notes: None,
            file_size: None,
            etag: None,
            path: path.to_string(),
            git_ref: None,
            project_name: Some(name.to_string()),
            size: window.size,
            offset: window.offset,
            returned_bytes: rendered.returned_bytes,
            truncated: rendered.truncated,
            next_offset: rendered.next_offset,
            encoding: rendered.encoding,
            content_type: window.content_type,
            content: rendered.content,
        };
        let text = read_text(&output, &output.path);
        read_success(output, text)
    }
}

impl Tools {
    /// True when searches are answered by the content index once it is
    /// built.
    pub(crate) fn indexing(&self) -> bool {
        self.knowledge.as_ref().is_some_and(Knowledge::indexing)
    }

    /// `not_found` when no project folder `<base>/<name>` exists — asked
    /// only on the miss paths (a search without hits, a read of a missing
    /// file), so a call that finds something costs no extra request. When
    /// exactly one folder of the base differs from the name only in case,
    /// the advice names it; hidden folders (the trash) are never named.
    /// When the store cannot tell, the miss stands as it is.
    async fn missing_project(
        &self,
        name: &ProjectName,
        scope: &AbsPath,
        person: Option<&Person>,
    ) -> Option<Failure> {
        match self.sources.files.stat(scope).await {
            Ok(entry) if entry.kind == EntryKind::Folder => return None,
            Ok(_) | Err(SourceError::NotFound(_)) => {}
            Err(error) => {
                tracing::debug!(error = %error, "cannot tell whether the project folder exists");
                return None;
            }
        }
        let folded = name.folded();
        let twins: Vec<String> = match self.sources.files.list(&self.files_base).await {
            Ok(entries) => entries
                .iter()
                .filter(|e| e.kind == EntryKind::Folder)
                .filter_map(|e| ProjectName::parse(e.name()).ok())
                .filter(|n| n.folded() == folded && n != name)
                // A person hears only of their own projects.
                .filter(|n| person.is_none_or(|p| p.may_read(n)))
                .map(String::from)
                .collect(),
            Err(_) => Vec::new(),
        };
        Some(self.no_project_folder(name, &twins))
    }

    /// For a person, `name` must be one of their projects; any other is
    /// answered word for word as a project that does not exist (the
    /// spelling hint names only their own projects).
    pub(crate) fn check_member(
        &self,
        person: Option<&Person>,
        name: &ProjectName,
    ) -> Result<(), Failure> {
        let Some(person) = person else {
            return Ok(());
        };
        if person.may_read(name) {
            return Ok(());
        }
        let folded = name.folded();
        let twins: Vec<String> = person
            .memberships
            .iter()
            .filter(|m| m.name.folded() == folded && m.name != *name)
            .map(|m| m.name.to_string())
            .collect();
        Err(self.no_project_folder(name, &twins))
    }

    /// `not_found` for a project folder that is not there; `twins` differ
    /// from `name` only in case.
    fn no_project_folder(&self, name: &ProjectName, twins: &[String]) -> Failure {
        let base = self.files_base.as_prefix();
        let ask = "the project's exact name from the conversation or workspace context, or ask the user; do not try other spellings";
        let action = match twins {
            [twin] => format!(
                "A folder named {twin:?} exists: if that is the project the user means, call again with project_name {twin:?}; otherwise take {ask}."
            ),
            _ => format!("Take {ask}."),
        };
        Failure::new(
            ErrorCode::NotFound,
            format!(
                "no project folder is named {:?} in {base} (project names are case-sensitive)",
                name.as_str()
            ),
            action,
        )
    }

    /// `acdm_list_projects`: the projects the person may read.
    pub(crate) fn list_projects(&self, person: &Person) -> Result<Success, Failure> {
        let projects: Vec<ProjectOut> = person
            .memberships
            .iter()
            .map(|m| ProjectOut {
                project_name: m.name.to_string(),
                slug: m.slug.to_string(),
                role: m.role.to_string(),
                folder: self.files_base.child(&m.name).as_prefix(),
            })
            .collect();
        let mut text = match projects.len() {
            0 => format!(
                "You ({}) are not a member of any project: only the wiki is readable. Ask a project's owner to add you.\n",
                person.user
            ),
            n => format!(
                "{} you ({}) can read (use project_name exactly as written):\n",
                count(n as u64, "project", "projects"),
                person.user
            ),
        };
        for p in &projects {
            text.push_str(&format!(
                "- {} (slug {}, your role: {})\n",
                p.project_name, p.slug, p.role
            ));
        }
        success(
            &ListProjectsOutput {
                user: person.user.to_string(),
                projects,
            },
            text,
        )
    }
}

/// Where a hit came from, as the search outputs say it.
const INDEX: &str = "index";
const UPSTREAM: &str = "upstream";

/// What a search answered by the upstream says while the index is first
/// being built.
const BUILDING_NOTE: &str = "(The content index is still being built: these hits come from the upstream's own search, which is not ranked and may match names only.)\n";

fn rfc3339(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A failure of the knowledge layer other than the source's own.
fn knowledge_failure(error: KnowledgeError) -> Failure {
    match error {
        KnowledgeError::Source(error) => error.into(),
        KnowledgeError::Extract(_) => document_failure(error, "the document"),
        KnowledgeError::Stopped => Failure::new(
            ErrorCode::ServiceUnavailable,
            "the server is stopping",
            "Retry in a few seconds.",
        ),
        KnowledgeError::Index(_) | KnowledgeError::Folders(_) => {
            tracing::error!(error = %error, "the content index failed");
            Failure::new(
                ErrorCode::InternalError,
                "the content index failed; details are in the server's log",
                "Retry once; if it fails again, report it to an operator.",
            )
        }
    }
}

/// A document that could not be read as text: `document_unreadable`
/// saying why.
fn document_failure(error: KnowledgeError, what: &str) -> Failure {
    match error {
        KnowledgeError::Extract(error) if error.reason() == "unavailable" => {
            tracing::error!(error = %error, "the document extractor cannot run");
            Failure::new(
                ErrorCode::ServiceUnavailable,
                format!(
                    "{what} cannot be read as text now: the server's document reader is unavailable"
                ),
                "Retry in a few seconds; if it persists, tell the user the service is misconfigured.",
            )
        }
        KnowledgeError::Extract(error) => Failure::new(
            ErrorCode::DocumentUnreadable,
            format!(
                "{what} could not be read as text ({}): {error}",
                error.reason()
            ),
            "Tell the user this document cannot be read as text and why; do not retry it. Other files of the project can still be searched and read.",
        ),
        other => knowledge_failure(other),
    }
}

/// A window of a document's text, as a read's output.
fn document_read(
    name: &ProjectName,
    path: &AbsPath,
    document: &DocumentText,
    range: ReadRange,
) -> Result<Success, Failure> {
    let window = document.window(range.offset, range.len).map_err(|size| {
        Failure::invalid(
            "offset",
            format!(
                "{} is past the end of the text extracted from {path} ({})",
                range.offset,
                count(size, "byte", "bytes")
            ),
            "Read from offset 0, or continue with the next_offset a truncated answer gave; there is nothing after the last byte.",
        )
    })?;
    let notes = &document.extracted.warnings;
    let output = ReadOutput {
        path: path.to_string(),
        git_ref: None,
        project_name: Some(name.to_string()),
        size: Some(window.size),
        extracted_from: Some(document.format().to_owned()),
        extraction_notes: (!notes.is_empty()).then(|| notes.clone()),
        file_size: Some(document.file_size),
        etag: document.etag.as_ref().map(|e| e.value().to_owned()),
        offset: window.offset,
        returned_bytes: window.rendered.returned_bytes,
        truncated: window.rendered.truncated,
        next_offset: window.rendered.next_offset,
        encoding: window.rendered.encoding,
        content_type: Some("text/markdown".to_owned()),
        content: window.rendered.content,
    };
    let mut what = format!(
        "{} (text extracted from {})",
        output.path,
        document.format()
    );
    for note in notes {
        what.push_str(&format!("; note: {note}"));
    }
    let text = read_text(&output, &what);
    read_success(output, text)
}

fn read_text(output: &ReadOutput, what: &str) -> String {
    use std::fmt::Write as _;
    let end = output.offset + output.returned_bytes;
    // One buffer with room for the content: the heading's pieces were
    // strings of their own, and the content's copy grew the buffer again.
    let content = match output.encoding {
        Encoding::Text => output.content.len(),
        Encoding::Base64 => 0,
    };
    let mut text = String::with_capacity(what.len() + HEADING_ROOM + content);
    // Writing into a `String` cannot fail.
    let _ = write!(text, "{what}: bytes {}–{end}", output.offset);
    if let Some(size) = output.size {
        let _ = write!(text, " of {size}");
    }
    if let Some(next) = output.next_offset {
        let _ = write!(text, " (truncated; continue with offset={next})");
    }
    match output.encoding {
        Encoding::Text => {
            text.push_str("\n\n");
            text.push_str(&output.content);
        }
        Encoding::Base64 => {
            let _ = write!(
                text,
                "\nbinary content ({}), base64 in the structured result's `content`",
                output.content_type.as_deref().unwrap_or("unknown type")
            );
        }
    }
    text
}

/// Room for a read's heading besides the name it reads: its numbers and
/// words, and a content type.
const HEADING_ROOM: usize = 192;

/// The query, shortened for logs.
pub(crate) fn log_query(arguments: Option<&serde_json::Map<String, serde_json::Value>>) -> String {
    arguments
        .and_then(|a| a.get("query").or_else(|| a.get("path")))
        .and_then(serde_json::Value::as_str)
        .map(shorten)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file read's structured content is written by hand
    /// ([`Structured`]): its keys are its schema's properties (all of them
    /// with every field present, the required ones with none), its values
    /// the fields', in the order a `Value` writes them, so that the direct
    /// path's bytes are rmcp's.
    #[test]
    fn a_reads_hand_written_output_is_its_schema_in_a_values_order() {
        let schema = schemars::generate::SchemaSettings::draft2020_12()
            .for_serialize()
            .into_generator()
            .into_root_schema_for::<ReadOutput>();
        let schema = serde_json::to_value(schema).unwrap();
        let mut properties: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        properties.sort_unstable();
        let mut required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|name| name.as_str().unwrap())
            .collect();
        required.sort_unstable();
        let full = ReadOutput {
            extracted_from: Some("docx".to_owned()),
            extraction_notes: Some(vec!["a \"note\"".to_owned()]),
            file_size: Some(4096),
            etag: Some("e-1".to_owned()),
            path: "guides/a \"b\".md".to_owned(),
            git_ref: Some("main".to_owned()),
            project_name: Some("Alpha".to_owned()),
            size: Some(40),
            offset: 4,
            returned_bytes: 10,
            truncated: true,
            next_offset: Some(14),
            encoding: Encoding::Text,
            content_type: Some("text/markdown".to_owned()),
            content: "line\n\tnext".to_owned(),
        };
        let bare = ReadOutput {
            extracted_from: None,
            extraction_notes: None,
            file_size: None,
            etag: None,
            path: "x.bin".to_owned(),
            git_ref: None,
            project_name: None,
            size: None,
            offset: 0,
            returned_bytes: 3,
            truncated: false,
            next_offset: None,
            encoding: Encoding::Base64,
            content_type: None,
            content: "AAEC".to_owned(),
        };
        let cases = [
            (
                full,
                &properties,
                serde_json::json!({
                    "content": "line\n\tnext", "content_type": "text/markdown",
                    "encoding": "text", "etag": "e-1", "extracted_from": "docx",
                    "extraction_notes": ["a \"note\""], "file_size": 4096,
                    "next_offset": 14, "offset": 4,
                    "path": "guides/a \"b\".md", "project_name": "Alpha", "ref": "main",
                    "returned_bytes": 10, "size": 40, "truncated": true,
                }),
            ),
            (
                bare,
                &required,
                serde_json::json!({
                    "content": "AAEC", "encoding": "base64", "offset": 0, "path": "x.bin",
                    "returned_bytes": 3, "truncated": false,
                }),
            ),
        ];
        for (output, keys, expected) in cases {
            let structured = Structured::Read(output);
            let bytes = acdm_core::json::to_vec(&structured).unwrap();
            let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(value, expected);
            let written: Vec<&str> = value
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(&written, keys);
            assert_eq!(
                String::from_utf8(bytes).unwrap(),
                serde_json::to_string(&value).unwrap(),
                "the keys in a Value's order"
            );
            assert_eq!(structured.into_value().unwrap(), expected);
        }
    }

    /// What a log line shows of a query: the first 64 characters and an
    /// ellipsis when cut, with control characters replaced; [`clip`] keeps
    /// the first `max` characters, as taking them one by one does.
    #[test]
    fn a_query_is_shortened_for_the_log_as_clipped_with_controls_replaced() {
        let clipped = |text: &str, max: usize| -> String {
            let mut chars = text.chars();
            let mut out: String = chars.by_ref().take(max).collect();
            if chars.next().is_some() {
                out.push('…');
            }
            out
        };
        let replaced = |text: &str| -> String {
            clipped(text, 64)
                .chars()
                .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
                .collect()
        };
        let long = "报告 \u{1b}[31mred\r\nforged line\t".repeat(5);
        for text in ["", "deploy", "a\nb", long.as_str(), &long[..long.len() / 2]] {
            for cut in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
                let text = &text[..cut];
                assert_eq!(shorten(text), replaced(text), "{text:?}");
                for max in [0, 1, 7, 64, 500] {
                    assert_eq!(clip(text, max), clipped(text, max), "{text:?} at {max}");
                }
            }
        }
        assert_eq!(shorten(&"x".repeat(65)), format!("{}…", "x".repeat(64)));
        assert_eq!(shorten("a\u{7}b"), "a\u{FFFD}b");
    }

    /// A folder segment is lower-cased as the path is, a word-final sigma
    /// included (`ΣΣ` is `σς`, not `σσ`).
    #[test]
    fn a_folder_is_compared_lower_cased_as_a_whole_segment() {
        let folder = AbsPath::parse("/Projects/ΟΔΟΣ").unwrap();
        assert!(lies_loosely_under("/projects/ΟΔΟΣ/a.md", &folder));
        assert!(lies_loosely_under("/Projects/οδος/../ΟΔΟΣ", &folder));
        assert!(!lies_loosely_under("/Projects/ΟΔΟ/a.md", &folder));
    }

    /// Every string of up to five pieces from the patterns' own bytes (and
    /// a letter whose lower case is longer): one pass gives what replacing
    /// each pattern in turn gives.
    #[test]
    fn loosening_in_one_pass_is_replacing_each_pattern_in_turn() {
        let in_turn = |raw: &str| {
            raw.to_lowercase()
                .replace("%2e", ".")
                .replace("%2f", "/")
                .replace("%5c", "/")
                .replace('\\', "/")
        };
        let pieces = [
            "%", "2", "e", "E", "f", "F", "5", "c", "C", "\\", "/", ".", "a", "İ",
        ];
        let mut strings = vec![String::new()];
        for _ in 0..5 {
            let longer: Vec<String> = strings
                .iter()
                .flat_map(|s| pieces.iter().map(move |p| format!("{s}{p}")))
                .collect();
            for s in &longer {
                assert_eq!(loosened(s), in_turn(s), "{s:?}");
            }
            strings = longer;
        }
    }

    #[test]
    fn suggestions_appear_only_for_few_hits_and_fit_the_search() {
        assert!(search_suggestions("deploy", 3, None, false).is_empty());
        let s = search_suggestions("how do we deploy safely", 0, Some("guides"), false);
        assert!(s[0].contains("\"safely\""), "{s:?}");
        assert!(
            s.iter().any(|x| x.contains("path_prefix \"guides\"")),
            "{s:?}"
        );
        let s = search_suggestions("budget", 1, None, true);
        assert!(s.iter().any(|x| x.contains("names only")), "{s:?}");
        assert!(s.iter().any(|x| x.contains("Read the hits")), "{s:?}");
    }

    #[test]
    fn project_names_are_checked_beyond_the_regex() {
        let base = AbsPath::parse("/Projects").unwrap();
        assert_eq!(
            project_scope(&base, "Alpha").unwrap().1.to_string(),
            "/Projects/Alpha"
        );
        for bad in [
            "..",
            ".",
            " .. ",
            "a/b",
            "a\u{FF0F}b",
            "\u{202E}x",
            &"😀".repeat(100),
            "%2e%2e",
            "x\u{7f}",
        ] {
            let e = project_scope(&base, bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::ValidationError, "{bad:?}");
            assert!(
                e.message().starts_with("invalid project_name"),
                "{}",
                e.message()
            );
        }
    }

    #[test]
    fn windows_above_the_cap_are_refused_naming_it() {
        let limits = ReadLimits {
            default_bytes: 100,
            max_bytes: 1000,
        };
        assert_eq!(limits.window(5, None).unwrap(), ReadRange::new(5, 100));
        assert_eq!(limits.window(0, Some(1000)).unwrap().len, 1000);
        let above = limits.window(0, Some(50_000)).unwrap_err();
        assert_eq!(
            above.message(),
            "invalid max_bytes: 50000 is outside 1–1000 (the server's window cap)"
        );
        assert!(limits.window(0, Some(0)).is_err());
    }

    #[test]
    fn paths_into_the_trash_are_recognised_in_any_spelling() {
        let trash = trash_root(&AbsPath::parse("/Projects").unwrap());
        for path in [
            "/Projects/.acdm-trash/alpha/e/0/x.md",
            "/Projects/.ACDM-TRASH/alpha",
            "/Projects/.acdm-trash",
            "/Projects/Alpha/../.acdm-trash/beta/x",
            "/Projects/Alpha/%2e%2e/.acdm-trash/beta/x",
            "\\Projects\\.acdm-trash\\x",
        ] {
            assert!(names_the_trash(path, &trash), "{path}");
        }
        for path in [
            "/Projects/Alpha/.acdm-trash/x",
            "/Projects/Alpha/notes/x.md",
            "/Projects/.acdm-trash-not/x",
        ] {
            assert!(!names_the_trash(path, &trash), "{path}");
        }
    }

    /// `read_text` as it was written before it wrote into one buffer.
    fn read_text_by_format(output: &ReadOutput, what: &str) -> String {
        let end = output.offset + output.returned_bytes;
        let size = output.size.map(|s| format!(" of {s}")).unwrap_or_default();
        let mut text = format!("{what}: bytes {}–{end}{size}", output.offset);
        if let Some(next) = output.next_offset {
            text.push_str(&format!(" (truncated; continue with offset={next})"));
        }
        match output.encoding {
            Encoding::Text => {
                text.push_str("\n\n");
                text.push_str(&output.content);
            }
            Encoding::Base64 => text.push_str(&format!(
                "\nbinary content ({}), base64 in the structured result's `content`",
                output.content_type.as_deref().unwrap_or("unknown type")
            )),
        }
        text
    }

    #[test]
    fn a_reads_text_is_its_heading_and_content_as_format_wrote_them() {
        for encoding in [Encoding::Text, Encoding::Base64] {
            for size in [None, Some(4096)] {
                for next_offset in [None, Some(1024)] {
                    for content_type in [None, Some("image/png".to_owned())] {
                        let output = ReadOutput {
                            extracted_from: None,
                            extraction_notes: None,
                            file_size: None,
                            etag: None,
                            path: "/Projects/Alpha/docs/report.md".to_owned(),
                            git_ref: None,
                            project_name: Some("Alpha".to_owned()),
                            size,
                            offset: 512,
                            returned_bytes: 512,
                            truncated: next_offset.is_some(),
                            next_offset,
                            encoding,
                            content_type,
                            content: "line one\nline \"two\" – ünïcode\n".repeat(40),
                        };
                        for what in ["/Projects/Alpha/docs/report.md", "wiki file a.md at main"] {
                            assert_eq!(
                                read_text(&output, what),
                                read_text_by_format(&output, what),
                                "{encoding:?} {size:?} {next_offset:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_lowered_segment_matches_as_a_lower_cased_copy_would() {
        let words = [
            "",
            "a",
            "A",
            "alpha",
            "Alpha",
            "ALPHA",
            "alphA",
            "alph",
            ".acdm-trash",
            ".ACDM-Trash",
            "Projekte",
            "Größe",
            "GRÖSSE",
            "größe",
            "ΟΔΟΣ",
            "οδος",
            "οδοσ",
            "K",
            "\u{212a}",
            "k",
            "İ",
            "i̇",
            "x%2e",
            "ǅ",
            "ǆ",
        ];
        for raw in words {
            let lowered = raw.to_lowercase();
            for segment in words {
                assert_eq!(
                    same_lowered(&lowered, segment),
                    lowered == segment.to_lowercase(),
                    "{raw:?} against {segment:?}"
                );
            }
        }
    }
}
