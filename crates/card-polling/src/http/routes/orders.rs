//! Package orders, the payment callback, queued package activation and the package poll's
//! verdict (the ordinary package poll runs the same verdict).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use rakuten_types::Envelope;

use super::key;
use crate::domain::{AssetRef, AssetType, PackageKind};
use crate::http::auth::{Allowed, rule};
use crate::http::error::ApiError;
use crate::http::extract::{Json as Body, Path};
use crate::http::ok;
use crate::state::AppState;
use crate::store::{EnqueuedItem, OrderView, PackagePollOutcome, PaymentCallback, PaymentOutcome};

/// `POST /api/orders` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewOrder {
    /// Order id (optional; a UUIDv7 when absent).
    #[serde(default)]
    pub id: Option<String>,
    /// `card` or `device`.
    pub asset_type: AssetType,
    /// ICCID for a card, device number for a device.
    pub asset_id: String,
    /// Main package or add-on.
    pub kind: PackageKind,
}

impl NewOrder {
    /// The asset the body names.
    pub fn asset(&self) -> AssetRef {
        AssetRef {
            asset_type: self.asset_type,
            asset_id: self.asset_id.clone(),
        }
    }
}

/// Creates an unpaid order.
pub async fn create(
    State(st): State<AppState>,
    _: Allowed<rule::Administer>,
    Body(b): Body<NewOrder>,
) -> Result<Json<Envelope<OrderView>>, ApiError> {
    let id = match &b.id {
        Some(id) => key("order id", id)?,
        None => uuid::Uuid::now_v7().to_string(),
    };
    key("asset_id", &b.asset_id)?;
    st.store
        .order_create(&id, &b.asset(), b.kind, st.clock.now())
        .await
        .map(ok)
        .map_err(|e| ApiError::from_store(e, Some("order")))
}

/// The payment callback: idempotent by `payment_id`.
pub async fn payment_callback(
    State(st): State<AppState>,
    _: Allowed<rule::Administer>,
    Body(cb): Body<PaymentCallback>,
) -> Result<Json<Envelope<PaymentOutcome>>, ApiError> {
    key("payment_id", &cb.payment_id)?;
    key("order_id", &cb.order_id)?;
    let out = st
        .store
        .payment_apply(&cb, &st.task_types.names(), st.clock.now())
        .await
        .map_err(|e| ApiError::from_store(e, Some("order")))?;
    st.hints.push_items(&out.items).await;
    Ok(ok(out))
}

/// Answer of a queued package activation.
#[derive(Debug, Serialize)]
pub struct Activated {
    /// Items enqueued or merged (`queue_activated`).
    pub items: Vec<EnqueuedItem>,
}

/// `POST /api/usages/{id}/activate`: pending → active, must hit one row (else 409).
pub async fn activate_queued(
    State(st): State<AppState>,
    _: Allowed<rule::Administer>,
    Path(id): Path<String>,
) -> Result<Json<Envelope<Activated>>, ApiError> {
    let id = key("usage id", &id)?;
    let items = st
        .store
        .usage_activate_queued(&id, &st.task_types.names(), st.clock.now())
        .await
        .map_err(|e| ApiError::from_store(e, Some("usage record")))?;
    st.hints.push_items(&items).await;
    Ok(ok(Activated { items }))
}

/// `POST /api/package-poll` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackagePoll {
    /// `card` or `device`.
    pub asset_type: AssetType,
    /// ICCID for a card, device number for a device.
    pub asset_id: String,
}

impl PackagePoll {
    /// The asset the body names.
    pub fn asset(&self) -> AssetRef {
        AssetRef {
            asset_type: self.asset_type,
            asset_id: self.asset_id.clone(),
        }
    }
}

/// The ordinary package poll's verdict for one asset.
pub async fn package_poll(
    State(st): State<AppState>,
    _: Allowed<rule::Administer>,
    Body(b): Body<PackagePoll>,
) -> Result<Json<Envelope<PackagePollOutcome>>, ApiError> {
    key("asset_id", &b.asset_id)?;
    let out = st
        .store
        .package_poll_asset(&b.asset(), &st.task_types.names(), st.clock.now())
        .await
        .map_err(|e| ApiError::from_store(e, Some("asset")))?;
    st.hints.push_items(&out.items).await;
    Ok(ok(out))
}
