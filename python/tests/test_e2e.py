"""End to end: the gateway, the trading worker (``RAKUTEN_SITE=adapter``), the Python reference
adapter in headless Chromium, and shop-sim — real processes on loopback ports they chose. An
intent submitted with the client ends as a paid (then shipped) order, with a PNG screenshot of
every step on disk before the gateway heard of it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from rakuten_gateway import Client, OrderState, TaskStatus
from services import TOKEN, Process, binary, start_gateway, start_python_adapter, start_shop

pytestmark = pytest.mark.browser

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_an_order_submitted_from_python_is_placed_through_the_python_adapter(
    tmp_path: Path, uid: str
) -> None:
    shop = start_shop(tmp_path / "shop")
    gateway = start_gateway(tmp_path / "gateway")
    adapter = start_python_adapter(tmp_path / "adapter", shop.url)
    evidence = tmp_path / "evidence"
    worker = Process(
        "trading-worker",
        [binary("trading-worker"), "run"],
        workdir=tmp_path / "worker",
        env={
            "RAKUTEN_ORDER_GATEWAY_URL": gateway.url,
            "RAKUTEN_API_TOKEN": TOKEN,
            "RAKUTEN_WORKER_ID": f"py-e2e-{uid}",
            "RAKUTEN_TRADING_DB_PATH": str(tmp_path / "worker" / "trading.db"),
            "RAKUTEN_EVIDENCE_DIR": str(evidence),
            "RAKUTEN_SITE": "adapter",
            "RAKUTEN_SITE_ADAPTER_URL": adapter.url,
            "RAKUTEN_SCRAPER_BASE_URL": shop.url,
            "RAKUTEN_LEASE_WAIT_SECONDS": "2",
            "RAKUTEN_LEASE_RENEW_INTERVAL_SECONDS": "5",
            "RAKUTEN_MONITOR_INTERVAL_SECONDS": "0.5",
            "RAKUTEN_GATEWAY_RETRY_MAX_SECONDS": "1",
            "RAKUTEN_HTTP_TIMEOUT_SECONDS": "60",
            "RUST_LOG": "info",
        },
    )
    task_id = f"py-e2e-{uid}"
    try:
        with Client(gateway.url, TOKEN) as gw:
            task = gw.submit_and_wait(
                {
                    "item_url": "https://item.rakuten.co.jp/simshop/sample-shirt/",
                    "quantity": 1,
                    "variant_id": "blue-m",
                    "max_total_yen": 10000,
                },
                task_id=task_id,
                timeout=240,
                poll_interval=0.2,
                max_poll_interval=1,
            )
            assert task.status is TaskStatus.SUCCEEDED, (
                f"{task.status}: {task.history}\n{worker.log_tail()}\n{adapter.log_tail()}"
            )
            assert task.latest_state is OrderState.PAID
            states = [r.state for r in task.history]
            assert states == ["in_cart", "ordered", "paid"], states
            order = task.site_order_id
            assert order is not None

            submissions = httpx.get(f"{shop.url}/admin/submissions", timeout=10).json()
            assert [s["order_number"] for s in submissions] == [order]
            assert submissions[0]["note"] == task_id

            # Every reported step's evidence is on disk: HTML, meta, and a PNG screenshot.
            refs = [r.evidence_ref for r in task.history if r.evidence_ref]
            assert len(refs) == 3
            for ref in refs:
                png = evidence / f"{ref}.png"
                assert png.read_bytes().startswith(PNG_MAGIC), png
                assert (evidence / f"{ref}.html").stat().st_size > 0
                meta = json.loads((evidence / f"{ref}.meta.json").read_text())
                assert meta["http_status"] == 200, meta

            # The shop ships the order; the worker's monitor reports it after the task ended.
            httpx.post(
                f"{shop.url}/admin/orders/{order}/status", json={"status": "shipped"}, timeout=10
            ).raise_for_status()
            deadline = time.monotonic() + 60
            while gw.task(task_id).latest_state is not OrderState.SHIPPED:
                assert time.monotonic() < deadline, worker.log_tail()
                time.sleep(0.2)
            shipped = gw.task(task_id).history[-1]
            assert shipped.evidence_ref is not None
            assert (evidence / f"{shipped.evidence_ref}.png").read_bytes().startswith(PNG_MAGIC)

        pngs = sorted(str(p) for p in (evidence / task_id).glob("*.png"))
        print("evidence screenshots:\n" + "\n".join(pngs))
        (tmp_path / "evidence-pngs.txt").write_text("\n".join(pngs) + "\n")
        assert len(pngs) >= 5
    finally:
        worker.stop()
        adapter.stop()
        gateway.stop()
        shop.stop()
