//! The ambient identity: set once per agent run by the engine, read by
//! every call made inside it (a tokio task-local, so concurrent runs on
//! one runtime never see each other's caller).

use std::future::Future;

use acdm_core::Identity;

tokio::task_local! {
    static IDENTITY: Identity;
}

/// Runs `work` with `identity` as the caller of every BFF call inside it.
pub async fn with_identity<F: Future>(identity: Identity, work: F) -> F::Output {
    IDENTITY.scope(identity, work).await
}

/// The identity of the current task, when [`with_identity`] set one.
pub fn current_identity() -> Option<Identity> {
    IDENTITY.try_with(Clone::clone).ok()
}
