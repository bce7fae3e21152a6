//! The wiki on GitLab (REST v4): project blob search, raw file reads, and
//! the branch head and recursive tree an incremental sync needs.
//!
//! Wire format (`shared/reference/upstream-wire-formats.md` §1):
//! `GET /api/v4/projects/:id/search?scope=blobs&search=…` answers a JSON
//! array of blobs (`path`, `startline`, `data`, …) paginated by
//! `X-Next-Page` (empty on the last page; `X-Total` only below 10,000);
//! `GET /api/v4/projects/:id/repository/files/:path/raw?ref=…` answers the
//! raw bytes, with `:path` one segment (`/` → `%2F`, `.` → `%2E`; `ref` a
//! branch, tag or commit SHA). `GET /api/v4/projects/:id/repository/branches/:branch`
//! (the name one segment, encoded the same way) answers the branch with
//! its `commit` (`id`, `committed_date`, …), `404 Branch Not Found` for an
//! unknown one. `GET /api/v4/projects/:id/repository/tree?ref=…&recursive=true`
//! answers entries `{id, name, type, path, mode}` (`type` `blob`, `tree` or
//! `commit`), `404 Tree Not Found` for an unknown ref; it is paged by keyset
//! (`pagination=keyset`, GitLab 17.1+): the next page is the `Link`
//! header's `rel="next"` URL (with a `page_token`), absent on the last page,
//! and GitLab asks clients to follow that link rather than build one. The
//! link is followed only while it stays on the project's tree endpoint (same
//! origin and path, same `ref`, still recursive): its host comes from
//! GitLab's own configuration, and a token is never sent anywhere else.
//! Errors are `{"message":"404 File Not Found"}`-style bodies; rate limits
//! come as a plain-text 429 with `Retry-After`/`RateLimit-Reset`, or a JSON
//! 429 from the search's own limit. The token travels in `PRIVATE-TOKEN`.

use std::collections::HashSet;

use acdm_core::RelPath;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
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
    GitRef, MAX_TREE_FILES, ReadRange, ReadStream, WikiBlob, WikiHead, WikiHit, WikiQuery,
    WikiSearch, WikiWindow, window_of,
};

const SOURCE: &str = "GitLab";
/// Search pages fetched at most for one query.
const MAX_PAGES: u32 = 5;
/// Longest snippet kept from a blob's `data`.
const SNIPPET_CHARS: usize = 600;
/// Largest JSON body accepted from the search, a tree page or an error.
const MAX_JSON_BYTES: usize = 4 << 20;
/// Tree entries asked for per page: GitLab's maximum.
const TREE_PER_PAGE: usize = 100;
/// Tree pages fetched at most: the files at 100 a page, and as many pages
/// again for the folders listed among them.
const MAX_TREE_PAGES: usize = 2 * MAX_TREE_FILES / TREE_PER_PAGE;

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

/// The part of `GET /repository/branches/:branch` used.
#[derive(Deserialize)]
struct Branch {
    commit: BranchCommit,
}

#[derive(Deserialize)]
struct BranchCommit {
    id: String,
    #[serde(default)]
    committed_date: Option<String>,
}

/// One entry of `GET /repository/tree`.
#[derive(Deserialize)]
struct TreeEntry {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    path: String,
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

    /// The branch URL of `branch`, with the name as one encoded segment.
    fn branch_url(&self, branch: &GitRef) -> Url {
        let encoded = utf8_percent_encode(branch.as_str(), FILE_PATH_SET).to_string();
        self.url(&format!("/repository/branches/{encoded}"))
    }

    /// The first page of the recursive tree at `commit`, keyset-paged.
    fn tree_url(&self, commit: &GitRef) -> Url {
        let mut url = self.url("/repository/tree");
        url.query_pairs_mut()
            .append_pair("ref", commit.as_str())
            .append_pair("recursive", "true")
            .append_pair("per_page", &TREE_PER_PAGE.to_string())
            .append_pair("pagination", "keyset");
        url
    }

    /// The next tree page from a `Link: <…>; rel="next"` target, followed
    /// only while it stays on this project's tree endpoint (same origin and
    /// path, no credentials), for the same commit, still recursive: the
    /// token goes nowhere else, and the pages all describe one tree.
    fn next_tree_page(
        &self,
        current: &Url,
        link: &str,
        commit: &GitRef,
    ) -> Result<Url, SourceError> {
        let refused = |why: &str| {
            SourceError::invalid(
                SOURCE,
                format!("the tree's next-page link {why}; it is not followed"),
            )
        };
        let mut next = current.join(link).map_err(|_| refused("is not a URL"))?;
        next.set_fragment(None);
        let endpoint = self.url("/repository/tree");
        if next.origin() != endpoint.origin()
            || next.path() != endpoint.path()
            || !next.username().is_empty()
            || next.password().is_some()
        {
            return Err(refused("leaves the wiki project's tree endpoint"));
        }
        let value = |name: &str| {
            next.query_pairs()
                .filter(|(key, _)| key == name)
                .last()
                .map(|(_, value)| value.into_owned())
        };
        if value("ref").as_deref() != Some(commit.as_str())
            || value("recursive").as_deref() != Some("true")
        {
            return Err(refused("asks for another commit or a shallow tree"));
        }
        if next == *current {
            return Err(refused("repeats the page just read"));
        }
        Ok(next)
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

/// The target of the first `rel="next"` link among the `Link` headers
/// (RFC 8288: `<target>; rel="next", <target>; rel="first"`).
fn next_link(headers: &HeaderMap) -> Option<String> {
    for value in headers.get_all(http::header::LINK) {
        let Ok(mut rest) = value.to_str() else {
            continue;
        };
        while let Some(start) = rest.find('<') {
            let after = rest.get(start + 1..).unwrap_or_default();
            let Some(end) = after.find('>') else {
                break;
            };
            let target = after.get(..end).unwrap_or_default();
            let tail = after.get(end + 1..).unwrap_or_default();
            let params_end = tail.find('<').unwrap_or(tail.len());
            let params = tail.get(..params_end).unwrap_or_default();
            if params.split([';', ',']).any(is_rel_next) {
                return Some(target.trim().to_owned());
            }
            rest = tail.get(params_end..).unwrap_or_default();
        }
    }
    None
}

/// Whether a link parameter is `rel="next"` (or a `rel` list naming it).
fn is_rel_next(param: &str) -> bool {
    let Some((name, value)) = param.split_once('=') else {
        return false;
    };
    name.trim().eq_ignore_ascii_case("rel")
        && value
            .trim()
            .trim_matches('"')
            .split_ascii_whitespace()
            .any(|rel| rel.eq_ignore_ascii_case("next"))
}

/// A full git object id: 40 (SHA-1) or 64 (SHA-256) hex digits.
fn is_object_id(id: &str) -> bool {
    matches!(id.len(), 40 | 64) && id.bytes().all(|b| b.is_ascii_hexdigit())
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

    async fn head(&self) -> Result<WikiHead, SourceError> {
        let branch = &self.default_ref;
        let response = self.get(self.branch_url(branch), true).await?;
        if !response.status().is_success() {
            return Err(Self::failure(
                response,
                &format!("branch `{branch}` of the wiki"),
                Some(branch),
            )
            .await);
        }
        let body = read_capped(SOURCE, response, MAX_JSON_BYTES).await?;
        let parsed: Branch = serde_json::from_slice(&body).map_err(|_| {
            SourceError::invalid(
                SOURCE,
                "the branch answer is not the documented JSON object",
            )
        })?;
        if !is_object_id(&parsed.commit.id) {
            return Err(SourceError::invalid(
                SOURCE,
                "the branch's commit id is not a commit SHA",
            ));
        }
        let committed_at = parsed
            .commit
            .committed_date
            .as_deref()
            .and_then(|date| DateTime::parse_from_rfc3339(date).ok())
            .map(|date| date.with_timezone(&Utc));
        Ok(WikiHead {
            commit: parsed.commit.id.to_ascii_lowercase(),
            ref_name: branch.clone(),
            committed_at,
        })
    }

    async fn tree(&self, commit: &str) -> Result<Vec<WikiBlob>, SourceError> {
        let commit = GitRef::parse(commit)?;
        let mut url = self.tree_url(&commit);
        let mut seen = HashSet::new();
        let mut blobs = Vec::new();
        let mut pages = 0;
        loop {
            pages += 1;
            let response = self.get(url.clone(), true).await?;
            if !response.status().is_success() {
                return Err(Self::failure(
                    response,
                    &format!("the wiki tree at `{commit}`"),
                    Some(&commit),
                )
                .await);
            }
            let headers = response.headers().clone();
            let body = read_capped(SOURCE, response, MAX_JSON_BYTES).await?;
            let entries: Vec<TreeEntry> = serde_json::from_slice(&body).map_err(|_| {
                SourceError::invalid(SOURCE, "the tree answer is not the documented JSON array")
            })?;
            for entry in entries {
                // Folders are `tree`, submodules `commit`: files only.
                if entry.kind != "blob" {
                    continue;
                }
                if !is_object_id(&entry.id) {
                    return Err(SourceError::invalid(
                        SOURCE,
                        "a tree entry's id is not a blob SHA",
                    ));
                }
                let Ok(path) = RelPath::parse(&entry.path) else {
                    tracing::debug!("skipping a wiki file whose path is not a valid path");
                    continue;
                };
                if !seen.insert(path.clone()) {
                    continue;
                }
                if blobs.len() >= MAX_TREE_FILES {
                    return Err(too_large_tree());
                }
                blobs.push(WikiBlob {
                    path,
                    blob_id: entry.id.to_ascii_lowercase(),
                });
            }
            let Some(link) = next_link(&headers) else {
                // Keyset pages end where the link does. An offset-paged
                // answer that names a next page without linking to it
                // would be cut short: refuse it rather than drop files.
                if header_u64(&headers, "x-next-page").is_some() {
                    return Err(SourceError::invalid(
                        SOURCE,
                        "the tree has more pages but no link to the next one",
                    ));
                }
                break;
            };
            if pages >= MAX_TREE_PAGES {
                return Err(too_large_tree());
            }
            url = self.next_tree_page(&url, &link, &commit)?;
        }
        blobs.sort_by_cached_key(|blob| blob.path.to_string());
        Ok(blobs)
    }
}

fn too_large_tree() -> SourceError {
    SourceError::invalid(
        SOURCE,
        format!("the wiki has more than {MAX_TREE_FILES} files, more than a tree may list"),
    )
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

    #[test]
    fn a_commit_sha_is_a_ref_the_raw_endpoint_is_asked_with() {
        let w = wiki("https://gitlab.example.com", "42");
        let sha = "7b5c3cc8be40ee161ae89a06bba6229da1032a0c";
        let url = w.raw_url(
            &RelPath::parse("README.md").unwrap(),
            &GitRef::parse(sha).unwrap(),
        );
        assert_eq!(url.query(), Some(format!("ref={sha}").as_str()));
    }

    #[test]
    fn branch_names_and_tree_queries_are_single_encoded_segments() {
        let w = wiki("https://gitlab.example.com", "docs/llm-wiki");
        let url = w.branch_url(&GitRef::parse("release/v1.0").unwrap());
        assert_eq!(
            url.as_str(),
            "https://gitlab.example.com/api/v4/projects/docs%2Fllm-wiki/repository/branches/release%2Fv1%2E0"
        );
        let sha = GitRef::parse("7b5c3cc8be40ee161ae89a06bba6229da1032a0c").unwrap();
        assert_eq!(
            w.tree_url(&sha).as_str(),
            "https://gitlab.example.com/api/v4/projects/docs%2Fllm-wiki/repository/tree?ref=7b5c3cc8be40ee161ae89a06bba6229da1032a0c&recursive=true&per_page=100&pagination=keyset"
        );
    }

    fn link_headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(http::header::LINK, HeaderValue::from_str(v).unwrap());
        }
        headers
    }

    #[test]
    fn the_next_link_is_found_among_the_others() {
        let h = link_headers(&[
            r#"<https://g.example/a?page=1>; rel="prev", <https://g.example/a?x=1%2C2&page_token=eyJ9>; rel="next", <https://g.example/a?page=1>; rel="first""#,
        ]);
        assert_eq!(
            next_link(&h).as_deref(),
            Some("https://g.example/a?x=1%2C2&page_token=eyJ9")
        );
        let h = link_headers(&[
            r#"<https://g.example/f>; rel="first""#,
            "<https://g.example/n>; REL=next",
        ]);
        assert_eq!(next_link(&h).as_deref(), Some("https://g.example/n"));
        let h = link_headers(&[
            r#"<https://g.example/f>; rel="first", <https://g.example/l>; rel="last""#,
        ]);
        assert_eq!(next_link(&h), None);
        assert_eq!(next_link(&HeaderMap::new()), None);
    }

    #[test]
    fn a_next_link_is_followed_only_on_the_projects_tree_endpoint() {
        let w = wiki("https://gitlab.example.com/gitlab/", "docs/wiki");
        let sha = GitRef::parse("7b5c3cc8be40ee161ae89a06bba6229da1032a0c").unwrap();
        let first = w.tree_url(&sha);
        let tree = "https://gitlab.example.com/gitlab/api/v4/projects/docs%2Fwiki/repository/tree";
        let query = format!(
            "id=docs%2Fwiki&page=1&page_token=eyJ9&pagination=keyset&per_page=100&recursive=true&ref={sha}"
        );
        let ok = w
            .next_tree_page(&first, &format!("{tree}?{query}"), &sha)
            .unwrap();
        assert_eq!(ok.as_str(), format!("{tree}?{query}"));
        // Relative targets resolve against the page read.
        let relative = w
            .next_tree_page(&first, &format!("tree?{query}"), &sha)
            .unwrap();
        assert_eq!(relative.as_str(), format!("{tree}?{query}"));
        for hostile in [
            format!(
                "https://evil.example/gitlab/api/v4/projects/docs%2Fwiki/repository/tree?{query}"
            ),
            format!(
                "http://gitlab.example.com/gitlab/api/v4/projects/docs%2Fwiki/repository/tree?{query}"
            ),
            format!(
                "https://gitlab.example.com:8443/gitlab/api/v4/projects/docs%2Fwiki/repository/tree?{query}"
            ),
            format!(
                "https://user:pw@gitlab.example.com/gitlab/api/v4/projects/docs%2Fwiki/repository/tree?{query}"
            ),
            format!(
                "https://gitlab.example.com/gitlab/api/v4/projects/other%2Fproject/repository/tree?{query}"
            ),
            format!(
                "https://gitlab.example.com/gitlab/api/v4/projects/docs%2Fwiki/repository/files/x/raw?{query}"
            ),
            format!("//evil.example/gitlab/api/v4/projects/docs%2Fwiki/repository/tree?{query}"),
            format!("{tree}?{}", query.replace(sha.as_str(), "main")),
            format!(
                "{tree}?{}",
                query.replace("recursive=true", "recursive=false")
            ),
            first.to_string(),
        ] {
            let e = w.next_tree_page(&first, &hostile, &sha).unwrap_err();
            assert!(
                matches!(e, SourceError::InvalidResponse { .. }),
                "{hostile}: {e:?}"
            );
            assert!(
                !e.to_string().contains("evil") && !e.to_string().contains("http"),
                "no URL in the message: {e}"
            );
        }
    }
}
