//! People's own MCP clients: `/mcp` as an OAuth 2.1 resource server.
//!
//! The service gate lets a request to `/mcp` through without the service
//! token only when people's tokens are accepted; such a request must carry
//! `Authorization: Bearer <access token>`, which [`PeopleAuth::admit`]
//! checks ([`acdm_sources::oidc::TokenVerifier`]: the issuer's keys, `iss`,
//! `aud` = this server's resource URI, `exp`/`nbf`). Without a valid
//! token the answer is 401 with `WWW-Authenticate: Bearer
//! resource_metadata="…"` (RFC 9728 §5.1; `error="invalid_token"` when a
//! token was presented, RFC 6750 §3.1), and the metadata documents at
//! `/.well-known/oauth-protected-resource/mcp` and
//! `/.well-known/oauth-protected-resource` name the issuer as the
//! authorization server. A request with the token goes on as [`Person`]:
//! the user, and the projects they are a member of, read from the
//! database on every request (a removed member loses access with their
//! next request).

use std::sync::Arc;

use acdm_core::domain::MemberRole;
use acdm_core::project::OverviewData;
use acdm_core::{ProjectName, ProjectSlug, UserId};
use acdm_sources::oidc::TokenVerifier;
use async_trait::async_trait;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

/// A project a person may read, and their role in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// The project's slug.
    pub slug: ProjectSlug,
    /// Its name (its folder's).
    pub name: ProjectName,
    /// The person's role.
    pub role: MemberRole,
}

/// What the database says about people (in the service): their
/// memberships, and the overview of a project they are a member of.
#[async_trait]
pub trait PersonDirectory: Send + Sync {
    /// The projects `user` is a member of, any role.
    async fn memberships(&self, user: &UserId) -> Result<Vec<Membership>, String>;

    /// The overview of the project `slug` as `user` sees it (what
    /// `GET /agent-tools/project/overview` answers, and its one-line
    /// summary), or `None` when `user` is not a member of such a project
    /// (checked again here, whatever the caller checked).
    async fn overview(
        &self,
        user: &UserId,
        slug: &ProjectSlug,
    ) -> Result<Option<(OverviewData, String)>, String>;
}

/// A request authenticated with a person's access token: who, and what
/// they may read. In the request's extensions.
#[derive(Debug, Clone)]
pub struct Person {
    /// The user the token is for.
    pub user: UserId,
    /// Their projects.
    pub memberships: Arc<[Membership]>,
}

impl Person {
    /// Whether the person is a member of the project named `name`.
    pub(crate) fn may_read(&self, name: &ProjectName) -> bool {
        self.memberships.iter().any(|m| m.name == *name)
    }
}

/// People's access tokens on `/mcp`.
#[derive(Clone)]
pub struct PeopleAuth {
    verifier: TokenVerifier,
    directory: Arc<dyn PersonDirectory>,
    /// The protected resource's metadata document.
    metadata: Arc<str>,
    /// `Bearer resource_metadata="…"`.
    challenge: Arc<str>,
}

impl std::fmt::Debug for PeopleAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeopleAuth")
            .field("verifier", &self.verifier)
            .finish_non_exhaustive()
    }
}

impl PeopleAuth {
    /// People's tokens checked by `verifier`, their projects read from
    /// `directory`; `public_url` is the service's own (`https://host`), so
    /// the resource is `<public_url>/mcp`.
    pub fn new(
        verifier: TokenVerifier,
        directory: Arc<dyn PersonDirectory>,
        public_url: &str,
    ) -> Self {
        let base = public_url.trim_end_matches('/');
        let resource = format!("{base}/mcp");
        let metadata_url = format!("{base}/.well-known/oauth-protected-resource/mcp");
        let metadata = serde_json::json!({
            "resource": resource,
            // Verbatim: clients compare it with the issuer's own metadata
            // exactly (RFC 8414 §3.3), trailing slash included.
            "authorization_servers": [verifier.issuer()],
            "bearer_methods_supported": ["header"],
            "resource_name": "a-cdm knowledge (MCP)",
            "resource_documentation": format!("{base}/api-docs"),
        })
        .to_string();
        Self {
            verifier,
            directory,
            metadata: Arc::from(metadata),
            challenge: Arc::from(format!("Bearer resource_metadata=\"{metadata_url}\"")),
        }
    }

    /// Where people's projects and overviews are read.
    pub(crate) fn directory(&self) -> Arc<dyn PersonDirectory> {
        self.directory.clone()
    }

    /// The metadata document (RFC 9728 §2).
    pub(crate) fn metadata(&self) -> Response {
        json_response(StatusCode::OK, self.metadata.to_string())
    }

    /// The request with its [`Person`], or the answer refusing it.
    pub(crate) async fn admit(&self, mut request: Request) -> Result<Request, Response> {
        let mut values = request.headers().get_all(header::AUTHORIZATION).iter();
        let token = match (values.next(), values.next()) {
            (Some(value), None) => bearer(value),
            (None, _) => return Err(self.unauthorized(None)),
            (Some(_), Some(_)) => None,
        };
        let Some(token) = token else {
            return Err(self.unauthorized(Some(
                "send exactly one `Authorization: Bearer <access token>` header",
            )));
        };
        let verified = match self.verifier.verify(token).await {
            Ok(verified) => verified,
            Err(error) if error.is_unavailable() => {
                tracing::warn!(error = %error, "a person's token cannot be checked");
                return Err(unavailable(
                    "your access token cannot be checked with the identity provider now; retry later",
                ));
            }
            Err(error) => {
                tracing::info!(reason = %error, "a person's access token was refused");
                return Err(self.unauthorized(Some(&error.to_string())));
            }
        };
        let Ok(user) = UserId::parse(&verified.user) else {
            return Err(self.unauthorized(Some(
                "the access token's user claim is not a user id of this service",
            )));
        };
        let memberships = match self.directory.memberships(&user).await {
            Ok(memberships) => memberships,
            Err(error) => {
                tracing::warn!(error = %error, "cannot read a person's projects");
                return Err(unavailable(
                    "the service cannot read your projects now; retry later",
                ));
            }
        };
        request.extensions_mut().insert(Person {
            user,
            memberships: Arc::from(memberships),
        });
        Ok(request)
    }

    /// 401 with the challenge; `error="invalid_token"` and the reason when
    /// a token was presented.
    fn unauthorized(&self, reason: Option<&str>) -> Response {
        let (challenge, body) = match reason {
            None => (
                self.challenge.to_string(),
                serde_json::json!({
                    "error": "unauthorized",
                    "error_description": "this MCP server needs an access token: sign in through your client (OAuth), or send the service token",
                }),
            ),
            Some(reason) => (
                format!(
                    "{}, error=\"invalid_token\", error_description=\"{}\"",
                    self.challenge,
                    reason.replace(['"', '\\'], "'")
                ),
                serde_json::json!({"error": "invalid_token", "error_description": reason}),
            ),
        };
        let mut response = json_response(StatusCode::UNAUTHORIZED, body.to_string());
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// The token of `Bearer <token>` (the scheme in any case).
fn bearer(value: &HeaderValue) -> Option<&str> {
    let value = value.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn unavailable(message: &str) -> Response {
    let body =
        serde_json::json!({"error": "temporarily_unavailable", "error_description": message});
    let mut response = json_response(StatusCode::SERVICE_UNAVAILABLE, body.to_string());
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    response
}

/// `body` (JSON) with `status`.
fn json_response(status: StatusCode, body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_bearer_token_is_read() {
        let read = |raw: &str| bearer(&HeaderValue::from_str(raw).unwrap()).map(str::to_owned);
        assert_eq!(read("Bearer abc.def.ghi").as_deref(), Some("abc.def.ghi"));
        assert_eq!(read("bearer abc").as_deref(), Some("abc"));
        assert_eq!(read("Basic dXNlcjpwYXNz"), None);
        assert_eq!(read("Bearer "), None);
        assert_eq!(read("Bearer"), None);
    }
}
