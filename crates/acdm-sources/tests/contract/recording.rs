//! What the HTTP doubles share: every request is recorded exactly as it
//! arrived, so tests can assert on the wire (paths still encoded, headers
//! as sent).

use std::sync::{Mutex, PoisonError};

use axum::extract::Request;

/// One request as a double received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recorded {
    /// The request method, e.g. `GET`.
    pub(crate) method: String,
    /// The request target's path and query exactly as sent (still encoded).
    pub(crate) path_and_query: String,
    /// Every header as (lowercase name, value), in arrival order per name.
    pub(crate) headers: Vec<(String, String)>,
}

impl Recorded {
    /// The first value of header `name` (lowercase).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The requests a double has received, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Recorder(Mutex<Vec<Recorded>>);

impl Recorder {
    /// Records `request` as it arrived.
    pub(crate) fn record(&self, request: &Request) {
        let uri = request.uri();
        let path_and_query = uri
            .path_and_query()
            .map_or_else(|| uri.path().to_owned(), |pq| pq.as_str().to_owned());
        let headers = request
            .headers()
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect();
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Recorded {
                method: request.method().as_str().to_owned(),
                path_and_query,
                headers,
            });
    }

    /// Everything recorded so far.
    pub(crate) fn all(&self) -> Vec<Recorded> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
