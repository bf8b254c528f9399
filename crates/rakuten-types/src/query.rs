//! The account read-only query channel (spec §11): its status machine and bodies.
//!
//! Its safety semantics are the opposite of order tasks: a query is a read, so redelivery after a
//! lapsed lease is safe and automatic. The comparison of both channels sits at the top of the
//! gateway's `query_queue` module.
//!
//! ```text
//! queued ──Lease──> leased ──Succeed──> succeeded
//!    ▲                │  └───Fail────> failed
//!    └──LeaseLapsed───┘ (attempts left; none left → failed)
//! queued | leased ──TtlExpire──> expired
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{OrderState, QueryId, Timestamp, WorkerId};

/// Highest `max_pages` of an `order_list` query (§11.2).
pub const MAX_PAGES_LIMIT: u32 = 20;
/// Largest accepted `params`, serialized, in bytes.
pub const MAX_PARAMS_BYTES: usize = 16 * 1024;

/// Status of an account query (§11.1).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum QueryStatus {
    /// Waiting for a worker.
    Queued,
    /// A worker is reading.
    Leased,
    /// Terminal: result stored.
    Succeeded,
    /// Terminal: the read failed or attempts ran out.
    Failed,
    /// Terminal: older than the query TTL; never leased again.
    Expired,
}

/// What happens to a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryEvent {
    /// A worker's long-poll takes it.
    Lease,
    /// The lease lapsed; `attempts_left` says whether another lease is allowed.
    LeaseLapsed {
        /// Whether attempts remain.
        attempts_left: bool,
    },
    /// A success result from the holder.
    Succeed,
    /// A failure result from the holder.
    Fail,
    /// Older than the query TTL.
    TtlExpire,
}

/// A transition the query state machine does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("query in status {from} cannot take event {event:?}")]
pub struct InvalidQueryTransition {
    /// The status the query was in.
    pub from: QueryStatus,
    /// The event refused.
    pub event: QueryEvent,
}

impl QueryStatus {
    /// Every status.
    pub const ALL: [QueryStatus; 5] = [
        QueryStatus::Queued,
        QueryStatus::Leased,
        QueryStatus::Succeeded,
        QueryStatus::Failed,
        QueryStatus::Expired,
    ];

    /// The single transition function of the query state machine.
    ///
    /// # Errors
    /// [`InvalidQueryTransition`] for every pair the module diagram does not draw.
    pub fn transition(self, event: QueryEvent) -> Result<QueryStatus, InvalidQueryTransition> {
        use QueryEvent as E;
        use QueryStatus as S;
        Ok(match (self, event) {
            (S::Queued, E::Lease) => S::Leased,
            (
                S::Leased,
                E::LeaseLapsed {
                    attempts_left: true,
                },
            ) => S::Queued,
            (
                S::Leased,
                E::LeaseLapsed {
                    attempts_left: false,
                },
            ) => S::Failed,
            (S::Leased, E::Succeed) => S::Succeeded,
            (S::Leased, E::Fail) => S::Failed,
            (S::Queued | S::Leased, E::TtlExpire) => S::Expired,
            (from, event) => return Err(InvalidQueryTransition { from, event }),
        })
    }

    /// `succeeded`, `failed` or `expired`.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            QueryStatus::Succeeded | QueryStatus::Failed | QueryStatus::Expired
        )
    }

    /// The wire and storage name.
    pub const fn as_str(self) -> &'static str {
        match self {
            QueryStatus::Queued => "queued",
            QueryStatus::Leased => "leased",
            QueryStatus::Succeeded => "succeeded",
            QueryStatus::Failed => "failed",
            QueryStatus::Expired => "expired",
        }
    }
}

impl fmt::Display for QueryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for QueryStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown query status {:?}",
                    s.chars().take(64).collect::<String>()
                )
            })
    }
}

/// The kind of read (§11.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueryKind {
    /// The account's order list, paged back to `since`.
    OrderList,
    /// One order's detail page.
    OrderDetail,
}

impl QueryKind {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            QueryKind::OrderList => "order_list",
            QueryKind::OrderDetail => "order_detail",
        }
    }
}

impl FromStr for QueryKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "order_list" => Ok(QueryKind::OrderList),
            "order_detail" => Ok(QueryKind::OrderDetail),
            _ => Err(format!(
                "unknown kind {:?}; expected order_list or order_detail",
                s.chars().take(64).collect::<String>()
            )),
        }
    }
}

/// `POST /api/account/queries` body (§11.2).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitQuery {
    /// Idempotency key; generated when absent.
    #[serde(default)]
    pub query_id: Option<QueryId>,
    /// Must be `rakuten`.
    #[schema(schema_with = crate::schema::site)]
    pub site: String,
    /// `order_list` or `order_detail` (checked at submit: 422 otherwise).
    #[schema(value_type = QueryKind)]
    pub kind: String,
    /// `order_list`: `{since?, max_pages? (1..20)}`; `order_detail`: `{order_number}`; absent or
    /// `null` is `{}`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub params: Value,
}

/// `POST /api/account/queries` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SubmitQueryAck {
    /// The query's id.
    pub query_id: QueryId,
    /// Its status now.
    pub status: QueryStatus,
    /// `false` when the id existed already.
    pub created: bool,
}

/// A query lease handed to a worker by `GET /api/account/queries/lease`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct QueryGrant {
    /// The query.
    pub query_id: QueryId,
    /// Site.
    pub site: String,
    /// Kind.
    pub kind: QueryKind,
    /// Params as submitted.
    #[schema(value_type = Object)]
    pub params: Value,
    /// 1 on the first lease, +1 on each redelivery.
    pub attempt: i64,
    /// Lease expiry.
    pub lease_expires_at: Timestamp,
    /// Fencing token of this lease.
    pub lease_token: String,
}

/// `POST /api/account/queries/{id}/result` body (§11.2).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryResultBody {
    /// The holder (required).
    #[serde(default)]
    #[schema(value_type = WorkerId, required = true)]
    pub worker_id: Option<WorkerId>,
    /// The lease's fencing token (optional).
    #[serde(default)]
    #[schema(schema_with = crate::schema::lease_token_or_null)]
    pub lease_token: Option<String>,
    /// Whether the read succeeded.
    pub success: bool,
    /// The result ([`OrderListResult`] or [`OrderDetailResult`]) on success.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub result: Option<Value>,
    /// Site error code on failure (5001 login lost, …), passed through unchanged.
    #[serde(default, deserialize_with = "crate::whole::option")]
    pub error_code: Option<i32>,
    /// Error text on failure: at most 4,096 characters, line breaks and tabs allowed.
    #[serde(default)]
    #[schema(schema_with = error_message)]
    pub error_message: Option<String>,
}

/// `error_message` of a query result (the gateway's `MAX_ERROR_MESSAGE_CHARS`).
fn error_message() -> utoipa::openapi::schema::Object {
    crate::schema::text_or_null(4096)
}

/// `GET /api/account/queries/{id}` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct QueryView {
    /// Id.
    pub query_id: QueryId,
    /// Site.
    pub site: String,
    /// Kind.
    pub kind: QueryKind,
    /// Params.
    #[schema(value_type = Object)]
    pub params: Value,
    /// Status.
    pub status: QueryStatus,
    /// Leases so far.
    pub attempt: i64,
    /// Most leases allowed.
    pub max_attempts: i64,
    /// Current or last holder.
    pub lease_owner: Option<String>,
    /// Current lease expiry.
    pub lease_expires_at: Option<Timestamp>,
    /// The result, on success.
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    /// `true` when raw pages were dropped to fit `RAKUTEN_QUERY_RESULT_MAX_BYTES`.
    pub raw_omitted: bool,
    /// Error code on failure.
    pub error_code: Option<i32>,
    /// Error text on failure.
    pub error_message: Option<String>,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// When it became terminal.
    pub finished_at: Option<Timestamp>,
}

/// One order in an `order_list` result (normalized fields, §11.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OrderSummary {
    /// Site order number.
    pub order_number: String,
    /// Order date as the site gives it (RFC 3339).
    pub order_date: String,
    /// Shop id.
    #[serde(deserialize_with = "crate::whole::deserialize")]
    pub shop_id: i64,
    /// Shop name.
    pub shop_name: String,
    /// Items.
    pub items: Vec<OrderItem>,
}

/// An item of an [`OrderSummary`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OrderItem {
    /// Item id.
    #[serde(deserialize_with = "crate::whole::deserialize")]
    pub item_id: i64,
    /// Item name.
    pub item_name: String,
    /// Item URL.
    pub item_url: String,
}

/// `kind=order_list` result (§11.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OrderListResult {
    /// Always `order_list`.
    pub kind: QueryKind,
    /// Lower bound asked for.
    pub since: Option<Timestamp>,
    /// Page limit used.
    #[serde(deserialize_with = "crate::whole::deserialize")]
    pub max_pages: u32,
    /// `true` only when paging reached `since` or the end of the list.
    pub window_fully_covered: bool,
    /// Normalized orders.
    pub orders: Vec<OrderSummary>,
    /// The site's raw page states, in page order.
    #[schema(value_type = Vec<Object>)]
    pub raw_pages: Vec<Value>,
    /// Why paging stopped before covering the window, as a site error code (5001 login lost on a
    /// later page, 5002 page changed); `None` when it was not stopped by a site error.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::whole::option"
    )]
    pub stop_code: Option<i32>,
    /// Text for `stop_code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// `true` when `raw_pages` were dropped to fit the result size limit.
    #[serde(default)]
    pub raw_omitted: bool,
}

/// `kind=order_detail` result (§11.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OrderDetailResult {
    /// Always `order_detail`.
    pub kind: QueryKind,
    /// The order number asked for.
    pub order_number: String,
    /// `false` is not an error: the site takes ~10 minutes to show new orders.
    pub found: bool,
    /// The site's stage label.
    pub stage_label: Option<String>,
    /// Mapped state, `null` when the label maps to none.
    pub order_state: Option<OrderState>,
    /// The page's raw state.
    #[schema(value_type = Option<Object>)]
    pub raw: Option<Value>,
    /// Whether `raw` could be read.
    pub raw_available: bool,
    /// `true` when `raw` was dropped to fit the result size limit.
    #[serde(default)]
    pub raw_omitted: bool,
}

/// `POST /api/account/queries/{id}/result` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct QueryResultAck {
    /// The query.
    pub query_id: QueryId,
    /// Its status now: `succeeded`, or `failed` (a failure result, or a success whose result
    /// stayed over `RAKUTEN_QUERY_RESULT_MAX_BYTES` even without its raw pages).
    pub status: QueryStatus,
    /// `true` when the raw pages were dropped to fit the size limit.
    pub raw_omitted: bool,
    /// `true` when this was an identical repeat of the result already recorded for the same
    /// lease (a retry after a lost answer); nothing changed.
    pub duplicate: bool,
    /// Error code stored, when the query failed.
    pub error_code: Option<i32>,
    /// Error text stored, when the query failed.
    pub error_message: Option<String>,
}

/// One query in `GET /api/account/queries` (no result body: fetch one query for that).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct QuerySummary {
    /// Id.
    pub query_id: QueryId,
    /// Site.
    pub site: String,
    /// Kind.
    pub kind: QueryKind,
    /// Params.
    #[schema(value_type = Object)]
    pub params: Value,
    /// Status.
    pub status: QueryStatus,
    /// Leases so far.
    pub attempt: i64,
    /// Most leases allowed.
    pub max_attempts: i64,
    /// Current or last holder.
    pub lease_owner: Option<String>,
    /// Current lease expiry.
    pub lease_expires_at: Option<Timestamp>,
    /// `true` when raw pages were dropped.
    pub raw_omitted: bool,
    /// Error code on failure.
    pub error_code: Option<i32>,
    /// Error text on failure.
    pub error_message: Option<String>,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// When it became terminal.
    pub finished_at: Option<Timestamp>,
}
