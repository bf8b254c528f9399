//! What the bulk import takes and answers ([`crate::store::ImportStore`], `POST /api/admin/import`): the
//! rows, what to do with rows already stored, the counts; and an account as stored.

use serde::{Deserialize, Serialize};

use crate::domain::account::Account;
use crate::domain::asset::{BindingRow, CardRow, DeviceRow};
use crate::domain::{Shop, TokenHash};

/// Rows to load into the host domain. Existing rows with the same key are refused (conflict), or
/// skipped when equal ([`ImportExisting`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportBatch {
    /// Shops, parents before children (or in any order: the driver sorts them).
    #[serde(default)]
    #[schema(max_items = 200000)]
    pub shops: Vec<Shop>,
    /// Accounts with their plain tokens (hashed before storage).
    #[serde(default)]
    #[schema(max_items = 200000)]
    pub accounts: Vec<AccountImport>,
    /// Cards.
    #[serde(default)]
    #[schema(max_items = 200000)]
    pub cards: Vec<CardRow>,
    /// Devices.
    #[serde(default)]
    #[schema(max_items = 200000)]
    pub devices: Vec<DeviceRow>,
    /// Bindings.
    #[serde(default)]
    #[schema(max_items = 200000)]
    pub bindings: Vec<BindingRow>,
}

/// An account to import.
#[derive(Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AccountImport {
    /// Account id.
    #[schema(schema_with = crate::domain::account::account_id_schema)]
    pub id: String,
    /// Role name.
    pub role: crate::domain::Role,
    /// Bound shop (required for agents).
    #[serde(default)]
    #[schema(schema_with = crate::domain::key::key_or_null_schema)]
    pub shop_id: Option<String>,
    /// Plain Bearer token (at least 16 characters); only its SHA-256 is stored.
    #[schema(schema_with = crate::domain::account::token_schema)]
    pub token: String,
    /// The manual polling trigger permission (default on).
    #[serde(default = "yes")]
    pub perm_manual_trigger: bool,
    /// The card data permission (default on).
    #[serde(default = "yes")]
    pub perm_card_data: bool,
}

impl std::fmt::Debug for AccountImport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountImport")
            .field("id", &self.id)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

fn yes() -> bool {
    true
}

/// An account as stored, with the hash of the token that signs it in now: `None` once revoked
/// (`DELETE /api/admin/accounts/{id}/token`). The console checks every session against it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRecord {
    /// The account.
    pub account: Account,
    /// Its current token's hash; `None`: revoked.
    pub token: Option<TokenHash>,
    /// How many times its token has been set or revoked through the API (0 after the import). A
    /// console session's credential covers it, so a token set again, even to the same value,
    /// does not bring back the sessions it opened before.
    pub token_generation: i64,
}

/// Rows inserted by an import, and rows it found already stored and skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportCounts {
    /// Shops inserted.
    pub shops: u64,
    /// Accounts inserted.
    pub accounts: u64,
    /// Cards inserted.
    pub cards: u64,
    /// Devices inserted.
    pub devices: u64,
    /// Bindings inserted or updated.
    pub bindings: u64,
    /// Rows already stored exactly as sent, skipped ([`ImportExisting::Skip`]; all zero
    /// otherwise).
    #[serde(default)]
    pub skipped: SkippedCounts,
}

impl ImportCounts {
    /// Adds `other`'s counts (one part of an import) to these.
    pub fn add(&mut self, other: &ImportCounts) {
        self.shops += other.shops;
        self.accounts += other.accounts;
        self.cards += other.cards;
        self.devices += other.devices;
        self.bindings += other.bindings;
        self.skipped.shops += other.skipped.shops;
        self.skipped.accounts += other.skipped.accounts;
        self.skipped.cards += other.skipped.cards;
        self.skipped.devices += other.skipped.devices;
    }
}

/// Rows of an import found already stored exactly as sent, and skipped
/// ([`ImportExisting::Skip`]). Bindings are upserts and count as imported either way.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedCounts {
    /// Shops.
    pub shops: u64,
    /// Accounts.
    pub accounts: u64,
    /// Cards.
    pub cards: u64,
    /// Devices.
    pub devices: u64,
}

/// What an import does with a shop, account, card or device whose key is already stored
/// (`POST /api/admin/import?existing=`, D-import-existing-skip).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ImportExisting {
    /// Refuse it: 409 naming the row, and the import (or, past 10,000 rows, its part) stores
    /// nothing.
    #[default]
    Refuse,
    /// Skip it when the stored row has the same values (counted in [`ImportCounts::skipped`]);
    /// refuse it (409 naming the row and the fields that differ) when it does not. A client that
    /// lost the answer to a large import (a crash, a timeout) resends the same rows with this and
    /// gets the rest stored, without learning first which parts landed.
    Skip,
}
