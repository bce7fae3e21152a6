//! A source that is not there: every call is `NotConfigured`. Used when a
//! deployment turns the local-folder fallback off and does not configure
//! GitLab or Nextcloud, so tools answer `source_not_configured` instead of
//! silently serving an empty local folder.

use acdm_core::{AbsPath, RelPath};
use async_trait::async_trait;
use bytes::Bytes;

use crate::{
    Entry, FileHit, FileReader, FileSearch, FileWriter, GitRef, Precondition, ReadRange,
    ReadStream, SourceError, WikiBlob, WikiHead, WikiQuery, WikiSearch, WikiSource, WikiWindow,
    WriteOutcome,
};

/// The missing source, with what to configure.
#[derive(Debug, Clone)]
pub struct Unconfigured {
    what: &'static str,
}

impl Unconfigured {
    /// A missing source; `what` names the settings that would configure it
    /// (`GITLAB_WIKI_BASE_URL`, `NEXTCLOUD_URL`).
    pub fn new(what: &'static str) -> Self {
        Self { what }
    }

    fn error<T>(&self) -> Result<T, SourceError> {
        Err(SourceError::NotConfigured(format!(
            "this source is not configured ({} is not set)",
            self.what
        )))
    }
}

#[async_trait]
impl WikiSource for Unconfigured {
    fn kind(&self) -> &'static str {
        "none"
    }
    async fn check(&self) -> Result<(), SourceError> {
        self.error()
    }
    async fn search(&self, _query: &WikiQuery) -> Result<WikiSearch, SourceError> {
        self.error()
    }
    async fn read(
        &self,
        _path: &RelPath,
        _git_ref: Option<&GitRef>,
        _range: ReadRange,
    ) -> Result<WikiWindow, SourceError> {
        self.error()
    }
    async fn head(&self) -> Result<WikiHead, SourceError> {
        self.error()
    }
    async fn tree(&self, _commit: &str) -> Result<Vec<WikiBlob>, SourceError> {
        self.error()
    }
}

#[async_trait]
impl FileReader for Unconfigured {
    fn kind(&self) -> &'static str {
        "none"
    }
    async fn check(&self) -> Result<(), SourceError> {
        self.error()
    }
    async fn stat(&self, _path: &AbsPath) -> Result<Entry, SourceError> {
        self.error()
    }
    async fn list(&self, _folder: &AbsPath) -> Result<Vec<Entry>, SourceError> {
        self.error()
    }
    async fn read(&self, _path: &AbsPath, _range: ReadRange) -> Result<ReadStream, SourceError> {
        self.error()
    }
}

#[async_trait]
impl FileWriter for Unconfigured {
    async fn write(
        &self,
        _path: &AbsPath,
        _content: Bytes,
        _precondition: &Precondition,
    ) -> Result<WriteOutcome, SourceError> {
        self.error()
    }
    async fn move_to(
        &self,
        _from: &AbsPath,
        _to: &AbsPath,
        _overwrite: bool,
    ) -> Result<(), SourceError> {
        self.error()
    }
    async fn copy_to(
        &self,
        _from: &AbsPath,
        _to: &AbsPath,
        _overwrite: bool,
    ) -> Result<(), SourceError> {
        self.error()
    }
    async fn make_folders(&self, _folder: &AbsPath) -> Result<(), SourceError> {
        self.error()
    }
}

#[async_trait]
impl FileSearch for Unconfigured {
    fn kind(&self) -> &'static str {
        "none"
    }
    async fn check(&self) -> Result<(), SourceError> {
        self.error()
    }
    async fn search(
        &self,
        _term: &str,
        _limit: usize,
        _scope: &AbsPath,
    ) -> Result<Vec<FileHit>, SourceError> {
        self.error()
    }
}
