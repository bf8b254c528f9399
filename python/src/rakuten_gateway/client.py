"""The gateway client (synchronous). :class:`~rakuten_gateway.AsyncClient` is the same for
``asyncio``.

>>> from rakuten_gateway import Client
>>> with Client("http://127.0.0.1:31109", token) as gw:            # doctest: +SKIP
...     ack = gw.submit({"item_url": "https://item.rakuten.co.jp/shop/code/", "quantity": 1},
...                     task_id="po-20260727-0001")
...     task = gw.wait(ack.task_id, timeout=600)
...     print(task.status, task.latest_state, task.site_order_id)
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, Protocol, TypeVar

import httpx

from . import _core as c
from . import models as m
from .enums import QueryKind
from .errors import RakutenGatewayError, TransportError, WaitTimeoutError

__all__ = ["Client", "Clock"]

T = TypeVar("T")


class Clock(Protocol):
    """Time as the client's waits see it (a test passes its own)."""

    def monotonic(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


class _SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class Client:
    """A client of one order gateway.

    ``token`` is a Bearer token of a role that may make the calls used: upstream for orders and
    account queries, operator for alerts, workers, resolve, cancel, reclaim and retire.

    Reads and submits are repeated after a failure that may pass (no answer, a timeout, a 5xx,
    1503 with its ``Retry-After``), up to ``max_retries`` times: a submit always carries its id
    (``task_id``/``query_id``, generated here when not given), so a repeat never creates a
    second task. Operator actions are sent once.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        max_retries: int = 3,
        max_backoff: float = 10.0,
        http_client: httpx.Client | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._own_http = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout)
        self._base = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._retry = c.RetryPolicy(max_retries=max_retries, max_backoff=max_backoff)
        self._clock: Clock = clock or _SystemClock()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the HTTP connections (not a client passed in as ``http_client``)."""
        if self._own_http:
            self._http.close()

    def _send(self, op: c.Op[T]) -> T:
        attempt = 0
        while True:
            try:
                try:
                    resp = self._http.request(
                        op.method,
                        self._base + op.path,
                        params=dict(op.params) or None,
                        json=op.body,
                        headers=self._headers,
                    )
                except httpx.HTTPError as e:
                    raise c.transport_error(e) from e
                return c.decode(op, resp)
            except RakutenGatewayError as e:
                attempt += 1
                if not (op.idempotent and c.retryable(e) and attempt <= self._retry.max_retries):
                    raise
                self._clock.sleep(self._retry.delay(attempt, e))

    # ----------------------------------------------------------------------------------------
    # Orders

    def submit(
        self,
        intent: Mapping[str, Any] | m.OrderIntent,
        *,
        task_id: str | None = None,
        site: str = c.SITE,
        not_after: datetime | None = None,
    ) -> m.SubmitOrderAck:
        """Submits an order intent. Idempotent on ``task_id``: the same id with the same intent
        (and ``not_after``) answers the existing task (``created`` ``False``); with another it
        raises :class:`~rakuten_gateway.errors.IntentChangedError` and changes nothing.
        ``not_after`` (timezone-aware, in the future): the last instant a worker may lease the
        task; still queued after it, the task ends ``expired`` and is never ordered."""
        return self._send(c.op_submit(intent, task_id or c.new_id(), site, not_after))

    def task(self, task_id: str) -> m.TaskDetail:
        """The task with its latest state and every report (``TaskNotFoundError``: none)."""
        return self._send(c.op_task(task_id))

    def tasks(
        self,
        *,
        status: str | None = None,
        site: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> m.Page[m.TaskSummary]:
        """One page of tasks, oldest first."""
        return self._send(c.op_tasks(status, site, limit, offset))

    def iter_tasks(
        self, *, status: str | None = None, site: str | None = None, page_size: int = 100
    ) -> Iterator[m.TaskSummary]:
        """Every task (with ``status``), oldest first, fetched a page at a time; a task is
        yielded once even when others change status during the walk."""
        walk: c.PageWalk[m.TaskSummary] = c.PageWalk(lambda t: t.task_id, page_size)
        while not walk.done:
            yield from walk.take(
                self.tasks(status=status, site=site, limit=walk.limit, offset=walk.offset)
            )

    def wait(
        self,
        task_id: str,
        *,
        timeout: float = 600.0,
        poll_interval: float = 0.5,
        max_poll_interval: float = 10.0,
    ) -> m.TaskDetail:
        """Reads the task until it is no longer queued, leased or running — finished
        (``succeeded``, ``failed``, ``needs_human``), ``stale`` (a person must decide), or in a
        status this package does not know — and returns it. Polls with a growing pause (from
        ``poll_interval`` up to ``max_poll_interval``); past ``timeout`` seconds raises
        :class:`~rakuten_gateway.errors.WaitTimeoutError` carrying the task as last seen."""
        sched = c.PollSchedule(poll_interval, max_poll_interval, timeout, self._clock.monotonic())
        while True:
            try:
                task = self.task(task_id)
            except TransportError as e:
                last: Any = e
            else:
                if not task.status.in_progress:
                    return task
                last = task
            pause = sched.pause(self._clock.monotonic())
            if pause is None:
                raise WaitTimeoutError(f"task {task_id} not finished after {timeout:g} s", last)
            self._clock.sleep(pause)

    def submit_and_wait(
        self,
        intent: Mapping[str, Any] | m.OrderIntent,
        *,
        task_id: str | None = None,
        timeout: float = 600.0,
        poll_interval: float = 0.5,
        max_poll_interval: float = 10.0,
    ) -> m.TaskDetail:
        """:meth:`submit` then :meth:`wait`."""
        ack = self.submit(intent, task_id=task_id)
        return self.wait(
            ack.task_id,
            timeout=timeout,
            poll_interval=poll_interval,
            max_poll_interval=max_poll_interval,
        )

    # ----------------------------------------------------------------------------------------
    # Account queries

    def submit_query(
        self,
        kind: str | QueryKind,
        params: Mapping[str, Any] | None = None,
        *,
        query_id: str | None = None,
        site: str = c.SITE,
    ) -> m.SubmitQueryAck:
        """Submits an account query (idempotent on ``query_id``; another body under the same
        id raises :class:`~rakuten_gateway.errors.QueryChangedError`)."""
        return self._send(c.op_submit_query(str(kind), params or {}, query_id or c.new_id(), site))

    def query_order_list(
        self,
        *,
        since: datetime | str | None = None,
        max_pages: int | None = None,
        query_id: str | None = None,
    ) -> m.SubmitQueryAck:
        """Asks the worker to read the account's order list (back to ``since``)."""
        return self.submit_query(
            QueryKind.ORDER_LIST, c.order_list_params(since, max_pages), query_id=query_id
        )

    def query_order_detail(
        self, order_number: str, *, query_id: str | None = None
    ) -> m.SubmitQueryAck:
        """Asks the worker to read one order's detail page."""
        return self.submit_query(
            QueryKind.ORDER_DETAIL, {"order_number": order_number}, query_id=query_id
        )

    def query(self, query_id: str) -> m.QueryView:
        """The query with its result (``QueryNotFoundError``: none, or purged)."""
        return self._send(c.op_query(query_id))

    def queries(
        self,
        *,
        status: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> m.Page[m.QuerySummary]:
        """One page of account queries."""
        return self._send(c.op_queries(status, kind, limit, offset))

    def iter_queries(
        self, *, status: str | None = None, kind: str | None = None, page_size: int = 100
    ) -> Iterator[m.QuerySummary]:
        """Every account query (with ``status``/``kind``), a page at a time."""
        walk: c.PageWalk[m.QuerySummary] = c.PageWalk(lambda q: q.query_id, page_size)
        while not walk.done:
            yield from walk.take(
                self.queries(status=status, kind=kind, limit=walk.limit, offset=walk.offset)
            )

    def wait_query(
        self,
        query_id: str,
        *,
        timeout: float = 300.0,
        poll_interval: float = 0.5,
        max_poll_interval: float = 5.0,
    ) -> m.QueryView:
        """Reads the query until it is no longer queued or leased and returns it; past
        ``timeout`` raises :class:`~rakuten_gateway.errors.WaitTimeoutError`."""
        sched = c.PollSchedule(poll_interval, max_poll_interval, timeout, self._clock.monotonic())
        while True:
            try:
                q = self.query(query_id)
            except TransportError as e:
                last: Any = e
            else:
                if not q.status.in_progress:
                    return q
                last = q
            pause = sched.pause(self._clock.monotonic())
            if pause is None:
                raise WaitTimeoutError(f"query {query_id} not finished after {timeout:g} s", last)
            self._clock.sleep(pause)

    # ----------------------------------------------------------------------------------------
    # Operator

    def alerts(
        self,
        *,
        state: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> m.Page[m.AlertView]:
        """One page of alerts, newest first (``state``: ``open``, the default, or ``all``)."""
        return self._send(c.op_alerts(state, kind, limit, offset))

    def iter_alerts(
        self, *, state: str | None = None, kind: str | None = None, page_size: int = 100
    ) -> Iterator[m.AlertView]:
        """Every alert (``state``, ``kind``), newest first, a page at a time."""
        walk: c.PageWalk[m.AlertView] = c.PageWalk(lambda a: a.alert_id, page_size)
        while not walk.done:
            yield from walk.take(
                self.alerts(state=state, kind=kind, limit=walk.limit, offset=walk.offset)
            )

    def workers(self, *, limit: int = 50, offset: int = 0) -> m.Page[m.WorkerView]:
        """One page of the known workers with their ``total``: last poll, offline, retired, the
        task it holds. Workers holding a task first, then serving ones, then retired ones, each
        most recently seen first; the next page starts at ``offset + limit``."""
        return self._send(c.op_workers(limit, offset))

    def resolve(
        self,
        task_id: str,
        *,
        outcome: str,
        reason: str,
        state: str | None = None,
        site_order_id: str | None = None,
    ) -> m.OperatorActionAck:
        """Ends a ``stale`` or ``needs_human`` task by hand with what a person saw on the site.

        Also corrects a ``succeeded`` or ``failed`` task while its latest reported state
        contradicts it (alert ``task_state_contradicts_outcome``).
        """
        return self._send(c.op_resolve(task_id, outcome, reason, state, site_order_id))

    def cancel(self, task_id: str, *, reason: str) -> m.OperatorActionAck:
        """Withdraws a queued task (``TaskStateConflictError`` once a worker leased it)."""
        return self._send(c.op_cancel(task_id, reason))

    def reclaim(self, task_id: str, *, worker_id: str, reason: str) -> m.LeaseGrant:
        """Hands a ``stale`` task to ``worker_id``; its next poll receives this very grant."""
        return self._send(c.op_reclaim(task_id, worker_id, reason))

    def retire(self, worker_id: str, *, reason: str) -> m.OperatorActionView:
        """Retires a worker (it comes back by polling again)."""
        return self._send(c.op_retire(worker_id, reason))
