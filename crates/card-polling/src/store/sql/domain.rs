//! Host domain statements: accounts, import, orders, payments, usage activation, package poll.

use std::collections::HashSet;
use std::time::Duration;

use sqlx::Row;

use rakuten_types::Timestamp;

use super::enqueue::{self, snapshot_asset};
use super::{
    Conn, DbRow, Pool, QueryResult, dialect, map_constraint, map_insert_with_shop, placeholders, t,
};
use crate::domain::TokenHash;
use crate::domain::account::Account;
use crate::domain::asset::{AssetRef, AssetType, BindingRow};
use crate::domain::package::{OrderStatus, PACKAGE_PERIOD_DAYS, PackageKind, PaymentStatus};
use crate::priority::TriggerType;
use crate::store::common::account_from_row;
use crate::store::{
    AccountRecord, Demand, EnqueuedItem, ImportBatch, ImportCounts, ImportExisting, OrderView,
    PackagePollOutcome,
    PaymentCallback, PaymentOutcome, StoreError, StoreResult, import_row,
};

const PACKAGE_PERIOD: Duration = Duration::from_secs(PACKAGE_PERIOD_DAYS * 86_400);

/// Exactly one row changed, else not found.
pub(crate) fn one_row(r: QueryResult) -> StoreResult<()> {
    if r.rows_affected() == 1 {
        Ok(())
    } else {
        Err(StoreError::NotFound)
    }
}

pub(crate) async fn account_find_by_token(
    pool: &Pool,
    hash: &TokenHash,
) -> StoreResult<Option<Account>> {
    let row = sqlx::query(
        "SELECT id, role, shop_id, token_sha256, perm_manual_trigger, perm_card_data \
         FROM accounts WHERE token_sha256 = $1 AND revoked_at IS NULL",
    )
    .bind(hash.0.as_slice())
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else { return Ok(None) };
    account_from_row(&row, hash)
}

/// Account `id` with its current token's hash (`None` when revoked).
pub(crate) async fn account_get(pool: &Pool, id: &str) -> StoreResult<Option<AccountRecord>> {
    let row = sqlx::query(
        "SELECT id, role, shop_id, token_sha256, perm_manual_trigger, perm_card_data, revoked_at \
         FROM accounts WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let stored: Vec<u8> = row.try_get("token_sha256")?;
    let Ok(hash) = <[u8; 32]>::try_from(stored.as_slice()) else {
        return Ok(None);
    };
    let hash = TokenHash(hash);
    let Some(account) = account_from_row(&row, &hash)? else {
        return Ok(None);
    };
    let revoked: Option<String> = row.try_get("revoked_at")?;
    Ok(Some(AccountRecord {
        account,
        token: revoked.is_none().then_some(hash),
    }))
}

/// Gives account `id` the token hash `token` and lifts a revocation.
pub(crate) async fn account_set_token(
    conn: &mut Conn,
    id: &str,
    token: &[u8],
    now: Timestamp,
) -> StoreResult<()> {
    let holder: Option<String> =
        sqlx::query_scalar("SELECT id FROM accounts WHERE token_sha256 = $1")
            .bind(token)
            .fetch_optional(&mut *conn)
            .await?;
    if holder.as_deref().is_some_and(|h| h != id) {
        return Err(StoreError::Conflict(
            "the token is already another account's".into(),
        ));
    }
    one_row(
        sqlx::query(
            "UPDATE accounts SET token_sha256 = $1, revoked_at = NULL, token_changed_at = $2 \
             WHERE id = $3",
        )
        .bind(token)
        .bind(t(now))
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(|e| map_constraint(e, "the token"))?,
    )
}

/// Revokes account `id` (a revoked one keeps its first revocation time).
pub(crate) async fn account_revoke(conn: &mut Conn, id: &str, now: Timestamp) -> StoreResult<()> {
    one_row(
        sqlx::query("UPDATE accounts SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2")
            .bind(t(now))
            .bind(id)
            .execute(&mut *conn)
            .await?,
    )
}

async fn shop_exists(conn: &mut Conn, id: &str) -> StoreResult<bool> {
    Ok(
        sqlx::query_scalar::<_, i64>("SELECT CAST(1 AS BIGINT) FROM shops WHERE id = $1")
            .bind(id)
            .fetch_optional(conn)
            .await?
            .is_some(),
    )
}

/// Most levels below its top shop a shop may lie (a top shop is level 0). A shop stores a
/// closure row per ancestor, so this bounds what one imported shop writes; real trees (platform,
/// agents, sub-agents, enterprises) are a few levels deep (D-import-checks-before-writing).
pub const MAX_SHOP_DEPTH: u64 = 32;

/// Where a part of an import's rows stand in the request's lists (0-based; D-import-in-parts splits a large
/// import into parts), so that an error names the row by its position in the request.
#[derive(Debug, Clone, Default)]
pub(crate) struct RowBase {
    /// The position of the part's first card.
    pub(crate) cards: usize,
    /// The position of the part's first device.
    pub(crate) devices: usize,
    /// The position of each of the part's bindings, in the part's order; empty: the part's
    /// bindings are the request's, in its order. A large import reorders them (deactivations
    /// first, D-import-bindings-end-state), so they are not one run.
    pub(crate) bindings: Vec<usize>,
}

impl RowBase {
    /// The 1-based row number, in the request, of the part's `i`-th binding.
    fn binding_row(&self, i: usize) -> usize {
        self.bindings.get(i).copied().unwrap_or(i) + 1
    }
}

/// An account's row as an import with [`ImportExisting::Skip`] compares it: role, shop, token
/// hash, manual-trigger and card-data permissions, and whether it was revoked.
type StoredAccount = (String, Option<String>, Vec<u8>, bool, bool, Option<String>);

/// An import's `INSERT` (a literal): as it is, so that a stored key is a unique violation
/// (refused), or with `ON CONFLICT DO NOTHING` ([`ImportExisting::Skip`]), so that it changes no
/// row and the caller compares. Not the error itself: on PostgreSQL a failed statement aborts
/// the transaction.
macro_rules! insert_sql {
    ($existing:expr, $sql:literal) => {
        match $existing {
            ImportExisting::Refuse => $sql,
            ImportExisting::Skip => concat!($sql, " ON CONFLICT DO NOTHING"),
        }
    };
}

/// Inserts the batch one row at a time; an error about a row names it ([`import_row`]). With
/// [`ImportExisting::Skip`] a row whose key is stored is compared with the stored one: skipped
/// when equal, refused naming the fields that differ otherwise (D-import-existing-skip).
pub(crate) async fn import(
    tx: &mut Conn,
    batch: &ImportBatch,
    base: &RowBase,
    existing: ImportExisting,
    now: Timestamp,
) -> StoreResult<ImportCounts> {
    let mut counts = ImportCounts::default();
    let shop_row = |i: usize, s: &crate::domain::Shop| import_row("shops", i + 1, Some(("id", &s.id)));
    // Shops in any order: insert those whose parent exists until no progress is made.
    let mut left: Vec<(usize, &crate::domain::Shop)> = batch.shops.iter().enumerate().collect();
    let mut seen = HashSet::new();
    for (i, s) in &left {
        if !seen.insert(s.id.as_str()) {
            return Err(StoreError::Invalid(format!("shop {} listed twice", s.id))
                .at_row(&shop_row(*i, s)));
        }
    }
    // Shops of this request stored so far (inserted, or skipped as stored already).
    let mut placed: HashSet<&str> = HashSet::new();
    while !left.is_empty() {
        let mut next = Vec::new();
        let before = left.len();
        for (i, s) in left {
            let parent_ok = match s.parent_id.as_deref() {
                None => true,
                // A parent in this request is known without a query: a chain listed child
                // first costs a pass per level, not a query per shop and pass.
                Some(p) if seen.contains(p) => placed.contains(p),
                Some(p) => shop_exists(tx, p).await?,
            };
            if !parent_ok {
                next.push((i, s));
                continue;
            }
            let inserted = sqlx::query(insert_sql!(
                existing,
                "INSERT INTO shops (id, parent_id, name) VALUES ($1, $2, $3)"
            ))
            .bind(&s.id)
            .bind(&s.parent_id)
            .bind(&s.name)
            .execute(&mut *tx)
            .await
            .map_err(|e| map_constraint(e, "shop").at_row(&shop_row(i, s)))?;
            if inserted.rows_affected() == 0 {
                let stored: Option<(Option<String>, String)> =
                    sqlx::query_as("SELECT parent_id, name FROM shops WHERE id = $1")
                        .bind(&s.id)
                        .fetch_optional(&mut *tx)
                        .await?;
                same_as_stored(
                    "shop",
                    stored.map(|(parent_id, name)| {
                        vec![("parent_id", parent_id == s.parent_id), ("name", name == s.name)]
                    }),
                )
                .map_err(|e| e.at_row(&shop_row(i, s)))?;
                counts.skipped.shops += 1;
                placed.insert(s.id.as_str());
                continue;
            }
            let closure = sqlx::query(
                "INSERT INTO shop_closure (ancestor_id, descendant_id, depth) \
                 SELECT ancestor_id, $1, depth + 1 FROM shop_closure WHERE descendant_id = $2 \
                 UNION ALL SELECT $1, $1, 0",
            )
            .bind(&s.id)
            .bind(&s.parent_id)
            .execute(&mut *tx)
            .await?;
            // One closure row per ancestor and one for itself: bounded, or a deep chain would
            // write depth²/2 rows (3,000 levels: 4.5 million rows).
            let depth = closure.rows_affected().saturating_sub(1);
            if depth > MAX_SHOP_DEPTH {
                return Err(StoreError::Invalid(format!(
                    "shop {} would be {depth} levels below its top shop (at most {MAX_SHOP_DEPTH})",
                    s.id
                ))
                .at_row(&shop_row(i, s)));
            }
            placed.insert(s.id.as_str());
            counts.shops += 1;
        }
        if next.len() == before {
            // Follow the parents among the shops left: the chain ends at a shop whose parent is
            // unknown, or it loops (a shop its own parent or ancestor, named as a loop, not as an
            // unknown parent).
            let left_by_id: std::collections::HashMap<&str, (usize, &crate::domain::Shop)> =
                next.iter().map(|&(i, s)| (s.id.as_str(), (i, s))).collect();
            let (mut i, mut s) = next[0];
            let mut on_chain = HashSet::new();
            let why = loop {
                if !on_chain.insert(s.id.as_str()) {
                    break format!("shop {} is its own ancestor (its parents lead back to it)", s.id);
                }
                match s.parent_id.as_deref().and_then(|p| left_by_id.get(p)) {
                    Some(&(pi, ps)) => (i, s) = (pi, ps),
                    None => {
                        break format!(
                            "shop {} has an unknown parent {}",
                            s.id,
                            s.parent_id.as_deref().unwrap_or_default()
                        );
                    }
                }
            };
            return Err(StoreError::Invalid(why).at_row(&shop_row(i, s)));
        }
        left = next;
    }
    for (i, a) in batch.accounts.iter().enumerate() {
        let row = || import_row("accounts", i + 1, Some(("id", &a.id)));
        let token = TokenHash::of(&a.token);
        // Read first: a unique violation could not say which key it was, and on PostgreSQL the
        // transaction is over once it happened.
        let holder: Option<String> =
            sqlx::query_scalar("SELECT id FROM accounts WHERE token_sha256 = $1")
                .bind(token.0.as_slice())
                .fetch_optional(&mut *tx)
                .await?;
        if holder.is_some_and(|h| h != a.id) {
            return Err(
                StoreError::Conflict("its token is already another account's".into())
                    .at_row(&row()),
            );
        }
        let inserted = sqlx::query(insert_sql!(
            existing,
            "INSERT INTO accounts (id, role, shop_id, token_sha256, perm_manual_trigger, perm_card_data) \
             VALUES ($1, $2, $3, $4, $5, $6)"
        ))
        .bind(&a.id)
        .bind(a.role.as_str())
        .bind(&a.shop_id)
        .bind(token.0.as_slice())
        .bind(a.perm_manual_trigger)
        .bind(a.perm_card_data)
        .execute(&mut *tx)
        .await
        .map_err(|e| map_insert_with_shop(e, "account", a.shop_id.as_deref().unwrap_or_default()).at_row(&row()))?;
        if inserted.rows_affected() == 0 {
            // Found by id; none means the token is another account's.
            let stored: Option<StoredAccount> = sqlx::query_as(
                "SELECT role, shop_id, token_sha256, perm_manual_trigger, perm_card_data, \
                   revoked_at FROM accounts WHERE id = $1",
            )
            .bind(&a.id)
            .fetch_optional(&mut *tx)
            .await?;
            if stored.is_none() {
                return Err(StoreError::Conflict(
                    "its token is already another account's".into(),
                )
                .at_row(&row()));
            }
            same_as_stored(
                "account",
                stored.map(|(role, shop_id, hash, manual, card_data, revoked_at)| {
                    // A revoked account is not brought back by an import: its token is given
                    // back with `PUT /api/admin/accounts/{id}/token` (D-access-account-tokens).
                    vec![
                        ("role", role == a.role.as_str()),
                        ("shop_id", shop_id == a.shop_id),
                        ("token", hash == token.0.as_slice()),
                        ("perm_manual_trigger", manual == a.perm_manual_trigger),
                        ("perm_card_data", card_data == a.perm_card_data),
                        ("revoked", revoked_at.is_none()),
                    ]
                }),
            )
            .map_err(|e| e.at_row(&row()))?;
            counts.skipped.accounts += 1;
            continue;
        }
        counts.accounts += 1;
    }
    let schedule = if batch.cards.is_empty() {
        None
    } else {
        // Held until commit: the sync cannot change the configuration between this read and the
        // schedule rows written from it (D-poll-postgres-concurrent-writes; no-op on SQLite).
        if let Some(lock) = dialect::SCHEDULE_CONFIG_READ_LOCK {
            sqlx::query(lock).execute(&mut *tx).await?;
        }
        super::schedule::schedule_config(tx).await?
    };
    for (i, c) in batch.cards.iter().enumerate() {
        let row = || import_row("cards", base.cards + i + 1, Some(("iccid", &c.iccid)));
        let inserted = sqlx::query(insert_sql!(
            existing,
            "INSERT INTO cards (iccid, shop_id, polling_enabled, stop_locked) VALUES ($1, $2, $3, $4)"
        ))
        .bind(&c.iccid)
        .bind(&c.shop_id)
        .bind(c.polling_enabled)
        .bind(c.stop_locked)
        .execute(&mut *tx)
        .await
        .map_err(|e| map_insert_with_shop(e, "card", &c.shop_id).at_row(&row()))?;
        if inserted.rows_affected() == 0 {
            let stored: Option<(String, bool, bool)> = sqlx::query_as(
                "SELECT shop_id, polling_enabled, stop_locked FROM cards WHERE iccid = $1",
            )
            .bind(&c.iccid)
            .fetch_optional(&mut *tx)
            .await?;
            same_as_stored(
                "card",
                stored.map(|(shop_id, polling, locked)| {
                    vec![
                        ("shop_id", shop_id == c.shop_id),
                        ("polling_enabled", polling == c.polling_enabled),
                        ("stop_locked", locked == c.stop_locked),
                    ]
                }),
            )
            .map_err(|e| e.at_row(&row()))?;
            // Its schedule rows were written with it.
            counts.skipped.cards += 1;
            continue;
        }
        if let Some(cfg) = &schedule {
            super::schedule::schedule_insert_card(tx, cfg, &c.iccid, now).await?;
        }
        counts.cards += 1;
    }
    for (i, d) in batch.devices.iter().enumerate() {
        let row = || import_row("devices", base.devices + i + 1, Some(("device_no", &d.device_no)));
        let inserted = sqlx::query(insert_sql!(
            existing,
            "INSERT INTO devices (device_no, shop_id, polling_enabled, reported_slot_iccid) VALUES ($1, $2, $3, $4)"
        ))
        .bind(&d.device_no)
        .bind(&d.shop_id)
        .bind(d.polling_enabled)
        .bind(&d.reported_slot_iccid)
        .execute(&mut *tx)
        .await
        .map_err(|e| map_insert_with_shop(e, "device", &d.shop_id).at_row(&row()))?;
        if inserted.rows_affected() == 0 {
            let stored: Option<(String, bool, Option<String>)> = sqlx::query_as(
                "SELECT shop_id, polling_enabled, reported_slot_iccid FROM devices WHERE device_no = $1",
            )
            .bind(&d.device_no)
            .fetch_optional(&mut *tx)
            .await?;
            same_as_stored(
                "device",
                stored.map(|(shop_id, polling, slot)| {
                    vec![
                        ("shop_id", shop_id == d.shop_id),
                        ("polling_enabled", polling == d.polling_enabled),
                        ("reported_slot_iccid", slot == d.reported_slot_iccid),
                    ]
                }),
            )
            .map_err(|e| e.at_row(&row()))?;
            counts.skipped.devices += 1;
            continue;
        }
        counts.devices += 1;
    }
    // Deactivations first: a file that moves a card from one device to another holds both
    // rows, and its end state (one active binding) must not depend on their order.
    // Rows keep their numbers. (A large import has ordered its parts so already.)
    let mut bindings: Vec<(usize, &BindingRow)> = batch.bindings.iter().enumerate().collect();
    bindings.sort_by_key(|(_, b)| b.active);
    for (i, b) in bindings {
        binding_upsert(tx, b).await.map_err(|e| {
            e.at_row(&import_row(
                "bindings",
                base.binding_row(i),
                Some(("iccid", &b.iccid)),
            ))
        })?;
        counts.bindings += 1;
    }
    Ok(counts)
}

/// Keys per `IN (…)` list of [`references_known`].
const KEYS_PER_LOOKUP: usize = 500;

/// Which of `wanted` are stored: `sql` is `SELECT key FROM table WHERE key IN ` and gets the list.
async fn stored_keys(
    pool: &Pool,
    sql: &'static str,
    wanted: HashSet<&str>,
) -> StoreResult<HashSet<String>> {
    let mut wanted: Vec<&str> = wanted.into_iter().collect();
    wanted.sort_unstable();
    let mut stored = HashSet::with_capacity(wanted.len());
    for chunk in wanted.chunks(KEYS_PER_LOOKUP) {
        let list = placeholders(chunk.len());
        let q = sqlx::AssertSqlSafe(format!("{sql}({list})"));
        let found: Vec<String> = chunk
            .iter()
            .fold(sqlx::query_scalar(q), |q, key| q.bind(*key))
            .fetch_all(pool)
            .await?;
        stored.extend(found);
    }
    Ok(stored)
}

/// Checks that every shop the accounts, cards and devices of `batch` name, and every device and
/// card its bindings name, is stored or listed in `batch`, reading what is stored through
/// `pool`: an import written in parts checks this before its first part commits.
///
/// # Errors
/// `Invalid` at the first row (in list order: accounts, cards, devices, bindings) naming an
/// unknown key, worded as the insert's refusal would be ("card's shop S is unknown", "device D
/// is unknown").
pub(crate) async fn references_known(pool: &Pool, batch: &ImportBatch) -> StoreResult<()> {
    let shops: HashSet<&str> = batch.shops.iter().map(|s| s.id.as_str()).collect();
    let devices: HashSet<&str> = batch.devices.iter().map(|d| d.device_no.as_str()).collect();
    let cards: HashSet<&str> = batch.cards.iter().map(|c| c.iccid.as_str()).collect();
    let named_shops = batch
        .accounts
        .iter()
        .filter_map(|a| a.shop_id.as_deref())
        .chain(batch.cards.iter().map(|c| c.shop_id.as_str()))
        .chain(batch.devices.iter().map(|d| d.shop_id.as_str()));
    let stored_shops = stored_keys(
        pool,
        "SELECT id FROM shops WHERE id IN ",
        named_shops.filter(|s| !shops.contains(s)).collect(),
    )
    .await?;
    let stored_devices = stored_keys(
        pool,
        "SELECT device_no FROM devices WHERE device_no IN ",
        batch
            .bindings
            .iter()
            .map(|b| b.device_no.as_str())
            .filter(|d| !devices.contains(d))
            .collect(),
    )
    .await?;
    let stored_cards = stored_keys(
        pool,
        "SELECT iccid FROM cards WHERE iccid IN ",
        batch
            .bindings
            .iter()
            .map(|b| b.iccid.as_str())
            .filter(|c| !cards.contains(c))
            .collect(),
    )
    .await?;
    let shop_known = |shop: &str| shops.contains(shop) || stored_shops.contains(shop);
    let unknown_shop = |what: &str, shop: &str, row: String| {
        StoreError::Invalid(format!("{what}'s shop {shop} is unknown")).at_row(&row)
    };
    for (i, a) in batch.accounts.iter().enumerate() {
        if let Some(shop) = a.shop_id.as_deref().filter(|s| !shop_known(s)) {
            let row = import_row("accounts", i + 1, Some(("id", &a.id)));
            return Err(unknown_shop("account", shop, row));
        }
    }
    for (i, c) in batch.cards.iter().enumerate() {
        if !shop_known(&c.shop_id) {
            let row = import_row("cards", i + 1, Some(("iccid", &c.iccid)));
            return Err(unknown_shop("card", &c.shop_id, row));
        }
    }
    for (i, d) in batch.devices.iter().enumerate() {
        if !shop_known(&d.shop_id) {
            let row = import_row("devices", i + 1, Some(("device_no", &d.device_no)));
            return Err(unknown_shop("device", &d.shop_id, row));
        }
    }
    for (i, b) in batch.bindings.iter().enumerate() {
        let device = devices.contains(b.device_no.as_str()) || stored_devices.contains(&b.device_no);
        let card = cards.contains(b.iccid.as_str()) || stored_cards.contains(&b.iccid);
        if let Some(why) = unknown_binding_ends(b, device, card) {
            let row = import_row("bindings", i + 1, Some(("iccid", &b.iccid)));
            return Err(StoreError::Invalid(why).at_row(&row));
        }
    }
    Ok(())
}

/// What a binding whose device or card (`false`: unknown) is missing is refused with.
fn unknown_binding_ends(b: &BindingRow, device: bool, card: bool) -> Option<String> {
    match (device, card) {
        (false, false) => Some(format!(
            "device {} and card {} are unknown",
            b.device_no, b.iccid
        )),
        (false, true) => Some(format!("device {} is unknown", b.device_no)),
        (true, false) => Some(format!("card {} is unknown", b.iccid)),
        (true, true) => None,
    }
}

/// Whether an imported row that changed nothing ([`ImportExisting::Skip`]) may be skipped:
/// `fields` pairs each compared field with whether the stored value equals the sent one, `None`
/// when no row has the key (another unique key was taken: an account's token). Refused as a
/// conflict naming `what` and the fields that differ otherwise.
fn same_as_stored(what: &str, fields: Option<Vec<(&str, bool)>>) -> StoreResult<()> {
    let Some(fields) = fields else {
        return Err(StoreError::Conflict(format!("{what} already exists")));
    };
    let differ: Vec<&str> = fields
        .into_iter()
        .filter(|(_, same)| !same)
        .map(|(name, _)| name)
        .collect();
    if differ.is_empty() {
        Ok(())
    } else {
        Err(StoreError::Conflict(format!(
            "{what} already exists with other values ({})",
            differ.join(", ")
        )))
    }
}

/// Binds card `b.iccid` to device `b.device_no` (or updates whether the binding is active).
///
/// # Errors
/// `Invalid` naming the device, the card or both when they do not exist; `Conflict` naming the
/// device the card is actively bound to when this binding would be a second active one.
pub(crate) async fn binding_upsert(tx: &mut Conn, b: &BindingRow) -> StoreResult<()> {
    // Read first: the insert's refusal names no key (SQLite) or ends the transaction
    // (PostgreSQL), and a unique violation would hide a missing device.
    let (device, card, bound_to): (Option<i64>, Option<i64>, Option<String>) = sqlx::query_as(
        "SELECT (SELECT CAST(1 AS BIGINT) FROM devices WHERE device_no = $1), \
                (SELECT CAST(1 AS BIGINT) FROM cards WHERE iccid = $2), \
                (SELECT device_no FROM bindings WHERE iccid = $2 AND active AND device_no <> $1)",
    )
    .bind(&b.device_no)
    .bind(&b.iccid)
    .fetch_one(&mut *tx)
    .await?;
    if let Some(why) = unknown_binding_ends(b, device.is_some(), card.is_some()) {
        return Err(StoreError::Invalid(why));
    }
    if let Some(other) = bound_to.filter(|_| b.active) {
        return Err(StoreError::Conflict(format!(
            "card {} is already actively bound to device {other}",
            b.iccid
        )));
    }
    sqlx::query(
        "INSERT INTO bindings (device_no, iccid, active) VALUES ($1, $2, $3) \
         ON CONFLICT (device_no, iccid) DO UPDATE SET active = excluded.active",
    )
    .bind(&b.device_no)
    .bind(&b.iccid)
    .bind(b.active)
    .execute(&mut *tx)
    .await
    .map_err(|e| map_constraint(e, "active binding of this card"))?;
    Ok(())
}

/// The shop of an asset, `None` when the asset does not exist.
pub(crate) async fn asset_shop(conn: &mut Conn, asset: &AssetRef) -> StoreResult<Option<String>> {
    let sql = match asset.asset_type {
        AssetType::Card => "SELECT shop_id FROM cards WHERE iccid = $1",
        AssetType::Device => "SELECT shop_id FROM devices WHERE device_no = $1",
    };
    Ok(sqlx::query_scalar(sql)
        .bind(&asset.asset_id)
        .fetch_optional(conn)
        .await?)
}

/// The shop of an asset, locking the asset's row (PostgreSQL) for the rest of the transaction;
/// `None` when the asset does not exist. Every transition that reads and then changes an asset's
/// packages (payment, queued activation, package poll) takes this lock first, so their reads
/// ("is a main package active?", "is one pending?") stay true until they commit: two payments for
/// one asset never both activate a main package (D-poll-postgres-concurrent-writes). Lock order: order row, asset row,
/// usage rows, items.
pub(crate) async fn asset_lock(conn: &mut Conn, asset: &AssetRef) -> StoreResult<Option<String>> {
    let sql = match asset.asset_type {
        AssetType::Card => concat!(
            "SELECT shop_id FROM cards WHERE iccid = $1",
            dialect::lock_row!()
        ),
        AssetType::Device => concat!(
            "SELECT shop_id FROM devices WHERE device_no = $1",
            dialect::lock_row!()
        ),
    };
    Ok(sqlx::query_scalar(sql)
        .bind(&asset.asset_id)
        .fetch_optional(conn)
        .await?)
}

fn order_from_row(row: &DbRow) -> StoreResult<OrderView> {
    let asset_type: String = row.try_get("asset_type")?;
    let kind: String = row.try_get("kind")?;
    let status: String = row.try_get("status")?;
    Ok(OrderView {
        id: row.try_get("id")?,
        asset: AssetRef {
            asset_type: AssetType::parse(&asset_type).unwrap_or(AssetType::Card),
            asset_id: row.try_get("asset_id")?,
        },
        kind: if kind == "addon" {
            PackageKind::Addon
        } else {
            PackageKind::Main
        },
        status: OrderStatus::parse(&status).unwrap_or(OrderStatus::Unpaid),
        payment_id: row.try_get("payment_id")?,
        created_at: super::rows::ts(row, "created_at")?,
    })
}

pub(crate) async fn order_create(
    tx: &mut Conn,
    id: &str,
    asset: &AssetRef,
    kind: PackageKind,
    now: Timestamp,
) -> StoreResult<OrderView> {
    if asset_shop(tx, asset).await?.is_none() {
        return Err(StoreError::Invalid(format!(
            "unknown {} {}",
            asset.asset_type.as_str(),
            asset.asset_id
        )));
    }
    let row = sqlx::query(
        "INSERT INTO package_orders (id, asset_type, asset_id, kind, status, created_at) \
         VALUES ($1, $2, $3, $4, 'unpaid', $5) RETURNING *",
    )
    .bind(id)
    .bind(asset.asset_type.as_str())
    .bind(&asset.asset_id)
    .bind(kind.as_str())
    .bind(t(now))
    .fetch_one(&mut *tx)
    .await
    .map_err(|e| map_constraint(e, "order"))?;
    order_from_row(&row)
}

pub(crate) async fn payment_apply(
    tx: &mut Conn,
    cb: &PaymentCallback,
    task_types: &[String],
    now: Timestamp,
) -> StoreResult<PaymentOutcome> {
    // The order's row first (PostgreSQL, D-poll-postgres-concurrent-writes): a second callback for this order waits here
    // until the first commits, then sees it below as a replay or a settled order.
    let locked = sqlx::query(concat!(
        "SELECT * FROM package_orders WHERE id = $1",
        dialect::lock_row!()
    ))
    .bind(&cb.order_id)
    .fetch_optional(&mut *tx)
    .await?;
    // Idempotency by payment id: a repeated callback changes nothing and enqueues nothing. A
    // "replay" that says something else is not a replay: 409 naming both values.
    let seen = sqlx::query("SELECT * FROM package_orders WHERE payment_id = $1")
        .bind(&cb.payment_id)
        .fetch_optional(&mut *tx)
        .await?;
    if let Some(row) = seen {
        let order = order_from_row(&row)?;
        if order.id != cb.order_id {
            return Err(StoreError::Conflict(format!(
                "payment {} was already applied to order {}, not order {}",
                cb.payment_id, order.id, cb.order_id
            )));
        }
        let settled_as = cb.status.order_status();
        if order.status != settled_as {
            return Err(StoreError::Conflict(format!(
                "payment {} was already applied with status {}, not {}",
                cb.payment_id,
                order.status.as_str(),
                settled_as.as_str()
            )));
        }
        let usage: Option<(String, String)> =
            sqlx::query_as("SELECT id, status FROM package_usages WHERE order_id = $1")
                .bind(&order.id)
                .fetch_optional(&mut *tx)
                .await?;
        return Ok(PaymentOutcome {
            order_id: order.id,
            status: order.status,
            replayed: true,
            usage_active: usage.as_ref().is_some_and(|u| u.1 != "pending"),
            usage_id: usage.map(|u| u.0),
            trigger_type: None,
            items: vec![],
        });
    }
    let order = locked.ok_or(StoreError::NotFound)?;
    let order = order_from_row(&order)?;
    let settled = sqlx::query(
        "UPDATE package_orders SET status = $1, payment_id = $2, settled_at = $3 \
         WHERE id = $4 AND status = 'unpaid'",
    )
    .bind(cb.status.order_status().as_str())
    .bind(&cb.payment_id)
    .bind(t(now))
    .bind(&order.id)
    .execute(&mut *tx)
    .await
    .map_err(|e| match e.as_database_error() {
        // The same payment id applied to another order by a concurrent callback since the read
        // above: run again, which answers the replay's 409 naming both orders.
        Some(db) if db.is_unique_violation() => {
            StoreError::Raced("a concurrent callback applied the same payment id")
        }
        _ => StoreError::from(e),
    })?;
    if settled.rows_affected() != 1 {
        return Err(StoreError::Conflict(format!(
            "order is already {}",
            order.status.as_str()
        )));
    }
    let mut out = PaymentOutcome {
        order_id: order.id.clone(),
        status: cb.status.order_status(),
        replayed: false,
        usage_id: None,
        usage_active: false,
        trigger_type: None,
        items: vec![],
    };
    if cb.status != PaymentStatus::Paid {
        // Failed or cancelled payments never enqueue.
        return Ok(out);
    }
    let asset = &order.asset;
    asset_lock(tx, asset).await?;
    let had_earlier: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM package_usages WHERE asset_type = $1 AND asset_id = $2)",
    )
    .bind(asset.asset_type.as_str())
    .bind(&asset.asset_id)
    .fetch_one(&mut *tx)
    .await?;
    let trigger = match order.kind {
        PackageKind::Main => {
            let has_active_main: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM package_usages WHERE asset_type = $1 AND asset_id = $2 \
                 AND kind = 'main' AND status = 'active')",
            )
            .bind(asset.asset_type.as_str())
            .bind(&asset.asset_id)
            .fetch_one(&mut *tx)
            .await?;
            (!has_active_main).then(|| TriggerType::for_main_activation(had_earlier))
        }
        PackageKind::Addon => Some(TriggerType::AddonActivated),
    };
    let usage_id = uuid::Uuid::now_v7().to_string();
    let active = trigger.is_some();
    sqlx::query(
        "INSERT INTO package_usages (id, order_id, asset_type, asset_id, kind, status, created_at, activated_at, ends_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&usage_id)
    .bind(&order.id)
    .bind(asset.asset_type.as_str())
    .bind(&asset.asset_id)
    .bind(order.kind.as_str())
    .bind(if active { "active" } else { "pending" })
    .bind(t(now))
    .bind(active.then(|| t(now)))
    .bind(active.then(|| t(now.plus(PACKAGE_PERIOD))))
    .execute(&mut *tx)
    .await?;
    out.usage_id = Some(usage_id);
    out.usage_active = active;
    if let Some(trigger) = trigger {
        let targets = snapshot_asset(tx, asset).await?;
        let demand = Demand {
            trigger_type: trigger,
            source: format!("order:{}", order.id),
            event_id: format!("payment:{}", cb.payment_id),
            operator: None,
            reason: None,
            task_types: task_types.to_vec(),
        };
        out.items = enqueue::enqueue(tx, &targets, &demand, now, None).await?;
        out.trigger_type = Some(trigger);
    }
    Ok(out)
}

pub(crate) async fn usage_activate_queued(
    tx: &mut Conn,
    usage_id: &str,
    task_types: &[String],
    now: Timestamp,
) -> StoreResult<Vec<EnqueuedItem>> {
    // The asset's row first, as every package transition does (D-poll-postgres-concurrent-writes lock order).
    let owner: Option<(String, String)> =
        sqlx::query_as("SELECT asset_type, asset_id FROM package_usages WHERE id = $1")
            .bind(usage_id)
            .fetch_optional(&mut *tx)
            .await?;
    if let Some((asset_type, asset_id)) = &owner {
        let asset = AssetRef {
            asset_type: AssetType::parse(asset_type).unwrap_or(AssetType::Card),
            asset_id: asset_id.clone(),
        };
        asset_lock(tx, &asset).await?;
    }
    let hit: Option<(String, String)> = sqlx::query_as(
        "UPDATE package_usages SET status = 'active', activated_at = $1, ends_at = $2 \
         WHERE id = $3 AND status = 'pending' AND kind = 'main' RETURNING asset_type, asset_id",
    )
    .bind(t(now))
    .bind(t(now.plus(PACKAGE_PERIOD)))
    .bind(usage_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((asset_type, asset_id)) = hit else {
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM package_usages WHERE id = $1)")
                .bind(usage_id)
                .fetch_one(&mut *tx)
                .await?;
        return Err(if exists {
            StoreError::Conflict("usage record is not a pending main package".into())
        } else {
            StoreError::NotFound
        });
    };
    // The queued package takes over: the previous active main package ends now.
    sqlx::query(
        "UPDATE package_usages SET status = 'expired', ends_at = $1 WHERE asset_type = $2 AND asset_id = $3 \
         AND kind = 'main' AND status = 'active' AND id <> $4",
    )
    .bind(t(now))
    .bind(&asset_type)
    .bind(&asset_id)
    .bind(usage_id)
    .execute(&mut *tx)
    .await?;
    let asset = AssetRef {
        asset_type: AssetType::parse(&asset_type).unwrap_or(AssetType::Card),
        asset_id,
    };
    let targets = snapshot_asset(tx, &asset).await?;
    let demand = Demand {
        trigger_type: TriggerType::QueueActivated,
        source: format!("usage:{usage_id}"),
        event_id: format!("usage-activated:{usage_id}"),
        operator: None,
        reason: None,
        task_types: task_types.to_vec(),
    };
    enqueue::enqueue(tx, &targets, &demand, now, None).await
}

pub(crate) async fn package_poll_asset(
    tx: &mut Conn,
    asset: &AssetRef,
    task_types: &[String],
    now: Timestamp,
) -> StoreResult<PackagePollOutcome> {
    if asset_lock(tx, asset).await?.is_none() {
        return Err(StoreError::NotFound);
    }
    let expired = sqlx::query(
        "UPDATE package_usages SET status = 'expired' WHERE asset_type = $1 AND asset_id = $2 \
         AND status = 'active' AND ends_at <= $3",
    )
    .bind(asset.asset_type.as_str())
    .bind(&asset.asset_id)
    .bind(t(now))
    .execute(&mut *tx)
    .await?
    .rows_affected();
    let has_active_main: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM package_usages WHERE asset_type = $1 AND asset_id = $2 \
         AND kind = 'main' AND status = 'active')",
    )
    .bind(asset.asset_type.as_str())
    .bind(&asset.asset_id)
    .fetch_one(&mut *tx)
    .await?;
    let pending: Option<String> = sqlx::query_scalar(
        "SELECT id FROM package_usages WHERE asset_type = $1 AND asset_id = $2 AND status = 'pending' \
         ORDER BY created_at, id LIMIT 1",
    )
    .bind(asset.asset_type.as_str())
    .bind(&asset.asset_id)
    .fetch_optional(&mut *tx)
    .await?;
    let mut out = PackagePollOutcome {
        usages_expired: expired,
        no_valid_package: !has_active_main,
        pending_usage: pending.is_some(),
        items: vec![],
    };
    if let (false, Some(pending)) = (has_active_main, pending) {
        let targets = snapshot_asset(tx, asset).await?;
        let demand = Demand {
            trigger_type: TriggerType::NoValidPackage,
            source: format!(
                "package_poll:{}:{}",
                asset.asset_type.as_str(),
                asset.asset_id
            ),
            // Keyed by the waiting usage record: polling the same state again is a replay.
            event_id: format!("no-valid-package:{pending}"),
            operator: None,
            reason: None,
            task_types: task_types.to_vec(),
        };
        out.items = enqueue::enqueue(tx, &targets, &demand, now, None).await?;
    }
    Ok(out)
}

/// The package verdict without a write transaction when nothing can change: no pending usage
/// record and no active one past its end. `None` means the full transaction is needed.
/// (The ordinary package poll runs for every card; most of them have nothing to do.)
pub(crate) async fn package_poll_quiet(
    conn: &mut Conn,
    asset: &AssetRef,
    now: Timestamp,
) -> StoreResult<Option<PackagePollOutcome>> {
    if asset_shop(conn, asset).await?.is_none() {
        return Err(StoreError::NotFound);
    }
    let row: (bool, bool) = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM package_usages WHERE asset_type = $1 AND asset_id = $2            AND (status = 'pending' OR (status = 'active' AND ends_at <= $3))),          EXISTS (SELECT 1 FROM package_usages WHERE asset_type = $1 AND asset_id = $2            AND kind = 'main' AND status = 'active')",
    )
    .bind(asset.asset_type.as_str())
    .bind(&asset.asset_id)
    .bind(t(now))
    .fetch_one(&mut *conn)
    .await?;
    let (busy, has_active_main) = row;
    if busy {
        return Ok(None);
    }
    Ok(Some(PackagePollOutcome {
        usages_expired: 0,
        no_valid_package: !has_active_main,
        pending_usage: false,
        items: vec![],
    }))
}
