//! Who may call what: roles, named tokens and the credential table.
//!
//! - [`Role`]: `upstream` (submit and read orders and account queries), `worker` (lease, renew,
//!   report; query lease and result; read the task it holds), `operator` (everything) and
//!   `metrics` (only `GET /metrics`, for a scraper, D-ops-cli). A worker token acts only for the
//!   worker ids bound to it (D-worker-id-bound-to-token, [`crate::http::auth::act_as_worker`]).
//! - [`NamedTokens`]: the value of `RAKUTEN_UPSTREAM_TOKENS` / `…_WORKER_TOKENS` /
//!   `…_OPERATOR_TOKENS` / `…_METRICS_TOKENS`: comma-separated `name:token` pairs. Two entries
//!   with one name are a rotation (old and new token both work, one actor name).
//! - [`Credentials`]: every configured token, with `RAKUTEN_API_TOKEN` as the operator named
//!   `api`; [`Credentials::identify`] finds the [`Actor`] a presented token belongs to.
//!
//! Tokens live in [`Secret`]s and are kept only as SHA-256 digests after start; a presented token
//! is hashed once and compared with every digest in constant time (no early exit, no length
//! leak). A console session carries a keyed fingerprint of the token that opened it
//! ([`Credentials::sign_in`]), checked against the configured tokens on every request
//! ([`Credentials::session_role`]): replacing a token ends the sessions it opened
//! (D-console-session-bound-to-token). Which route takes which role is declared next to each router
//! ([`crate::http::auth::guarded`]).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use rakuten_types::Secret;

/// A caller's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Submits and reads orders and account queries.
    Upstream,
    /// Leases, renews and reports orders; leases account queries and posts their results; reads
    /// the task it holds. Only for the worker ids bound to its token.
    Worker,
    /// May call every route, including operator actions.
    Operator,
    /// May read `GET /metrics` only.
    Metrics,
}

impl Role {
    /// The lowercase name (`upstream`, `worker`, `operator`, `metrics`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Upstream => "upstream",
            Role::Worker => "worker",
            Role::Operator => "operator",
            Role::Metrics => "metrics",
        }
    }

    /// The variable that lists this role's tokens (`RAKUTEN_API_TOKEN` is named apart).
    pub fn variable(self) -> &'static str {
        match self {
            Role::Upstream => "RAKUTEN_UPSTREAM_TOKENS",
            Role::Worker => "RAKUTEN_WORKER_TOKENS",
            Role::Operator => "RAKUTEN_OPERATOR_TOKENS",
            Role::Metrics => "RAKUTEN_METRICS_TOKENS",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who made a request: the token's name (written into audit records) and its role. Handlers take
/// it as an extractor (`actor: Actor`); see [`crate::http::auth`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// The token's name from the settings (`api` for `RAKUTEN_API_TOKEN`).
    pub name: String,
    /// The token's role.
    pub role: Role,
}

/// Longest token name, characters.
pub const MAX_NAME_CHARS: usize = 64;

/// One `name:token` pair.
#[derive(Clone)]
pub struct NamedToken {
    /// `[A-Za-z0-9_.-]{1,64}`.
    pub name: String,
    /// The token.
    pub token: Secret,
}

/// A comma-separated list of `name:token` pairs (empty entries ignored). `Debug` shows the names
/// only.
#[derive(Clone, Default)]
pub struct NamedTokens(pub Vec<NamedToken>);

impl fmt::Debug for NamedTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|t| format!("{}:***", t.name)))
            .finish()
    }
}

impl FromStr for NamedTokens {
    type Err = String;

    /// Parses `name:token[,name:token…]`. The error never quotes a token.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = Vec::new();
        for (i, entry) in s.split(',').map(str::trim).enumerate() {
            if entry.is_empty() {
                continue;
            }
            let Some((name, token)) = entry.split_once(':') else {
                return Err(format!("entry {} is not name:token", i + 1));
            };
            let (name, token) = (name.trim(), token.trim());
            let name_ok = !name.is_empty()
                && name.chars().count() <= MAX_NAME_CHARS
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
            if !name_ok {
                return Err(format!(
                    "entry {}: the name must be 1..={MAX_NAME_CHARS} of [A-Za-z0-9_.-]",
                    i + 1
                ));
            }
            // The one token rule every binary applies (`rakuten_types::secret::is_token`).
            if !rakuten_types::secret::is_token(token) {
                let n = token.chars().count();
                return Err(if n > rakuten_types::MAX_TOKEN_CHARS {
                    format!(
                        "entry {}: the token must be at most {} characters",
                        i + 1,
                        rakuten_types::MAX_TOKEN_CHARS
                    )
                } else {
                    format!(
                        "entry {}: the token must be at least {} characters, without spaces",
                        i + 1,
                        rakuten_types::MIN_TOKEN_CHARS
                    )
                });
            }
            out.push(NamedToken {
                name: name.to_owned(),
                token: Secret::new(token),
            });
        }
        Ok(NamedTokens(out))
    }
}

/// A configuration of tokens that cannot work.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CredentialsError {
    /// No token at all: nobody could call the API.
    #[error("no token configured: set RAKUTEN_API_TOKEN or one of the RAKUTEN_*_TOKENS lists")]
    Empty,
    /// One name under two roles: the actor in the audit would be ambiguous.
    #[error("token name {0:?} is used by two roles ({1} and {2})")]
    NameInTwoRoles(String, Role, Role),
    /// One token configured twice: it could only ever be one of them, and across roles the
    /// roles would collapse. Names and variables of both (D-admin-token-is-nobody-elses), never the token.
    #[error(
        "the same token is configured twice, as {0:?} in {1} and as {2:?} in {3}: every role \
         and name needs a token of its own"
    )]
    DuplicateToken(String, &'static str, String, &'static str),
}

struct Entry {
    digest: [u8; 32],
    actor: Actor,
    /// The variable the token was configured in.
    var: &'static str,
    /// What a console session opened with this token carries: HMAC-SHA256 of `digest` under
    /// the session key.
    session_fp: [u8; 32],
}

/// Every configured token as a digest, with the actor it stands for.
pub struct Credentials {
    entries: Vec<Entry>,
}

/// The key of the console sessions' token fingerprints, from the console key (so every instance
/// sharing `RAKUTEN_CONSOLE_KEY` agrees, and sessions survive a restart with the same tokens), or
/// random per process without one (its sessions end at restart anyway).
fn session_key(console_key: Option<&str>) -> [u8; 32] {
    match console_key.map(str::trim).filter(|k| !k.is_empty()) {
        Some(k) => {
            let mut h = Sha256::new();
            h.update(b"order-gateway console session token fingerprint\0");
            h.update(k.as_bytes());
            h.finalize().into()
        }
        None => rand::random(),
    }
}

fn fingerprint(key: &[u8; 32], digest: &[u8; 32]) -> [u8; 32] {
    // An HMAC takes a key of any length: `new_from_slice` cannot fail here.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(digest);
    m.finalize().into_bytes().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| (&e.actor.name, e.actor.role)))
            .finish()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Credentials {
    /// The table from the settings' lists; `api_token` (when set and non-blank) is an operator
    /// named `api`.
    ///
    /// # Errors
    /// [`CredentialsError`]: nothing configured, a name under two roles, a token twice.
    pub fn build(
        api_token: Option<&Secret>,
        lists: &[(Role, &NamedTokens)],
    ) -> Result<Self, CredentialsError> {
        let mut entries: Vec<Entry> = Vec::new();
        let mut roles_by_name: BTreeMap<String, Role> = BTreeMap::new();
        let api = api_token
            .filter(|t| !t.expose().trim().is_empty())
            .map(|t| {
                let token = t.expose().trim();
                (Role::Operator, "api".to_owned(), token, "RAKUTEN_API_TOKEN")
            });
        let listed = lists.iter().flat_map(|(role, list)| {
            list.0
                .iter()
                .map(move |t| (*role, t.name.clone(), t.token.expose(), role.variable()))
        });
        for (role, name, token, var) in api.into_iter().chain(listed) {
            if let Some(&other) = roles_by_name.get(&name)
                && other != role
            {
                return Err(CredentialsError::NameInTwoRoles(name, other, role));
            }
            let d = digest(token);
            if let Some(e) = entries.iter().find(|e| e.digest == d) {
                return Err(CredentialsError::DuplicateToken(
                    e.actor.name.clone(),
                    e.var,
                    name,
                    var,
                ));
            }
            roles_by_name.insert(name.clone(), role);
            entries.push(Entry {
                digest: d,
                actor: Actor { name, role },
                var,
                session_fp: [0; 32],
            });
        }
        if entries.is_empty() {
            return Err(CredentialsError::Empty);
        }
        Ok(Credentials { entries }.with_session_key(None))
    }

    /// Keys the console sessions' token fingerprints with `console_key` (`RAKUTEN_CONSOLE_KEY`);
    /// without one (the default of [`Credentials::build`]) the key is random per process.
    pub fn with_session_key(mut self, console_key: Option<&str>) -> Self {
        let key = session_key(console_key);
        for e in &mut self.entries {
            e.session_fp = fingerprint(&key, &e.digest);
        }
        self
    }

    /// The actor whose token `presented` is, and the fingerprint of that token a console session
    /// carries (hex; a keyed hash, never the token or its plain digest).
    pub fn sign_in(&self, presented: &str) -> Option<(Actor, String)> {
        let d = digest(presented);
        let mut found: Option<&Entry> = None;
        for e in &self.entries {
            let hit = bool::from(e.digest.ct_eq(&d));
            if hit && found.is_none() {
                found = Some(e);
            }
        }
        found.map(|e| (e.actor.clone(), hex(&e.session_fp)))
    }

    /// The role of a console session's actor `name` while the very token that opened it (its
    /// `fingerprint`) is still configured for that name: a session ends when its token is
    /// removed or replaced, even under the same name (D-console-session-bound-to-token). Every
    /// entry is compared, in constant time.
    pub fn session_role(&self, name: &str, fingerprint: &str) -> Option<Role> {
        let mut found: Option<Role> = None;
        for e in &self.entries {
            let fp = hex(&e.session_fp);
            let same_token = bool::from(fp.as_bytes().ct_eq(fingerprint.as_bytes()));
            if same_token && e.actor.name == name && found.is_none() {
                found = Some(e.actor.role);
            }
        }
        found
    }

    /// The actor whose token `presented` is, if any. Compares against every entry in constant
    /// time (all entries are always compared).
    pub fn identify(&self, presented: &str) -> Option<Actor> {
        let d = digest(presented);
        let mut found: Option<&Actor> = None;
        for e in &self.entries {
            let hit = bool::from(e.digest.ct_eq(&d));
            if hit && found.is_none() {
                found = Some(&e.actor);
            }
        }
        found.cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> NamedTokens {
        s.parse().expect("parses")
    }

    #[test]
    fn a_list_parses_names_and_tokens_and_never_prints_a_token() {
        let l = list(" shop:tok-1-0123456789 , ,shop:tok-2-0123456789,ops.a-1:x-0123456789abcdef");
        assert_eq!(l.0.len(), 3);
        assert_eq!(l.0[1].name, "shop");
        assert_eq!(l.0[1].token.expose(), "tok-2-0123456789");
        let dbg = format!("{l:?}");
        assert!(!dbg.contains("tok-1") && dbg.contains("shop:***"), "{dbg}");
        for bad in ["noseparator", ":tok", "na me:tok", "n:", "n:has space"] {
            let e = bad.parse::<NamedTokens>().unwrap_err();
            assert!(!e.contains("tok") || !bad.contains("tok"), "{e}");
        }
        // Fewer than 16 characters (D-secret-minimum-lengths), named without the value.
        let e = "n:Sh0rtS3cr3t".parse::<NamedTokens>().unwrap_err();
        assert_eq!(
            e,
            "entry 1: the token must be at least 16 characters, without spaces"
        );
        // The same ceiling as every other token: a header line stays short.
        let long = format!("n:{}", "x".repeat(257));
        let e = long.parse::<NamedTokens>().unwrap_err();
        assert_eq!(e, "entry 1: the token must be at most 256 characters");
    }

    #[test]
    fn rotation_gives_two_tokens_one_actor_and_api_is_an_operator() {
        let up = list("shop:old-0123456789ab,shop:new-0123456789ab");
        let c = Credentials::build(Some(&Secret::new("root")), &[(Role::Upstream, &up)]).unwrap();
        let shop = Actor {
            name: "shop".into(),
            role: Role::Upstream,
        };
        assert_eq!(c.identify("old-0123456789ab"), Some(shop.clone()));
        assert_eq!(c.identify("new-0123456789ab"), Some(shop));
        assert_eq!(c.identify("root").unwrap().role, Role::Operator);
        assert_eq!(c.identify("root").unwrap().name, "api");
        assert_eq!(c.identify("nope"), None);
        assert_eq!(c.identify(""), None);
    }

    #[test]
    fn unusable_configurations_are_refused() {
        assert_eq!(
            Credentials::build(Some(&Secret::new("  ")), &[]).unwrap_err(),
            CredentialsError::Empty
        );
        let a = list("x:t1-0123456789abcdef");
        let b = list("x:t2-0123456789abcdef");
        assert!(matches!(
            Credentials::build(None, &[(Role::Upstream, &a), (Role::Worker, &b)]).unwrap_err(),
            CredentialsError::NameInTwoRoles(..)
        ));
        let c = list("y:t1-0123456789abcdef");
        assert!(matches!(
            Credentials::build(None, &[(Role::Upstream, &a), (Role::Worker, &c)]).unwrap_err(),
            CredentialsError::DuplicateToken(..)
        ));
    }

    #[test]
    fn a_session_fingerprint_names_one_token_and_never_shows_it() {
        let ops = list("alice:old-token-0123456789,bob:bob-token-0123456789");
        let c = Credentials::build(None, &[(Role::Operator, &ops)])
            .unwrap()
            .with_session_key(Some("a console key of at least 32 characters"));
        let (actor, fp) = c.sign_in("old-token-0123456789").unwrap();
        assert_eq!(actor.name, "alice");
        assert_eq!(fp.len(), 64);
        assert!(!fp.contains("old-token"));
        let plain: [u8; 32] = Sha256::digest(b"old-token-0123456789").into();
        assert_ne!(
            fp,
            hex(&plain),
            "a keyed hash, not the token's plain digest"
        );
        assert_eq!(c.session_role("alice", &fp), Some(Role::Operator));
        assert_eq!(c.session_role("bob", &fp), None, "another name's session");
        assert_eq!(c.session_role("alice", ""), None);
        // The same token and key after a restart: the same fingerprint.
        let again = Credentials::build(None, &[(Role::Operator, &ops)])
            .unwrap()
            .with_session_key(Some("a console key of at least 32 characters"));
        assert_eq!(again.session_role("alice", &fp), Some(Role::Operator));
        // The name's token replaced: the session is not the new token's.
        let replaced = list("alice:new-token-0123456789,bob:bob-token-0123456789");
        let after = Credentials::build(None, &[(Role::Operator, &replaced)])
            .unwrap()
            .with_session_key(Some("a console key of at least 32 characters"));
        assert_eq!(after.session_role("alice", &fp), None);
    }
}
