//! acdm-sources: where knowledge and files come from.
//!
//! **Filled by the sources issue** ("acdm-sources: GitLab wiki, Nextcloud
//! WebDAV and unified search clients, plus local-folder sources"): the wiki
//! source, file store and file search traits, their GitLab, WebDAV/OCS and
//! local-folder implementations, and the one upstream HTTP client builder.
//! Until then this crate is intentionally empty.
//!
//! **Architecture invariant:** depends on acdm-core only among workspace
//! crates; knows nothing of axum, MCP or the database.
