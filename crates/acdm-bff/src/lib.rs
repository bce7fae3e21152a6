//! acdm-bff: the HTTP adapters over core and store.
//!
//! - [`envelope`]: sending a `ToolResponse` with the status of its code, and
//!   the one mapping of lower-layer errors to codes;
//! - [`extract`]: strict JSON bodies and path parameters that fail with a
//!   `validation_error` naming the field;
//! - [`admin`]: the operator API at `/admin`.
//!
//! **Filled further by the BFF issues:** the `/agent-tools` routers (nc file
//! primitives, business objects, project overview) and their pipeline.
//!
//! **Architecture invariant:** an adapter — no SQL, no upstream protocol,
//! no business rules that belong in core; does not depend on acdm-mcp.

pub mod admin;
pub mod envelope;
pub mod extract;
