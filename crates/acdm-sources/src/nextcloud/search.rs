//! File search through Nextcloud's OCS unified search
//! (`GET /ocs/v2.php/search/providers/files/search?term=…&limit=…&cursor=…`,
//! `OCS-APIRequest: true`, JSON envelope `{"ocs":{"meta":…,"data":…}}`,
//! `shared/reference/upstream-wire-formats.md` §2). The `files` provider
//! matches names only; `limit` is at most 25 and the cursor is an integer
//! offset. Every hit's `attributes.path` (user-relative, leading `/`) is
//! parsed and kept only when it lies inside the requested scope.

use acdm_core::AbsPath;
use async_trait::async_trait;
use http::StatusCode;
use http::header::{HeaderMap, HeaderValue};
use serde::Deserialize;

use crate::FileSearch;
use crate::error::SourceError;
use crate::http::{
    HttpClient, Idempotency, UpstreamRequest, read_capped, retry_after, unexpected_status,
};
use crate::model::{EntryKind, FileHit};
use crate::nextcloud::{Endpoint, NextcloudConfig, SOURCE};

/// The provider's own page limit.
const PAGE_LIMIT: usize = 25;
/// Pages fetched at most for one search.
const MAX_PAGES: usize = 8;
const MAX_JSON_BYTES: usize = 4 << 20;

/// A [`FileSearch`] on Nextcloud.
#[derive(Debug, Clone)]
pub struct NextcloudSearch {
    endpoint: Endpoint,
}

#[derive(Deserialize)]
struct Envelope {
    ocs: Ocs,
}

#[derive(Deserialize)]
struct Ocs {
    meta: Meta,
    #[serde(default)]
    data: serde_json::Value,
}

#[derive(Deserialize)]
struct Meta {
    status: String,
    #[serde(default)]
    statuscode: Option<i64>,
}

#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    entries: Vec<SearchEntry>,
    #[serde(default)]
    cursor: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct SearchEntry {
    #[serde(default)]
    icon: Option<String>,
    #[serde(default)]
    attributes: Option<serde_json::Map<String, serde_json::Value>>,
}

impl NextcloudSearch {
    /// A client for `config`, sending through `http`.
    pub fn new(config: NextcloudConfig, http: HttpClient) -> Result<Self, SourceError> {
        Ok(Self {
            endpoint: Endpoint::new(config, http)?,
        })
    }

    async fn page(&self, term: &str, cursor: u64) -> Result<Page, SourceError> {
        let mut url = self.endpoint.search_url().clone();
        url.query_pairs_mut()
            .append_pair("term", term)
            .append_pair("limit", &PAGE_LIMIT.to_string())
            .append_pair("cursor", &cursor.to_string());
        let credentials = self.endpoint.credentials()?;
        let mut headers = HeaderMap::new();
        headers.insert("ocs-apirequest", HeaderValue::from_static("true"));
        headers.insert("accept", HeaderValue::from_static("application/json"));
        let response = self
            .endpoint
            .http()
            .send(
                SOURCE,
                Idempotency::Read,
                &credentials.apply(
                    UpstreamRequest::new(http::Method::GET, url)
                        .headers(&headers)
                        .accept_gzip(),
                ),
            )
            .await?;
        let status = response.status();
        let response_headers = response.headers().clone();
        let body = read_capped(SOURCE, response, MAX_JSON_BYTES).await?;
        let envelope: Option<Envelope> = serde_json::from_slice(&body).ok();
        match status {
            StatusCode::OK => {}
            StatusCode::UNAUTHORIZED => {
                return Err(SourceError::upstream(
                    SOURCE,
                    Some(401),
                    "Nextcloud rejected the service account; an operator must check NEXTCLOUD_USER and NEXTCLOUD_APP_PASSWORD",
                ));
            }
            StatusCode::TOO_MANY_REQUESTS => {
                return Err(SourceError::RateLimited {
                    source_name: SOURCE,
                    retry_after: retry_after(&response_headers),
                });
            }
            StatusCode::BAD_REQUEST => {
                return Err(SourceError::InvalidRequest(
                    "Nextcloud refused the search term".to_owned(),
                ));
            }
            other => return Err(unexpected_status(SOURCE, other, &response_headers)),
        }
        let envelope = envelope.ok_or_else(|| {
            SourceError::invalid(SOURCE, "the search answer is not the OCS JSON envelope")
        })?;
        if envelope.ocs.meta.status != "ok" {
            return Err(SourceError::upstream(
                SOURCE,
                envelope
                    .ocs
                    .meta
                    .statuscode
                    .and_then(|c| u16::try_from(c).ok()),
                "the search failed",
            ));
        }
        serde_json::from_value(envelope.ocs.data)
            .map_err(|_| SourceError::invalid(SOURCE, "the search answer has no entries list"))
    }
}

fn cursor_of(value: Option<&serde_json::Value>) -> Option<u64> {
    match value? {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

#[async_trait]
impl FileSearch for NextcloudSearch {
    fn kind(&self) -> &'static str {
        "nextcloud"
    }

    /// One page of a one-letter search: proves the credentials and the
    /// search endpoint without listing anything large.
    async fn check(&self) -> Result<(), SourceError> {
        self.page("a", 0).await.map(drop)
    }

    async fn search(
        &self,
        term: &str,
        limit: usize,
        scope: &AbsPath,
    ) -> Result<Vec<FileHit>, SourceError> {
        let term = crate::search_term(term)?;
        let limit = limit.max(1);
        let mut hits: Vec<FileHit> = Vec::new();
        let mut cursor = 0u64;
        for _ in 0..MAX_PAGES {
            let page = self.page(term, cursor).await?;
            let count = page.entries.len();
            for entry in page.entries {
                let Some(path) = entry
                    .attributes
                    .as_ref()
                    .and_then(|a| a.get("path"))
                    .and_then(serde_json::Value::as_str)
                else {
                    continue;
                };
                // Outside the scope, or not a valid path: dropped, never shown.
                let Ok(rel) = scope.strip_prefix_of(path) else {
                    continue;
                };
                if rel.is_root() {
                    continue;
                }
                let path = scope.join(&rel);
                if hits.iter().any(|h| h.path == path) {
                    continue;
                }
                let kind = match entry.icon.as_deref() {
                    Some("icon-folder") => Some(EntryKind::Folder),
                    Some(_) => Some(EntryKind::File),
                    None => None,
                };
                hits.push(FileHit {
                    path,
                    kind,
                    snippet: None,
                    line: None,
                });
                if hits.len() >= limit {
                    return Ok(hits);
                }
            }
            // A short page is the last one (the provider always returns a
            // next cursor, so it cannot be relied on to end the paging).
            match cursor_of(page.cursor.as_ref()) {
                Some(next) if count >= PAGE_LIMIT && next > cursor => cursor = next,
                _ => break,
            }
        }
        Ok(hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_integers_or_numeric_strings() {
        assert_eq!(cursor_of(Some(&serde_json::json!(25))), Some(25));
        assert_eq!(cursor_of(Some(&serde_json::json!("50"))), Some(50));
        assert_eq!(cursor_of(Some(&serde_json::json!(null))), None);
        assert_eq!(cursor_of(None), None);
    }
}
