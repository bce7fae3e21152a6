//! The MCP server handler: server info and instructions, the tool catalog
//! (schemas built once), and dispatch with a span and metrics per call.
//!
//! Failures the model can act on are tool results with `isError: true`,
//! a readable message and structured `{code, message, suggested_action}`.
//! Each output schema is `anyOf` the tool's success shape and that failure
//! shape, so clients that validate structured content against the schema
//! even on errors (the TypeScript SDK does) accept both. Only an unknown
//! tool is a protocol error (`-32602`), as MCP requires.

use std::sync::Arc;
use std::time::Instant;

use acdm_core::RequestId;
use acdm_core::limit::{Admission, Rate, RateLimiter};
use acdm_sources::deadline::Deadline;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, Implementation, InitializeResult, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::metrics::McpMetrics;
use crate::people::{Person, PersonDirectory};
use crate::resources::WikiListing;
use crate::tools::{
    self, Failure, LIST_PROJECTS, ListProjectsInput, ListProjectsOutput, READ_NEXTCLOUD, READ_WIKI,
    ReadLimits, ReadNextcloudInput, ReadOutput, ReadWikiInput, SEARCH_NEXTCLOUD, SEARCH_WIKI,
    SearchNextcloudInput, SearchNextcloudOutput, SearchWikiInput, SearchWikiOutput, Success,
    ToolFailure, Tools,
};
use crate::{prompts, resources};

/// What the model is told when it connects.
pub const INSTRUCTIONS: &str = "\
Knowledge tools of a-cdm: the company wiki and each project's files.

- The wiki is readable by everyone. Use acdm_search_wiki with one or two \
distinctive words, then acdm_read_wiki_file with a path from the results.
- Project files live in Nextcloud, one folder per project. acdm_search_nextcloud \
and acdm_read_nextcloud_file need project_name: take it from the conversation or \
the workspace context, exactly as written there. If you are not sure which project \
the user means, ask them. Never guess a project name and never try other names: \
names are case-sensitive, and a name no project folder has is not_found.
- Reads return at most a window of the file. When `truncated` is true, call the \
read tool again with offset = next_offset to continue; read only as far as you need.
- Documents (Word, Excel, PowerPoint, OpenDocument, PDF, HTML) are read as their text, \
in Markdown. Other binary files come back base64-encoded; say what they are rather \
than pasting them.
- On an error, follow its suggested_action; do not retry the same call unchanged.";

const SEARCH_WIKI_DESCRIPTION: &str = "\
Search the company wiki (handbook, guides, policies) by the words in its pages and \
their names, in English or Chinese. Use it for how-to questions and company rules, \
before answering from memory. Good query: \"weekly report deadline\" or \"里程碑 验收\". \
Bad query: a long question with the project's whole context. Returns the best-matching \
pages first, each with a snippet around the match (matched words in **…**); read a hit \
with acdm_read_wiki_file.";

const READ_WIKI_DESCRIPTION: &str = "\
Read a wiki file found with acdm_search_wiki, in windows of at most max_bytes \
(up to the schema's maximum; a larger value is refused). Good: \
path=\"guides/weekly-reports.md\". Bad: a guessed path, a URL, or a leading slash. \
When the answer says truncated, call again with offset=next_offset.";

const SEARCH_NEXTCLOUD_DESCRIPTION: &str = "\
Find files and folders by name in one project's Nextcloud folder (meeting minutes, \
reports, plans, specs, budgets). project_name must come from the conversation or \
workspace context; ask the user if unsure, never guess (a name no project folder has \
is not_found). Good: query=\"kickoff\", project_name=\"Alpha\". Bad: \
query=\"what was decided at the kickoff meeting\" (names are matched, not contents). \
limit is 1–50. Returns full paths for acdm_read_nextcloud_file.";

/// The same tool over a store that searches contents too (the local
/// folders): the description must not tell the model otherwise.
const SEARCH_NEXTCLOUD_CONTENTS_DESCRIPTION: &str = "\
Find files in one project's folder (meeting minutes, reports, plans, contracts, \
budgets) by the words in their contents and names, in English or Chinese, including \
the text of Word, Excel, PowerPoint, OpenDocument, PDF and HTML documents. Returns the \
best-matching files first, each with a snippet around the match (matched words in \
**…**) and a score. project_name must come from the conversation or workspace context; \
ask the user if unsure, never guess (a name no project folder has is not_found). Good: \
query=\"supplier late delivery penalty\", project_name=\"Alpha\". Bad: a guessed \
project_name. limit is 1–50. Returns full paths for acdm_read_nextcloud_file.";

const READ_NEXTCLOUD_DESCRIPTION: &str = "\
Read a file of one project's Nextcloud folder, in windows of at most max_bytes \
(up to the schema's maximum; a larger value is refused). Word, Excel, PowerPoint, \
OpenDocument, PDF and HTML files are read as their text in Markdown (extracted_from \
names the format; offsets then count bytes of that text). path must be a full path \
found with acdm_search_nextcloud, inside that project's folder. Good: \
path=\"/Projects/Alpha/meetings/2026-11-03-kickoff.md\", project_name=\"Alpha\". \
Bad: a path of another project, a relative path, or a project_name that differs \
from the search's. When the answer says truncated, call again with \
offset=next_offset.";

const LIST_PROJECTS_DESCRIPTION: &str = "\
List the projects you (the signed-in person) can read files of: their names, \
to pass as project_name to acdm_search_nextcloud and acdm_read_nextcloud_file, \
and your role in each. Call it first when the user names no project or when \
a project name is not found.";

/// The JSON Schema (2020-12) of `T` as an object, integer formats and
/// nulls stripped.
fn schema_of<T: JsonSchema>(for_output: bool) -> JsonObject {
    let settings = if for_output {
        schemars::generate::SchemaSettings::draft2020_12().for_serialize()
    } else {
        schemars::generate::SchemaSettings::draft2020_12()
    };
    let schema = settings.into_generator().into_root_schema_for::<T>();
    match serde_json::to_value(schema) {
        Ok(mut value) => {
            strip_integer_formats(&mut value);
            strip_nulls(&mut value);
            match value {
                serde_json::Value::Object(object) => object,
                _ => JsonObject::new(),
            }
        }
        Err(_) => JsonObject::new(),
    }
}

/// The output schema of a tool: an object that is either the success
/// shape `Out` or the failure shape. Definitions of both move to the root
/// so their `$ref`s keep resolving.
fn output_schema<Out: JsonSchema>() -> JsonObject {
    let mut root = JsonObject::new();
    let mut defs = JsonObject::new();
    let mut branches = Vec::new();
    for mut branch in [schema_of::<Out>(true), schema_of::<ToolFailure>(true)] {
        if let Some(dialect) = branch.remove("$schema") {
            root.insert("$schema".to_owned(), dialect);
        }
        if let Some(serde_json::Value::Object(more)) = branch.remove("$defs") {
            defs.extend(more);
        }
        branches.push(serde_json::Value::Object(branch));
    }
    root.insert("type".to_owned(), "object".into());
    root.insert("anyOf".to_owned(), branches.into());
    if !defs.is_empty() {
        root.insert("$defs".to_owned(), defs.into());
    }
    root
}

/// Advertises the server's window cap on a read tool's `max_bytes`.
fn cap_max_bytes(schema: &mut JsonObject, max_bytes: u64) {
    if let Some(serde_json::Value::Object(property)) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut("max_bytes"))
    {
        property.insert("maximum".to_owned(), max_bytes.into());
    }
}

/// schemars marks Rust integer widths as `"format": "uint64"` and the like,
/// which are not JSON Schema formats: validators in clients (ajv in the MCP
/// SDKs) warn on them. The bounds that matter are kept as `minimum` /
/// `maximum`, so the format is dropped.
fn strip_integer_formats(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(object) => {
            let non_standard = object
                .get("format")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|f| {
                    matches!(
                        f,
                        "uint"
                            | "uint8"
                            | "uint16"
                            | "uint32"
                            | "uint64"
                            | "int"
                            | "int8"
                            | "int16"
                            | "int32"
                            | "int64"
                            | "float"
                            | "double"
                    )
                });
            if non_standard {
                object.remove("format");
            }
            object.values_mut().for_each(strip_integer_formats);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_integer_formats),
        _ => {}
    }
}

/// schemars writes an `Option<T>` field as `"type": ["T", "null"]` (and an
/// absent default as `"default": null`). Clients' strict schema checks warn
/// on those type arrays, and this server never sends `null`: an optional
/// input is simply not required (absent means its default), and an
/// optional output field is omitted when it has no value. So every type
/// array becomes its one non-null type, and null defaults go.
fn strip_nulls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(object) => {
            if let Some(serde_json::Value::Array(types)) = object.get("type") {
                let named: Vec<serde_json::Value> =
                    types.iter().filter(|t| *t != "null").cloned().collect();
                if let [only] = named.as_slice() {
                    object.insert("type".to_owned(), only.clone());
                } else {
                    object.insert("type".to_owned(), named.into());
                }
            }
            if object
                .get("default")
                .is_some_and(serde_json::Value::is_null)
            {
                object.remove("default");
            }
            object.values_mut().for_each(strip_nulls);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

fn tool<In: JsonSchema, Out: JsonSchema>(
    name: &'static str,
    title: &str,
    description: &'static str,
    limits: ReadLimits,
) -> Tool {
    let mut input = schema_of::<In>(false);
    cap_max_bytes(&mut input, limits.max_bytes);
    let mut tool = Tool::new(name, description, Arc::new(input));
    tool.title = Some(title.to_owned());
    tool.output_schema = Some(Arc::new(output_schema::<Out>()));
    tool.annotations = Some(
        ToolAnnotations::with_title(title)
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(true),
    );
    tool
}

/// The four tools, built once per router (the read tools advertise the
/// configured window cap; the file search says whether it matches
/// contents, which depends on the store).
fn catalog(limits: ReadLimits, searches_contents: bool) -> Vec<Tool> {
    vec![
        tool::<SearchWikiInput, SearchWikiOutput>(
            SEARCH_WIKI,
            "Search the wiki",
            SEARCH_WIKI_DESCRIPTION,
            limits,
        ),
        tool::<ReadWikiInput, ReadOutput>(
            READ_WIKI,
            "Read a wiki file",
            READ_WIKI_DESCRIPTION,
            limits,
        ),
        tool::<SearchNextcloudInput, SearchNextcloudOutput>(
            SEARCH_NEXTCLOUD,
            "Search a project's files",
            if searches_contents {
                SEARCH_NEXTCLOUD_CONTENTS_DESCRIPTION
            } else {
                SEARCH_NEXTCLOUD_DESCRIPTION
            },
            limits,
        ),
        tool::<ReadNextcloudInput, ReadOutput>(
            READ_NEXTCLOUD,
            "Read a project file",
            READ_NEXTCLOUD_DESCRIPTION,
            limits,
        ),
    ]
}

/// The tools a person signed in with their own account sees: the four,
/// and the list of their projects.
fn people_catalog(limits: ReadLimits, searches_contents: bool) -> Vec<Tool> {
    let mut tools = catalog(limits, searches_contents);
    tools.push(tool::<ListProjectsInput, ListProjectsOutput>(
        LIST_PROJECTS,
        "List my projects",
        LIST_PROJECTS_DESCRIPTION,
        limits,
    ));
    tools
}

/// Each tool's rate limit (spec §9), counted for the whole deployment by
/// the limiter: the MCP endpoint knows no agent, so the budget is the
/// tool's.
#[derive(Clone)]
pub struct ToolLimits {
    /// Where the buckets are.
    pub limiter: Arc<dyn RateLimiter>,
    /// Calls of one tool (`None`: unlimited).
    pub per_tool: Option<Rate>,
}

impl std::fmt::Debug for ToolLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolLimits")
            .field("per_tool", &self.per_tool)
            .finish_non_exhaustive()
    }
}

impl ToolLimits {
    /// No limits.
    pub fn off() -> Self {
        Self {
            limiter: Arc::new(acdm_core::limit::Unlimited),
            per_tool: None,
        }
    }

    /// Admits a call of `tool`: counted for the whole deployment (the
    /// engine's calls), or per person for a person's.
    async fn admit(&self, tool: &'static str, person: Option<&Person>) -> Result<(), Failure> {
        let Some(rate) = self.per_tool else {
            return Ok(());
        };
        let key = match person {
            None => limit_key(tool),
            Some(person) => std::borrow::Cow::Owned(format!("tool:{tool}:user:{}", person.user)),
        };
        match self.limiter.admit(&key, rate).await {
            Admission::Allowed => Ok(()),
            Admission::Limited { retry_after } => {
                Err(Failure::rate_limited(tool, rate, retry_after))
            }
        }
    }
}

/// Each tool's key in the limiter, `tool:<name>`, written out: a
/// `format!` per call cost more than the check it keys.
const TOOL_KEYS: [(&str, &str); 4] = [
    (SEARCH_WIKI, "tool:acdm_search_wiki"),
    (READ_WIKI, "tool:acdm_read_wiki_file"),
    (SEARCH_NEXTCLOUD, "tool:acdm_search_nextcloud"),
    (READ_NEXTCLOUD, "tool:acdm_read_nextcloud_file"),
];

/// `tool`'s key in the limiter: `tool:<name>`.
fn limit_key(tool: &str) -> std::borrow::Cow<'static, str> {
    TOOL_KEYS
        .iter()
        .find(|(name, _)| *name == tool)
        .map_or_else(
            || std::borrow::Cow::Owned(format!("tool:{tool}")),
            |(_, key)| std::borrow::Cow::Borrowed(*key),
        )
}

/// The MCP server: cheap to clone (one per request in stateless mode).
#[derive(Clone)]
pub struct KnowledgeServer {
    tools: Tools,
    catalog: Arc<Vec<Tool>>,
    people_catalog: Arc<Vec<Tool>>,
    /// People's projects and overviews, when people's tokens are on: then
    /// every call must carry either the gate's mark of the service token
    /// or a [`Person`] (fail closed).
    directory: Option<Arc<dyn PersonDirectory>>,
    /// The wiki's files for `resources/list`, kept per head.
    wiki: Arc<WikiListing>,
    metrics: McpMetrics,
    limits: ToolLimits,
}

impl KnowledgeServer {
    pub(crate) fn new(tools: Tools, metrics: McpMetrics, limits: ToolLimits) -> Self {
        let searches_contents = tools.sources.search.kind() == "local" || tools.indexing();
        let catalog = Arc::new(catalog(tools.limits, searches_contents));
        let people_catalog = Arc::new(people_catalog(tools.limits, searches_contents));
        Self {
            tools,
            catalog,
            people_catalog,
            directory: None,
            wiki: Arc::default(),
            metrics,
            limits,
        }
    }

    /// The same server, with people's tokens on when `directory` (where
    /// their projects and overviews are read) is given.
    pub(crate) fn with_people(self, directory: Option<Arc<dyn PersonDirectory>>) -> Self {
        Self { directory, ..self }
    }

    /// Who calls: `Ok(Some(person))`, `Ok(None)` for the service, or the
    /// refusal of a call that is neither (with people's tokens on, a call
    /// that reached here without the gate's mark and without a person —
    /// never expected; refused rather than served as the service's).
    fn caller<'p>(
        &self,
        parts: Option<&'p http::request::Parts>,
    ) -> Result<Option<&'p Person>, Failure> {
        let person = parts.and_then(|p| p.extensions.get::<Person>());
        let service = parts.is_some_and(|p| {
            p.extensions
                .get::<acdm_core::identity::ServiceAuthenticated>()
                .is_some()
        });
        if self.directory.is_some() && person.is_none() && !service {
            return Err(Failure::new(
                acdm_core::ErrorCode::PermissionDenied,
                "this call carries neither the service token nor a person's access token"
                    .to_owned(),
                "Connect again with your access token.",
            ));
        }
        Ok(person)
    }

    /// Answers a `tools/call`: rmcp's handler (`call_tool`) and the direct
    /// path (`direct.rs`) both come here. `parts` is the HTTP request's
    /// head, which carries its request id and deadline.
    pub(crate) async fn call(
        &self,
        request: CallToolRequestParams,
        parts: Option<&http::request::Parts>,
    ) -> Result<CallToolResponse, McpError> {
        let outcome = self.answer(request, parts).await?;
        Ok(result_of(outcome).into())
    }

    /// A call's outcome, before rmcp's result type: what the direct path
    /// writes without it ([`crate::direct`]). `Err` for a tool that does
    /// not exist (a JSON-RPC error, not a tool's failure).
    pub(crate) async fn answer(
        &self,
        request: CallToolRequestParams,
        parts: Option<&http::request::Parts>,
    ) -> Result<Result<Success, Failure>, McpError> {
        let person = match self.caller(parts) {
            Ok(person) => person,
            Err(refused) => return Ok(Err(refused)),
        };
        let Some(name) = [SEARCH_WIKI, READ_WIKI, SEARCH_NEXTCLOUD, READ_NEXTCLOUD]
            .into_iter()
            .chain(person.map(|_| LIST_PROJECTS))
            .find(|n| *n == request.name)
        else {
            return Err(McpError::invalid_params("tool not found", None));
        };
        let query = tools::log_query(request.arguments.as_ref());
        let call = self.dispatch(name, request.arguments.unwrap_or_default(), person);
        Ok(self.observe(name, person, parts, query, call).await)
    }

    /// Runs `work`, one call of `name` (a tool, `resources/read`,
    /// `prompts/get`…), admitted by the rate limits (per person for a
    /// person's), within the request's deadline, in a span of its own
    /// with its user, and counted in the metrics.
    async fn observe<T>(
        &self,
        name: &'static str,
        person: Option<&Person>,
        parts: Option<&http::request::Parts>,
        query: String,
        work: impl Future<Output = Result<T, Failure>>,
    ) -> Result<T, Failure> {
        let request_id = parts
            .and_then(|p| p.extensions.get::<RequestId>())
            .map(|id| id.as_str().to_owned())
            .unwrap_or_default();
        // rmcp runs this in a task of its own: the request's deadline comes
        // along in the request's extensions (on either path).
        let deadline = parts.and_then(|p| p.extensions.get::<Deadline>()).copied();
        // A span of its own, whoever polls the call: rmcp's task or the
        // direct path's caller (whose request span is entered there).
        let span = tracing::info_span!(
            parent: None,
            "mcp_tool",
            request_id = %request_id,
            tool = name,
            user = person.map(|p| p.user.as_str()),
            query = %query,
            outcome = tracing::field::Empty,
            latency_ms = tracing::field::Empty,
        );
        let started = Instant::now();
        let outcome = tracing::Instrument::instrument(
            async {
                self.limits.admit(name, person).await?;
                match deadline {
                    Some(Deadline(at)) => acdm_sources::deadline::within(at, work).await,
                    None => work.await,
                }
            },
            span.clone(),
        )
        .await;
        let elapsed = started.elapsed();
        let label = match &outcome {
            Ok(_) => "ok",
            Err(failure) => failure.code().as_str(),
        };
        self.metrics.record(name, label, elapsed.as_secs_f64());
        tracing::record_all!(
            span,
            outcome = label,
            latency_ms = elapsed.as_secs_f64() * 1000.0,
        );
        span.in_scope(|| tracing::info!("tool call finished"));
        outcome
    }

    /// The caller of an rmcp request other than a tool call, or the
    /// protocol error refusing it.
    fn caller_of<'p>(
        &self,
        context: &'p RequestContext<RoleServer>,
    ) -> Result<(Option<&'p http::request::Parts>, Option<&'p Person>), McpError> {
        let parts = context.extensions.get::<http::request::Parts>();
        let person = self
            .caller(parts)
            .map_err(|refused| McpError::invalid_request(refused.message().to_owned(), None))?;
        Ok((parts, person))
    }

    async fn dispatch(
        &self,
        name: &'static str,
        arguments: JsonObject,
        person: Option<&Person>,
    ) -> Result<Success, Failure> {
        // Each tool's future is boxed: inline, every call's future would be
        // as large as the largest tool's, and it is moved whole into a box
        // on every call.
        match name {
            SEARCH_WIKI => Box::pin(self.tools.search_wiki(parse(arguments)?)).await,
            READ_WIKI => Box::pin(self.tools.read_wiki(parse(arguments)?)).await,
            SEARCH_NEXTCLOUD => {
                Box::pin(self.tools.search_nextcloud(parse(arguments)?, person)).await
            }
            READ_NEXTCLOUD => Box::pin(self.tools.read_nextcloud(parse(arguments)?, person)).await,
            _ => match person {
                Some(person) => {
                    let ListProjectsInput {} = parse(arguments)?;
                    self.tools.list_projects(person)
                }
                None => Err(Failure::new(
                    acdm_core::ErrorCode::NotFound,
                    "acdm_list_projects is for people signed in with their own account".to_owned(),
                    "Name the project as the conversation gives it.",
                )),
            },
        }
    }
}

/// Parses tool arguments strictly: unknown fields (a stray `project_id`)
/// and wrong types are refused with a message naming them — the field's
/// path is part of the message (`limit: invalid type: string "ten"…`).
fn parse<T: DeserializeOwned>(arguments: JsonObject) -> Result<T, Failure> {
    tools::parse_strictly(
        arguments,
        "invalid arguments",
        "Call the tool again with the arguments its input schema describes.",
    )
}

pub(crate) fn result_of(outcome: Result<Success, Failure>) -> CallToolResult {
    match outcome {
        Ok(success) => match success.structured.into_value() {
            Ok(structured) => {
                let mut result = CallToolResult::success(vec![ContentBlock::text(success.text)]);
                result.structured_content = Some(structured);
                result
            }
            // Not reached: a read's output is strings and numbers, and a
            // `Value` is already one. Were it, the call's metrics and log
            // line would already say `ok`.
            Err(_) => result_of(Err(tools::not_encoded())),
        },
        Err(failure) => {
            let mut text = failure.message().to_owned();
            if let Some(action) = failure.suggested_action() {
                text.push_str("\nWhat to do: ");
                text.push_str(action);
            }
            let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
            result.structured_content = serde_json::to_value(failure.to_structured()).ok();
            result
        }
    }
}

/// A failure of a request other than a tool call, as the JSON-RPC error
/// MCP asks for: `not_found` as `not_found_code` (`-32002` for a
/// resource), a bad argument as `-32602`, anything else `-32603`; the
/// message says what to do, and `data` is the failure's structured
/// `{code, message, suggested_action}`.
fn protocol_error(failure: &Failure, not_found_code: rmcp::model::ErrorCode) -> McpError {
    use acdm_core::ErrorCode as Code;
    let code = match failure.code() {
        Code::NotFound => not_found_code,
        Code::ValidationError | Code::InvalidPath | Code::PermissionDenied => {
            rmcp::model::ErrorCode::INVALID_PARAMS
        }
        _ => rmcp::model::ErrorCode::INTERNAL_ERROR,
    };
    let mut message = failure.message().to_owned();
    if let Some(action) = failure.suggested_action() {
        message.push_str("\nWhat to do: ");
        message.push_str(action);
    }
    McpError::new(
        code,
        message,
        serde_json::to_value(failure.to_structured()).ok(),
    )
}

impl ServerHandler for KnowledgeServer {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_prompts()
                .enable_resources()
                .enable_tools()
                .build(),
        )
        .with_server_info(
            Implementation::new("acdm-knowledge", env!("CARGO_PKG_VERSION"))
                .with_title("a-cdm knowledge"),
        )
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let (_, person) = self.caller_of(&context)?;
        let catalog = if person.is_some() {
            &self.people_catalog
        } else {
            &self.catalog
        };
        Ok(ListToolsResult::with_all_items(catalog.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.people_catalog.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.call(request, context.extensions.get::<http::request::Parts>())
            .await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.caller_of(&context)?;
        Ok(resources::templates())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let (parts, person) = self.caller_of(&context)?;
        let cursor = request.and_then(|r| r.cursor);
        let list = resources::list(&self.tools, &self.wiki, person, cursor.as_deref());
        self.observe("resources/list", person, parts, String::new(), list)
            .await
            .map_err(|f| protocol_error(&f, rmcp::model::ErrorCode::INVALID_PARAMS))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let (parts, person) = self.caller_of(&context)?;
        let query = tools::clip(&request.uri, 200);
        let read = resources::read(&self.tools, self.directory.as_deref(), person, &request.uri);
        self.observe("resources/read", person, parts, query, read)
            .await
            .map(Into::into)
            .map_err(|f| protocol_error(&f, rmcp::model::ErrorCode::RESOURCE_NOT_FOUND))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let (_, person) = self.caller_of(&context)?;
        Ok(prompts::catalog(person.is_some()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let (parts, person) = self.caller_of(&context)?;
        let query = tools::clip(&request.name, 100);
        let got = prompts::get(
            &self.tools,
            self.directory.as_deref(),
            person,
            &request.name,
            request.arguments,
        );
        match self.observe("prompts/get", person, parts, query, got).await {
            Ok(Some(result)) => Ok(result.into()),
            Ok(None) => Err(McpError::invalid_params(
                "prompt not found: prompts/list names the prompts offered to you",
                None,
            )),
            Err(failure) => Err(protocol_error(
                &failure,
                rmcp::model::ErrorCode::INVALID_PARAMS,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unconfigured_server() -> KnowledgeServer {
        let none = || std::sync::Arc::new(acdm_sources::Unconfigured::new("-"));
        KnowledgeServer::new(
            Tools::new(
                acdm_sources::Sources {
                    wiki: none(),
                    files: none(),
                    search: none(),
                },
                acdm_core::AbsPath::parse("/Projects").unwrap(),
                ReadLimits::default(),
                None,
            ),
            McpMetrics::unregistered(),
            ToolLimits::off(),
        )
    }

    #[test]
    fn with_people_on_a_call_with_neither_mark_is_refused_not_served_as_the_service() {
        let parts = |person: bool, service: bool| {
            let (mut parts, ()) = http::Request::new(()).into_parts();
            if person {
                parts.extensions.insert(Person {
                    user: acdm_core::UserId::parse("u-1").unwrap(),
                    memberships: std::sync::Arc::from(Vec::new()),
                });
            }
            if service {
                parts
                    .extensions
                    .insert(acdm_core::identity::ServiceAuthenticated);
            }
            parts
        };
        struct NoOne;
        #[async_trait::async_trait]
        impl PersonDirectory for NoOne {
            async fn memberships(
                &self,
                _: &acdm_core::UserId,
            ) -> Result<Vec<crate::Membership>, String> {
                Ok(Vec::new())
            }
            async fn overview(
                &self,
                _: &acdm_core::UserId,
                _: &acdm_core::ProjectSlug,
            ) -> Result<Option<(acdm_core::project::OverviewData, String)>, String> {
                Ok(None)
            }
        }
        let on = unconfigured_server().with_people(Some(Arc::new(NoOne)));
        assert!(on.caller(Some(&parts(false, false))).is_err());
        assert!(on.caller(None).is_err());
        assert!(matches!(on.caller(Some(&parts(false, true))), Ok(None)));
        assert!(matches!(on.caller(Some(&parts(true, false))), Ok(Some(_))));
        // Without people's tokens, the gate let through only the service.
        let off = unconfigured_server();
        assert!(matches!(off.caller(Some(&parts(false, false))), Ok(None)));
    }

    #[test]
    fn each_tools_limit_key_is_its_name_after_tool() {
        for tool in [SEARCH_WIKI, READ_WIKI, SEARCH_NEXTCLOUD, READ_NEXTCLOUD] {
            let key = limit_key(tool);
            assert!(
                matches!(key, std::borrow::Cow::Borrowed(_)),
                "{tool}: written out"
            );
            assert_eq!(key, format!("tool:{tool}"));
        }
        assert_eq!(limit_key("acdm_other"), "tool:acdm_other");
    }

    /// The size of the future `call` returns, without calling it.
    fn future_size<A, B, C, F>(_call: fn(A, B, C) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// A tool call's future is moved whole into a box on every call (the
    /// direct path's, then rmcp's): a file read must not pay for copying
    /// the searches' larger futures it never uses.
    #[test]
    fn a_tool_calls_future_stays_small_whatever_the_tools_hold() {
        // `answer` is the direct path's, `call` (which holds it) rmcp's.
        let size = future_size(KnowledgeServer::answer).max(future_size(KnowledgeServer::call));
        assert!(
            size <= 1536,
            "the larger of KnowledgeServer::answer's and call's futures is {size} bytes"
        );
    }

    #[test]
    fn the_catalog_has_four_read_only_tools_with_strict_bounded_schemas() {
        let catalog = catalog(ReadLimits::default(), false);
        let names: Vec<&str> = catalog.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(
            names,
            [SEARCH_WIKI, READ_WIKI, SEARCH_NEXTCLOUD, READ_NEXTCLOUD]
        );
        for tool in &catalog {
            let input = serde_json::Value::Object((*tool.input_schema).clone());
            assert_eq!(input["type"], "object", "{}", tool.name);
            assert_eq!(
                input["additionalProperties"], false,
                "{}: unknown fields refused",
                tool.name
            );
            assert!(tool.output_schema.is_some(), "{}", tool.name);
            let a = tool.annotations.as_ref().unwrap();
            assert_eq!(
                (
                    a.read_only_hint,
                    a.idempotent_hint,
                    a.open_world_hint,
                    a.destructive_hint
                ),
                (Some(true), Some(true), Some(true), Some(false))
            );
            assert!(
                tool.description.as_ref().unwrap().contains("Good"),
                "{}: an example",
                tool.name
            );
        }
        let search = serde_json::Value::Object((*catalog[0].input_schema).clone());
        assert_eq!(search["properties"]["limit"]["maximum"], 50);
        assert_eq!(search["properties"]["limit"]["default"], 10);
        assert_eq!(search["required"], serde_json::json!(["query"]));
        let nc = serde_json::Value::Object((*catalog[2].input_schema).clone());
        assert_eq!(nc["required"], serde_json::json!(["query", "project_name"]));
        let read = serde_json::Value::Object((*catalog[3].input_schema).clone());
        assert_eq!(
            read["properties"]["max_bytes"]["maximum"],
            ReadLimits::default().max_bytes,
            "the window cap is advertised"
        );
        let output =
            serde_json::Value::Object((*catalog[3].output_schema.clone().unwrap()).clone());
        assert_eq!(output["type"], "object");
        assert_eq!(output["anyOf"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn the_file_search_says_whether_it_matches_contents() {
        let description = |contents: bool| {
            catalog(ReadLimits::default(), contents)[2]
                .description
                .clone()
                .unwrap()
                .into_owned()
        };
        assert!(description(false).contains("names are matched, not contents"));
        let indexed = description(true);
        assert!(
            indexed.contains("contents and names") && !indexed.contains("not contents"),
            "{indexed}"
        );
        assert!(indexed.contains("best-matching files first"), "{indexed}");
    }

    #[test]
    fn the_instructions_say_never_to_guess_the_project() {
        assert!(INSTRUCTIONS.contains("readable by everyone"));
        assert!(INSTRUCTIONS.contains("ask them"));
        assert!(INSTRUCTIONS.contains("Never guess"));
        assert!(INSTRUCTIONS.contains("next_offset"));
    }
}
