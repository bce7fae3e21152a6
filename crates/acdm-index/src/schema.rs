//! The index's schema, its version, and how a [`Document`] becomes a
//! tantivy document.

use tantivy::TantivyDocument;
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};

use crate::analysis::{BIGRAM, ZH_EN};
use crate::{Document, SourceKind};

/// Bumped whenever the schema or an analyzer changes what is indexed: an
/// index written under another version is deleted and rebuilt.
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// The fields, looked up once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fields {
    /// `source:key`, the identity: indexed (upserts and deletes) and a fast
    /// column (versions).
    pub(crate) id: Field,
    /// The key as the caller gave it (stored).
    pub(crate) key: Field,
    /// `wiki` or `files` (indexed).
    pub(crate) source: Field,
    /// Every folder prefix of the key, `""` included (indexed).
    pub(crate) folders: Field,
    /// The title and the key's file name (zh_en, indexed only).
    pub(crate) title: Field,
    /// The title as the caller gave it (stored only).
    pub(crate) title_text: Field,
    /// The body (zh_en, indexed with frequencies, stored).
    pub(crate) body: Field,
    /// The body's bigrams (indexed with positions, not stored).
    pub(crate) body_bigram: Field,
    /// Unix seconds (fast, stored).
    pub(crate) modified: Field,
    /// The caller's version (an etag, a blob id): a fast column.
    pub(crate) version: Field,
    /// The document's format, when known (stored).
    pub(crate) format: Field,
}

/// The schema and its fields.
pub(crate) fn build() -> (Schema, Fields) {
    let mut b = Schema::builder();
    // The words' positions are left out of `title` and `body`: phrases are
    // asked of `body_bigram`, whose positions follow one another (jieba's
    // search mode gives overlapping words no position order a phrase could
    // use).
    let words = |stored: bool| {
        let options = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ZH_EN)
                .set_index_option(IndexRecordOption::WithFreqs),
        );
        if stored {
            options.set_stored()
        } else {
            options
        }
    };
    let bigrams = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(BIGRAM)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        id: b.add_text_field("id", STRING | FAST),
        key: b.add_text_field("key", STORED),
        source: b.add_text_field("source", STRING),
        folders: b.add_text_field("folders", STRING),
        title: b.add_text_field("title", words(false)),
        title_text: b.add_text_field("title_text", STORED),
        body: b.add_text_field("body", words(true)),
        body_bigram: b.add_text_field("body_bigram", bigrams),
        modified: b.add_i64_field("modified", FAST | STORED | INDEXED),
        version: b.add_text_field("version", FAST),
        format: b.add_text_field("format", STORED),
    };
    (b.build(), fields)
}

/// The identity term's text: the source, a colon, the key.
pub(crate) fn id_text(source: SourceKind, key: &str) -> String {
    let mut id = String::with_capacity(key.len() + 6);
    id.push_str(source.as_str());
    id.push(':');
    id.push_str(key);
    id
}

/// Every folder prefix of `key` (each ending in `/`), and `""`.
pub(crate) fn folders_of(key: &str) -> Vec<&str> {
    let mut out = vec![""];
    out.extend(
        key.match_indices('/')
            .filter_map(|(i, _)| key.get(..=i))
            .filter(|prefix| !prefix.is_empty()),
    );
    out
}

/// The key's file name without its extension, separators as spaces
/// (`guides/weekly-reports.md` → `weekly reports`).
pub(crate) fn file_stem(key: &str) -> String {
    let name = key.rsplit('/').next().unwrap_or(key);
    let stem = match name.rfind('.') {
        Some(dot) if dot > 0 => name.get(..dot).unwrap_or(name),
        _ => name,
    };
    stem.chars()
        .map(|c| if c == '_' || c == '-' { ' ' } else { c })
        .collect()
}

/// The tantivy document for `doc`.
pub(crate) fn to_tantivy(fields: &Fields, doc: &Document) -> TantivyDocument {
    let mut out = TantivyDocument::default();
    out.add_text(fields.id, id_text(doc.source, &doc.key));
    out.add_text(fields.key, &doc.key);
    out.add_text(fields.source, doc.source.as_str());
    for folder in folders_of(&doc.key) {
        out.add_text(fields.folders, folder);
    }
    let stem = file_stem(&doc.key);
    let mut title = doc.title.clone();
    if !title.to_lowercase().contains(&stem.to_lowercase()) {
        if !title.is_empty() {
            title.push('\n');
        }
        title.push_str(&stem);
    }
    out.add_text(fields.title, &title);
    out.add_text(fields.title_text, &doc.title);
    out.add_text(fields.body, &doc.body);
    out.add_text(fields.body_bigram, &doc.body);
    if let Some(modified) = doc.modified {
        out.add_i64(fields.modified, modified);
    }
    out.add_text(fields.version, &doc.version);
    if let Some(format) = &doc.format {
        out.add_text(fields.format, format);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_every_prefix_ending_in_a_slash() {
        assert_eq!(
            folders_of("/Projects/Alpha/minutes/2026-03.docx"),
            [
                "",
                "/",
                "/Projects/",
                "/Projects/Alpha/",
                "/Projects/Alpha/minutes/"
            ]
        );
        assert_eq!(folders_of("guides/weekly-reports.md"), ["", "guides/"]);
        assert_eq!(folders_of("README.md"), [""]);
    }

    #[test]
    fn the_file_stem_loses_its_extension_and_separators() {
        assert_eq!(file_stem("guides/weekly-reports.md"), "weekly reports");
        assert_eq!(file_stem("/A/钢材_进场计划.xlsx"), "钢材 进场计划");
        assert_eq!(file_stem("/A/.hidden"), ".hidden");
        assert_eq!(file_stem("/A/Makefile"), "Makefile");
    }
}
