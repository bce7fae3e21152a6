//! The project files on Nextcloud over WebDAV (sabre/dav semantics,
//! `shared/reference/upstream-wire-formats.md` §3): PROPFIND depth 0/1,
//! ranged GET (206/416), PUT with `If-Match` / `If-None-Match: *` (412),
//! DELETE, MOVE/COPY with an absolute `Destination` and `Overwrite`, MKCOL
//! (405 exists, 409 no parent), 423 locked.

use acdm_core::AbsPath;
use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};

use crate::error::SourceError;
use crate::http::HttpClient;
use crate::http::{
    Idempotency, Upstream, UpstreamRequest, read_capped, retry_after, unexpected_status,
};
use crate::model::{
    ETag, Entry, EntryKind, Precondition, ReadRange, ReadStream, WriteOutcome, window_of,
};
use crate::nextcloud::multistatus::{self, DavResponse};
use crate::nextcloud::{Endpoint, NextcloudConfig, SOURCE};
use crate::{FileReader, FileWriter, check_transfer, shown};

/// Largest multistatus body accepted (a folder listing).
const MAX_MULTISTATUS_BYTES: usize = 16 << 20;

const PROPFIND_BODY: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">
  <d:prop>
    <d:getlastmodified/><d:getcontentlength/><d:getcontenttype/><d:getetag/><d:resourcetype/>
    <oc:fileid/>
  </d:prop>
</d:propfind>"#;

/// A [`FileWriter`] on Nextcloud WebDAV.
#[derive(Debug, Clone)]
pub struct NextcloudFiles {
    endpoint: Endpoint,
}

fn method(name: &'static str) -> Method {
    Method::from_bytes(name.as_bytes()).unwrap_or(Method::GET)
}

fn etag_header(headers: &HeaderMap) -> Option<ETag> {
    ["oc-etag", "etag"]
        .iter()
        .find_map(|name| headers.get(*name)?.to_str().ok().and_then(ETag::parse))
}

fn entry_from(path: AbsPath, r: &DavResponse) -> Entry {
    let kind = if r.collection {
        EntryKind::Folder
    } else {
        EntryKind::File
    };
    Entry {
        path,
        kind,
        size: if r.collection { None } else { r.content_length },
        modified: r
            .last_modified
            .as_deref()
            .and_then(|d| DateTime::parse_from_rfc2822(d).ok())
            .map(|d| d.with_timezone(&Utc)),
        etag: r.etag.as_deref().and_then(ETag::parse),
        content_type: if r.collection {
            None
        } else {
            r.content_type.clone()
        },
    }
}

impl NextcloudFiles {
    /// A client for `config`, sending through `http`.
    pub fn new(config: NextcloudConfig, http: HttpClient) -> Result<Self, SourceError> {
        Ok(Self {
            endpoint: Endpoint::new(config, http)?,
        })
    }

    /// Sends one WebDAV request for `path`.
    async fn call(
        &self,
        idempotency: Idempotency,
        method: Method,
        path: &AbsPath,
        headers: HeaderMap,
        body: Option<Bytes>,
    ) -> Result<Upstream, SourceError> {
        let url = self.endpoint.url_for(path)?;
        let credentials = self.endpoint.credentials()?;
        // A multistatus may come gzip-compressed; a file's bytes never do.
        let listing = method.as_str() == "PROPFIND";
        let request = UpstreamRequest::new(method, url)
            .headers(&headers)
            .body(body.unwrap_or_default());
        let request = if listing {
            request.accept_gzip()
        } else {
            request
        };
        let response = self
            .endpoint
            .http()
            .send(SOURCE, idempotency, &credentials.apply(request))
            .await?;
        if response.status() == StatusCode::UNAUTHORIZED {
            return Err(SourceError::upstream(
                SOURCE,
                Some(401),
                "Nextcloud rejected the service account; an operator must check NEXTCLOUD_USER and NEXTCLOUD_APP_PASSWORD",
            ));
        }
        Ok(response)
    }

    async fn propfind(
        &self,
        path: &AbsPath,
        depth: &'static str,
    ) -> Result<Vec<(AbsPath, DavResponse)>, SourceError> {
        let mut headers = HeaderMap::new();
        headers.insert("depth", HeaderValue::from_static(depth));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml; charset=utf-8"),
        );
        let response = self
            .call(
                Idempotency::Read,
                method("PROPFIND"),
                path,
                headers,
                Some(Bytes::from_static(PROPFIND_BODY.as_bytes())),
            )
            .await?;
        match response.status() {
            StatusCode::MULTI_STATUS => {}
            StatusCode::NOT_FOUND => return Err(SourceError::NotFound(shown(path))),
            status => return Err(self.error(status, response.headers(), path)),
        }
        let body = read_capped(SOURCE, response, MAX_MULTISTATUS_BYTES).await?;
        let responses = multistatus::parse(&body)?;
        responses
            .into_iter()
            .filter(|r| r.ok)
            .map(|r| Ok((self.endpoint.path_of_href(&r.href)?, r)))
            .collect()
    }

    /// The status mapping shared by every method.
    fn error(&self, status: StatusCode, headers: &HeaderMap, path: &AbsPath) -> SourceError {
        match status {
            StatusCode::NOT_FOUND => SourceError::NotFound(shown(path)),
            StatusCode::FORBIDDEN => SourceError::PermissionDenied(format!(
                "Nextcloud refused the operation on {}",
                shown(path)
            )),
            StatusCode::LOCKED => SourceError::Locked {
                message: format!("{} is locked by another writer", shown(path)),
                retry_after: retry_after(headers),
            },
            StatusCode::INSUFFICIENT_STORAGE => {
                SourceError::upstream(SOURCE, Some(507), "the Nextcloud account is out of quota")
            }
            _ => unexpected_status(SOURCE, status, headers),
        }
    }

    /// After a 405/409 that could mean several things, looks at what is
    /// there to say which.
    async fn explain_conflict(&self, path: &AbsPath, fallback: String) -> SourceError {
        match self.stat(path).await {
            Ok(entry) if entry.is_folder() => {
                SourceError::Conflict(format!("{} is a folder", shown(path)))
            }
            Ok(_) => SourceError::Conflict(fallback),
            Err(_) => SourceError::Conflict(fallback),
        }
    }

    async fn transfer(
        &self,
        verb: &'static str,
        from: &AbsPath,
        to: &AbsPath,
        overwrite: bool,
    ) -> Result<(), SourceError> {
        check_transfer(from, to)?;
        let destination = self.endpoint.url_for(to)?;
        let mut headers = HeaderMap::new();
        headers.insert(
            "destination",
            HeaderValue::from_str(destination.as_str()).map_err(|_| {
                SourceError::InvalidRequest(format!("{} cannot be a destination", shown(to)))
            })?,
        );
        headers.insert(
            "overwrite",
            HeaderValue::from_static(if overwrite { "T" } else { "F" }),
        );
        headers.insert("depth", HeaderValue::from_static("infinity"));
        let response = self
            .call(Idempotency::Write, method(verb), from, headers, None)
            .await?;
        match response.status() {
            StatusCode::CREATED | StatusCode::NO_CONTENT | StatusCode::OK => Ok(()),
            StatusCode::PRECONDITION_FAILED => Err(SourceError::PreconditionFailed(format!(
                "{} already exists and overwrite is off",
                shown(to)
            ))),
            StatusCode::CONFLICT => Err(SourceError::Conflict(format!(
                "the folder that should contain {} does not exist",
                shown(to)
            ))),
            StatusCode::NOT_FOUND => Err(SourceError::NotFound(shown(from))),
            status => Err(self.error(status, response.headers(), from)),
        }
    }
}

#[async_trait]
impl FileReader for NextcloudFiles {
    fn kind(&self) -> &'static str {
        "nextcloud"
    }

    async fn check(&self) -> Result<(), SourceError> {
        self.propfind(&AbsPath::root(), "0").await.map(|_| ())
    }

    async fn stat(&self, path: &AbsPath) -> Result<Entry, SourceError> {
        let mut found = self.propfind(path, "0").await?;
        match found.pop() {
            Some((href_path, r)) if found.is_empty() && href_path == *path => {
                Ok(entry_from(href_path, &r))
            }
            _ => Err(SourceError::invalid(
                SOURCE,
                format!("the answer for {} names other paths", shown(path)),
            )),
        }
    }

    async fn list(&self, folder: &AbsPath) -> Result<Vec<Entry>, SourceError> {
        let found = self.propfind(folder, "1").await?;
        let mut entries = Vec::new();
        let mut saw_self = false;
        for (path, r) in found {
            if path == *folder {
                if !r.collection {
                    return Err(SourceError::Conflict(format!(
                        "{} is a file, not a folder",
                        shown(folder)
                    )));
                }
                saw_self = true;
                continue;
            }
            let direct_child =
                path.segments().len() == folder.segments().len() + 1 && folder.contains(&path);
            if !direct_child {
                return Err(SourceError::invalid(
                    SOURCE,
                    format!("the listing of {} names paths outside it", shown(folder)),
                ));
            }
            entries.push(entry_from(path, &r));
        }
        if !saw_self {
            return Err(SourceError::invalid(
                SOURCE,
                format!(
                    "the listing of {} does not describe the folder itself",
                    shown(folder)
                ),
            ));
        }
        entries.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(entries)
    }

    async fn read(&self, path: &AbsPath, range: ReadRange) -> Result<ReadStream, SourceError> {
        let mut headers = HeaderMap::new();
        headers.insert(header::RANGE, range_header(range)?);
        let response = self
            .call(Idempotency::Read, Method::GET, path, headers, None)
            .await?;
        let status = response.status();
        let etag = etag_header(response.headers());
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let (size, skip) = match status {
            StatusCode::PARTIAL_CONTENT => {
                let (start, total) = content_range(response.headers()).ok_or_else(|| {
                    SourceError::invalid(SOURCE, "a 206 without a usable Content-Range")
                })?;
                if start != range.offset {
                    return Err(SourceError::invalid(
                        SOURCE,
                        "the server sent another range than asked",
                    ));
                }
                (total, 0)
            }
            // The server ignored Range: skip to the window while streaming.
            StatusCode::OK => (response.content_length(), range.offset),
            StatusCode::RANGE_NOT_SATISFIABLE => {
                let entry = self.stat(path).await?;
                if entry.is_folder() {
                    return Err(SourceError::Conflict(format!(
                        "{} is a folder, not a file",
                        shown(path)
                    )));
                }
                return Ok(ReadStream {
                    size: entry.size,
                    etag: entry.etag,
                    content_type: entry.content_type,
                    offset: range.offset,
                    body: Box::pin(futures_util::stream::empty()),
                });
            }
            StatusCode::NOT_FOUND => return Err(SourceError::NotFound(shown(path))),
            other => {
                let error = self.error(other, response.headers(), path);
                drop(response);
                // A folder answers GET with an error page or an archive.
                if let Ok(entry) = self.stat(path).await
                    && entry.is_folder()
                {
                    return Err(SourceError::Conflict(format!(
                        "{} is a folder, not a file",
                        shown(path)
                    )));
                }
                return Err(error);
            }
        };
        let stream = response.bytes_stream();
        Ok(ReadStream {
            size,
            etag,
            content_type,
            offset: range.offset,
            body: window_of(Box::pin(stream), skip, range.len),
        })
    }
}

#[async_trait]
impl FileWriter for NextcloudFiles {
    async fn write(
        &self,
        path: &AbsPath,
        content: Bytes,
        precondition: &Precondition,
    ) -> Result<WriteOutcome, SourceError> {
        if path.segments().is_empty() {
            return Err(SourceError::Conflict("the root is a folder".to_owned()));
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        match precondition {
            Precondition::None => {}
            Precondition::IfMatch(tag) => {
                headers.insert(
                    header::IF_MATCH,
                    HeaderValue::from_str(&tag.header_value())
                        .map_err(|_| SourceError::InvalidRequest("invalid etag".to_owned()))?,
                );
            }
            Precondition::CreateOnly => {
                headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
            }
        }
        let response = self
            .call(
                Idempotency::Write,
                Method::PUT,
                path,
                headers,
                Some(content),
            )
            .await?;
        let created = match response.status() {
            StatusCode::CREATED => true,
            StatusCode::NO_CONTENT | StatusCode::OK => false,
            StatusCode::PRECONDITION_FAILED => {
                return Err(SourceError::PreconditionFailed(match precondition {
                    Precondition::CreateOnly => format!("{} already exists", shown(path)),
                    _ => format!(
                        "{} has changed since it was read (etag mismatch), or no longer exists",
                        shown(path)
                    ),
                }));
            }
            StatusCode::CONFLICT | StatusCode::METHOD_NOT_ALLOWED => {
                let fallback = format!(
                    "the folder that should contain {} does not exist",
                    shown(path)
                );
                return Err(self.explain_conflict(path, fallback).await);
            }
            StatusCode::NOT_FOUND if matches!(precondition, Precondition::IfMatch(_)) => {
                return Err(SourceError::PreconditionFailed(format!(
                    "{} does not exist, so it cannot match the etag",
                    shown(path)
                )));
            }
            StatusCode::NOT_FOUND => {
                return Err(SourceError::Conflict(format!(
                    "the folder that should contain {} does not exist",
                    shown(path)
                )));
            }
            status => return Err(self.error(status, response.headers(), path)),
        };
        let etag = match etag_header(response.headers()) {
            Some(tag) => Some(tag),
            None => self.stat(path).await.ok().and_then(|e| e.etag),
        };
        Ok(WriteOutcome { created, etag })
    }

    async fn move_to(
        &self,
        from: &AbsPath,
        to: &AbsPath,
        overwrite: bool,
    ) -> Result<(), SourceError> {
        self.transfer("MOVE", from, to, overwrite).await
    }

    async fn copy_to(
        &self,
        from: &AbsPath,
        to: &AbsPath,
        overwrite: bool,
    ) -> Result<(), SourceError> {
        self.transfer("COPY", from, to, overwrite).await
    }

    async fn make_folders(&self, folder: &AbsPath) -> Result<(), SourceError> {
        match self.stat(folder).await {
            Ok(entry) if entry.is_folder() => return Ok(()),
            Ok(_) => {
                return Err(SourceError::Conflict(format!(
                    "{} is a file",
                    shown(folder)
                )));
            }
            Err(SourceError::NotFound(_)) => {}
            Err(other) => return Err(other),
        }
        let mut current = AbsPath::root();
        for segment in folder.segments() {
            current = current.join_name(segment).map_err(|_| {
                SourceError::InvalidRequest(format!("{} cannot be created", shown(folder)))
            })?;
            let response = self
                .call(
                    Idempotency::Write,
                    method("MKCOL"),
                    &current,
                    HeaderMap::new(),
                    None,
                )
                .await?;
            match response.status() {
                StatusCode::CREATED | StatusCode::OK | StatusCode::NO_CONTENT => {}
                StatusCode::METHOD_NOT_ALLOWED => {
                    // Something is there already: fine if it is a folder.
                    if !self.stat(&current).await?.is_folder() {
                        return Err(SourceError::Conflict(format!(
                            "{} is a file, so no folder can be created inside it",
                            shown(&current)
                        )));
                    }
                }
                StatusCode::CONFLICT => {
                    return Err(SourceError::Conflict(format!(
                        "{} cannot be created: its parent is not a folder",
                        shown(&current)
                    )));
                }
                status => {
                    // Another writer may have created it at the same moment
                    // (servers answer such a race with 405, 423 or even
                    // 500): if a folder is there now, that is what was asked.
                    let error = self.error(status, response.headers(), &current);
                    if !matches!(self.stat(&current).await, Ok(entry) if entry.is_folder()) {
                        return Err(error);
                    }
                }
            }
        }
        Ok(())
    }
}

/// `Content-Range: bytes START-END/TOTAL` → (START, TOTAL); TOTAL may be `*`.
fn content_range(headers: &HeaderMap) -> Option<(u64, Option<u64>)> {
    let value = headers.get(header::CONTENT_RANGE)?.to_str().ok()?;
    let rest = value.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (start, _end) = range.split_once('-')?;
    let total = if total == "*" {
        None
    } else {
        Some(total.parse().ok()?)
    };
    Some((start.parse().ok()?, total))
}

/// The `Range` header of `range`: `bytes=<first>-<last>`, both inclusive,
/// the last byte saturating at `u64::MAX` (a zero length, which
/// [`ReadRange::new`] never makes, asks for the first byte). Written by hand: a `format!`
/// and its copy into the header were a read's largest formatting.
fn range_header(range: ReadRange) -> Result<HeaderValue, SourceError> {
    let last = range.offset.saturating_add(range.len.saturating_sub(1));
    let mut value = Vec::with_capacity(48);
    value.extend_from_slice(b"bytes=");
    value.extend_from_slice(itoa::Buffer::new().format(range.offset).as_bytes());
    value.push(b'-');
    value.extend_from_slice(itoa::Buffer::new().format(last).as_bytes());
    HeaderValue::from_maybe_shared(bytes::Bytes::from(value))
        .map_err(|_| SourceError::InvalidRequest("invalid range".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_header_names_the_first_and_last_byte_as_format_writes_them() {
        for (offset, len) in [
            (0, 1),
            (0, 4096),
            (9, 10),
            (4095, 1),
            (1 << 40, 65_536),
            (u64::MAX - 1, 1),
            (u64::MAX - 5, 100),
            (u64::MAX, 1),
        ] {
            let range = ReadRange::new(offset, len);
            let last = offset.saturating_add(range.len - 1);
            assert_eq!(
                range_header(range).unwrap().to_str().unwrap(),
                format!("bytes={offset}-{last}")
            );
        }
        let empty = ReadRange { offset: 7, len: 0 };
        assert_eq!(range_header(empty).unwrap().to_str().unwrap(), "bytes=7-7");
    }

    #[test]
    fn content_range_headers_are_read_strictly() {
        let check = |value: &str, expected: Option<(u64, Option<u64>)>| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_RANGE, HeaderValue::from_str(value).unwrap());
            assert_eq!(content_range(&h), expected, "{value}");
        };
        check("bytes 0-99/1000", Some((0, Some(1000))));
        check("bytes 100-199/*", Some((100, None)));
        check("bytes */1000", None);
        check("items 0-1/2", None);
        check("bytes x-1/2", None);
    }
}
