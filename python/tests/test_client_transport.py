"""What the client does with answers a healthy gateway rarely gives: lost answers, 503s, bodies
that are not the envelope, and values from a newer gateway (unknown statuses and fields). The
transport is httpx's ``MockTransport``; nothing leaves the process."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from rakuten_gateway import Client, TaskStatus
from rakuten_gateway.errors import (
    GatewayTimeoutError,
    GatewayUnreachableError,
    ServiceUnavailableError,
    TaskStateConflictError,
    UnexpectedAnswerError,
)
from rakuten_gateway.models import TaskSummary

TASK = {
    "task_id": "t-1",
    "site": "rakuten",
    "intent": {"item_url": "https://item.rakuten.co.jp/s/c/"},
    "status": "queued",
    "lease_count": 0,
    "created_at": "2026-07-27T09:15:00.000Z",
    "updated_at": "2026-07-27T09:15:00.000Z",
    "history": [],
}


def envelope(data: Any, code: int = 0, msg: str = "ok") -> dict[str, Any]:
    return {"success": code in (0, 6004), "msg": msg, "data": data, "code": code}


class NoSleep:
    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.pauses.append(s)
        self.now += s


def client_with(handler: Callable[[httpx.Request], httpx.Response]) -> tuple[Client, NoSleep]:
    clock = NoSleep()
    http = httpx.Client(transport=httpx.MockTransport(handler))
    return Client("http://gateway.test", "t" * 20, http_client=http, clock=clock), clock


def test_a_submit_whose_answer_was_lost_is_sent_again_with_the_same_task_id() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(req: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(req.content))
        if len(bodies) == 1:
            raise httpx.ReadTimeout("lost", request=req)
        return httpx.Response(
            200,
            json=envelope({"task_id": bodies[-1]["task_id"], "status": "queued", "created": False}),
        )

    c, clock = client_with(handler)
    ack = c.submit({"item_url": "https://item.rakuten.co.jp/s/c/"})
    assert len(bodies) == 2
    assert bodies[0]["task_id"] == bodies[1]["task_id"] == ack.task_id
    assert len(clock.pauses) == 1


def test_retries_stop_at_the_limit_and_honour_retry_after() -> None:
    calls = 0

    def handler(req: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(
            503, json=envelope(None, 1503, "shutting down"), headers={"Retry-After": "2"}
        )

    c, clock = client_with(handler)
    with pytest.raises(ServiceUnavailableError) as e:
        c.task("t-1")
    assert calls == 4  # one call and three retries
    assert e.value.retry_after == 2
    assert all(p >= 2 for p in clock.pauses)


def test_operator_actions_are_sent_once() -> None:
    calls = 0

    def handler(req: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.ConnectError("refused", request=req)

    c, _ = client_with(handler)
    with pytest.raises(GatewayUnreachableError):
        c.cancel("t-1", reason="r")
    assert calls == 1


def test_an_answer_that_is_not_the_envelope_is_its_own_error() -> None:
    c, _ = client_with(lambda req: httpx.Response(502, text="<html>bad gateway</html>"))
    with pytest.raises(UnexpectedAnswerError) as e:
        c.task("t-1")
    assert e.value.http_status == 502
    assert b"bad gateway" in e.value.body


def test_a_timeout_is_a_transport_error_of_its_own() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=req)

    c, _ = client_with(handler)
    with pytest.raises(GatewayTimeoutError):
        c.task("t-1")


def test_a_conflict_code_keeps_its_class_on_any_route() -> None:
    c, _ = client_with(lambda req: httpx.Response(409, json=envelope(None, 6003, "task is queued")))
    with pytest.raises(TaskStateConflictError) as e:
        c.resolve("t-1", outcome="failed", reason="r")
    assert e.value.envelope == {
        "success": False,
        "msg": "task is queued",
        "data": None,
        "code": 6003,
    }


def test_a_newer_gateways_status_and_fields_are_kept_not_refused() -> None:
    newer = {
        **TASK,
        "status": "archived",
        "archived_at": "2026-07-28T00:00:00.000Z",
        "latest_state": "returned",
        "outcome": "failed",
    }
    newer.pop("intent")
    newer["intent_summary"] = {"item_url": "https://item.rakuten.co.jp/s/c/"}

    c, clock = client_with(lambda req: httpx.Response(200, json=envelope(newer)))
    task = c.wait("t-1", timeout=60)
    assert clock.pauses == []  # not in progress: returned at once, not waited on
    assert task.status == "archived"
    assert not task.status.is_known
    assert not task.status.in_progress
    assert str(task.latest_state) == "returned"
    assert task.intent is None
    assert task.model_extra == {
        "archived_at": "2026-07-28T00:00:00.000Z",
        "intent_summary": {"item_url": "https://item.rakuten.co.jp/s/c/"},
    }
    assert task.model_dump(mode="json")["status"] == "archived"
    assert TaskStatus("queued") is TaskStatus.QUEUED


def test_a_list_page_with_a_shortened_intent_reads() -> None:
    summary = {k: v for k, v in TASK.items() if k != "history"}
    summary["intent"] = {"item_url": "https://item.rakuten.co.jp/s/c/", "truncated": True}
    page = {"items": [summary], "total": 1, "limit": 50, "offset": 0}
    c, _ = client_with(lambda req: httpx.Response(200, json=envelope(page)))
    [only] = c.tasks().items
    assert isinstance(only, TaskSummary)
    assert only.intent == {"item_url": "https://item.rakuten.co.jp/s/c/", "truncated": True}


def test_query_parameters_and_path_ids_are_encoded() -> None:
    seen: list[httpx.URL] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.url)
        return httpx.Response(200, json=envelope({**TASK, "task_id": "a b?c"}))

    c, _ = client_with(handler)
    c.task("a b?c")
    assert seen[0].raw_path == b"/api/orders/a%20b%3Fc"
