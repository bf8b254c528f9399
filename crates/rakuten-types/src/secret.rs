//! [`Secret`], the one type every binary keeps a token, key or credential-bearing URL in, and the
//! one rule a Bearer token meets ([`is_token`], D-secret-minimum-lengths).

use std::fmt;
use std::str::FromStr;

use subtle::ConstantTimeEq;

/// Fewest characters of a Bearer token (`RAKUTEN_API_TOKEN`, each of the gateway's role lists,
/// card-polling's admin and account tokens). A short token is guessed online and the gateway
/// faces the internet, so the gateway refuses one at start; the worker refuses one as well,
/// since the gateway could never hold it (D-secret-minimum-lengths).
pub const MIN_TOKEN_CHARS: usize = 16;

/// Most characters of a Bearer token: a header line stays short, and a longer value is a pasted
/// file rather than a token.
pub const MAX_TOKEN_CHARS: usize = 256;

/// Whether `s` may be a Bearer token: [`MIN_TOKEN_CHARS`]–[`MAX_TOKEN_CHARS`] characters, none of
/// them whitespace or a control character (it travels in an `Authorization` header).
pub fn is_token(s: &str) -> bool {
    let n = s.chars().count();
    (MIN_TOKEN_CHARS..=MAX_TOKEN_CHARS).contains(&n)
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// A secret string. `Debug` and `Display` print `***` (an empty one `""`, so that "not set" stays
/// visible), so it is never logged; equality compares in constant time for equal lengths.
#[derive(Clone, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself; call only where it is compared or sent.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_bytes().ct_eq(other.0.as_bytes()).into()
    }
}

impl Eq for Secret {}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "\"\"" } else { "***" })
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_prints_and_an_empty_one_says_so() {
        let s = Secret::new("hunter2-hunter2-hunter2");
        assert_eq!(format!("{s:?} {s}"), "*** ***");
        assert_eq!(format!("{:?}", Secret::default()), "\"\"");
    }

    #[test]
    fn secrets_compare_by_value() {
        assert_eq!(Secret::new("abc"), Secret::new("abc"));
        assert_ne!(Secret::new("abc"), Secret::new("abd"));
        assert_ne!(Secret::new("abc"), Secret::new("abcd"));
    }

    #[test]
    fn a_token_is_16_to_256_characters_without_spaces_or_controls() {
        assert!(is_token(&"a".repeat(MIN_TOKEN_CHARS)));
        assert!(is_token(&"é".repeat(MAX_TOKEN_CHARS)));
        assert!(!is_token(&"a".repeat(MIN_TOKEN_CHARS - 1)));
        assert!(!is_token(&"a".repeat(MAX_TOKEN_CHARS + 1)));
        assert!(!is_token("0123456789abcdef 0"));
        assert!(!is_token("0123456789abcdef\t0"));
        assert!(!is_token("0123456789abcdef\u{7f}"));
    }
}
