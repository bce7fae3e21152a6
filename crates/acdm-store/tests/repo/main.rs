//! The repository test suite. Every case runs on SQLite, and on PostgreSQL
//! as well when `ACDM_TEST_DATABASE_URL` is set (CI sets it).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stderr,
    reason = "tests fail loudly and report what they measured"
)]

mod business;
mod events;
mod harness;
mod migrations;
mod provisioning;
mod scope;
