//! Opaque access tokens, checked by the issuer's introspection endpoint
//! (RFC 7662).
//!
//! A token that is not a JWT is POSTed (`token=…&token_type_hint=
//! access_token`) with this service's client credentials (HTTP Basic,
//! RFC 6749 §2.3.1). The answer must say `active: true`; `iss`, when
//! present, must be the issuer; `aud` must hold the audience (RFC 8707's
//! binding, as for JWTs: an introspection answer without `aud` is refused);
//! `exp` and `nbf`, when present, are checked with the same skew; a
//! refresh token is refused. The user is the same claim as in a JWT.
//!
//! Each answer is kept for [`IntrospectionSettings::cache_for`] (never
//! past the token's `exp`), keyed by the token's SHA-256, never the token
//! itself: a token revoked at the issuer stops working within that bound,
//! and a client's calls cost the issuer one request per bound. An
//! issuer that cannot be reached is [`TokenError::Unavailable`] (503),
//! never cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acdm_core::scope::Clock;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, header};
use secrecy::{ExposeSecret as _, SecretString};
use sha2::{Digest as _, Sha256};
use url::Url;

use super::{OidcSettings, TokenError, Verified, json_answer, user_of};
use crate::error::SourceError;
use crate::http::{HttpClient, UpstreamRequest, basic_authorization};

/// The introspection endpoint and this service's credentials at it.
#[derive(Debug, Clone)]
pub struct IntrospectionSettings {
    /// The endpoint (HTTPS, or plain HTTP on a loopback address).
    pub url: Url,
    /// This service's client id at the issuer.
    pub client_id: String,
    /// Its secret.
    pub client_secret: SecretString,
    /// How long an answer is reused (never past the token's `exp`).
    pub cache_for: Duration,
}

/// Answers kept at most; when full, the expired ones are dropped, and
/// all of them if none had expired.
const CACHE_ENTRIES: usize = 10_000;

/// Refusals kept at most (emptied when full of live ones).
const REFUSALS_KEPT: usize = 1_000;

/// The longest token asked about.
const MAX_TOKEN_BYTES: usize = 4096;

/// Whether `token` can be an access token at all: RFC 6750's `b64token`
/// (letters, digits, `-._~+/`, then `=` padding), at most
/// [`MAX_TOKEN_BYTES`].
fn plausible(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && token.len() <= MAX_TOKEN_BYTES
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

/// The largest introspection answer read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// A kept answer: the user, or why the token was refused.
type Answer = Result<Verified, String>;

pub(super) struct Introspector {
    settings: IntrospectionSettings,
    authorization: Option<HeaderValue>,
    client: HttpClient,
    clock: Arc<dyn Clock>,
    /// Answers admitting a token, and refusals, kept apart: a flood of
    /// made-up tokens fills only the refusals'.
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    admitted: HashMap<[u8; 32], (Answer, Instant)>,
    refused: HashMap<[u8; 32], (Answer, Instant)>,
}

impl Introspector {
    pub(super) fn new(
        settings: IntrospectionSettings,
        client: HttpClient,
        clock: Arc<dyn Clock>,
    ) -> Self {
        // RFC 6749 §2.3.1: both form-encoded before they are joined.
        let encode =
            |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let authorization = basic_authorization(
            &encode(&settings.client_id),
            &encode(settings.client_secret.expose_secret()),
        );
        Self {
            settings,
            authorization,
            client,
            clock,
            kept: Mutex::new(Kept::default()),
        }
    }

    /// Checks the opaque `token`.
    pub(super) async fn verify(
        &self,
        token: &str,
        oidc: &OidcSettings,
    ) -> Result<Verified, TokenError> {
        // Not even a bearer token (RFC 6750 §2.1's b64token), or longer
        // than any issuer's: refused without asking the issuer.
        if !plausible(token) {
            return Err(TokenError::Malformed);
        }
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = self.clock.now();
        if let Some(answer) = self.kept(&key, now) {
            return answer.map_err(TokenError::Invalid);
        }
        let claims = self.ask(token).await.map_err(TokenError::Unavailable)?;
        let answer = judge(&claims, oidc, unix_now());
        let mut until = now + self.settings.cache_for;
        if let Ok(verified) = &answer {
            // An answer without `exp` (`u64::MAX`) is kept for the bound.
            let left = verified.expires_at.saturating_sub(unix_now());
            if let Some(end) = now.checked_add(Duration::from_secs(left)) {
                until = until.min(end);
            }
        }
        self.keep(key, answer.clone(), until, now);
        answer.map_err(TokenError::Invalid)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn kept(&self, key: &[u8; 32], now: Instant) -> Option<Answer> {
        let kept = self.lock();
        [&kept.admitted, &kept.refused]
            .into_iter()
            .filter_map(|map| map.get(key))
            .find(|(_, until)| now < *until)
            .map(|(answer, _)| answer.clone())
    }

    fn keep(&self, key: [u8; 32], answer: Answer, until: Instant, now: Instant) {
        let mut kept = self.lock();
        let kept = &mut *kept;
        let (map, other, cap) = if answer.is_ok() {
            (&mut kept.admitted, &mut kept.refused, CACHE_ENTRIES)
        } else {
            (&mut kept.refused, &mut kept.admitted, REFUSALS_KEPT)
        };
        other.remove(&key);
        if map.len() >= cap {
            map.retain(|_, (_, until)| now < *until);
            if map.len() >= cap {
                map.clear();
            }
        }
        map.insert(key, (answer, until));
    }

    /// The endpoint's answer for `token`.
    async fn ask(
        &self,
        token: &str,
    ) -> Result<serde_json::Map<String, serde_json::Value>, SourceError> {
        let Some(authorization) = self.authorization.clone() else {
            return Err(SourceError::NotConfigured(
                "the introspection client's credentials cannot be sent in a header".into(),
            ));
        };
        let body: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        let request = UpstreamRequest::new(Method::POST, self.settings.url.clone())
            .headers(&headers)
            .authorization(authorization)
            .body(Bytes::from(body));
        // Asking twice changes nothing at the issuer: retried as a read.
        json_answer(
            &self.client,
            &request,
            MAX_ANSWER_BYTES,
            "its introspection answer",
        )
        .await
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Whether an introspection answer admits the token, at `now` (seconds
/// since the epoch): the user and when it expires, or why not.
fn judge(
    claims: &serde_json::Map<String, serde_json::Value>,
    oidc: &OidcSettings,
    now: u64,
) -> Answer {
    if claims.get("active") != Some(&serde_json::Value::Bool(true)) {
        return Err("it is not active (expired, revoked, or unknown to the issuer)".to_owned());
    }
    if claims.get("token_type").and_then(|t| t.as_str()) == Some("refresh_token") {
        return Err("it is a refresh token, not an access token".to_owned());
    }
    if let Some(iss) = claims.get("iss") {
        let issuer = oidc.issuer.trim_end_matches('/');
        if iss.as_str().map(|i| i.trim_end_matches('/')) != Some(issuer) {
            return Err("it is from another issuer (iss)".to_owned());
        }
    }
    let audience = oidc.audience.as_str();
    let for_us = match claims.get("aud") {
        Some(serde_json::Value::String(aud)) => aud == audience,
        Some(serde_json::Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(audience)),
        _ => false,
    };
    if !for_us {
        return Err("it is not for this server (aud)".to_owned());
    }
    let leeway = oidc.leeway.as_secs();
    let exp = claims.get("exp").and_then(serde_json::Value::as_u64);
    if exp.is_some_and(|exp| exp.saturating_add(leeway) <= now) {
        return Err("it has expired".to_owned());
    }
    if claims
        .get("nbf")
        .and_then(serde_json::Value::as_u64)
        .is_some_and(|nbf| nbf > now.saturating_add(leeway))
    {
        return Err("it is not valid yet (nbf)".to_owned());
    }
    let user = user_of(claims, oidc).map_err(|e| match e {
        TokenError::Invalid(why) => why,
        other => other.to_string(),
    })?;
    Ok(Verified {
        user,
        // Without `exp`, the answer is kept for the cache's bound only.
        expires_at: exp.unwrap_or(u64::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_can_be_a_bearer_token_is_asked_about() {
        for token in ["abc", "a.b-c_d~e+f/g==", "0123456789abcdef"] {
            assert!(plausible(token), "{token}");
        }
        for token in ["", "===", "a b", "a\nb", "ä", "a=b", &"a".repeat(4097)] {
            assert!(!plausible(token), "{token:?}");
        }
    }

    fn oidc() -> OidcSettings {
        OidcSettings::new(
            "https://idp.example.com/realms/a".into(),
            "https://acdm.example.com/mcp".into(),
        )
    }

    fn answer(extra: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        let mut claims = serde_json::json!({
            "active": true,
            "sub": "u-alice",
            "iss": "https://idp.example.com/realms/a",
            "aud": ["account", "https://acdm.example.com/mcp"],
            "exp": 2_000,
            "nbf": 1_000,
        });
        for (k, v) in extra.as_object().unwrap() {
            claims[k] = v.clone();
        }
        claims.as_object().unwrap().clone()
    }

    #[test]
    fn an_answer_admits_an_active_access_token_for_this_server_only() {
        let ok = judge(&answer(serde_json::json!({})), &oidc(), 1_500).unwrap();
        assert_eq!(ok.user, "u-alice");
        assert_eq!(ok.expires_at, 2_000);
        for (extra, now, why) in [
            (serde_json::json!({"active": false}), 1_500, "not active"),
            (serde_json::json!({"active": "true"}), 1_500, "not active"),
            (
                serde_json::json!({"token_type": "refresh_token"}),
                1_500,
                "refresh token",
            ),
            (
                serde_json::json!({"iss": "https://evil.example.com/"}),
                1_500,
                "another issuer",
            ),
            (
                serde_json::json!({"aud": "account"}),
                1_500,
                "not for this server",
            ),
            (
                serde_json::json!({"aud": null}),
                1_500,
                "not for this server",
            ),
            (serde_json::json!({}), 2_061, "expired"),
            (serde_json::json!({}), 900, "not valid yet"),
            (serde_json::json!({"sub": ""}), 1_500, "no `sub` claim"),
        ] {
            let refused = judge(&answer(extra.clone()), &oidc(), now).unwrap_err();
            assert!(refused.contains(why), "{extra} at {now}: {refused}");
        }
        // Without exp (optional in RFC 7662): admitted, kept for the bound.
        let mut without_exp = answer(serde_json::json!({}));
        without_exp.remove("exp");
        assert_eq!(
            judge(&without_exp, &oidc(), 1_500).unwrap().expires_at,
            u64::MAX
        );
        // Within the skew, and without iss (optional in RFC 7662).
        assert!(judge(&answer(serde_json::json!({})), &oidc(), 2_059).is_ok());
        let mut without_iss = answer(serde_json::json!({}));
        without_iss.remove("iss");
        assert!(judge(&without_iss, &oidc(), 1_500).is_ok());
    }
}
