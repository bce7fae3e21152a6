//! The ranked content index over the wiki and the project files, for the
//! agents' search tools: BM25 (tantivy) over Chinese and English text.
//!
//! The caller gives documents as text ([`Document`]: a key, a title, a
//! body, a version) in batches of [`Change`]s, and asks [`SearchQuery`]s;
//! this crate knows nothing of HTTP, the upstreams or text extraction. The
//! index is a cache: an index written by another schema version, or a
//! damaged one, is deleted and recreated empty, and
//! [`SearchIndex::versions`] tells the caller what it already holds so a
//! restart reads only what changed.
//!
//! Text is analysed twice (module `analysis`): into words
//! (jieba for Han characters, stemmed English for the rest) and into
//! character bigrams, so Chinese is found however jieba cut it. A query is
//! never parsed as a query language: its text goes through the same
//! analyzers and becomes a disjunction over the title's and the body's
//! words and the body's bigrams, plus a phrase boost; the source and the
//! scope folder are filters.

mod analysis;
mod error;
mod index;
mod schema;
mod snippet;

use std::ops::Range;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use error::IndexError;
pub use index::SearchIndex;

/// Where the index lives and how much memory its writer may use.
#[derive(Clone, Debug)]
pub struct IndexSettings {
    /// The index's directory (created if missing; the index is kept in a
    /// subdirectory `index/` beside a `schema-version` file), or `None` for
    /// an index in memory.
    pub dir: Option<PathBuf>,
    /// The writer's memory budget in bytes: at least 15 MB (smaller is
    /// raised to that); 20 MB is plenty, since commits are per batch.
    pub writer_heap_bytes: usize,
}

impl Default for IndexSettings {
    fn default() -> Self {
        Self {
            dir: None,
            writer_heap_bytes: DEFAULT_WRITER_HEAP_BYTES,
        }
    }
}

/// The writer heap [`IndexSettings::default`] gives.
pub const DEFAULT_WRITER_HEAP_BYTES: usize = 20_000_000;

/// Which upstream a document comes from; each is searched on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// The GitLab wiki: keys are repository paths (`guides/weekly-reports.md`).
    Wiki,
    /// The project files: keys are absolute paths
    /// (`/Projects/Alpha/minutes/2026-03.docx`).
    Files,
}

impl SourceKind {
    /// `wiki` or `files`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Wiki => "wiki",
            Self::Files => "files",
        }
    }
}

/// One document as text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    /// Its source.
    pub source: SourceKind,
    /// Its identity within the source (not empty): a repository path or an
    /// absolute file path. Its folders make the scopes it is found in.
    pub key: String,
    /// Its title: for a file, the file name without extension and the
    /// document's first heading when there is one. The key's file name is
    /// indexed with the title in any case.
    pub title: String,
    /// Its text.
    pub body: String,
    /// When it was last modified, in Unix seconds.
    pub modified: Option<i64>,
    /// The upstream's version of it (an etag, a blob id), given back by
    /// [`SearchIndex::versions`].
    pub version: String,
    /// Its format (`docx`, `md`, …), when known.
    pub format: Option<String>,
}

/// A change to the index; [`SearchIndex::apply`] takes them in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Adds the document, replacing any with the same source and key.
    Upsert(Document),
    /// Removes the document with this source and key, if any.
    Delete {
        /// The document's source.
        source: SourceKind,
        /// The document's key.
        key: String,
    },
    /// Removes every document of the source under a folder (`/Projects/Alpha/`;
    /// a `/` is added when missing, so `/Projects/Alphabet/` is left alone);
    /// `""` removes the whole source.
    DeleteUnder {
        /// The documents' source.
        source: SourceKind,
        /// The folder.
        folder: String,
    },
}

/// A search.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchQuery {
    /// The source searched.
    pub source: SourceKind,
    /// What the user asked, as they wrote it: any text (nothing in it is
    /// syntax); only its first 4 KB are read.
    pub text: String,
    /// Only documents under this folder (`/Projects/Alpha/`; a `/` is added
    /// when missing); `None` or `""` for the whole source.
    pub scope: Option<String>,
    /// The most hits wanted (at most 100; 0 counts the matches only).
    pub limit: usize,
}

/// A search's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchResults {
    /// How many documents match (beyond the hits returned).
    pub total_count: u64,
    /// The best matches, best first; one per key.
    pub hits: Vec<Hit>,
}

/// One matching document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// Its key.
    pub key: String,
    /// Its title as given, or its file name when it was given none.
    pub title: String,
    /// A passage of its text (about 400 bytes, whitespace runs collapsed,
    /// `…` where text was left out) where the query's terms are.
    pub snippet: String,
    /// Where the query's terms are in `snippet` (byte ranges, sorted, not
    /// overlapping, on character boundaries).
    pub highlights: Vec<Range<usize>>,
    /// Its BM25 score (higher is better; comparable within one search only).
    pub score: f32,
    /// When it was last modified, in Unix seconds.
    pub modified: Option<i64>,
    /// Its format, when known.
    pub format: Option<String>,
}

impl Hit {
    /// The snippet with each highlight wrapped in `**`, as Markdown bold.
    #[must_use]
    pub fn marked(&self) -> String {
        let mut out = String::with_capacity(self.snippet.len() + 4 * self.highlights.len());
        let mut at = 0;
        for range in &self.highlights {
            let (Some(before), Some(term)) = (
                self.snippet.get(at..range.start),
                self.snippet.get(range.clone()),
            ) else {
                continue;
            };
            out.push_str(before);
            out.push_str("**");
            out.push_str(term);
            out.push_str("**");
            at = range.end;
        }
        out.push_str(self.snippet.get(at..).unwrap_or_default());
        out
    }
}

/// What the index holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexStats {
    /// Documents of the wiki.
    pub wiki_documents: u64,
    /// Documents of the project files.
    pub files_documents: u64,
    /// Segments (a commit makes one; merges join them).
    pub segments: usize,
    /// Bytes on disk (for an index in memory, the bytes its segments take).
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_wraps_each_highlight_in_double_asterisks() {
        let hit = Hit {
            key: "k".into(),
            title: String::new(),
            snippet: "钢材于四月到货 on time".into(),
            highlights: vec![0..6, 15..21, 25..29],
            score: 1.0,
            modified: None,
            format: None,
        };
        assert_eq!(hit.marked(), "**钢材**于四月**到货** on **time**");
    }
}
