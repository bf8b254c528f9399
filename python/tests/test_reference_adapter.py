"""The reference adapter (Playwright, headless Chromium) against shop-sim: the worker's
conformance kit, and a step tested on recorded pages with the shop gone."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import httpx
import pytest

from rakuten_gateway.adapter import Browser
from rakuten_gateway.adapter.shop_sim import ShopSimAdapter
from services import Process, binary, start_python_adapter, start_shop

pytestmark = pytest.mark.browser


def test_the_reference_adapter_passes_the_workers_conformance_kit(
    shop: Process, tmp_path: Path
) -> None:
    adapter = start_python_adapter(tmp_path, shop.url)
    try:
        r = subprocess.run(
            [
                binary("trading-worker"),
                "adapter-check",
                "--url",
                adapter.url,
                "--shop-url",
                shop.url,
                "--timeout-seconds",
                "60",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            cwd=tmp_path,
        )
    finally:
        adapter.stop()
    print(r.stdout)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(("PASS", "FAIL"))]
    assert r.returncode == 0, r.stdout + r.stderr + adapter.log_tail()
    assert [ln.split()[1] for ln in lines] == [
        "info",
        "session",
        "happy-path",
        "repeat-submit-refused",
        "sold-out",
        "amount-over-limit",
        "3-d-secure",
        "dropped-answer-after-submit",
        "logged-out",
        "order-list-paging",
    ]
    assert all(ln.startswith("PASS") for ln in lines)
    assert "10 of 10 checks passed" in r.stdout


def test_a_read_step_is_tested_on_recorded_pages_with_the_site_gone(tmp_path: Path) -> None:
    own_shop = start_shop(tmp_path / "shop")
    har = tmp_path / "orders.har"
    try:
        httpx.post(
            f"{own_shop.url}/admin/orders/seed",
            json={"orders": [{"order_date": "2026-08-01T00:00:00Z", "status": "shipped"}]},
            timeout=10,
        ).raise_for_status()

        async def record() -> tuple[list[str], str | None]:
            site = ShopSimAdapter(own_shop.url, browser=Browser(record_har=str(har)))
            await site.start()
            try:
                page = await site.orders_list(1)
                first = page.orders[0].order_number
                detail = await site.orders_detail(first)
            finally:
                await site.close()
            return [o.order_number for o in page.orders], detail.stage_label

        recorded = asyncio.run(record())
    finally:
        own_shop.stop()
    assert har.stat().st_size > 0
    assert recorded[1] == "出荷"

    async def replay() -> tuple[list[str], str | None]:
        # The shop is stopped: every page comes from the recording, nothing from the network.
        site = ShopSimAdapter(own_shop.url, browser=Browser(replay_har=str(har)))
        await site.start()
        try:
            page = await site.orders_list(1)
            detail = await site.orders_detail(page.orders[0].order_number)
            evidence = await site.capture()
        finally:
            await site.close()
        assert evidence is not None
        assert evidence.complete
        return [o.order_number for o in page.orders], detail.stage_label

    assert asyncio.run(replay()) == recorded
