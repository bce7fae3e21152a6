//! acdm-core: the pure heart of acdm-backend.
//!
//! Domain records, the ToolResponse protocol and error-code table, caller
//! identity, validated names and paths, and the scope resolver over a
//! directory port.
//!
//! **Architecture invariant:** this crate does no IO and knows nothing of
//! HTTP servers, databases, upstream clients or MCP (no axum, sqlx, reqwest,
//! rmcp, tokio). It is the only backend crate the engine's harness client
//! may link. `cargo xtask tidy` enforces this.

pub mod approval;
pub mod business;
pub mod domain;
pub mod events;
pub mod identity;
pub mod json;
pub mod limit;
pub mod names;
pub mod nc;
pub mod ops;
pub mod path;
pub mod project;
pub mod protocol;
pub mod scope;
mod text;
pub mod token;

pub use identity::{Identity, IdentityError, headers};
pub use names::{AgentName, MountName, ProjectName, ProjectSlug, RequestId, ThreadId, UserId};
pub use path::{AbsPath, PathError, PrefixError, RelPath};
pub use protocol::{ErrorCode, ResponseCode, ToolResponse};
pub use scope::{ProjectDirectory, ScopeError, ScopeResolver};
pub use token::SharedToken;
