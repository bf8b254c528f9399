//! Switches and changes of cards, devices and bindings (super_admin and platform).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use rakuten_types::Envelope;

use super::key;
use crate::domain::asset::BindingRow;
use crate::http::auth::{Allowed, rule};
use crate::http::error::ApiError;
use crate::http::extract::{Json as Body, Path};
use crate::http::ok;
use crate::state::AppState;

/// A switch body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Switch {
    /// On or off.
    pub enabled: bool,
}

/// A lock body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// Held or released.
    pub locked: bool,
}

/// A reported slot body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Slot {
    /// The ICCID the device reports in its current slot; absent or `null`: none.
    #[schema(schema_with = crate::domain::key::key_or_null_schema)]
    pub iccid: Option<String>,
}

/// Empty success data.
#[derive(Debug, Serialize)]
pub struct Done {
    /// Always true.
    pub done: bool,
}

type Answer = Result<Json<Envelope<Done>>, ApiError>;

fn done(r: Result<(), crate::store::StoreError>, what: &str) -> Answer {
    r.map(|()| ok(Done { done: true }))
        .map_err(|e| ApiError::from_store(e, Some(what)))
}

/// `PUT /api/cards/{iccid}/polling`.
#[utoipa::path(
    put, path = "/api/cards/{iccid}/polling", tag = "assets",
    summary = "card polling switch",
    params(("iccid" = crate::http::schema::Key, Path)),
    request_body = Switch,
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "unknown card or device (7006)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn card_polling(
    State(st): State<AppState>,
    _: Allowed<rule::Administer>,
    Path(iccid): Path<String>,
    Body(b): Body<Switch>,
) -> Answer {
    let iccid = key("iccid", &iccid)?;
    done(st.store.card_set_polling(&iccid, b.enabled).await, "card")
}

/// `PUT /api/cards/{iccid}/stop-lock`.
#[utoipa::path(
    put, path = "/api/cards/{iccid}/stop-lock", tag = "assets",
    summary = "carrier stop lock",
    params(("iccid" = crate::http::schema::Key, Path)),
    request_body = Lock,
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "unknown card or device (7006)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn card_stop_lock(
    State(st): State<AppState>,
    _: Allowed<rule::Administer>,
    Path(iccid): Path<String>,
    Body(b): Body<Lock>,
) -> Answer {
    let iccid = key("iccid", &iccid)?;
    done(st.store.card_set_stop_lock(&iccid, b.locked).await, "card")
}

/// `DELETE /api/cards/{iccid}`: removes the card and its bindings; its items stay.
#[utoipa::path(
    delete, path = "/api/cards/{iccid}", tag = "assets",
    summary = "delete a card",
    params(("iccid" = crate::http::schema::Key, Path)),
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "unknown card or device (7006)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn card_delete(
    State(st): State<AppState>,
    _: Allowed<rule::Administer>,
    Path(iccid): Path<String>,
) -> Answer {
    let iccid = key("iccid", &iccid)?;
    done(st.store.card_delete(&iccid).await, "card")
}

/// `PUT /api/devices/{device_no}/polling`.
#[utoipa::path(
    put, path = "/api/devices/{device_no}/polling", tag = "assets",
    summary = "device polling switch",
    params(("device_no" = crate::http::schema::Key, Path)),
    request_body = Switch,
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "unknown card or device (7006)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn device_polling(
    State(st): State<AppState>,
    _: Allowed<rule::Administer>,
    Path(device_no): Path<String>,
    Body(b): Body<Switch>,
) -> Answer {
    let d = key("device_no", &device_no)?;
    done(st.store.device_set_polling(&d, b.enabled).await, "device")
}

/// `PUT /api/devices/{device_no}/reported-slot`.
#[utoipa::path(
    put, path = "/api/devices/{device_no}/reported-slot", tag = "assets",
    summary = "the slot the device reports",
    params(("device_no" = crate::http::schema::Key, Path)),
    request_body = Slot,
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "unknown card or device (7006)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn device_reported_slot(
    State(st): State<AppState>,
    _: Allowed<rule::Administer>,
    Path(device_no): Path<String>,
    Body(b): Body<Slot>,
) -> Answer {
    let d = key("device_no", &device_no)?;
    let slot = b.iccid.as_deref().map(|s| key("iccid", s)).transpose()?;
    done(
        st.store.device_report_slot(&d, slot.as_deref()).await,
        "device",
    )
}

/// `PUT /api/bindings`: creates or changes a binding.
#[utoipa::path(
    put, path = "/api/bindings", tag = "assets",
    summary = "bind or unbind a card and a device",
    request_body = BindingRow,
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "unknown card or device (7006)", body = crate::http::envelope::ErrorEnvelope),
        (status = 409, description = "the card is actively bound to another device (1006)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn binding(
    State(st): State<AppState>,
    _: Allowed<rule::Administer>,
    Body(b): Body<BindingRow>,
) -> Answer {
    key("device_no", &b.device_no)?;
    key("iccid", &b.iccid)?;
    done(st.store.binding_upsert(&b).await, "binding")
}
