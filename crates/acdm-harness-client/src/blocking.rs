//! Synchronous calls for call sites that are not async (feature
//! `blocking`). Each client owns a small current-thread runtime. Called
//! from a plain thread, a call runs on that runtime right there; called
//! from synchronous code that itself runs inside an async runtime (a
//! prompt builder called from a task), it runs on a helper thread and
//! blocks only the calling thread — it never nests runtimes or panics.
//! Async code should prefer [`crate::HarnessClient`].

use std::cell::RefCell;

use acdm_core::{ErrorCode, Identity, ToolResponse};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::Verb;
use crate::config::{ClientConfig, ConfigError};

thread_local! {
    static IDENTITY: RefCell<Option<Identity>> = const { RefCell::new(None) };
}

/// Runs `work` on this thread with `identity` as the caller of every
/// blocking call inside it (restoring the previous one afterwards).
pub fn with_identity<R>(identity: Identity, work: impl FnOnce() -> R) -> R {
    let previous = IDENTITY.with(|slot| slot.replace(Some(identity)));
    let result = work();
    IDENTITY.with(|slot| *slot.borrow_mut() = previous);
    result
}

/// The blocking client.
#[derive(Debug)]
pub struct BlockingClient {
    inner: crate::HarnessClient,
    /// Always `Some` until dropped.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for BlockingClient {
    /// Dropping a runtime blocks, which panics inside async code; shutting
    /// it down in the background never does (no task of ours outlives a
    /// call anyway).
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl BlockingClient {
    /// A blocking client for `config`.
    pub fn new(config: ClientConfig) -> Result<Self, ConfigError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ConfigError::Http(e.to_string()))?;
        Ok(Self {
            inner: crate::HarnessClient::new(config)?,
            runtime: Some(runtime),
        })
    }

    /// A blocking client configured from the environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::new(ClientConfig::from_env()?)
    }

    fn run<Req: Serialize + Sync + ?Sized, Resp: DeserializeOwned + Send>(
        &self,
        identity: Option<Identity>,
        verb: Verb,
        path: &str,
        body: &Req,
    ) -> ToolResponse<Resp> {
        let Some(runtime) = &self.runtime else {
            return ToolResponse::failure(
                ErrorCode::InternalError,
                "the blocking client is closed",
            );
        };
        let call = || runtime.block_on(self.inner.send(identity, verb, path, body));
        if tokio::runtime::Handle::try_current().is_err() {
            return call();
        }
        // Inside a runtime this thread may not block on another runtime:
        // the call runs on a helper thread while this one waits.
        std::thread::scope(|scope| scope.spawn(call).join()).unwrap_or_else(|_| {
            ToolResponse::failure(
                ErrorCode::InternalError,
                "the blocking harness call failed on its helper thread",
            )
        })
    }

    /// [`crate::HarnessClient::call`], blocking, as the thread's identity
    /// (see [`with_identity`]).
    pub fn call<Req: Serialize + Sync + ?Sized, Resp: DeserializeOwned + Send>(
        &self,
        path: &str,
        body: &Req,
    ) -> ToolResponse<Resp> {
        let identity = IDENTITY.with(|slot| slot.borrow().clone());
        self.run(identity, Verb::Post, path, body)
    }

    /// [`crate::HarnessClient::get`], blocking, as the thread's identity.
    pub fn get<Resp: DeserializeOwned + Send>(&self, path: &str) -> ToolResponse<Resp> {
        let identity = IDENTITY.with(|slot| slot.borrow().clone());
        self.run(identity, Verb::Get, path, &())
    }

    /// [`Self::call`] as an explicit identity.
    pub fn call_as<Req: Serialize + Sync + ?Sized, Resp: DeserializeOwned + Send>(
        &self,
        identity: &Identity,
        path: &str,
        body: &Req,
    ) -> ToolResponse<Resp> {
        self.run(Some(identity.clone()), Verb::Post, path, body)
    }

    /// This client acting as `identity`, whatever the thread's identity
    /// is: for code that runs before any agent-run context exists (prompt
    /// building).
    pub fn as_identity(&self, identity: Identity) -> BlockingScoped<'_> {
        BlockingScoped {
            client: self,
            identity,
        }
    }

    crate::methods::typed_methods!(;);
}

/// The blocking client with an explicit identity.
#[derive(Debug)]
pub struct BlockingScoped<'a> {
    client: &'a BlockingClient,
    identity: Identity,
}

impl BlockingScoped<'_> {
    /// [`BlockingClient::call`] as this identity.
    pub fn call<Req: Serialize + Sync + ?Sized, Resp: DeserializeOwned + Send>(
        &self,
        path: &str,
        body: &Req,
    ) -> ToolResponse<Resp> {
        self.client
            .run(Some(self.identity.clone()), Verb::Post, path, body)
    }

    /// [`BlockingClient::get`] as this identity.
    pub fn get<Resp: DeserializeOwned + Send>(&self, path: &str) -> ToolResponse<Resp> {
        self.client
            .run(Some(self.identity.clone()), Verb::Get, path, &())
    }

    crate::methods::typed_methods!(;);
}
