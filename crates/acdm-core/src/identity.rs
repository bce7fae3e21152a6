//! Who is calling: the four `X-ACDM-*` headers and the [`Identity`] built
//! from the three identity headers (spec §3.2).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::names::{AgentName, IdError, ThreadId, UserId};

/// Header names, in their canonical spelling. HTTP header names are
/// case-insensitive; `http::HeaderMap` lookups accept these as they are.
pub mod headers {
    /// The shared service token (`ACDM_MCP_SERVICE_TOKEN`).
    pub const SERVICE_AUTH: &str = "X-ACDM-Service-Auth";
    /// The user on whose behalf the agent acts.
    pub const USER_ID: &str = "X-ACDM-User-Id";
    /// The agent's name; the project is resolved from it server-side.
    pub const AGENT_NAME: &str = "X-ACDM-Agent-Name";
    /// The conversation thread, for attribution.
    pub const THREAD_ID: &str = "X-ACDM-Thread-Id";
    /// How many milliseconds the caller waits for the answer (optional):
    /// the server answers before that, `upstream_timeout` if it must.
    pub const TIMEOUT_MS: &str = "X-ACDM-Timeout-Ms";
    /// The three identity headers, in the order they are reported.
    pub const IDENTITY: [&str; 3] = [USER_ID, AGENT_NAME, THREAD_ID];
}

/// Put in a request's extensions by the service gate when the request
/// carried the service token: its caller is the agent engine (or another
/// holder of the deployment's token), trusted to name the project. A
/// request to `/mcp` without it was let through for a person's access
/// token, which the MCP server checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceAuthenticated;

/// The caller of a BFF request: the *via_agent actor* every write is
/// attributed to.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Identity {
    user_id: UserId,
    agent_name: AgentName,
    thread_id: ThreadId,
}

/// Why the identity headers could not be turned into an [`Identity`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// One or more headers are absent, empty or whitespace only.
    #[error("missing identity header(s): {}", .headers.join(", "))]
    Missing {
        /// The missing headers, canonical spelling, in [`headers::IDENTITY`] order.
        headers: Vec<&'static str>,
    },
    /// A header is present but its value breaks the rules.
    #[error("invalid {header} header: {problem}")]
    Invalid {
        /// The header, canonical spelling.
        header: &'static str,
        /// What is wrong with it.
        problem: IdError,
    },
}

impl Identity {
    /// Builds an identity from already validated parts.
    pub fn new(user_id: UserId, agent_name: AgentName, thread_id: ThreadId) -> Self {
        Self {
            user_id,
            agent_name,
            thread_id,
        }
    }

    /// Builds an identity from the three header values (`None` when a header
    /// is absent). Every absent or blank header is reported at once; then
    /// the first invalid one.
    pub fn from_headers(
        user_id: Option<&str>,
        agent_name: Option<&str>,
        thread_id: Option<&str>,
    ) -> Result<Self, IdentityError> {
        let values = [user_id, agent_name, thread_id];
        let missing: Vec<&'static str> = headers::IDENTITY
            .iter()
            .zip(values)
            .filter(|(_, v)| v.is_none_or(|v| v.trim().is_empty()))
            .map(|(h, _)| *h)
            .collect();
        if !missing.is_empty() {
            return Err(IdentityError::Missing { headers: missing });
        }
        let invalid =
            |header: &'static str| move |problem| IdentityError::Invalid { header, problem };
        Ok(Self {
            user_id: UserId::parse(user_id.unwrap_or_default())
                .map_err(invalid(headers::USER_ID))?,
            agent_name: AgentName::parse(agent_name.unwrap_or_default())
                .map_err(invalid(headers::AGENT_NAME))?,
            thread_id: ThreadId::parse(thread_id.unwrap_or_default())
                .map_err(invalid(headers::THREAD_ID))?,
        })
    }

    /// The acting user.
    pub fn user_id(&self) -> &UserId {
        &self.user_id
    }

    /// The acting agent.
    pub fn agent_name(&self) -> &AgentName {
        &self.agent_name
    }

    /// The conversation thread.
    pub fn thread_id(&self) -> &ThreadId {
        &self.thread_id
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("user_id", &self.user_id)
            .field("agent_name", &self.agent_name)
            .field("thread_id", &self.thread_id)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        input: (Option<&str>, Option<&str>, Option<&str>),
        expected: Result<(&str, &str, &str), &str>,
    ) {
        let got = Identity::from_headers(input.0, input.1, input.2);
        match expected {
            Ok((u, a, t)) => {
                let id = got.unwrap_or_else(|e| panic!("{input:?}: {e}"));
                assert_eq!(
                    (
                        id.user_id().as_str(),
                        id.agent_name().as_str(),
                        id.thread_id().as_str()
                    ),
                    (u, a, t)
                );
            }
            Err(message) => assert_eq!(got.unwrap_err().to_string(), message, "{input:?}"),
        }
    }

    #[test]
    fn identity_needs_all_three_headers_and_names_the_missing_ones() {
        check(
            (Some("u1"), Some("project-alpha"), Some("t1")),
            Ok(("u1", "project-alpha", "t1")),
        );
        check(
            (None, Some("project-alpha"), Some("t1")),
            Err("missing identity header(s): X-ACDM-User-Id"),
        );
        check(
            (Some("u1"), Some(""), Some("t1")),
            Err("missing identity header(s): X-ACDM-Agent-Name"),
        );
        check(
            (Some("u1"), Some("a"), Some("   ")),
            Err("missing identity header(s): X-ACDM-Thread-Id"),
        );
        check(
            (None, None, None),
            Err("missing identity header(s): X-ACDM-User-Id, X-ACDM-Agent-Name, X-ACDM-Thread-Id"),
        );
        check(
            (Some("u1"), Some("bad agent"), Some("t1")),
            Err(
                "invalid X-ACDM-Agent-Name header: contains ' '; allowed: A-Z, a-z, 0-9, '.', '_' and '-'",
            ),
        );
        check(
            (Some("u\u{1b}[2J"), Some("a"), Some("t1")),
            Err("invalid X-ACDM-User-Id header: contains a control character"),
        );
        check(
            (Some("u1"), Some("a"), Some(&"t".repeat(300))),
            Err("invalid X-ACDM-Thread-Id header: is longer than 256 bytes"),
        );
    }
}
