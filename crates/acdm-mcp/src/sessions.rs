//! With people's tokens and MCP sessions both on, a session belongs to
//! whoever opened it: the person (by user id) or the service.
//!
//! Every request is authenticated on its own (the person comes from the
//! request's token, never from the session), but a session's stream can
//! carry answers to its earlier requests (SSE resumption): a session id
//! presented by anyone but its opener is answered as a session that does
//! not exist (404, as rmcp answers an unknown one), so it serves no one
//! else. Owners are kept per replica, as sessions are; at most
//! [`MAX_SESSIONS`], the oldest forgotten first, and a session whose owner
//! is not known is refused (fail closed: its client opens a new one, as
//! MCP clients do on 404).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use axum::body::Body;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;

use crate::people::Person;

/// The header carrying a session's id.
pub(crate) const SESSION_ID: &str = "mcp-session-id";

/// Owners kept at most.
pub(crate) const MAX_SESSIONS: usize = 100_000;

/// Who opened a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The engine, with the service token.
    Service,
    /// A person, by user id.
    Person(String),
}

impl Owner {
    /// The caller of a request: its person, or the service.
    pub(crate) fn of(person: Option<&Person>) -> Self {
        match person {
            Some(person) => Self::Person(person.user.as_str().to_owned()),
            None => Self::Service,
        }
    }
}

/// The sessions' owners.
#[derive(Default)]
pub(crate) struct SessionOwners {
    inner: Mutex<Owners>,
}

#[derive(Default)]
struct Owners {
    by_id: HashMap<String, Owner>,
    /// Ids, oldest first (some may be gone from `by_id`).
    order: VecDeque<String>,
}

impl SessionOwners {
    fn lock(&self) -> std::sync::MutexGuard<'_, Owners> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `caller` may use the session `id`.
    pub(crate) fn admits(&self, id: &str, caller: &Owner) -> bool {
        self.lock().by_id.get(id) == Some(caller)
    }

    /// Records `owner` as the opener of the session `id`.
    pub(crate) fn opened(&self, id: &str, owner: Owner) {
        let mut owners = self.lock();
        while owners.by_id.len() >= MAX_SESSIONS {
            let Some(oldest) = owners.order.pop_front() else {
                break;
            };
            owners.by_id.remove(&oldest);
        }
        if owners.by_id.insert(id.to_owned(), owner).is_none() {
            owners.order.push_back(id.to_owned());
        }
    }

    /// Forgets the session `id` (closed by its owner).
    pub(crate) fn closed(&self, id: &str) {
        let mut owners = self.lock();
        owners.by_id.remove(id);
        owners.order.retain(|kept| kept != id);
    }

    /// How many sessions are owned.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().by_id.len()
    }
}

/// The answer to a session id its caller does not own: rmcp's answer to
/// an unknown session.
pub(crate) fn not_found() -> Response {
    let mut response = Response::new(Body::from("Not Found: Session not found"));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The session id a request names, if any (one readable value).
pub(crate) fn requested(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// After the answer: a session opened by this request is recorded as the
/// caller's; one it closed is forgotten.
pub(crate) fn after(
    owners: &SessionOwners,
    method: &Method,
    named: Option<&str>,
    caller: Owner,
    response: &Response,
) {
    match named {
        None => {
            if let Some(id) = response
                .headers()
                .get(SESSION_ID)
                .and_then(|v| v.to_str().ok())
            {
                owners.opened(id, caller);
            }
        }
        Some(id) if *method == Method::DELETE && response.status().is_success() => {
            owners.closed(id);
        }
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_serves_its_opener_only_and_the_oldest_are_forgotten_first() {
        let owners = SessionOwners::default();
        let alice = Owner::Person("u-alice".into());
        owners.opened("s-1", alice.clone());
        owners.opened("s-2", Owner::Service);
        assert!(owners.admits("s-1", &alice));
        assert!(!owners.admits("s-1", &Owner::Person("u-bob".into())));
        assert!(!owners.admits("s-1", &Owner::Service));
        assert!(owners.admits("s-2", &Owner::Service));
        assert!(!owners.admits("s-2", &alice));
        assert!(!owners.admits("s-unknown", &alice));
        owners.closed("s-1");
        assert!(!owners.admits("s-1", &alice));
        for n in 0..MAX_SESSIONS {
            owners.opened(&format!("x-{n}"), Owner::Service);
        }
        assert_eq!(owners.len(), MAX_SESSIONS);
        // s-2 was the oldest: forgotten, and so refused.
        assert!(!owners.admits("s-2", &Owner::Service));
        assert!(owners.admits(&format!("x-{}", MAX_SESSIONS - 1), &Owner::Service));
    }
}
