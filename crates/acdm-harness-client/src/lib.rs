//! acdm-harness-client: the typed four-header client the agent engine
//! embeds to call the Agent Tools BFF (spec §7).
//!
//! - **Typed**: one method per endpoint (`nc_*`, `business_*`,
//!   `project_*`), with the request and response types of
//!   [`acdm_core::nc`], [`acdm_core::business::wire`] and
//!   [`acdm_core::project`] — the very types the backend parses and sends,
//!   so the two sides cannot drift.
//! - **Identity from context**: the engine sets the caller once per agent
//!   run with [`with_identity`]; every call in that task sends the three
//!   identity headers. Code that runs before that context exists (prompt
//!   building) uses [`HarnessClient::as_identity`].
//! - **The tool catalog** ([`catalog()`]): every operation as a tool an
//!   engine registers as it is — name, LLM description, the input's JSON
//!   Schema from the same types, risk annotations.
//! - **Never a transport error**: every outcome is a
//!   [`ToolResponse`](acdm_core::ToolResponse) an LLM can read — see
//!   [`HarnessClient::call`] for the mapping of timeouts, the two kinds of
//!   401, 422 and odd bodies.
//!
//! **API boundary:** this crate's whole dependency closure holds acdm-core
//! and an HTTP client, never the backend's internals (`cargo xtask tidy`).
//!
//! An engine tool built on it:
//!
//! ```no_run
//! use acdm_core::nc::{ReadRequest, ReadData};
//! use acdm_core::{AgentName, Identity, ThreadId, ToolResponse, UserId};
//! use acdm_harness_client::{HarnessClient, with_identity};
//!
//! /// The `read_project_file` tool the LLM sees: returns the envelope as JSON.
//! async fn read_project_file(client: &HarnessClient, rel_path: &str) -> String {
//!     let answer: ToolResponse<ReadData> = client
//!         .nc_read(&ReadRequest { rel_path: rel_path.to_owned(), ..ReadRequest::default() })
//!         .await;
//!     serde_json::to_string(&answer).unwrap_or_default()
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = HarnessClient::from_env()?;
//! let identity = Identity::new(
//!     UserId::parse("u-1")?,
//!     AgentName::parse("project-alpha")?,
//!     ThreadId::parse("thread-9")?,
//! );
//! // Once per agent run: every tool call inside carries this identity.
//! let text = with_identity(identity, read_project_file(&client, "notes/plan.md")).await;
//! println!("{text}");
//! # Ok(()) }
//! ```

mod catalog;
mod client;
mod config;
mod context;
mod methods;

#[cfg(feature = "blocking")]
pub mod blocking;

pub use catalog::{Annotations, ToolDefinition, catalog};
pub use client::{HarnessClient, Scoped};
pub use config::{ClientConfig, ConfigError, DEFAULT_BACKEND_URL, DEFAULT_TIMEOUT};
pub use context::{current_identity, with_identity};
