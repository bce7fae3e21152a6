//! acdm-mcp: the Knowledge MCP server mounted at `/mcp`.
//!
//! **Filled by the MCP issue** ("acdm-mcp: the Knowledge MCP server at
//! /mcp"): four rmcp tools over acdm-sources, streamable HTTP in stateless
//! mode, host validation and `/mcp/health` per source. Until then the
//! backend answers `/mcp/health` itself and routes nothing else under `/mcp`
//! (the service gate still guards it). Intentionally empty.
//!
//! **Architecture invariant:** an adapter with no business logic; does not
//! depend on acdm-bff or acdm-store.
