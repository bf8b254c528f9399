//! `POST /api/manual-triggers`: the ordinary manual trigger ("poll this card now"), with its
//! daily quota per operator (429, code 7004, `Retry-After` until 00:00 UTC) and 24 h dedupe per
//! card and task type (409, code 7005). Every request, accepted or refused, is recorded in
//! `manual_triggers`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use rakuten_types::Envelope;

use super::key;
use crate::http::auth::{Allowed, rule};
use crate::http::error::{ApiError, PollCode};
use crate::http::extract::Json as Body;
use crate::http::ok;
use crate::manual_trigger;
use crate::priority::manual::ManualError;
use crate::state::AppState;
use crate::store::{ManualTriggerOutcome, StoreError};

/// Request body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerBody {
    /// Card.
    #[schema(schema_with = crate::domain::key::key_schema)]
    pub iccid: String,
    /// Task types, 1–32 names; absent or `null`: every configured one (an empty list is a 422).
    #[schema(value_type = Option<Vec<crate::http::schema::TaskTypeName>>, min_items = 1, max_items = 32)]
    pub task_types: Option<Vec<String>>,
}

/// Queues an immediate ordinary poll of a card.
#[utoipa::path(
    post, path = "/api/manual-triggers", tag = "manual triggers",
    summary = "ordinary manual trigger (quota, 24 h dedupe)",
    request_body = TriggerBody,
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "unknown or out-of-scope card or device (7006)", body = crate::http::envelope::ErrorEnvelope),
        (status = 409, description = "conflicting state (1006, 7002, 7003, 7005)", body = crate::http::envelope::ErrorEnvelope),
        (status = 429, description = "daily quota used up (7004); `Retry-After`: seconds until it resets at 00:00 UTC", body = crate::http::envelope::ErrorEnvelope,
            headers(("Retry-After" = u64, description = "seconds until the daily quota resets (00:00 UTC)"))),
    ),
    security(("bearer" = []))
)]
pub async fn create(
    State(st): State<AppState>,
    Allowed { account: who, .. }: Allowed<rule::Enqueue>,
    Body(b): Body<TriggerBody>,
) -> Result<Json<Envelope<ManualTriggerOutcome>>, ApiError> {
    let iccid = key("iccid", &b.iccid)?;
    let task_types = super::task_type_list(b.task_types)?;
    let now = st.clock.now();
    let out = manual_trigger::request(
        st.store.as_ref(),
        &st.hints,
        &st.task_types,
        &who,
        &iccid,
        &task_types,
        st.manual_daily_quota,
        now,
    )
    .await
    .map_err(|e| match e {
        ManualError::Store(StoreError::NotFound) => ApiError::asset_not_found("card"),
        other => other.into(),
    })?;
    match out {
        // `Retry-After`: the seconds until the quota resets (D-ordinary-manual-trigger), so a client backs
        // off until then instead of retrying a request that cannot pass today.
        ManualTriggerOutcome::QuotaExceeded { used, quota } => Err(ApiError::poll(
            StatusCode::TOO_MANY_REQUESTS,
            PollCode::ManualQuotaExceeded,
            format!(
                "daily manual trigger quota used up ({used} of {quota}); it resets at 00:00 UTC"
            ),
        )
        .with_retry_after(manual_trigger::seconds_until_quota_resets(now))),
        ManualTriggerOutcome::Duplicate { task_types } => Err(ApiError::poll(
            StatusCode::CONFLICT,
            PollCode::ManualDuplicate,
            format!(
                "already triggered within 24 h for {}",
                task_types.join(", ")
            ),
        )),
        queued => Ok(ok(queued)),
    }
}
