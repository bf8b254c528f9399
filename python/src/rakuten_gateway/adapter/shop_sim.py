"""The reference adapter: the simulated shop (``crates/shop-sim``) worked in headless Chromium
the way a person works it, written with the kit and :class:`~rakuten_gateway.adapter.Browser`.

Each step opens the page, fills the fields, presses the button and reads the page it lands on;
values come from the state the shop embeds in each page
(``<script id="__INITIAL_STATE__" type="application/json">``), evidence from ``capture()``.
It passes ``trading-worker adapter-check``; a real-site adapter has the same shape.

    python -m rakuten_gateway.adapter.shop_sim --shop-url http://127.0.0.1:31120
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from .browser import Browser
from .protocol import (
    CartLine,
    CartLineValue,
    CartValue,
    ConfirmValue,
    DetailValue,
    Evidence,
    ListedOrder,
    ListValue,
    LoggedOut,
    NoAnswer,
    OrderItem,
    PayRequest,
    PayValue,
    Remark,
    SubmitRequest,
    UnexpectedPage,
)
from .serve import run_cli
from .steps import PointOfNoReturn, SiteAdapter

__all__ = ["ShopSimAdapter", "main"]

_STATE_JS = (
    "() => { const e = document.getElementById('__INITIAL_STATE__');"
    " return e ? JSON.parse(e.textContent) : null; }"
)


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


class ShopSimAdapter(SiteAdapter):
    """The simulated shop at ``base_url``, logged in with the session cookie ``session``."""

    name = "shop-sim-python-playwright"

    def __init__(
        self, base_url: str, *, session: str = "sim-session", browser: Browser | None = None
    ) -> None:
        self.base = base_url.rstrip("/")
        self.account = self.base
        self.session = session
        self.browser = browser or Browser()

    async def start(self) -> None:
        await self.browser.start()
        await self.browser.add_cookie("session", self.session, self.base + "/")

    async def close(self) -> None:
        await self.browser.close()

    async def capture(self) -> Evidence | None:
        return await self.browser.capture()

    # ------------------------------------------------------------------------------------------
    # Reading a page

    async def _read(self, status: int) -> dict[str, Any]:
        """The page's state, or the failure the page shows: a 5xx is 5006, a page without state
        5002, the login page 5001, the shop's error page 5002."""
        url = self.browser.page.url
        if status >= 500:
            raise NoAnswer(f"{url}: HTTP {status}")
        state = await self.browser.evaluate(_STATE_JS)
        if not isinstance(state, dict):
            raise UnexpectedPage(f"{url}: no page state (HTTP {status})")
        if state.get("logged_in") is False:
            raise LoggedOut(f"{url}: the site session is logged out")
        if state.get("page") == "error":
            msg = _dict(state.get("error")).get("message", "error page")
            raise UnexpectedPage(f"{url}: HTTP {status}: {msg}")
        return state

    async def _open(self, path: str) -> dict[str, Any]:
        return await self._read(await self.browser.open(self.base + path))

    # ------------------------------------------------------------------------------------------
    # Steps

    async def session_check(self) -> bool:
        try:
            await self._open("/orders?page=1")
        except LoggedOut:
            return False
        return True

    async def cart_add(self, line: CartLine) -> None:
        # Start from an empty cart: leftovers of an interrupted task are never ordered along.
        await self._open("/cart")
        if await self.browser.has("#clear-cart"):
            await self._read(await self.browser.press("#clear-cart"))
        await self._open(f"/items/{line.item_id}")
        if line.variant_id is not None:
            await self.browser.select("#variant_id", line.variant_id)
        await self.browser.fill("#quantity", str(line.quantity))
        await self._read(await self.browser.press("#add-to-cart-button"))

    async def cart_check(self) -> CartValue:
        cart = _dict((await self._open("/cart")).get("cart"))
        lines = cart.get("lines")
        if not isinstance(lines, list) or not isinstance(cart.get("subtotal_yen"), int):
            raise UnexpectedPage(f"{self.browser.page.url}: page lacks the cart")
        return CartValue(
            lines=[
                CartLineValue(
                    item_id=int(ln.get("item_id", 0)),
                    variant_id=ln.get("variant_id"),
                    quantity=int(ln.get("quantity", 0)),
                    unit_price_yen=int(ln.get("unit_price_yen", 0)),
                )
                for ln in map(_dict, lines)
            ],
            subtotal_yen=cart["subtotal_yen"],
        )

    def _confirm(self, state: dict[str, Any]) -> ConfirmValue:
        c = _dict(state.get("confirm"))
        payable = c.get("payable_yen")
        if not isinstance(payable, int):
            raise UnexpectedPage(f"{self.browser.page.url}: page lacks the payable amount")
        return ConfirmValue(
            subtotal_yen=int(c.get("subtotal_yen", payable)),
            shipping_yen=int(c.get("shipping_yen", 0)),
            payable_yen=payable,
            payment_method=str(c.get("payment_method") or "unknown"),
            pay_deadline=c.get("pay_deadline"),
        )

    async def order_confirm(self) -> ConfirmValue:
        await self._open("/cart")
        if not await self.browser.has("#to-confirm"):
            raise UnexpectedPage(
                f"{self.browser.page.url}: no way to the confirm page (empty cart?)"
            )
        return self._confirm(await self._read(await self.browser.follow("#to-confirm")))

    async def order_submit(self, req: SubmitRequest, point: PointOfNoReturn) -> str:
        shown = self._confirm(await self._open("/order/confirm"))
        if shown.payable_yen != req.confirm.payable_yen:
            raise UnexpectedPage(
                f"the confirm page now shows {shown.payable_yen} yen, not the "
                f"{req.confirm.payable_yen} yen the amount guard accepted: not submitted"
            )
        await self.browser.fill("#note", req.note)
        state = await self._read(await self.browser.press("#place-order", point=point))
        number = _dict(state.get("order")).get("order_number")
        if not isinstance(number, str) or not number:
            raise UnexpectedPage(f"{self.browser.page.url}: page lacks the order number")
        return number

    async def order_pay(self, req: PayRequest, point: PointOfNoReturn) -> PayValue:
        await self._open(f"/orders/{quote(req.site_order_id, safe='')}")
        state = await self._read(await self.browser.press("#pay", point=point))
        p = _dict(state.get("payment"))
        status = p.get("status")
        if status == "paid":
            return PayValue.paid()
        if status == "challenge_required":
            return PayValue.challenge_required(str(p.get("challenge") or "challenge"))
        if status == "awaiting_payment":
            return PayValue.awaiting_payment(
                f"コンビニ払い: 払込票番号 {p.get('slip_number') or '?'}", p.get("pay_deadline")
            )
        raise UnexpectedPage(f"{self.browser.page.url}: page lacks a known payment status")

    async def orders_list(self, page: int) -> ListValue:
        state = await self._open(f"/orders?page={page}")
        data = state.get("orderListData")
        if not isinstance(data, dict) or not isinstance(data.get("orders"), list):
            raise UnexpectedPage(
                f"{self.browser.page.url}: page lacks orderListData (page changed?)"
            )
        orders = []
        for o in map(_dict, data["orders"]):
            number, date = o.get("order_number"), o.get("order_date")
            if not isinstance(number, str) or not isinstance(date, str):
                raise UnexpectedPage(f"{self.browser.page.url}: an order lacks number or date")
            if "note" not in o:
                remark = Remark.not_shown()
            elif o["note"] is None or isinstance(o["note"], str):
                remark = Remark.of_text(o["note"])
            else:
                raise UnexpectedPage(f"{self.browser.page.url}: a remark that is not text")
            orders.append(
                ListedOrder(
                    order_number=number,
                    order_date=date,
                    shop_id=int(o.get("shop_id") or 0),
                    shop_name=str(o.get("shop_name") or ""),
                    items=[
                        OrderItem(
                            item_id=int(i.get("item_id") or 0),
                            item_name=str(i.get("item_name") or ""),
                            item_url=str(i.get("item_url") or ""),
                        )
                        for i in map(_dict, o.get("items") or [])
                    ],
                    remark=remark,
                )
            )
        has_next = int(data.get("page") or 1) < int(data.get("total_pages") or 1)
        return ListValue(orders=orders, has_next=has_next, raw=data)

    async def orders_detail(self, order_number: str) -> DetailValue:
        state = await self._open(f"/orders/{quote(order_number, safe='')}")
        d = state.get("orderDetail")
        if not isinstance(d, dict) or not isinstance(d.get("found"), bool):
            raise UnexpectedPage(f"{self.browser.page.url}: page lacks orderDetail")
        label = _dict(d.get("order")).get("stage_label")
        return DetailValue(
            found=d["found"], stage_label=label if isinstance(label, str) else None, raw=d
        )


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m rakuten_gateway.adapter.shop_sim`` / ``rakuten-shop-sim-adapter``."""

    def add(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--shop-url",
            default=os.environ.get("RAKUTEN_SITE_BASE_URL"),
            required="RAKUTEN_SITE_BASE_URL" not in os.environ,
            help="the simulated shop (env RAKUTEN_SITE_BASE_URL)",
        )
        p.add_argument(
            "--session",
            default=os.environ.get("RAKUTEN_SITE_SESSION", "sim-session"),
            help="the shop's session cookie (env RAKUTEN_SITE_SESSION)",
        )

    run_cli(
        lambda a: ShopSimAdapter(a.shop_url, session=a.session),
        description="Site adapter (protocol v1) for the simulated shop, in headless Chromium",
        add_arguments=add,
        argv=argv,
    )


if __name__ == "__main__":
    main()
