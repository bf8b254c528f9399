"""The synchronous client against a real gateway (``target/debug/order-gateway`` on port 0)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from rakuten_gateway import (
    Client,
    IntentChangedError,
    OrderIntent,
    OrderState,
    QueryChangedError,
    QueryKind,
    QueryStatus,
    TaskNotFoundError,
    TaskStatus,
    WaitTimeoutError,
)
from rakuten_gateway.errors import (
    ApiError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    QueryNotFoundError,
    TaskStateConflictError,
    UnauthorizedError,
)
from services import TOKEN, UPSTREAM_TOKEN, Process, intent, start_gateway


class FakeClock:
    """Time that moves only when the client sleeps; ``on_sleep`` runs at each pause."""

    def __init__(self, on_sleep: object = None) -> None:
        self.now = 1000.0
        self.pauses: list[float] = []
        self.on_sleep = on_sleep

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds
        if callable(self.on_sleep):
            self.on_sleep()


def test_a_submitted_intent_reads_back_whole_and_a_repeat_creates_nothing(
    client: Client, uid: str
) -> None:
    task_id = f"py-{uid}"
    ack = client.submit(intent(variant_id=None, max_total_yen=5000), task_id=task_id)
    assert (ack.task_id, ack.status, ack.created) == (task_id, TaskStatus.QUEUED, True)

    again = client.submit(intent(variant_id=None, max_total_yen=5000), task_id=task_id)
    assert (again.task_id, again.created) == (task_id, False)

    task = client.task(task_id)
    assert task.status is TaskStatus.QUEUED
    assert task.intent == {
        "item_url": intent()["item_url"],
        "quantity": 1,
        "variant_id": None,
        "max_total_yen": 5000,
    }
    assert task.history == []
    assert task.lease_count == 0
    assert task.created_at.tzinfo is not None


def test_a_typed_intent_is_sent_without_its_unset_fields(client: Client, uid: str) -> None:
    ack = client.submit(
        OrderIntent(item_url=str(intent()["item_url"]), quantity=2, options={"gift": True}),
        task_id=f"py-{uid}",
    )
    assert client.task(ack.task_id).intent == {
        "item_url": intent()["item_url"],
        "quantity": 2,
        "options": {"gift": True},
    }


def test_submit_without_a_task_id_sends_one_so_a_retry_cannot_duplicate(client: Client) -> None:
    ack = client.submit(intent())
    assert ack.created
    assert client.task(ack.task_id).task_id == ack.task_id


def test_a_deadline_is_sent_read_back_and_refused_when_already_past(
    client: Client, uid: str
) -> None:
    deadline = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    ack = client.submit(intent(), task_id=f"py-{uid}", not_after=deadline)
    assert ack.created
    assert client.task(ack.task_id).not_after == deadline
    with pytest.raises(InvalidRequestError) as e:
        client.submit(intent(), task_id=f"py-{uid}-late", not_after=deadline - timedelta(days=2))
    assert "not_after" in e.value.msg
    # A task that ended so is over: waiting on it returns.
    assert TaskStatus("expired").is_terminal
    assert not TaskStatus("expired").in_progress


def test_a_changed_intent_under_the_same_task_id_is_its_own_exception(
    client: Client, uid: str
) -> None:
    task_id = f"py-{uid}"
    client.submit(intent(quantity=1), task_id=task_id)
    with pytest.raises(IntentChangedError) as e:
        client.submit(intent(quantity=2), task_id=task_id)
    err = e.value
    assert (err.code, err.http_status, err.success) == (1006, 409, False)
    assert err.envelope == {"success": False, "msg": err.msg, "data": None, "code": 1006}
    assert "intent" in err.msg
    assert client.task(task_id).intent["quantity"] == 1  # type: ignore[index]


def test_errors_carry_the_envelope_with_their_code(gateway: Process, client: Client) -> None:
    with pytest.raises(TaskNotFoundError) as nf:
        client.task("py-no-such-task")
    assert isinstance(nf.value, NotFoundError)
    assert (nf.value.code, nf.value.http_status) == (6001, 404)

    with pytest.raises(InvalidRequestError) as bad:
        client.submit(intent(quantity=0))
    assert bad.value.code == 1003
    assert "quantity" in bad.value.msg

    with (
        Client(gateway.url, "not-a-token-of-this-gateway") as nobody,
        pytest.raises(UnauthorizedError) as unauth,
    ):
        nobody.tasks()
    assert unauth.value.code == 1001

    with Client(gateway.url, UPSTREAM_TOKEN) as upstream:
        upstream.tasks()  # an upstream token reads orders
        with pytest.raises(ForbiddenError) as forbidden:
            upstream.alerts()
    assert (forbidden.value.code, forbidden.value.http_status) == (1002, 403)


def test_tasks_page_by_status_oldest_first(client: Client, uid: str) -> None:
    ids = [f"py-{uid}-{i}" for i in range(3)]
    for t in ids:
        client.submit(intent(), task_id=t)
    page = client.tasks(status="queued", limit=200)
    listed = [t.task_id for t in page.items if t.task_id in ids]
    assert listed == ids
    assert page.limit == 200
    assert page.total >= 3
    assert all(t.status is TaskStatus.QUEUED for t in page.items)


def test_iterating_yields_every_task_once_in_order(client: Client, uid: str) -> None:
    ids = [f"py-{uid}-{i:02d}" for i in range(9)]
    for t in ids:
        client.submit(intent(), task_id=t)
    seen = [t.task_id for t in client.iter_tasks(status="queued", page_size=2)]
    assert [t for t in seen if t in ids] == ids
    assert len(seen) == len(set(seen))


def test_a_task_leaving_the_filter_during_the_walk_hides_no_other(client: Client, uid: str) -> None:
    # Everything queued before this test leaves the filter first, so the walk starts at ours.
    for queued in list(client.iter_tasks(status="queued")):
        client.cancel(queued.task_id, reason="clearing the queue for the walk test")
    ids = [f"py-{uid}-{i:02d}" for i in range(8)]
    for t in ids:
        client.submit(intent(), task_id=t)
    walk = client.iter_tasks(status="queued", page_size=4)
    first = [next(walk).task_id for _ in range(4)]
    assert first == ids[:4]
    # Three of the first page leave `queued`: a plain offset walk would now skip ids[4..6].
    for t in ids[:3]:
        client.cancel(t, reason="leaves the filter mid-walk")
    rest = [t.task_id for t in walk]
    assert [t for t in rest if t in ids] == ids[4:]


def test_wait_returns_once_the_task_is_no_longer_in_progress(client: Client, uid: str) -> None:
    task_id = f"py-{uid}"
    client.submit(intent(), task_id=task_id)

    def cancel_after_two_polls() -> None:
        if len(clock.pauses) == 2:
            client.cancel(task_id, reason="ends the wait")

    clock = FakeClock(cancel_after_two_polls)
    waiting = Client(client._base, TOKEN, clock=clock)
    task = waiting.wait(task_id, timeout=60, poll_interval=0.5, max_poll_interval=4)
    assert task.status is TaskStatus.FAILED
    assert task.status.is_terminal
    assert clock.pauses == [0.5, 0.75]
    waiting.close()


def test_wait_gives_up_at_its_bound_with_the_last_task_seen(client: Client, uid: str) -> None:
    task_id = f"py-{uid}"
    client.submit(intent(), task_id=task_id)
    clock = FakeClock()
    with Client(client._base, TOKEN, clock=clock) as waiting, pytest.raises(WaitTimeoutError) as e:
        waiting.wait(task_id, timeout=10, poll_interval=1, max_poll_interval=3)
    assert e.value.last.status is TaskStatus.QUEUED
    assert sum(clock.pauses) == pytest.approx(10)
    assert max(clock.pauses) <= 3


def test_account_queries_submit_read_and_refuse_changed_params(client: Client, uid: str) -> None:
    since = datetime(2026, 8, 1, tzinfo=UTC)
    ack = client.query_order_list(since=since, max_pages=2, query_id=f"pyq-{uid}")
    assert (ack.query_id, ack.status, ack.created) == (f"pyq-{uid}", QueryStatus.QUEUED, True)
    assert not client.query_order_list(since=since, max_pages=2, query_id=f"pyq-{uid}").created

    q = client.query(f"pyq-{uid}")
    assert q.kind is QueryKind.ORDER_LIST
    assert q.params == {"since": "2026-08-01T00:00:00Z", "max_pages": 2}
    assert q.order_list() is None  # no result yet

    with pytest.raises(QueryChangedError) as changed:
        client.query_order_list(since=since, max_pages=3, query_id=f"pyq-{uid}")
    assert changed.value.code == 1006

    detail = client.query_order_detail("306087-20260813-0863947697", query_id=f"pyd-{uid}")
    assert detail.created
    listed = {x.query_id for x in client.iter_queries(status="queued", page_size=2)}
    assert {f"pyq-{uid}", f"pyd-{uid}"} <= listed

    with pytest.raises(QueryNotFoundError):
        client.query("pyq-no-such-query")

    clock = FakeClock()
    with Client(client._base, TOKEN, clock=clock) as waiting, pytest.raises(WaitTimeoutError):
        waiting.wait_query(f"pyq-{uid}", timeout=3)


def test_operator_calls_refuse_what_the_status_does_not_allow(client: Client, uid: str) -> None:
    task_id = f"py-{uid}"
    client.submit(intent(), task_id=task_id)
    with pytest.raises(TaskStateConflictError) as e:
        client.resolve(task_id, outcome="succeeded", reason="not stale yet", state="paid")
    assert e.value.code == 6003
    with pytest.raises(TaskStateConflictError):
        client.reclaim(task_id, worker_id="pc-1", reason="not stale")
    with pytest.raises(NotFoundError) as nf:
        client.retire(f"no-such-worker-{uid}", reason="test")
    assert nf.value.code == 1005

    ack = client.cancel(task_id, reason="duplicate order")
    assert ack.status is TaskStatus.FAILED
    assert (ack.action.action, ack.action.reason, ack.action.actor) == (
        "cancel",
        "duplicate order",
        "api",
    )
    assert ack.action.from_status is TaskStatus.QUEUED
    assert [a.action for a in client.task(task_id).operator_actions] == ["cancel"]


@pytest.fixture
def short_lease_gateway(tmp_path: Path) -> Iterator[Process]:
    g = start_gateway(tmp_path, LEASE_TTL_SECONDS="1", SWEEP_INTERVAL_SECONDS="0.1")
    yield g
    g.stop()


def test_a_stale_task_is_seen_alerted_reclaimed_and_resolved(
    short_lease_gateway: Process, uid: str
) -> None:
    gw = short_lease_gateway
    worker = f"py-worker-{uid}"
    with Client(gw.url, TOKEN) as c, httpx.Client(base_url=gw.url) as raw:
        task_id = c.submit(intent(), task_id=f"py-{uid}").task_id
        grant = raw.get(
            "/api/orders/lease",
            params={"worker_id": worker, "wait": 0},
            headers={"Authorization": f"Bearer {TOKEN}"},
        ).json()
        assert grant["data"]["task_id"] == task_id

        # The worker goes silent: the lease lapses and the task needs a person.
        stale = c.wait(task_id, timeout=30, poll_interval=0.1, max_poll_interval=0.5)
        assert stale.status is TaskStatus.STALE
        assert stale.status.needs_person
        assert not stale.status.is_terminal

        alerts = [a for a in c.iter_alerts(kind="task_stale") if a.task_id == task_id]
        assert alerts
        assert alerts[0].state == "open"

        granted = c.reclaim(task_id, worker_id=worker, reason="checked the site: no order")
        assert granted.lease_count == 2
        assert granted.task_id == task_id
        workers = c.workers()
        assert workers.total >= 1
        # The worker holding the reclaimed task is listed first.
        assert workers.items[0].worker_id == worker

        again = c.wait(task_id, timeout=30, poll_interval=0.1, max_poll_interval=0.5)
        assert again.status is TaskStatus.STALE
        done = c.resolve(
            task_id,
            outcome="succeeded",
            reason="order seen paid on the site",
            state="paid",
            site_order_id="306087-20260727-0000001",
        )
        assert done.status is TaskStatus.SUCCEEDED
        task = c.task(task_id)
        assert task.latest_state is OrderState.PAID
        assert task.site_order_id == "306087-20260727-0000001"
        assert [a.action for a in task.operator_actions] == ["reclaim", "resolve"]

        retired = c.retire(worker, reason="decommissioned")
        assert (retired.action, retired.worker_id) == ("retire_worker", worker)
        assert isinstance(retired, object)


def test_every_error_class_is_an_api_error_with_its_code() -> None:
    from rakuten_gateway.errors import ERRORS_BY_CODE, error_for

    codes = {1001, 1002, 1003, 1004, 1005, 1006, 1007, 1500, 1503}
    codes |= set(range(5001, 5008)) | set(range(6001, 6007))
    assert set(ERRORS_BY_CODE) == codes
    for code in codes:
        e = error_for(code, "m", http_status=400)
        assert isinstance(e, ApiError)
        assert e.code == code
        assert type(e) is ERRORS_BY_CODE[code]
    unknown = error_for(7777, "new code")
    assert type(unknown) is ApiError
    assert unknown.code == 7777
