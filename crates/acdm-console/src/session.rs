//! Console sessions without server-side state, so any replica serves any
//! request: a session is a token signed with HMAC-SHA256 (RustCrypto's
//! `hmac`) under a key derived from the admin token, carried in an
//! `HttpOnly`, `SameSite=Strict` cookie (`Secure` when the console is
//! served over TLS). Each form carries a CSRF token derived from the
//! session's nonce with the same key: it cannot be computed without the
//! key, and it is bound to one session. Both are checked with
//! `Mac::verify_slice`, in constant time.
//!
//! Rotating the admin token ends every session (the key changes).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The session cookie's name.
pub const COOKIE: &str = "acdm_console";

/// How long a session lasts, in seconds.
pub const LIFETIME_SECONDS: i64 = 8 * 3600;

/// What the key is derived for: the admin token keys an HMAC of this.
const KEY_LABEL: &[u8] = b"acdm-console-session-v1";

/// What a CSRF token's MAC covers before the session's nonce.
const CSRF_LABEL: &[u8] = b"csrf.";

type HmacSha256 = Hmac<Sha256>;

/// The signing key of sessions and CSRF tokens: an HMAC-SHA256 keyed
/// once, cloned for each token (a clone copies the keyed state, without
/// hashing the key again).
#[derive(Clone)]
pub struct SessionKey(HmacSha256);

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
    /// derives the same key (HMAC-SHA256 of a fixed label under the token,
    /// as the console has always derived it, so sessions made before an
    /// upgrade still open after it). `None` only if HMAC refused a key,
    /// which it never does: any length is a key.
    pub fn derive(admin_token: &[u8]) -> Option<Self> {
        let mut derive = HmacSha256::new_from_slice(admin_token).ok()?;
        derive.update(KEY_LABEL);
        let key = derive.finalize().into_bytes();
        HmacSha256::new_from_slice(&key).ok().map(Self)
    }

    /// The MAC state over `parts`, one after the other.
    fn mac(&self, parts: &[&[u8]]) -> HmacSha256 {
        let mut mac = self.0.clone();
        for part in parts {
            mac.update(part);
        }
        mac
    }

    /// Whether `tag` (unpadded URL-safe base64) is the MAC of `parts`:
    /// decoded, then compared in constant time by `verify_slice` (which
    /// also refuses a tag of another length).
    fn verifies(&self, parts: &[&[u8]], tag: &str) -> bool {
        let Ok(tag) = URL_SAFE_NO_PAD.decode(tag) else {
            return false;
        };
        self.mac(parts).verify_slice(&tag).is_ok()
    }

    /// The cookie value of `session`: `v1.<expiry>.<user>.<nonce>.<mac>`,
    /// the user in unpadded URL-safe base64, the MAC over everything
    /// before its dot.
    pub fn seal(&self, session: &Session) -> String {
        let body = format!(
            "v1.{}.{}.{}",
            session.expires,
            URL_SAFE_NO_PAD.encode(session.user.as_bytes()),
            session.nonce
        );
        let tag = URL_SAFE_NO_PAD.encode(self.mac(&[body.as_bytes()]).finalize().into_bytes());
        format!("{body}.{tag}")
    }

    /// The session a cookie value carries, when its signature is ours and
    /// it has not expired at `now` (unix seconds).
    pub fn open(&self, value: &str, now: i64) -> Option<Session> {
        let (body, tag) = value.rsplit_once('.')?;
        if !self.verifies(&[body.as_bytes()], tag) {
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

    /// The CSRF token of `session`'s forms: the MAC of `csrf.<nonce>`.
    pub fn csrf(&self, session: &Session) -> String {
        let mac = self.mac(&[CSRF_LABEL, session.nonce.as_bytes()]);
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    }

    /// Whether `token` is `session`'s CSRF token (constant time).
    pub fn csrf_matches(&self, session: &Session, token: &str) -> bool {
        self.verifies(&[CSRF_LABEL, session.nonce.as_bytes()], token)
    }
}

/// A fresh random nonce (a UUID v4's hex).
pub fn nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADMIN_TOKEN: &[u8] = b"admin-token-0123456789abcdef0123456789";

    fn key() -> SessionKey {
        SessionKey::derive(ADMIN_TOKEN).unwrap()
    }

    fn session() -> Session {
        Session {
            user: "u-ops".to_owned(),
            nonce: "0123456789abcdef0123456789abcdef".to_owned(),
            expires: 1_000,
        }
    }

    /// `value` with its MAC replaced by `tag`.
    fn with_tag(value: &str, tag: &str) -> String {
        let (body, _) = value.rsplit_once('.').unwrap();
        format!("{body}.{tag}")
    }

    /// `text` with its first character changed (a base64 letter still).
    fn flip_first(text: &str) -> String {
        let first = if text.starts_with('A') { "B" } else { "A" };
        format!("{first}{}", &text[1..])
    }

    #[test]
    fn tokens_made_by_the_hand_written_hmac_still_open() {
        // Computed with Python's `hmac` (the console's earlier, hand-written
        // HMAC gave RFC 4231's answers): a session signed before the
        // upgrade still opens after it, so a rolling upgrade signs no one out.
        let sealed = "v1.1000.dS1vcHM.0123456789abcdef0123456789abcdef.\
                      gJ1brBnBfIHEozQmGB5RIRNZD9RKde38oyg_uMo76No";
        assert_eq!(key().seal(&session()), sealed);
        assert_eq!(key().open(sealed, 999), Some(session()));
        let csrf = "cr0vlFXFK7TqQal1kGlqAaywss-4ZCUCSSsTVWLli0Q";
        assert_eq!(key().csrf(&session()), csrf);
        assert!(key().csrf_matches(&session(), csrf));
    }

    #[test]
    fn a_session_opens_only_with_its_key_unaltered_and_unexpired() {
        let key = key();
        let session = Session {
            nonce: nonce(),
            ..session()
        };
        let sealed = key.seal(&session);
        assert_eq!(key.open(&sealed, 999), Some(session));
        assert_eq!(key.open(&sealed, 1_000), None, "expired");
        assert_eq!(key.open(&sealed, i64::MAX), None, "expired long ago");
        let other = SessionKey::derive(b"another-admin-token-0123456789abcdef").unwrap();
        assert_eq!(other.open(&sealed, 0), None, "another deployment's key");
        assert_eq!(key.open("", 0), None);
        assert_eq!(key.open("v1.1.2.3", 0), None);
    }

    #[test]
    fn a_tampered_session_is_refused() {
        let key = key();
        let sealed = key.seal(&session());
        let (_, tag) = sealed.rsplit_once('.').unwrap();
        let tampered = [
            // A later expiry, another user, another nonce, the same MAC.
            sealed.replace("v1.1000.", "v1.9999."),
            sealed.replace(
                &URL_SAFE_NO_PAD.encode("u-ops"),
                &URL_SAFE_NO_PAD.encode("u-root"),
            ),
            sealed.replace("0123456789abcdef0123", "f123456789abcdef0123"),
            // Another version, signed: the MAC is right, the format is not.
            {
                let body = "v2.1000.dS1vcHM.0123456789abcdef0123456789abcdef";
                let tag =
                    URL_SAFE_NO_PAD.encode(key.mac(&[body.as_bytes()]).finalize().into_bytes());
                format!("{body}.{tag}")
            },
            // The MAC changed, cut short, lengthened, missing or not base64.
            with_tag(&sealed, &flip_first(tag)),
            with_tag(&sealed, &tag[..tag.len() - 1]),
            with_tag(&sealed, &tag[..40]),
            with_tag(&sealed, &format!("{tag}AAAA")),
            with_tag(&sealed, ""),
            with_tag(&sealed, "!!!!"),
            sealed.replacen('.', "", 1),
        ];
        for value in &tampered {
            assert_ne!(value, &sealed);
            assert_eq!(key.open(value, 0), None, "{value}");
        }
        // A MAC whose last character differs only in bits base64 leaves
        // unused decodes to the same bytes: refused as not canonical.
        // 32 bytes take 43 characters, the last carrying 4 bits and 2
        // unused: its sibling differs in the lowest, unused bit only.
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        assert_eq!(tag.len(), 43);
        let last = tag.as_bytes()[42];
        let index = ALPHABET.iter().position(|&c| c == last).unwrap();
        let sibling = char::from(ALPHABET[index ^ 1]);
        let mut loose = tag[..tag.len() - 1].to_owned();
        loose.push(sibling);
        let lenient = base64::engine::GeneralPurpose::new(
            &base64::alphabet::URL_SAFE,
            base64::engine::GeneralPurposeConfig::new()
                .with_encode_padding(false)
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone)
                .with_decode_allow_trailing_bits(true),
        );
        assert_eq!(
            lenient.decode(&loose).unwrap(),
            lenient.decode(tag).unwrap(),
            "the sibling carries the same MAC"
        );
        assert_eq!(key.open(&with_tag(&sealed, &loose), 0), None);
    }

    #[test]
    fn a_csrf_token_is_bound_to_its_session_and_its_key() {
        let key = key();
        let session = session();
        let csrf = key.csrf(&session);
        assert!(key.csrf_matches(&session, &csrf));
        assert!(!key.csrf_matches(&session, ""));
        assert!(!key.csrf_matches(&session, "x"));
        assert!(!key.csrf_matches(&session, &csrf[..csrf.len() - 1]));
        assert!(!key.csrf_matches(&session, &format!("{csrf}A")));
        assert!(!key.csrf_matches(&session, &flip_first(&csrf)));
        let mut second = session.clone();
        second.nonce = nonce();
        assert!(!key.csrf_matches(&second, &csrf), "bound to one session");
        let other = SessionKey::derive(b"another-admin-token-0123456789abcdef").unwrap();
        assert!(!other.csrf_matches(&session, &csrf), "another key's token");
        // Not the session's own MAC either: a CSRF token is labelled.
        let sealed = key.seal(&session);
        let (_, tag) = sealed.rsplit_once('.').unwrap();
        assert!(!key.csrf_matches(&session, tag));
    }

    #[test]
    fn the_key_never_shows_in_debug() {
        assert_eq!(format!("{:?}", key()), "SessionKey(…)");
    }
}
