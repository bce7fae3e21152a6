//! [`SearchIndex`]: opening (and recreating) the index, applying changes
//! through its one writer, searching through its reader.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tantivy::collector::{Count, TopDocs};
use tantivy::directory::error::LockError;
use tantivy::directory::{Directory, INDEX_WRITER_LOCK, MmapDirectory};
use tantivy::query::{
    BooleanQuery, BoostQuery, ConstScoreQuery, Occur, PhraseQuery, Query, TermQuery,
};
use tantivy::schema::{IndexRecordOption, Schema, Value};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{
    DocAddress, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term,
};

use crate::analysis::{self, BIGRAM, ZH_EN, is_bigram_script, is_stop_word};
use crate::schema::{self, Fields, SCHEMA_VERSION};
use crate::snippet::{self, Weights};
use crate::{
    Change, Hit, IndexError, IndexSettings, IndexStats, SearchQuery, SearchResults, SourceKind,
};

/// The smallest writer heap tantivy accepts per thread.
const MIN_WRITER_HEAP_BYTES: usize = 15_000_000;
/// The largest writer heap asked for (tantivy refuses 4 GB and more).
const MAX_WRITER_HEAP_BYTES: usize = 1_000_000_000;
/// Only the first bytes of a query's text are read.
const MAX_QUERY_BYTES: usize = 4096;
/// The most distinct terms a query asks for, per field.
const MAX_QUERY_TERMS: usize = 48;
/// The most tokens a phrase boost is built from.
const MAX_PHRASE_TOKENS: usize = 24;
/// The most hits one search returns.
const MAX_LIMIT: usize = 100;
/// Decompressed blocks of stored documents each segment keeps (tantivy's
/// default is 100): a block holds one document when it is large, and the
/// extractor's texts reach 8 MB; decompressing a block again is cheap.
const DOC_STORE_CACHE_BLOCKS: usize = 4;
/// The longest key accepted.
const MAX_KEY_BYTES: usize = 4096;

/// A match in the title (which holds the file name too) against one in
/// the body. Not boosted: BM25's length normalisation already weighs a
/// short title's match several times a body's, and a word in both counts
/// twice; at 2.0 one title word ("approved", "supplier") outranked the
/// documents that answered the question (ranking test MRR 0.94 at 2.0,
/// 0.97 at 1.0).
const TITLE_BOOST: f32 = 1.0;
/// A matching bigram counts this much against a matching word.
const BIGRAM_BOOST: f32 = 0.5;
/// A document with the query's words in a row gains this phrase score
/// (the bigram field's BM25 of the phrase, times this).
const PHRASE_BOOST: f32 = 1.0;

/// The ranked content index: cheap to clone (an `Arc` inside), shared by
/// every thread. [`apply`](Self::apply) serialises on the one writer;
/// [`search`](Self::search) runs concurrently with it and with other
/// searches. Both block: call them from a blocking thread.
#[derive(Clone)]
pub struct SearchIndex {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

struct Inner {
    /// Where the tantivy files are (`None` in memory).
    dir: Option<PathBuf>,
    reader: IndexReader,
    writer: Mutex<IndexWriter<TantivyDocument>>,
    fields: Fields,
    zh_en: TextAnalyzer,
    bigram: TextAnalyzer,
}

/// The name of the file holding the schema version, beside `index/`.
const VERSION_FILE: &str = "schema-version";
/// The subdirectory holding tantivy's files.
const INDEX_DIR: &str = "index";

impl SearchIndex {
    /// Opens the index in `settings.dir` (creating it if missing), or a new
    /// one in memory. An index of another schema version, or one that
    /// cannot be opened, is deleted and recreated empty (the caller then
    /// re-indexes; [`versions`](Self::versions) is empty).
    ///
    /// # Errors
    ///
    /// `index_locked` if another writer (this process or another) holds
    /// the directory, `index_storage` if it cannot be created or written.
    pub fn open(settings: &IndexSettings) -> Result<Self, IndexError> {
        analysis::warm_up();
        let (schema, fields) = schema::build();
        let heap = settings
            .writer_heap_bytes
            .clamp(MIN_WRITER_HEAP_BYTES, MAX_WRITER_HEAP_BYTES);
        let (writer, reader, dir) = match &settings.dir {
            None => {
                let (writer, reader) = writer_and_reader(&Index::create_in_ram(schema), heap)?;
                (writer, reader, None)
            }
            Some(root) => {
                let data = root.join(INDEX_DIR);
                let index = open_dir(root, &data, &schema)?;
                let (writer, reader) = match writer_and_reader(&index, heap) {
                    Ok(parts) => parts,
                    Err(error @ IndexError::Locked(_)) => return Err(error),
                    Err(error) => {
                        tracing::warn!(%error, dir = %data.display(), "the search index cannot be read: recreating it");
                        drop(index);
                        writer_and_reader(&recreate(root, &data, &schema)?, heap)?
                    }
                };
                (writer, reader, Some(data))
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                dir,
                reader,
                writer: Mutex::new(writer),
                fields,
                zh_en: analysis::zh_en_analyzer(),
                bigram: analysis::bigram_analyzer(),
            }),
        })
    }

    /// Applies `changes` in order and commits them: one commit (and one
    /// reader reload) per call, so callers batch. Nothing is applied when a
    /// change is invalid.
    ///
    /// # Errors
    ///
    /// `invalid_request` for an empty or overlong key;
    /// `index_storage` or `index_failed` when the commit fails (the batch
    /// is then rolled back).
    pub fn apply(&self, changes: Vec<Change>) -> Result<(), IndexError> {
        if changes.is_empty() {
            return Ok(());
        }
        for change in &changes {
            validate(change)?;
        }
        let inner = &*self.inner;
        let f = &inner.fields;
        let mut writer = inner
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let applied = (|| -> Result<(), IndexError> {
            for change in &changes {
                match change {
                    Change::Upsert(doc) => {
                        writer.delete_term(Term::from_field_text(
                            f.id,
                            &schema::id_text(doc.source, &doc.key),
                        ));
                        writer.add_document(schema::to_tantivy(f, doc))?;
                    }
                    Change::Delete { source, key } => {
                        writer.delete_term(Term::from_field_text(
                            f.id,
                            &schema::id_text(*source, key),
                        ));
                    }
                    Change::DeleteUnder { source, folder } => {
                        let folder = as_folder(folder);
                        writer.delete_query(Box::new(BooleanQuery::intersection(vec![
                            term_query(f.source, source.as_str()),
                            term_query(f.folders, &folder),
                        ])))?;
                    }
                }
            }
            writer.commit()?;
            Ok(())
        })();
        if let Err(error) = applied {
            if let Err(rollback) = writer.rollback() {
                tracing::warn!(error = %rollback, "rolling the search index back failed");
            }
            return Err(error);
        }
        drop(writer);
        inner.reader.reload()?;
        Ok(())
    }

    /// The documents of `query.source` (under `query.scope`) that match
    /// `query.text`, best first.
    ///
    /// # Errors
    ///
    /// `empty_query` when the text has no word to search for;
    /// `index_failed` when the engine fails.
    pub fn search(&self, query: &SearchQuery) -> Result<SearchResults, IndexError> {
        let inner = &*self.inner;
        let f = &inner.fields;
        let searcher = inner.reader.searcher();
        let mut zh_en = inner.zh_en.clone();
        let mut bigram = inner.bigram.clone();
        let plan = plan(&query.text, &mut zh_en, &mut bigram)?;
        let content = content_query(f, &plan);
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![
            (Occur::Must, content),
            (Occur::Must, filter(f.source, query.source.as_str())),
        ];
        if let Some(scope) = query.scope.as_deref().filter(|s| !s.is_empty()) {
            clauses.push((Occur::Must, filter(f.folders, &as_folder(scope))));
        }
        let full = BooleanQuery::new(clauses);
        let limit = query.limit.min(MAX_LIMIT);
        if limit == 0 {
            let total = searcher.search(&full, &Count)?;
            return Ok(SearchResults {
                total_count: total as u64,
                hits: Vec::new(),
            });
        }
        let (top, total) =
            searcher.search(&full, &(TopDocs::with_limit(limit).order_by_score(), Count))?;
        let words = weights(&searcher, &[f.body, f.title], &plan.words)?;
        let bigrams = weights(&searcher, &[f.body_bigram], &plan.bigrams)?;
        let hits = top
            .into_iter()
            .map(|(score, address)| {
                hit(
                    &searcher,
                    f,
                    address,
                    score,
                    (&mut zh_en, &mut bigram),
                    &words,
                    &bigrams,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SearchResults {
            total_count: total as u64,
            hits,
        })
    }

    /// The key and version of every document of `source`: what the index
    /// already holds, so a restart re-reads only what changed.
    ///
    /// # Errors
    ///
    /// `index_failed` when the index cannot be read.
    pub fn versions(&self, source: SourceKind) -> Result<HashMap<String, String>, IndexError> {
        let searcher = self.inner.reader.searcher();
        let prefix = schema::id_text(source, "");
        let mut out = HashMap::new();
        let (mut id, mut version) = (String::new(), String::new());
        for segment in searcher.segment_readers() {
            let fast = segment.fast_fields();
            let (Some(ids), Some(versions)) = (fast.str("id")?, fast.str("version")?) else {
                continue;
            };
            for doc in segment.doc_ids_alive() {
                let Some(ord) = ids.term_ords(doc).next() else {
                    continue;
                };
                if !ids.ord_to_str(ord, &mut id)? {
                    continue;
                }
                let Some(key) = id.strip_prefix(&prefix) else {
                    continue;
                };
                version.clear();
                if let Some(ord) = versions.term_ords(doc).next() {
                    versions.ord_to_str(ord, &mut version)?;
                }
                out.insert(key.to_owned(), version.clone());
            }
        }
        Ok(out)
    }

    /// Documents per source, segments, bytes. Never fails: what cannot be
    /// read counts zero (and is logged).
    #[must_use]
    pub fn stats(&self) -> IndexStats {
        let inner = &*self.inner;
        let searcher = inner.reader.searcher();
        let count = |source: SourceKind| {
            searcher
                .search(&term_query(inner.fields.source, source.as_str()), &Count)
                .map(|n| n as u64)
                .unwrap_or_else(|error| {
                    tracing::warn!(%error, "counting the search index's documents failed");
                    0
                })
        };
        let bytes = match &inner.dir {
            Some(dir) => dir_bytes(dir),
            None => searcher
                .space_usage()
                .map(|usage| usage.total().get_bytes())
                .unwrap_or(0),
        };
        IndexStats {
            wiki_documents: count(SourceKind::Wiki),
            files_documents: count(SourceKind::Files),
            segments: searcher.segment_readers().len(),
            bytes,
        }
    }
}

/// The index's one writer (one thread, `heap` bytes) and its reader
/// (reloaded by [`SearchIndex::apply`] only), the analyzers registered
/// first (tantivy does not save them with the index).
fn writer_and_reader(
    index: &Index,
    heap: usize,
) -> Result<(IndexWriter<TantivyDocument>, IndexReader), IndexError> {
    index
        .tokenizers()
        .register(ZH_EN, analysis::zh_en_analyzer());
    index
        .tokenizers()
        .register(BIGRAM, analysis::bigram_analyzer());
    let writer = index.writer_with_num_threads(1, heap)?;
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .doc_store_cache_num_blocks(DOC_STORE_CACHE_BLOCKS)
        .try_into()?;
    Ok((writer, reader))
}

/// Opens the index under `root`, or recreates it when its version differs,
/// its files do not open, or its schema is not this one.
fn open_dir(root: &Path, data: &Path, schema: &Schema) -> Result<Index, IndexError> {
    fs::create_dir_all(root)?;
    let version = fs::read_to_string(root.join(VERSION_FILE)).unwrap_or_default();
    if version.trim() != SCHEMA_VERSION.to_string() {
        if data.exists() {
            tracing::info!(
                found = version.trim(),
                expected = SCHEMA_VERSION,
                "the search index has another schema version: recreating it"
            );
        }
        return recreate(root, data, schema);
    }
    match Index::open_in_dir(data) {
        Ok(index) if index.schema() == *schema => Ok(index),
        Ok(_) => {
            tracing::warn!("the search index has another schema: recreating it");
            recreate(root, data, schema)
        }
        Err(error) => {
            if data.exists() {
                tracing::warn!(%error, "the search index cannot be opened: recreating it");
            }
            recreate(root, data, schema)
        }
    }
}

/// Deletes `data` (only that subdirectory) and creates an empty index in it;
/// refuses while another writer holds it (another process, perhaps of
/// another version, still serving it).
fn recreate(root: &Path, data: &Path, schema: &Schema) -> Result<Index, IndexError> {
    if data.exists()
        && let Ok(directory) = MmapDirectory::open(data)
    {
        match directory.acquire_lock(&INDEX_WRITER_LOCK) {
            Ok(lock) => drop(lock),
            Err(LockError::LockBusy) => {
                return Err(IndexError::Locked(format!(
                    "the search index in {} is in use by another writer; it is not recreated",
                    data.display()
                )));
            }
            // A lock that cannot even be tried is part of the damage.
            Err(LockError::IoError(_)) => {}
        }
    }
    match fs::remove_dir_all(data) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(error.into()),
    }
    fs::create_dir_all(data)?;
    let index = Index::create_in_dir(data, schema.clone())?;
    let tmp = root.join(format!("{VERSION_FILE}.tmp"));
    fs::write(&tmp, format!("{SCHEMA_VERSION}\n"))?;
    fs::rename(&tmp, root.join(VERSION_FILE))?;
    Ok(index)
}

/// The bytes of the files in `dir` (tantivy's directory is flat).
fn dir_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .filter(fs::Metadata::is_file)
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Refuses a change that cannot be applied.
fn validate(change: &Change) -> Result<(), IndexError> {
    let key = match change {
        Change::Upsert(doc) => &doc.key,
        Change::Delete { key, .. } => key,
        Change::DeleteUnder { .. } => return Ok(()),
    };
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(IndexError::Invalid(format!(
            "a document key must have 1 to {MAX_KEY_BYTES} bytes"
        )));
    }
    Ok(())
}

/// `folder` ending in `/`; `""` (the whole source) as it is.
fn as_folder(folder: &str) -> String {
    if folder.is_empty() || folder.ends_with('/') {
        folder.to_owned()
    } else {
        format!("{folder}/")
    }
}

fn term_query(field: tantivy::schema::Field, text: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, text),
        IndexRecordOption::Basic,
    ))
}

/// A required term that adds nothing to the score.
fn filter(field: tantivy::schema::Field, text: &str) -> Box<dyn Query> {
    Box::new(ConstScoreQuery::new(term_query(field, text), 0.0))
}

/// What a query's text asks for, analysed.
struct Plan {
    /// Distinct `zh_en` terms (title and body).
    words: Vec<String>,
    /// Distinct bigrams of Han, kana or hangul (body_bigram).
    bigrams: Vec<String>,
    /// Every token of the bigram analysis, in order (the phrase boost).
    phrase: Vec<String>,
}

/// Analyses the query's text (its first 4 KB); stop words are dropped
/// unless nothing else is left.
fn plan(
    text: &str,
    zh_en: &mut TextAnalyzer,
    bigram: &mut TextAnalyzer,
) -> Result<Plan, IndexError> {
    let mut cut = MAX_QUERY_BYTES.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let text = text.get(..cut).unwrap_or_default();
    let words = distinct(analysis::tokens(zh_en, text).into_iter().map(|t| t.text));
    let bigram_tokens: Vec<String> = analysis::tokens(bigram, text)
        .into_iter()
        .map(|t| t.text)
        .collect();
    let bigrams = distinct(
        bigram_tokens
            .iter()
            .filter(|t| t.chars().next().is_some_and(is_bigram_script))
            .cloned(),
    );
    if words.is_empty() && bigrams.is_empty() {
        return Err(IndexError::EmptyQuery);
    }
    let phrase = bigram_tokens.into_iter().take(MAX_PHRASE_TOKENS).collect();
    Ok(Plan {
        words: without_stop_words(words),
        bigrams: without_stop_words(bigrams),
        phrase,
    })
}

fn distinct(terms: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = HashSet::new();
    terms.filter(|t| seen.insert(t.clone())).collect()
}

fn without_stop_words(terms: Vec<String>) -> Vec<String> {
    let kept: Vec<String> = terms.iter().filter(|t| !is_stop_word(t)).cloned().collect();
    let mut out = if kept.is_empty() { terms } else { kept };
    out.truncate(MAX_QUERY_TERMS);
    out
}

/// The scored part of the query: any of the words in the title or the
/// body, any of the bigrams, and the whole as a phrase.
fn content_query(f: &Fields, plan: &Plan) -> Box<dyn Query> {
    let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    let scored = |field, text: &str, boost: f32| -> (Occur, Box<dyn Query>) {
        let query = TermQuery::new(
            Term::from_field_text(field, text),
            IndexRecordOption::WithFreqs,
        );
        (
            Occur::Should,
            Box::new(BoostQuery::new(Box::new(query), boost)),
        )
    };
    for word in &plan.words {
        should.push(scored(f.title, word, TITLE_BOOST));
        should.push(scored(f.body, word, 1.0));
    }
    for pair in &plan.bigrams {
        should.push(scored(f.body_bigram, pair, BIGRAM_BOOST));
    }
    if plan.phrase.len() >= 2 {
        let terms = plan
            .phrase
            .iter()
            .map(|t| Term::from_field_text(f.body_bigram, t))
            .collect();
        should.push((
            Occur::Should,
            Box::new(BoostQuery::new(
                Box::new(PhraseQuery::new(terms)),
                PHRASE_BOOST,
            )),
        ));
    }
    Box::new(BooleanQuery::new(should))
}

/// Each term's weight for snippets: its inverse document frequency in
/// the first of `fields` that has it; terms no document has are left out.
fn weights(
    searcher: &Searcher,
    fields: &[tantivy::schema::Field],
    terms: &[String],
) -> Result<Weights, IndexError> {
    let n = searcher.num_docs() as f32;
    let mut out = Weights::new();
    for term in terms {
        let mut df = 0.0;
        for field in fields {
            df = searcher.doc_freq(&Term::from_field_text(*field, term))? as f32;
            if df > 0.0 {
                break;
            }
        }
        if df > 0.0 {
            out.insert(term.clone(), (1.0 + (n - df + 0.5) / (df + 0.5)).ln());
        }
    }
    Ok(out)
}

/// One hit: the stored fields and a snippet.
fn hit(
    searcher: &Searcher,
    f: &Fields,
    address: DocAddress,
    score: f32,
    analyzers: (&mut TextAnalyzer, &mut TextAnalyzer),
    words: &Weights,
    bigrams: &Weights,
) -> Result<Hit, IndexError> {
    let doc: TantivyDocument = searcher.doc(address)?;
    let text = |field| {
        doc.get_first(field)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let key = text(f.key);
    let mut title = text(f.title_text);
    if title.trim().is_empty() {
        title = key.rsplit('/').next().unwrap_or(&key).to_owned();
    }
    let body = doc
        .get_first(f.body)
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    let (snippet, highlights) = snippet::make(body, &title, analyzers, words, bigrams);
    Ok(Hit {
        key,
        title,
        snippet,
        highlights,
        score,
        modified: doc.get_first(f.modified).and_then(|v| v.as_i64()),
        format: doc
            .get_first(f.format)
            .and_then(|v| v.as_str())
            .map(str::to_owned),
    })
}
