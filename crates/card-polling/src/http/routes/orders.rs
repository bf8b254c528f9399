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
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewOrder {
    /// Order id (optional; a UUIDv7 when absent or `null`).
    #[serde(default)]
    #[schema(schema_with = crate::domain::key::key_or_null_schema)]
    pub id: Option<String>,
    /// `card` or `device`.
    pub asset_type: AssetType,
    /// ICCID for a card, device number for a device.
    #[schema(schema_with = crate::domain::key::key_schema)]
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
#[utoipa::path(
    post, path = "/api/orders", tag = "orders",
    summary = "create an unpaid package order",
    request_body = NewOrder,
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "unknown card or device (7006)", body = crate::http::envelope::ErrorEnvelope),
        (status = 409, description = "the order id is taken (1006)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
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
#[utoipa::path(
    post, path = "/api/payments/callback", tag = "orders",
    summary = "settle an order (idempotent by payment id)",
    request_body = crate::store::PaymentCallback,
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "unknown order (1005)", body = crate::http::envelope::ErrorEnvelope),
        (status = 409, description = "the order is settled otherwise, or the payment id is another order's (1006)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
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
#[utoipa::path(
    post, path = "/api/usages/{id}/activate", tag = "orders",
    summary = "activate a queued main package",
    params(("id" = crate::http::schema::Key, Path)),
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "unknown usage record (1005)", body = crate::http::envelope::ErrorEnvelope),
        (status = 409, description = "the usage record is not pending (1006)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
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
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PackagePoll {
    /// `card` or `device`.
    pub asset_type: AssetType,
    /// ICCID for a card, device number for a device.
    #[schema(schema_with = crate::domain::key::key_schema)]
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
#[utoipa::path(
    post, path = "/api/package-poll", tag = "orders",
    summary = "the ordinary package poll's verdict for an asset",
    request_body = PackagePoll,
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "unknown card or device (7006)", body = crate::http::envelope::ErrorEnvelope),
        (status = 409, description = "conflicting state (1006)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
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
