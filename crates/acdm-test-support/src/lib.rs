//! acdm-test-support: what the test suites share, in one place.
//!
//! A dev-dependency only (`publish = false`); no production crate links it.
//! [`wsgidav`] starts the real WebDAV server the file-store contract suite
//! and the BFF's black-box suite run against; [`traversal`] loads the
//! traversal corpus and holds the one oracle that judges where a request
//! path lands; [`snapshot`] compares the wire contract with its committed
//! JSON; [`loopback`] reads requests for the loopback doubles of an
//! upstream; [`proxy`] is a forward proxy for the upstream client's egress
//! tests; [`logs`] captures log lines in memory.

#![expect(
    clippy::panic,
    reason = "test support: a broken test environment must fail the test loudly"
)]

pub mod gitlab;
pub mod issuer;
pub mod logs;
pub mod loopback;
pub mod proxy;
pub mod snapshot;
pub mod traversal;
pub mod wsgidav;

pub use proxy::ForwardProxy;
pub use wsgidav::{DAV_PASSWORD, DAV_USER, Wsgidav};

/// A test switch or location from the environment (`ACDM_REQUIRE_WEBDAV`,
/// `ACDM_WSGIDAV`, `ACDM_SHARED_DIR`, …): the one place test support reads it.
#[expect(
    clippy::disallowed_methods,
    reason = "test support: CI's switches and where the test tools live"
)]
fn setting(name: &str) -> Option<std::ffi::OsString> {
    // tidy:allow-env: test support; CI's switches and where the test tools live.
    std::env::var_os(name)
}
