//! The bulk import ([`ImportStore`]): the reference check before the first part, the split into
//! parts (D-import-in-parts), and one insert function per entity, each naming the row it refuses.

use std::collections::HashSet;

use async_trait::async_trait;
use futures::FutureExt;

use rakuten_types::Timestamp;

use super::{Conn, Pool, SqlStore, dialect, map_constraint, map_insert_with_shop, placeholders};
use crate::domain::TokenHash;
use crate::domain::asset::{BindingRow, CardRow, DeviceRow};
use crate::store::{AccountImport, ImportBatch, ImportCounts, ImportExisting, ImportStore, StoreError, StoreResult, import_row};
use super::assets::{binding_upsert, unknown_binding_ends};

async fn shop_exists(conn: &mut Conn, id: &str) -> StoreResult<bool> {
    Ok(
        sqlx::query_scalar::<_, i64>("SELECT CAST(1 AS BIGINT) FROM shops WHERE id = $1")
            .bind(id)
            .fetch_optional(conn)
            .await?
            .is_some(),
    )
}

/// Rows of one import that go to the writer as one operation (one transaction on PostgreSQL):
/// an import up to this size stays all-or-nothing; a larger one streams in parts of this many
/// cards, devices or bindings, each committed on its own (D-import-in-parts). About a second of the writer's
/// time per part at full scale, so other writes wait at most that long behind an import.
pub(crate) const IMPORT_PART: usize = 10_000;

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
    import_shops(tx, &batch.shops, existing, &mut counts).await?;
    import_accounts(tx, &batch.accounts, existing, &mut counts).await?;
    import_cards(tx, &batch.cards, base.cards, existing, now, &mut counts).await?;
    import_devices(tx, &batch.devices, base.devices, existing, &mut counts).await?;
    import_bindings(tx, &batch.bindings, base, &mut counts).await?;
    Ok(counts)
}

/// The shops, in any order: a shop goes in once its parent is stored, pass after pass, until none
/// is left or a pass places none (an unknown parent, or a loop, named as such). Each stores a
/// closure row per ancestor, at most [`MAX_SHOP_DEPTH`] levels deep.
async fn import_shops(
    tx: &mut Conn,
    shops: &[crate::domain::Shop],
    existing: ImportExisting,
    counts: &mut ImportCounts,
) -> StoreResult<()> {
    let shop_row = |i: usize, s: &crate::domain::Shop| import_row("shops", i + 1, Some(("id", &s.id)));
    // Shops in any order: insert those whose parent exists until no progress is made.
    let mut left: Vec<(usize, &crate::domain::Shop)> = shops.iter().enumerate().collect();
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
                // A loop is the file's own mistake (422); a parent neither in the file nor stored
                // depends on what is stored (404, D-unknown-reference-is-404).
                if !on_chain.insert(s.id.as_str()) {
                    break StoreError::Invalid(format!(
                        "shop {} is its own ancestor (its parents lead back to it)",
                        s.id
                    ));
                }
                match s.parent_id.as_deref().and_then(|p| left_by_id.get(p)) {
                    Some(&(pi, ps)) => (i, s) = (pi, ps),
                    None => {
                        break StoreError::UnknownRef(format!(
                            "shop {} has an unknown parent {}",
                            s.id,
                            s.parent_id.as_deref().unwrap_or_default()
                        ));
                    }
                }
            };
            return Err(why.at_row(&shop_row(i, s)));
        }
        left = next;
    }
    Ok(())
}

/// The accounts; a token already another account's is refused before the insert, which could not
/// say which key it hit.
async fn import_accounts(
    tx: &mut Conn,
    accounts: &[AccountImport],
    existing: ImportExisting,
    counts: &mut ImportCounts,
) -> StoreResult<()> {
    for (i, a) in accounts.iter().enumerate() {
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
    Ok(())
}

/// The cards, each new one with its ordinary polling schedule rows (read under the schedule
/// configuration's lock); `first` is the position of the first card in the request.
async fn import_cards(
    tx: &mut Conn,
    cards: &[CardRow],
    first: usize,
    existing: ImportExisting,
    now: Timestamp,
    counts: &mut ImportCounts,
) -> StoreResult<()> {
    let schedule = if cards.is_empty() {
        None
    } else {
        // Held until commit: the sync cannot change the configuration between this read and the
        // schedule rows written from it (D-poll-postgres-concurrent-writes; no-op on SQLite).
        if let Some(lock) = dialect::SCHEDULE_CONFIG_READ_LOCK {
            sqlx::query(lock).execute(&mut *tx).await?;
        }
        super::schedule::schedule_config(tx).await?
    };
    for (i, c) in cards.iter().enumerate() {
        let row = || import_row("cards", first + i + 1, Some(("iccid", &c.iccid)));
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
    Ok(())
}

/// The devices; `first` is the position of the first device in the request.
async fn import_devices(
    tx: &mut Conn,
    devices: &[DeviceRow],
    first: usize,
    existing: ImportExisting,
    counts: &mut ImportCounts,
) -> StoreResult<()> {
    for (i, d) in devices.iter().enumerate() {
        let row = || import_row("devices", first + i + 1, Some(("device_no", &d.device_no)));
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
    Ok(())
}

/// The bindings, deactivations first, each an upsert ([`binding_upsert`]).
async fn import_bindings(
    tx: &mut Conn,
    bindings: &[BindingRow],
    base: &RowBase,
    counts: &mut ImportCounts,
) -> StoreResult<()> {
    // Deactivations first: a file that moves a card from one device to another holds both
    // rows, and its end state (one active binding) must not depend on their order.
    // Rows keep their numbers. (A large import has ordered its parts so already.)
    let mut ordered: Vec<(usize, &BindingRow)> = bindings.iter().enumerate().collect();
    ordered.sort_by_key(|(_, b)| b.active);
    for (i, b) in ordered {
        binding_upsert(tx, b).await.map_err(|e| {
            e.at_row(&import_row(
                "bindings",
                base.binding_row(i),
                Some(("iccid", &b.iccid)),
            ))
        })?;
        counts.bindings += 1;
    }
    Ok(())
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
        StoreError::UnknownRef(format!("{what}'s shop {shop} is unknown")).at_row(&row)
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
            return Err(StoreError::UnknownAsset(why).at_row(&row));
        }
    }
    Ok(())
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

#[async_trait]
impl ImportStore for SqlStore {
    async fn domain_import_with(
        &self,
        batch: &ImportBatch,
        existing: ImportExisting,
        now: Timestamp,
    ) -> StoreResult<ImportCounts> {
        let parts = import_parts(batch);
        if parts.len() > 1 {
            // Before the first part commits: a row whose shop, device or card is unknown would
            // otherwise be found only in its own part, after 10,000 rows are stored (helpers 48
            // and 49).
            references_known(&self.pool, batch).await?;
        }
        let mut total = ImportCounts::default();
        for (part, base) in parts {
            let cards_only = part.shops.is_empty()
                && part.accounts.is_empty()
                && part.devices.is_empty()
                && part.bindings.is_empty();
            let bulk = if cards_only {
                self.write((part.clone(), now), |c, (part, now)| {
                    async move {
                        // As `import`: the sync cannot change the configuration before
                        // this part's schedule rows commit (D-poll-postgres-concurrent-writes; no-op on SQLite).
                        if let Some(lock) = dialect::SCHEDULE_CONFIG_READ_LOCK {
                            sqlx::query(lock).execute(&mut *c).await?;
                        }
                        let schedule = super::schedule::schedule_config(c).await?;
                        let cards = super::bulk::cards(c, &part.cards, schedule.as_ref(), *now).await?;
                        Ok(ImportCounts {
                            cards,
                            ..ImportCounts::default()
                        })
                    }
                    .boxed()
                })
                .await
                .map(Some)
            } else {
                Ok(None)
            };
            let n = match bulk {
                Ok(Some(n)) => n,
                // A multi-row statement cannot say which row it refused: the part again, one row
                // at a time, names it (D-import-refusals-name-the-row), or skips the rows already stored
                // (D-import-existing-skip). Only a refused or resent import pays for this.
                Ok(None) | Err(StoreError::Conflict(_) | StoreError::Invalid(_)) => self
                    .write((part, base, existing, now), |c, (part, base, existing, now)| {
                        import(c, part, base, *existing, *now).boxed()
                    })
                    .await
                    .map_err(|e| e.after_committed(&total))?,
                Err(e) => return Err(e.after_committed(&total)),
            };
            total.add(&n);
        }
        Ok(total)
    }
}

/// An import as writer operations (D-import-in-parts): one, all-or-nothing, when it holds at most
/// [`IMPORT_PART`] rows; else shops and accounts first (shops may refer to each other), then the
/// cards, devices and bindings in parts of [`IMPORT_PART`], in that order (a binding refers to
/// its card and device). The bindings' deactivations come before all their activations, whatever
/// part they fall in: a file that moves a card holds both rows, perhaps 10,000 rows apart, and
/// the activation would be refused while the card is still bound elsewhere (D-import-bindings-end-state).
fn import_parts(batch: &ImportBatch) -> Vec<(ImportBatch, RowBase)> {
    let rows = batch.shops.len()
        + batch.accounts.len()
        + batch.cards.len()
        + batch.devices.len()
        + batch.bindings.len();
    if rows <= IMPORT_PART {
        return vec![(batch.clone(), RowBase::default())];
    }
    let mut parts = vec![(
        ImportBatch {
            shops: batch.shops.clone(),
            accounts: batch.accounts.clone(),
            ..ImportBatch::default()
        },
        RowBase::default(),
    )];
    parts.extend(batch.cards.chunks(IMPORT_PART).enumerate().map(|(i, c)| {
        let part = ImportBatch {
            cards: c.to_vec(),
            ..ImportBatch::default()
        };
        let cards = i * IMPORT_PART;
        (part, RowBase { cards, ..Default::default() })
    }));
    parts.extend(batch.devices.chunks(IMPORT_PART).enumerate().map(|(i, d)| {
        let part = ImportBatch {
            devices: d.to_vec(),
            ..ImportBatch::default()
        };
        let devices = i * IMPORT_PART;
        (part, RowBase { devices, ..Default::default() })
    }));
    let mut bindings: Vec<usize> = (0..batch.bindings.len()).collect();
    bindings.sort_by_key(|&i| batch.bindings[i].active);
    parts.extend(bindings.chunks(IMPORT_PART).map(|rows| {
        let part = ImportBatch {
            bindings: rows.iter().map(|&i| batch.bindings[i].clone()).collect(),
            ..ImportBatch::default()
        };
        (part, RowBase { bindings: rows.to_vec(), ..Default::default() })
    }));
    parts
}