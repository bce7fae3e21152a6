//! The wiki on GitLab (REST v4): project blob search and raw file reads.
//!
//! Wire format (`shared/reference/upstream-wire-formats.md` §1):
//! `GET /api/v4/projects/:id/search?scope=blobs&search=…` answers a JSON
//! array of blobs (`path`, `startline`, `data`, …) paginated by
//! `X-Next-Page` (empty on the last page; `X-Total` only below 10,000);
//! `GET /api/v4/projects/:id/repository/files/:path/raw?ref=…` answers the
//! raw bytes, with `:path` one segment (`/` → `%2F`, `.` → `%2E`). Errors
//! are `{"message":"404 File Not Found"}`-style bodies; rate limits come as
//! a plain-text 429 with `Retry-After`/`RateLimit-Reset`, or a JSON 429
//! from the search's own limit. The token travels in `PRIVATE-TOKEN`.

use acdm_core::RelPath;
use async_trait::async_trait;
use http::StatusCode;
use http::header::{HeaderMap, HeaderValue};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use url::Url;

use crate::WikiSource;
use crate::error::SourceError;
use crate::http::{
    HttpClient, Idempotency, Upstream, UpstreamRequest, read_capped, retry_after, unexpected_status,
};
use crate::model::{
    GitRef, ReadRange, ReadStream, WikiHit, WikiQuery, WikiSearch, WikiWindow, window_of,
};

const SOURCE: &str = "GitLab";
/// Search pages fetched at most for one query.
const MAX_PAGES: u32 = 5;
/// Longest snippet kept from a blob's `data`.
const SNIPPET_CHARS: usize = 600;
/// Largest JSON body accepted from the search or an error.
const MAX_JSON_BYTES: usize = 4 << 20;

/// Everything but `A-Z a-z 0-9 - _ ~` is encoded, so a repository path
/// becomes one URL segment (`docs/a.md` → `docs%2Fa%2Emd`).
const FILE_PATH_SET: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'~');

/// How to reach the wiki project.
#[derive(Debug, Clone)]
pub struct GitLabConfig {
    /// Instance root (`https://gitlab.example.com`).
    pub base_url: Url,
    /// Numeric project id or `group/project`.
    pub project: String,
    /// The personal access token; `None` makes every call `NotConfigured`.
    pub token: Option<SecretString>,
    /// The branch read when no ref is given.
    pub default_ref: GitRef,
}

/// A [`WikiSource`] on GitLab.
#[derive(Debug, Clone)]
pub struct GitLabWiki {
    http: HttpClient,
    project_url: Url,
    token: Option<SecretString>,
    default_ref: GitRef,
}

#[derive(Deserialize)]
struct Blob {
    path: String,
    #[serde(default)]
    startline: Option<u64>,
    #[serde(default)]
    data: Option<String>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: Option<serde_json::Value>,
    #[serde(default)]
    error: Option<String>,
}

impl GitLabWiki {
    /// A client for `config`, sending through `http`.
    pub fn new(config: GitLabConfig, http: HttpClient) -> Result<Self, SourceError> {
        let mut project_url = config.base_url.clone();
        project_url
            .path_segments_mut()
            .map_err(|()| {
                SourceError::NotConfigured("GITLAB_WIKI_BASE_URL cannot be a base URL".to_owned())
            })?
            .pop_if_empty()
            .extend(["api", "v4", "projects", config.project.as_str()]);
        project_url.set_query(None);
        Ok(Self {
            http,
            project_url,
            token: config.token,
            default_ref: config.default_ref,
        })
    }

    fn headers(&self) -> Result<HeaderMap, SourceError> {
        let token = self
            .token
            .as_ref()
            .ok_or_else(|| SourceError::NotConfigured("GITLAB_WIKI_PAT is not set".to_owned()))?;
        let mut value = HeaderValue::from_str(token.expose_secret()).map_err(|_| {
            SourceError::NotConfigured("GITLAB_WIKI_PAT is not a valid header value".to_owned())
        })?;
        value.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert("private-token", value);
        Ok(headers)
    }

    fn url(&self, tail: &str) -> Url {
        let mut url = self.project_url.clone();
        url.set_path(&format!("{}{tail}", self.project_url.path()));
        url
    }

    /// The raw-file URL of `path`, with the path as one encoded segment.
    fn raw_url(&self, path: &RelPath, git_ref: &GitRef) -> Url {
        let encoded = utf8_percent_encode(&path.to_string(), FILE_PATH_SET).to_string();
        let mut url = self.url(&format!("/repository/files/{encoded}/raw"));
        url.query_pairs_mut().append_pair("ref", git_ref.as_str());
        url
    }

    /// A GET of `url`; a JSON answer (`json`) may come gzip-compressed,
    /// a file's raw bytes never do.
    async fn get(&self, url: Url, json: bool) -> Result<Upstream, SourceError> {
        let headers = self.headers()?;
        let request = UpstreamRequest::new(http::Method::GET, url).headers(&headers);
        let request = if json { request.accept_gzip() } else { request };
        self.http.send(SOURCE, Idempotency::Read, &request).await
    }

    /// Maps an error response, reading its (small) body for the message.
    async fn failure(response: Upstream, what: &str, git_ref: Option<&GitRef>) -> SourceError {
        let status = response.status();
        let headers = response.headers().clone();
        let body = read_capped(SOURCE, response, 64 * 1024)
            .await
            .unwrap_or_default();
        let parsed: Option<ErrorBody> = serde_json::from_slice(&body).ok();
        let message = parsed
            .as_ref()
            .and_then(|b| match &b.message {
                Some(serde_json::Value::String(s)) => Some(s.clone()),
                Some(other) => Some(other.to_string()),
                None => b.error.clone(),
            })
            .unwrap_or_default();
        match status {
            StatusCode::UNAUTHORIZED => SourceError::upstream(
                SOURCE,
                Some(401),
                "GitLab rejected the token; an operator must check GITLAB_WIKI_PAT",
            ),
            StatusCode::FORBIDDEN => SourceError::PermissionDenied(
                "GitLab refused access to the wiki project; the token needs read_api".to_owned(),
            ),
            StatusCode::NOT_FOUND if message.contains("Project") => SourceError::NotConfigured(
                "the wiki project (GITLAB_WIKI_PROJECT_ID) does not exist or the token cannot see it".to_owned(),
            ),
            StatusCode::NOT_FOUND if message.contains("Commit") || message.contains("Tree") => {
                SourceError::NotFound(format!(
                    "ref `{}` does not exist in the wiki",
                    git_ref.map_or("?", GitRef::as_str)
                ))
            }
            StatusCode::NOT_FOUND => SourceError::NotFound(what.to_owned()),
            StatusCode::BAD_REQUEST => SourceError::InvalidRequest(format!("GitLab refused the request: {what}")),
            StatusCode::TOO_MANY_REQUESTS => SourceError::RateLimited {
                source_name: SOURCE,
                retry_after: retry_after(&headers),
            },
            _ => unexpected_status(SOURCE, status, &headers),
        }
    }
}

fn header_u64(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

fn clip(data: &str) -> String {
    if data.chars().count() <= SNIPPET_CHARS {
        data.to_owned()
    } else {
        let mut s: String = data.chars().take(SNIPPET_CHARS).collect();
        s.push('…');
        s
    }
}

#[async_trait]
impl WikiSource for GitLabWiki {
    fn kind(&self) -> &'static str {
        "gitlab"
    }

    async fn check(&self) -> Result<(), SourceError> {
        let response = self.get(self.project_url.clone(), true).await?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(Self::failure(response, "the wiki project", None).await)
        }
    }

    async fn search(&self, query: &WikiQuery) -> Result<WikiSearch, SourceError> {
        let term = crate::search_term(&query.term)?;
        let limit = query.limit.clamp(1, 100);
        // GitLab's `path:` filter is a substring match; results are
        // re-checked segment by segment below. A prefix with whitespace
        // would break the query syntax, so it is only re-checked.
        let prefix = query.path_prefix.clone().filter(|p| !p.is_root());
        let filtered = prefix
            .as_ref()
            .is_some_and(|p| !p.to_string().contains(char::is_whitespace));
        let search = match (&prefix, filtered) {
            (Some(p), true) => format!("{term} path:{p}"),
            _ => term.to_owned(),
        };
        let per_page = limit.clamp(20, 100).to_string();
        let mut hits = Vec::new();
        let mut total = None;
        let mut page: u32 = 1;
        loop {
            let mut url = self.url("/search");
            {
                let mut pairs = url.query_pairs_mut();
                pairs
                    .append_pair("scope", "blobs")
                    .append_pair("search", &search);
                if let Some(r) = &query.git_ref {
                    pairs.append_pair("ref", r.as_str());
                }
                pairs
                    .append_pair("per_page", &per_page)
                    .append_pair("page", &page.to_string());
            }
            let response = self.get(url, true).await?;
            if !response.status().is_success() {
                return Err(
                    Self::failure(response, "the wiki search", query.git_ref.as_ref()).await,
                );
            }
            let headers = response.headers().clone();
            if page == 1 && (prefix.is_none() || filtered) {
                total = header_u64(&headers, "x-total");
            }
            let body = read_capped(SOURCE, response, MAX_JSON_BYTES).await?;
            let blobs: Vec<Blob> = serde_json::from_slice(&body).map_err(|_| {
                SourceError::invalid(SOURCE, "the search answer is not the documented JSON array")
            })?;
            for blob in blobs {
                let Ok(path) = RelPath::parse(&blob.path) else {
                    tracing::debug!("skipping a wiki hit whose path is not a valid path");
                    continue;
                };
                if prefix.as_ref().is_some_and(|p| !path.starts_with(p)) {
                    continue;
                }
                hits.push(WikiHit {
                    path,
                    start_line: blob.startline.unwrap_or(1).max(1),
                    snippet: clip(blob.data.as_deref().unwrap_or_default()),
                });
                if hits.len() >= limit {
                    break;
                }
            }
            let next = header_u64(&headers, "x-next-page");
            match next {
                Some(n) if hits.len() < limit && page < MAX_PAGES && u64::from(page) < n => {
                    page = u32::try_from(n).unwrap_or(MAX_PAGES);
                }
                _ => break,
            }
        }
        Ok(WikiSearch { hits, total })
    }

    async fn read(
        &self,
        path: &RelPath,
        git_ref: Option<&GitRef>,
        range: ReadRange,
    ) -> Result<WikiWindow, SourceError> {
        let git_ref = git_ref.unwrap_or(&self.default_ref).clone();
        let response = self.get(self.raw_url(path, &git_ref), false).await?;
        if !response.status().is_success() {
            return Err(Self::failure(
                response,
                &format!("wiki file `{path}` at `{git_ref}`"),
                Some(&git_ref),
            )
            .await);
        }
        let size =
            header_u64(response.headers(), "x-gitlab-size").or_else(|| response.content_length());
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // The raw endpoint has no Range: stream, skip to the window, stop
        // reading once it is full (the rest is never downloaded).
        let body = if size.is_some_and(|s| range.offset >= s) {
            Box::pin(futures_util::stream::empty()) as crate::model::ByteStream
        } else {
            window_of(Box::pin(response.bytes_stream()), range.offset, range.len)
        };
        let window = ReadStream {
            size,
            etag: None,
            content_type,
            offset: range.offset,
            body,
        }
        .collect(range.len)
        .await?;
        Ok(WikiWindow {
            path: path.clone(),
            git_ref,
            window,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wiki(base: &str, project: &str) -> GitLabWiki {
        GitLabWiki::new(
            GitLabConfig {
                base_url: Url::parse(base).unwrap(),
                project: project.to_owned(),
                token: Some(SecretString::from("glpat-test")),
                default_ref: GitRef::parse("main").unwrap(),
            },
            HttpClient::new(crate::http::HttpSettings::default()).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn project_and_file_paths_are_single_encoded_segments() {
        let w = wiki("https://gitlab.example.com", "docs/llm-wiki");
        assert_eq!(
            w.project_url.as_str(),
            "https://gitlab.example.com/api/v4/projects/docs%2Fllm-wiki"
        );
        let path = RelPath::parse("guides/a b/café.md").unwrap();
        let url = w.raw_url(&path, &GitRef::parse("release/1.0").unwrap());
        assert_eq!(
            url.as_str(),
            "https://gitlab.example.com/api/v4/projects/docs%2Fllm-wiki/repository/files/guides%2Fa%20b%2Fcaf%C3%A9%2Emd/raw?ref=release%2F1.0"
        );
        let w = wiki("https://host.example/gitlab/", "42");
        assert_eq!(
            w.project_url.as_str(),
            "https://host.example/gitlab/api/v4/projects/42"
        );
    }

    #[test]
    fn a_hostile_file_path_cannot_leave_the_files_endpoint() {
        let w = wiki("https://gitlab.example.com", "42");
        // RelPath refuses `..`; what it accepts is encoded into one segment.
        let path = RelPath::parse("a#b?c=d/x;y.md").unwrap();
        let url = w.raw_url(&path, &GitRef::parse("main").unwrap());
        assert_eq!(
            url.path(),
            "/api/v4/projects/42/repository/files/a%23b%3Fc%3Dd%2Fx%3By%2Emd/raw"
        );
        assert_eq!(url.query(), Some("ref=main"));
        assert_eq!(url.host_str(), Some("gitlab.example.com"));
    }
}
