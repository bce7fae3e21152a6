//! acdm-test-support: what the test suites share, in one place.
//!
//! A dev-dependency only (`publish = false`); no production crate links it.
//! [`wsgidav`] starts the real WebDAV server the file-store contract suite
//! and the BFF's black-box suite run against.

#![allow(
    clippy::panic,
    reason = "test support: a broken test environment must fail the test loudly"
)]

pub mod wsgidav;

pub use wsgidav::{DAV_PASSWORD, DAV_USER, Wsgidav};
