//! The HTTP serving infrastructure of acdm-backend, independent of what
//! the routes do: the binary hands it a router and typed settings.
//!
//! - [`server`]: the accept loop (header-read timeout, connection cap, the
//!   drain on shutdown) over hyper's HTTP/1 connection;
//! - [`lanes`]: the connection threads, one event loop each, that an
//!   accepted connection is handed to and stays on;
//! - [`http`]: the front layer every route runs under (request id, span,
//!   panic guard, the service gate's check, body limit, deadline, metrics);
//! - [`gate`]: the service-token gate;
//! - [`health`]: `/healthz` and `/readyz`;
//! - [`periodic`]: background rounds every interval, nudged or not;
//! - [`telemetry`]: the log subscriber, which only the binary installs.
//!
//! **Architecture invariant:** no business logic and no route of an
//! adapter; it reads no environment (the binary passes typed values,
//! `RUST_LOG` included).

pub mod gate;
pub mod health;
pub mod http;
pub mod lanes;
pub mod periodic;
pub mod server;
pub mod telemetry;
