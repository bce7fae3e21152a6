//! Black-box tests of the acdm-backend service over real sockets: the
//! service gate, health, the operator API, logging, shutdown and the
//! command line. Set `TEST_LOG=1` to see the servers' logs.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "tests fail loudly and report what they measured"
)]

mod admin;
mod approvals;
mod business;
mod business_typed;
mod catalog;
mod cli;
mod connections;
mod console;
mod dav;
mod front;
mod gate;
mod health;
mod helpers;
mod import;
mod knowledge;
mod lifecycle;
mod logs;
mod mcp;
mod nc;
mod nc_scope;
mod openapi;
mod operator;
mod people;
mod pipeline;
mod project;
mod replicas;
mod sources;
