//! Nextcloud: the project files over WebDAV (`/remote.php/dav/files/<user>/`)
//! and file search over the OCS unified search API.
//!
//! URLs for caller paths are built from validated segments with
//! `path_segments_mut().extend` — never string joining, never `Url::join` —
//! and checked afterwards: same origin, under the user's DAV root, one URL
//! segment per path segment. Paths the server sends back (PROPFIND hrefs,
//! search results) are decoded once, checked against that root and parsed
//! with the same segment rules, so a hostile answer cannot point us outside
//! the folder we asked about.

mod dav;
mod multistatus;
mod search;

use acdm_core::AbsPath;
use http::HeaderValue;
use percent_encoding::percent_decode_str;
use secrecy::{ExposeSecret, SecretString};
use url::{Position, Url};

pub use dav::NextcloudFiles;
pub use search::NextcloudSearch;

use crate::error::SourceError;
use crate::http::{HttpClient, UpstreamRequest, basic_authorization};

pub(crate) const SOURCE: &str = "Nextcloud";

/// How to reach Nextcloud.
#[derive(Debug, Clone)]
pub struct NextcloudConfig {
    /// Instance root (`https://cloud.example.com`, possibly with a path).
    pub url: Url,
    /// The service account whose files hold the projects.
    pub user: String,
    /// Its app password; `None` makes every call `NotConfigured`.
    pub app_password: Option<SecretString>,
}

/// Basic credentials for one call.
#[derive(Clone, Copy)]
pub(crate) struct Credentials<'a> {
    authorization: &'a HeaderValue,
}

impl Credentials<'_> {
    /// Adds them to a request (in a header marked sensitive, so it is
    /// never logged).
    pub(crate) fn apply(self, request: UpstreamRequest) -> UpstreamRequest {
        request.authorization(self.authorization.clone())
    }
}

/// The shared part of the WebDAV and search clients.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    http: HttpClient,
    /// `…/remote.php/dav/files/<user>` (no trailing slash).
    dav_root: Url,
    /// The decoded segments of `dav_root`'s path.
    dav_root_segments: Vec<String>,
    /// `…/ocs/v2.php/search/providers/files/search`.
    search_url: Url,
    /// The service account's `Authorization` value (marked sensitive),
    /// made once; `None` without an app password.
    authorization: Option<HeaderValue>,
}

impl Endpoint {
    pub(crate) fn new(config: NextcloudConfig, http: HttpClient) -> Result<Self, SourceError> {
        let with_segments = |tail: &[&str]| -> Result<Url, SourceError> {
            let mut url = config.url.clone();
            url.set_query(None);
            url.set_fragment(None);
            url.path_segments_mut()
                .map_err(|()| {
                    SourceError::NotConfigured("NEXTCLOUD_URL cannot be a base URL".to_owned())
                })?
                .pop_if_empty()
                .extend(tail);
            Ok(url)
        };
        let dav_root = with_segments(&["remote.php", "dav", "files", config.user.as_str()])?;
        let dav_root_segments = decode_path(dav_root.path()).ok_or_else(|| {
            SourceError::NotConfigured("NEXTCLOUD_URL has an undecodable path".to_owned())
        })?;
        Ok(Self {
            search_url: with_segments(&[
                "ocs",
                "v2.php",
                "search",
                "providers",
                "files",
                "search",
            ])?,
            dav_root,
            dav_root_segments,
            http,
            authorization: config
                .app_password
                .as_ref()
                .and_then(|password| basic_authorization(&config.user, password.expose_secret())),
        })
    }

    /// The service account's credentials, or `NotConfigured` before
    /// anything is sent.
    pub(crate) fn credentials(&self) -> Result<Credentials<'_>, SourceError> {
        let authorization = self.authorization.as_ref().ok_or_else(|| {
            SourceError::NotConfigured("NEXTCLOUD_APP_PASSWORD is not set".to_owned())
        })?;
        Ok(Credentials { authorization })
    }

    /// The WebDAV URL of `path`, built one encoded segment at a time and
    /// checked: same origin, under the DAV root, one segment per segment.
    pub(crate) fn url_for(&self, path: &AbsPath) -> Result<Url, SourceError> {
        let mut url = self.dav_root.clone();
        url.path_segments_mut()
            .map_err(|()| {
                SourceError::NotConfigured("NEXTCLOUD_URL cannot be a base URL".to_owned())
            })?
            .extend(path.segments());
        let expected = self.dav_root_segments.iter().chain(path.segments());
        // Same scheme, credentials, host and port as the root: compared as
        // written, which `origin()` would copy into new strings on each
        // side, per call.
        let sound = url[..Position::BeforePath] == self.dav_root[..Position::BeforePath]
            && decodes_to(url.path(), expected.map(String::as_str));
        if sound {
            Ok(url)
        } else {
            Err(SourceError::InvalidRequest(format!(
                "{path} cannot be addressed safely"
            )))
        }
    }

    /// Interprets an href from a multistatus answer as a path in the user's
    /// tree: an absolute path or a same-origin URL, under the DAV root, each
    /// segment decoded once and valid. Anything else is an invalid response.
    pub(crate) fn path_of_href(&self, href: &str) -> Result<AbsPath, SourceError> {
        let outside = || {
            SourceError::invalid(
                SOURCE,
                "the server listed a path outside the requested folder",
            )
        };
        let raw_path = if href.starts_with("http://") || href.starts_with("https://") {
            let url = Url::parse(href).map_err(|_| outside())?;
            if url.origin() != self.dav_root.origin() {
                return Err(outside());
            }
            url.path().to_owned()
        } else if href.starts_with('/') {
            href.split(['?', '#']).next().unwrap_or_default().to_owned()
        } else {
            return Err(outside());
        };
        let segments = decode_path(&raw_path).ok_or_else(outside)?;
        let rest = segments
            .strip_prefix(self.dav_root_segments.as_slice())
            .ok_or_else(outside)?;
        rest.iter()
            .try_fold(AbsPath::root(), |path, segment| path.join_name(segment))
            .map_err(|_| outside())
    }

    pub(crate) fn http(&self) -> &HttpClient {
        &self.http
    }

    pub(crate) fn search_url(&self) -> &Url {
        &self.search_url
    }
}

/// The still-encoded segments of a URL path, without the leading empty
/// segment and one trailing empty segment (a folder's trailing slash).
fn raw_segments(path: &str) -> impl Iterator<Item = &str> {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    (!trimmed.is_empty())
        .then(|| trimmed.split('/'))
        .into_iter()
        .flatten()
}

/// Splits an encoded URL path into decoded segments (strict UTF-8), as
/// [`raw_segments`] splits it. `None` when a segment does not decode.
fn decode_path(path: &str) -> Option<Vec<String>> {
    raw_segments(path)
        .map(|segment| {
            percent_decode_str(segment)
                .decode_utf8()
                .ok()
                .map(|s| s.into_owned())
        })
        .collect()
}

/// Whether the encoded URL path `path` splits and decodes, as
/// [`decode_path`] does, into exactly the segments `expected` — compared
/// byte by byte as each is decoded, with no string made per segment. A
/// segment that is not UTF-8 once decoded equals no `&str`.
fn decodes_to<'a>(path: &str, expected: impl IntoIterator<Item = &'a str>) -> bool {
    let mut raw = raw_segments(path);
    let mut expected = expected.into_iter();
    loop {
        match (raw.next(), expected.next()) {
            (None, None) => return true,
            (Some(raw), Some(want)) if percent_decode_str(raw).eq(want.bytes()) => {}
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HttpSettings;

    fn endpoint(base: &str, user: &str) -> Endpoint {
        Endpoint::new(
            NextcloudConfig {
                url: Url::parse(base).unwrap(),
                user: user.to_owned(),
                app_password: Some(SecretString::from("app-password")),
            },
            HttpClient::new(HttpSettings::default()).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn decoding_in_place_agrees_with_decoding_into_strings() {
        let pieces = [
            "", "a", "é", "%C3%A9", "%c3%a9", "%FF", "%C3", "%2F", "%2f", "%", "%2", "%zz", "..",
            "%2e%2E", "a%20b", "%00",
        ];
        let mut paths = vec![String::new(), "/".to_owned(), "//".to_owned()];
        let mut bodies: Vec<String> = pieces.iter().map(|p| (*p).to_owned()).collect();
        for _ in 0..2 {
            let mut longer = Vec::new();
            for body in &bodies {
                for piece in pieces {
                    longer.push(format!("{body}/{piece}"));
                }
            }
            bodies.extend(longer);
        }
        for body in &bodies {
            for (head, tail) in [("", ""), ("/", ""), ("", "/"), ("/", "/"), ("/", "//")] {
                paths.push(format!("{head}{body}{tail}"));
            }
        }
        let segments = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let mut checked = 0;
        for path in &paths {
            let decoded = decode_path(path);
            let mut candidates = vec![Vec::new(), segments(&["a"]), segments(&["", "a"])];
            if decoded.is_none() {
                // Undecodable: neither its raw segments nor a lenient
                // decoding of them may pass for it.
                let raw: Vec<String> = raw_segments(path).map(str::to_owned).collect();
                let lossy = raw
                    .iter()
                    .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
                    .collect();
                candidates.extend([raw, lossy]);
            }
            if let Some(decoded) = &decoded {
                candidates.push(decoded.clone());
                if let Some((_, init)) = decoded.split_last() {
                    candidates.push(init.to_vec());
                }
                let mut more = decoded.clone();
                more.push("a".to_owned());
                candidates.push(more);
                let mut other = decoded.clone();
                if let Some(first) = other.first_mut() {
                    first.push('x');
                }
                candidates.push(other);
            }
            for expected in candidates {
                let by_strings = decoded.as_ref() == Some(&expected);
                let in_place = decodes_to(path, expected.iter().map(String::as_str));
                assert_eq!(in_place, by_strings, "{path:?} against {expected:?}");
                checked += 1;
            }
        }
        assert!(checked > 100_000, "{checked}");
    }

    #[test]
    fn urls_encode_each_segment_and_stay_under_the_user_root() {
        let e = endpoint("https://cloud.example.com/", "alice");
        let check = |path: &str, expected: &str| {
            let url = e.url_for(&AbsPath::parse(path).unwrap()).unwrap();
            assert_eq!(url.as_str(), expected, "{path}");
        };
        check("/", "https://cloud.example.com/remote.php/dav/files/alice");
        check(
            "/Projects/Alpha/notes v2.md",
            "https://cloud.example.com/remote.php/dav/files/alice/Projects/Alpha/notes%20v2.md",
        );
        check(
            "/P/a+b c#d?e;f.md",
            "https://cloud.example.com/remote.php/dav/files/alice/P/a+b%20c%23d%3Fe;f.md",
        );
        check(
            "/P/café 报告.md",
            "https://cloud.example.com/remote.php/dav/files/alice/P/caf%C3%A9%20%E6%8A%A5%E5%91%8A.md",
        );
        check(
            "/P/50% done.txt",
            "https://cloud.example.com/remote.php/dav/files/alice/P/50%25%20done.txt",
        );
        let e = endpoint("https://host.example/nextcloud", "svc user");
        let url = e.url_for(&AbsPath::parse("/Projects").unwrap()).unwrap();
        assert_eq!(
            url.as_str(),
            "https://host.example/nextcloud/remote.php/dav/files/svc%20user/Projects"
        );
    }

    #[test]
    fn hrefs_are_decoded_once_and_must_stay_under_the_root() {
        let e = endpoint("https://cloud.example.com", "alice");
        let ok = |href: &str, expected: &str| {
            assert_eq!(
                e.path_of_href(href).unwrap().to_string(),
                expected,
                "{href}"
            );
        };
        ok(
            "/remote.php/dav/files/alice/Projects/Alpha/",
            "/Projects/Alpha",
        );
        ok(
            "/remote.php/dav/files/alice/Projects/Alpha/notes%20v2.md",
            "/Projects/Alpha/notes v2.md",
        );
        ok("/remote.php/dav/files/alice/P/caf%c3%a9.md", "/P/café.md");
        ok("/remote.php/dav/files/alice/P/caf%C3%A9.md", "/P/café.md");
        ok(
            "https://cloud.example.com/remote.php/dav/files/alice/P/x.md",
            "/P/x.md",
        );
        ok("/remote.php/dav/files/alice", "/");
        let bad = |href: &str| assert!(e.path_of_href(href).is_err(), "{href}");
        bad("/remote.php/dav/files/alice/Projects/../../bob/x");
        bad("/remote.php/dav/files/alice/Projects/%2e%2e/Beta");
        bad("/remote.php/dav/files/alice/P/a%2Fb");
        bad("/remote.php/dav/files/bob/Projects/Alpha/x.md");
        bad("/remote.php/dav/files/alice-evil/x.md");
        bad("https://evil.example/remote.php/dav/files/alice/x.md");
        bad("relative/x.md");
        bad("/remote.php/dav/files/alice/P/%ff.md");
        bad("/remote.php/dav/files/alice/P//x.md");
    }
}
