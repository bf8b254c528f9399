"""The gateway client for ``asyncio``: :class:`~rakuten_gateway.Client`'s calls, awaited.

>>> from rakuten_gateway import AsyncClient
>>> async with AsyncClient("http://127.0.0.1:31109", token) as gw:  # doctest: +SKIP
...     ack = await gw.submit({"item_url": "https://item.rakuten.co.jp/shop/code/"})
...     task = await gw.wait(ack.task_id, timeout=600)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from typing import Any, Protocol, TypeVar

import httpx

from . import _core as c
from . import models as m
from .enums import QueryKind
from .errors import RakutenGatewayError, TransportError, WaitTimeoutError

__all__ = ["AsyncClient", "AsyncClock"]

T = TypeVar("T")


class AsyncClock(Protocol):
    """Time as the client's waits see it (a test passes its own)."""

    def monotonic(self) -> float: ...
    async def sleep(self, seconds: float) -> None: ...


class _SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class AsyncClient:
    """A client of one order gateway, for ``asyncio``.

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
        http_client: httpx.AsyncClient | None = None,
        clock: AsyncClock | None = None,
    ) -> None:
        self._own_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._base = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._retry = c.RetryPolicy(max_retries=max_retries, max_backoff=max_backoff)
        self._clock: AsyncClock = clock or _SystemClock()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the HTTP connections (not a client passed in as ``http_client``)."""
        if self._own_http:
            await self._http.aclose()

    async def _send(self, op: c.Op[T]) -> T:
        attempt = 0
        while True:
            try:
                try:
                    resp = await self._http.request(
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
                await self._clock.sleep(self._retry.delay(attempt, e))

    # ----------------------------------------------------------------------------------------
    # Orders

    async def submit(
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
        return await self._send(c.op_submit(intent, task_id or c.new_id(), site, not_after))

    async def task(self, task_id: str) -> m.TaskDetail:
        """The task with its latest state and every report (``TaskNotFoundError``: none)."""
        return await self._send(c.op_task(task_id))

    async def tasks(
        self,
        *,
        status: str | None = None,
        site: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> m.Page[m.TaskSummary]:
        """One page of tasks, oldest first."""
        return await self._send(c.op_tasks(status, site, limit, offset))

    async def iter_tasks(
        self, *, status: str | None = None, site: str | None = None, page_size: int = 100
    ) -> AsyncIterator[m.TaskSummary]:
        """Every task (with ``status``), oldest first, fetched a page at a time; a task is
        yielded once even when others change status during the walk."""
        walk: c.PageWalk[m.TaskSummary] = c.PageWalk(lambda t: t.task_id, page_size)
        while not walk.done:
            for item in walk.take(
                await self.tasks(status=status, site=site, limit=walk.limit, offset=walk.offset)
            ):
                yield item

    async def wait(
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
                task = await self.task(task_id)
            except TransportError as e:
                last: Any = e
            else:
                if not task.status.in_progress:
                    return task
                last = task
            pause = sched.pause(self._clock.monotonic())
            if pause is None:
                raise WaitTimeoutError(f"task {task_id} not finished after {timeout:g} s", last)
            await self._clock.sleep(pause)

    async def submit_and_wait(
        self,
        intent: Mapping[str, Any] | m.OrderIntent,
        *,
        task_id: str | None = None,
        timeout: float = 600.0,
        poll_interval: float = 0.5,
        max_poll_interval: float = 10.0,
    ) -> m.TaskDetail:
        """:meth:`submit` then :meth:`wait`."""
        ack = await self.submit(intent, task_id=task_id)
        return await self.wait(
            ack.task_id,
            timeout=timeout,
            poll_interval=poll_interval,
            max_poll_interval=max_poll_interval,
        )

    # ----------------------------------------------------------------------------------------
    # Account queries

    async def submit_query(
        self,
        kind: str | QueryKind,
        params: Mapping[str, Any] | None = None,
        *,
        query_id: str | None = None,
        site: str = c.SITE,
    ) -> m.SubmitQueryAck:
        """Submits an account query (idempotent on ``query_id``; another body under the same
        id raises :class:`~rakuten_gateway.errors.QueryChangedError`)."""
        return await self._send(
            c.op_submit_query(str(kind), params or {}, query_id or c.new_id(), site)
        )

    async def query_order_list(
        self,
        *,
        since: datetime | str | None = None,
        max_pages: int | None = None,
        query_id: str | None = None,
    ) -> m.SubmitQueryAck:
        """Asks the worker to read the account's order list (back to ``since``)."""
        return await self.submit_query(
            QueryKind.ORDER_LIST, c.order_list_params(since, max_pages), query_id=query_id
        )

    async def query_order_detail(
        self, order_number: str, *, query_id: str | None = None
    ) -> m.SubmitQueryAck:
        """Asks the worker to read one order's detail page."""
        return await self.submit_query(
            QueryKind.ORDER_DETAIL, {"order_number": order_number}, query_id=query_id
        )

    async def query(self, query_id: str) -> m.QueryView:
        """The query with its result (``QueryNotFoundError``: none, or purged)."""
        return await self._send(c.op_query(query_id))

    async def queries(
        self,
        *,
        status: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> m.Page[m.QuerySummary]:
        """One page of account queries."""
        return await self._send(c.op_queries(status, kind, limit, offset))

    async def iter_queries(
        self, *, status: str | None = None, kind: str | None = None, page_size: int = 100
    ) -> AsyncIterator[m.QuerySummary]:
        """Every account query (with ``status``/``kind``), a page at a time."""
        walk: c.PageWalk[m.QuerySummary] = c.PageWalk(lambda q: q.query_id, page_size)
        while not walk.done:
            for item in walk.take(
                await self.queries(status=status, kind=kind, limit=walk.limit, offset=walk.offset)
            ):
                yield item

    async def wait_query(
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
                q = await self.query(query_id)
            except TransportError as e:
                last: Any = e
            else:
                if not q.status.in_progress:
                    return q
                last = q
            pause = sched.pause(self._clock.monotonic())
            if pause is None:
                raise WaitTimeoutError(f"query {query_id} not finished after {timeout:g} s", last)
            await self._clock.sleep(pause)

    # ----------------------------------------------------------------------------------------
    # Operator

    async def alerts(
        self,
        *,
        state: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> m.Page[m.AlertView]:
        """One page of alerts, newest first (``state``: ``open``, the default, or ``all``)."""
        return await self._send(c.op_alerts(state, kind, limit, offset))

    async def iter_alerts(
        self, *, state: str | None = None, kind: str | None = None, page_size: int = 100
    ) -> AsyncIterator[m.AlertView]:
        """Every alert (``state``, ``kind``), newest first, a page at a time."""
        walk: c.PageWalk[m.AlertView] = c.PageWalk(lambda a: a.alert_id, page_size)
        while not walk.done:
            for item in walk.take(
                await self.alerts(state=state, kind=kind, limit=walk.limit, offset=walk.offset)
            ):
                yield item

    async def workers(self, *, limit: int = 50, offset: int = 0) -> m.Page[m.WorkerView]:
        """One page of the known workers with their ``total``: last poll, offline, retired, the
        task it holds. Workers holding a task first, then serving ones, then retired ones, each
        most recently seen first; the next page starts at ``offset + limit``."""
        return await self._send(c.op_workers(limit, offset))

    async def resolve(
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
        return await self._send(c.op_resolve(task_id, outcome, reason, state, site_order_id))

    async def cancel(self, task_id: str, *, reason: str) -> m.OperatorActionAck:
        """Withdraws a queued task (``TaskStateConflictError`` once a worker leased it)."""
        return await self._send(c.op_cancel(task_id, reason))

    async def reclaim(self, task_id: str, *, worker_id: str, reason: str) -> m.LeaseGrant:
        """Hands a ``stale`` task to ``worker_id``; its next poll receives this very grant."""
        return await self._send(c.op_reclaim(task_id, worker_id, reason))

    async def retire(self, worker_id: str, *, reason: str) -> m.OperatorActionView:
        """Retires a worker (it comes back by polling again)."""
        return await self._send(c.op_retire(worker_id, reason))
