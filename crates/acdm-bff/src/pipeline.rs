//! The pipeline every `/agent-tools` request goes through after the service
//! gate (spec §6): identity headers → scope resolution (agent → project) →
//! rate limits (the agent's calls, and its writes) → the acting user's role
//! → handler, which is given the [`Caller`] ([`Behind::run`]).
//!
//! The via_agent actor comes from the caller's identity ([`Caller::actor`])
//! and every journalled write takes it as an argument, so a write without
//! an actor does not compile. The project is never taken from the request:
//! it is resolved from the agent's name, so the LLM cannot choose another
//! one.

use std::sync::Arc;

use acdm_core::business::Access;
use acdm_core::business::wire::BusinessOp;
use acdm_core::domain::{MemberRole, Mount, ProjectRef};
use acdm_core::events::Actor;
use acdm_core::limit::{Admission, Rate, RateLimiter};
use acdm_core::nc::NcOp;
use acdm_core::project::ProjectOp;
use acdm_core::scope::Scope;
use acdm_core::{ErrorCode, Identity, IdentityError, ScopeResolver, headers};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::envelope::Failure;

/// What the pipeline needs: the scope resolver, the members' roles, and
/// whether non-members may act at all (`ACDM_BFF_REQUIRE_MEMBERSHIP`).
#[derive(Clone)]
pub struct PipelineState {
    /// Agent → project.
    pub resolver: Arc<ScopeResolver>,
    /// The members' roles.
    pub store: acdm_store::Store,
    /// `true`: a user who is not a member of the project is refused.
    pub require_membership: bool,
    /// The agents' rate limits.
    pub limits: AgentLimits,
}

/// Each agent's rate limits (spec §9), counted for the whole deployment by
/// the limiter: every call, and separately the writes (a lower budget).
#[derive(Clone)]
pub struct AgentLimits {
    /// Where the buckets are.
    pub limiter: Arc<dyn RateLimiter>,
    /// Every call of an agent (`None`: unlimited).
    pub calls: Option<Rate>,
    /// An agent's writes, on top of `calls` (`None`: unlimited).
    pub writes: Option<Rate>,
}

impl AgentLimits {
    /// No limits.
    pub fn off() -> Self {
        Self {
            limiter: Arc::new(acdm_core::limit::Unlimited),
            calls: None,
            writes: None,
        }
    }

    /// Counts one call of `agent` (and, when `write`, one write); the
    /// `rate_limited` answer when a budget is spent.
    async fn admit(&self, agent: &str, write: bool) -> Result<(), Response> {
        let budgets = [
            (self.calls, "calls", "agent"),
            (self.writes.filter(|_| write), "writes", "agent-writes"),
        ];
        for (rate, what, prefix) in budgets {
            let Some(rate) = rate else { continue };
            if let Admission::Limited { retry_after } =
                self.limiter.admit(&limit_key(prefix, agent), rate).await
            {
                return Err(rate_limited(agent, what, rate, retry_after));
            }
        }
        Ok(())
    }
}

/// An agent's key in the limiter, `<prefix>:<agent>`, joined by hand:
/// `format!` cost more than the look-up it keys.
fn limit_key(prefix: &str, agent: &str) -> String {
    let mut key = String::with_capacity(prefix.len() + 1 + agent.len());
    key.push_str(prefix);
    key.push(':');
    key.push_str(agent);
    key
}

/// The answer to a call over its agent's limit: 429 `rate_limited`, with
/// `Retry-After` in seconds (also in the data, for an LLM).
fn rate_limited(agent: &str, what: &str, rate: Rate, retry_after: std::time::Duration) -> Response {
    let seconds = Admission::retry_after_seconds(retry_after);
    let mut response = Failure::new(
        ErrorCode::RateLimited,
        format!("agent `{agent}` made more {what} than its limit of {rate}"),
    )
    .with_suggested_action(format!(
        "Wait {seconds} s before the next call, and make fewer calls: batch reads, and do not repeat a call whose answer you have."
    ))
    .with_data(RetryAfter {
        retry_after_seconds: seconds,
        limit_per_minute: rate.per_minute(),
    })
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

#[derive(Serialize)]
struct RetryAfter {
    retry_after_seconds: u64,
    limit_per_minute: u32,
}

/// Whether the operation at `path` (`/agent-tools/<family>/<op>`) writes.
/// A path that names no operation is a read (it is answered `not_found`).
/// The path is read percent-decoded, as the router decodes the `{op}` the
/// handler acts on: `nc/%77rite` is a write, on the writes' budget too.
fn writes(path: &str) -> bool {
    let decoded = percent_encoding::percent_decode_str(path).decode_utf8_lossy();
    let Some(path) = decoded.strip_prefix('/') else {
        return false;
    };
    NcOp::ALL.iter().any(|op| op.writes() && op.path() == path)
        || BusinessOp::ALL
            .iter()
            .any(|op| op.writes() && op.path() == path)
        || ProjectOp::ALL
            .iter()
            .any(|op| op.writes() && op.path() == path)
}

/// What the pipeline learnt about the caller, for handlers (given to them
/// only once the project was resolved).
#[derive(Debug, Clone)]
pub struct Caller {
    /// Who is calling.
    pub identity: Identity,
    /// The agent's project with its mounts and members, as the resolver
    /// caches it (shared, not copied, per call).
    pub scope: Arc<Scope>,
    /// The acting user's role in it: their membership's, or `member` for a
    /// non-member when membership is not required; `None` for a non-member
    /// when it is.
    pub role: Option<MemberRole>,
}

impl Caller {
    /// The project the agent manages.
    pub fn project(&self) -> &ProjectRef {
        &self.scope.project
    }

    /// The project's mounts.
    pub fn mounts(&self) -> &[Mount] {
        &self.scope.mounts
    }

    /// The via_agent actor every write of this call is attributed to.
    pub fn actor(&self) -> Actor {
        Actor::via_agent(&self.identity)
    }

    /// Refuses with `permission_denied` unless the acting user's role
    /// grants `access` (spec §6.5); `what` names the action for the
    /// message (`delete a meeting`).
    pub fn allow(&self, access: Access, what: &str) -> Result<(), Failure> {
        let user = self.identity.user_id();
        let project = &self.project().slug;
        match self.role {
            None => Err(Failure::new(
                ErrorCode::PermissionDenied,
                format!("user `{user}` is not a member of project `{project}`, so this agent cannot {what} on their behalf"),
            )
            .with_suggested_action("Tell the user they must be added to the project (an operator does that); do not retry.")),
            Some(role) if role.grants(access) => Ok(()),
            Some(role) => Err(Failure::new(
                ErrorCode::PermissionDenied,
                format!(
                    "user `{user}` is a {role} of project `{project}`; to {what} needs the role {} or higher",
                    access.least_role()
                ),
            )
            .with_suggested_action(
                "Tell the user this needs a project member with a higher role; do not retry.",
            )),
        }
    }
}

#[derive(Serialize)]
struct MissingHeaders {
    missing: Vec<&'static str>,
}

/// [`headers::IDENTITY`] as `http` spells header names (lowercase), in
/// the same order: a lookup by text parses and lowercases the name on
/// every call, three times per request.
const IDENTITY_NAMES: [HeaderName; headers::IDENTITY.len()] = [
    HeaderName::from_static("x-acdm-user-id"),
    HeaderName::from_static("x-acdm-agent-name"),
    HeaderName::from_static("x-acdm-thread-id"),
];

/// One header's value: absent, or its text (`Err` when it is not visible
/// ASCII/UTF-8 or given more than once).
fn one_header<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
) -> Result<Option<&'a str>, &'static str> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(value), None) => value.to_str().map(Some).map_err(|_| "is not valid text"),
        (Some(_), Some(_)) => Err("is given more than once"),
    }
}

/// Reads the identity headers (spec §3.2).
pub fn identity_from(headers: &HeaderMap) -> Result<Identity, Failure> {
    let mut values = [None; 3];
    for ((slot, key), name) in values
        .iter_mut()
        .zip(&IDENTITY_NAMES)
        .zip(headers::IDENTITY)
    {
        *slot = one_header(headers, key).map_err(|problem| {
            Failure::new(
                ErrorCode::ValidationError,
                format!("the {name} header {problem}"),
            )
        })?;
    }
    let [user, agent, thread] = values;
    Identity::from_headers(user, agent, thread).map_err(|error| match error {
        IdentityError::Missing { headers } => Failure::new(
            ErrorCode::MissingIdentityHeaders,
            format!(
                "missing or empty identity header(s): {}; every /agent-tools call needs {}, {} and {}",
                headers.join(", "),
                headers::USER_ID,
                headers::AGENT_NAME,
                headers::THREAD_ID
            ),
        )
        .with_data(MissingHeaders { missing: headers }),
        invalid @ IdentityError::Invalid { .. } => {
            Failure::new(ErrorCode::ValidationError, invalid.to_string())
        }
    })
}

/// The family's state and the pipeline's, shared: a request's copy is one
/// reference count.
pub(crate) struct Behind<S> {
    /// The family's own state: given to a handler only by
    /// [`Behind::run`].
    family: S,
    pipeline: PipelineState,
}

impl<S> Behind<S> {
    /// `family` behind `pipeline`.
    pub(crate) fn new(family: S, pipeline: PipelineState) -> Arc<Self> {
        Arc::new(Self { family, pipeline })
    }

    /// Runs the pipeline on `req` — identity, scope, rate limits, role —
    /// and then `handler` with the family's state and the caller it
    /// learnt, under the request's id for `internal_error` messages
    /// ([`crate::envelope::request_scope`]); or answers the pipeline's
    /// refusal. Fills the request span's `agent`, `user`, `thread` and
    /// `project`.
    ///
    /// Called by each family's handler first, before it reads anything of
    /// the request: in a `from_fn` layer, the pipeline cloned the boxed
    /// route it wraps and boxed a future on every call
    /// (`docs/performance.md`, "The hot routes without their layers").
    pub(crate) fn run<'a, H, F>(
        &'a self,
        req: Request,
        handler: H,
    ) -> impl Future<Output = Response> + 'a
    where
        H: FnOnce(&'a S, Caller, Request) -> F + 'a,
        F: Future<Output = Response> + 'a,
    {
        let id = req.extensions().get::<acdm_core::RequestId>().cloned();
        let family = &self.family;
        crate::envelope::in_request_scope(
            id,
            admit(&self.pipeline, req, move |caller, req| {
                handler(family, caller, req)
            }),
        )
    }
}

async fn admit<H, F>(state: &PipelineState, req: Request, handler: H) -> Response
where
    H: FnOnce(Caller, Request) -> F,
    F: Future<Output = Response>,
{
    let identity = match identity_from(req.headers()) {
        Ok(identity) => identity,
        Err(failure) => return failure.into_response(),
    };
    let span = tracing::Span::current();
    // As few records as may be: each is a lookup and a lock in the log's
    // layer. A cached scope (the usual case) is recorded with the caller
    // in one (an absent project records nothing); before a lookup, which
    // may log, the caller is recorded first, so that its lines name the
    // caller.
    let cached = state.resolver.cached(identity.agent_name());
    tracing::record_all!(
        span,
        agent = identity.agent_name().as_str(),
        user = identity.user_id().as_str(),
        thread = identity.thread_id().as_str(),
        project = cached.as_ref().map(|scope| scope.project.slug.as_str()),
    );
    let scope = match cached {
        Some(scope) => scope,
        None => {
            let scope = match state.resolver.resolve(identity.agent_name()).await {
                Ok(scope) => scope,
                Err(error) => return Failure::from(error).into_response(),
            };
            span.record("project", scope.project.slug.as_str());
            scope
        }
    };
    if let Err(refused) = state
        .limits
        .admit(identity.agent_name().as_str(), writes(req.uri().path()))
        .await
    {
        return refused;
    }
    // From the cached scope: no database round trip.
    let role = match scope.role_of(identity.user_id()) {
        Some(role) => Some(role),
        None if !state.require_membership => Some(MemberRole::Member),
        None => None,
    };
    let caller = Caller {
        identity,
        scope,
        role,
    };
    handler(caller, req).await
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn the_writes_are_told_from_their_paths() {
        assert!(writes("/agent-tools/nc/write"));
        assert!(writes("/agent-tools/business/create_meeting"));
        assert!(writes("/agent-tools/project/milestone/advance"));
        assert!(!writes("/agent-tools/nc/read"));
        assert!(!writes("/agent-tools/project/overview"));
        assert!(!writes("/agent-tools/nc/write/x"));
        assert!(!writes("agent-tools/nc/write"));
        // The router decodes the operation's name: so does the budget.
        assert!(writes("/agent-tools/nc/%77rite"));
        assert!(writes("/agent-tools/nc/wr%69te"));
        assert!(writes("/agent-tools/business/%63reate_meeting"));
        assert!(!writes("/agent-tools/nc/%72ead"));
        assert!(!writes("/agent-tools/nc/%FF"));
    }

    #[test]
    fn missing_or_blank_headers_are_named() {
        let failure = identity_from(&headers(&[
            ("x-acdm-user-id", "u-1"),
            ("x-acdm-thread-id", "   "),
        ]))
        .unwrap_err();
        let envelope = failure.envelope();
        assert_eq!(
            envelope.error_code(),
            Some(ErrorCode::MissingIdentityHeaders)
        );
        assert!(envelope.message().contains("X-ACDM-Agent-Name"));
        assert!(envelope.message().contains("X-ACDM-Thread-Id"));
        assert!(
            !envelope
                .message()
                .starts_with("missing or empty identity header(s): X-ACDM-User-Id")
        );
    }

    #[test]
    fn a_repeated_header_is_refused_and_a_full_set_is_an_identity() {
        let failure = identity_from(&headers(&[
            ("x-acdm-user-id", "u-1"),
            ("x-acdm-user-id", "u-2"),
            ("x-acdm-agent-name", "project-a"),
            ("x-acdm-thread-id", "t"),
        ]))
        .unwrap_err();
        assert_eq!(
            failure.envelope().error_code(),
            Some(ErrorCode::ValidationError)
        );
        let identity = identity_from(&headers(&[
            ("x-acdm-user-id", "u-1"),
            ("x-acdm-agent-name", "project-a"),
            ("x-acdm-thread-id", "t"),
        ]))
        .unwrap();
        assert_eq!(identity.agent_name().as_str(), "project-a");
    }

    #[test]
    fn the_identity_header_names_are_the_protocols_in_its_order() {
        for (name, canonical) in IDENTITY_NAMES.iter().zip(headers::IDENTITY) {
            assert!(
                name.as_str().eq_ignore_ascii_case(canonical),
                "{name} for {canonical}"
            );
        }
    }

    #[test]
    fn a_header_problem_is_told_with_the_headers_protocol_spelling() {
        let failure = identity_from(&headers(&[
            ("x-acdm-user-id", "u-1"),
            ("x-acdm-user-id", "u-2"),
        ]))
        .unwrap_err();
        assert_eq!(
            failure.envelope().message(),
            "the X-ACDM-User-Id header is given more than once"
        );
        let mut map = headers(&[("x-acdm-user-id", "u-1")]);
        map.insert(
            "x-acdm-thread-id",
            HeaderValue::from_bytes(b"t-\xff").unwrap(),
        );
        let failure = identity_from(&map).unwrap_err();
        assert_eq!(
            failure.envelope().message(),
            "the X-ACDM-Thread-Id header is not valid text"
        );
    }

    #[test]
    fn an_agents_limit_key_is_its_prefix_and_name() {
        for (prefix, agent) in [
            ("agent", "project-alpha"),
            ("agent-writes", "project-alpha"),
            ("agent", ""),
            ("agent", "é-agent:x"),
        ] {
            assert_eq!(limit_key(prefix, agent), format!("{prefix}:{agent}"));
        }
    }
}
