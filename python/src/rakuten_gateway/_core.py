"""What the sync and the async client share: each call as a plain description (:class:`Op`),
the decoding of the envelope into a model or an exception, retry and wait schedules, and the
page walk. The two clients only send.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from . import models as m
from .errors import (
    ApiError,
    ConflictError,
    GatewayTimeoutError,
    GatewayUnreachableError,
    IntentChangedError,
    QueryChangedError,
    RakutenGatewayError,
    ServiceUnavailableError,
    TransportError,
    UnexpectedAnswerError,
    error_for,
)

T = TypeVar("T")

#: The only site the gateway trades on.
SITE = "rakuten"

#: The gateway's largest page.
MAX_PAGE_SIZE = 200


@dataclass(frozen=True)
class Op(Generic[T]):
    """One call: what to send, how to read the answer, whether a repeat is harmless."""

    method: str
    path: str
    decode: Callable[[Any], T]
    params: Mapping[str, str | int] = field(default_factory=dict)
    body: Any = None
    #: Safe to send again after a lost answer (reads; submits keyed by their id).
    idempotent: bool = False
    #: The class of a 1006 answer on this route, when it has a meaning of its own.
    conflict: type[ConflictError] | None = None


def seg(s: str) -> str:
    """A path segment, percent-encoded."""
    return quote(s, safe="")


def _model(cls: type[BaseModel]) -> Callable[[Any], Any]:
    return cls.model_validate


def _adapter(tp: Any) -> Callable[[Any], Any]:
    ta: TypeAdapter[Any] = TypeAdapter(tp)
    return ta.validate_python


def _body(req: BaseModel) -> Any:
    return req.model_dump(mode="json", exclude_none=True)


def new_id() -> str:
    """A fresh id for a submit, chosen here so that a retry after a lost answer is harmless."""
    return str(uuid.uuid4())


# ---------------------------------------------------------------------------------------------
# Calls


def op_submit(
    intent: Mapping[str, Any] | m.OrderIntent,
    task_id: str,
    site: str,
    not_after: datetime | None = None,
) -> Op[m.SubmitOrderAck]:
    body_intent = (
        intent.model_dump(mode="json", exclude_none=True)
        if isinstance(intent, m.OrderIntent)
        else dict(intent)
    )
    req = m.SubmitOrder(task_id=task_id, site=site, intent=body_intent, not_after=not_after)
    return Op(
        "POST",
        "/api/orders",
        _model(m.SubmitOrderAck),
        body=_body(req),
        idempotent=True,
        conflict=IntentChangedError,
    )


def op_task(task_id: str) -> Op[m.TaskDetail]:
    return Op("GET", f"/api/orders/{seg(task_id)}", _model(m.TaskDetail), idempotent=True)


def _page_params(limit: int, offset: int, **filters: str | None) -> dict[str, str | int]:
    p: dict[str, str | int] = {k: v for k, v in filters.items() if v is not None}
    p["limit"] = limit
    p["offset"] = offset
    return p


def op_tasks(
    status: str | None, site: str | None, limit: int, offset: int
) -> Op[m.Page[m.TaskSummary]]:
    return Op(
        "GET",
        "/api/orders",
        _model(m.Page[m.TaskSummary]),
        params=_page_params(limit, offset, status=status, site=site),
        idempotent=True,
    )


def op_submit_query(
    kind: str, params: Mapping[str, Any], query_id: str, site: str
) -> Op[m.SubmitQueryAck]:
    req = m.SubmitQuery(query_id=query_id, site=site, kind=kind, params=dict(params))
    return Op(
        "POST",
        "/api/account/queries",
        _model(m.SubmitQueryAck),
        body=_body(req),
        idempotent=True,
        conflict=QueryChangedError,
    )


def order_list_params(since: datetime | str | None, max_pages: int | None) -> dict[str, Any]:
    p: dict[str, Any] = {}
    if since is not None:
        p["since"] = since if isinstance(since, str) else _rfc3339(since)
    if max_pages is not None:
        p["max_pages"] = max_pages
    return p


def _rfc3339(t: datetime) -> str:
    if t.tzinfo is None:
        raise ValueError("since must be timezone-aware (UTC)")
    return t.isoformat().replace("+00:00", "Z")


def op_query(query_id: str) -> Op[m.QueryView]:
    return Op("GET", f"/api/account/queries/{seg(query_id)}", _model(m.QueryView), idempotent=True)


def op_queries(
    status: str | None, kind: str | None, limit: int, offset: int
) -> Op[m.Page[m.QuerySummary]]:
    return Op(
        "GET",
        "/api/account/queries",
        _model(m.Page[m.QuerySummary]),
        params=_page_params(limit, offset, status=status, kind=kind),
        idempotent=True,
    )


def op_alerts(
    state: str | None, kind: str | None, limit: int, offset: int
) -> Op[m.Page[m.AlertView]]:
    return Op(
        "GET",
        "/api/alerts",
        _model(m.Page[m.AlertView]),
        params=_page_params(limit, offset, state=state, kind=kind),
        idempotent=True,
    )


def op_workers(limit: int, offset: int) -> Op[m.Page[m.WorkerView]]:
    return Op(
        "GET",
        "/api/workers",
        _model(m.Page[m.WorkerView]),
        params=_page_params(limit, offset),
        idempotent=True,
    )


def op_resolve(
    task_id: str, outcome: str, reason: str, state: str | None, site_order_id: str | None
) -> Op[m.OperatorActionAck]:
    req = m.ResolveTask.model_validate(
        {"outcome": outcome, "reason": reason, "state": state, "site_order_id": site_order_id}
    )
    return Op(
        "POST",
        f"/api/orders/{seg(task_id)}/resolve",
        _model(m.OperatorActionAck),
        body=_body(req),
    )


def op_cancel(task_id: str, reason: str) -> Op[m.OperatorActionAck]:
    return Op(
        "POST",
        f"/api/orders/{seg(task_id)}/cancel",
        _model(m.OperatorActionAck),
        body=_body(m.CancelTask(reason=reason)),
    )


def op_reclaim(task_id: str, worker_id: str, reason: str) -> Op[m.LeaseGrant]:
    return Op(
        "POST",
        f"/api/orders/{seg(task_id)}/reclaim",
        _model(m.LeaseGrant),
        body=_body(m.ReclaimTask(worker_id=worker_id, reason=reason)),
    )


def op_retire(worker_id: str, reason: str) -> Op[m.OperatorActionView]:
    return Op(
        "DELETE",
        f"/api/workers/{seg(worker_id)}",
        _model(m.OperatorActionView),
        params={"reason": reason},
    )


#: Every call the clients make, for the test that holds them against the served document:
#: (method, path template, query parameters it may send).
ROUTES: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("POST", "/api/orders", frozenset()),
    ("GET", "/api/orders", frozenset({"status", "site", "limit", "offset"})),
    ("GET", "/api/orders/{task_id}", frozenset()),
    ("POST", "/api/orders/{task_id}/resolve", frozenset()),
    ("POST", "/api/orders/{task_id}/cancel", frozenset()),
    ("POST", "/api/orders/{task_id}/reclaim", frozenset()),
    ("DELETE", "/api/workers/{worker_id}", frozenset({"reason"})),
    ("GET", "/api/workers", frozenset({"limit", "offset"})),
    ("GET", "/api/alerts", frozenset({"state", "kind", "limit", "offset"})),
    ("POST", "/api/account/queries", frozenset()),
    ("GET", "/api/account/queries", frozenset({"status", "kind", "limit", "offset"})),
    ("GET", "/api/account/queries/{query_id}", frozenset()),
)


# ---------------------------------------------------------------------------------------------
# Answers


def transport_error(e: httpx.HTTPError) -> TransportError:
    """An httpx failure as this package's exception."""
    if isinstance(e, httpx.TimeoutException):
        return GatewayTimeoutError(f"no answer from the gateway in time: {e}")
    return GatewayUnreachableError(f"gateway unreachable: {e!r}")


def _retry_after(headers: httpx.Headers) -> float | None:
    v = headers.get("retry-after")
    if v is None:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        return None


def decode(op: Op[T], resp: httpx.Response) -> T:
    """The answer's data as ``op`` reads it, or the exception its envelope says."""
    status = resp.status_code
    try:
        env = json.loads(resp.content)
    except ValueError:
        env = None
    if not (isinstance(env, dict) and isinstance(env.get("code"), int) and "msg" in env):
        raise UnexpectedAnswerError(
            f"{op.method} {op.path}: HTTP {status}, not the gateway's envelope: "
            f"{resp.content[:200]!r}",
            http_status=status,
            body=resp.content,
        )
    code: int = env["code"]
    msg = str(env.get("msg", ""))
    success = bool(env.get("success", False))
    data = env.get("data")
    if not success or status >= 400:
        cls_err = error_for(
            code if code != 0 else 1500,
            msg,
            data=data,
            success=success,
            http_status=status,
            retry_after=_retry_after(resp.headers),
        )
        if op.conflict is not None and type(cls_err) is ConflictError:
            cls_err = op.conflict(msg, code=code, data=data, success=success, http_status=status)
        raise cls_err
    if data is None:
        raise UnexpectedAnswerError(
            f"{op.method} {op.path}: HTTP {status}, envelope without data (code {code}: {msg})",
            http_status=status,
            body=resp.content,
        )
    try:
        return op.decode(data)
    except ValidationError as e:
        raise UnexpectedAnswerError(
            f"{op.method} {op.path}: the answer's data does not read as expected: {e}",
            http_status=status,
            body=resp.content,
        ) from e


def retryable(e: RakutenGatewayError) -> bool:
    """Whether a failure may pass by itself (no answer, a 5xx): worth repeating a safe call."""
    if isinstance(e, UnexpectedAnswerError):
        return e.http_status >= 500
    if isinstance(e, TransportError):
        return True
    if isinstance(e, ApiError):
        return isinstance(e, ServiceUnavailableError) or (e.http_status or 0) >= 500
    return False


@dataclass
class RetryPolicy:
    """How often and how long a safe call is repeated after a failure that may pass."""

    max_retries: int = 3
    max_backoff: float = 10.0

    def delay(self, attempt: int, error: RakutenGatewayError) -> float:
        """Seconds before repeat number ``attempt`` (1-based): exponential with jitter."""
        base: float = min(self.max_backoff, 0.25 * 2.0 ** (attempt - 1))
        wait: float = base * random.uniform(0.5, 1.0)  # noqa: S311 - jitter, not a secret
        if isinstance(error, ApiError) and error.retry_after is not None:
            wait = max(wait, min(self.max_backoff, error.retry_after))
        return wait


class PollSchedule:
    """The pauses of a bounded wait: from ``first`` growing by half each time up to ``most``,
    never past the deadline."""

    def __init__(self, first: float, most: float, timeout: float, now: float) -> None:
        if first <= 0 or most < first or timeout < 0:
            raise ValueError("need 0 < poll_interval <= max_poll_interval and timeout >= 0")
        self._next = first
        self._most = most
        self.deadline = now + timeout

    def pause(self, now: float) -> float | None:
        """The next pause, or ``None`` when the deadline has passed."""
        left = self.deadline - now
        if left <= 0:
            return None
        p = min(self._next, left)
        self._next = min(self._most, self._next * 1.5)
        return p


class PageWalk(Generic[T]):
    """Walks a list route by ``limit``/``offset`` (the gateway's paging) the way a keyset walk
    would: every item is yielded once, and none is skipped when items before it leave the
    filter during the walk (a queued task leased or cancelled meanwhile).

    Each page starts a few items before the previous one ended, so it must begin with an item
    already seen; when it does not, earlier items left the list and everything moved up: the
    walk drops that page, steps back a page and reads forward again. Items already yielded (by
    key) are not yielded again, so the order holds too.
    """

    def __init__(self, key: Callable[[T], str], page_size: int) -> None:
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be 1..{MAX_PAGE_SIZE}")
        self._key = key
        self.limit = page_size
        self.offset = 0
        self._overlap = min(page_size - 1, max(1, page_size // 4))
        self._seen: set[str] = set()
        self.done = False

    def take(self, page: m.Page[T]) -> list[T]:
        """The new items of ``page``; sets up the next offset, or ``done``."""
        if (
            self.offset > 0
            and self._overlap > 0
            and page.items
            and self._key(page.items[0]) not in self._seen
        ):
            # Items before this page left the list: read again from a page earlier, so that
            # what follows comes in order and none is skipped.
            self.offset = max(0, self.offset - self.limit)
            return []
        fresh = []
        for item in page.items:
            k = self._key(item)
            if k not in self._seen:
                self._seen.add(k)
                fresh.append(item)
        if len(page.items) < self.limit:
            self.done = True
        else:
            self.offset += len(page.items) - self._overlap
        return fresh
