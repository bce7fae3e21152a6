//! Comparing a presented shared token with the configured one without
//! leaking either its content or its length through timing.
//!
//! Both sides are hashed to fixed-size SHA-256 digests and the digests are
//! compared in constant time (`subtle`): a plain or even a `ct_eq`
//! comparison of the raw bytes returns early when lengths differ
//! (security notes §4.1). Only the digest of the configured token is kept.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The digest of a configured token.
#[derive(Clone)]
pub struct TokenDigest([u8; 32]);

impl TokenDigest {
    /// Digests `token`. An empty token yields `None`: an unset token must
    /// refuse everything, not match an empty header.
    pub fn of(token: &str) -> Option<Self> {
        if token.is_empty() {
            return None;
        }
        Some(Self(Sha256::digest(token.as_bytes()).into()))
    }

    /// True when `presented` is exactly the configured token. The time taken
    /// does not depend on where or whether the bytes differ, nor on length.
    pub fn matches(&self, presented: &[u8]) -> bool {
        let presented: [u8; 32] = Sha256::digest(presented).into();
        bool::from(self.0.ct_eq(&presented))
    }
}

impl std::fmt::Debug for TokenDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenDigest([REDACTED])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_token_matches() {
        let token = "0123456789abcdef0123456789abcdef";
        let digest = TokenDigest::of(token).unwrap();
        let check = |presented: &[u8], expected: bool| {
            assert_eq!(
                digest.matches(presented),
                expected,
                "{:?}",
                String::from_utf8_lossy(presented)
            );
        };
        check(token.as_bytes(), true);
        check(b"", false);
        check(b"0123456789abcdef0123456789abcdeF", false); // same length, one byte off
        check(b"0123456789abcdef0123456789abcde", false); // a prefix
        check(b"0123456789abcdef0123456789abcdef ", false); // trailing space
        check(b"0123456789abcdef0123456789abcdef\n", false);
        check(b"0123456789ABCDEF0123456789ABCDEF", false); // wrong case
        check("0123456789abcdef0123456789abcdé".as_bytes(), false);
    }

    #[test]
    fn an_empty_configured_token_matches_nothing() {
        assert!(TokenDigest::of("").is_none());
    }

    #[test]
    fn debug_output_hides_the_digest() {
        let digest = TokenDigest::of("secret-token-value-0123456789abcdef").unwrap();
        assert_eq!(format!("{digest:?}"), "TokenDigest([REDACTED])");
    }
}
