//! Console sessions without server-side state, so any replica serves any
//! request: a session is a token signed with HMAC-SHA256 under a key
//! derived from the admin token, carried in an `HttpOnly`,
//! `SameSite=Strict` cookie (`Secure` when the console is served over TLS).
//! Each form carries a CSRF token derived from the session's nonce with
//! the same key: it cannot be computed without the key, and it is bound to
//! one session.
//!
//! Rotating the admin token ends every session (the key changes).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const COOKIE: &str = "acdm_console";

/// How long a session lasts, in seconds.
pub const LIFETIME_SECONDS: i64 = 8 * 3600;

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    let hashed: [u8; 32];
    let key = if key.len() > BLOCK {
        hashed = Sha256::digest(key).into();
        &hashed[..]
    } else {
        key
    };
    for (slot, byte) in block.iter_mut().zip(key) {
        *slot = *byte;
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// The signing key of sessions and CSRF tokens.
#[derive(Clone)]
pub struct SessionKey([u8; 32]);

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(…)")
    }
}

/// A signed-in operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Who, as recorded on the events the console makes (a direct actor).
    pub user: String,
    /// Random per sign-in; the CSRF token is derived from it.
    pub nonce: String,
    /// Unix seconds after which the session is refused.
    pub expires: i64,
}

impl SessionKey {
    /// The key for `admin_token`: every replica with the same admin token
    /// derives the same key.
    pub fn derive(admin_token: &[u8]) -> Self {
        Self(hmac_sha256(admin_token, b"acdm-console-session-v1"))
    }

    fn mac(&self, message: &str) -> String {
        URL_SAFE_NO_PAD.encode(hmac_sha256(&self.0, message.as_bytes()))
    }

    /// The cookie value of `session`.
    pub fn seal(&self, session: &Session) -> String {
        let body = format!(
            "v1.{}.{}.{}",
            session.expires,
            URL_SAFE_NO_PAD.encode(session.user.as_bytes()),
            session.nonce
        );
        let mac = self.mac(&body);
        format!("{body}.{mac}")
    }

    /// The session a cookie value carries, when its signature is ours and
    /// it has not expired at `now` (unix seconds).
    pub fn open(&self, value: &str, now: i64) -> Option<Session> {
        let (body, mac) = value.rsplit_once('.')?;
        let expected = self.mac(body);
        if !bool::from(expected.as_bytes().ct_eq(mac.as_bytes())) {
            return None;
        }
        let mut parts = body.split('.');
        let (version, expires, user, nonce) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version != "v1" || parts.next().is_some() {
            return None;
        }
        let expires: i64 = expires.parse().ok()?;
        if expires <= now {
            return None;
        }
        let user = String::from_utf8(URL_SAFE_NO_PAD.decode(user).ok()?).ok()?;
        Some(Session {
            user,
            nonce: nonce.to_owned(),
            expires,
        })
    }

    /// The CSRF token of `session`'s forms.
    pub fn csrf(&self, session: &Session) -> String {
        self.mac(&format!("csrf.{}", session.nonce))
    }

    /// Whether `token` is `session`'s CSRF token (constant time).
    pub fn csrf_matches(&self, session: &Session, token: &str) -> bool {
        bool::from(self.csrf(session).as_bytes().ct_eq(token.as_bytes()))
    }
}

/// A fresh random nonce (a UUID v4's hex).
pub fn nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2.
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block.
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn a_session_opens_only_with_its_key_unaltered_and_unexpired() {
        let key = SessionKey::derive(b"admin-token-0123456789abcdef0123456789");
        let session = Session {
            user: "u-ops".to_owned(),
            nonce: nonce(),
            expires: 1_000,
        };
        let sealed = key.seal(&session);
        assert_eq!(key.open(&sealed, 999), Some(session.clone()));
        assert_eq!(key.open(&sealed, 1_000), None, "expired");
        let other = SessionKey::derive(b"another-admin-token-0123456789abcdef");
        assert_eq!(other.open(&sealed, 0), None, "another deployment's key");
        let forged = sealed.replace("v1.1000.", "v1.9999.");
        assert_eq!(key.open(&forged, 0), None, "a changed expiry");
        assert_eq!(key.open("", 0), None);
        assert_eq!(key.open("v1.1.2.3", 0), None);
        let csrf = key.csrf(&session);
        assert!(key.csrf_matches(&session, &csrf));
        assert!(!key.csrf_matches(&session, "x"));
        let mut second = session;
        second.nonce = nonce();
        assert!(!key.csrf_matches(&second, &csrf), "bound to one session");
    }
}
