//! People's access tokens: JWTs an OpenID Connect issuer signed, checked
//! against that issuer's published keys (its JWKS), as an OAuth 2.1
//! resource server checks them.
//!
//! - **Keys.** The JWKS is found by discovery (`<issuer>/.well-known/
//!   openid-configuration`, whose `issuer` must be the configured one) or
//!   named directly, fetched through the same [`HttpClient`] as every
//!   upstream call, and cached by `kid`. A token naming a `kid` the cache
//!   does not hold triggers one refetch, at most one per
//!   [`OidcSettings::refetch_after`] however many tokens ask (so a rotated
//!   key is accepted within that bound without a restart, and a flood of
//!   made-up `kid`s costs the issuer one request per bound). Keys are also
//!   refetched once older than [`OidcSettings::max_key_age`], so a key the
//!   issuer withdrew stops verifying. Symmetric (`oct`) keys and keys
//!   marked for encryption are never used.
//! - **Algorithms.** Only asymmetric ones (RSA PKCS#1 and PSS, ECDSA P-256
//!   and P-384, EdDSA); a token's `alg` must be one of them and match its
//!   key's family and the key's own `alg` when it states one. `none` does
//!   not parse, and an `HS256` token (which would use a public key as an
//!   HMAC secret) is refused before any key is looked at.
//! - **Claims.** `iss` is the configured issuer; `aud` is required (a
//!   token without it is refused: RFC 8707's audience binding) and must
//!   hold the configured audience; `exp` is required and `nbf` checked,
//!   both with [`OidcSettings::leeway`] for clock skew. The user is the
//!   string claim [`OidcSettings::user_claim`] names (`sub` by default;
//!   `email` only with `email_verified: true`).
//! - **Fetching.** A fetch runs in a task of its own, so neither the
//!   calling request's deadline nor its caller going away cuts it short,
//!   and the calls needing it meanwhile wait for it; the refetch bound
//!   counts from the last fetch that ended. While the issuer cannot be
//!   reached, a token whose key is not held is
//!   [`TokenError::Unavailable`] (503), not a bad token, and keys held are
//!   dropped after six key lifetimes.
//!
//! The token itself is never logged nor put in an error.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use acdm_core::scope::{Clock, SystemClock};
use http::{HeaderMap, HeaderValue, Method, header::ACCEPT};
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, KeyOperations, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use url::Url;

use crate::error::SourceError;
use crate::http::{HttpClient, Idempotency, UpstreamRequest, read_capped};

mod introspection;
pub use introspection::IntrospectionSettings;

/// How the errors and logs name the issuer.
const SOURCE: &str = "identity provider";

/// The largest discovery document or JWKS read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// The algorithms a token may be signed with: asymmetric only.
const ACCEPTED: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Which issuer to trust, and how.
#[derive(Debug, Clone)]
pub struct OidcSettings {
    /// The issuer, exactly as its tokens' `iss` say it and as it was
    /// configured (a trailing slash is tolerated either way in `iss`); an
    /// http(s) URL.
    pub issuer: String,
    /// The audience tokens must name in `aud`: this server's resource URI.
    pub audience: String,
    /// The JWKS to use instead of the one discovery names.
    pub jwks_url: Option<Url>,
    /// The claim holding the user's id.
    pub user_claim: String,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
    /// The least time between two fetches of the JWKS caused by an
    /// unknown `kid`.
    pub refetch_after: Duration,
    /// Keys older than this are fetched again before they are used.
    pub max_key_age: Duration,
    /// The issuer's introspection endpoint (RFC 7662), for access tokens
    /// that are not JWTs; without it such a token is refused.
    pub introspection: Option<IntrospectionSettings>,
}

impl OidcSettings {
    /// Settings for `issuer` and `audience` with the defaults: `sub`, 60 s
    /// of skew, a refetch at most every 30 s, keys kept 10 minutes.
    pub fn new(issuer: String, audience: String) -> Self {
        Self {
            issuer,
            audience,
            jwks_url: None,
            user_claim: "sub".to_owned(),
            leeway: Duration::from_secs(60),
            refetch_after: Duration::from_secs(30),
            max_key_age: Duration::from_secs(600),
            introspection: None,
        }
    }
}

/// A verified token: who it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The user claim's value.
    pub user: String,
    /// When the token expires (seconds since the epoch).
    pub expires_at: u64,
}

/// Why a token was refused. The message is for the caller's
/// `error_description`: it names what was wrong, never the token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Not a JWS compact token with a readable header.
    #[error("the access token is not a signed JWT")]
    Malformed,
    /// Signed with an algorithm this server does not accept.
    #[error("the access token's algorithm is not accepted (only RS*, PS*, ES256, ES384, EdDSA)")]
    Algorithm,
    /// No key of the issuer matches the token's `kid`.
    #[error("the access token was signed with a key the issuer does not publish")]
    UnknownKey,
    /// The signature or a claim is wrong.
    #[error("the access token is invalid: {0}")]
    Invalid(String),
    /// The issuer's keys cannot be fetched now.
    #[error("the identity provider's keys cannot be fetched: {0}")]
    Unavailable(SourceError),
}

impl TokenError {
    /// True when the token may be fine and the issuer is the problem (the
    /// caller should answer 503, not 401).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

/// Checks people's access tokens. Cheap to clone.
#[derive(Clone)]
pub struct TokenVerifier {
    inner: Arc<Inner>,
}

struct Inner {
    settings: OidcSettings,
    client: HttpClient,
    clock: Arc<dyn Clock>,
    keys: std::sync::RwLock<Keys>,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
    /// Opaque tokens' checker, when the issuer has an introspection
    /// endpoint configured.
    introspector: Option<introspection::Introspector>,
}

#[derive(Default)]
struct Keys {
    by_kid: HashMap<String, (DecodingKey, Option<Algorithm>)>,
    /// Keys without a `kid`, usable by a token without one.
    unnamed: Vec<(DecodingKey, Option<Algorithm>)>,
    /// When the keys held were fetched.
    fetched_at: Option<Instant>,
    /// When the last fetch ended, whatever its outcome.
    ended_at: Option<Instant>,
    /// Whether the last fetch failed.
    failed: bool,
    jwks_url: Option<Url>,
}

/// Held keys are dropped when the issuer has been unreachable this many
/// key lifetimes since they were fetched (an hour by default).
const HARD_MAX_AGE_FACTOR: u32 = 6;

impl std::fmt::Debug for TokenVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenVerifier")
            .field("issuer", &self.inner.settings.issuer)
            .finish_non_exhaustive()
    }
}

impl TokenVerifier {
    /// A verifier fetching keys through `client`.
    pub fn new(settings: OidcSettings, client: HttpClient) -> Self {
        Self::with_clock(settings, client, Arc::new(SystemClock))
    }

    /// [`TokenVerifier::new`] on `clock` (the refetch bounds; tests).
    pub fn with_clock(settings: OidcSettings, client: HttpClient, clock: Arc<dyn Clock>) -> Self {
        let introspector = settings.introspection.clone().map(|introspection| {
            introspection::Introspector::new(introspection, client.clone(), clock.clone())
        });
        Self {
            inner: Arc::new(Inner {
                settings,
                client,
                clock,
                keys: std::sync::RwLock::default(),
                fetching: tokio::sync::Mutex::new(()),
                introspector,
            }),
        }
    }

    /// The issuer, as configured.
    pub fn issuer(&self) -> &str {
        &self.inner.settings.issuer
    }

    /// Checks `token`; the user it is for. A JWT is verified here; any
    /// other token is asked about at the introspection endpoint, when one
    /// is configured (refused as malformed otherwise).
    pub async fn verify(&self, token: &str) -> Result<Verified, TokenError> {
        let Ok(header) = jsonwebtoken::decode_header(token) else {
            return match &self.inner.introspector {
                Some(introspector) => introspector.verify(token, &self.inner.settings).await,
                None => Err(TokenError::Malformed),
            };
        };
        if !ACCEPTED.contains(&header.alg) {
            return Err(TokenError::Algorithm);
        }
        let key = self.key_for(header.kid.as_deref(), header.alg).await?;
        let settings = &self.inner.settings;
        let mut validation = Validation::new(header.alg);
        let issuer = settings.issuer.as_str();
        validation.set_issuer(&[issuer, issuer.trim_end_matches('/')]);
        validation.set_audience(&[settings.audience.as_str()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = settings.leeway.as_secs();
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
            token,
            &key,
            &validation,
        )
        .map_err(|e| TokenError::Invalid(describe(&e)))?;
        let user = user_of(&data.claims, settings)?;
        let expires_at = data
            .claims
            .get("exp")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or_default();
        Ok(Verified { user, expires_at })
    }

    /// The key for a token's `kid` and `alg`, fetching the JWKS when the
    /// cache has none (within the refetch bound) or is too old.
    ///
    /// A fetch runs in a task of its own: it is not cut short by the
    /// calling request's deadline or by its caller going away, and the
    /// calls that need it meanwhile wait for it. The refetch bound counts
    /// from the last fetch that *ended*; while the last one failed, a token
    /// whose key is not held is `Unavailable` (503), not a bad token.
    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, TokenError> {
        let now = self.inner.clock.now();
        let settings = &self.inner.settings;
        let (found, stale, may_refetch) = {
            let keys = self.read_keys();
            let stale = keys
                .fetched_at
                .is_none_or(|at| now.duration_since(at) >= settings.max_key_age);
            let may_refetch = keys
                .ended_at
                .is_none_or(|at| now.duration_since(at) >= settings.refetch_after);
            (keys.find(kid, alg), stale, may_refetch)
        };
        match found {
            Some(key) if !stale || !may_refetch => return key,
            None if !may_refetch => return Err(self.read_keys().missing()),
            _ => {}
        }
        let _one = self.inner.fetching.lock().await;
        // A fetch that ended while this call waited answers it.
        let ended_meanwhile = self.read_keys().ended_at.is_some_and(|at| at >= now);
        if !ended_meanwhile {
            let this = self.clone();
            let fetched = tokio::spawn(async move { this.fetch_and_keep().await }).await;
            if fetched.is_err() {
                self.write_keys().failed = true;
            }
        }
        let keys = self.read_keys();
        match keys.find(kid, alg) {
            Some(key) => key,
            None => Err(keys.missing()),
        }
    }

    /// Fetches the JWKS and keeps its keys; on failure keeps the keys held
    /// (dropped once older than [`HARD_MAX_AGE_FACTOR`] key ages: a key the
    /// issuer withdrew must not verify for ever while it is unreachable).
    async fn fetch_and_keep(&self) {
        let outcome = self.fetch().await;
        let ended = self.inner.clock.now();
        let mut keys = self.write_keys();
        keys.ended_at = Some(ended);
        match outcome {
            Ok((url, by_kid, unnamed)) => {
                keys.by_kid = by_kid;
                keys.unnamed = unnamed;
                keys.fetched_at = Some(ended);
                keys.jwks_url = Some(url);
                keys.failed = false;
                tracing::info!(
                    keys = keys.by_kid.len() + keys.unnamed.len(),
                    "identity provider keys fetched"
                );
            }
            Err(error) => {
                tracing::warn!(error = %error, "cannot fetch the identity provider's keys");
                keys.failed = true;
                let hard_max = self.inner.settings.max_key_age * HARD_MAX_AGE_FACTOR;
                if keys
                    .fetched_at
                    .is_some_and(|at| ended.duration_since(at) >= hard_max)
                {
                    keys.by_kid.clear();
                    keys.unnamed.clear();
                    keys.fetched_at = None;
                }
            }
        }
    }

    fn read_keys(&self) -> std::sync::RwLockReadGuard<'_, Keys> {
        self.inner.keys.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_keys(&self) -> std::sync::RwLockWriteGuard<'_, Keys> {
        self.inner.keys.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The JWKS's URL (discovered once) and its usable keys.
    async fn fetch(
        &self,
    ) -> Result<(Url, KeyMap, Vec<(DecodingKey, Option<Algorithm>)>), SourceError> {
        let known = self.read_keys().jwks_url.clone();
        let url = match self.inner.settings.jwks_url.clone().or(known) {
            Some(url) => url,
            None => self.discover().await?,
        };
        let set: JwkSetDocument = self.get_json(&url).await?;
        let mut by_kid = HashMap::new();
        let mut unnamed = Vec::new();
        for raw in set.keys {
            let Ok(jwk) = serde_json::from_value::<Jwk>(raw) else {
                continue;
            };
            if !usable_for_signatures(&jwk) {
                continue;
            }
            let Ok(key) = DecodingKey::from_jwk(&jwk) else {
                continue;
            };
            // A stated algorithm must be a signature algorithm (a key
            // for RSA-OAEP is not one to verify with).
            let alg = match jwk.common.key_algorithm {
                None => None,
                Some(stated) => match stated.to_string().parse::<Algorithm>() {
                    Ok(alg) => Some(alg),
                    Err(_) => continue,
                },
            };
            match jwk.common.key_id {
                Some(kid) => {
                    by_kid.insert(kid, (key, alg));
                }
                None => unnamed.push((key, alg)),
            }
        }
        Ok((url, by_kid, unnamed))
    }

    /// The `jwks_uri` of the issuer's discovery document, whose `issuer`
    /// must be the configured one.
    async fn discover(&self) -> Result<Url, SourceError> {
        let issuer = self.inner.settings.issuer.as_str();
        let url = Url::parse(&format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        ))
        .map_err(|_| SourceError::NotConfigured("the issuer URL cannot be extended".into()))?;
        let document: Discovery = self.get_json(&url).await?;
        if document.issuer.trim_end_matches('/') != issuer.trim_end_matches('/') {
            return Err(SourceError::invalid(
                SOURCE,
                "its discovery document names another issuer",
            ));
        }
        let jwks = Url::parse(&document.jwks_uri)
            .map_err(|_| SourceError::invalid(SOURCE, "its jwks_uri is not a URL"))?;
        if !secure_or_loopback(&jwks) {
            return Err(SourceError::invalid(
                SOURCE,
                "its jwks_uri is neither HTTPS nor on a loopback address",
            ));
        }
        Ok(jwks)
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &Url) -> Result<T, SourceError> {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let request = UpstreamRequest::new(Method::GET, url.clone()).headers(&headers);
        json_answer(
            &self.inner.client,
            &request,
            MAX_DOCUMENT_BYTES,
            "its answer",
        )
        .await
    }
}

type KeyMap = HashMap<String, (DecodingKey, Option<Algorithm>)>;

/// Sends a read to the issuer and parses its JSON answer (at most
/// `max_bytes`); `what` names the answer in errors.
async fn json_answer<T: serde::de::DeserializeOwned>(
    client: &HttpClient,
    request: &UpstreamRequest,
    max_bytes: usize,
    what: &str,
) -> Result<T, SourceError> {
    let answer = client.send(SOURCE, Idempotency::Read, request).await?;
    let status = answer.status();
    if !status.is_success() {
        return Err(SourceError::upstream(
            SOURCE,
            Some(status.as_u16()),
            format!("{what} was {status}"),
        ));
    }
    let body = read_capped(SOURCE, answer, max_bytes).await?;
    serde_json::from_slice(&body)
        .map_err(|_| SourceError::invalid(SOURCE, format!("{what} is not the JSON expected")))
}

impl Keys {
    /// Why no key matches: the issuer is unreachable, or it publishes none.
    fn missing(&self) -> TokenError {
        if self.failed {
            TokenError::Unavailable(SourceError::invalid(
                SOURCE,
                "its keys could not be fetched at the last attempt",
            ))
        } else {
            TokenError::UnknownKey
        }
    }

    /// The key for `kid` (or the only unnamed one for a token without a
    /// `kid`), usable with `alg`.
    fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<Result<DecodingKey, TokenError>> {
        let (key, stated) = match kid {
            Some(kid) => self.by_kid.get(kid)?,
            None => match self.unnamed.as_slice() {
                [only] => only,
                _ => match (self.unnamed.is_empty(), self.by_kid.len()) {
                    (true, 1) => self.by_kid.values().next()?,
                    _ => return None,
                },
            },
        };
        if stated.is_some_and(|stated| stated != alg) || !key.family().algorithms().contains(&alg) {
            return Some(Err(TokenError::Algorithm));
        }
        Some(Ok(key.clone()))
    }
}

/// A key the issuer publishes for verifying signatures: not symmetric,
/// not for encryption, not restricted to other operations.
fn usable_for_signatures(jwk: &Jwk) -> bool {
    let asymmetric = matches!(
        jwk.algorithm,
        AlgorithmParameters::RSA(_)
            | AlgorithmParameters::EllipticCurve(_)
            | AlgorithmParameters::OctetKeyPair(_)
    );
    let for_signing =
        !matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature);
    let may_verify = jwk
        .common
        .key_operations
        .as_ref()
        .is_none_or(|ops| ops.contains(&KeyOperations::Verify));
    asymmetric && for_signing && may_verify
}

/// HTTPS, or plain HTTP to a loopback address (a local identity provider).
pub fn secure_or_loopback(url: &Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => match url.host() {
            Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        },
        _ => false,
    }
}

/// The user a token's (or an introspection answer's) claims name: the
/// configured claim, a non-empty string; `email` only when verified.
fn user_of(
    claims: &serde_json::Map<String, serde_json::Value>,
    settings: &OidcSettings,
) -> Result<String, TokenError> {
    let user = claims
        .get(&settings.user_claim)
        .and_then(serde_json::Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| {
            TokenError::Invalid(format!(
                "it has no `{}` claim naming the user",
                settings.user_claim
            ))
        })?;
    // An address the person may have typed but not proven names no one.
    if settings.user_claim == "email"
        && claims.get("email_verified") != Some(&serde_json::Value::Bool(true))
    {
        return Err(TokenError::Invalid(
            "its `email` is not verified (`email_verified` is not true)".to_owned(),
        ));
    }
    Ok(user.to_owned())
}

/// What a verification error says, in words a person configuring a client
/// can act on.
fn describe(error: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::InvalidSignature => "its signature does not verify".to_owned(),
        ErrorKind::ExpiredSignature => "it has expired".to_owned(),
        ErrorKind::ImmatureSignature => "it is not valid yet (nbf)".to_owned(),
        ErrorKind::InvalidAudience => "it is not for this server (aud)".to_owned(),
        ErrorKind::InvalidIssuer => "it is from another issuer (iss)".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => format!("it has no `{claim}` claim"),
        ErrorKind::InvalidAlgorithm => "its algorithm does not match its key".to_owned(),
        _ => "it cannot be read".to_owned(),
    }
}

#[derive(serde::Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
}

#[derive(serde::Deserialize)]
struct JwkSetDocument {
    keys: Vec<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_is_accepted() {
        for (url, ok) in [
            ("https://idp.example.com/", true),
            ("http://127.0.0.1:8080/realms/a", true),
            ("http://[::1]:9000/", true),
            ("http://localhost:9000/", true),
            ("http://idp.example.com/", false),
            ("http://10.0.0.1/", false),
            ("ftp://idp.example.com/", false),
        ] {
            assert_eq!(secure_or_loopback(&Url::parse(url).unwrap()), ok, "{url}");
        }
    }
}
