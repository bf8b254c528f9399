"""The ``asyncio`` client against the same real gateway, and its parity with the sync one."""

from __future__ import annotations

import inspect

import pytest

from rakuten_gateway import (
    AsyncClient,
    Client,
    IntentChangedError,
    TaskNotFoundError,
    TaskStatus,
    WaitTimeoutError,
)
from services import TOKEN, Process, intent

pytestmark = pytest.mark.anyio


class FakeAsyncClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


async def test_the_async_client_submits_reads_iterates_and_raises_the_same(
    gateway: Process, uid: str
) -> None:
    async with AsyncClient(gateway.url, TOKEN) as gw:
        ack = await gw.submit(intent(), task_id=f"pya-{uid}")
        assert ack.created
        assert (await gw.task(ack.task_id)).status is TaskStatus.QUEUED
        with pytest.raises(IntentChangedError):
            await gw.submit(intent(quantity=3), task_id=f"pya-{uid}")
        with pytest.raises(TaskNotFoundError):
            await gw.task("pya-no-such-task")
        ids = [f"pya-{uid}-{i}" for i in range(5)]
        for t in ids:
            await gw.submit(intent(), task_id=t)
        seen = [t.task_id async for t in gw.iter_tasks(status="queued", page_size=2)]
        assert [t for t in seen if t in ids] == ids

        q = await gw.query_order_detail("306087-20260813-0863947697", query_id=f"pyaq-{uid}")
        assert (await gw.query(q.query_id)).params == {"order_number": "306087-20260813-0863947697"}

        cancelled = await gw.cancel(ids[0], reason="async cancel")
        assert cancelled.status is TaskStatus.FAILED
        assert (await gw.wait(ids[0], timeout=5)).status is TaskStatus.FAILED


async def test_the_async_wait_is_bounded_with_a_growing_pause(gateway: Process, uid: str) -> None:
    clock = FakeAsyncClock()
    async with AsyncClient(gateway.url, TOKEN, clock=clock) as gw:
        await gw.submit(intent(), task_id=f"pya-{uid}")
        with pytest.raises(WaitTimeoutError) as e:
            await gw.wait(f"pya-{uid}", timeout=20, poll_interval=1, max_poll_interval=4)
    assert e.value.last.task_id == f"pya-{uid}"
    assert clock.pauses[:4] == [1, 1.5, 2.25, 3.375]
    assert max(clock.pauses) == 4
    assert sum(clock.pauses) == pytest.approx(20)


def test_both_clients_offer_the_same_calls_with_the_same_parameters() -> None:
    def public(cls: type) -> dict[str, inspect.Signature]:
        return {
            n: inspect.signature(f)
            for n, f in inspect.getmembers(cls, inspect.isfunction)
            if not n.startswith("_") and n not in {"close", "aclose"}
        }

    sync, aio = public(Client), public(AsyncClient)
    assert set(sync) == set(aio)
    for name, sig in sync.items():
        assert list(sig.parameters) == list(aio[name].parameters), name
        for p in sig.parameters.values():
            assert p.default == aio[name].parameters[p.name].default, (name, p.name)
