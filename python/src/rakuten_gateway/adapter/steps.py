"""What a site object offers the kit: the steps it has verified, and ``capture``.

Subclass :class:`SiteAdapter` (``async`` steps) or :class:`SyncSiteAdapter` (plain functions,
all run on one thread of their own) and override the steps you have verified on recorded real
pages. A step you do not override answers 5003 and the kit touches nothing: not the site, not
the idempotency keys, not the browser. Any object with some of these methods works too.

After every step that ran — value or failure — the kit calls ``capture()`` for the evidence of
the page the step ended on, so a step never has to remember it.
"""

from __future__ import annotations

from .protocol import (
    CartLine,
    CartValue,
    ConfirmValue,
    DetailValue,
    Evidence,
    ListValue,
    NotVerified,
    PayRequest,
    PayValue,
    SubmitRequest,
)

__all__ = ["STEPS", "PointOfNoReturn", "SiteAdapter", "SyncSiteAdapter"]

#: Every step's method name, in protocol order.
STEPS = (
    "session_check",
    "cart_add",
    "cart_check",
    "order_confirm",
    "order_submit",
    "order_pay",
    "orders_list",
    "orders_detail",
)


class PointOfNoReturn:
    """Given to the irreversible steps (submit, pay). Call :meth:`cross` right before the click
    that may place the order or move the money. From then on anything but a returned value —
    an exception, a timeout, a :class:`~rakuten_gateway.adapter.UnexpectedPage` — is answered
    5006 ("the action may have happened"): the worker then verifies on the order list instead
    of acting again. Before it, a refusal stays a refusal (5002: nothing happened)."""

    def __init__(self) -> None:
        self._crossed = False

    def cross(self) -> None:
        """Marks the press of the irreversible button (call it just before)."""
        self._crossed = True

    @property
    def crossed(self) -> bool:
        """Whether :meth:`cross` was called."""
        return self._crossed


def _unverified(step: str) -> NotVerified:
    return NotVerified(f"{step}: not verified on recorded pages of the site; nothing sent")


class SiteAdapter:
    """Base of an adapter with ``async`` steps; every step not overridden answers 5003."""

    #: The adapter's name in ``/v1/info``.
    name: str = "python-site-adapter"
    #: The account it acts for (the worker's account-lock key).
    account: str = "default"

    async def start(self) -> None:
        """Called once before the first request (launch the browser, log in …)."""

    async def close(self) -> None:
        """Called once at shutdown."""

    async def capture(self) -> Evidence | None:
        """The page the last step ended on: URL, method, HTTP status, HTML, PNG."""
        return None

    async def session_check(self) -> bool:
        """Whether the account is logged in (a login page is ``False``, not an error)."""
        raise _unverified("session/check")

    async def cart_add(self, line: CartLine) -> None:
        """Step 01: the cart then holds exactly ``line`` (set, don't add: it may be repeated)."""
        raise _unverified("cart/add")

    async def cart_check(self) -> CartValue:
        """Step 02: the cart as the cart page shows it."""
        raise _unverified("cart/check")

    async def order_confirm(self) -> ConfirmValue:
        """Step 03: the confirm page's amounts and payment method."""
        raise _unverified("order/confirm")

    async def order_submit(self, req: SubmitRequest, point: PointOfNoReturn) -> str:
        """Step 04, irreversible: refuse (:class:`UnexpectedPage`) unless the confirm page still
        shows ``req.confirm.payable_yen``; write ``req.note`` into the remark field;
        ``point.cross()``; press the order button; return the site's order number."""
        raise _unverified("order/submit")

    async def order_pay(self, req: PayRequest, point: PointOfNoReturn) -> PayValue:
        """Step 05, irreversible: ``point.cross()``, press pay, return what the site says
        (a challenge is :meth:`PayValue.challenge_required`, never bypassed)."""
        raise _unverified("order/pay")

    async def orders_list(self, page: int) -> ListValue:
        """One page (1-based) of the order list, newest first, each order with its remark."""
        raise _unverified("orders/list")

    async def orders_detail(self, order_number: str) -> DetailValue:
        """One order's detail page with its delivery-stage label."""
        raise _unverified("orders/detail")


class SyncSiteAdapter:
    """:class:`SiteAdapter` with plain (blocking) methods, for code written with Playwright's
    sync API or ``requests``. The kit runs them all on one thread of their own, in turn."""

    name: str = "python-site-adapter"
    account: str = "default"

    def start(self) -> None:
        """Called once before the first request."""

    def close(self) -> None:
        """Called once at shutdown."""

    def capture(self) -> Evidence | None:
        """The page the last step ended on."""
        return None

    def session_check(self) -> bool:
        """See :meth:`SiteAdapter.session_check`."""
        raise _unverified("session/check")

    def cart_add(self, line: CartLine) -> None:
        """See :meth:`SiteAdapter.cart_add`."""
        raise _unverified("cart/add")

    def cart_check(self) -> CartValue:
        """See :meth:`SiteAdapter.cart_check`."""
        raise _unverified("cart/check")

    def order_confirm(self) -> ConfirmValue:
        """See :meth:`SiteAdapter.order_confirm`."""
        raise _unverified("order/confirm")

    def order_submit(self, req: SubmitRequest, point: PointOfNoReturn) -> str:
        """See :meth:`SiteAdapter.order_submit`."""
        raise _unverified("order/submit")

    def order_pay(self, req: PayRequest, point: PointOfNoReturn) -> PayValue:
        """See :meth:`SiteAdapter.order_pay`."""
        raise _unverified("order/pay")

    def orders_list(self, page: int) -> ListValue:
        """See :meth:`SiteAdapter.orders_list`."""
        raise _unverified("orders/list")

    def orders_detail(self, order_number: str) -> DetailValue:
        """See :meth:`SiteAdapter.orders_detail`."""
        raise _unverified("orders/detail")
