//! The kill switch for agents' file writes (spec §3.5).
//!
//! Two inputs decide it:
//! - `ACDM_AI_NC_WRITES_ENABLED` from the environment, read at start;
//! - the operator's switch in the database (`PUT /admin/kill-switch`, or
//!   the CLI), shared by every replica, which each one follows within one
//!   poll interval.
//!
//! Off wins: writes are on only when both allow them. An operator can
//! switch writes off at run time and back on, but cannot override an
//! environment that says off (that is the deployment's decision), and a
//! restart never undoes an operator's emergency off.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use acdm_store::{NC_WRITES_SWITCH, Store, StoreError, SwitchState};
use serde::Serialize;

/// The switch, cheap to clone and to read on every write.
#[derive(Debug, Clone)]
pub struct KillSwitch {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    environment: bool,
    operator: AtomicBool,
    /// True once the operator's row has been read: the first read learns
    /// the switch, later ones may change it.
    known: AtomicBool,
    refreshing: tokio::sync::Mutex<()>,
}

/// What the switch looks like, for the operator API and the CLI.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
pub struct SwitchReport {
    /// Whether agents' file writes are allowed now.
    pub nc_writes_enabled: bool,
    /// `ACDM_AI_NC_WRITES_ENABLED` at start.
    pub environment: bool,
    /// The operator's setting, when one was ever made.
    pub operator: Option<SwitchState>,
    /// Which input decides right now (`environment` or `operator`).
    pub decided_by: &'static str,
}

impl KillSwitch {
    /// A switch with the environment's value and no operator decision yet.
    pub fn new(environment: bool) -> Self {
        Self {
            inner: Arc::new(Inner {
                environment,
                // Closed until the operator's row has been read once.
                operator: AtomicBool::new(false),
                known: AtomicBool::new(false),
                refreshing: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// True when agents may write files.
    pub fn writes_enabled(&self) -> bool {
        self.inner.environment && self.inner.operator.load(Ordering::Acquire)
    }

    /// The environment's value.
    pub fn environment(&self) -> bool {
        self.inner.environment
    }

    /// Reads the operator's switch from `store` and follows it; returns it.
    /// Reads are serialised, so an older read cannot overwrite a newer one.
    pub async fn refresh(&self, store: &Store) -> Result<Option<SwitchState>, StoreError> {
        let _one_at_a_time = self.inner.refreshing.lock().await;
        let state = store.switch(NC_WRITES_SWITCH).await?;
        let operator = state.as_ref().is_none_or(|s| s.enabled);
        let before = self.inner.operator.swap(operator, Ordering::AcqRel);
        let known = self.inner.known.swap(true, Ordering::AcqRel);
        let user_id = state.as_ref().and_then(|s| s.changed_by.as_deref());
        if !known {
            // Learning the switch at start is not a change.
            tracing::info!(
                nc_writes_enabled = self.writes_enabled(),
                operator_switch = operator,
                user_id,
                "kill switch for agents' file writes read"
            );
        } else if before != operator {
            tracing::warn!(
                nc_writes_enabled = self.writes_enabled(),
                operator_switch = operator,
                user_id,
                "kill switch for agents' file writes changed"
            );
        }
        Ok(state)
    }

    /// The report for `state` (the operator's row).
    pub fn report(&self, state: Option<SwitchState>) -> SwitchReport {
        let operator_allows = state.as_ref().is_none_or(|s| s.enabled);
        SwitchReport {
            nc_writes_enabled: self.inner.environment && operator_allows,
            environment: self.inner.environment,
            decided_by: if !self.inner.environment {
                "environment"
            } else if state.is_some() {
                "operator"
            } else {
                "environment"
            },
            operator: state,
        }
    }

    /// One round of following the operator's switch, as every server does
    /// each poll interval (the binary runs it): reads the row and follows
    /// it, returning what was read. A failed read keeps the last known
    /// value and returns the error.
    pub async fn poll_once(&self, store: &Store) -> Result<Option<SwitchState>, StoreError> {
        self.refresh(store).await
    }
}
