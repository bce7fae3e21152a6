//! The acdm-backend service, as a library so tests can build and run it
//! on port 0 (`main.rs` is only the command line around it).
//!
//! - [`config`]: the settings (`acdm-config`), read from the file and the
//!   environment `main` passes, validated;
//! - [`app`]: the router, its global middleware and the server lifecycle
//!   (the serving infrastructure itself is `acdm-server`);
//! - [`cli`]: the command line (the operator commands and the import
//!   are `acdm-operator`'s);
//! - [`demo`]: sample data and a running service for newcomers.
//!
//! **Architecture invariant:** composition only — this crate wires the
//! adapters (`acdm-mcp`, `acdm-bff`, `acdm-console`) to the store and
//! sources over `acdm-server`. It is the only crate that reads the
//! environment (libraries get typed values), and it decides when the log
//! subscriber is installed (`acdm_server::telemetry::init`).

pub mod app;
pub use acdm_config as config;
pub mod cli;
pub mod demo;
