//! Priority items: list and detail (scoped, paginated), manual enqueue, close and retrigger.
//! Each route's rule is `domain::access::authorize`'s (the console asks the same); enterprise
//! accounts are refused (403); an item out of scope answers exactly like a missing one.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use rakuten_edge::query_guard::unknown_value;
use rakuten_types::{Envelope, Timestamp};

use super::key;
use crate::domain::{AssetRef, AssetType, TaskTypes};
use crate::http::auth::{Allowed, rule};
use crate::http::error::ApiError;
use crate::http::extract::{Json as Body, Path, Query};
use crate::http::ok;
use crate::priority::canonical_id;
use crate::priority::item_status::ItemStatus;
use crate::priority::{TriggerType, manual};
use crate::state::AppState;
use crate::store::{EnqueuedItem, ExceptionCondition, ItemDetail, ItemFilter, ItemView};

/// Default page size.
pub const DEFAULT_LIMIT: i64 = 50;
/// Largest page size.
pub const MAX_LIMIT: i64 = 200;

/// List query parameters.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Status.
    #[param(schema_with = status_param)]
    pub status: Option<String>,
    /// Task type: a configured one (`GET /api/task-types`); any other is a 422 (1003), as in
    /// the manual enqueue.
    #[param(value_type = Option<crate::http::schema::TaskTypeName>)]
    pub task_type: Option<String>,
    /// Trigger type that created the item.
    #[param(schema_with = trigger_type_param)]
    pub trigger_type: Option<String>,
    /// ICCID.
    #[param(schema_with = crate::domain::key::key_schema)]
    pub iccid: Option<String>,
    /// Enqueued at or after (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    pub enqueued_from: Option<String>,
    /// Enqueued before (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    pub enqueued_to: Option<String>,
    /// Exceptions-and-retries view: comma list of `failed`, `expired`, `attempts_at_max`,
    /// `has_failure_reason`, or `any` for all four (an item matching any of them is listed).
    #[param(schema_with = exception_param)]
    pub exception: Option<String>,
    /// Keyset cursor: only items with a smaller id (use the last id of the previous page); 1 or
    /// more.
    #[param(minimum = 1)]
    pub before_id: Option<i64>,
    /// Page size, a whole number from 1 to 200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<i64>,
}

fn status_param() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(ItemStatus::ALL.map(ItemStatus::as_str)))
        .build()
}

fn trigger_type_param() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(TriggerType::ALL.map(TriggerType::as_str)))
        .build()
}

fn exception_param() -> utoipa::openapi::schema::Object {
    crate::http::schema::comma_list(
        &EXCEPTION_CONDITIONS,
        "a comma list of `any`, `failed`, `expired`, `attempts_at_max`, `has_failure_reason`",
    )
}

/// A page of items.
#[derive(Debug, Serialize)]
pub struct Page {
    /// Items, newest first.
    pub items: Vec<ItemView>,
    /// Cursor for the next page (`before_id`), absent on the last page.
    pub next_before_id: Option<i64>,
}

fn parse_time(what: &str, s: &Option<String>) -> Result<Option<Timestamp>, ApiError> {
    s.as_deref()
        .map(|s| {
            Timestamp::parse(s)
                .map_err(|_| ApiError::invalid(format!("{what}: not an RFC 3339 time")))
        })
        .transpose()
}

/// The values of `?exception=` (a comma list of them).
const EXCEPTION_CONDITIONS: [&str; 5] = [
    "any",
    "failed",
    "expired",
    "attempts_at_max",
    "has_failure_reason",
];

fn filter(q: &ListQuery, task_types: &TaskTypes) -> Result<ItemFilter, ApiError> {
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    // Plain words, not Rust's range syntax (D-query-refusal-wording).
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "limit must be a whole number from 1 to {MAX_LIMIT}"
        )));
    }
    // The cursor is an item id (D-item-ids-and-list-filters): below 1 it could only ever answer empty pages.
    if q.before_id.is_some_and(|id| id < 1) {
        return Err(ApiError::invalid(
            "before_id must be an item id (1 or more): the last id of the previous page",
        ));
    }
    let status = q
        .status
        .as_deref()
        .map(|s| {
            ItemStatus::parse(s).ok_or_else(|| {
                let allowed = ItemStatus::ALL.map(ItemStatus::as_str);
                ApiError::invalid(unknown_value("status", s, &allowed))
            })
        })
        .transpose()?;
    let trigger_type = q
        .trigger_type
        .as_deref()
        .map(|s| {
            TriggerType::parse(s).ok_or_else(|| {
                let allowed = TriggerType::ALL.map(TriggerType::as_str);
                ApiError::invalid(unknown_value("trigger_type", s, &allowed))
            })
        })
        .transpose()?;
    // A task type this instance does not run is a typo, refused as the enqueue refuses it
    // (D-item-ids-and-list-filters), never an empty page that reads as "nothing there".
    let task_type = q
        .task_type
        .as_deref()
        .map(|s| {
            let s = key("task_type", s)?;
            match task_types.get(&s) {
                Some(_) => Ok(s),
                None => Err(ApiError::invalid(format!("unknown task type {s:?}"))),
            }
        })
        .transpose()?;
    let iccid = q.iccid.as_deref().map(|s| key("iccid", s)).transpose()?;
    let mut exceptions = Vec::new();
    if let Some(ex) = &q.exception {
        for part in ex.split(',').map(str::trim) {
            match part {
                "any" => exceptions.extend([
                    ExceptionCondition::Failed,
                    ExceptionCondition::Expired,
                    ExceptionCondition::AttemptsAtMax,
                    ExceptionCondition::HasFailureReason,
                ]),
                "failed" => exceptions.push(ExceptionCondition::Failed),
                "expired" => exceptions.push(ExceptionCondition::Expired),
                "attempts_at_max" => exceptions.push(ExceptionCondition::AttemptsAtMax),
                "has_failure_reason" => exceptions.push(ExceptionCondition::HasFailureReason),
                _ => {
                    return Err(ApiError::invalid(unknown_value(
                        "exception",
                        part,
                        &EXCEPTION_CONDITIONS,
                    )));
                }
            }
        }
    }
    Ok(ItemFilter {
        status,
        task_type,
        trigger_type,
        iccid,
        enqueued_from: parse_time("enqueued_from", &q.enqueued_from)?,
        enqueued_to: parse_time("enqueued_to", &q.enqueued_to)?,
        exceptions,
        before_id: q.before_id,
        limit,
        ..ItemFilter::default()
    })
}

/// `GET /api/priority-items`.
#[utoipa::path(
    get, path = "/api/priority-items", tag = "priority items",
    summary = "list (scoped to the caller's shops)",
    params(ListQuery),
    responses((status = 200, description = "ok", body = crate::http::envelope::Envelope)),
    security(("bearer" = []))
)]
pub async fn list(
    State(st): State<AppState>,
    Allowed { scope, .. }: Allowed<rule::ReadItems>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Envelope<Page>>, ApiError> {
    let f = filter(&q, &st.task_types)?;
    let items = st
        .store
        .item_list(&scope, &f)
        .await
        .map_err(|e| ApiError::from_store(e, None))?;
    let next_before_id = (items.len() as i64 == f.limit)
        .then(|| items.last().map(|i| i.id))
        .flatten();
    Ok(ok(Page {
        items,
        next_before_id,
    }))
}

/// An item id from a path: a positive integer in canonical decimal ([`canonical_id`]: no sign, no
/// leading zero), else 422 (D-item-ids-and-list-filters; a well-formed id that is missing or out of
/// scope is the one 404 of [`ApiError::item_not_found`]).
fn item_id(s: &str) -> Result<i64, ApiError> {
    canonical_id(s).ok_or_else(|| {
        ApiError::invalid(
            "an item id is a positive integer in decimal (at most 9223372036854775807), without sign or leading zeros",
        )
    })
}

/// `GET /api/priority-items/{id}`: the item, its audit facts and its interaction log rows.
#[utoipa::path(
    get, path = "/api/priority-items/{id}", tag = "priority items", summary = "detail",
    params(("id" = crate::http::schema::ItemId, Path)),
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "not found or out of scope (7001)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn detail(
    State(st): State<AppState>,
    Allowed { scope, .. }: Allowed<rule::ReadItems>,
    Path(id): Path<String>,
) -> Result<Json<Envelope<ItemDetail>>, ApiError> {
    let id = item_id(&id)?;
    st.store
        .item_get(&scope, id)
        .await
        .map_err(|e| ApiError::from_store(e, None))?
        .map(ok)
        .ok_or_else(ApiError::item_not_found)
}

/// Manual enqueue body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnqueueBody {
    /// `card` or `device`.
    pub asset_type: AssetType,
    /// ICCID for a card, device number for a device.
    #[schema(schema_with = crate::domain::key::key_schema)]
    pub asset_id: String,
    /// Task types, 1–32 names; absent or `null`: every configured one. An empty list is a 422 (it
    /// would otherwise read as "nothing" and silently mean "everything").
    #[schema(value_type = Option<Vec<crate::http::schema::TaskTypeName>>, min_items = 1, max_items = 32)]
    pub task_types: Option<Vec<String>>,
    /// Required reason (the spec asks for one; an absent one is a 422).
    #[schema(schema_with = crate::http::schema::reason, required = true)]
    pub reason: Option<String>,
    /// Optional idempotency key: the same key again is a replay and adds nothing.
    #[schema(schema_with = crate::domain::key::key_or_null_schema)]
    pub event_id: Option<String>,
}

impl EnqueueBody {
    /// The asset the body names.
    pub fn asset(&self) -> AssetRef {
        AssetRef {
            asset_type: self.asset_type,
            asset_id: self.asset_id.clone(),
        }
    }
}

/// Enqueue answer.
#[derive(Debug, Serialize)]
pub struct Enqueued {
    /// One entry per card and task type.
    pub items: Vec<EnqueuedItem>,
}

/// `POST /api/priority-items`: manual enqueue (merges; no daily quota, no 24 h dedupe).
#[utoipa::path(
    post, path = "/api/priority-items", tag = "priority items", summary = "manual enqueue",
    request_body = EnqueueBody,
    // No 429: a manual enqueue is never refused for the manual trigger's quota.
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "unknown or out-of-scope card or device (7006)", body = crate::http::envelope::ErrorEnvelope),
        (status = 409, description = "conflicting state (1006, 7002, 7003, 7005)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn enqueue(
    State(st): State<AppState>,
    Allowed { account: who, .. }: Allowed<rule::Enqueue>,
    Body(b): Body<EnqueueBody>,
) -> Result<Json<Envelope<Enqueued>>, ApiError> {
    key("asset_id", &b.asset_id)?;
    let asset = b.asset();
    let task_types = super::task_type_list(b.task_types)?;
    let event_id = b
        .event_id
        .as_deref()
        .map(|e| key("event_id", e))
        .transpose()?;
    let items = manual::enqueue(
        st.store.as_ref(),
        &st.task_types,
        &who,
        manual::ManualRequest {
            asset: &asset,
            task_types: &task_types,
            reason: b.reason.as_deref(),
            event_id: event_id.as_deref(),
        },
        st.clock.now(),
    )
    .await
    .map_err(|e| match e {
        manual::ManualError::Store(crate::store::StoreError::NotFound) => {
            ApiError::asset_not_found("asset")
        }
        other => other.into(),
    })?;
    st.hints.push_items(&items).await;
    Ok(ok(Enqueued { items }))
}

/// Close and retrigger body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReasonBody {
    /// Required reason.
    #[schema(schema_with = crate::http::schema::reason, required = true)]
    pub reason: Option<String>,
}

/// Close answer.
#[derive(Debug, Serialize)]
pub struct Closed {
    /// The closed item.
    pub id: i64,
    /// Its status (`closed`).
    pub status: ItemStatus,
}

/// `POST /api/priority-items/{id}/close`.
#[utoipa::path(
    post, path = "/api/priority-items/{id}/close", tag = "priority items", summary = "close",
    params(("id" = crate::http::schema::ItemId, Path)),
    request_body = ReasonBody,
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "not found or out of scope (7001)", body = crate::http::envelope::ErrorEnvelope),
        (status = 409, description = "the item's status does not allow it (7002)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn close(
    State(st): State<AppState>,
    Allowed { account: who, .. }: Allowed<rule::Close>,
    Path(id): Path<String>,
    Body(b): Body<ReasonBody>,
) -> Result<Json<Envelope<Closed>>, ApiError> {
    let id = item_id(&id)?;
    manual::close(
        st.store.as_ref(),
        &who,
        id,
        b.reason.as_deref(),
        st.clock.now(),
    )
    .await?;
    Ok(ok(Closed {
        id,
        status: ItemStatus::Closed,
    }))
}

/// `POST /api/priority-items/{id}/retrigger`.
#[utoipa::path(
    post, path = "/api/priority-items/{id}/retrigger", tag = "priority items",
    summary = "retrigger a failed or expired item",
    params(("id" = crate::http::schema::ItemId, Path)),
    request_body = ReasonBody,
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
        (status = 404, description = "not found or out of scope (7001)", body = crate::http::envelope::ErrorEnvelope),
        (status = 409, description = "the item's status does not allow it (7002)", body = crate::http::envelope::ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn retrigger(
    State(st): State<AppState>,
    Allowed { account: who, .. }: Allowed<rule::Enqueue>,
    Path(id): Path<String>,
    Body(b): Body<ReasonBody>,
) -> Result<Json<Envelope<EnqueuedItem>>, ApiError> {
    let id = item_id(&id)?;
    let item = manual::retrigger(
        st.store.as_ref(),
        &st.task_types,
        &who,
        id,
        b.reason.as_deref(),
        st.clock.now(),
    )
    .await?;
    st.hints.push_items(std::slice::from_ref(&item)).await;
    Ok(ok(item))
}
