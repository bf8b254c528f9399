"""The gateway's request and answer shapes (pydantic v2), as its ``/openapi.json`` names them.

Answers are read tolerantly: a field this package does not know is kept (``model_extra``), an
unknown enum value is kept as an unknown member (:mod:`rakuten_gateway.enums`), and a field
only some gateway versions send is optional here. Requests are strict: the gateway refuses a
body with a field it does not know (422), so a request model never sends one.

Each model names the schema it mirrors in ``OPENAPI_SCHEMA``; ``tests/test_openapi_drift.py``
compares them with the schema a real gateway serves.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from .enums import (
    AlertKind,
    AlertState,
    OperatorActionKind,
    OrderState,
    Outcome,
    QueryKind,
    QueryStatus,
    TaskStatus,
)

__all__ = [
    "AlertView",
    "CancelTask",
    "LeaseGrant",
    "OperatorActionAck",
    "OperatorActionView",
    "OrderDetailResult",
    "OrderIntent",
    "OrderItem",
    "OrderListResult",
    "OrderSummary",
    "Page",
    "QuerySummary",
    "QueryView",
    "ReclaimTask",
    "ReportView",
    "ResolveTask",
    "SubmitOrder",
    "SubmitOrderAck",
    "SubmitQuery",
    "SubmitQueryAck",
    "TaskDetail",
    "TaskSummary",
    "WorkerView",
]

T = TypeVar("T")


class Answer(BaseModel):
    """Base of every model read from the gateway: unknown fields are kept, not refused."""

    model_config = ConfigDict(extra="allow", frozen=True)
    OPENAPI_SCHEMA: ClassVar[str | None] = None


class Request(BaseModel):
    """Base of every body sent to the gateway: only fields the gateway names."""

    model_config = ConfigDict(extra="forbid")
    OPENAPI_SCHEMA: ClassVar[str | None] = None


# ---------------------------------------------------------------------------------------------
# Orders


class OrderIntent(Request):
    """An order intent, as the trading worker reads it (the gateway checks the same rules).

    Any other field is passed through to the worker untouched (``options`` and the like), so
    this one model allows extra fields.
    """

    model_config = ConfigDict(extra="allow")

    item_url: str
    quantity: int | None = Field(default=None, ge=1, le=99)
    variant_id: str | None = None
    max_total_yen: int | None = Field(default=None, gt=0)


class SubmitOrder(Request):
    """``POST /api/orders`` body."""

    OPENAPI_SCHEMA = "SubmitOrder"
    task_id: str | None = None
    site: str
    intent: dict[str, Any]
    #: The last instant a worker may lease the task; still queued after it, the task ends
    #: ``expired``. ``None``: no deadline.
    not_after: datetime | None = None


class SubmitOrderAck(Answer):
    """``POST /api/orders`` answer: ``created`` is ``False`` when the id already existed."""

    OPENAPI_SCHEMA = "SubmitOrderAck"
    task_id: str
    status: TaskStatus
    created: bool


class TaskSummary(Answer):
    """A task as ``GET /api/orders`` lists it.

    ``intent`` is optional here: a list page may carry a shorter form of it (the detail route
    keeps it whole); whatever the gateway sends is kept.
    """

    OPENAPI_SCHEMA = "TaskSummary"
    task_id: str
    site: str
    intent: dict[str, Any] | None = None
    status: TaskStatus
    latest_state: OrderState | None = None
    lease_count: int
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    outcome: Outcome | None = None
    set_aside_reason: str | None = None
    created_at: datetime
    updated_at: datetime
    #: The deadline given at submit, if any.
    not_after: datetime | None = None


class ReportView(Answer):
    """One reported order state (the gateway's state mirror)."""

    OPENAPI_SCHEMA = "ReportView"
    state: OrderState
    reported_at: datetime
    worker_id: str | None = None
    operator: str | None = None
    evidence_ref: str | None = None
    payable_yen: int | None = None
    site_order_id: str | None = None
    pay_deadline: datetime | None = None
    error_code: int | None = None
    detail: str | None = None


class OperatorActionView(Answer):
    """One audited operator action: who, what, when, why, before and after."""

    OPENAPI_SCHEMA = "OperatorActionView"
    action_id: str
    action: OperatorActionKind
    actor: str
    reason: str
    detail: dict[str, Any]
    at: datetime
    task_id: str | None = None
    worker_id: str | None = None
    from_status: TaskStatus | None = None
    to_status: TaskStatus | None = None


class TaskDetail(TaskSummary):
    """``GET /api/orders/{id}``: the task with every report, oldest first."""

    OPENAPI_SCHEMA = "TaskDetail"
    history: list[ReportView]
    operator_actions: list[OperatorActionView] = Field(default_factory=list)
    evidence_queries: list[str] = Field(default_factory=list)

    @property
    def last_report(self) -> ReportView | None:
        """The newest report, if any."""
        return self.history[-1] if self.history else None

    @property
    def site_order_id(self) -> str | None:
        """The site's order number, from the newest report that names one."""
        for r in reversed(self.history):
            if r.site_order_id:
                return r.site_order_id
        return None

    @property
    def error_code(self) -> int | None:
        """The error code of the newest report that carries one (5004 amount guard, …)."""
        for r in reversed(self.history):
            if r.error_code is not None:
                return r.error_code
        return None


class Page(Answer, Generic[T]):
    """One page of a list route: ``{items, total, limit, offset}``."""

    items: list[T]
    total: int
    limit: int
    offset: int


class LeaseGrant(Answer):
    """A lease, as a reclaim answers it (the worker named receives this very grant)."""

    OPENAPI_SCHEMA = "LeaseGrant"
    task_id: str
    site: str
    intent: dict[str, Any]
    lease_expires_at: datetime
    lease_count: int
    lease_token: str
    known_state: OrderState | None = None


# ---------------------------------------------------------------------------------------------
# Operator


class ResolveTask(Request):
    """``POST /api/orders/{id}/resolve`` body."""

    OPENAPI_SCHEMA = "ResolveTask"
    outcome: Outcome
    reason: str
    state: OrderState | None = None
    site_order_id: str | None = None


class CancelTask(Request):
    """``POST /api/orders/{id}/cancel`` body."""

    OPENAPI_SCHEMA = "CancelTask"
    reason: str


class ReclaimTask(Request):
    """``POST /api/orders/{id}/reclaim`` body."""

    OPENAPI_SCHEMA = "ReclaimTask"
    worker_id: str
    reason: str | None = None


class OperatorActionAck(Answer):
    """Answer of resolve and cancel."""

    OPENAPI_SCHEMA = "OperatorActionAck"
    task_id: str
    status: TaskStatus
    action: OperatorActionView


class AlertView(Answer):
    """An alert record, as ``GET /api/alerts`` lists it."""

    OPENAPI_SCHEMA = "AlertView"
    alert_id: str
    kind: AlertKind
    subject: str
    state: AlertState
    summary: str
    raised_at: datetime
    cleared_at: datetime | None = None
    task_id: str | None = None
    worker_id: str | None = None
    query_id: str | None = None


class WorkerView(Answer):
    """A worker, as ``GET /api/workers`` lists it."""

    OPENAPI_SCHEMA = "WorkerView"
    worker_id: str
    last_seen_at: datetime
    last_seen_seconds: float
    offline: bool
    retired: bool
    active_task: str | None = None


# ---------------------------------------------------------------------------------------------
# Account queries


class SubmitQuery(Request):
    """``POST /api/account/queries`` body."""

    OPENAPI_SCHEMA = "SubmitQuery"
    query_id: str | None = None
    site: str
    kind: str
    params: dict[str, Any] = Field(default_factory=dict)


class SubmitQueryAck(Answer):
    """``POST /api/account/queries`` answer."""

    OPENAPI_SCHEMA = "SubmitQueryAck"
    query_id: str
    status: QueryStatus
    created: bool


class QuerySummary(Answer):
    """A query as ``GET /api/account/queries`` lists it (no result body)."""

    OPENAPI_SCHEMA = "QuerySummary"
    query_id: str
    site: str
    kind: QueryKind
    params: dict[str, Any]
    status: QueryStatus
    attempt: int
    max_attempts: int
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    raw_omitted: bool = False
    error_code: int | None = None
    error_message: str | None = None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None


class OrderItem(Answer):
    """An item of a listed order."""

    item_id: int
    item_name: str
    item_url: str


class OrderSummary(Answer):
    """An order as the site's order list shows it."""

    order_number: str
    order_date: str
    shop_id: int
    shop_name: str
    items: list[OrderItem]


class OrderListResult(Answer):
    """The result of an ``order_list`` query.

    ``window_fully_covered`` ``False`` means paging stopped early: an order missing from
    ``orders`` is then not proof that the account has none.
    """

    kind: QueryKind
    since: datetime | None = None
    max_pages: int
    window_fully_covered: bool
    orders: list[OrderSummary]
    raw_pages: list[Any] = Field(default_factory=list)
    stop_code: int | None = None
    stop_reason: str | None = None
    raw_omitted: bool = False


class OrderDetailResult(Answer):
    """The result of an ``order_detail`` query (``found`` ``False`` is not an error)."""

    kind: QueryKind
    order_number: str
    found: bool
    stage_label: str | None = None
    order_state: OrderState | None = None
    raw: Any = None
    raw_available: bool = False
    raw_omitted: bool = False


class QueryView(QuerySummary):
    """``GET /api/account/queries/{id}``: the query with its result."""

    OPENAPI_SCHEMA = "QueryView"
    result: dict[str, Any] | None = None

    def order_list(self) -> OrderListResult | None:
        """The result as an order list, once the query succeeded."""
        if self.result is None or self.kind != QueryKind.ORDER_LIST:
            return None
        return OrderListResult.model_validate(self.result)

    def order_detail(self) -> OrderDetailResult | None:
        """The result as an order detail, once the query succeeded."""
        if self.result is None or self.kind != QueryKind.ORDER_DETAIL:
            return None
        return OrderDetailResult.model_validate(self.result)


#: The models checked against the served OpenAPI document, answer models first.
CHECKED_MODELS: tuple[type[Answer] | type[Request], ...] = (
    SubmitOrderAck,
    TaskSummary,
    TaskDetail,
    ReportView,
    OperatorActionView,
    LeaseGrant,
    OperatorActionAck,
    AlertView,
    WorkerView,
    SubmitQueryAck,
    QuerySummary,
    QueryView,
    SubmitOrder,
    ResolveTask,
    CancelTask,
    ReclaimTask,
    SubmitQuery,
)
