//! `POST /api/admin/import`: bulk import of shops, accounts, cards, devices and bindings
//! (super_admin only). Bounded: 32 MiB body, 200,000 rows per kind.

use axum::Json;
use axum::extract::State;

use rakuten_types::Envelope;

use super::key;
use crate::domain::Role;
use crate::http::auth::Auth;
use crate::http::error::ApiError;
use crate::http::extract::Json as Body;
use crate::http::{AppState, ok};
use crate::store::{ImportBatch, ImportCounts};

/// Most rows of one kind per import.
pub const MAX_IMPORT_ROWS: usize = 200_000;

fn check(batch: &ImportBatch) -> Result<(), ApiError> {
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
    for s in &batch.shops {
        key("shop id", &s.id)?;
        if let Some(p) = &s.parent_id {
            key("parent shop id", p)?;
        }
        if s.name.chars().count() > 200 {
            return Err(ApiError::invalid("shop name longer than 200 characters"));
        }
    }
    for a in &batch.accounts {
        key("account id", &a.id)?;
        if a.id == "admin" {
            return Err(ApiError::invalid("account id admin is reserved"));
        }
        let n = a.token.chars().count();
        if !(16..=256).contains(&n) || a.token.chars().any(|c| c.is_control() || c == ' ') {
            return Err(ApiError::invalid(format!(
                "account {}: token must be 16-256 characters without spaces",
                a.id
            )));
        }
        if let Some(s) = &a.shop_id {
            key("account shop id", s)?;
        }
        if a.role == Role::Agent && a.shop_id.is_none() {
            return Err(ApiError::invalid(format!(
                "agent account {} needs a shop_id",
                a.id
            )));
        }
    }
    for c in &batch.cards {
        key("iccid", &c.iccid)?;
        key("card shop id", &c.shop_id)?;
    }
    for d in &batch.devices {
        key("device_no", &d.device_no)?;
        key("device shop id", &d.shop_id)?;
        if let Some(s) = &d.reported_slot_iccid {
            key("reported slot iccid", s)?;
        }
    }
    for b in &batch.bindings {
        key("binding device_no", &b.device_no)?;
        key("binding iccid", &b.iccid)?;
    }
    Ok(())
}

/// Imports the batch in one transaction; an existing key refuses the whole batch (409).
pub async fn import(
    State(st): State<AppState>,
    auth: Auth,
    Body(batch): Body<ImportBatch>,
) -> Result<Json<Envelope<ImportCounts>>, ApiError> {
    if auth.0.role != Role::SuperAdmin {
        return Err(ApiError::forbidden());
    }
    check(&batch)?;
    st.store
        .domain_import(&batch, st.clock.now())
        .await
        .map(ok)
        .map_err(|e| ApiError::from_store(e, Some("row")))
}
