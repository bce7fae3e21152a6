//! Documents as text: a file of a format the extraction pool knows is read
//! whole (within its bound), turned into Markdown in a child process and
//! served in windows over that text.

use std::sync::Arc;

use acdm_core::{AbsPath, RelPath};
use acdm_extract::{ExtractError, Extracted, Extractor, Format};
use acdm_sources::{
    ETag, FileReader, GitRef, ReadRange, SourceError, WikiSource, Window, render::Rendered,
};
use bytes::Bytes;

use crate::KnowledgeError;

/// A document read as text.
#[derive(Debug, Clone)]
pub struct DocumentText {
    /// The text and how it was made.
    pub extracted: Arc<Extracted>,
    /// The file's own size in bytes.
    pub file_size: u64,
    /// The file's etag (the version the text was made from), when the
    /// store gives one.
    pub etag: Option<ETag>,
}

impl DocumentText {
    /// The lower-case name of the format (`docx`, `pdf`, …).
    pub fn format(&self) -> &'static str {
        self.extracted.format.as_str()
    }

    /// A window of the text: `len` bytes from `offset` (a character cut by
    /// either end is left out of this window and starts the next one), as
    /// the read tools render a file's window.
    pub fn window(&self, offset: u64, len: u64) -> Result<TextWindow, u64> {
        let text = self.extracted.text.as_bytes();
        let size = text.len() as u64;
        if offset > 0 && offset >= size {
            return Err(size);
        }
        let mut start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(text.len());
        // An offset inside a character (never one a previous window gave)
        // moves on to the next character's first byte.
        while start < text.len() && !self.extracted.text.is_char_boundary(start) {
            start += 1;
        }
        let end = start
            .saturating_add(usize::try_from(len).unwrap_or(usize::MAX))
            .min(text.len());
        let window = Window {
            size: Some(size),
            etag: self.etag.clone(),
            content_type: Some("text/markdown; charset=utf-8".to_owned()),
            offset: start as u64,
            bytes: Bytes::copy_from_slice(text.get(start..end).unwrap_or_default()),
        };
        let rendered = acdm_sources::render::render(&window, len);
        Ok(TextWindow {
            offset: start as u64,
            size,
            rendered,
        })
    }
}

/// A window of a document's text.
#[derive(Debug)]
pub struct TextWindow {
    /// Where the window starts in the text.
    pub offset: u64,
    /// The text's whole size in bytes.
    pub size: u64,
    /// The window as the read tools render it (always text).
    pub rendered: Rendered,
}

/// What reads documents: the stores and the extraction pool.
#[derive(Clone)]
pub(crate) struct Reader {
    pub(crate) files: Arc<dyn FileReader>,
    pub(crate) wiki: Arc<dyn WikiSource>,
    pub(crate) extractor: Extractor,
    pub(crate) max_file_bytes: u64,
    /// Documents held in memory at once, from their download to their
    /// text: what bounds the memory reads of large documents take (each at
    /// most `max_file_bytes` and its text); more wait their turn, in order.
    pub(crate) in_flight: Arc<tokio::sync::Semaphore>,
}

impl Reader {
    /// The text of the project file at `path`, or `None` when its name
    /// says no format the pool knows (the caller reads its bytes).
    pub(crate) async fn file(
        &self,
        path: &AbsPath,
    ) -> Result<Option<DocumentText>, KnowledgeError> {
        let Some(format) = path.segments().last().and_then(|n| Format::from_name(n)) else {
            return Ok(None);
        };
        let entry = self.files.stat(path).await?;
        if entry.is_folder() {
            return Err(KnowledgeError::Source(SourceError::Conflict(format!(
                "{path} is a folder, not a document"
            ))));
        }
        let key = |etag: &ETag| format!("files:{path}@{}", etag.value());
        if let Some(etag) = &entry.etag
            && let Some(cached) = self.extractor.cached(format, &key(etag))
        {
            return Ok(Some(DocumentText {
                extracted: cached.map_err(KnowledgeError::Extract)?,
                file_size: entry.size.unwrap_or_default(),
                etag: entry.etag.clone(),
            }));
        }
        if let Some(size) = entry.size {
            self.check_size(size)?;
        }
        let _turn = self
            .in_flight
            .acquire()
            .await
            .map_err(|_| KnowledgeError::Stopped)?;
        let stream = self
            .files
            .read(
                path,
                ReadRange::new(0, self.max_file_bytes.saturating_add(1)),
            )
            .await?;
        let window = stream
            .collect(self.max_file_bytes.saturating_add(1))
            .await?;
        self.check_size(
            window
                .size
                .unwrap_or(window.bytes.len() as u64)
                .max(window.bytes.len() as u64),
        )?;
        let etag = window.etag.clone().or(entry.etag);
        let cache_key = etag.as_ref().map(key);
        let file_size = window.bytes.len() as u64;
        let extracted = self
            .extractor
            .extract(format, cache_key.as_deref(), window.bytes)
            .await?;
        Ok(Some(DocumentText {
            extracted,
            file_size,
            etag,
        }))
    }

    /// The text of the wiki file at `path` and `git_ref` (a commit the
    /// index reads at), or `None` when its name says no format the pool
    /// knows.
    pub(crate) async fn wiki(
        &self,
        path: &RelPath,
        git_ref: &GitRef,
        version: &str,
    ) -> Result<Option<DocumentText>, KnowledgeError> {
        let Some(format) = path.file_name().and_then(Format::from_name) else {
            return Ok(None);
        };
        let key = format!("wiki:{path}@{version}");
        if let Some(cached) = self.extractor.cached(format, &key) {
            return Ok(Some(DocumentText {
                extracted: cached.map_err(KnowledgeError::Extract)?,
                file_size: 0,
                etag: None,
            }));
        }
        let _turn = self
            .in_flight
            .acquire()
            .await
            .map_err(|_| KnowledgeError::Stopped)?;
        let read = self
            .wiki
            .read(
                path,
                Some(git_ref),
                ReadRange::new(0, self.max_file_bytes.saturating_add(1)),
            )
            .await?;
        let bytes = read.window.bytes;
        self.check_size(bytes.len() as u64)?;
        let file_size = bytes.len() as u64;
        let extracted = self.extractor.extract(format, Some(&key), bytes).await?;
        Ok(Some(DocumentText {
            extracted,
            file_size,
            etag: None,
        }))
    }

    fn check_size(&self, size: u64) -> Result<(), KnowledgeError> {
        if size > self.max_file_bytes {
            return Err(KnowledgeError::Extract(ExtractError::TooLarge(format!(
                "the file has {size} bytes, more than the {} a document may have to be read as text (ACDM_EXTRACT_MAX_FILE_BYTES)",
                self.max_file_bytes
            ))));
        }
        Ok(())
    }
}
