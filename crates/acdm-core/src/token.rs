//! Comparing a presented shared token with the configured one without
//! leaking either its content or its length through timing.
//!
//! A plain or even a `ct_eq` comparison of the raw bytes returns early
//! when the lengths differ. So both sides are laid out in a fixed-size
//! buffer of [`SharedToken::MAX_LEN`] bytes (the longest token the
//! configuration accepts), zero-padded, and the whole buffers are
//! compared, with the lengths, without a branch on their bytes: the time
//! taken depends on neither the configured token's content nor its
//! length, nor on where the bytes differ. A presented value longer than
//! the buffer is refused before any comparison: that depends only on its
//! own length, which its sender knows.
//!
//! An earlier form compared SHA-256 digests of both sides, which hides the
//! same things but costs a digest per request: two 64-byte blocks for a
//! 64-character token, 7,600 instructions without the SHA extensions,
//! 6.7 % of a file read's (`docs/performance.md`). This comparison costs a
//! copy of the presented bytes and a pass over 512 bytes.

use std::sync::Arc;

use subtle::ConstantTimeEq;
use zeroize::Zeroize;

/// The configured token, padded, for comparisons in constant time. Its
/// bytes are never printed, and zeroed when the last clone is dropped;
/// a clone (a handler's state, per request) copies no bytes.
#[derive(Clone)]
pub struct SharedToken {
    padded: Arc<Padded>,
    len: u64,
}

/// A token's bytes followed by zeros, zeroed on drop.
struct Padded([u8; SharedToken::MAX_LEN]);

impl Drop for Padded {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl SharedToken {
    /// The longest token there can be (the configuration's limit).
    pub const MAX_LEN: usize = 512;

    /// Keeps `token` for comparisons. An empty token yields `None` (an
    /// unset token must refuse everything, not match an empty header), and
    /// so does one longer than [`Self::MAX_LEN`], which the configuration
    /// refuses at start.
    pub fn of(token: &str) -> Option<Self> {
        let bytes = token.as_bytes();
        if bytes.is_empty() {
            return None;
        }
        Some(Self {
            padded: Arc::new(Padded(padded(bytes)?)),
            len: bytes.len() as u64,
        })
    }

    /// True when `presented` is exactly the configured token. The time taken
    /// does not depend on where or whether the bytes differ, nor on the
    /// configured token's length.
    pub fn matches(&self, presented: &[u8]) -> bool {
        let Some(other) = padded(presented) else {
            return false;
        };
        // Every word of both buffers, XORed and ORed together: no branch
        // on their bytes. `black_box` keeps the optimiser from deciding
        // on the sum early (a best effort: Rust promises no constant
        // time), and `subtle` makes the one comparison that decides.
        let differ = self
            .padded
            .0
            .chunks_exact(8)
            .zip(other.chunks_exact(8))
            .fold(0u64, |acc, (a, b)| acc | (word(a) ^ word(b)));
        let differ = std::hint::black_box(differ);
        bool::from(differ.ct_eq(&0) & self.len.ct_eq(&(presented.len() as u64)))
    }
}

/// `bytes` followed by zeros, or `None` if longer than
/// [`SharedToken::MAX_LEN`].
fn padded(bytes: &[u8]) -> Option<[u8; SharedToken::MAX_LEN]> {
    let mut padded = [0u8; SharedToken::MAX_LEN];
    padded.get_mut(..bytes.len())?.copy_from_slice(bytes);
    Some(padded)
}

/// Eight bytes as a word (`chunks_exact(8)` gives eight).
fn word(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(bytes);
    u64::from_ne_bytes(word)
}

impl std::fmt::Debug for SharedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedToken([REDACTED])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_token_matches() {
        let token = "0123456789abcdef0123456789abcdef";
        let expected = SharedToken::of(token).unwrap();
        let check = |presented: &[u8], matches: bool| {
            assert_eq!(
                expected.matches(presented),
                matches,
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
        // The padding's own bytes: equal buffers, different lengths.
        check(b"0123456789abcdef0123456789abcdef\0", false);
        check(b"0123456789abcdef0123456789abcdef\0\0\0\0\0\0\0\0", false);
    }

    #[test]
    fn a_token_of_the_longest_length_is_compared_to_its_last_byte() {
        let token: String = (0..SharedToken::MAX_LEN)
            .map(|i| char::from(b'!' + (i % 90) as u8))
            .collect();
        let expected = SharedToken::of(&token).unwrap();
        assert!(expected.matches(token.as_bytes()));
        for at in 0..SharedToken::MAX_LEN {
            let mut presented = token.clone().into_bytes();
            presented[at] ^= 0x01;
            assert!(!expected.matches(&presented), "a byte off at {at}");
            assert!(
                !expected.matches(&token.as_bytes()[..at]),
                "a prefix of {at}"
            );
        }
        let mut longer = token;
        longer.push('x');
        assert!(!expected.matches(longer.as_bytes()));
        assert!(SharedToken::of(&longer).is_none(), "over the limit");
    }

    /// Refused before the copy into a buffer, which could not hold it.
    #[test]
    fn a_presented_value_longer_than_any_token_never_matches() {
        let expected = SharedToken::of("0123456789abcdef0123456789abcdef").unwrap();
        let long = vec![b'0'; SharedToken::MAX_LEN + 1];
        assert!(!expected.matches(&long));
        assert!(!expected.matches(&vec![0u8; 4096]));
    }

    #[test]
    fn an_empty_configured_token_matches_nothing() {
        assert!(SharedToken::of("").is_none());
    }

    #[test]
    fn debug_output_hides_the_token() {
        let expected = SharedToken::of("secret-token-value-0123456789abcdef").unwrap();
        assert_eq!(format!("{expected:?}"), "SharedToken([REDACTED])");
    }
}
