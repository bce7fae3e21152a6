//! The Knowledge MCP server, driven as an MCP client drives it: JSON-RPC
//! over its real router, fixture sources, a recording upstream for the
//! scope rules.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "tests fail loudly and report what they measured"
)]

mod failures;
mod harness;
mod resources;
mod scope;
mod snapshot;
mod tools;
mod transport;
