//! The business transaction around every file write (spec §6.4): record
//! the intent durably, keep what will be overwritten or removed in the
//! project's hidden trash (server-side COPY/MOVE, never bytes through the
//! backend), make the upstream change with preconditions, then mark the
//! event `applied` or `failed`.
//!
//! Also here: reverting an event (itself an event), and the reconciler
//! that settles events a crash left `pending` by looking at the file store:
//! a write whose content is there is applied; a sequence of moves that got
//! part way is rolled back and failed.
//!
//! Every change takes its acting party as an explicit [`Actor`]: a write
//! without one does not compile. This crate knows nothing of HTTP; the
//! BFF's handlers, the operator API and the CLI all record through it.
//!
//! **Architecture invariant:** no HTTP framework, no MCP, no SQL here —
//! the journal drives the `FileWriter` port and the store's event methods.
//!
//! A change names its actor in its [`Record`]:
//!
//! ```no_run
//! # async fn with_actor(
//! #     journal: acdm_journal::Journal,
//! #     project: acdm_core::domain::ProjectRef,
//! #     path: acdm_core::AbsPath,
//! # ) {
//! let actor = acdm_core::events::Actor::system();
//! let record = acdm_journal::Record {
//!     actor: &actor,
//!     project: &project,
//!     target: "project:/a.md".into(),
//!     params: serde_json::json!({}),
//!     approval: None,
//! };
//! let _ = journal.delete(record, &path).await;
//! # }
//! ```
//!
//! and one without it is refused by the compiler, not at run time:
//!
//! ```compile_fail,E0063
//! # async fn no_actor(
//! #     journal: acdm_journal::Journal,
//! #     project: acdm_core::domain::ProjectRef,
//! #     path: acdm_core::AbsPath,
//! # ) {
//! let record = acdm_journal::Record {
//!     project: &project,
//!     target: "project:/a.md".into(),
//!     params: serde_json::json!({}),
//!     approval: None,
//! };
//! let _ = journal.delete(record, &path).await;
//! # }
//! ```

mod change;

use std::sync::Arc;

use acdm_core::AbsPath;
use acdm_core::ErrorCode;
use acdm_core::domain::{ProjectId, ProjectRef};
use acdm_core::events::{
    Actor, EventId, EventOp, EventStatus, NewEvent, Step, StorageEvent, discard_folder, kept_path,
    revert_plan, trash_folder,
};
use acdm_sources::{ETag, Entry, FileWriter, Precondition, ReadRange, SourceError};
use acdm_store::{Store, StoreError};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde_json::json;
use sha2::{Digest, Sha256};

pub use change::{Change, Changed};

/// Where a write can be stopped by a test, to play a crash at that point:
/// nothing after it runs, as if the process had died.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The intent is stored; nothing upstream has happened.
    AfterIntent,
    /// What will be replaced is kept (or, for a sequence of moves, the
    /// first move is done); the main change has not happened.
    AfterKeep,
    /// The upstream change is done; the event is not yet marked.
    AfterUpstream,
}

/// A hook deciding whether to "crash" at a stage (tests only).
pub type Failpoint = Arc<dyn Fn(Stage) -> bool + Send + Sync>;

/// Why a journalled operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The file store failed or refused.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The request cannot be carried out as asked (target exists, etag
    /// changed, a later change is in the way of a revert).
    #[error("{0}")]
    Conflict(String),
    /// What the request names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A failpoint stopped the operation (tests).
    #[error("stopped at {0:?} by a failpoint")]
    Crashed(Stage),
}

impl JournalError {
    /// The ToolResponse code this error answers with.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Store(e) => e.code(),
            Self::Source(e) => e.code(),
            Self::Conflict(_) => ErrorCode::Conflict,
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::Crashed(_) => ErrorCode::InternalError,
        }
    }
}

/// The outcome of a journalled write.
#[derive(Debug, Clone)]
pub struct Written {
    /// The event (applied, or pending when it could not be marked).
    pub event: StorageEvent,
    /// True when the file did not exist before.
    pub created: bool,
    /// The new etag, when the store reports one.
    pub etag: Option<ETag>,
}

/// What the reconciler did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Settled {
    /// Events found done and marked applied.
    pub applied: Vec<EventId>,
    /// Events found not done (rolled back where they had started) and
    /// marked failed.
    pub failed: Vec<EventId>,
    /// Events that could not be settled now (the store or database
    /// failed); tried again next time.
    pub left: Vec<EventId>,
}

/// Who changes what, as the event will record it. The actor is a field,
/// not context: a change without one does not compile.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    /// Who acts: an agent for a user in a thread, a person, the system.
    pub actor: &'a Actor,
    /// The project whose data changes.
    pub project: &'a ProjectRef,
    /// What changes, for people (`project:/notes/a.md`).
    pub target: String,
    /// The request's parameters (never file contents).
    pub params: serde_json::Value,
    /// The person's approval this change runs under, if it needed one:
    /// recorded in the event's parameters, and used up in the same
    /// transaction as the intent.
    pub approval: Option<Approved>,
}

/// An approval a change runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approved {
    /// The approval.
    pub id: acdm_core::approval::ApprovalId,
    /// Who approved it.
    pub by: acdm_core::UserId,
}

/// The journal: the store of events and the file store they describe.
#[derive(Clone)]
pub struct Journal {
    store: Store,
    files: Arc<dyn FileWriter>,
    files_base: AbsPath,
    failpoint: Option<Failpoint>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("files", &self.files.kind())
            .field("files_base", &self.files_base)
            .finish_non_exhaustive()
    }
}

/// Lowercase hex SHA-256.
fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Journal {
    /// A journal writing events to `store` about `files`; trash folders go
    /// under `files_base`.
    pub fn new(store: Store, files: Arc<dyn FileWriter>, files_base: AbsPath) -> Self {
        Self {
            store,
            files,
            files_base,
            failpoint: None,
        }
    }

    /// Installs a failpoint (tests: play a crash at a stage).
    #[must_use]
    pub fn with_failpoint(mut self, failpoint: Failpoint) -> Self {
        self.failpoint = Some(failpoint);
        self
    }

    /// The database.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The file store.
    pub fn files(&self) -> &Arc<dyn FileWriter> {
        &self.files
    }

    /// The folder under which every project's trash lives.
    pub fn files_base(&self) -> &AbsPath {
        &self.files_base
    }

    fn stop_at(&self, stage: Stage) -> Result<(), JournalError> {
        match &self.failpoint {
            Some(hook) if hook(stage) => Err(JournalError::Crashed(stage)),
            _ => Ok(()),
        }
    }

    /// `Some(entry)` when `path` exists, `None` when it does not.
    async fn probe(&self, path: &AbsPath) -> Result<Option<Entry>, SourceError> {
        match self.files.stat(path).await {
            Ok(entry) => Ok(Some(entry)),
            Err(SourceError::NotFound(_)) => Ok(None),
            Err(error) => Err(error),
        }
    }

    async fn ensure_parent(&self, path: &AbsPath) -> Result<(), SourceError> {
        match path.parent() {
            Some(folder) if !folder.segments().is_empty() => self.files.make_folders(&folder).await,
            _ => Ok(()),
        }
    }

    async fn begin(&self, event: NewEvent) -> Result<StorageEvent, JournalError> {
        let stored = if event.reverts.is_some() {
            self.store.record_revert_intent(&event).await?
        } else {
            self.store.record_intent(&event).await?
        };
        tracing::info!(event = %stored.id, op = %stored.op, path = %stored.target, "storage event recorded (pending)");
        Ok(stored)
    }

    /// Leaves `id` pending for the reconciler after an answer that does not
    /// say whether the change happened, then hands the error back.
    fn unsettled(&self, id: EventId, error: JournalError) -> JournalError {
        tracing::warn!(event = %id, error = %error, "the file store's answer does not say whether the change happened; the event stays pending until reconciled");
        error
    }

    /// Marks `id` failed after an upstream refusal, then hands the error back.
    async fn fail(&self, id: EventId, error: JournalError) -> JournalError {
        let reason = match &error {
            JournalError::Source(source) => source.to_string(),
            other => other.to_string(),
        };
        if let Err(store_error) = self.store.mark_failed(id, &reason).await {
            // The reconciler settles it later.
            tracing::error!(event = %id, error = %store_error, "cannot mark the event failed; it stays pending until reconciled");
        }
        error
    }

    /// Marks `id` applied. When the database fails now, the change has
    /// happened and the event stays pending until the reconciler finds it
    /// done; the caller still gets the event.
    async fn finish(
        &self,
        event: StorageEvent,
        result: serde_json::Value,
    ) -> Result<StorageEvent, JournalError> {
        match self.store.mark_applied(event.id, Some(&result)).await {
            Ok(applied) => {
                tracing::info!(event = %applied.id, op = %applied.op, "storage event applied");
                Ok(applied)
            }
            Err(error) => {
                tracing::error!(event = %event.id, error = %error, "the change happened but its event cannot be marked; it stays pending until reconciled");
                Ok(event)
            }
        }
    }

    /// A new (not yet stored) event of `record`.
    fn intent(record: Record<'_>, id: EventId, op: EventOp) -> NewEvent {
        let mut params = record.params;
        if let Some(approved) = &record.approval
            && let Some(fields) = params.as_object_mut()
        {
            fields.insert(
                "approval".to_owned(),
                json!({ "approval_id": approved.id, "approved_by": approved.by }),
            );
        }
        NewEvent {
            id,
            actor: record.actor.clone(),
            project_id: record.project.id,
            op,
            target: record.target,
            params,
            plan: Vec::new(),
            undo: Vec::new(),
            reverts: None,
            approval: record.approval.map(|approved| approved.id),
        }
    }

    /// Writes `content` at `path`: creates it (and its parent folders) or
    /// overwrites it after keeping the old content in the trash. With
    /// `if_match`, the file must exist with that etag.
    pub async fn write(
        &self,
        record: Record<'_>,
        path: &AbsPath,
        content: Bytes,
        if_match: Option<&ETag>,
    ) -> Result<Written, JournalError> {
        let (project, target) = (record.project, &record.target);
        let existing = self.probe(path).await?;
        match (&existing, if_match) {
            (Some(entry), _) if entry.is_folder() => {
                return Err(JournalError::Conflict(format!(
                    "{target} is a folder; write to a file path inside it"
                )));
            }
            (None, Some(_)) => {
                return Err(JournalError::Conflict(format!(
                    "{target} does not exist, so if_match cannot hold; write without if_match to create it"
                )));
            }
            (Some(entry), Some(want))
                if !entry.etag.as_ref().is_some_and(|e| e.strong_eq(want)) =>
            {
                return Err(JournalError::Conflict(format!(
                    "{target} has changed: its etag is now {}; read it again before overwriting",
                    entry.etag.as_ref().map_or("unknown", ETag::value)
                )));
            }
            _ => {}
        }
        let id = EventId::new_random();
        let trash = trash_folder(&self.files_base, &project.slug, id);
        let put = Step::Put {
            path: path.clone(),
            sha256: sha256_hex(&content),
            size: content.len() as u64,
            replaces: existing
                .as_ref()
                .and_then(|e| e.etag.as_ref())
                .map(|e| e.value().to_owned()),
        };
        let (plan, undo, kept) = match &existing {
            Some(_) => {
                let kept = kept_path(&trash, 0, path)
                    .map_err(|e| JournalError::Conflict(e.to_string()))?;
                (
                    vec![
                        Step::Copy {
                            from: path.clone(),
                            to: kept.clone(),
                        },
                        put,
                    ],
                    vec![
                        Step::Discard {
                            path: path.clone(),
                            etag: None,
                        },
                        Step::Move {
                            from: kept.clone(),
                            to: path.clone(),
                        },
                    ],
                    Some(kept),
                )
            }
            None => (
                vec![put],
                vec![Step::Discard {
                    path: path.clone(),
                    etag: None,
                }],
                None,
            ),
        };
        let intent = NewEvent {
            plan,
            undo,
            ..Self::intent(record, id, EventOp::NcWrite)
        };
        let event = self.begin(intent).await?;
        self.stop_at(Stage::AfterIntent)?;
        let precondition = match &existing {
            Some(entry) => entry
                .etag
                .clone()
                .map_or(Precondition::None, Precondition::IfMatch),
            None => Precondition::CreateOnly,
        };
        let mut kept_made = false;
        let outcome = async {
            if let Some(kept) = &kept {
                self.ensure_parent(kept).await?;
                self.files.copy_to(path, kept, false).await?;
                kept_made = true;
            } else {
                self.ensure_parent(path).await?;
            }
            self.stop_at(Stage::AfterKeep)?;
            Ok::<_, JournalError>(self.files.write(path, content, &precondition).await?)
        }
        .await;
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(error @ JournalError::Crashed(_)) => return Err(error),
            // The store may have made the change without us hearing back:
            // the event stays pending for the reconciler to judge. Kept
            // copies are never deleted (emptying the trash is an
            // operator's job), so nothing can be lost either way.
            Err(error) if !definite(&error) => return Err(self.unsettled(event.id, error)),
            Err(error) => {
                // Refused: nothing was changed, and no revert will need the
                // copy kept before the write.
                if kept_made {
                    self.discard_trash(&event).await;
                }
                return Err(self.fail(event.id, precondition_as_conflict(error)).await);
            }
        };
        self.stop_at(Stage::AfterUpstream)?;
        let etag = outcome.etag.clone();
        let event = self
            .finish(
                event,
                json!({
                    "created": existing.is_none(),
                    "etag": etag.as_ref().map(ETag::value),
                }),
            )
            .await?;
        Ok(Written {
            event,
            created: existing.is_none(),
            etag,
        })
    }

    /// Deletes `path` by moving it into the trash.
    pub async fn delete(
        &self,
        record: Record<'_>,
        path: &AbsPath,
    ) -> Result<StorageEvent, JournalError> {
        let (project, target) = (record.project, &record.target);
        if self.probe(path).await?.is_none() {
            return Err(JournalError::NotFound(format!("{target} does not exist")));
        }
        let id = EventId::new_random();
        let trash = trash_folder(&self.files_base, &project.slug, id);
        let kept = kept_path(&trash, 0, path).map_err(|e| JournalError::Conflict(e.to_string()))?;
        let plan = vec![Step::Move {
            from: path.clone(),
            to: kept.clone(),
        }];
        let undo = vec![Step::Move {
            from: kept,
            to: path.clone(),
        }];
        let event = NewEvent {
            plan,
            undo,
            ..Self::intent(record, id, EventOp::NcDelete)
        };
        self.run_moves(event).await
    }

    /// Moves `from` to `to`. With `overwrite`, an existing `to` is kept in
    /// the trash first; without, it is a conflict.
    pub async fn move_to(
        &self,
        record: Record<'_>,
        from: &AbsPath,
        to: &AbsPath,
        overwrite: bool,
    ) -> Result<(StorageEvent, bool), JournalError> {
        let (project, target) = (record.project, &record.target);
        if self.probe(from).await?.is_none() {
            return Err(JournalError::NotFound(format!(
                "the source of {target} does not exist"
            )));
        }
        let occupied = self.probe(to).await?.is_some();
        if occupied && !overwrite {
            return Err(JournalError::Conflict(format!(
                "the destination of {target} already exists; pass overwrite: true to replace it (the replaced item is kept and can be restored)"
            )));
        }
        let id = EventId::new_random();
        let (plan, undo) = if occupied {
            let trash = trash_folder(&self.files_base, &project.slug, id);
            let kept =
                kept_path(&trash, 0, to).map_err(|e| JournalError::Conflict(e.to_string()))?;
            (
                vec![
                    Step::Move {
                        from: to.clone(),
                        to: kept.clone(),
                    },
                    Step::Move {
                        from: from.clone(),
                        to: to.clone(),
                    },
                ],
                vec![
                    Step::Move {
                        from: to.clone(),
                        to: from.clone(),
                    },
                    Step::Move {
                        from: kept,
                        to: to.clone(),
                    },
                ],
            )
        } else {
            (
                vec![Step::Move {
                    from: from.clone(),
                    to: to.clone(),
                }],
                vec![Step::Move {
                    from: to.clone(),
                    to: from.clone(),
                }],
            )
        };
        let event = NewEvent {
            plan,
            undo,
            ..Self::intent(record, id, EventOp::NcMove)
        };
        Ok((self.run_moves(event).await?, occupied))
    }

    /// Reverts event `id` of `project` (any project when `None`, for
    /// operators): performs its undo as a new event, which can itself be
    /// reverted.
    pub async fn revert(
        &self,
        actor: &Actor,
        id: EventId,
        project: Option<ProjectId>,
    ) -> Result<StorageEvent, JournalError> {
        let original = match self.store.event(id).await {
            Ok(event) if project.is_none_or(|p| p == event.project_id) => event,
            Ok(_) | Err(StoreError::NotFound { .. }) => {
                return Err(JournalError::NotFound(format!(
                    "storage event {id} not found"
                )));
            }
            Err(error) => return Err(error.into()),
        };
        if original.status != EventStatus::Applied {
            return Err(JournalError::Conflict(format!(
                "event {id} is {}; only applied events can be reverted",
                original.status
            )));
        }
        let revert_id = EventId::new_random();
        let trash = trash_folder(&self.files_base, &original.project, revert_id);
        let (plan, undo) = revert_plan(
            &original.undo,
            &trash,
            chrono::SubsecRound::trunc_subsecs(chrono::Utc::now(), 6),
            actor.user_id.as_ref(),
        )
        .map_err(|e| JournalError::Conflict(e.to_string()))?;
        // A row changed since the event cannot be put back silently.
        if plan.iter().any(Step::is_row) {
            match self
                .store
                .rows_still_match(original.project_id, &plan)
                .await
            {
                Ok(()) => {}
                Err(StoreError::Stale { what, detail }) => {
                    return Err(JournalError::Conflict(format!(
                        "{what} was changed after event {id} ({detail}); revert the later events first"
                    )));
                }
                Err(error) => return Err(error.into()),
            }
        }
        // A discarded file must still be what the event left, so a later
        // change is not swept into the trash unnoticed.
        let expected = original
            .result
            .as_ref()
            .and_then(|r| r.get("etag"))
            .and_then(serde_json::Value::as_str)
            .and_then(ETag::strong);
        // A moved item must still be what the event left there.
        let landed = original
            .result
            .as_ref()
            .and_then(|r| r.get("etags"))
            .and_then(serde_json::Value::as_object);
        for step in &original.undo {
            let Step::Move { from, .. } = step else {
                continue;
            };
            let Some(want) = landed
                .and_then(|l| l.get(&from.to_string()))
                .and_then(serde_json::Value::as_str)
                .and_then(ETag::strong)
            else {
                continue;
            };
            let now = self.probe(from).await?;
            if !now.and_then(|e| e.etag).is_some_and(|e| e.strong_eq(&want)) {
                return Err(JournalError::Conflict(format!(
                    "{} has changed or gone since event {id}; revert the later events first",
                    original.target
                )));
            }
        }
        for step in &original.undo {
            if let Step::Discard { path, etag } = step {
                let want = etag
                    .as_deref()
                    .and_then(ETag::strong)
                    .or_else(|| expected.clone());
                let now = self.probe(path).await?;
                match (now, want) {
                    (None, _) => {
                        return Err(JournalError::Conflict(format!(
                            "{} no longer exists; it was changed after event {id}, revert the later events first",
                            original.target
                        )));
                    }
                    (Some(entry), Some(want))
                        if !entry.etag.as_ref().is_some_and(|e| e.strong_eq(&want)) =>
                    {
                        return Err(JournalError::Conflict(format!(
                            "{} has changed since event {id}; revert the later events first",
                            original.target
                        )));
                    }
                    _ => {}
                }
            }
        }
        let event = NewEvent {
            id: revert_id,
            actor: actor.clone(),
            project_id: original.project_id,
            op: EventOp::Revert,
            target: original.target.clone(),
            params: json!({ "reverts": id, "op": original.op }),
            plan,
            undo,
            reverts: Some(id),
            approval: None,
        };
        if event.plan.iter().any(Step::is_row) {
            return Ok(self.run_change(event, None).await?.event);
        }
        self.run_moves(event).await
    }

    /// Records `event` (a plan of moves), performs the moves in order, and
    /// marks it. A move that fails rolls back the ones before it.
    async fn run_moves(&self, event: NewEvent) -> Result<StorageEvent, JournalError> {
        let moves: Vec<(AbsPath, AbsPath)> = event
            .plan
            .iter()
            .map(|step| match step {
                Step::Move { from, to } => Ok((from.clone(), to.clone())),
                other => Err(JournalError::Conflict(format!(
                    "cannot run a {other:?} step as a move"
                ))),
            })
            .collect::<Result<_, _>>()?;
        let event = self.begin(event).await?;
        self.stop_at(Stage::AfterIntent)?;
        for (index, (from, to)) in moves.iter().enumerate() {
            if index == 1 {
                self.stop_at(Stage::AfterKeep)?;
            }
            let done = async {
                self.ensure_parent(to).await?;
                self.files.move_to(from, to, false).await
            }
            .await;
            if let Err(error) = done {
                let error = JournalError::from(error);
                if !definite(&error) {
                    return Err(self.unsettled(event.id, error));
                }
                let undone = moves.iter().take(index).rev();
                for (from, to) in undone {
                    let back = async {
                        self.ensure_parent(from).await?;
                        self.files.move_to(to, from, false).await
                    };
                    if let Err(rollback) = back.await {
                        tracing::error!(event = %event.id, error = %rollback, "cannot roll back a move; the event is marked failed and the item stays where it is");
                    }
                }
                return Err(self.fail(event.id, precondition_as_conflict(error)).await);
            }
        }
        self.stop_at(Stage::AfterUpstream)?;
        // Where each item landed and its etag there, so a revert can tell
        // whether it was changed since (best effort: a failed stat only
        // leaves the etag out).
        let mut landed = serde_json::Map::new();
        for (_, to) in &moves {
            if let Ok(Some(entry)) = self.probe(to).await
                && let Some(etag) = entry.etag
            {
                landed.insert(to.to_string(), json!(etag.value()));
            }
        }
        self.finish(event, json!({ "etags": landed })).await
    }

    /// Settles every event still `pending` that was recorded at or before
    /// `older_than`, by looking at the file store.
    pub async fn reconcile(&self, older_than: DateTime<Utc>) -> Result<Settled, StoreError> {
        let mut settled = Settled::default();
        for event in self.store.pending_events(older_than).await? {
            match self.settle(&event).await {
                Ok(true) => settled.applied.push(event.id),
                Ok(false) => settled.failed.push(event.id),
                Err(error) => {
                    tracing::warn!(event = %event.id, error = %error, "cannot settle a pending event now; will try again");
                    settled.left.push(event.id);
                }
            }
        }
        if settled != Settled::default() {
            tracing::info!(
                applied = settled.applied.len(),
                failed = settled.failed.len(),
                left = settled.left.len(),
                "pending storage events reconciled"
            );
        }
        Ok(settled)
    }

    /// Whether `path` holds a file of `size` bytes whose SHA-256 is `sha256`.
    async fn holds(&self, path: &AbsPath, sha256: &str, size: u64) -> Result<bool, JournalError> {
        Ok(match self.probe(path).await? {
            Some(entry) if !entry.is_folder() && entry.size == Some(size) => {
                let window = self
                    .files
                    .read(path, ReadRange::new(0, size))
                    .await?
                    .collect(size)
                    .await?;
                sha256_hex(&window.bytes) == sha256
            }
            _ => false,
        })
    }

    /// Decides one pending event; `true` when it turned out applied.
    async fn settle(&self, event: &StorageEvent) -> Result<bool, JournalError> {
        if event.plan.iter().any(Step::is_row) {
            let done = self.settle_change(event).await?;
            return self.mark_settled(event, done).await;
        }
        let put = event.plan.iter().find_map(|step| match step {
            Step::Put {
                path, sha256, size, ..
            } => Some((path, sha256, *size)),
            _ => None,
        });
        let done = if let Some((path, sha256, size)) = put {
            let kept = event.plan.iter().find_map(|s| match s {
                Step::Copy { to, .. } => Some(to),
                _ => None,
            });
            let kept_ok = match kept {
                Some(kept) => self.probe(kept).await?.is_some(),
                None => true,
            };
            let content_ok = self.holds(path, sha256, size).await?;
            // Nothing to roll back: the put is the last step, and a copy in
            // the trash changes nothing the project can see. A copy kept
            // for a write that did not happen goes to the discard area,
            // but only while the original is intact (the file still has
            // the etag the write was to replace): otherwise the copy may
            // be the only one left of what was there.
            let done = kept_ok && content_ok;
            // Only a copy that was made (a crash before it leaves none).
            if kept.is_some() && kept_ok && !content_ok && self.intact(event).await? {
                return match self.discard_trash(event).await {
                    Some(discarded) => self.mark_settled_with(event, false, Some(&discarded)).await,
                    None => self.mark_settled(event, false).await,
                };
            }
            done
        } else {
            // Moves run in order, so the last one found done tells how far
            // the event got. Scan from the end: a later step may have put
            // something back where an earlier one took it from (a move
            // that overwrites), but a step not yet run has touched nothing.
            let mut completed = 0;
            for (index, step) in event.plan.iter().enumerate().rev() {
                let Step::Move { from, to } = step else {
                    continue;
                };
                let gone = self.probe(from).await?.is_none();
                let there = self.probe(to).await?.is_some();
                if gone && there {
                    completed = index + 1;
                    break;
                }
            }
            let all = completed == event.plan.len();
            if !all {
                for step in event.plan.iter().take(completed).rev() {
                    if let Step::Move { from, to } = step {
                        self.ensure_parent(from).await?;
                        self.files.move_to(to, from, false).await?;
                    }
                }
            }
            all
        };
        self.mark_settled(event, done).await
    }

    /// Marks a pending event as the reconciler found it.
    async fn mark_settled(&self, event: &StorageEvent, done: bool) -> Result<bool, JournalError> {
        self.mark_settled_with(event, done, None).await
    }

    /// Whether the file an overwrite was to replace is still what it
    /// replaced (the etag the event recorded).
    async fn intact(&self, event: &StorageEvent) -> Result<bool, JournalError> {
        let Some((path, Some(replaces))) = event.plan.iter().find_map(|step| match step {
            Step::Put { path, replaces, .. } => Some((path, replaces.as_deref())),
            _ => None,
        }) else {
            return Ok(false);
        };
        Ok(self.probe(path).await?.is_some_and(|entry| {
            !entry.is_folder()
                && entry
                    .etag
                    .as_ref()
                    .is_some_and(|etag| ETag::parse(replaces).is_some_and(|r| etag.strong_eq(&r)))
        }))
    }

    /// Moves the trash of `event`, which changed nothing, into the discard
    /// area; where it went, or `None` (logged) when it could not be moved
    /// (it then stays where it was: nothing is ever deleted).
    async fn discard_trash(&self, event: &StorageEvent) -> Option<AbsPath> {
        let trash = trash_folder(&self.files_base, &event.project, event.id);
        let discarded = discard_folder(
            &self.files_base,
            &event.project,
            self.store.now().date_naive(),
            event.id,
        );
        let moved = async {
            self.ensure_parent(&discarded).await?;
            self.files.move_to(&trash, &discarded, false).await
        }
        .await;
        match moved {
            Ok(()) => {
                tracing::info!(event = %event.id, to = %discarded, "the copy kept for a write that changed nothing was discarded");
                Some(discarded)
            }
            Err(error) => {
                tracing::warn!(event = %event.id, %error, "cannot discard the copy kept for a write that changed nothing; it stays in the trash");
                None
            }
        }
    }

    /// [`Journal::mark_settled`], saying where a discarded copy went.
    async fn mark_settled_with(
        &self,
        event: &StorageEvent,
        done: bool,
        discarded: Option<&AbsPath>,
    ) -> Result<bool, JournalError> {
        if done {
            self.store
                .mark_applied(event.id, Some(&json!({ "settled_by": "reconciler" })))
                .await?;
            tracing::info!(event = %event.id, op = %event.op, "pending event found done: applied");
        } else {
            let reason = match discarded {
                None => "interrupted before the change was made; nothing was changed (settled at start-up)".to_owned(),
                Some(to) => format!(
                    "interrupted before the change was made; nothing was changed (settled at start-up); the copy kept before the write is not needed by any revert and was moved to the discard area, {to}"
                ),
            };
            self.store.mark_failed(event.id, &reason).await?;
            tracing::info!(event = %event.id, op = %event.op, "pending event found not done: failed");
        }
        Ok(done)
    }
}

/// A failed precondition upstream is a conflict for the caller.
fn precondition_as_conflict(error: JournalError) -> JournalError {
    match error {
        // In our words: the store's message names absolute paths.
        JournalError::Source(SourceError::PreconditionFailed(_)) => JournalError::Conflict(
            "the target changed or appeared meanwhile; read it again and retry".to_owned(),
        ),
        other => other,
    }
}

/// True when the file store surely did not make the change: it refused
/// (4xx, a failed precondition, a conflict). A timeout, a broken
/// connection, a 5xx or an unreadable answer may hide a change that
/// happened.
fn definite(error: &JournalError) -> bool {
    match error {
        JournalError::Source(SourceError::Timeout(_) | SourceError::InvalidResponse { .. }) => {
            false
        }
        JournalError::Source(SourceError::Upstream { status, .. }) => {
            status.is_some_and(|s| (400..500).contains(&s))
        }
        _ => true,
    }
}
