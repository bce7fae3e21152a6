//! acdm-harness-client: the typed client the agent engine embeds.
//!
//! **Filled by the harness-client issue** ("acdm-harness-client: the typed
//! four-header client the engine embeds"): one client type, identity from a
//! task-local context or an explicit override, and every outcome mapped to a
//! `ToolResponse` (spec §7). Intentionally empty until then.
//!
//! **Architecture invariant (the harness boundary):** its whole dependency
//! closure contains acdm-core's protocol types and an HTTP client, never
//! acdm-bff, acdm-mcp, acdm-sources, acdm-store, sqlx, axum or rmcp.
