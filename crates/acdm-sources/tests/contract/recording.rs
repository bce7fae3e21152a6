//! What the HTTP doubles share: every request is recorded exactly as it
//! arrived, so tests can assert on the wire (paths still encoded, headers
//! as sent). The recorder lives in test support with the GitLab double,
//! which other suites use too; the OCS double records with the same one.

pub(crate) use acdm_test_support::gitlab::{Recorded, Recorder};
