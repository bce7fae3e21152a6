//! A file store on a local folder, with the semantics of the WebDAV store:
//! the same preconditions, conflicts and errors, so the embedded default
//! behaves like production.
//!
//! Writes go to a hidden temporary file in the same folder and are renamed
//! into place (readers never see half a file). ETags are derived from the
//! modification time, size and inode, so every write changes them. Symbolic
//! links are never followed. Mutations are serialised within the process
//! (precondition check and change happen under one lock); several
//! processes sharing one local folder are not supported — use Nextcloud.

use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use acdm_core::AbsPath;
use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::Mutex;
use tokio_util::io::ReaderStream;

use crate::error::SourceError;
use crate::model::{ETag, Entry, EntryKind, Precondition, ReadRange, ReadStream, WriteOutcome};
use crate::{FileReader, FileWriter, check_transfer, shown};

/// Prefix of the temporary files writes go through; never listed.
const TEMP_PREFIX: &str = ".acdm-tmp-";

/// A [`FileWriter`] over a local folder.
#[derive(Debug, Clone)]
pub struct LocalFileStore {
    root: Arc<PathBuf>,
    writes: Arc<Mutex<()>>,
}

impl LocalFileStore {
    /// A store rooted at `root` (created if missing). `/` in the store is
    /// this folder.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, SourceError> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(|e| {
            SourceError::NotConfigured(format!(
                "cannot create the local file folder {}: {e}",
                root.display()
            ))
        })?;
        Ok(Self {
            root: Arc::new(root),
            writes: Arc::new(Mutex::new(())),
        })
    }

    /// The folder on disk.
    pub fn root(&self) -> &Path {
        &self.root
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Path) -> Result<T, SourceError> + Send + 'static,
    ) -> Result<T, SourceError> {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || f(&root))
            .await
            .map_err(|_| {
                SourceError::upstream("local folder", None, "the file operation was interrupted")
            })?
    }
}

/// The disk path of `path`, refusing symbolic links on the way.
pub(crate) fn resolve(root: &Path, path: &AbsPath) -> Result<PathBuf, SourceError> {
    let mut disk = root.to_path_buf();
    for segment in path.segments() {
        disk.push(segment);
        if fs::symlink_metadata(&disk).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(SourceError::PermissionDenied(format!(
                "{} is a symbolic link, which is not followed",
                shown(path)
            )));
        }
    }
    Ok(disk)
}

fn io_error(path: &AbsPath, error: &std::io::Error) -> SourceError {
    match error.kind() {
        ErrorKind::NotFound => SourceError::NotFound(shown(path)),
        ErrorKind::PermissionDenied => {
            SourceError::PermissionDenied(format!("{} is not accessible", shown(path)))
        }
        ErrorKind::AlreadyExists => {
            SourceError::PreconditionFailed(format!("{} already exists", shown(path)))
        }
        _ => SourceError::upstream(
            "local folder",
            None,
            format!("{} could not be accessed", shown(path)),
        ),
    }
}

/// The etag of a file or folder: changes on every write (mtime, size and,
/// with rename-into-place, the inode).
pub(crate) fn etag_of(meta: &fs::Metadata) -> Option<ETag> {
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(meta);
    #[cfg(not(unix))]
    let inode = 0u64;
    ETag::strong(format!("{modified:x}-{:x}-{inode:x}", meta.len()))
}

/// A MIME type from the file extension, for the common office and text types.
pub(crate) fn content_type_of(name: &str) -> Option<String> {
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    let mime = match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" | "log" => "text/plain",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "zip" => "application/zip",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        _ => return None,
    };
    Some(mime.to_owned())
}

pub(crate) fn entry_of(path: AbsPath, meta: &fs::Metadata) -> Entry {
    let kind = if meta.is_dir() {
        EntryKind::Folder
    } else {
        EntryKind::File
    };
    let content_type = match kind {
        EntryKind::File => path.segments().last().and_then(|n| content_type_of(n)),
        EntryKind::Folder => None,
    };
    Entry {
        kind,
        size: (kind == EntryKind::File).then_some(meta.len()),
        modified: meta.modified().ok().map(DateTime::<Utc>::from),
        etag: etag_of(meta),
        content_type,
        path,
    }
}

fn lstat(disk: &Path) -> Option<fs::Metadata> {
    fs::symlink_metadata(disk).ok()
}

fn check_etag(
    path: &AbsPath,
    current: Option<&fs::Metadata>,
    expected: &ETag,
) -> Result<(), SourceError> {
    let Some(meta) = current else {
        return Err(SourceError::PreconditionFailed(format!(
            "{} does not exist, so it cannot match the etag",
            shown(path)
        )));
    };
    if etag_of(meta).is_some_and(|tag| tag.strong_eq(expected)) {
        Ok(())
    } else {
        Err(SourceError::PreconditionFailed(format!(
            "{} has changed since it was read (etag mismatch)",
            shown(path)
        )))
    }
}

fn parent_folder(path: &AbsPath, disk: &Path) -> Result<(), SourceError> {
    let parent = disk.parent().and_then(lstat);
    if parent.is_some_and(|m| m.is_dir()) {
        Ok(())
    } else {
        Err(SourceError::Conflict(format!(
            "the folder that should contain {} does not exist",
            shown(path)
        )))
    }
}

fn temp_path(disk: &Path) -> PathBuf {
    let name = format!("{TEMP_PREFIX}{}", uuid::Uuid::new_v4().simple());
    disk.with_file_name(name)
}

fn remove_any(disk: &Path, meta: &fs::Metadata) -> std::io::Result<()> {
    if meta.is_dir() {
        fs::remove_dir_all(disk)
    } else {
        fs::remove_file(disk)
    }
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    if meta.is_dir() {
        fs::create_dir(to)?;
        for entry in fs::read_dir(from)? {
            let entry = entry?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else {
        let temp = temp_path(to);
        fs::copy(from, &temp)?;
        fs::rename(&temp, to).inspect_err(|_| {
            let _ = fs::remove_file(&temp);
        })
    }
}

#[async_trait]
impl FileReader for LocalFileStore {
    fn kind(&self) -> &'static str {
        "local"
    }

    async fn check(&self) -> Result<(), SourceError> {
        let root = self.root.clone();
        self.blocking(move |_| match fs::metadata(&*root) {
            Ok(m) if m.is_dir() => Ok(()),
            _ => Err(SourceError::NotConfigured(format!(
                "the local file folder {} is missing",
                root.display()
            ))),
        })
        .await
    }

    async fn stat(&self, path: &AbsPath) -> Result<Entry, SourceError> {
        let path = path.clone();
        self.blocking(move |root| {
            let disk = resolve(root, &path)?;
            let meta = fs::symlink_metadata(&disk).map_err(|e| io_error(&path, &e))?;
            Ok(entry_of(path, &meta))
        })
        .await
    }

    async fn list(&self, folder: &AbsPath) -> Result<Vec<Entry>, SourceError> {
        let folder = folder.clone();
        self.blocking(move |root| {
            let disk = resolve(root, &folder)?;
            let meta = fs::symlink_metadata(&disk).map_err(|e| io_error(&folder, &e))?;
            if !meta.is_dir() {
                return Err(SourceError::Conflict(format!(
                    "{} is a file, not a folder",
                    shown(&folder)
                )));
            }
            let mut entries = Vec::new();
            for item in fs::read_dir(&disk).map_err(|e| io_error(&folder, &e))? {
                let item = item.map_err(|e| io_error(&folder, &e))?;
                let Ok(name) = item.file_name().into_string() else {
                    continue;
                };
                if name.starts_with(TEMP_PREFIX) {
                    continue;
                }
                let Ok(meta) = item.metadata() else { continue };
                if meta.file_type().is_symlink() {
                    continue;
                }
                // Names that are not valid path segments cannot be addressed.
                let Ok(child) = folder.join_name(&name) else {
                    continue;
                };
                entries.push(entry_of(child, &meta));
            }
            entries.sort_by(|a, b| a.name().cmp(b.name()));
            Ok(entries)
        })
        .await
    }

    async fn read(&self, path: &AbsPath, range: ReadRange) -> Result<ReadStream, SourceError> {
        let owned = path.clone();
        let disk = self.blocking(move |root| resolve(root, &owned)).await?;
        let mut file = tokio::fs::File::open(&disk)
            .await
            .map_err(|e| io_error(path, &e))?;
        let meta = file.metadata().await.map_err(|e| io_error(path, &e))?;
        if meta.is_dir() {
            return Err(SourceError::Conflict(format!(
                "{} is a folder, not a file",
                shown(path)
            )));
        }
        let size = meta.len();
        let start = range.offset.min(size);
        file.seek(std::io::SeekFrom::Start(start))
            .await
            .map_err(|e| io_error(path, &e))?;
        let shown_path = shown(path);
        let body = ReaderStream::with_capacity(file.take(range.len), 64 * 1024);
        let body = futures_util::StreamExt::map(body, move |chunk| {
            chunk.map_err(|_| {
                SourceError::upstream(
                    "local folder",
                    None,
                    format!("{shown_path} could not be read"),
                )
            })
        });
        Ok(ReadStream {
            size: Some(size),
            etag: etag_of(&meta),
            content_type: path.segments().last().and_then(|n| content_type_of(n)),
            offset: start,
            body: Box::pin(body),
        })
    }
}

#[async_trait]
impl FileWriter for LocalFileStore {
    async fn write(
        &self,
        path: &AbsPath,
        content: Bytes,
        precondition: &Precondition,
    ) -> Result<WriteOutcome, SourceError> {
        let _guard = self.writes.lock().await;
        let (path, precondition) = (path.clone(), precondition.clone());
        self.blocking(move |root| {
            if path.segments().is_empty() {
                return Err(SourceError::Conflict("the root is a folder".to_owned()));
            }
            let disk = resolve(root, &path)?;
            parent_folder(&path, &disk)?;
            let existing = lstat(&disk);
            if existing.as_ref().is_some_and(fs::Metadata::is_dir) {
                return Err(SourceError::Conflict(format!(
                    "{} is a folder",
                    shown(&path)
                )));
            }
            match &precondition {
                Precondition::None => {}
                Precondition::IfMatch(tag) => check_etag(&path, existing.as_ref(), tag)?,
                Precondition::CreateOnly if existing.is_some() => {
                    return Err(SourceError::PreconditionFailed(format!(
                        "{} already exists",
                        shown(&path)
                    )));
                }
                Precondition::CreateOnly => {}
            }
            let temp = temp_path(&disk);
            let written = (|| {
                let mut file = fs::File::create_new(&temp)?;
                file.write_all(&content)?;
                file.sync_all()?;
                fs::rename(&temp, &disk)
            })();
            if let Err(error) = written {
                let _ = fs::remove_file(&temp);
                return Err(io_error(&path, &error));
            }
            let meta = fs::metadata(&disk).map_err(|e| io_error(&path, &e))?;
            Ok(WriteOutcome {
                created: existing.is_none(),
                etag: etag_of(&meta),
            })
        })
        .await
    }

    async fn move_to(
        &self,
        from: &AbsPath,
        to: &AbsPath,
        overwrite: bool,
    ) -> Result<(), SourceError> {
        self.transfer(from, to, overwrite, Transfer::Move).await
    }

    async fn copy_to(
        &self,
        from: &AbsPath,
        to: &AbsPath,
        overwrite: bool,
    ) -> Result<(), SourceError> {
        self.transfer(from, to, overwrite, Transfer::Copy).await
    }

    async fn make_folders(&self, folder: &AbsPath) -> Result<(), SourceError> {
        let _guard = self.writes.lock().await;
        let folder = folder.clone();
        self.blocking(move |root| {
            let mut disk = root.to_path_buf();
            for (depth, segment) in folder.segments().iter().enumerate() {
                disk.push(segment);
                match lstat(&disk) {
                    Some(meta) if meta.file_type().is_symlink() => {
                        return Err(SourceError::PermissionDenied(
                            "symbolic links are not followed".to_owned(),
                        ));
                    }
                    Some(meta) if meta.is_dir() => {}
                    Some(_) => {
                        let blocking = folder
                            .segments()
                            .get(..=depth)
                            .unwrap_or_default()
                            .join("/");
                        return Err(SourceError::Conflict(format!(
                            "/{blocking} is a file, so no folder can be created inside it"
                        )));
                    }
                    None => match fs::create_dir(&disk) {
                        Ok(()) => {}
                        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(io_error(&folder, &e)),
                    },
                }
            }
            Ok(())
        })
        .await
    }
}

#[derive(Clone, Copy)]
enum Transfer {
    Move,
    Copy,
}

impl LocalFileStore {
    async fn transfer(
        &self,
        from: &AbsPath,
        to: &AbsPath,
        overwrite: bool,
        kind: Transfer,
    ) -> Result<(), SourceError> {
        check_transfer(from, to)?;
        let _guard = self.writes.lock().await;
        let (from, to) = (from.clone(), to.clone());
        self.blocking(move |root| {
            let source = resolve(root, &from)?;
            let target = resolve(root, &to)?;
            if lstat(&source).is_none() {
                return Err(SourceError::NotFound(shown(&from)));
            }
            parent_folder(&to, &target)?;
            if let Some(existing) = lstat(&target) {
                if !overwrite {
                    return Err(SourceError::PreconditionFailed(format!(
                        "{} already exists and overwrite is off",
                        shown(&to)
                    )));
                }
                remove_any(&target, &existing).map_err(|e| io_error(&to, &e))?;
            }
            let done = match kind {
                Transfer::Move => fs::rename(&source, &target),
                Transfer::Copy => copy_tree(&source, &target),
            };
            done.map_err(|e| io_error(&to, &e))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_come_from_extensions() {
        assert_eq!(
            content_type_of("notes.MD").as_deref(),
            Some("text/markdown")
        );
        assert_eq!(
            content_type_of("plan.xlsx").as_deref(),
            Some("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
        );
        assert_eq!(content_type_of("README"), None);
        assert_eq!(content_type_of("x.unknown"), None);
    }

    #[tokio::test]
    async fn symbolic_links_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.txt"), "secret").unwrap();
        let store = LocalFileStore::open(dir.path().join("root")).unwrap();
        fs::create_dir(dir.path().join("root/P")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(outside.path(), dir.path().join("root/P/link")).unwrap();
        let through = AbsPath::parse("/P/link/secret.txt").unwrap();
        assert!(matches!(
            store.stat(&through).await,
            Err(SourceError::PermissionDenied(_))
        ));
        assert!(matches!(
            store.read(&through, ReadRange::new(0, 10)).await,
            Err(SourceError::PermissionDenied(_))
        ));
        let listed = store.list(&AbsPath::parse("/P").unwrap()).await.unwrap();
        assert!(listed.is_empty(), "links are not listed: {listed:?}");
        let write = store
            .write(&through, Bytes::from_static(b"x"), &Precondition::None)
            .await;
        assert!(matches!(write, Err(SourceError::PermissionDenied(_))));
        assert_eq!(
            fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
            "secret"
        );
    }
}
