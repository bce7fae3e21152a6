//! What the index knows of each source, for `/mcp/health` and `/metrics`.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// Documents that could not be extracted, kept per source (the newest).
const KEPT_UNREADABLE: usize = 50;

/// A document the index holds by name only because its text could not be
/// had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    /// Its path (the wiki's in the repository, a file's absolute one).
    pub path: String,
    /// Why, as a stable reason (`zip_bomb`, `timed_out`, `no_text`, …).
    pub reason: String,
}

/// One source's state in the index.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SourceStatus {
    /// True once a first refresh went through: until then searches are
    /// answered by the upstream's own search.
    pub built: bool,
    /// Documents in the index.
    pub documents: u64,
    /// When the last refresh started (RFC 3339), if any.
    pub last_refresh: Option<DateTime<Utc>>,
    /// When the last refresh that went through started: the index reflects
    /// the upstream as of then.
    pub last_success: Option<DateTime<Utc>>,
    /// Refreshes that failed, since start.
    pub errors: u64,
    /// Why the last refresh failed, as a stable reason (`upstream`,
    /// `timed_out`, …; the log has the details), cleared by a refresh that
    /// goes through.
    pub last_error: Option<String>,
    /// Documents held by name only because their text could not be had.
    pub unreadable_count: u64,
    /// The newest of them, with why.
    pub unreadable: Vec<Unreadable>,
    /// What the last refresh did.
    pub last_counts: RefreshCounts,
}

impl SourceStatus {
    /// Seconds since the index last reflected the source (its lag), when it
    /// ever did.
    pub fn lag_seconds(&self, now: DateTime<Utc>) -> Option<u64> {
        self.last_success
            .map(|at| u64::try_from((now - at).num_seconds()).unwrap_or(0))
    }

    pub(crate) fn refreshed(
        &mut self,
        started: DateTime<Utc>,
        documents: u64,
        unreadable: impl Into<Option<Vec<Unreadable>>>,
        error: Option<String>,
        counts: RefreshCounts,
    ) {
        self.last_refresh = Some(started);
        self.documents = documents;
        self.last_counts = counts;
        if let Some(unreadable) = unreadable.into() {
            self.add_unreadable(unreadable);
        }
        match error {
            None => {
                self.built = true;
                self.last_success = Some(started);
                self.last_error = None;
            }
            Some(error) => {
                // A partial refresh still counts as built: what failed kept
                // its documents and is tried again next time.
                self.built = true;
                self.errors += 1;
                self.last_error = Some(error);
            }
        }
    }

    pub(crate) fn failed(&mut self, started: DateTime<Utc>, error: &str, counts: RefreshCounts) {
        self.last_refresh = Some(started);
        self.errors += 1;
        self.last_error = Some(error.to_owned());
        self.last_counts = counts;
    }

    pub(crate) fn add_unreadable(&mut self, unreadable: Vec<Unreadable>) {
        for item in unreadable {
            tracing::warn!(
                path = %item.path,
                reason = %item.reason,
                "a document is indexed by its name only: its text could not be had"
            );
            self.unreadable_count += 1;
            self.unreadable.retain(|u| u.path != item.path);
            self.unreadable.push(item);
        }
        let excess = self.unreadable.len().saturating_sub(KEPT_UNREADABLE);
        self.unreadable.drain(..excess);
    }
}

/// Both sources.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IndexStatus {
    /// The wiki.
    pub wiki: SourceStatus,
    /// The project folders.
    pub files: SourceStatus,
}

/// One refresh's counts, for the log, health and the bench.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RefreshCounts {
    /// Folder listings (PROPFIND depth 1) or branch and tree lookups made.
    pub listings: u64,
    /// Files downloaded.
    pub downloads: u64,
    /// Documents added or replaced in the index.
    pub indexed: u64,
    /// Documents dropped from the index.
    pub removed: u64,
    /// Folders skipped because their etag did not change.
    pub skipped_folders: u64,
    /// Upstream failures (the part they concern keeps its documents).
    pub errors: u64,
}
