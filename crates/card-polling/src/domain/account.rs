//! Accounts, roles, Bearer token hashes and the data scope derived from them.

use rakuten_types::ids::MAX_ID_LEN;
use rakuten_types::schema::{char_class, id_pattern};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};

/// Account role (spec "优先轮询事实与查询的可追溯": permissions match manual enqueue). What each
/// role may do, with its permissions, is [`super::access::authorize`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Sees every shop; the only role that imports and manages accounts.
    SuperAdmin,
    /// Platform operator: sees every shop.
    Platform,
    /// Agent bound to a shop: sees its shop and every descendant shop.
    Agent,
    /// Enterprise customer account: refused by every priority endpoint.
    Enterprise,
}

impl Role {
    /// Stored and wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Role::SuperAdmin => "super_admin",
            Role::Platform => "platform",
            Role::Agent => "agent",
            Role::Enterprise => "enterprise",
        }
    }

    /// Parses a stored or wire name.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Role::SuperAdmin,
            Role::Platform,
            Role::Agent,
            Role::Enterprise,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

/// SHA-256 of a Bearer token. Tokens are looked up by hash and compared in constant time.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenHash(pub [u8; 32]);

impl TokenHash {
    /// Hashes a token.
    pub fn of(token: &str) -> Self {
        TokenHash(Sha256::digest(token.as_bytes()).into())
    }

    /// Constant-time equality.
    pub fn ct_eq(&self, other: &[u8]) -> bool {
        other.len() == 32 && bool::from(self.0.as_slice().ct_eq(other))
    }
}

impl std::fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenHash(..)")
    }
}

/// An authenticated account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Account id (the operator name recorded in audit facts).
    pub id: String,
    /// Role.
    pub role: Role,
    /// Bound shop (required for agents).
    pub shop_id: Option<String>,
    /// The existing manual polling trigger permission.
    pub perm_manual_trigger: bool,
    /// The card data permission.
    pub perm_card_data: bool,
}

impl Account {
    /// The bootstrap admin (`RAKUTEN_POLL_ADMIN_TOKEN`): account `admin`, super_admin with every
    /// permission. No stored account has this id.
    pub fn bootstrap_admin() -> Account {
        Account {
            id: "admin".into(),
            role: Role::SuperAdmin,
            shop_id: None,
            perm_manual_trigger: true,
            perm_card_data: true,
        }
    }
}

/// How many characters an account's token has.
pub const TOKEN_CHARS: std::ops::RangeInclusive<usize> = 16..=256;

/// A character an account's token may not hold: a space or a control character.
pub fn token_char_refused(c: char) -> bool {
    c.is_control() || c == ' '
}

/// The schema of an account id: a key ([`super::key::key_schema`]), and not `admin`, the
/// bootstrap admin's name (no stored account).
pub fn account_id_schema() -> Object {
    let pattern = format!("^(?!admin$){}", &id_pattern()[1..]);
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(
            "An account id; `admin` names the bootstrap admin and is refused.",
        ))
        .min_length(Some(1))
        .max_length(Some(MAX_ID_LEN))
        .pattern(Some(pattern))
        .build()
}

/// The schema of an account's Bearer token: [`TOKEN_CHARS`] characters, none that
/// [`token_char_refused`] refuses (the import's and the token route's check; the admin token is
/// refused too, which no schema can say).
pub fn token_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(
            "16 to 256 characters without spaces or control characters; not the admin token.",
        ))
        .min_length(Some(*TOKEN_CHARS.start()))
        .max_length(Some(*TOKEN_CHARS.end()))
        .pattern(Some(format!("^{}*$", char_class(true, token_char_refused))))
        .build()
}

/// The rows an account may see, pushed down into SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// super_admin and platform: every row.
    All,
    /// An agent: rows whose shop descends from (or is) this shop.
    ShopTree(String),
}
