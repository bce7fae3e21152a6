//! The acdm-backend service, as a library so tests can build and run it
//! on port 0 (`main.rs` is only the command line around it).
//!
//! - [`config`]: settings from file and environment, validated;
//! - [`telemetry`]: the process-wide log subscriber;
//! - [`app`]: the router, its global middleware and the server lifecycle;
//! - [`gate`]: the service-token gate in front of every route;
//! - [`health`]: `/healthz`, `/readyz`, `/mcp/health`;
//! - [`http`]: request id, request span, body limit, panic guard;
//! - [`server`]: the connection loop (header-read timeout, connection cap);
//! - [`periodic`]: the one way background rounds run every interval;
//! - [`cli`]: the command line and the operator commands;
//! - [`import`]: a project's business data from a JSON or TOML file;
//! - [`demo`]: sample data and a running service for newcomers.
//!
//! **Architecture invariant:** composition only — this crate wires the
//! adapters (`acdm-bff`, later `acdm-mcp`) to the store and sources. It is
//! the only crate that reads the environment or installs a log subscriber.

pub mod app;
pub mod cli;
pub mod config;
pub mod demo;
pub mod gate;
pub mod health;
pub mod http;
pub mod import;
pub mod lanes;
pub mod periodic;
pub mod server;
pub mod telemetry;
