"""Site adapter for the real site — the file to copy and fill in.

    python -m rakuten_gateway.adapter.template > real_site_adapter.py   # prints this file

Every operation answers 5003 ("not verified"): the worker then stops the task with 5003 and
nothing is sent to the site. Turn a step on only once it is verified on recorded real pages
(see "Recording pages" in the package README): replace its ``raise NotVerified(...)`` with the
code, keep the recorded-page test next to it, then run ``trading-worker adapter-check`` against
the simulated shop with an adapter built the same way before going live.

Rules the kit already keeps for you: evidence after every step (``capture``), the idempotency
keys of submit and pay (SQLite, kept across restarts), 5006 for anything but a value after
``point.cross()``, the 32 MiB answer bound, loopback-only listening.

Your own rules:
- Never guess a step. A page that is not what the step expects: ``raise UnexpectedPage``
  (5002) — but only before ``point.cross()``.
- A login page: ``raise LoggedOut`` (5001); in ``session_check`` return ``False`` instead.
- A 3-D Secure / SMS page after pay: ``return PayValue.challenge_required("3-D Secure")``;
  never bypass it.
- The order list must show each order's remark exactly as submitted, or say
  ``Remark.not_shown()``: that is how the worker finds an order whose submit answer was lost.
"""

from __future__ import annotations

from rakuten_gateway.adapter import (
    CartLine,
    CartValue,
    ConfirmValue,
    DetailValue,
    Evidence,
    ListValue,
    NotVerified,
    PayRequest,
    PayValue,
    PointOfNoReturn,
    SiteAdapter,
    SubmitRequest,
    run_cli,
)
from rakuten_gateway.adapter.browser import Browser


class RealSiteAdapter(SiteAdapter):
    """The real site. Replace the ``raise NotVerified`` of a step once it is verified."""

    name = "rakuten-real-site"
    account = "my-account"  # the worker's account-lock key: one adapter per account

    def __init__(self) -> None:
        self.browser = Browser()
        # Your verified site code, e.g. the interactor of site_interact.py, holding the
        # logged-in browser session:
        #   self.site = SiteInteractor(page_factory=lambda: self.browser.page)

    async def start(self) -> None:
        await self.browser.start()
        # Restore the account's logged-in session (a saved cookie, a stored profile …):
        #   await self.browser.add_cookie("Rz", saved_cookie, "https://order.my.rakuten.co.jp/")

    async def close(self) -> None:
        await self.browser.close()

    async def capture(self) -> Evidence | None:
        return await self.browser.capture()

    # --- reads: wire your verified functions here first ----------------------------------------

    async def orders_list(self, page: int) -> ListValue:
        # Wiring the verified `list_recent_orders` (one order-list page):
        #   raw = await self.site.list_recent_orders(page=page)
        #   orders = [
        #       ListedOrder(
        #           order_number=o["order_number"], order_date=o["order_date"],
        #           shop_id=o["shop_id"], shop_name=o["shop_name"],
        #           items=[OrderItem(item_id=i["item_id"], item_name=i["item_name"],
        #                            item_url=i["item_url"]) for i in o["items"]],
        #           # exactly as submitted, once verified on recorded pages; until then:
        #           remark=Remark.not_shown(),
        #       )
        #       for o in raw["orders"]
        #   ]
        #   return ListValue(orders=orders, has_next=raw["has_next"], raw=raw)
        raise NotVerified("orders/list: not verified on recorded pages yet")

    async def orders_detail(self, order_number: str) -> DetailValue:
        # Wiring the verified `fetch_order_detail` / `check_order_status` (the progress bar):
        #   detail = await self.site.fetch_order_detail(order_number)
        #   if detail is None:                      # not shown (yet): not an error
        #       return DetailValue(found=False)
        #   # the progress bar's label: 注文確認, 発送準備中, 出荷 …
        #   label = await self.site.check_order_status(order_number)
        #   return DetailValue(found=True, stage_label=label, raw=detail)
        raise NotVerified("orders/detail: not verified on recorded pages yet")

    async def session_check(self) -> bool:
        # e.g. open the order list and return False on the login page:
        #   await self.browser.open("https://order.my.rakuten.co.jp/")
        #   return not await self.browser.has("form#loginInner")
        raise NotVerified("session/check: not verified on recorded pages yet")

    # --- the order steps: not verified on the real site (spec §10) -----------------------------

    async def cart_add(self, line: CartLine) -> None:
        raise NotVerified("cart/add: not verified on recorded pages yet")

    async def cart_check(self) -> CartValue:
        raise NotVerified("cart/check: not verified on recorded pages yet")

    async def order_confirm(self) -> ConfirmValue:
        raise NotVerified("order/confirm: not verified on recorded pages yet")

    async def order_submit(self, req: SubmitRequest, point: PointOfNoReturn) -> str:
        # Shape, once verified: open the confirm page; refuse (UnexpectedPage) unless it shows
        # req.confirm.payable_yen; fill the remark (備考欄) with req.note;
        #   await self.browser.press("#order-button", point=point)   # crosses the point
        # then read the order number from the page it lands on.
        raise NotVerified("order/submit: not verified on recorded pages yet")

    async def order_pay(self, req: PayRequest, point: PointOfNoReturn) -> PayValue:
        raise NotVerified("order/pay: not verified on recorded pages yet")


def main() -> None:
    """Serves the adapter (``--listen``, ``--keys-db``, … as every adapter program)."""
    run_cli(lambda _: RealSiteAdapter(), description="Site adapter for the real site")


if __name__ == "__main__":
    if __package__:
        # `python -m rakuten_gateway.adapter.template`: print this file, to copy it.
        import sys
        from pathlib import Path

        sys.stdout.write(Path(__file__).read_text(encoding="utf-8"))
    else:
        main()
