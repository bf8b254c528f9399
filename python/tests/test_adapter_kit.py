"""The site-adapter kit over site objects made for each rule (no browser): steps not provided,
evidence, the idempotency fence across restarts, the point of no return, timeouts, the answer
bound, request bodies, loopback-only listening, and the real-site template."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from rakuten_gateway.adapter import (
    CartLine,
    CartValue,
    ConfirmValue,
    DetailValue,
    Evidence,
    ListValue,
    LoggedOut,
    NotVerified,
    PayRequest,
    PayValue,
    PointOfNoReturn,
    SiteAdapter,
    StepError,
    SubmitRequest,
    SyncSiteAdapter,
    UnexpectedPage,
    create_app,
)
from rakuten_gateway.adapter import app as kit_app
from rakuten_gateway.adapter.serve import check_listen_host, serve
from rakuten_gateway.adapter.template import RealSiteAdapter

CONFIRM = {"subtotal_yen": 2980, "shipping_yen": 0, "payable_yen": 2980, "payment_method": "card"}


def submit_body(key: str = "task-1") -> dict[str, Any]:
    return {"idempotency_key": key, "note": key, "confirm": CONFIRM}


class Recording(SiteAdapter):
    """Records calls; each step's behaviour is set by the test."""

    name = "recording"
    account = "acct-1"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.captures = 0
        self.submit_behaviour: str = "ok"
        self.orders = 0

    async def capture(self) -> Evidence | None:
        self.captures += 1
        return Evidence.of(
            url=f"https://shop.test/page/{len(self.calls)}",
            method="POST" if self.calls and self.calls[-1].startswith("order_") else "GET",
            http_status=200,
            html="<html>page</html>",
            png=b"\x89PNG\r\n\x1a\nfake",
        )

    async def cart_check(self) -> CartValue:
        self.calls.append("cart_check")
        return CartValue(lines=[], subtotal_yen=0)

    async def order_confirm(self) -> ConfirmValue:
        self.calls.append("order_confirm")
        raise LoggedOut("login page")

    async def orders_detail(self, order_number: str) -> DetailValue:
        self.calls.append(f"orders_detail:{order_number}")
        return DetailValue(found=True, stage_label="発送準備中", raw={"n": order_number})

    async def order_submit(self, req: SubmitRequest, point: PointOfNoReturn) -> str:
        self.calls.append(f"order_submit:{req.idempotency_key}")
        b = self.submit_behaviour
        if b == "refuse":
            raise UnexpectedPage("the confirm page shows another amount: not submitted")
        if b == "not-verified":
            raise NotVerified("not yet")
        point.cross()
        if b == "crash-after":
            raise RuntimeError("browser crashed after the click")
        if b == "error-page-after":
            raise UnexpectedPage("an error page after the click")
        if b == "hang-after":
            await asyncio.sleep(30)
        self.orders += 1
        return f"order-{self.orders}"

    async def order_pay(self, req: PayRequest, point: PointOfNoReturn) -> PayValue:
        self.calls.append(f"order_pay:{req.site_order_id}")
        point.cross()
        return PayValue.challenge_required("3d_secure")


@pytest.fixture
def site() -> Recording:
    return Recording()


@pytest.fixture
def http(site: Recording, tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(site, keys_db=tmp_path / "keys.db", step_timeout=0.5)) as c:
        yield c


def post(c: TestClient, path: str, body: Any = None) -> dict[str, Any]:
    r = c.post(path, json={} if body is None else body)
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    answer: dict[str, Any] = r.json()
    assert answer["protocol"] == 1
    return answer


def test_info_names_the_adapter_and_its_account(http: TestClient) -> None:
    assert http.get("/v1/info").json() == {"protocol": 1, "name": "recording", "account": "acct-1"}


def test_a_step_not_provided_answers_5003_and_touches_nothing(
    http: TestClient, site: Recording
) -> None:
    for path, b in [
        ("/v1/cart/add", {"item_id": 1001, "quantity": 1}),
        ("/v1/session/check", {}),
        ("/v1/orders/list", {"page": 1}),
    ]:
        a = post(http, path, b)
        assert a["ok"] is False
        assert a["error"]["code"] == 5003
        assert "evidence" not in a
    assert site.calls == []
    assert site.captures == 0


def test_a_value_and_a_failure_both_carry_the_evidence_of_the_page(
    http: TestClient, site: Recording
) -> None:
    ok = post(http, "/v1/orders/detail", {"order_number": "306087-1"})
    assert ok["ok"] is True
    assert ok["value"] == {"found": True, "stage_label": "発送準備中", "raw": {"n": "306087-1"}}
    ev = ok["evidence"]
    assert (ev["url"], ev["method"], ev["http_status"], ev["html"]) == (
        "https://shop.test/page/1",
        "GET",
        200,
        "<html>page</html>",
    )
    assert base64.b64decode(ev["png_base64"]).startswith(b"\x89PNG")

    failed = post(http, "/v1/order/confirm")
    assert failed["error"] == {"code": 5001, "message": "login page"}
    assert failed["evidence"]["html"] == "<html>page</html>"
    assert site.captures == 2


def test_a_repeat_submit_under_a_used_key_is_refused_without_reaching_the_site(
    http: TestClient, site: Recording
) -> None:
    first = post(http, "/v1/order/submit", submit_body())
    assert first["value"] == {"site_order_id": "order-1"}
    again = post(http, "/v1/order/submit", submit_body())
    assert again["error"]["code"] == 5002
    assert "order order-1" in again["error"]["message"]
    assert site.calls == ["order_submit:task-1"]
    # Pay keys are their own: the same task id pays once.
    assert post(http, "/v1/order/pay", {"idempotency_key": "task-1", "site_order_id": "order-1"})[
        "value"
    ] == {"status": "challenge_required", "challenge": "3d_secure"}
    assert (
        post(http, "/v1/order/pay", {"idempotency_key": "task-1", "site_order_id": "order-1"})[
            "error"
        ]["code"]
        == 5002
    )


def test_the_key_fence_holds_across_a_restart_of_the_adapter(tmp_path: Path) -> None:
    keys = tmp_path / "keys.db"
    one = Recording()
    with TestClient(create_app(one, keys_db=keys)) as c:
        assert post(c, "/v1/order/submit", submit_body("task-9"))["ok"]
    two = Recording()
    with TestClient(create_app(two, keys_db=keys)) as c:
        a = post(c, "/v1/order/submit", submit_body("task-9"))
    assert a["error"]["code"] == 5002
    assert "order-1" in a["error"]["message"]
    assert two.calls == []


def test_a_clear_refusal_before_the_click_frees_the_key(http: TestClient, site: Recording) -> None:
    site.submit_behaviour = "refuse"
    refused = post(http, "/v1/order/submit", submit_body())
    assert refused["error"]["code"] == 5002
    assert "evidence" in refused
    site.submit_behaviour = "ok"
    assert post(http, "/v1/order/submit", submit_body())["value"] == {"site_order_id": "order-1"}


def test_a_step_not_verified_frees_its_key_and_is_not_captured(
    http: TestClient, site: Recording
) -> None:
    site.submit_behaviour = "not-verified"
    a = post(http, "/v1/order/submit", submit_body())
    assert a["error"]["code"] == 5003
    assert "evidence" not in a
    assert site.captures == 0
    assert http.app.state.keys.outcome("submit:task-1") is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("behaviour", ["crash-after", "error-page-after", "hang-after"])
def test_anything_but_a_value_after_the_click_is_5006_and_keeps_the_key(
    http: TestClient, site: Recording, behaviour: str
) -> None:
    site.submit_behaviour = behaviour
    a = post(http, "/v1/order/submit", submit_body())
    assert a["error"]["code"] == 5006
    assert "evidence" in a
    site.submit_behaviour = "ok"
    again = post(http, "/v1/order/submit", submit_body())
    assert again["error"]["code"] == 5002
    assert "no clear answer" in again["error"]["message"]
    assert site.orders == 0


class Slow(SiteAdapter):
    async def cart_check(self) -> CartValue:
        await asyncio.sleep(30)
        raise AssertionError("not reached")

    async def orders_list(self, page: int) -> ListValue:
        raise StepError("a custom failure")

    async def session_check(self) -> bool:
        return "yes"  # type: ignore[return-value]

    async def order_confirm(self) -> ConfirmValue:
        err = StepError("the worker's own code")
        err.code = 5004  # type: ignore[misc]
        raise err


def test_timeouts_and_odd_failures_map_to_protocol_codes(tmp_path: Path) -> None:
    with TestClient(create_app(Slow(), keys_db=tmp_path / "k.db", step_timeout=0.2)) as c:
        assert post(c, "/v1/cart/check")["error"]["code"] == 5007
        assert post(c, "/v1/orders/list", {"page": 1})["error"]["code"] == 5002
        wrong = post(c, "/v1/session/check")
        assert wrong["error"]["code"] == 5002
        assert "wrong shape" in wrong["error"]["message"]
        assert post(c, "/v1/order/confirm")["error"]["code"] == 5002  # never 5004


def test_bad_request_bodies_are_refused_without_a_step(http: TestClient, site: Recording) -> None:
    for path, raw in [
        ("/v1/orders/detail", b"{"),
        ("/v1/orders/detail", b'{"order_number": 7}'),
        ("/v1/orders/list", b'{"page": 0}'),
        ("/v1/order/submit", b'{"idempotency_key": "k"}'),
        ("/v1/cart/check", b"[]"),
    ]:
        a = http.post(path, content=raw, headers={"content-type": "application/json"}).json()
        assert a["error"]["code"] == 5002, (path, raw)
        assert "bad request body" in a["error"]["message"]
    big = b'{"page": 1, "x": "' + b"a" * (kit_app.MAX_REQUEST_BYTES + 1) + b'"}'
    assert http.post("/v1/orders/list", content=big).json()["error"]["code"] == 5002
    assert site.calls == []


def test_answers_are_kept_under_the_bound_screenshot_first(
    monkeypatch: pytest.MonkeyPatch, http: TestClient
) -> None:
    monkeypatch.setattr(kit_app, "MAX_ANSWER_BYTES", 230)  # the answer without its PNG is 219
    a = post(http, "/v1/orders/detail", {"order_number": "n"})
    assert a["ok"] is True
    assert a["evidence"]["png_base64"] is None
    assert a["evidence"]["html"] == "<html>page</html>"

    answer = {
        "protocol": 1,
        "ok": True,
        "value": {"orders": [], "has_next": False, "raw": "r" * 5000},
        "evidence": {"url": "u", "method": "GET", "http_status": 200, "html": "h" * 5000},
    }
    fitted = kit_app.fit(answer, limit=3000)
    assert len(fitted) <= 3000
    assert b"cut to fit" in fitted
    tiny = kit_app.fit({"protocol": 1, "ok": True, "value": {"x": "v" * 500}}, limit=100)
    assert b'"code":5006' in tiny


class Blocking(SyncSiteAdapter):
    name = "sync"

    def __init__(self) -> None:
        self.threads: set[int] = set()

    def capture(self) -> Evidence | None:
        self.threads.add(threading.get_ident())
        return Evidence(url="u", method="GET", http_status=200, html="<p>")

    def orders_list(self, page: int) -> ListValue:
        self.threads.add(threading.get_ident())
        return ListValue(orders=[], has_next=page < 2, raw=None)

    def cart_add(self, line: CartLine) -> None:
        self.threads.add(threading.get_ident())


def test_blocking_steps_run_in_turn_on_one_thread_of_their_own(tmp_path: Path) -> None:
    s = Blocking()
    with TestClient(create_app(s, keys_db=tmp_path / "k.db")) as c:
        assert post(c, "/v1/orders/list", {"page": 1})["value"] == {
            "orders": [],
            "has_next": True,
            "raw": None,
        }
        assert post(c, "/v1/cart/add", {"item_id": 1, "quantity": 2})["value"] is None
        assert post(c, "/v1/cart/check")["error"]["code"] == 5003
    assert len(s.threads) == 1
    assert threading.get_ident() not in s.threads


@pytest.mark.parametrize("host", ["127.0.0.1", "127.9.9.9", "::1", "localhost"])
def test_loopback_hosts_may_listen(host: str) -> None:
    check_listen_host(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.2", "192.168.1.5", "::", "example.com"])
def test_other_hosts_are_refused_unless_allowed(host: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"loopback|not an IP"):
        serve(Recording(), host=host, port=0, keys_db=tmp_path / "k.db")
    if host != "example.com":
        check_listen_host(host, allow_remote=True)


def test_the_command_line_refuses_a_remote_listen_address(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "rakuten_gateway.adapter.shop_sim",
            "--shop-url",
            "http://127.0.0.1:9",
            "--listen",
            "0.0.0.0:31111",
            "--keys-db",
            str(tmp_path / "k.db"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 2
    assert "not loopback" in r.stderr


def test_the_template_answers_5003_for_every_operation_and_touches_nothing(
    tmp_path: Path,
) -> None:
    site = RealSiteAdapter()
    # No `with`: the browser is not started, so any touch of it would fail the step loudly.
    c = TestClient(create_app(site, keys_db=tmp_path / "k.db"))
    bodies: dict[str, Any] = {
        "/v1/session/check": {},
        "/v1/cart/add": {"item_id": 1001, "quantity": 1},
        "/v1/cart/check": {},
        "/v1/order/confirm": {},
        "/v1/order/submit": submit_body(),
        "/v1/order/pay": {"idempotency_key": "task-1", "site_order_id": "o-1"},
        "/v1/orders/list": {"page": 1},
        "/v1/orders/detail": {"order_number": "o-1"},
    }
    for path, b in bodies.items():
        a = post(c, path, b)
        assert a["error"]["code"] == 5003, path
        assert "not verified" in a["error"]["message"]
        assert "evidence" not in a
    keys = create_app(site, keys_db=tmp_path / "k.db").state.keys
    assert keys.outcome("submit:task-1") is None
    assert keys.outcome("pay:task-1") is None


def test_the_template_prints_itself_to_be_copied() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "rakuten_gateway.adapter.template"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "class RealSiteAdapter(SiteAdapter)" in r.stdout
    assert "from rakuten_gateway.adapter import" in r.stdout
