//! Finding files in a local folder by name and content, inside a scope:
//! the embedded default for the file search.

use acdm_core::AbsPath;
use async_trait::async_trait;

use crate::FileSearch;
use crate::error::SourceError;
use crate::local::grep;
use crate::local::store::{LocalFileStore, resolve};
use crate::model::FileHit;

/// A [`FileSearch`] over the same folder as a [`LocalFileStore`].
#[derive(Debug, Clone)]
pub struct LocalFileSearch {
    files: LocalFileStore,
}

impl LocalFileSearch {
    /// Searches the folder of `files`.
    pub fn new(files: LocalFileStore) -> Self {
        Self { files }
    }
}

#[async_trait]
impl FileSearch for LocalFileSearch {
    fn kind(&self) -> &'static str {
        "local"
    }

    async fn check(&self) -> Result<(), SourceError> {
        crate::FileReader::check(&self.files).await
    }

    async fn search(
        &self,
        term: &str,
        limit: usize,
        scope: &AbsPath,
    ) -> Result<Vec<FileHit>, SourceError> {
        let term = crate::search_term(term)?;
        // Refuses a symbolic link on the way to the scope folder.
        resolve(self.files.root(), scope)?;
        let root = self.files.root().to_path_buf();
        let (start, term) = (scope.segments().to_vec(), term.to_owned());
        let outcome = tokio::task::spawn_blocking(move || {
            grep::search(&root, &start, &term, limit, grep::Names::Entry, true)
        })
        .await
        .map_err(|_| SourceError::upstream("local folder", None, "the search was interrupted"))?;
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(_) => {
                return Err(SourceError::upstream(
                    "local folder",
                    None,
                    "the folder could not be searched",
                ));
            }
        };
        // One hit per path: a file found by name and by content is one hit,
        // with its first matching line.
        let mut hits: Vec<FileHit> = Vec::new();
        for m in outcome.matches {
            let Some(path) = m
                .segments
                .iter()
                .try_fold(AbsPath::root(), |p, s| p.join_name(s).ok())
            else {
                continue;
            };
            let (line, snippet) = m
                .content
                .map_or((None, None), |c| (Some(c.line), Some(c.matched)));
            match hits.iter_mut().find(|h| h.path == path) {
                Some(existing) if existing.line.is_none() => {
                    existing.line = line;
                    existing.snippet = snippet;
                }
                Some(_) => {}
                None => hits.push(FileHit {
                    path,
                    kind: Some(m.kind),
                    line,
                    snippet,
                }),
            }
        }
        Ok(hits)
    }
}
