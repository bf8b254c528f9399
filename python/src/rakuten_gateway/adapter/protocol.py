"""The site adapter protocol, version 1 (``docs/site-adapter.openapi.yaml``): the values each
step returns, the requests it is given, the evidence every answer carries, and the failures a
step raises (:class:`StepError` and its codes).
"""

from __future__ import annotations

import base64
from typing import Any, ClassVar, Literal, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "CODES",
    "PROTOCOL_VERSION",
    "CartLine",
    "CartLineValue",
    "CartValue",
    "ConfirmValue",
    "DetailValue",
    "Evidence",
    "HumanChallenge",
    "ListValue",
    "ListedOrder",
    "LoggedOut",
    "NoAnswer",
    "NotVerified",
    "OrderItem",
    "PayRequest",
    "PayValue",
    "Remark",
    "StepError",
    "StepTimeout",
    "SubmitRequest",
    "UnexpectedPage",
]

#: The protocol version this kit speaks.
PROTOCOL_VERSION = 1

#: Every code an adapter may answer (5004 is the worker's own amount guard, never sent).
CODES = frozenset({5001, 5002, 5003, 5005, 5006, 5007})

#: The codes that mean "the action may have happened".
AMBIGUOUS = frozenset({5006, 5007})


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Evidence(_Wire):
    """The page an operation ended on: the worker stores it before it journals or reports."""

    url: str
    method: str
    #: 0: no response arrived.
    http_status: int
    html: str | None = None
    png_base64: str | None = None

    @classmethod
    def of(
        cls, *, url: str, method: str, http_status: int, html: str | None, png: bytes | None
    ) -> Self:
        """Evidence from a page's parts, the screenshot as raw PNG bytes."""
        return cls(
            url=url,
            method=method,
            http_status=http_status,
            html=html,
            png_base64=base64.b64encode(png).decode("ascii") if png is not None else None,
        )

    @property
    def complete(self) -> bool:
        """URL, method, status and HTML all there (what the conformance kit asks of a value)."""
        return bool(self.url and self.method and self.http_status and self.html is not None)


class CartLine(_Wire):
    """Step 01's request: the cart then holds exactly this line."""

    item_id: int
    variant_id: str | None = None
    quantity: int = Field(ge=1)


class CartLineValue(_Wire):
    """A line of the cart as the cart page shows it."""

    item_id: int
    variant_id: str | None = None
    quantity: int
    unit_price_yen: int


class CartValue(_Wire):
    """Step 02's value."""

    lines: list[CartLineValue]
    subtotal_yen: int


class ConfirmValue(_Wire):
    """Step 03's value; the worker's amount guard reads ``payable_yen``."""

    subtotal_yen: int
    shipping_yen: int
    payable_yen: int
    payment_method: str
    pay_deadline: AwareDatetime | None = None


class SubmitRequest(_Wire):
    """Step 04's request: place the order if the confirm page still shows
    ``confirm.payable_yen``; write ``note`` (the task id) into the remark field."""

    idempotency_key: str
    note: str
    confirm: ConfirmValue


class PayRequest(_Wire):
    """Step 05's request."""

    idempotency_key: str
    site_order_id: str


class PayValue(_Wire):
    """Step 05's value: ``paid``, ``challenge_required`` (never bypassed) or
    ``awaiting_payment`` (a deferred method)."""

    status: Literal["paid", "challenge_required", "awaiting_payment"]
    challenge: str | None = None
    pay_deadline: AwareDatetime | None = None
    detail: str | None = None

    @model_validator(mode="after")
    def _fields_of_status(self) -> Self:
        if self.status == "challenge_required" and self.challenge is None:
            raise ValueError("challenge_required needs `challenge`")
        if self.status == "awaiting_payment" and self.detail is None:
            raise ValueError("awaiting_payment needs `detail`")
        return self

    @classmethod
    def paid(cls) -> Self:
        """Paid."""
        return cls(status="paid")

    @classmethod
    def challenge_required(cls, challenge: str) -> Self:
        """A 3-D Secure / SMS challenge: reported, never bypassed."""
        return cls(status="challenge_required", challenge=challenge)

    @classmethod
    def awaiting_payment(cls, detail: str, pay_deadline: AwareDatetime | None = None) -> Self:
        """A deferred payment (convenience store …), with what the site said."""
        return cls(status="awaiting_payment", detail=detail, pay_deadline=pay_deadline)

    def wire(self) -> dict[str, Any]:
        """The protocol's form: only the fields of this status."""
        out: dict[str, Any] = {"status": self.status}
        if self.status == "challenge_required":
            out["challenge"] = self.challenge
        elif self.status == "awaiting_payment":
            out["detail"] = self.detail
            out["pay_deadline"] = (
                None if self.pay_deadline is None else self.pay_deadline.isoformat()
            )
        return out


class Remark(_Wire):
    """An order's remark as the order list shows it: exactly as submitted (``text``), shown
    and ``empty``, or ``not_shown`` (a site that does not show remarks, or rewrites them: the
    recovery check then asks a person)."""

    kind: Literal["text", "empty", "not_shown"]
    text: str | None = None

    @model_validator(mode="after")
    def _text_of_kind(self) -> Self:
        if (self.kind == "text") != (self.text is not None):
            raise ValueError("`text` is set exactly when kind is `text`")
        return self

    @classmethod
    def of_text(cls, text: str | None) -> Self:
        """A shown remark: ``empty`` when blank, else the text (trimmed)."""
        if text is None or not text.strip():
            return cls(kind="empty")
        return cls(kind="text", text=text.strip())

    @classmethod
    def not_shown(cls) -> Self:
        """The page shows no remarks."""
        return cls(kind="not_shown")

    def wire(self) -> dict[str, Any]:
        """The protocol's form (``text`` only for a text remark)."""
        return (
            {"kind": self.kind, "text": self.text} if self.kind == "text" else {"kind": self.kind}
        )


class OrderItem(_Wire):
    """An item of a listed order."""

    item_id: int
    item_name: str
    item_url: str


class ListedOrder(_Wire):
    """An order on the order list, with its remark."""

    order_number: str
    order_date: str
    shop_id: int
    shop_name: str
    items: list[OrderItem]
    remark: Remark


class ListValue(_Wire):
    """One page (1-based) of the order list, newest first."""

    orders: list[ListedOrder]
    has_next: bool
    #: The page's raw state, kept for the account-query channel.
    raw: Any = None

    def wire(self) -> dict[str, Any]:
        """The protocol's form."""
        return {
            "orders": [
                {**o.model_dump(mode="json", exclude={"remark"}), "remark": o.remark.wire()}
                for o in self.orders
            ],
            "has_next": self.has_next,
            "raw": self.raw,
        }


class DetailValue(_Wire):
    """One order's detail: ``found`` ``False`` is not an error (new orders take minutes)."""

    found: bool
    #: The delivery stage as the page shows it (注文確認, 発送準備中, 出荷, 配達完了 …).
    stage_label: str | None = None
    raw: Any = None


# ---------------------------------------------------------------------------------------------
# Failures


class StepError(Exception):
    """A step's failure with its protocol code. Raise a subclass."""

    code: ClassVar[int] = 5002

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class LoggedOut(StepError):
    """5001: the site session is logged out (a person must log in again)."""

    code = 5001


class UnexpectedPage(StepError):
    """5002: the page is not what the step expects, or the site clearly refused: nothing
    happened. Never after pressing an irreversible button (the kit answers 5006 there)."""

    code = 5002


class NotVerified(StepError):
    """5003: this step is not verified on recorded real pages; nothing was sent to the site."""

    code = 5003


class HumanChallenge(StepError):
    """5005: the site asks for a human challenge (3-D Secure, SMS); never bypass it."""

    code = 5005


class NoAnswer(StepError):
    """5006: no answer, a broken connection or a server error: the action may have happened."""

    code = 5006


class StepTimeout(StepError):
    """5007: the step timed out: the action may have happened."""

    code = 5007
