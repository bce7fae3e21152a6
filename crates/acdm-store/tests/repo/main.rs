//! The repository test suite. Every case runs on SQLite, and on PostgreSQL
//! as well when `ACDM_TEST_DATABASE_URL` is set (CI sets it).

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "tests fail loudly and report what they measured"
)]

mod approvals;
mod business;
mod events;
mod harness;
mod limits;
mod migrations;
mod project;
mod provisioning;
mod scope;
