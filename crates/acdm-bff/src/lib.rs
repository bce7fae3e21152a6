//! acdm-bff: the HTTP adapters over core and store.
//!
//! - [`envelope`]: sending a `ToolResponse` with the status of its code, and
//!   the one mapping of lower-layer errors to codes;
//! - [`extract`]: strict JSON bodies and path parameters that fail with a
//!   `validation_error` naming the field;
//! - [`pipeline`]: identity headers → scope resolution → rate limits →
//!   role, run first by every `/agent-tools` handler, which it gives the
//!   caller (and so the via_agent actor);
//! - [`nc`]: the seven file primitives at `/agent-tools/nc/{op}`, writing
//!   through the journal (`acdm-journal`) with the caller's actor;
//! - [`business`]: the fourteen business operations at
//!   `/agent-tools/business/{op}` (meetings and their files, calendar,
//!   reports, members, project meta), role-checked, writing through the
//!   journal;
//! - [`project`]: the overview, the statement of work and the milestone
//!   advance at `/agent-tools/project/…`;
//! - [`switch`]: the kill switch for agents' file writes;
//! - [`admin`]: the operator API at `/admin`;
//! - [`openapi`]: the OpenAPI 3.1 document of the BFF and the operator
//!   API, generated from the routers' tables and the handlers' types;
//! - [`operator`]: business writes by a person (actor `direct`), shared by
//!   the operator API, the CLI and `import`.
//!
//! **Architecture invariant:** an adapter — no SQL, no upstream protocol,
//! no business rules that belong in core; does not depend on acdm-mcp.

pub mod admin;
pub mod approval;
pub mod business;
pub mod envelope;
pub mod extract;
pub mod nc;
pub mod openapi;
pub mod operator;
pub mod pipeline;
pub mod project;
pub mod switch;

use axum::Router;

/// Every `/agent-tools` route, each handler running the agent pipeline
/// (identity, scope, rate limits, role) and the request-id scope of its
/// failures before anything else ([`pipeline::Behind::run`]). The service
/// gate runs before it, in the binary.
pub fn agent_tools(
    nc: nc::NcState,
    business: business::BusinessState,
    project: project::ProjectState,
    pipeline: pipeline::PipelineState,
) -> Router {
    nc::routes(nc, pipeline.clone())
        .merge(business::routes(business, pipeline.clone()))
        .merge(project::routes(project, pipeline))
}

#[cfg(test)]
mod tests {
    /// The size of the future `handler` returns, without calling it.
    fn size_2<A, B, F>(_handler: fn(A, B) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// axum moves a handler's future whole into a box on every call, and
    /// the pipeline's future is part of it: a read must not pay for
    /// copying a write's future (its journal, its store calls).
    #[test]
    fn the_handlers_and_the_pipelines_futures_stay_small() {
        for (what, size, most) in [
            ("nc::dispatch", size_2(crate::nc::dispatch), 2560),
            (
                "business::dispatch",
                size_2(crate::business::dispatch),
                3072,
            ),
        ] {
            assert!(size <= most, "{what}'s future is {size} bytes");
        }
    }
}
