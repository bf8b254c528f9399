//! [`CredentialKey`]: the key of the credential fingerprints console sessions carry. Its own file
//! because the shared state holds it ([`crate::state::AppState`]) and the console's pages hold the
//! state: with the key here, the state does not import the console's pages.

use crate::domain::TokenHash;

/// The key of the credential fingerprints sessions carry: derived from `RAKUTEN_POLL_CONSOLE_KEY`
/// (so every instance sharing that key computes the same), or random per process like the cookie
/// key when it is unset.
#[derive(Clone)]
pub struct CredentialKey([u8; 32]);

impl std::fmt::Debug for CredentialKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CredentialKey(***)")
    }
}

impl CredentialKey {
    /// The key of console key `secret` (`None` or blank: random).
    pub fn new(secret: Option<&str>) -> Self {
        use sha2::{Digest, Sha256};
        match secret.map(str::trim).filter(|s| !s.is_empty()) {
            Some(s) => {
                let mut h = Sha256::new();
                // Its own derivation: not the bytes that sign the cookie.
                h.update(b"card-polling console credential fingerprint\0");
                h.update(s.as_bytes());
                CredentialKey(h.finalize().into())
            }
            None => CredentialKey(rand::random()),
        }
    }

    /// HMAC-SHA256 of the token's hash and of its `generation` (how many times the account's
    /// token was set or revoked; 0 for the admin token) under this key: the cookie is signed, not
    /// encrypted, so it holds this rather than anything a token could be guessed from offline, and
    /// a token set again, even to the same value, no longer matches the sessions it opened before.
    pub fn fingerprint(&self, token: &TokenHash, generation: i64) -> [u8; 32] {
        use hmac::{Hmac, Mac};
        let mut mac =
            <Hmac<sha2::Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes any key");
        mac.update(&token.0);
        mac.update(&generation.to_be_bytes());
        mac.finalize().into_bytes().into()
    }

    /// Whether `presented` (hex, from a session) is the [`Self::fingerprint`] of `token` at
    /// `generation`, in constant time.
    pub fn matches(&self, token: &TokenHash, generation: i64, presented: &str) -> bool {
        use subtle::ConstantTimeEq;
        let want = hex(&self.fingerprint(token, generation));
        want.len() == presented.len() && bool::from(want.as_bytes().ct_eq(presented.as_bytes()))
    }
}

/// Lowercase hex of `bytes`: how a fingerprint is written into a session.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
