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

use super::{OidcSettings, SOURCE, TokenError, Verified, user_of};
use crate::error::SourceError;
use crate::http::{HttpClient, Idempotency, UpstreamRequest, basic_authorization, read_capped};

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

/// The largest introspection answer read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// A kept answer: the user, or why the token was refused.
type Answer = Result<Verified, String>;

pub(super) struct Introspector {
    settings: IntrospectionSettings,
    authorization: Option<HeaderValue>,
    client: HttpClient,
    clock: Arc<dyn Clock>,
    kept: Mutex<HashMap<[u8; 32], (Answer, Instant)>>,
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
            kept: Mutex::new(HashMap::new()),
        }
    }

    /// Checks the opaque `token`.
    pub(super) async fn verify(
        &self,
        token: &str,
        oidc: &OidcSettings,
    ) -> Result<Verified, TokenError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = self.clock.now();
        if let Some(answer) = self.kept(&key, now) {
            return answer.map_err(TokenError::Invalid);
        }
        let claims = self.ask(token).await.map_err(TokenError::Unavailable)?;
        let answer = judge(&claims, oidc, unix_now());
        let mut until = now + self.settings.cache_for;
        if let Ok(verified) = &answer {
            let left = verified.expires_at.saturating_sub(unix_now());
            until = until.min(now + Duration::from_secs(left));
        }
        self.keep(key, answer.clone(), until, now);
        answer.map_err(TokenError::Invalid)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], (Answer, Instant)>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn kept(&self, key: &[u8; 32], now: Instant) -> Option<Answer> {
        self.lock()
            .get(key)
            .filter(|(_, until)| now < *until)
            .map(|(answer, _)| answer.clone())
    }

    fn keep(&self, key: [u8; 32], answer: Answer, until: Instant, now: Instant) {
        let mut kept = self.lock();
        if kept.len() >= CACHE_ENTRIES {
            kept.retain(|_, (_, until)| now < *until);
            if kept.len() >= CACHE_ENTRIES {
                kept.clear();
            }
        }
        kept.insert(key, (answer, until));
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
        let answer = self
            .client
            .send(SOURCE, Idempotency::Read, &request)
            .await?;
        let status = answer.status();
        if !status.is_success() {
            return Err(SourceError::upstream(
                SOURCE,
                Some(status.as_u16()),
                format!("its introspection endpoint answered {status}"),
            ));
        }
        let body = read_capped(SOURCE, answer, MAX_ANSWER_BYTES).await?;
        serde_json::from_slice(&body).map_err(|_| {
            SourceError::invalid(SOURCE, "its introspection answer is not a JSON object")
        })
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
        // Within the skew, and without iss (optional in RFC 7662).
        assert!(judge(&answer(serde_json::json!({})), &oidc(), 2_059).is_ok());
        let mut without_iss = answer(serde_json::json!({}));
        without_iss.remove("iss");
        assert!(judge(&without_iss, &oidc(), 1_500).is_ok());
    }
}
