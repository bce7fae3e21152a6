//! A wiki in a local folder: the embedded default when no GitLab is
//! configured. Same search and read semantics as the GitLab source; it has
//! no history, so it knows one ref (the default branch name).

use std::path::PathBuf;
use std::sync::Arc;

use acdm_core::{AbsPath, RelPath};
use async_trait::async_trait;

use crate::error::SourceError;
use crate::local::grep;
use crate::local::store::LocalFileStore;
use crate::model::{GitRef, ReadRange, WikiHit, WikiQuery, WikiSearch, WikiWindow};
use crate::{FileReader, WikiSource};

/// A [`WikiSource`] over a local folder.
#[derive(Debug, Clone)]
pub struct LocalWiki {
    files: LocalFileStore,
    default_ref: Arc<GitRef>,
}

impl LocalWiki {
    /// A wiki rooted at `root` (created if missing), answering to
    /// `default_ref` (usually `main`).
    pub fn open(root: impl Into<PathBuf>, default_ref: GitRef) -> Result<Self, SourceError> {
        Ok(Self {
            files: LocalFileStore::open(root)?,
            default_ref: Arc::new(default_ref),
        })
    }

    fn check_ref(&self, git_ref: Option<&GitRef>) -> Result<GitRef, SourceError> {
        match git_ref {
            None => Ok((*self.default_ref).clone()),
            Some(r) if *r == *self.default_ref => Ok(r.clone()),
            Some(r) => Err(SourceError::NotFound(format!(
                "ref `{r}`: the local wiki has no history; use `{}`",
                self.default_ref
            ))),
        }
    }
}

fn as_abs(path: &RelPath) -> AbsPath {
    AbsPath::root().join(path)
}

#[async_trait]
impl WikiSource for LocalWiki {
    fn kind(&self) -> &'static str {
        "local"
    }

    async fn check(&self) -> Result<(), SourceError> {
        self.files.check().await
    }

    async fn search(&self, query: &WikiQuery) -> Result<WikiSearch, SourceError> {
        let term = crate::search_term(&query.term)?.to_owned();
        self.check_ref(query.git_ref.as_ref())?;
        let prefix = query.path_prefix.clone().unwrap_or_else(RelPath::root);
        // Refuses a symbolic link on the way to the prefix folder.
        crate::local::store::resolve(self.files.root(), &as_abs(&prefix))?;
        let root = self.files.root().to_path_buf();
        let (start, limit) = (prefix.segments().to_vec(), query.limit);
        let outcome = tokio::task::spawn_blocking(move || {
            grep::search(&root, &start, &term, limit, grep::Names::FilePath, true)
        })
        .await
        .map_err(|_| SourceError::upstream("local wiki", None, "the search was interrupted"))?;
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => grep::Outcome::default(),
            Err(_) => {
                return Err(SourceError::upstream(
                    "local wiki",
                    None,
                    "the wiki folder could not be read",
                ));
            }
        };
        let hits = outcome
            .matches
            .into_iter()
            .filter(|m| m.kind == crate::model::EntryKind::File)
            .filter_map(|m| {
                let path = RelPath::parse(&m.segments.join("/")).ok()?;
                Some(match m.content {
                    Some(c) => WikiHit {
                        path,
                        start_line: c.start_line,
                        snippet: c.snippet,
                    },
                    None => WikiHit {
                        path,
                        start_line: 1,
                        snippet: String::new(),
                    },
                })
            })
            .collect();
        Ok(WikiSearch {
            hits,
            total: Some(outcome.total),
        })
    }

    async fn read(
        &self,
        path: &RelPath,
        git_ref: Option<&GitRef>,
        range: ReadRange,
    ) -> Result<WikiWindow, SourceError> {
        let git_ref = self.check_ref(git_ref)?;
        let stream = self
            .files
            .read(&as_abs(path), range)
            .await
            .map_err(|e| match e {
                SourceError::NotFound(_) => {
                    SourceError::NotFound(format!("wiki file `{path}` at `{git_ref}`"))
                }
                other => other,
            })?;
        let window = stream.collect(range.len).await?;
        Ok(WikiWindow {
            path: path.clone(),
            git_ref,
            window,
        })
    }
}
