//! The seven nc file primitives (spec §6.1): `POST /agent-tools/nc/{op}`.
//!
//! Every path a caller gives (`rel_path`, `from_rel_path`, `to_rel_path`)
//! is a [`RelPath`] (checked segments, no `..`, no encoded tricks) joined
//! onto a mount root from the store; the file store then builds its URL
//! one percent-encoded segment at a time. The hidden trash is never
//! addressable. Writes go through the [`Journal`], after the kill switch.

use std::collections::VecDeque;
use std::sync::Arc;

use acdm_core::approval::WriteOp;
use acdm_core::domain::{DEFAULT_MOUNT, Mount};
use acdm_core::events::{Actor, TRASH_FOLDER, trash_root};
use acdm_core::nc::{
    DeleteData, DeleteRequest, Encoding, EntryInfo, HitInfo, ListData, ListMountsRequest,
    ListRequest, MountInfo, MountsData, MoveData, MoveRequest, NcOp, PreviewEntry, ReadAs,
    ReadData, ReadRequest, SearchData, SearchRequest, WriteData, WriteRequest,
};
use acdm_core::{AbsPath, ErrorCode, MountName, RelPath, ToolResponse};
use acdm_journal::{Approved, Journal, JournalError, Record};
use acdm_knowledge::{DocumentText, Knowledge, KnowledgeError, search_suggestions};
use acdm_sources::render::{past_the_end, render};
use acdm_sources::{ETag, Entry, FileReader, FileSearch, ReadRange, SourceError};
use acdm_store::Store;
use axum::Router;
use axum::extract::{FromRequest, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::approval::{Approvals, target};
use crate::envelope::{Envelope, Failure};
use crate::extract::{StrictJson, invalid_field, route_op, write_body};
use crate::pipeline::{Behind, Caller, PipelineState};
use crate::switch::KillSwitch;

/// What a dry-run `delete` suggests: the same call with `dry_run: false`.
/// Clients with their own spelling of that flag (acdm-tool's `--yes`)
/// replace this suggested action with their own.
const DELETE_CONFIRMATION: &str = "Call again with dry_run: false to delete (the item is kept in the backend's trash and can be restored).";

/// Bounds of the nc operations.
#[derive(Debug, Clone, Copy)]
pub struct NcLimits {
    /// Bytes a `read` returns when `max_bytes` is not given.
    pub default_read_bytes: u64,
    /// The largest `max_bytes` accepted.
    pub max_read_bytes: u64,
    /// Entries a `list` returns at most.
    pub max_list_entries: usize,
    /// Entries a dry-run `delete` reports at most.
    pub max_delete_preview: usize,
}

impl Default for NcLimits {
    fn default() -> Self {
        Self {
            default_read_bytes: 64 * 1024,
            max_read_bytes: 1024 * 1024,
            max_list_entries: 1000,
            max_delete_preview: 1000,
        }
    }
}

/// What the nc operations need; shared, so a request's copy is one
/// reference count, not a clone of every field.
#[derive(Clone)]
pub struct NcState(Arc<NcFields>);

/// The fields of [`NcState`].
struct NcFields {
    store: Store,
    /// Reads only: every change goes through the journal.
    files: Arc<dyn FileReader>,
    search: Arc<dyn FileSearch>,
    journal: Journal,
    switch: KillSwitch,
    limits: NcLimits,
    /// The backend's trash folder under the files base.
    trash: AbsPath,
    /// Documents as text and the content index (the service always has
    /// them; without, documents are read as bytes and searches are the
    /// store's own).
    knowledge: Option<Knowledge>,
    /// Which writes wait for a person's approval.
    approvals: Approvals,
}

impl NcState {
    /// The nc operations over `journal` (its store and file store),
    /// searching with `search`, guarded by `switch`.
    pub fn new(
        journal: Journal,
        search: Arc<dyn FileSearch>,
        switch: KillSwitch,
        limits: NcLimits,
        knowledge: Option<Knowledge>,
        approvals: Approvals,
    ) -> Self {
        Self(Arc::new(NcFields {
            knowledge,
            approvals,
            store: journal.store().clone(),
            files: journal.files().clone(),
            trash: trash_root(journal.files_base()),
            search,
            journal,
            switch,
            limits,
        }))
    }
}

/// The nc routes, each call through the agent pipeline first.
pub(crate) fn routes(state: NcState, pipeline: PipelineState) -> Router {
    Router::new()
        .route("/agent-tools/nc/{op}", post(dispatch))
        .with_state(Behind::new(state, pipeline))
}

/// One call: the state, the caller and the actor its writes record.
struct Ctx {
    state: Arc<NcFields>,
    actor: Actor,
    caller: Caller,
    /// The approval this call's write runs under, once checked.
    approval: Option<Approved>,
}

type Reply = Result<Response, Failure>;

fn ok<T: Serialize>(data: T, message: impl Into<String>) -> Reply {
    Ok(Envelope(ToolResponse::ok(data, message)).into_response())
}

pub(crate) async fn dispatch(State(behind): State<Arc<Behind<NcState>>>, req: Request) -> Response {
    behind.run(req, answer).await
}

/// One call, once the pipeline admitted its caller.
async fn answer(state: &NcState, caller: Caller, req: Request) -> Response {
    let (op, req) = match route_op(req).await {
        Ok(found) => found,
        Err(rejection) => return rejection,
    };
    let op = match op.parse::<NcOp>() {
        Ok(op) => op,
        Err(unknown) => {
            return Failure::new(ErrorCode::NotFound, unknown.to_string()).into_response();
        }
    };
    let what = if op.writes() {
        "change files"
    } else {
        "read files"
    };
    if let Err(refused) = caller.allow(op.access(), what) {
        return refused.into_response();
    }
    let mut ctx = Ctx {
        state: state.0.clone(),
        actor: caller.actor(),
        caller,
        approval: None,
    };
    // Exhaustive: an operation without a handler does not compile. Each
    // operation's future (its body's reading included) is boxed: inline,
    // this handler's future would be as large as the largest operation's
    // (a write's, with its journal), and axum moves it whole into a box on
    // every call, a read included.
    let reply = match op {
        NcOp::ListMounts => Box::pin(async move { ctx.list_mounts(body(req).await).await }).await,
        NcOp::List => Box::pin(async move { ctx.list(body(req).await).await }).await,
        NcOp::Read => Box::pin(async move { ctx.read(body(req).await).await }).await,
        NcOp::Search => Box::pin(async move { ctx.search(body(req).await).await }).await,
        NcOp::Write => {
            Box::pin(async move {
                let (mut body, approval) = write_body::<WriteRequest>(req).await?;
                ctx.writable(None)?;
                // The etag the approver saw, so that an approved overwrite
                // is refused if the file changes after the check.
                let seen = std::sync::OnceLock::new();
                let preview = async {
                    let preview = ctx.preview_write(&body).await?;
                    if let Some(etag) = preview
                        .get("current_etag")
                        .and_then(serde_json::Value::as_str)
                    {
                        let _ = seen.set(etag.to_owned());
                    }
                    Ok(preview)
                };
                ctx.approval = ctx.approved(op, &body, approval, preview).await?;
                if ctx.approval.is_some() && body.if_match.is_none() {
                    body.if_match = seen.into_inner();
                }
                ctx.write(Ok(body)).await
            })
            .await
        }
        NcOp::Delete => {
            Box::pin(async move {
                let (body, approval) = write_body::<DeleteRequest>(req).await?;
                if !body.dry_run {
                    ctx.writable(None)?;
                    ctx.approval = ctx
                        .approved(op, &body, approval, ctx.preview_delete_approval(&body))
                        .await?;
                }
                ctx.delete(Ok(body)).await
            })
            .await
        }
        NcOp::Move => {
            Box::pin(async move {
                let (body, approval) = write_body::<MoveRequest>(req).await?;
                ctx.writable(None)?;
                ctx.approval = ctx
                    .approved(op, &body, approval, ctx.preview_move(&body))
                    .await?;
                ctx.move_item(Ok(body)).await
            })
            .await
        }
    };
    // A failure names its code as the span's outcome; a success is `ok`
    // by the request span's own default.
    reply.unwrap_or_else(IntoResponse::into_response)
}

async fn body<T: DeserializeOwned>(req: Request) -> Result<T, Failure> {
    StrictJson::<T>::from_request(req, &())
        .await
        .map(|StrictJson(v)| v)
}

// ---- the operations -------------------------------------------------------

impl Ctx {
    /// The project's mounts, from the caller's cached scope (no database
    /// round trip).
    async fn mounts(&self) -> Result<Vec<Mount>, Failure> {
        Ok(self.caller.mounts().to_vec())
    }

    async fn mount(&self, name: Option<&str>) -> Result<Mount, Failure> {
        let name = match name {
            None => MountName::parse(DEFAULT_MOUNT),
            Some(raw) => MountName::parse(raw),
        }
        .map_err(|e| invalid_field("mount", e.to_string()))?;
        let mounts = self.caller.mounts();
        mounts
            .iter()
            .find(|m| m.name == name)
            .cloned()
            .ok_or_else(|| {
                let names: Vec<&str> = mounts.iter().map(|m| m.name.as_str()).collect();
                Failure::new(
                    ErrorCode::NotFound,
                    format!(
                        "this project has no mount `{name}`; its mounts are: {}",
                        names.join(", ")
                    ),
                )
            })
    }

    /// A caller's path under `mount`, or the failure naming `field`.
    fn path(
        &self,
        mount: &Mount,
        raw: &str,
        field: &str,
        folder: bool,
    ) -> Result<(RelPath, AbsPath), Failure> {
        let rel = if folder {
            RelPath::parse_dir(raw)
        } else {
            RelPath::parse(raw)
        }
        .map_err(|e| {
            Failure::new(ErrorCode::InvalidPath, format!("{field}: {e}"))
                .with_data(json!({ "errors": [{ "field": field, "problem": e.to_string() }] }))
        })?;
        // Case-insensitively: synced clients on Windows and macOS fold case.
        if rel
            .segments()
            .iter()
            .any(|s| s.eq_ignore_ascii_case(TRASH_FOLDER))
        {
            return Err(Failure::new(
                ErrorCode::PermissionDenied,
                format!("{field}: `{TRASH_FOLDER}` is reserved for the backend's trash"),
            )
            .with_suggested_action("Use another name; deleted and replaced files are restored by an operator, not read back."));
        }
        let abs = mount.root.join(&rel);
        // Neither inside the trash nor a folder holding it (a mount rooted
        // above the files base must not move or list every trash).
        let trash = &self.state.trash;
        if trash.contains(&abs) || abs.contains(trash) {
            return Err(Failure::new(
                ErrorCode::PermissionDenied,
                format!("{field}: this path lies in the backend's trash"),
            )
            .with_suggested_action("Use a path inside the project's own folders (see list)."));
        }
        Ok((rel, abs))
    }

    /// Refuses with `conflict` when `abs` is, or holds, a file registered
    /// as a meeting's attachment (spec §6.2, no ghost attachments): those
    /// go only through the business operations, which remove the row and
    /// the file together. Looked up through every mount, since mounts may
    /// overlap.
    async fn no_attachment_at(
        &self,
        abs: &AbsPath,
        shown: &str,
        verb: &str,
    ) -> Result<(), Failure> {
        for mount in self.mounts().await? {
            let rel = if mount.root.contains(abs) {
                match mount.root.strip_prefix_of(&abs.to_string()) {
                    Ok(rel) => rel.to_string(),
                    Err(_) => continue,
                }
            } else if abs.contains(&mount.root) {
                String::new()
            } else {
                continue;
            };
            if let Some(file) = self
                .state
                .store
                .attachment_at_or_under(self.caller.project().id, mount.name.as_str(), &rel)
                .await?
            {
                let (what, action) = if file.rel_path.trim_end_matches('/') == rel {
                    ("is", "delete_meeting_file")
                } else {
                    (
                        "holds",
                        "delete_meeting_file (or delete_meeting for the whole meeting)",
                    )
                };
                return Err(Failure::new(
                    ErrorCode::Conflict,
                    format!(
                        "cannot {verb} `{shown}`: it {what} `{}`, an attachment of meeting {}; nc file operations never remove or displace meeting attachments",
                        file.rel_path, file.meeting_id
                    ),
                )
                .with_suggested_action(format!(
                    "Use the business operation {action} with meeting_id {} and file_id {}.",
                    file.meeting_id, file.file_id
                ))
                .with_data(json!({ "meeting_id": file.meeting_id, "file_id": file.file_id, "rel_path": file.rel_path })));
            }
        }
        Ok(())
    }

    fn hidden(&self, abs: &AbsPath) -> bool {
        self.state.trash.contains(abs)
    }

    /// A failure for a file-store error about `shown` (mount-relative), in
    /// words that show the caller's own path instead of the store's
    /// absolute one.
    fn source_failure(&self, error: SourceError, mount: &Mount, shown: &str) -> Failure {
        let message = match &error {
            SourceError::NotFound(_) => {
                format!("`{shown}` does not exist in mount `{}`", mount.name)
            }
            SourceError::PreconditionFailed(_) => {
                format!("`{shown}` changed or already exists; read it again and retry")
            }
            other => other.to_string().replace(&mount.root.as_prefix(), ""),
        };
        Failure::source(&error, message)
    }

    fn journal_failure(&self, error: JournalError, mount: &Mount, shown: &str) -> Failure {
        match error {
            JournalError::Source(e) => self.source_failure(e, mount, shown),
            other => other.into(),
        }
    }

    /// What a write of this call records: the caller's actor and project.
    fn record(&self, target: String, params: serde_json::Value) -> Record<'_> {
        Record {
            actor: &self.actor,
            project: self.caller.project(),
            target,
            params,
            approval: self.approval.clone(),
        }
    }

    fn target(mount: &Mount, rel: &RelPath) -> String {
        format!("{}:/{rel}", mount.name)
    }

    /// Refuses a write when the kill switch is off or the mount read-only.
    fn writable(&self, mount: Option<&Mount>) -> Result<(), Failure> {
        if !self.state.switch.writes_enabled() {
            return Err(Failure::new(
                ErrorCode::KillSwitchOff,
                "file writes by agents are switched off on this service right now",
            ));
        }
        if let Some(mount) = mount.filter(|m| !m.writable) {
            return Err(Failure::new(
                ErrorCode::PermissionDenied,
                format!("mount `{}` is read-only", mount.name),
            )
            .with_suggested_action("Write to a writable mount (see list_mounts), or tell the user this folder is read-only."));
        }
        Ok(())
    }

    async fn list_mounts(&self, body: Result<ListMountsRequest, Failure>) -> Reply {
        body?;
        let mounts: Vec<MountInfo> = self
            .mounts()
            .await?
            .into_iter()
            .map(|m| MountInfo {
                name: m.name.as_str().to_owned(),
                writable: m.writable,
            })
            .collect();
        let message = format!("{} mount(s)", mounts.len());
        ok(MountsData { mounts }, message)
    }

    async fn list(&self, body: Result<ListRequest, Failure>) -> Reply {
        let body = body?;
        let mount = self.mount(body.mount.as_deref()).await?;
        let (rel, abs) = self.path(&mount, &body.rel_path, "rel_path", true)?;
        let shown = format!("/{rel}");
        let entries = self.state.files.list(&abs).await.map_err(|e| match e {
            SourceError::Conflict(_) => Failure::new(
                ErrorCode::Conflict,
                format!("`{shown}` is a file, not a folder; read it instead"),
            ),
            other => self.source_failure(other, &mount, &shown),
        })?;
        let visible: Vec<&Entry> = entries.iter().filter(|e| !self.hidden(&e.path)).collect();
        let truncated = visible.len() > self.state.limits.max_list_entries;
        let views: Vec<EntryInfo> = visible
            .into_iter()
            .take(self.state.limits.max_list_entries)
            .map(|e| entry_view(e, &mount.root))
            .collect();
        let message = format!(
            "{} entr{} in {}:{shown}{}",
            views.len(),
            if views.len() == 1 { "y" } else { "ies" },
            mount.name,
            if truncated { " (truncated)" } else { "" }
        );
        ok(
            ListData {
                mount: mount.name.as_str().to_owned(),
                rel_path: rel.to_string(),
                entries: views,
                truncated,
            },
            message,
        )
    }

    async fn read(&self, body: Result<ReadRequest, Failure>) -> Reply {
        let body = body?;
        let limits = self.state.limits;
        let len = body.max_bytes.unwrap_or(limits.default_read_bytes);
        if len == 0 || len > limits.max_read_bytes {
            return Err(invalid_field(
                "max_bytes",
                format!("must be between 1 and {}", limits.max_read_bytes),
            ));
        }
        let mount = self.mount(body.mount.as_deref()).await?;
        let (rel, abs) = self.path(&mount, &body.rel_path, "rel_path", false)?;
        // The path as a failure shows it: made only for one.
        let shown = || format!("/{rel}");
        let failure = |e: SourceError| match e {
            SourceError::Conflict(_) => Failure::new(
                ErrorCode::Conflict,
                format!("`{}` is a folder; list it instead", shown()),
            ),
            other => self.source_failure(other, &mount, &shown()),
        };
        if let Some(knowledge) = &self.state.knowledge
            && body.read_as.unwrap_or_default() == ReadAs::Text
        {
            let document = knowledge.file_text(&abs).await.map_err(|e| match e {
                KnowledgeError::Source(e) => failure(e),
                KnowledgeError::Extract(e) if e.reason() == "unavailable" => {
                    knowledge_failure(KnowledgeError::Extract(e))
                }
                KnowledgeError::Extract(e) => Failure::new(
                    ErrorCode::DocumentUnreadable,
                    format!(
                        "`{}` could not be read as text ({}): {e}",
                        shown(),
                        e.reason()
                    ),
                ),
                other => knowledge_failure(other),
            })?;
            if let Some(document) = document {
                return self.read_document(&mount, &rel, &document, body.offset, len);
            }
        }
        let stream = self
            .state
            .files
            .read(&abs, ReadRange::new(body.offset, len))
            .await
            .map_err(failure)?;
        let window = stream.collect(len).await.map_err(failure)?;
        if let Some(size) = past_the_end(&window, body.offset) {
            return Err(invalid_field(
                "offset",
                format!(
                    "{} is past the end of `{}` ({size} bytes)",
                    body.offset,
                    shown()
                ),
            )
            .with_suggested_action("Read from offset 0, or continue with the next_offset a truncated answer gave; there is nothing after the last byte."));
        }
        let rendered = render(&window, len);
        let message = match rendered.next_offset {
            Some(next) => format!(
                "{} bytes of {}:/{rel} from offset {}; continue with offset {next}",
                rendered.returned_bytes, mount.name, window.offset
            ),
            None => format!(
                "{} bytes of {}:/{rel} from offset {} (end of file)",
                rendered.returned_bytes, mount.name, window.offset
            ),
        };
        ok(
            ReadData {
                mount: mount.name.as_str().to_owned(),
                rel_path: rel.to_string(),
                encoding: rendered.encoding,
                content: rendered.content,
                size: window.size,
                extracted_from: None,
                extraction_notes: Vec::new(),
                file_size: None,
                etag: window.etag.as_ref().map(|e| e.value().to_owned()),
                content_type: window.content_type,
                offset: window.offset,
                returned_bytes: rendered.returned_bytes,
                truncated: rendered.truncated,
                next_offset: rendered.next_offset,
            },
            message,
        )
    }

    async fn search(&self, body: Result<SearchRequest, Failure>) -> Reply {
        let body = body?;
        let query = body.query.trim();
        if query.is_empty() || query.chars().count() > 500 {
            return Err(invalid_field("query", "must have 1 to 500 characters"));
        }
        let limit = body.limit.unwrap_or(20);
        if !(1..=100).contains(&limit) {
            return Err(invalid_field("limit", "must be between 1 and 100"));
        }
        let mounts = match body.mount.as_deref() {
            Some(name) => vec![self.mount(Some(name)).await?],
            None => self.mounts().await?,
        };
        let mut hits = Vec::new();
        let mut total: Option<u64> = Some(0);
        let mut searched = "index";
        for mount in &mounts {
            if hits.len() >= limit as usize {
                break;
            }
            let indexed = match &self.state.knowledge {
                Some(knowledge) => knowledge
                    .search_files(&mount.root, query, limit as usize)
                    .await
                    .map_err(knowledge_failure)?,
                None => None,
            };
            if let Some(found) = indexed {
                total = total.map(|t| t + found.total_count);
                for hit in found.hits {
                    let Ok(path) = AbsPath::parse(&hit.path) else {
                        continue;
                    };
                    if hits.len() >= limit as usize {
                        break;
                    }
                    if !mount.root.contains(&path) || path == mount.root || self.hidden(&path) {
                        continue;
                    }
                    hits.push(HitInfo {
                        mount: mount.name.as_str().to_owned(),
                        rel_path: relative(&mount.root, &path),
                        path: hit.path,
                        is_dir: Some(false),
                        snippet: Some(hit.snippet).filter(|s| !s.is_empty()),
                        line: None,
                        score: Some(f64::from(hit.score)),
                        modified: hit
                            .modified
                            .map(|m| m.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                        extracted_from: hit.extracted_from,
                    });
                }
                continue;
            }
            total = None;
            searched = "upstream";
            let found = self
                .state
                .search
                .search(query, limit as usize, &mount.root)
                .await
                .map_err(|e| self.source_failure(e, mount, query))?;
            for hit in found {
                if hits.len() >= limit as usize {
                    break;
                }
                // The source filters by scope already; check again, whole
                // segments, and keep the trash out.
                if !mount.root.contains(&hit.path) || self.hidden(&hit.path) {
                    continue;
                }
                hits.push(HitInfo {
                    mount: mount.name.as_str().to_owned(),
                    rel_path: relative(&mount.root, &hit.path),
                    path: hit.path.to_string(),
                    is_dir: hit.kind.map(|k| k == acdm_sources::EntryKind::Folder),
                    snippet: hit.snippet,
                    line: hit.line,
                    score: None,
                    modified: None,
                    extracted_from: None,
                });
            }
        }
        // Ranked hits of several mounts: best first across them.
        if searched == "index" {
            hits.sort_by(|a, b| {
                b.score
                    .unwrap_or_default()
                    .total_cmp(&a.score.unwrap_or_default())
            });
        }
        let returned = hits.len();
        let message = match total {
            Some(total) => format!("{returned} of {total} file(s) matching `{query}`, best first"),
            None => format!(
                "{returned} hit(s) for `{query}` (the content index is still being built: the file store's own search answered, which may match names only)"
            ),
        };
        let suggestions = search_suggestions(query, returned, None, searched == "upstream");
        ok(
            SearchData {
                hits,
                returned,
                total_count: total,
                searched: searched.to_owned(),
                suggestions,
            },
            message,
        )
    }

    async fn write(&self, body: Result<WriteRequest, Failure>) -> Reply {
        let body = body?;
        self.writable(None)?;
        let mount = self.mount(body.mount.as_deref()).await?;
        self.writable(Some(&mount))?;
        let (rel, abs) = self.path(&mount, &body.rel_path, "rel_path", false)?;
        let encoding = body.encoding.unwrap_or(Encoding::Text);
        let content = match encoding {
            Encoding::Text => Bytes::from(body.content.into_bytes()),
            Encoding::Base64 => base64::engine::general_purpose::STANDARD
                .decode(body.content.as_bytes())
                .map(Bytes::from)
                .map_err(|e| invalid_field("content", format!("is not valid base64 ({e})")))?,
        };
        let if_match = match body.if_match.as_deref() {
            None => None,
            Some(raw) => Some(ETag::parse(raw).filter(|e| !e.is_weak()).ok_or_else(|| {
                invalid_field("if_match", "must be an etag as returned by read or list")
            })?),
        };
        let target = Self::target(&mount, &rel);
        let size = content.len();
        let params = json!({
            "mount": mount.name,
            "rel_path": rel.to_string(),
            "encoding": encoding,
            "size": size,
            "if_match": if_match.as_ref().map(ETag::value),
        });
        let shown = format!("/{rel}");
        let written = self
            .state
            .journal
            .write(
                self.record(target, params),
                &abs,
                content,
                if_match.as_ref(),
            )
            .await
            .map_err(|e| self.journal_failure(e, &mount, &shown))?;
        self.changed(&[abs]).await;
        let verb = if written.created {
            "created"
        } else {
            "overwrote"
        };
        ok(
            WriteData {
                mount: mount.name.as_str().to_owned(),
                rel_path: rel.to_string(),
                created: written.created,
                size,
                etag: written.etag.as_ref().map(|e| e.value().to_owned()),
                event_id: written.event.id,
            },
            format!("{verb} {}:{shown} ({size} bytes)", mount.name),
        )
    }

    async fn delete(&self, body: Result<DeleteRequest, Failure>) -> Reply {
        let body = body?;
        if !body.dry_run {
            self.writable(None)?;
        }
        let mount = self.mount(body.mount.as_deref()).await?;
        if !mount.writable {
            return Err(Failure::new(
                ErrorCode::PermissionDenied,
                format!(
                    "mount `{}` is read-only; nothing in it can be deleted",
                    mount.name
                ),
            ));
        }
        let (rel, abs) = self.path(&mount, &body.rel_path, "rel_path", false)?;
        let shown = format!("/{rel}");
        if body.dry_run {
            return self.preview_delete(&mount, &rel, &abs).await;
        }
        self.no_attachment_at(&abs, &shown, "delete").await?;
        let target = Self::target(&mount, &rel);
        let params = json!({ "mount": mount.name, "rel_path": rel.to_string() });
        let event = self
            .state
            .journal
            .delete(self.record(target, params), &abs)
            .await
            .map_err(|e| self.journal_failure(e, &mount, &shown))?;
        self.changed(&[abs]).await;
        ok(
            DeleteData {
                dry_run: false,
                mount: mount.name.as_str().to_owned(),
                rel_path: rel.to_string(),
                would_delete: None,
                count: None,
                truncated: None,
                event_id: Some(event.id),
            },
            format!(
                "deleted {}:{shown}; it is kept in the backend's trash and an operator can restore it (event {})",
                mount.name, event.id
            ),
        )
    }

    /// What a delete would remove: the item and, for a folder, everything
    /// in it (breadth first, bounded); `true` when the listing stopped at
    /// the bound.
    async fn delete_listing(
        &self,
        mount: &Mount,
        rel: &RelPath,
        abs: &AbsPath,
    ) -> Result<(Vec<Entry>, bool), Failure> {
        let shown = format!("/{rel}");
        let root = self
            .state
            .files
            .stat(abs)
            .await
            .map_err(|e| self.source_failure(e, mount, &shown))?;
        let max = self.state.limits.max_delete_preview;
        let mut found = vec![root];
        let mut folders: VecDeque<AbsPath> = found
            .iter()
            .filter(|e| e.is_folder())
            .map(|e| e.path.clone())
            .collect();
        let mut truncated = false;
        while let Some(folder) = folders.pop_front() {
            let children = self
                .state
                .files
                .list(&folder)
                .await
                .map_err(|e| self.source_failure(e, mount, &shown))?;
            for child in children.into_iter().filter(|c| !self.hidden(&c.path)) {
                if found.len() >= max {
                    truncated = true;
                    break;
                }
                if child.is_folder() {
                    folders.push_back(child.path.clone());
                }
                found.push(child);
            }
            if truncated {
                break;
            }
        }
        Ok((found, truncated))
    }

    /// A dry-run delete's answer.
    async fn preview_delete(&self, mount: &Mount, rel: &RelPath, abs: &AbsPath) -> Reply {
        let shown = format!("/{rel}");
        let (found, truncated) = self.delete_listing(mount, rel, abs).await?;
        let items = preview_entries(mount, &found);
        let count = items.len();
        let preview = ToolResponse::ok(
            DeleteData {
                dry_run: true,
                mount: mount.name.as_str().to_owned(),
                rel_path: rel.to_string(),
                would_delete: Some(items),
                count: Some(count),
                truncated: Some(truncated),
                event_id: None,
            },
            format!(
                "dry run: deleting {}:{shown} would remove {count}{} item(s); nothing was changed.",
                mount.name,
                if truncated { "+" } else { "" }
            ),
        )
        .with_suggested_action(DELETE_CONFIRMATION);
        Ok(Envelope(preview).into_response())
    }

    async fn move_item(&self, body: Result<MoveRequest, Failure>) -> Reply {
        let body = body?;
        self.writable(None)?;
        let mount = self.mount(body.mount.as_deref()).await?;
        self.writable(Some(&mount))?;
        let (from_rel, from) = self.path(&mount, &body.from_rel_path, "from_rel_path", false)?;
        let (to_rel, to) = self.path(&mount, &body.to_rel_path, "to_rel_path", false)?;
        if from.contains(&to) || to.contains(&from) {
            return Err(Failure::new(
                ErrorCode::Conflict,
                "to_rel_path is the same as from_rel_path, lies inside it, or contains it",
            )
            .with_suggested_action("Choose a to_rel_path outside from_rel_path."));
        }
        self.no_attachment_at(&from, &format!("/{from_rel}"), "move")
            .await?;
        if body.overwrite {
            self.no_attachment_at(&to, &format!("/{to_rel}"), "replace")
                .await?;
        }
        let target = format!("{} -> /{to_rel}", Self::target(&mount, &from_rel));
        let params = json!({
            "mount": mount.name,
            "from_rel_path": from_rel.to_string(),
            "to_rel_path": to_rel.to_string(),
            "overwrite": body.overwrite,
        });
        let shown = format!("/{from_rel}");
        let (event, overwritten) = self
            .state
            .journal
            .move_to(self.record(target, params), &from, &to, body.overwrite)
            .await
            .map_err(|e| {
                let failure = self.journal_failure(e, &mount, &shown);
                // A move has no etag to retry with: what helps is another
                // target, or replacing the one that is there.
                if failure.envelope().error_code() == Some(ErrorCode::Conflict) {
                    failure.with_suggested_action(
                        "Choose another to_rel_path (list the folder to see what is there), or call again with overwrite: true to replace the item there; the replaced item is kept and can be restored.",
                    )
                } else {
                    failure
                }
            })?;
        self.changed(&[from, to]).await;
        ok(
            MoveData {
                mount: mount.name.as_str().to_owned(),
                from_rel_path: from_rel.to_string(),
                to_rel_path: to_rel.to_string(),
                overwritten,
                event_id: event.id,
            },
            format!(
                "moved {}:{shown} to /{to_rel}{}",
                mount.name,
                if overwritten {
                    " (the item it replaced is kept in the backend's trash)"
                } else {
                    ""
                }
            ),
        )
    }
}

// ---- approval previews ------------------------------------------------------

impl Ctx {
    /// Asks the approvals whether this call of `op` may run (see
    /// [`Approvals::check`]); `preview` is computed only when needed.
    async fn approved<B: Serialize>(
        &self,
        op: NcOp,
        body: &B,
        approval: Option<acdm_core::approval::ApprovalId>,
        preview: impl Future<Output = Result<serde_json::Value, Failure>>,
    ) -> Result<Option<Approved>, Failure> {
        self.state
            .approvals
            .check(&self.caller, WriteOp::Nc(op), body, approval, || preview)
            .await
    }

    /// `Some(entry)` when `abs` exists.
    async fn probe(
        &self,
        mount: &Mount,
        abs: &AbsPath,
        shown: &str,
    ) -> Result<Option<Entry>, Failure> {
        match self.state.files.stat(abs).await {
            Ok(entry) => Ok(Some(entry)),
            Err(SourceError::NotFound(_)) => Ok(None),
            Err(error) => Err(self.source_failure(error, mount, shown)),
        }
    }

    /// What a write would change: the file as it is (its etag) and the new
    /// content's size and digest (and the text itself, when short, for
    /// the approver's diff).
    async fn preview_write(&self, body: &WriteRequest) -> Result<serde_json::Value, Failure> {
        let mount = self.mount(body.mount.as_deref()).await?;
        self.writable(Some(&mount))?;
        let (rel, abs) = self.path(&mount, &body.rel_path, "rel_path", false)?;
        let shown = format!("{}:/{rel}", mount.name);
        let current = self.probe(&mount, &abs, &shown).await?;
        let content = match body.encoding.unwrap_or(Encoding::Text) {
            Encoding::Text => Bytes::from(body.content.clone().into_bytes()),
            Encoding::Base64 => base64::engine::general_purpose::STANDARD
                .decode(body.content.as_bytes())
                .map(Bytes::from)
                .map_err(|e| invalid_field("content", format!("is not valid base64 ({e})")))?,
        };
        let etag = current
            .as_ref()
            .and_then(|e| e.etag.as_ref())
            .map(|e| e.value().to_owned());
        let verb = if current.is_some() {
            "overwrite"
        } else {
            "create"
        };
        Ok(json!({
            "summary": format!("{verb} {shown} with {} bytes", content.len()),
            "mount": mount.name,
            "rel_path": rel.to_string(),
            "exists": current.is_some(),
            "current_size": current.as_ref().and_then(|e| e.size),
            "current_etag": etag,
            "new_size": content.len(),
            "new_sha256": sha256_hex(&content),
            "new_text": std::str::from_utf8(&content).ok().filter(|t| t.len() <= PREVIEW_TEXT_BYTES),
            "targets": [target(shown, current.map(|e| version_of(&e)))],
        }))
    }

    /// What a delete would remove, as its dry run lists it, with etags.
    async fn preview_delete_approval(
        &self,
        body: &DeleteRequest,
    ) -> Result<serde_json::Value, Failure> {
        let mount = self.mount(body.mount.as_deref()).await?;
        self.writable(Some(&mount))?;
        let (rel, abs) = self.path(&mount, &body.rel_path, "rel_path", false)?;
        let (found, truncated) = self.delete_listing(&mount, &rel, &abs).await?;
        self.no_attachment_at(&abs, &format!("/{rel}"), "delete")
            .await?;
        let items = preview_entries(&mount, &found);
        let targets: Vec<serde_json::Value> = found
            .iter()
            .map(|e| {
                target(
                    format!("{}:/{}", mount.name, relative(&mount.root, &e.path)),
                    Some(version_of(e)),
                )
            })
            .collect();
        Ok(json!({
            "summary": format!("delete {}:/{rel} ({} item(s){})", mount.name, items.len(), if truncated { "+" } else { "" }),
            "mount": mount.name,
            "rel_path": rel.to_string(),
            "would_delete": items,
            "count": items.len(),
            "truncated": truncated,
            "targets": targets,
        }))
    }

    /// What a move would change: the item (its etag) and what is at the
    /// target now.
    async fn preview_move(&self, body: &MoveRequest) -> Result<serde_json::Value, Failure> {
        let mount = self.mount(body.mount.as_deref()).await?;
        self.writable(Some(&mount))?;
        let (from_rel, from) = self.path(&mount, &body.from_rel_path, "from_rel_path", false)?;
        let (to_rel, to) = self.path(&mount, &body.to_rel_path, "to_rel_path", false)?;
        if from.contains(&to) || to.contains(&from) {
            return Err(Failure::new(
                ErrorCode::Conflict,
                "to_rel_path is the same as from_rel_path, lies inside it, or contains it",
            ));
        }
        self.no_attachment_at(&from, &format!("/{from_rel}"), "move")
            .await?;
        if body.overwrite {
            self.no_attachment_at(&to, &format!("/{to_rel}"), "replace")
                .await?;
        }
        let from_shown = format!("{}:/{from_rel}", mount.name);
        let to_shown = format!("{}:/{to_rel}", mount.name);
        let item = self
            .probe(&mount, &from, &from_shown)
            .await?
            .ok_or_else(|| {
                Failure::new(ErrorCode::NotFound, format!("{from_shown} does not exist"))
            })?;
        let there = self.probe(&mount, &to, &to_shown).await?;
        Ok(json!({
            "summary": format!(
                "move {from_shown} to {to_shown}{}",
                match (&there, body.overwrite) {
                    (Some(_), true) => " (replacing what is there)",
                    (Some(_), false) => " (something is there: the move will be refused)",
                    (None, _) => "",
                }
            ),
            "mount": mount.name,
            "from_rel_path": from_rel.to_string(),
            "to_rel_path": to_rel.to_string(),
            "overwrite": body.overwrite,
            "is_dir": item.is_folder(),
            "replaces": there.as_ref().map(|e| json!({ "is_dir": e.is_folder(), "size": e.size })),
            "targets": [
                target(from_shown, Some(version_of(&item))),
                target(to_shown, there.map(|e| version_of(&e))),
            ],
        }))
    }
}

/// The longest new text an approval's preview carries for a diff.
const PREVIEW_TEXT_BYTES: usize = 64 * 1024;

/// What identifies an entry's state in a preview: its etag, or (for a
/// store that gives none) its size and modification time.
fn version_of(entry: &Entry) -> String {
    match &entry.etag {
        Some(etag) => etag.value().to_owned(),
        None => format!(
            "size={:?};modified={:?}",
            entry.size,
            entry.modified.map(|m| m.to_rfc3339())
        ),
    }
}

/// Lowercase hex SHA-256.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The entries a delete would remove, as a dry run lists them.
fn preview_entries(mount: &Mount, found: &[Entry]) -> Vec<PreviewEntry> {
    found
        .iter()
        .map(|e| PreviewEntry {
            rel_path: relative(&mount.root, &e.path),
            is_dir: e.is_folder(),
            size: e.size,
            etag: e.etag.as_ref().map(|t| t.value().to_owned()),
        })
        .collect()
}

/// How long a write waits for its files to be indexed before it answers.
const REINDEX_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

impl Ctx {
    /// Tells the content index what a write changed, so a search right
    /// after it sees it.
    /// Bounded: the write is done whatever happens here (the next
    /// refresh repairs what this could not).
    async fn changed(&self, paths: &[AbsPath]) {
        if let Some(knowledge) = &self.state.knowledge
            && tokio::time::timeout(REINDEX_WAIT, knowledge.file_changed(paths))
                .await
                .is_err()
        {
            tracing::warn!("a written file was not indexed in time; the next refresh will");
        }
    }

    /// A window of a document's text.
    fn read_document(
        &self,
        mount: &Mount,
        rel: &RelPath,
        document: &DocumentText,
        offset: u64,
        len: u64,
    ) -> Reply {
        let window = document.window(offset, len).map_err(|size| {
            invalid_field(
                "offset",
                format!("{offset} is past the end of the text of `/{rel}` ({size} bytes)"),
            )
            .with_suggested_action("Read from offset 0, or continue with the next_offset a truncated answer gave; there is nothing after the last byte.")
        })?;
        let rendered = window.rendered;
        let format = document.format();
        let message = match rendered.next_offset {
            Some(next) => format!(
                "{} bytes of the text of {}:/{rel} (extracted from {format}) from offset {}; continue with offset {next}",
                rendered.returned_bytes, mount.name, window.offset
            ),
            None => format!(
                "{} bytes of the text of {}:/{rel} (extracted from {format}) from offset {} (end of the text)",
                rendered.returned_bytes, mount.name, window.offset
            ),
        };
        ok(
            ReadData {
                mount: mount.name.as_str().to_owned(),
                rel_path: rel.to_string(),
                encoding: rendered.encoding,
                content: rendered.content,
                size: Some(window.size),
                extracted_from: Some(format.to_owned()),
                extraction_notes: document.extracted.warnings.clone(),
                file_size: Some(document.file_size),
                etag: document.etag.as_ref().map(|e| e.value().to_owned()),
                content_type: Some("text/markdown".to_owned()),
                offset: window.offset,
                returned_bytes: rendered.returned_bytes,
                truncated: rendered.truncated,
                next_offset: rendered.next_offset,
            },
            message,
        )
    }
}

/// A failure of the knowledge layer other than a source's or a document's.
fn knowledge_failure(error: KnowledgeError) -> Failure {
    match error {
        KnowledgeError::Source(error) => Failure::new(error.code(), error.to_string()),
        KnowledgeError::Extract(error) if error.reason() == "unavailable" => {
            tracing::error!(error = %error, "the document extractor cannot run");
            Failure::new(
                ErrorCode::ServiceUnavailable,
                "the server's document reader is unavailable; retry in a few seconds",
            )
        }
        KnowledgeError::Extract(error) => Failure::new(
            ErrorCode::DocumentUnreadable,
            format!(
                "the document could not be read as text ({}): {error}",
                error.reason()
            ),
        ),
        KnowledgeError::Stopped => {
            Failure::new(ErrorCode::ServiceUnavailable, "the server is stopping")
        }
        KnowledgeError::Index(_) | KnowledgeError::Folders(_) => {
            tracing::error!(error = %error, "the content index failed");
            Failure::new(
                ErrorCode::InternalError,
                "the content index failed; details are in the server's log",
            )
        }
    }
}

fn relative(root: &AbsPath, path: &AbsPath) -> String {
    path.segments()
        .get(root.segments().len()..)
        .unwrap_or_default()
        .join("/")
}

fn entry_view(entry: &Entry, root: &AbsPath) -> EntryInfo {
    EntryInfo {
        name: entry.name().to_owned(),
        rel_path: relative(root, &entry.path),
        is_dir: entry.is_folder(),
        size: entry.size,
        modified: entry.modified,
        etag: entry.etag.as_ref().map(|e| e.value().to_owned()),
    }
}
