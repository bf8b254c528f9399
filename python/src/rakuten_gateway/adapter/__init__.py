"""The site-adapter kit: the trading worker's site adapter protocol v1
(``docs/site-adapter.openapi.yaml``) served over the steps a site object provides.

    from rakuten_gateway.adapter import SiteAdapter, serve

    class MySite(SiteAdapter):
        async def orders_list(self, page: int) -> ListValue: ...   # the steps you verified

    serve(MySite(), port=31111, keys_db="data/site-adapter-keys.db")

- :mod:`.protocol`: values, requests, evidence, and the step failures with their codes.
- :mod:`.steps`: :class:`SiteAdapter` / :class:`SyncSiteAdapter` (unprovided steps answer 5003),
  :class:`PointOfNoReturn`.
- :mod:`.app`: :func:`create_app`, the ASGI app (evidence, idempotency keys, code mapping,
  answer bound). :mod:`.keys`: the keys' SQLite store. :mod:`.serve`: :func:`serve` on loopback
  and the shared command line.
- :mod:`.browser`: :class:`Browser`, Playwright on the system Chromium (extra ``playwright``).
- :mod:`.shop_sim`: the reference adapter for the simulated shop. :mod:`.template`: the file to
  copy for the real site.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .app import MAX_ANSWER_BYTES, create_app
from .protocol import (
    PROTOCOL_VERSION,
    CartLine,
    CartLineValue,
    CartValue,
    ConfirmValue,
    DetailValue,
    Evidence,
    HumanChallenge,
    ListedOrder,
    ListValue,
    LoggedOut,
    NoAnswer,
    NotVerified,
    OrderItem,
    PayRequest,
    PayValue,
    Remark,
    StepError,
    StepTimeout,
    SubmitRequest,
    UnexpectedPage,
)
from .serve import run_cli, serve
from .steps import PointOfNoReturn, SiteAdapter, SyncSiteAdapter

if TYPE_CHECKING:
    from .browser import Browser

__all__ = [
    "MAX_ANSWER_BYTES",
    "PROTOCOL_VERSION",
    "Browser",
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
    "PointOfNoReturn",
    "Remark",
    "SiteAdapter",
    "StepError",
    "StepTimeout",
    "SubmitRequest",
    "SyncSiteAdapter",
    "UnexpectedPage",
    "create_app",
    "run_cli",
    "serve",
]


def __getattr__(name: str) -> Any:
    # The browser helpers need Playwright (extra `playwright`): imported when first used.
    if name == "Browser":
        from .browser import Browser  # noqa: PLC0415

        return Browser
    raise AttributeError(name)
