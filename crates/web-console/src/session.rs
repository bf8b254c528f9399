//! The console session: a signed cookie (axum-extra's `SignedCookieJar`, HMAC-SHA256) holding who
//! signed in, when the session ends, and the session's CSRF token.
//!
//! - The cookie is `HttpOnly`, `SameSite=Strict`, `Path=/console`, and `Secure` when the request
//!   came over TLS (a proxy's `X-Forwarded-Proto: https`; the services themselves serve plain
//!   HTTP).
//! - The token the operator typed is never stored: only the principal it named (a service-specific
//!   type `P`, e.g. the token's name and role).
//! - Every state-changing form carries the session's CSRF token (`csrf` field); [`Session::csrf_ok`]
//!   compares in constant time. SameSite=Strict already keeps other sites' forms from carrying the
//!   cookie; the token is the second, independent lock.
//! - The key comes from `RAKUTEN_CONSOLE_KEY` (every instance of a service must share it), or is
//!   random per process (sessions then end at restart).

use std::time::Duration;

use axum::http::HeaderMap;
use axum_extra::extract::cookie::{Cookie, Key, SameSite, SignedCookieJar};
use rakuten_types::Timestamp;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha512};
use subtle::ConstantTimeEq;

/// The cookie's name.
pub const COOKIE: &str = "rakuten_console";
/// How long a session lasts after sign-in (one on-call shift).
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// The form field that carries the CSRF token.
pub const CSRF_FIELD: &str = "csrf";

/// Fewest characters of a configured console key (`RAKUTEN_CONSOLE_KEY`,
/// `RAKUTEN_POLL_CONSOLE_KEY`): one session cookie lets a key be guessed offline, and a guessed
/// key signs any session.
pub const MIN_KEY_CHARS: usize = 32;

/// Checks a configured console key, for both services' settings; the message never quotes it.
///
/// Set but empty is refused rather than read as unset: instances on one database need the same
/// key, and a line left empty in `.env` is more likely a forgotten value than a wish for a random
/// one, so the message says how to get the random one.
///
/// # Errors
/// The reason, for the setting's one-line refusal at start (exit 2).
pub fn check_key(s: &str) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err(format!(
            "the console key is empty: give it at least {MIN_KEY_CHARS} characters \
             (e.g. `openssl rand -hex 32`), or remove the line for a random key per process"
        ));
    }
    if s.chars().count() < MIN_KEY_CHARS {
        return Err(format!(
            "the console key must be at least {MIN_KEY_CHARS} characters (e.g. `openssl rand -hex 32`)"
        ));
    }
    Ok(())
}

/// The signing key of the session cookies.
#[derive(Clone)]
pub struct ConsoleKey(Key);

impl std::fmt::Debug for ConsoleKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConsoleKey(***)")
    }
}

impl ConsoleKey {
    /// The key derived from a configured secret (SHA-512, the 64 bytes the cookie key needs), or
    /// a random one when `secret` is `None` or blank.
    pub fn new(secret: Option<&str>) -> Self {
        match secret.map(str::trim).filter(|s| !s.is_empty()) {
            Some(s) => ConsoleKey(Key::from(&Sha512::digest(s.as_bytes()))),
            None => ConsoleKey(Key::generate()),
        }
    }

    /// The valid, unexpired session a request carries, if any.
    pub fn session<P: DeserializeOwned>(
        &self,
        headers: &HeaderMap,
        now: Timestamp,
    ) -> Option<Session<P>> {
        let jar = SignedCookieJar::from_headers(headers, self.0.clone());
        let cookie = jar.get(COOKIE)?;
        let bytes = from_hex(cookie.value())?;
        let s: Session<P> = serde_json::from_slice(&bytes).ok()?;
        (now.to_rfc3339() < s.expires_at).then_some(s)
    }

    /// A jar that sets a new session for `who` (a fresh CSRF token), lasting [`SESSION_TTL`].
    pub fn sign_in<P: Serialize>(
        &self,
        headers: &HeaderMap,
        who: P,
        now: Timestamp,
    ) -> SignedCookieJar {
        let session = Session {
            who,
            csrf: to_hex(&rand::random::<[u8; 32]>()),
            expires_at: now.plus(SESSION_TTL).to_rfc3339(),
        };
        let value = to_hex(&serde_json::to_vec(&session).expect("session serializes"));
        let cookie = Cookie::build((COOKIE, value))
            .path("/console")
            .http_only(true)
            .same_site(SameSite::Strict)
            .secure(over_tls(headers))
            .max_age(time::Duration::seconds(SESSION_TTL.as_secs() as i64))
            .build();
        SignedCookieJar::from_headers(headers, self.0.clone()).add(cookie)
    }

    /// The answer to a sign-out: the session cookie removed, back to the sign-in page.
    pub fn sign_out(&self, headers: &HeaderMap) -> axum::response::Response {
        use axum::response::IntoResponse;
        let jar = SignedCookieJar::from_headers(headers, self.0.clone())
            .remove(Cookie::build(COOKIE).path("/console").build());
        (jar, axum::response::Redirect::to("/console/sign-in")).into_response()
    }
}

/// Whether the request reached us over TLS (through a proxy that says so).
fn over_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"))
}

/// A signed-in session: who (`P`, the service's principal), its CSRF token, its end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Session<P> {
    /// The principal the token named at sign-in.
    pub who: P,
    /// The CSRF token every state-changing form must carry.
    pub csrf: String,
    /// When the session ends (RFC 3339, fixed width, so text order is time order).
    pub expires_at: String,
}

impl<P> Session<P> {
    /// Whether a form's CSRF token is this session's (constant time).
    pub fn csrf_ok(&self, presented: Option<&str>) -> bool {
        presented.is_some_and(|p| bool::from(p.as_bytes().ct_eq(self.csrf.as_bytes())))
    }
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use axum::http::header::{COOKIE as COOKIE_HEADER, SET_COOKIE};
    use axum::response::IntoResponse;

    use super::*;

    fn round_trip(key: &ConsoleKey, jar: SignedCookieJar) -> HeaderMap {
        let resp = jar.into_response();
        let set = resp.headers().get(SET_COOKIE).unwrap().to_str().unwrap();
        let pair = set.split(';').next().unwrap().to_owned();
        let _ = key;
        let mut h = HeaderMap::new();
        h.insert(COOKIE_HEADER, HeaderValue::from_str(&pair).unwrap());
        h
    }

    #[test]
    fn a_session_round_trips_and_ends_at_its_expiry() {
        let key = ConsoleKey::new(Some("a console key for tests"));
        let now = Timestamp::parse("2026-11-30T10:00:00.000Z").unwrap();
        let jar = key.sign_in(&HeaderMap::new(), "alice".to_owned(), now);
        let h = round_trip(&key, jar);
        let s: Session<String> = key.session(&h, now).unwrap();
        assert_eq!(s.who, "alice");
        assert!(s.csrf_ok(Some(&s.csrf.clone())));
        assert!(!s.csrf_ok(Some("x")));
        assert!(!s.csrf_ok(None));
        assert!(key.session::<String>(&h, now.plus(SESSION_TTL)).is_none());
        let other = ConsoleKey::new(Some("another key"));
        assert!(
            other.session::<String>(&h, now).is_none(),
            "signed by another key"
        );
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_behind_tls() {
        let key = ConsoleKey::new(None);
        let now = Timestamp::parse("2026-11-30T10:00:00.000Z").unwrap();
        let mut h = HeaderMap::new();
        let plain = key.sign_in(&h, 1u8, now).into_response();
        let set = plain.headers().get(SET_COOKIE).unwrap().to_str().unwrap();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
        assert!(!set.contains("Secure"), "{set}");
        h.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        let tls = key.sign_in(&h, 1u8, now).into_response();
        let set = tls.headers().get(SET_COOKIE).unwrap().to_str().unwrap();
        assert!(set.contains("Secure"), "{set}");
    }

    #[test]
    fn an_empty_key_says_how_to_get_a_random_one_and_a_short_one_is_refused() {
        for empty in ["", "  "] {
            let e = check_key(empty).unwrap_err();
            assert!(e.contains("remove the line for a random key"), "{e}");
        }
        assert!(
            check_key(&"k".repeat(31))
                .unwrap_err()
                .contains("at least 32")
        );
        assert!(check_key(&"k".repeat(32)).is_ok());
    }
}
