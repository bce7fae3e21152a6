//! One contract suite, many back-ends: the same test functions run against
//! the local-folder sources, the Nextcloud WebDAV client talking to a real
//! WebDAV server (wsgidav), and the GitLab and Nextcloud-search clients
//! talking to doubles that follow the documented wire formats. The fault
//! tests put a misbehaving upstream in front of every client.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly and report what they measured"
)]

mod egress;
mod faults;
mod files;
mod harness;
mod ocs_double;
mod oidc;
mod recording;
mod search;
mod sync;
mod wiki;
