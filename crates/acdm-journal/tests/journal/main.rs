//! Crash consistency of the storage journal: every write is stopped by a
//! failpoint at each stage (after the intent, after keeping what it
//! replaces, after the upstream change), as if the process had died there;
//! then the reconciler runs. Afterwards nothing is pending, the files are
//! either exactly as before (event `failed`) or exactly as intended (event
//! `applied`, one per change), and reverting an applied event restores
//! byte-identical content, location or absence.
//!
//! Runs on the embedded SQLite database and the local file store (the
//! WebDAV store passes the same contract suite in acdm-sources).

#![expect(clippy::unwrap_used, reason = "tests fail loudly")]

mod business;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use acdm_core::domain::ProjectRef;
use acdm_core::events::{Actor, ActorKind, EventOp, EventStatus, StorageEvent};
use acdm_core::{AbsPath, AgentName, Identity, ProjectName, ProjectSlug, ThreadId, UserId};
use acdm_journal::{Journal, JournalError, Record, Stage};
use acdm_sources::local::LocalFileStore;
use acdm_sources::{ETag, FileWriter};
use acdm_store::{DatabaseConfig, DatabaseTarget, EventFilter, Store};
use bytes::Bytes;

/// One journal over a temporary SQLite file and folder, with a failpoint
/// that can be armed for one stage.
struct World {
    journal: Journal,
    store: Store,
    project: ProjectRef,
    disk: PathBuf,
    armed: Arc<Mutex<Option<Stage>>>,
    _dir: tempfile::TempDir,
    _dav: Option<acdm_test_support::Wsgidav>,
}

/// Which file store a world's journal writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Files {
    /// The local folder store.
    Local,
    /// A real WebDAV server (wsgidav) through the Nextcloud file store.
    WebDav,
}

fn abs(path: &str) -> AbsPath {
    AbsPath::parse(path).unwrap()
}

/// What an agent's change records: the agent of [`agent`], no parameters.
fn by_agent<'a>(project: &'a ProjectRef, target: &str) -> Record<'a> {
    static AGENT: std::sync::LazyLock<Actor> = std::sync::LazyLock::new(agent);
    Record {
        actor: &AGENT,
        project,
        target: target.to_owned(),
        params: serde_json::json!({}),
        approval: None,
    }
}

/// The Nextcloud file store over a wsgidav server.
fn webdav(server: &acdm_test_support::Wsgidav) -> acdm_sources::nextcloud::NextcloudFiles {
    let http = acdm_sources::http::HttpClient::new(acdm_sources::http::HttpSettings {
        connect_timeout: std::time::Duration::from_secs(2),
        read_timeout: std::time::Duration::from_secs(10),
        timeout: std::time::Duration::from_secs(20),
        retries: 1,
        backoff: std::time::Duration::from_millis(50),
        max_retry_after: std::time::Duration::from_secs(2),
        user_agent: "acdm-journal-tests".to_owned(),
        ..acdm_sources::http::HttpSettings::default()
    })
    .unwrap();
    let config = acdm_sources::nextcloud::NextcloudConfig {
        url: url::Url::parse(&server.url()).unwrap(),
        user: acdm_test_support::DAV_USER.to_owned(),
        app_password: Some(secrecy::SecretString::from(
            acdm_test_support::DAV_PASSWORD.to_owned(),
        )),
    };
    acdm_sources::nextcloud::NextcloudFiles::new(config, http).unwrap()
}

fn agent() -> Actor {
    Actor::via_agent(&Identity::new(
        UserId::parse("u-1").unwrap(),
        AgentName::parse("project-alpha").unwrap(),
        ThreadId::parse("t-1").unwrap(),
    ))
}

impl World {
    async fn new() -> Self {
        Self::on(Files::Local)
            .await
            .unwrap_or_else(|| unreachable!("the local store is always there"))
    }

    /// A world over `files`; `None` when that is WebDAV and wsgidav is not
    /// installed (and not required: `ACDM_REQUIRE_WEBDAV=1` makes its
    /// absence a failure).
    async fn on(files: Files) -> Option<Self> {
        let dav = match files {
            Files::Local => None,
            Files::WebDav => Some(acdm_test_support::Wsgidav::start().await?),
        };
        let dir = tempfile::tempdir().unwrap();
        let config = DatabaseConfig::new(DatabaseTarget::Sqlite {
            path: dir.path().join("acdm.sqlite3"),
        });
        let store = Store::connect(&config).await.unwrap();
        store.migrate().await.unwrap();
        let base = abs("/Projects");
        let details = store
            .create_project(
                &ProjectSlug::parse("alpha").unwrap(),
                &ProjectName::parse("Alpha").unwrap(),
                &base,
            )
            .await
            .unwrap();
        let disk = match &dav {
            Some(server) => server.root.clone(),
            None => dir.path().join("files"),
        };
        std::fs::create_dir_all(disk.join("Projects/Alpha/docs")).unwrap();
        std::fs::write(disk.join("Projects/Alpha/docs/plan.md"), b"plan v1\n").unwrap();
        std::fs::write(disk.join("Projects/Alpha/docs/budget.csv"), b"a,b\n1,2\n").unwrap();
        std::fs::write(disk.join("Projects/Alpha/notes.md"), "notes é\n").unwrap();
        let files: Arc<dyn FileWriter> = match &dav {
            Some(server) => Arc::new(webdav(server)),
            None => Arc::new(LocalFileStore::open(&disk).unwrap()),
        };
        let armed: Arc<Mutex<Option<Stage>>> = Arc::default();
        let hook = armed.clone();
        let journal =
            Journal::new(store.clone(), files, base).with_failpoint(Arc::new(move |stage| {
                let mut armed = hook.lock().unwrap();
                if *armed == Some(stage) {
                    *armed = None;
                    true
                } else {
                    false
                }
            }));
        Some(Self {
            journal,
            store,
            project: details.project.to_ref(),
            disk,
            armed,
            _dir: dir,
            _dav: dav,
        })
    }

    /// Every file and folder of the project, with file contents.
    fn snapshot(&self) -> BTreeMap<String, Option<Vec<u8>>> {
        fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                let key = path.strip_prefix(root).unwrap().display().to_string();
                if path.is_dir() {
                    out.insert(format!("{key}/"), None);
                    walk(root, &path, out);
                } else {
                    out.insert(key, Some(std::fs::read(&path).unwrap()));
                }
            }
        }
        let mut out = BTreeMap::new();
        let root = self.disk.join("Projects/Alpha");
        walk(&root, &root, &mut out);
        out
    }

    async fn events(&self) -> Vec<StorageEvent> {
        self.store
            .list_events(&EventFilter {
                limit: 500,
                ..EventFilter::default()
            })
            .await
            .unwrap()
    }

    fn arm(&self, stage: Option<Stage>) {
        *self.armed.lock().unwrap() = stage;
    }
}

/// The operations under test, each as the agent would make it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    WriteNew,
    Overwrite,
    Delete,
    DeleteFolder,
    Move,
    MoveOverwrite,
}

const OPS: [Op; 6] = [
    Op::WriteNew,
    Op::Overwrite,
    Op::Delete,
    Op::DeleteFolder,
    Op::Move,
    Op::MoveOverwrite,
];

async fn perform(world: &World, op: Op) -> Result<StorageEvent, JournalError> {
    perform_with(world, op, None).await
}

/// [`perform`], the change recorded under `approval`.
async fn perform_with(
    world: &World,
    op: Op,
    approval: Option<&acdm_journal::Approved>,
) -> Result<StorageEvent, JournalError> {
    let j = &world.journal;
    let p = &world.project;
    let by_agent = |p, target| Record {
        approval: approval.cloned(),
        ..by_agent(p, target)
    };
    let work = async {
        match op {
            Op::WriteNew => j
                .write(
                    by_agent(p, "project:/new/deep/file.md"),
                    &abs("/Projects/Alpha/new/deep/file.md"),
                    Bytes::from_static(b"fresh"),
                    None,
                )
                .await
                .map(|w| w.event),
            Op::Overwrite => j
                .write(
                    by_agent(p, "project:/notes.md"),
                    &abs("/Projects/Alpha/notes.md"),
                    Bytes::from_static(b"rewritten\n"),
                    None,
                )
                .await
                .map(|w| w.event),
            Op::Delete => {
                j.delete(
                    by_agent(p, "project:/notes.md"),
                    &abs("/Projects/Alpha/notes.md"),
                )
                .await
            }
            Op::DeleteFolder => {
                j.delete(by_agent(p, "project:/docs"), &abs("/Projects/Alpha/docs"))
                    .await
            }
            Op::Move => j
                .move_to(
                    by_agent(p, "project:/notes.md -> /archive/notes.md"),
                    &abs("/Projects/Alpha/notes.md"),
                    &abs("/Projects/Alpha/archive/notes.md"),
                    false,
                )
                .await
                .map(|(e, _)| e),
            Op::MoveOverwrite => j
                .move_to(
                    by_agent(p, "project:/notes.md -> /docs/plan.md"),
                    &abs("/Projects/Alpha/notes.md"),
                    &abs("/Projects/Alpha/docs/plan.md"),
                    true,
                )
                .await
                .map(|(e, _)| e),
        }
    };
    work.await
}

/// Folders the op may create and leave behind even when it fails
/// (parents are created before the change and are not part of it).
fn without_new_folders(
    mut snapshot: BTreeMap<String, Option<Vec<u8>>>,
    before: &BTreeMap<String, Option<Vec<u8>>>,
) -> BTreeMap<String, Option<Vec<u8>>> {
    snapshot.retain(|k, v| v.is_some() || before.contains_key(k) || !k.ends_with('/'));
    snapshot
}

#[tokio::test]
async fn a_crash_at_any_stage_leaves_one_settled_event_and_a_revertible_state() {
    for op in OPS {
        for stage in [
            None,
            Some(Stage::AfterIntent),
            Some(Stage::AfterKeep),
            Some(Stage::AfterUpstream),
        ] {
            let world = World::new().await;
            let before = world.snapshot();
            world.arm(stage);
            let outcome = perform(&world, op).await;
            let crashed = matches!(outcome, Err(JournalError::Crashed(_)));
            if !crashed {
                let event = outcome.unwrap_or_else(|e| panic!("{op:?} at {stage:?}: {e}"));
                assert_eq!(event.status, EventStatus::Applied, "{op:?} at {stage:?}");
            }
            let pending = world.events().await;
            assert_eq!(
                pending.len(),
                1,
                "{op:?} at {stage:?}: one event per change"
            );
            if crashed {
                assert_eq!(
                    pending[0].status,
                    EventStatus::Pending,
                    "{op:?} at {stage:?}"
                );
            }
            let settled = world.journal.reconcile(chrono::Utc::now()).await.unwrap();
            assert!(settled.left.is_empty(), "{op:?} at {stage:?}: {settled:?}");

            let events = world.events().await;
            assert_eq!(events.len(), 1, "{op:?} at {stage:?}: still one event");
            let event = &events[0];
            assert_ne!(event.status, EventStatus::Pending, "{op:?} at {stage:?}");
            assert_eq!(event.actor.kind, ActorKind::ViaAgent);
            assert_eq!(event.actor.thread_id.as_ref().unwrap().as_str(), "t-1");
            let after = without_new_folders(world.snapshot(), &before);
            match event.status {
                EventStatus::Failed => {
                    assert_eq!(
                        after, before,
                        "{op:?} at {stage:?}: a failed event changed files"
                    );
                    // A crash after the upstream change is never "failed".
                    assert_ne!(stage, Some(Stage::AfterUpstream), "{op:?}");
                }
                EventStatus::Applied => {
                    assert_ne!(
                        after, before,
                        "{op:?} at {stage:?}: applied but nothing changed"
                    );
                    assert!(
                        !matches!(stage, Some(Stage::AfterIntent)),
                        "{op:?}: applied although stopped right after the intent"
                    );
                    // Revert: byte-identical content, location or absence.
                    let revert = world
                        .journal
                        .revert(
                            &Actor::direct(UserId::parse("op-1").unwrap()),
                            event.id,
                            None,
                        )
                        .await
                        .unwrap_or_else(|e| panic!("{op:?} at {stage:?}: revert: {e}"));
                    assert_eq!(revert.status, EventStatus::Applied);
                    assert_eq!(revert.op, EventOp::Revert);
                    assert_eq!(revert.reverts, Some(event.id));
                    let restored = without_new_folders(world.snapshot(), &before);
                    assert_eq!(restored, before, "{op:?} at {stage:?}: revert is not exact");
                    let original = world.store.event(event.id).await.unwrap();
                    assert_eq!(original.status, EventStatus::Reverted);
                    assert_eq!(original.reverted_by, Some(revert.id));
                }
                other => panic!("{op:?} at {stage:?}: {other}"),
            }
        }
    }
}

/// An approved request for `op` in `world`'s project, as a person would
/// have decided it (the journal only records and claims it).
async fn approved(world: &World, op: Op) -> acdm_journal::Approved {
    use acdm_core::approval::{ApprovalRequest, ApprovalTtl, WriteOp};
    let nc_op = match op {
        Op::WriteNew | Op::Overwrite => acdm_core::nc::NcOp::Write,
        Op::Delete | Op::DeleteFolder => acdm_core::nc::NcOp::Delete,
        Op::Move | Op::MoveOverwrite => acdm_core::nc::NcOp::Move,
    };
    let request = ApprovalRequest {
        project: ProjectSlug::parse("alpha").unwrap(),
        op: WriteOp::Nc(nc_op),
        arguments: serde_json::json!({ "op": format!("{op:?}") }),
        requested_by: UserId::parse("u-1").unwrap(),
        agent: AgentName::parse("project-alpha").unwrap(),
        thread: ThreadId::parse("t-1").unwrap(),
        preview: serde_json::json!({}),
    };
    let asked = world
        .store
        .create_approval(world.project.id, &request, ApprovalTtl::DEFAULT, None)
        .await
        .unwrap();
    let by = UserId::parse("u-owner").unwrap();
    world
        .store
        .decide_approval(asked.approval_id, true, &by, None)
        .await
        .unwrap();
    acdm_journal::Approved {
        id: asked.approval_id,
        by,
    }
}

#[tokio::test]
async fn a_crash_at_any_stage_of_an_approved_write_neither_loses_nor_doubles_it() {
    use acdm_core::approval::ApprovalStatus;
    for op in OPS {
        for stage in [
            None,
            Some(Stage::AfterIntent),
            Some(Stage::AfterKeep),
            Some(Stage::AfterUpstream),
        ] {
            let world = World::new().await;
            let before = world.snapshot();
            let approval = approved(&world, op).await;
            world.arm(stage);
            let outcome = perform_with(&world, op, Some(&approval)).await;
            world.journal.reconcile(chrono::Utc::now()).await.unwrap();
            let events = world.events().await;
            assert_eq!(events.len(), 1, "{op:?} at {stage:?}: one event");
            let event = &events[0];
            let stored = world.store.approval(approval.id).await.unwrap();
            match event.status {
                EventStatus::Applied => {
                    assert_ne!(
                        without_new_folders(world.snapshot(), &before),
                        before,
                        "{op:?} at {stage:?}: applied but nothing changed"
                    );
                    assert_ne!(stage, Some(Stage::AfterIntent), "{op:?}");
                    // Written once: the approval is spent on this event,
                    // which records who approved it.
                    assert_eq!(stored.status, ApprovalStatus::Used, "{op:?} at {stage:?}");
                    assert_eq!(stored.event_id, Some(event.id), "{op:?} at {stage:?}");
                    assert_eq!(
                        event.params["approval"]["approval_id"],
                        approval.id.to_string(),
                        "{op:?} at {stage:?}: {}",
                        event.params
                    );
                    assert_eq!(event.params["approval"]["approved_by"], "u-owner");
                    // Another change under the same approval (one the file
                    // store would let through) is refused by the claim,
                    // and changes nothing.
                    let applied = world.snapshot();
                    let again = perform_with(&world, Op::WriteNew, Some(&approval)).await;
                    assert_eq!(world.snapshot(), applied, "{op:?} at {stage:?}");
                    let error = again.expect_err("a second use must be refused");
                    assert_eq!(
                        error.code(),
                        acdm_core::ErrorCode::ApprovalUsed,
                        "{op:?} at {stage:?}: {error}"
                    );
                    assert_eq!(world.events().await.len(), 1, "{op:?} at {stage:?}");
                }
                EventStatus::Failed => {
                    // A crash after the upstream change is never "failed".
                    assert_ne!(stage, Some(Stage::AfterUpstream), "{op:?}");
                    // Nothing written: the approval is not lost, and its
                    // retry writes once.
                    assert!(
                        matches!(outcome, Err(JournalError::Crashed(_))),
                        "{op:?} at {stage:?}"
                    );
                    assert_eq!(
                        without_new_folders(world.snapshot(), &before),
                        before,
                        "{op:?} at {stage:?}"
                    );
                    assert_eq!(
                        stored.status,
                        ApprovalStatus::Approved,
                        "{op:?} at {stage:?}: a write that did not happen spent its approval"
                    );
                    assert_eq!(stored.event_id, None, "{op:?} at {stage:?}");
                    let retried = perform_with(&world, op, Some(&approval))
                        .await
                        .unwrap_or_else(|e| panic!("{op:?} at {stage:?}: retry: {e}"));
                    assert_eq!(retried.status, EventStatus::Applied);
                    let stored = world.store.approval(approval.id).await.unwrap();
                    assert_eq!(stored.status, ApprovalStatus::Used);
                    assert_eq!(stored.event_id, Some(retried.id));
                    let third = perform_with(&world, Op::WriteNew, Some(&approval)).await;
                    assert_eq!(
                        third.map(|e| e.id).map_err(|e| e.code()),
                        Err(acdm_core::ErrorCode::ApprovalUsed),
                        "{op:?} at {stage:?}"
                    );
                }
                other => panic!("{op:?} at {stage:?}: {other}"),
            }
        }
    }
}

#[tokio::test]
async fn a_crash_during_a_revert_is_settled_too_and_the_revert_can_be_retried() {
    for stage in [Stage::AfterIntent, Stage::AfterKeep, Stage::AfterUpstream] {
        let world = World::new().await;
        let before = world.snapshot();
        let event = perform(&world, Op::Overwrite).await.unwrap();
        let changed = world.snapshot();
        world.arm(Some(stage));
        let crashed = world
            .journal
            .revert(
                &Actor::direct(UserId::parse("op-1").unwrap()),
                event.id,
                None,
            )
            .await;
        assert!(
            matches!(crashed, Err(JournalError::Crashed(_))),
            "{stage:?}"
        );
        world.journal.reconcile(chrono::Utc::now()).await.unwrap();
        let events = world.events().await;
        assert!(
            events.iter().all(|e| e.status != EventStatus::Pending),
            "{stage:?}"
        );
        let revert = events.iter().find(|e| e.op == EventOp::Revert).unwrap();
        let original = world.store.event(event.id).await.unwrap();
        match revert.status {
            EventStatus::Applied => {
                assert_eq!(world.snapshot(), before, "{stage:?}");
                assert_eq!(original.status, EventStatus::Reverted);
            }
            EventStatus::Failed => {
                assert_eq!(
                    world.snapshot(),
                    changed,
                    "{stage:?}: a failed revert moved files"
                );
                assert_eq!(original.status, EventStatus::Applied);
                assert_eq!(
                    original.reverted_by, None,
                    "{stage:?}: the claim must be released"
                );
                // And it can be reverted for real now.
                world
                    .journal
                    .revert(
                        &Actor::direct(UserId::parse("op-1").unwrap()),
                        event.id,
                        None,
                    )
                    .await
                    .unwrap();
                assert_eq!(world.snapshot(), before, "{stage:?}");
            }
            other => panic!("{stage:?}: {other}"),
        }
    }
}

#[tokio::test]
async fn a_revert_of_a_revert_reapplies_and_later_changes_block_a_revert() {
    let world = World::new().await;
    let direct = || Actor::direct(UserId::parse("op-1").unwrap());
    let before = world.snapshot();
    let event = perform(&world, Op::Overwrite).await.unwrap();
    let changed = world.snapshot();
    let revert = world
        .journal
        .revert(&direct(), event.id, None)
        .await
        .unwrap();
    assert_eq!(world.snapshot(), before);
    world
        .journal
        .revert(&direct(), revert.id, None)
        .await
        .unwrap();
    assert_eq!(
        world.snapshot(),
        changed,
        "reverting the revert re-applies the write"
    );

    // A later write to the same file: the first write cannot be reverted
    // over it (it would sweep the later content away unnoticed).
    let world = World::new().await;
    let first = perform(&world, Op::Overwrite).await.unwrap();
    world
        .journal
        .write(
            by_agent(&world.project, "project:/notes.md"),
            &abs("/Projects/Alpha/notes.md"),
            Bytes::from_static(b"later edit"),
            None,
        )
        .await
        .unwrap();
    let refused = world.journal.revert(&direct(), first.id, None).await;
    assert!(
        matches!(refused, Err(JournalError::Conflict(_))),
        "{refused:?}"
    );
    assert_eq!(
        std::fs::read(world.disk.join("Projects/Alpha/notes.md")).unwrap(),
        b"later edit"
    );
    // The same for a move: the moved file was overwritten afterwards, so
    // moving it back would carry the later content away unnoticed.
    let world = World::new().await;
    let moved = perform(&world, Op::Move).await.unwrap();
    world
        .journal
        .write(
            by_agent(&world.project, "project:/archive/notes.md"),
            &abs("/Projects/Alpha/archive/notes.md"),
            Bytes::from_static(b"edited after the move, with more bytes"),
            None,
        )
        .await
        .unwrap();
    let refused = world.journal.revert(&direct(), moved.id, None).await;
    assert!(
        matches!(refused, Err(JournalError::Conflict(_))),
        "{refused:?}"
    );
    assert!(world.disk.join("Projects/Alpha/archive/notes.md").exists());

    // A second revert of the same event is a conflict, not a second undo.
    let world = World::new().await;
    let event = perform(&world, Op::Delete).await.unwrap();
    world
        .journal
        .revert(&direct(), event.id, None)
        .await
        .unwrap();
    let again = world.journal.revert(&direct(), event.id, None).await;
    assert!(matches!(again, Err(JournalError::Conflict(_))), "{again:?}");
}

#[tokio::test]
async fn refused_writes_record_nothing_and_change_nothing() {
    let world = World::new().await;
    let before = world.snapshot();
    // A stale etag: refused before any intent is recorded.
    let stale = ETag::strong("not-the-etag").unwrap();
    let refused = world
        .journal
        .write(
            by_agent(&world.project, "project:/notes.md"),
            &abs("/Projects/Alpha/notes.md"),
            Bytes::from_static(b"x"),
            Some(&stale),
        )
        .await;
    assert!(
        matches!(refused, Err(JournalError::Conflict(_))),
        "{refused:?}"
    );
    // Moving onto an existing file without overwrite.
    let refused = world
        .journal
        .move_to(
            by_agent(&world.project, "t"),
            &abs("/Projects/Alpha/notes.md"),
            &abs("/Projects/Alpha/docs/plan.md"),
            false,
        )
        .await;
    assert!(
        matches!(refused, Err(JournalError::Conflict(_))),
        "{refused:?}"
    );
    assert!(world.events().await.is_empty());
    assert_eq!(world.snapshot(), before);
}

#[tokio::test]
async fn the_trash_keeps_what_is_replaced_outside_the_project_folder() {
    let world = World::new().await;
    let event = perform(&world, Op::Overwrite).await.unwrap();
    let trash = world.disk.join(format!(
        "Projects/.acdm-trash/alpha/{}/0/notes.md",
        event.id
    ));
    assert_eq!(std::fs::read(&trash).unwrap(), "notes é\n".as_bytes());
    assert_eq!(
        std::fs::read(world.disk.join("Projects/Alpha/notes.md")).unwrap(),
        b"rewritten\n"
    );
}

/// The folders under `discarded/` (one per day) holding `event`'s trash.
fn discarded(world: &World, event: &str) -> Vec<std::path::PathBuf> {
    let area = world.disk.join("Projects/.acdm-trash/alpha/discarded");
    let Ok(days) = std::fs::read_dir(&area) else {
        return Vec::new();
    };
    days.map(|day| day.unwrap().path().join(event))
        .filter(|path| path.is_dir())
        .collect()
}

#[tokio::test]
async fn an_overwrite_that_never_happened_leaves_its_kept_copy_in_the_discard_area_not_the_trash() {
    // The process dies after keeping the old content and before writing
    // (a stalled PUT, then kill -9): the reconciler fails the event, and
    // the copy no revert can reach leaves the trash for the discard area.
    // On a local folder and over real WebDAV.
    for files in [Files::Local, Files::WebDav] {
        let Some(world) = World::on(files).await else {
            continue;
        };
        discards_the_copy_of_an_overwrite_that_never_happened(&world).await;
    }
}

async fn discards_the_copy_of_an_overwrite_that_never_happened(world: &World) {
    let before = world.snapshot();
    world.arm(Some(Stage::AfterKeep));
    assert!(matches!(
        perform(world, Op::Overwrite).await,
        Err(JournalError::Crashed(_))
    ));
    let event = world.events().await.remove(0);
    let trash = world
        .disk
        .join(format!("Projects/.acdm-trash/alpha/{}", event.id));
    assert!(trash.join("0/notes.md").is_file(), "the copy was kept");
    world.journal.reconcile(chrono::Utc::now()).await.unwrap();
    let event = world.store.event(event.id).await.unwrap();
    assert_eq!(event.status, EventStatus::Failed);
    assert_eq!(world.snapshot(), before, "nothing changed in the project");
    assert!(!trash.exists(), "no copy left in the trash");
    let found = discarded(world, &event.id.to_string());
    assert_eq!(found.len(), 1, "one discarded folder: {found:?}");
    let folder = found.first().unwrap();
    assert_eq!(
        std::fs::read(folder.join("0/notes.md")).unwrap(),
        "notes é\n".as_bytes()
    );
    let error = event.error.unwrap();
    assert!(error.contains("nothing was changed"), "{error}");
    assert!(error.contains("discard area"), "{error}");
}

#[tokio::test]
async fn a_kept_copy_stays_in_the_trash_when_the_original_changed_since() {
    // Same crash, but the file was changed behind the service's back before
    // the reconciler ran: the kept copy may be the only one of what was
    // there, so it stays where an operator looks for it.
    let world = World::new().await;
    world.arm(Some(Stage::AfterKeep));
    assert!(perform(&world, Op::Overwrite).await.is_err());
    let event = world.events().await.remove(0);
    std::fs::write(
        world.disk.join("Projects/Alpha/notes.md"),
        b"edited elsewhere\n",
    )
    .unwrap();
    world.journal.reconcile(chrono::Utc::now()).await.unwrap();
    let event = world.store.event(event.id).await.unwrap();
    assert_eq!(event.status, EventStatus::Failed);
    let trash = world
        .disk
        .join(format!("Projects/.acdm-trash/alpha/{}", event.id));
    assert_eq!(
        std::fs::read(trash.join("0/notes.md")).unwrap(),
        "notes é\n".as_bytes()
    );
    assert!(discarded(&world, &event.id.to_string()).is_empty());
}
