//! `POST /api/admin/import`: bulk import of shops, accounts, cards, devices and bindings
//! (super_admin only); `PUT`/`DELETE /api/admin/accounts/{id}/token`: replace or revoke an
//! account's token (super_admin only). Bounded: 32 MiB body, 200,000 rows per kind. `?existing=skip` skips rows
//! already stored as sent, so that a lost answer is recovered by sending the same rows again
//! (D-import-existing-skip).

use axum::Json;
use axum::extract::State;

use rakuten_types::Envelope;
use rakuten_types::ids::is_invisible;
use rakuten_types::text::is_bidi_control;

use super::key;
use crate::domain::account::{TOKEN_CHARS, token_char_refused};
use crate::domain::shop::MAX_SHOP_NAME_CHARS;
use crate::domain::{Role, TokenHash};
use crate::http::auth::{Allowed, rule};
use crate::http::error::ApiError;
use crate::http::extract::{Json as Body, Path, Query};
use crate::http::ok;
use crate::state::AppState;
use crate::store::{ImportBatch, ImportCounts, ImportExisting, import_row};

/// Most rows of one kind per import.
pub const MAX_IMPORT_ROWS: usize = 200_000;

/// `e` about the `i`-th (0-based) row of `list`, named as the store names it (D-import-refusals-name-the-row).
fn at_row(mut e: ApiError, list: &str, i: usize, key: (&str, &str)) -> ApiError {
    e.msg = format!("{}: {}", import_row(list, i + 1, Some(key)), e.msg);
    e
}

/// The first repeated key of a list: `(row of its first use, row of the repeat)`, 0-based. Checked
/// before anything is written, so that a key listed twice is the file's 422, never the database's
/// 409 after earlier parts committed (D-import-checks-before-writing).
fn first_repeat<K: std::hash::Hash + Eq>(keys: impl Iterator<Item = K>) -> Option<(usize, usize)> {
    let mut first = std::collections::HashMap::new();
    keys.enumerate()
        .find_map(|(i, k)| first.insert(k, i).map(|at| (at, i)))
}

/// 422 at the second row of `list` that repeats a key, naming both rows.
fn listed_once<'a>(
    list: &str,
    what: &str,
    key_name: &str,
    keys: impl Iterator<Item = &'a str> + Clone,
) -> Result<(), ApiError> {
    match first_repeat(keys.clone()) {
        None => Ok(()),
        Some((at, i)) => {
            let k = keys.clone().nth(i).unwrap_or_default();
            Err(at_row(
                ApiError::invalid(format!("{what} {k} listed twice (first at row {})", at + 1)),
                list,
                i,
                (key_name, k),
            ))
        }
    }
}

/// The rules of an account's token, imported or replaced: 16–256 characters without spaces or
/// control characters, and not the admin token. The message never repeats the token.
fn check_token(token: &str, admin: &TokenHash) -> Result<(), ApiError> {
    let n = token.chars().count();
    if !TOKEN_CHARS.contains(&n) || token.chars().any(token_char_refused) {
        return Err(ApiError::invalid(
            "token must be 16-256 characters without spaces",
        ));
    }
    // The admin token is checked first at sign-in, so an account holding it could never act as
    // itself: the two roles would collapse into super_admin (D-admin-token-is-nobody-elses).
    if admin.ct_eq(&TokenHash::of(token).0) {
        return Err(ApiError::invalid(
            "token is the admin token (RAKUTEN_POLL_ADMIN_TOKEN): every account needs a token of \
             its own",
        ));
    }
    Ok(())
}

fn check(batch: &ImportBatch, admin: &TokenHash) -> Result<(), ApiError> {
    let kinds = [
        ("shops", batch.shops.len()),
        ("accounts", batch.accounts.len()),
        ("cards", batch.cards.len()),
        ("devices", batch.devices.len()),
        ("bindings", batch.bindings.len()),
    ];
    for (k, n) in kinds {
        if n > MAX_IMPORT_ROWS {
            return Err(ApiError::invalid(format!(
                "at most {MAX_IMPORT_ROWS} {k} per import"
            )));
        }
    }
    for (i, s) in batch.shops.iter().enumerate() {
        let at = |e: ApiError| at_row(e, "shops", i, ("id", &s.id));
        key("shop id", &s.id).map_err(at)?;
        if let Some(p) = &s.parent_id {
            key("parent shop id", p).map_err(at)?;
        }
        // Shown wherever the shop is: an empty name, a name of zero-width characters, a NUL (which
        // PostgreSQL refuses and SQLite would store) and an ANSI escape are refused.
        if s.name.chars().all(|c| c.is_whitespace() || is_invisible(c)) {
            return Err(at(ApiError::invalid(
                "shop name is empty: give the shop a name",
            )));
        }
        if let Some(c) = s.name.chars().find(|c| c.is_control()) {
            return Err(at(ApiError::invalid(format!(
                "shop name holds a control character (U+{:04X})",
                u32::from(c)
            ))));
        }
        // U+202E in a name reversed how the rows after it read on the console.
        if let Some(c) = s.name.chars().find(|&c| is_bidi_control(c)) {
            return Err(at(ApiError::invalid(format!(
                "shop name holds the bidirectional control U+{:04X}, which reorders how it reads",
                u32::from(c)
            ))));
        }
        if s.name.chars().count() > MAX_SHOP_NAME_CHARS {
            return Err(at(ApiError::invalid(
                "shop name longer than 200 characters",
            )));
        }
    }
    for (i, a) in batch.accounts.iter().enumerate() {
        let at = |e: ApiError| at_row(e, "accounts", i, ("id", &a.id));
        key("account id", &a.id).map_err(at)?;
        if a.id == "admin" {
            return Err(at(ApiError::invalid("account id admin is reserved")));
        }
        check_token(&a.token, admin).map_err(at)?;
        if let Some(s) = &a.shop_id {
            key("account shop id", s).map_err(at)?;
        }
        if a.role == Role::Agent && a.shop_id.is_none() {
            return Err(at(ApiError::invalid("an agent account needs a shop_id")));
        }
        // Its scope is every shop, so a shop_id would be stored and never read.
        if matches!(a.role, Role::Platform | Role::SuperAdmin) && a.shop_id.is_some() {
            return Err(at(ApiError::invalid(format!(
                "a {} account sees every shop: leave its shop_id out",
                a.role.as_str()
            ))));
        }
    }
    for (i, c) in batch.cards.iter().enumerate() {
        let at = |e: ApiError| at_row(e, "cards", i, ("iccid", &c.iccid));
        key("iccid", &c.iccid).map_err(at)?;
        key("card shop id", &c.shop_id).map_err(at)?;
    }
    for (i, d) in batch.devices.iter().enumerate() {
        let at = |e: ApiError| at_row(e, "devices", i, ("device_no", &d.device_no));
        key("device_no", &d.device_no).map_err(at)?;
        key("device shop id", &d.shop_id).map_err(at)?;
        if let Some(s) = &d.reported_slot_iccid {
            key("reported slot iccid", s).map_err(at)?;
        }
    }
    for (i, b) in batch.bindings.iter().enumerate() {
        let at = |e: ApiError| at_row(e, "bindings", i, ("iccid", &b.iccid));
        key("binding device_no", &b.device_no).map_err(at)?;
        key("binding iccid", &b.iccid).map_err(at)?;
    }
    // Keys are well-formed from here, so a message may name them. Shops are checked by the store
    // too (it orders them by parent).
    listed_once(
        "shops",
        "shop",
        "id",
        batch.shops.iter().map(|s| s.id.as_str()),
    )?;
    listed_once(
        "accounts",
        "account",
        "id",
        batch.accounts.iter().map(|a| a.id.as_str()),
    )?;
    // Never the token itself in the message.
    if let Some((at, i)) = first_repeat(batch.accounts.iter().map(|a| TokenHash::of(&a.token).0)) {
        return Err(at_row(
            ApiError::invalid(format!(
                "token listed twice (also the token of accounts row {})",
                at + 1
            )),
            "accounts",
            i,
            ("id", &batch.accounts[i].id),
        ));
    }
    listed_once(
        "cards",
        "card",
        "iccid",
        batch.cards.iter().map(|c| c.iccid.as_str()),
    )?;
    listed_once(
        "devices",
        "device",
        "device_no",
        batch.devices.iter().map(|d| d.device_no.as_str()),
    )?;
    // An upsert each: a repeat was counted twice and the last one silently won.
    let pairs = batch.bindings.iter().map(|b| (&b.device_no, &b.iccid));
    if let Some((at, i)) = first_repeat(pairs) {
        let b = &batch.bindings[i];
        return Err(at_row(
            ApiError::invalid(format!(
                "binding of device {} and card {} listed twice (first at row {})",
                b.device_no,
                b.iccid,
                at + 1
            )),
            "bindings",
            i,
            ("iccid", &b.iccid),
        ));
    }
    // A card is actively bound to one device at most: two active bindings of one card are the
    // file's mistake, not a conflict with what is stored.
    let active: Vec<(usize, &str)> = batch
        .bindings
        .iter()
        .enumerate()
        .filter(|(_, b)| b.active)
        .map(|(i, b)| (i, b.iccid.as_str()))
        .collect();
    if let Some((at, i)) = first_repeat(active.iter().map(|(_, iccid)| *iccid)) {
        let (first, row) = (active[at].0, active[i].0);
        let b = &batch.bindings[row];
        return Err(at_row(
            ApiError::invalid(format!(
                "card {} has two active bindings (first at row {}, device {})",
                b.iccid,
                first + 1,
                batch.bindings[first].device_no
            )),
            "bindings",
            row,
            ("iccid", &b.iccid),
        ));
    }
    Ok(())
}

/// The import's query string.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ImportQuery {
    /// A shop, account, card or device whose key is stored: `refuse` (default, 409) or `skip`
    /// when the stored row has the same values (counted in `skipped`; a row that differs is
    /// still a 409 naming the fields).
    pub existing: Option<ImportExisting>,
}

/// Imports the batch in one transaction (past 10,000 rows, in parts of one transaction each); an
/// existing key refuses the batch or its part (409), unless `?existing=skip` and the stored row
/// is the same.
///
/// Who may import is decided before the query and the body are looked at: a caller who may not
/// import is told so (403), not what is wrong with a request it may not make.
#[utoipa::path(
    post, path = "/api/admin/import", tag = "admin",
    summary = "import shops, accounts, cards, devices, bindings (32 MiB)",
    params(ImportQuery),
    request_body = ImportBatch,
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "a shop, card or device a row names is neither in the import nor stored (1005, 7006)", body = crate::http::envelope::ErrorEnvelope),
        (status = 409, description = "a key or token is already stored (1006)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn import(
    State(st): State<AppState>,
    _: Allowed<rule::ManageAccounts>,
    query: Result<Query<ImportQuery>, ApiError>,
    body: Result<Body<ImportBatch>, ApiError>,
) -> Result<Json<Envelope<ImportCounts>>, ApiError> {
    let (Query(q), Body(batch)) = (query?, body?);
    check(&batch, &st.admin_token_hash)?;
    st.store
        .domain_import_with(&batch, q.existing.unwrap_or_default(), st.clock.now())
        .await
        .map(ok)
        .map_err(|e| ApiError::from_store(e, Some("row")))
}

/// `PUT /api/admin/accounts/{id}/token` body.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// The account's new Bearer token (only its SHA-256 is stored).
    #[schema(schema_with = crate::domain::account::token_schema)]
    pub token: String,
}

/// What a token route did.
#[derive(Debug, serde::Serialize)]
pub struct TokenChanged {
    /// The account.
    pub id: String,
    /// `replaced` or `revoked`.
    pub token: &'static str,
}

/// An account id from a path (the bootstrap `admin` is no stored account: its token is
/// `RAKUTEN_POLL_ADMIN_TOKEN`, changed by restarting with another).
fn account_id(id: &str) -> Result<String, ApiError> {
    let id = key("account id", id)?;
    if id == "admin" {
        return Err(ApiError::invalid(
            "account admin is the bootstrap admin: change RAKUTEN_POLL_ADMIN_TOKEN and restart",
        ));
    }
    Ok(id)
}

/// `PUT /api/admin/accounts/{id}/token` (super_admin): the account signs in with this token from
/// now on, its old token is refused, and the console sessions the old one opened end; a revoked
/// account is given back a token this way (D-access-account-tokens).
#[utoipa::path(
    put, path = "/api/admin/accounts/{id}/token", tag = "admin",
    summary = "replace an imported account's token: the old one signs nothing in any more and the console sessions it opened end; gives a revoked account a token again (super_admin)",
    params(("id" = crate::http::schema::AccountId, Path)),
    request_body = NewToken,
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "unknown account (1005)", body = crate::http::envelope::ErrorEnvelope),
        (status = 409, description = "the token is another account's (1006)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn replace_token(
    State(st): State<AppState>,
    Allowed { account: who, .. }: Allowed<rule::ManageAccounts>,
    Path(id): Path<String>,
    Body(b): Body<NewToken>,
) -> Result<Json<Envelope<TokenChanged>>, ApiError> {
    let id = account_id(&id)?;
    check_token(&b.token, &st.admin_token_hash)?;
    st.store
        .account_set_token(&id, &TokenHash::of(&b.token), st.clock.now())
        .await
        .map_err(|e| ApiError::from_store(e, Some("account")))?;
    tracing::info!(account = %id, by = %who.id, "account token replaced");
    Ok(ok(TokenChanged {
        id,
        token: "replaced",
    }))
}

/// `DELETE /api/admin/accounts/{id}/token` (super_admin): the account's token signs nothing in any
/// more and the console sessions it opened end; the account stays (its id names it in the audit
/// trail). Revoking a revoked account changes nothing (D-access-account-tokens).
#[utoipa::path(
    delete, path = "/api/admin/accounts/{id}/token", tag = "admin",
    summary = "revoke an imported account's token: it signs nothing in any more and the console sessions it opened end (super_admin)",
    params(("id" = crate::http::schema::AccountId, Path)),
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "unknown account (1005)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn revoke_token(
    State(st): State<AppState>,
    Allowed { account: who, .. }: Allowed<rule::ManageAccounts>,
    Path(id): Path<String>,
) -> Result<Json<Envelope<TokenChanged>>, ApiError> {
    let id = account_id(&id)?;
    st.store
        .account_revoke(&id, st.clock.now())
        .await
        .map_err(|e| ApiError::from_store(e, Some("account")))?;
    tracing::info!(account = %id, by = %who.id, "account token revoked");
    Ok(ok(TokenChanged {
        id,
        token: "revoked",
    }))
}
