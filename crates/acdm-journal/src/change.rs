//! Business writes (spec §6.2, §6.4): one event whose plan moves files
//! into the trash, creates at most one file, and then changes rows.
//!
//! The step model is the same as for file writes, with row changes as one
//! more kind of step ([`Step::Row`]), always after the file steps. The file
//! steps run first, in order; then every row change is applied in one
//! database transaction **together with** marking the event applied. So:
//!
//! - a crash before that transaction leaves the event pending with no row
//!   changed; the reconciler rolls the file steps back and marks it failed;
//! - a crash after it leaves the event applied with everything done;
//! - a row that changed since the plan was made fails the event as a
//!   conflict, after rolling the file steps back.
//!
//! Either no change or the whole change, and always exactly one event.

use acdm_core::AbsPath;
use acdm_core::business::RowImage;
use acdm_core::events::{
    EventId, EventOp, NewEvent, Step, StorageEvent, kept_path, rows_undo, trash_folder,
};
use acdm_sources::{ETag, Precondition};
use acdm_store::StoreError;
use bytes::Bytes;
use serde_json::json;

use crate::{Journal, JournalError, Record, Stage, definite, sha256_hex};

/// A business write, as the BFF or the operator API asks for it.
#[derive(Debug, Clone)]
pub struct Change {
    /// What kind of write (recorded as the event's op).
    pub op: EventOp,
    /// Files to remove: each is moved into the event's trash (kept, so a
    /// revert puts it back byte for byte). Only files that exist.
    pub remove: Vec<AbsPath>,
    /// A file to create (it must not exist), with its content.
    pub create: Option<(AbsPath, Bytes)>,
    /// Row changes, in order: `(before, after)`, `None` meaning absent.
    pub rows: Vec<(Option<RowImage>, Option<RowImage>)>,
}

/// The outcome of a business write.
#[derive(Debug, Clone)]
pub struct Changed {
    /// The event (applied, or pending when it could not be marked).
    pub event: StorageEvent,
    /// The created file's etag, when the store reports one.
    pub etag: Option<ETag>,
}

impl Journal {
    /// Records `change` as one event and carries it out: files first, then
    /// the rows with the event's mark, in one transaction.
    pub async fn change(
        &self,
        record: Record<'_>,
        change: Change,
    ) -> Result<Changed, JournalError> {
        let id = EventId::new_random();
        let trash = trash_folder(&self.files_base, &record.project.slug, id);
        let mut plan = Vec::new();
        let mut undo = Vec::new();
        for (index, path) in change.remove.iter().enumerate() {
            let kept = kept_path(&trash, index, path)
                .map_err(|e| JournalError::Conflict(e.to_string()))?;
            plan.push(Step::Move {
                from: path.clone(),
                to: kept.clone(),
            });
            undo.insert(
                0,
                Step::Move {
                    from: kept,
                    to: path.clone(),
                },
            );
        }
        let mut content = None;
        if let Some((path, bytes)) = change.create {
            if self.probe(&path).await?.is_some() {
                return Err(JournalError::Conflict(format!(
                    "{} already exists; choose another name",
                    record.target
                )));
            }
            plan.push(Step::Put {
                path: path.clone(),
                sha256: sha256_hex(&bytes),
                size: bytes.len() as u64,
                replaces: None,
            });
            undo.insert(0, Step::Discard { path, etag: None });
            content = Some(bytes);
        }
        for (before, after) in change.rows {
            plan.push(Step::Row {
                before: before.map(Box::new),
                after: after.map(Box::new),
            });
        }
        undo.extend(rows_undo(&plan));
        let intent = NewEvent {
            plan,
            undo,
            ..Self::intent(record, id, change.op)
        };
        self.run_change(intent, content).await
    }

    /// Records `event` and performs its plan: file steps in order (a
    /// refused one rolls back those before it), then the rows and the
    /// event's mark in one transaction.
    pub(crate) async fn run_change(
        &self,
        event: NewEvent,
        content: Option<Bytes>,
    ) -> Result<Changed, JournalError> {
        let project = event.project_id;
        let mut rows: Vec<Step> = event.plan.iter().filter(|s| s.is_row()).cloned().collect();
        let files: Vec<Step> = event.plan.iter().filter(|s| !s.is_row()).cloned().collect();
        let event = self.begin(event).await?;
        let trash = trash_folder(&self.files_base, &event.project, event.id);
        self.stop_at(Stage::AfterIntent)?;
        let mut done: Vec<&Step> = Vec::new();
        let mut etag: Option<ETag> = None;
        for (index, step) in files.iter().enumerate() {
            if index == 1 {
                self.stop_at(Stage::AfterKeep)?;
            }
            let outcome = async {
                match step {
                    Step::Move { from, to } => {
                        self.ensure_parent(to).await?;
                        self.files.move_to(from, to, false).await?;
                    }
                    Step::Copy { from, to } => {
                        self.ensure_parent(to).await?;
                        self.files.copy_to(from, to, false).await?;
                    }
                    Step::Put { path, .. } => {
                        let Some(bytes) = content.clone() else {
                            return Err(JournalError::Conflict(
                                "a file step has no content to write".to_owned(),
                            ));
                        };
                        self.ensure_parent(path).await?;
                        let written = self
                            .files
                            .write(path, bytes, &Precondition::CreateOnly)
                            .await?;
                        etag = written.etag;
                    }
                    other => {
                        return Err(JournalError::Conflict(format!(
                            "cannot run a {other:?} step in a business write"
                        )));
                    }
                }
                Ok(())
            }
            .await;
            match outcome {
                Ok(()) => done.push(step),
                Err(error @ JournalError::Crashed(_)) => return Err(error),
                Err(error) if !definite(&error) => return Err(self.unsettled(event.id, error)),
                Err(error) => {
                    self.roll_back(event.id, &done, &trash).await;
                    return Err(self
                        .fail(event.id, crate::precondition_as_conflict(error))
                        .await);
                }
            }
        }
        self.stop_at(Stage::AfterUpstream)?;
        // The created file's etag is only known now: its row records it.
        if let Some(tag) = &etag {
            for step in &mut rows {
                if let Step::Row {
                    after: Some(after), ..
                } = step
                    && let RowImage::MeetingFile(file) = after.as_mut()
                    && file.etag.is_none()
                {
                    file.etag = Some(tag.value().to_owned());
                }
            }
        }
        let mut landed = serde_json::Map::new();
        for step in &done {
            if let Step::Move { to, .. } = step
                && let Ok(Some(entry)) = self.probe(to).await
                && let Some(tag) = entry.etag
            {
                landed.insert(to.to_string(), json!(tag.value()));
            }
        }
        let result = json!({
            "etag": etag.as_ref().map(ETag::value),
            "etags": landed,
        });
        match self
            .store
            .apply_rows(event.id, project, &rows, Some(&result))
            .await
        {
            Ok(applied) => {
                tracing::info!(event = %applied.id, op = %applied.op, "storage event applied");
                Ok(Changed {
                    event: applied,
                    etag,
                })
            }
            Err(StoreError::Stale { what, detail }) => {
                self.roll_back(event.id, &done, &trash).await;
                Err(self
                    .fail(
                        event.id,
                        JournalError::Conflict(format!(
                            "{what} changed meanwhile ({detail}); read it again and retry"
                        )),
                    )
                    .await)
            }
            // The transaction may or may not have committed: the event
            // says which (applied, or still pending for the reconciler,
            // which rolls the files back).
            Err(error) => Err(self.unsettled(event.id, error.into())),
        }
    }

    /// Undoes the file steps `done` of event `id`, last first (best
    /// effort: what cannot be undone is logged, the event is failed).
    async fn roll_back(&self, id: EventId, done: &[&Step], trash: &AbsPath) {
        for (index, step) in done.iter().enumerate().rev() {
            let back = async {
                match step {
                    Step::Move { from, to } => {
                        self.ensure_parent(from).await?;
                        self.files.move_to(to, from, false).await?;
                    }
                    Step::Put { path, .. } => {
                        let kept = kept_path(trash, 1000 + index, path)
                            .map_err(|e| JournalError::Conflict(e.to_string()))?;
                        self.ensure_parent(&kept).await?;
                        self.files.move_to(path, &kept, false).await?;
                    }
                    _ => {}
                }
                Ok::<_, JournalError>(())
            };
            if let Err(error) = back.await {
                tracing::error!(event = %id, error = %error, "cannot roll back a file step; the event is marked failed and the item stays where it is");
            }
        }
    }

    /// Settles a pending business write: its rows were not applied (they
    /// commit with the event's mark), so every file step found done is
    /// rolled back and the event is failed.
    pub(crate) async fn settle_change(&self, event: &StorageEvent) -> Result<bool, JournalError> {
        let trash = trash_folder(&self.files_base, &event.project, event.id);
        for (index, step) in event.plan.iter().enumerate().rev() {
            match step {
                Step::Move { from, to } => {
                    let gone = self.probe(from).await?.is_none();
                    let there = self.probe(to).await?.is_some();
                    if gone && there {
                        self.ensure_parent(from).await?;
                        self.files.move_to(to, from, false).await?;
                    }
                }
                Step::Put {
                    path, sha256, size, ..
                } if self.holds(path, sha256, *size).await? => {
                    let kept = kept_path(&trash, 1000 + index, path)
                        .map_err(|e| JournalError::Conflict(e.to_string()))?;
                    self.ensure_parent(&kept).await?;
                    self.files.move_to(path, &kept, false).await?;
                }
                _ => {}
            }
        }
        Ok(false)
    }
}
