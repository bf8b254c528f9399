//! Accounts, roles, Bearer token hashes and the data scope derived from them.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Account role (spec "优先轮询事实与查询的可追溯": permissions match manual enqueue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Sees and may do everything.
    SuperAdmin,
    /// Platform operator: sees everything; closes items with the card data permission.
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

/// The rows an account may see, pushed down into SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// super_admin and platform: every row.
    All,
    /// An agent: rows whose shop descends from (or is) this shop.
    ShopTree(String),
}

impl Account {
    /// The data scope for queries and manual writes; `None` for enterprise accounts (refused).
    pub fn scope(&self) -> Option<Scope> {
        match self.role {
            Role::SuperAdmin | Role::Platform => Some(Scope::All),
            Role::Agent => self.shop_id.clone().map(Scope::ShopTree),
            Role::Enterprise => None,
        }
    }

    /// May enqueue by hand and retrigger: an operator role with the manual trigger permission.
    pub fn may_enqueue(&self) -> bool {
        match self.role {
            Role::SuperAdmin => true,
            Role::Platform | Role::Agent => self.perm_manual_trigger,
            Role::Enterprise => false,
        }
    }

    /// May close items: super_admin, or platform with the card data permission.
    pub fn may_close(&self) -> bool {
        match self.role {
            Role::SuperAdmin => true,
            Role::Platform => self.perm_card_data,
            Role::Agent | Role::Enterprise => false,
        }
    }

    /// May load and change the host domain (import, orders, payments, switches).
    pub fn may_administer(&self) -> bool {
        matches!(self.role, Role::SuperAdmin | Role::Platform)
    }
}
