//! A local OpenID Connect issuer for the tests: keys generated at start
//! (RSA 2048 with the `rsa` crate, EC P-256 with `p256`), its discovery
//! document and JWKS served over HTTP on loopback, and tokens signed with
//! jsonwebtoken exactly as an identity provider signs access tokens.
//!
//! The published key set can be changed while it runs (a rotation), and
//! every JWKS fetch is counted, so the tests see when the service fetched.
//! It also issues opaque access tokens and answers for them at its
//! introspection endpoint (RFC 7662, Keycloak's path), to the client
//! [`INTROSPECTION_CLIENT`] only; a token can be revoked there.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// A signing key of the issuer.
#[derive(Clone)]
pub struct SigningKey {
    /// Its `kid`.
    pub kid: String,
    /// Its algorithm.
    pub alg: Algorithm,
    encoding: EncodingKey,
    /// Its public half, as the JWKS lists it.
    pub jwk: Jwk,
}

impl SigningKey {
    /// A new RSA 2048 key for RS256.
    pub fn rsa(kid: &str) -> Self {
        use rsa::pkcs1::EncodeRsaPrivateKey;
        let key = rsa::PrivateKey::new(&mut getrandom::SysRng, 2048)
            .unwrap_or_else(|e| panic!("cannot generate an RSA key: {e}"));
        let der = key
            .to_pkcs1_der()
            .unwrap_or_else(|e| panic!("cannot encode the RSA key: {e}"));
        Self::from_der(
            kid,
            Algorithm::RS256,
            EncodingKey::from_rsa_der(der.as_bytes()),
        )
    }

    /// A new P-256 key for ES256.
    pub fn ec(kid: &str) -> Self {
        use p256::elliptic_curve::Generate as _;
        use p256::pkcs8::EncodePrivateKey;
        let key = p256::SecretKey::try_generate_from_rng(&mut getrandom::SysRng)
            .unwrap_or_else(|e| panic!("cannot generate an EC key: {e}"));
        let der = key
            .to_pkcs8_der()
            .unwrap_or_else(|e| panic!("cannot encode the EC key: {e}"));
        Self::from_der(
            kid,
            Algorithm::ES256,
            EncodingKey::from_ec_der(der.as_bytes()),
        )
    }

    fn from_der(kid: &str, alg: Algorithm, encoding: EncodingKey) -> Self {
        let mut jwk = Jwk::from_encoding_key(&encoding, alg)
            .unwrap_or_else(|e| panic!("cannot make the public JWK: {e}"));
        jwk.common.key_id = Some(kid.to_owned());
        Self {
            kid: kid.to_owned(),
            alg,
            encoding,
            jwk,
        }
    }

    /// `claims` signed with this key, its `kid` in the header.
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        self.sign_with(header, claims)
    }

    /// `claims` signed with this key under `header` as given.
    pub fn sign_with(&self, header: Header, claims: &Value) -> String {
        jsonwebtoken::encode(&header, claims, &self.encoding)
            .unwrap_or_else(|e| panic!("cannot sign a token: {e}"))
    }
}

struct Shared {
    issuer: String,
    keys: Mutex<Vec<Jwk>>,
    jwks_fetches: AtomicUsize,
    /// Opaque tokens issued: their introspection claims (without
    /// `active`), `None` once revoked.
    opaque: Mutex<HashMap<String, Option<Value>>>,
    introspections: AtomicUsize,
}

/// The client id and secret the introspection endpoint takes.
pub const INTROSPECTION_CLIENT: (&str, &str) = ("acdm-backend", "introspection s3cret:!");

/// The issuer, serving until dropped.
pub struct TestIssuer {
    /// Its URL (`http://127.0.0.1:<port>/realms/test`), the `iss` of its
    /// tokens.
    pub issuer: String,
    /// Its JWKS's URL.
    pub jwks_url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl TestIssuer {
    /// Starts an issuer publishing `keys`.
    pub async fn start(keys: &[&SigningKey]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("cannot bind the test issuer: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the test issuer has no address: {e}"));
        let issuer = format!("http://{addr}/realms/test");
        let shared = Arc::new(Shared {
            issuer: issuer.clone(),
            keys: Mutex::new(keys.iter().map(|k| k.jwk.clone()).collect()),
            jwks_fetches: AtomicUsize::new(0),
            opaque: Mutex::new(HashMap::new()),
            introspections: AtomicUsize::new(0),
        });
        let app = axum::Router::new()
            .route(
                "/realms/test/.well-known/openid-configuration",
                get(discovery),
            )
            .route("/realms/test/protocol/openid-connect/certs", get(jwks))
            .route(
                "/realms/test/protocol/openid-connect/token/introspect",
                post(introspect),
            )
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            jwks_url: format!("{issuer}/protocol/openid-connect/certs"),
            issuer,
            shared,
            task,
        }
    }

    /// Publishes `keys` instead of the keys published so far.
    pub fn publish(&self, keys: &[&SigningKey]) {
        *self.shared.keys.lock().unwrap_or_else(|p| p.into_inner()) =
            keys.iter().map(|k| k.jwk.clone()).collect();
    }

    /// Publishes `raw` as the JWKS's keys, as given (keys of any kind).
    pub fn publish_raw(&self, raw: Vec<Jwk>) {
        *self.shared.keys.lock().unwrap_or_else(|p| p.into_inner()) = raw;
    }

    /// The introspection endpoint's URL.
    pub fn introspection_url(&self) -> String {
        format!("{}/protocol/openid-connect/token/introspect", self.issuer)
    }

    /// Issues an opaque access token whose introspection answer is
    /// `claims` with `active: true`.
    pub fn issue_opaque(&self, claims: &Value) -> String {
        let mut bytes = [0u8; 24];
        getrandom::fill(&mut bytes).unwrap_or_else(|e| panic!("no randomness: {e}"));
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        self.shared
            .opaque
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token.clone(), Some(claims.clone()));
        token
    }

    /// Revokes an opaque token: introspection says `active: false` from now.
    pub fn revoke(&self, token: &str) {
        self.shared
            .opaque
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token.to_owned(), None);
    }

    /// How many introspection requests were answered (any outcome).
    pub fn introspections(&self) -> usize {
        self.shared.introspections.load(Ordering::SeqCst)
    }

    /// How many times the JWKS was fetched.
    pub fn jwks_fetches(&self) -> usize {
        self.shared.jwks_fetches.load(Ordering::SeqCst)
    }

    /// Claims of a valid access token for `user` and `audience`, expiring
    /// in an hour.
    pub fn claims(&self, user: &str, audience: &str) -> Value {
        let now = now();
        json!({
            "iss": self.issuer,
            "sub": user,
            "aud": audience,
            "iat": now,
            "nbf": now,
            "exp": now + 3600,
            "scope": "openid",
        })
    }
}

impl Drop for TestIssuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn discovery(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({
        "issuer": shared.issuer,
        "jwks_uri": format!("{}/protocol/openid-connect/certs", shared.issuer),
        "authorization_endpoint": format!("{}/protocol/openid-connect/auth", shared.issuer),
        "token_endpoint": format!("{}/protocol/openid-connect/token", shared.issuer),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256", "ES256"],
        "code_challenge_methods_supported": ["S256"],
    }))
}

async fn jwks(State(shared): State<Arc<Shared>>) -> Json<JwkSet> {
    shared.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    let keys = shared
        .keys
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    Json(JwkSet { keys })
}

/// RFC 7662: the client authenticates with HTTP Basic (RFC 6749 §2.3.1,
/// id and secret form-encoded); `token` in the form body.
async fn introspect(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    shared.introspections.fetch_add(1, Ordering::SeqCst);
    let encode = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let expected = {
        use base64::Engine as _;
        let (id, secret) = INTROSPECTION_CLIENT;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:{}",
                encode(id),
                encode(secret)
            ))
        )
    };
    let authorized = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == expected);
    if !authorized {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    let form_ok = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let token = url::form_urlencoded::parse(body.as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned());
    let (true, Some(token)) = (form_ok, token) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid_request"})),
        )
            .into_response();
    };
    let found = shared
        .opaque
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&token)
        .cloned()
        .flatten();
    match found {
        Some(Value::Object(mut claims)) => {
            claims.insert("active".to_owned(), json!(true));
            Json(Value::Object(claims)).into_response()
        }
        _ => Json(json!({"active": false})).into_response(),
    }
}
