//! The agent's side of human approval: before a write runs, whether the
//! project's policy asks a person first; if so, an approval request with a
//! preview of what would change, and no write (`approval_required`). A
//! call that presents an `approval_id` is checked against the request it
//! names (same project, operation, user, agent and arguments; approved;
//! not expired; not used) and against the preview (every target still at
//! the etag or version the approver saw), and then runs once, its event
//! naming the approval (the approval is used up in the same transaction
//! as the write's intent: [`acdm_journal::Record::approval`]).
//!
//! The order of refusals: identity, scope, rate limits and role (the
//! pipeline), the kill switch (the operation, before it asks here), then
//! approval. A dry run never needs approval.

use std::sync::Arc;

use acdm_core::ErrorCode;
use acdm_core::approval::{
    Approval, ApprovalId, ApprovalPolicy, ApprovalRequest, ApprovalRequired, ApprovalStatus,
    ApprovalTtl, PolicySource, UseRefusal, WriteOp,
};
use acdm_core::domain::ProjectId;
use acdm_journal::Approved;
use acdm_store::{Store, StoreError};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::envelope::Failure;
use crate::pipeline::Caller;

/// The approval settings and what the agent side needs; shared, so a
/// request's copy is one reference count.
#[derive(Clone)]
pub struct Approvals(Arc<Fields>);

struct Fields {
    store: Store,
    /// `ACDM_APPROVAL_REQUIRED_OPS`.
    global: ApprovalPolicy,
    /// `ACDM_APPROVAL_TTL_SECONDS`.
    ttl: ApprovalTtl,
    /// Where notifications go, when configured.
    notifications: Option<Notifications>,
}

/// How new requests are announced: a row in the outbox (in the request's
/// transaction) with this body, and a nudge to the sender.
#[derive(Clone)]
pub struct Notifications {
    /// The console's address for people (`<public url>/console`), for the
    /// body's `console_url`.
    pub console_base: String,
    /// Woken when a request is stored, so it is sent at once rather than
    /// at the sender's next poll.
    pub wake: Arc<Notify>,
}

/// The body of a new request's notification.
#[derive(Debug, Serialize)]
pub struct NotificationBody<'a> {
    /// The request.
    pub approval_id: ApprovalId,
    /// Its project's slug.
    pub project: &'a str,
    /// The operation's label.
    pub op: WriteOp,
    /// The acting user.
    pub requested_by: &'a str,
    /// The agent.
    pub agent: &'a str,
    /// The conversation.
    pub thread: &'a str,
    /// What would change.
    pub preview: &'a Value,
    /// When it expires.
    pub expires_at: chrono::DateTime<chrono::Utc>,
    /// Where a person decides it.
    pub console_url: String,
}

impl Notifications {
    /// The notification body of `approval`.
    pub fn body(&self, approval: &Approval) -> String {
        let request = &approval.request;
        let body = NotificationBody {
            approval_id: approval.approval_id,
            project: request.project.as_str(),
            op: request.op,
            requested_by: request.requested_by.as_str(),
            agent: request.agent.as_str(),
            thread: request.thread.as_str(),
            preview: &request.preview,
            expires_at: approval.expires_at,
            console_url: format!(
                "{}/approvals/{}",
                self.console_base.trim_end_matches('/'),
                approval.approval_id
            ),
        };
        serde_json::to_string(&body).unwrap_or_default()
    }
}

impl Approvals {
    /// Approvals over `store`: `global` is the deployment's list, `ttl`
    /// how long a request lives; new requests are announced through the
    /// outbox when `notifications` is given.
    pub fn new(
        store: Store,
        global: ApprovalPolicy,
        ttl: ApprovalTtl,
        notifications: Option<Notifications>,
    ) -> Self {
        Self(Arc::new(Fields {
            store,
            global,
            ttl,
            notifications,
        }))
    }

    /// No operation needs approval unless a project's own policy says so
    /// (tests, tools).
    pub fn off(store: Store) -> Self {
        Self::new(store, ApprovalPolicy::none(), ApprovalTtl::DEFAULT, None)
    }

    /// The deployment's list.
    pub fn global(&self) -> &ApprovalPolicy {
        &self.0.global
    }

    /// The policy that applies to `project`, and where it comes from.
    pub async fn policy_of(
        &self,
        project: ProjectId,
    ) -> Result<(ApprovalPolicy, PolicySource), StoreError> {
        Ok(match self.0.store.approval_policy(project).await? {
            Some(own) => (own, PolicySource::Project),
            None => (self.0.global.clone(), PolicySource::Global),
        })
    }

    /// Whether the call may run: `Ok(None)` when it needs no approval,
    /// `Ok(Some(approved))` when it presents a usable approval (the write
    /// records it), or the refusal to answer (`approval_required` with a
    /// new request when it needs one and presents none).
    ///
    /// `arguments` is the call's typed request written back as JSON
    /// (without `approval_id`); `preview` says what the call would change,
    /// with each target's etag or version in its `targets` (computed when a
    /// request is made, and again when an approval is used: a target that
    /// changed in between voids the approval).
    pub(crate) async fn check<P, F>(
        &self,
        caller: &Caller,
        op: WriteOp,
        arguments: &impl Serialize,
        presented: Option<ApprovalId>,
        preview: P,
    ) -> Result<Option<Approved>, Failure>
    where
        P: FnOnce() -> F,
        F: Future<Output = Result<Value, Failure>>,
    {
        let project = caller.project();
        let arguments = bound(serde_json::to_value(arguments).unwrap_or(Value::Null));
        let Some(id) = presented else {
            let (policy, _) = self.policy_of(project.id).await?;
            if !policy.requires(op) {
                return Ok(None);
            }
            let preview = preview().await?;
            return Err(self.request(caller, op, arguments, preview).await?);
        };
        let store = &self.0.store;
        // Another project's approval is not found, as one that does not
        // exist: its id tells nothing.
        let approval = store.approval_of(project.id, id).await?;
        let now = store.now();
        approval
            .check_use(
                op,
                caller.identity.user_id(),
                caller.identity.agent_name(),
                &arguments,
                now,
            )
            .map_err(refusal_of)?;
        let current = preview().await?;
        if targets(&current) != targets(&approval.request.preview) {
            let reason = format!(
                "what it would change is no longer what the approver saw: {}",
                changed_targets(&approval.request.preview, &current)
            );
            store.void_approval(id, &reason).await?;
            return Err(Failure::new(
                ErrorCode::Conflict,
                format!("approval {id} cannot be used: {reason}; nothing was changed, and the approval is void"),
            )
            .with_suggested_action(
                "Tell the user the target changed after the approval; read its current state, and call again without approval_id to ask for a new approval if the change is still wanted.",
            )
            .with_data(json!({ "approval_id": id, "status": ApprovalStatus::Voided, "preview": current })));
        }
        let by = approval.decided_by.ok_or_else(|| {
            Failure::new(
                ErrorCode::InternalError,
                crate::envelope::internal_message(),
            )
        })?;
        tracing::info!(approval = %id, op = %op, approved_by = %by, "running an approved write");
        Ok(Some(Approved { id, by }))
    }

    /// Stores a new request for the call and answers `approval_required`.
    async fn request(
        &self,
        caller: &Caller,
        op: WriteOp,
        arguments: Value,
        preview: Value,
    ) -> Result<Failure, Failure> {
        let project = caller.project();
        let request = ApprovalRequest {
            project: project.slug.clone(),
            op,
            arguments,
            requested_by: caller.identity.user_id().clone(),
            agent: caller.identity.agent_name().clone(),
            thread: caller.identity.thread_id().clone(),
            preview,
        };
        // Asked again before anyone decided: the same request, not a second.
        if let Some(pending) = self
            .0
            .store
            .pending_approval_for(project.id, &request)
            .await?
        {
            return Ok(self.required(op, &project.slug, pending));
        }
        let notify = self.0.notifications.as_ref();
        let make = notify.map(|n| {
            let n = n.clone();
            move |approval: &Approval| n.body(approval)
        });
        let approval = self
            .0
            .store
            .create_approval(
                project.id,
                &request,
                self.0.ttl,
                make.as_ref()
                    .map(|f| f as &(dyn Fn(&Approval) -> String + Send + Sync)),
            )
            .await?;
        if let Some(notify) = notify {
            notify.wake.notify_one();
        }
        Ok(self.required(op, &project.slug, approval))
    }

    /// The `approval_required` answer of `approval`.
    fn required(
        &self,
        op: WriteOp,
        project: &acdm_core::ProjectSlug,
        approval: Approval,
    ) -> Failure {
        let summary = approval
            .request
            .preview
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or(op.label())
            .to_owned();
        Failure::new(
            ErrorCode::ApprovalRequired,
            format!(
                "{op} needs a person's approval in project `{project}` before it runs; nothing was changed. Approval {} was requested: {summary}",
                approval.approval_id
            ),
        )
        .with_suggested_action(format!(
            "Tell the user this change needs approval by a project owner or admin (show them the preview). Once it is approved, call {op} again with exactly the same arguments plus \"approval_id\": \"{}\". It expires at {}.",
            approval.approval_id,
            approval.expires_at.to_rfc3339()
        ))
        .with_data(ApprovalRequired {
            approval_id: approval.approval_id,
            status: ApprovalStatus::Pending,
            expires_at: approval.expires_at,
            preview: approval.request.preview,
        })
    }
}

/// A project's policy as the operator API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PolicyView {
    /// The operations that need approval.
    pub ops: ApprovalPolicy,
    /// `project`: the project's own list; `global`: the deployment's.
    pub source: PolicySource,
}

/// An approval as people see it: where it stands now (an expired one says
/// so) and whether its notification is failing.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ApprovalView {
    /// The request and its decision.
    #[serde(flatten)]
    pub approval: Approval,
    /// Where it stands now (`expired` past its expiry).
    pub current_status: ApprovalStatus,
    /// The last delivery error of its notification, while undelivered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notification_error: Option<String>,
}

impl Approvals {
    /// The store.
    pub fn store(&self) -> &Store {
        &self.0.store
    }

    /// `approval` as people see it now.
    pub async fn view(&self, approval: Approval) -> Result<ApprovalView, Failure> {
        let now = self.0.store.now();
        let errors = self
            .0
            .store
            .notification_errors(approval.approval_id)
            .await?;
        Ok(ApprovalView {
            current_status: approval.status_at(now),
            notification_error: errors
                .into_iter()
                .next()
                .map(|(attempts, error)| format!("{error} (after {attempts} attempt(s))")),
            approval,
        })
    }

    /// A person's decision: `approve` (with an optional note) or reject
    /// (with the reason). The decider must be an owner or admin of the
    /// request's project and not the user who asked (four eyes), and the
    /// request pending.
    pub async fn decide(
        &self,
        id: ApprovalId,
        approve: bool,
        by: &acdm_core::UserId,
        note: Option<&str>,
    ) -> Result<Approval, Failure> {
        let store = &self.0.store;
        let approval = store.approval(id).await?;
        let project = store.project(&approval.request.project).await?;
        let role = project
            .members
            .iter()
            .find(|m| m.user_id == *by)
            .map(|m| m.role);
        approval
            .check_decision(by, role, store.now())
            .map_err(|refusal| match refusal {
                acdm_core::approval::DecisionRefusal::NotPending { .. } => {
                    Failure::new(ErrorCode::Conflict, refusal.to_string())
                }
                _ => Failure::new(ErrorCode::PermissionDenied, refusal.to_string())
                    .with_suggested_action("Ask another owner or admin of the project to decide."),
            })?;
        let decided = store.decide_approval(id, approve, by, note).await?;
        tracing::warn!(approval = %id, approved = approve, by = %by, project = %approval.request.project, op = %approval.request.op, "approval decided by a person");
        Ok(decided)
    }

    /// The policy of the project `slug`.
    pub async fn policy(&self, slug: &acdm_core::ProjectSlug) -> Result<PolicyView, Failure> {
        let project = self.0.store.project(slug).await?;
        let (ops, source) = self.policy_of(project.project.id).await?;
        Ok(PolicyView { ops, source })
    }

    /// Sets the project's own policy (`Some`), or drops it (`None`): the
    /// deployment's list applies again.
    pub async fn set_policy(
        &self,
        slug: &acdm_core::ProjectSlug,
        ops: Option<&ApprovalPolicy>,
        by: Option<&str>,
    ) -> Result<PolicyView, Failure> {
        let project = self.0.store.project(slug).await?.project.id;
        match ops {
            Some(ops) => self.0.store.set_approval_policy(project, ops, by).await?,
            None => {
                self.0.store.clear_approval_policy(project).await?;
            }
        }
        tracing::warn!(project = %slug, ops = ?ops.map(ApprovalPolicy::to_list), by = ?by, "approval policy changed");
        self.policy(slug).await
    }
}

/// The arguments an approval is bound to: the call's, with a file's
/// `content` replaced by its SHA-256 and length (bound as tightly, but
/// never stored or listed: the preview shows short texts).
fn bound(mut arguments: Value) -> Value {
    if let Some(fields) = arguments.as_object_mut()
        && let Some(Value::String(content)) = fields.get("content")
    {
        use sha2::Digest as _;
        let digest: String = sha2::Sha256::digest(content.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let replaced = json!({ "sha256": digest, "length": content.len() });
        fields.insert("content".to_owned(), replaced);
    }
    arguments
}

/// A preview's targets, in a stable order: what a use compares (a store
/// may list a folder in another order without anything changing).
fn targets(preview: &Value) -> Vec<String> {
    let mut targets: Vec<String> = preview
        .get("targets")
        .and_then(Value::as_array)
        .map(|list| list.iter().map(Value::to_string).collect())
        .unwrap_or_default();
    targets.sort_unstable();
    targets
}

/// The targets that differ, for a message.
fn changed_targets(approved: &Value, current: &Value) -> String {
    let list = |v: &Value| -> Vec<Value> {
        v.get("targets")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (before, after) = (list(approved), list(current));
    let name = |t: &Value| {
        t.get("target")
            .and_then(Value::as_str)
            .unwrap_or("a target")
            .to_owned()
    };
    let mut changed: Vec<String> = before
        .iter()
        .filter(|t| !after.contains(t))
        .map(name)
        .collect();
    changed.extend(after.iter().filter(|t| !before.contains(t)).map(name));
    changed.dedup();
    if changed.is_empty() {
        "its targets changed".to_owned()
    } else {
        format!("{} changed", changed.join(", "))
    }
}

/// The answer to a call whose approval cannot be used.
fn refusal_of(refusal: UseRefusal) -> Failure {
    let code = match &refusal {
        UseRefusal::Pending(_) => ErrorCode::ApprovalPending,
        UseRefusal::Rejected { .. } => ErrorCode::ApprovalRejected,
        UseRefusal::Expired(..) => ErrorCode::ApprovalExpired,
        UseRefusal::Mismatch { .. } => ErrorCode::ApprovalMismatch,
        UseRefusal::Used(_) => ErrorCode::ApprovalUsed,
        UseRefusal::Voided { .. } => ErrorCode::Conflict,
    };
    Failure::new(code, refusal.to_string())
}

/// One target of a preview: what it is, and its etag or version (`None`:
/// absent).
pub(crate) fn target(name: impl Into<String>, version: Option<impl Serialize>) -> Value {
    json!({ "target": name.into(), "version": version })
}

/// What the notification sender did since the start, for `/metrics`.
#[derive(Debug, Default)]
pub struct DeliveryStats {
    /// Messages the receiver took (2xx).
    pub delivered: std::sync::atomic::AtomicU64,
    /// Attempts that failed (a status, a network failure, a timeout).
    pub failed: std::sync::atomic::AtomicU64,
}

/// How long a sender holds a message it is sending: past it, another
/// replica may take it.
const LEASE: std::time::Duration = std::time::Duration::from_secs(30);
/// How often the outbox is looked at without a nudge (other replicas'
/// requests, retries that came due).
const POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// The wait before attempt `attempts + 1`: 2, 4, 8 … seconds, at most an
/// hour, with up to a quarter more at random (so replicas that failed
/// together do not retry together).
pub fn retry_delay(attempts: u32) -> std::time::Duration {
    let base = 2u64.saturating_pow(attempts.saturating_add(1)).min(3600);
    let jitter = fastrand::u64(0..=base / 4);
    std::time::Duration::from_secs(base + jitter)
}

/// The notification sender of this server: the receiver, the nudge its
/// requests give it, and what it did.
#[derive(Clone)]
pub struct Delivery {
    sender: Arc<acdm_sources::webhook::WebhookSender>,
    wake: Arc<Notify>,
    /// Deliveries and failed attempts since the start.
    pub stats: Arc<DeliveryStats>,
}

impl Delivery {
    /// Sends to `sender`'s receiver.
    pub fn new(sender: acdm_sources::webhook::WebhookSender) -> Self {
        Self {
            sender: Arc::new(sender),
            wake: Arc::default(),
            stats: Arc::default(),
        }
    }

    /// What the agent side needs to announce requests: their bodies link
    /// to the console at `console_base`.
    pub fn notifications(&self, console_base: String) -> Notifications {
        Notifications {
            console_base,
            wake: self.wake.clone(),
        }
    }

    /// Sends the outbox's due messages until `stop` (see
    /// [`deliver_notifications`]).
    pub async fn run(self, store: Store, stop: tokio_util::sync::CancellationToken) {
        deliver_notifications(store, self.sender, self.wake, self.stats, stop).await;
    }
}

/// Sends the outbox's due messages until `stop`: at once when `wake` is
/// nudged (a request stored on this replica), else every second; each
/// message is leased first, so replicas never send one together, and
/// retried with backoff until the receiver takes it.
pub async fn deliver_notifications(
    store: Store,
    sender: Arc<acdm_sources::webhook::WebhookSender>,
    wake: Arc<Notify>,
    stats: Arc<DeliveryStats>,
    stop: tokio_util::sync::CancellationToken,
) {
    use std::sync::atomic::Ordering::Relaxed;
    loop {
        match store.lease_due_notifications(16, LEASE).await {
            Ok(messages) => {
                for message in messages {
                    let timestamp = store.now().timestamp();
                    match sender.send(&message.id, timestamp, &message.payload).await {
                        Ok(()) => {
                            stats.delivered.fetch_add(1, Relaxed);
                            tracing::info!(approval = %message.approval_id, message = %message.id, "approval notification delivered");
                            if let Err(error) = store.notification_delivered(&message.id).await {
                                tracing::warn!(error = %error, "cannot record a delivered notification; it may be sent again");
                            }
                        }
                        Err(error) => {
                            stats.failed.fetch_add(1, Relaxed);
                            let delay = retry_delay(message.attempts);
                            tracing::warn!(approval = %message.approval_id, message = %message.id, attempts = message.attempts + 1, error = %error, retry_in_s = delay.as_secs(), "approval notification not delivered; it will be retried");
                            if let Err(error) = store
                                .notification_failed(&message.id, &error.to_string(), delay)
                                .await
                            {
                                tracing::warn!(error = %error, "cannot record a failed notification");
                            }
                        }
                    }
                }
            }
            Err(error) => {
                tracing::warn!(error = %error, "cannot read the approval notifications' outbox");
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = wake.notified() => {}
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_files_content_is_bound_by_its_digest_and_targets_in_any_order() {
        let bound = bound(json!({ "rel_path": "a.md", "content": "hello" }));
        assert_eq!(
            bound,
            json!({ "rel_path": "a.md", "content": {
                "sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
                "length": 5,
            }})
        );
        let one = json!({ "targets": [{ "target": "a", "version": "1" }, { "target": "b", "version": null }] });
        let other = json!({ "targets": [{ "target": "b", "version": null }, { "target": "a", "version": "1" }] });
        assert_eq!(targets(&one), targets(&other));
        let changed = json!({ "targets": [{ "target": "b", "version": "2" }, { "target": "a", "version": "1" }] });
        assert_ne!(targets(&one), targets(&changed));
        assert!(changed_targets(&one, &changed).contains('b'));
    }

    #[test]
    fn each_refusal_has_its_code() {
        let id = ApprovalId::new_random();
        for (refusal, code) in [
            (UseRefusal::Pending(id), ErrorCode::ApprovalPending),
            (
                UseRefusal::Rejected {
                    id,
                    by: "b".into(),
                    reason: "r".into(),
                },
                ErrorCode::ApprovalRejected,
            ),
            (
                UseRefusal::Expired(id, chrono::Utc::now()),
                ErrorCode::ApprovalExpired,
            ),
            (
                UseRefusal::Mismatch {
                    id,
                    what: "w".into(),
                },
                ErrorCode::ApprovalMismatch,
            ),
            (UseRefusal::Used(id), ErrorCode::ApprovalUsed),
            (
                UseRefusal::Voided {
                    id,
                    reason: "r".into(),
                },
                ErrorCode::Conflict,
            ),
        ] {
            assert_eq!(refusal_of(refusal).envelope().error_code(), Some(code));
        }
    }
}
