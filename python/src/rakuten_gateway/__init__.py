"""Python side of the rakuten order gateway.

- :class:`Client` / :class:`AsyncClient`: the upstream and operator calls of the gateway's HTTP
  API, typed (:mod:`rakuten_gateway.models`), every error code an exception
  (:mod:`rakuten_gateway.errors`).
- :mod:`rakuten_gateway.webhooks`: verify, read and deduplicate the gateway's alert webhooks.
- :mod:`rakuten_gateway.adapter`: the site-adapter kit — the worker's site adapter protocol v1
  served over the steps a site object provides (extra ``adapter``; browser helpers with extra
  ``playwright``).
"""

from .async_client import AsyncClient
from .client import Client
from .enums import (
    AlertEventState,
    AlertKind,
    AlertState,
    OperatorActionKind,
    OrderState,
    Outcome,
    QueryKind,
    QueryStatus,
    TaskStatus,
)
from .errors import (
    ApiError,
    IntentChangedError,
    QueryChangedError,
    RakutenGatewayError,
    TaskNotFoundError,
    TransportError,
    WaitTimeoutError,
)
from .models import OrderIntent, QueryView, SubmitOrderAck, TaskDetail, TaskSummary

__all__ = [
    "AlertEventState",
    "AlertKind",
    "AlertState",
    "ApiError",
    "AsyncClient",
    "Client",
    "IntentChangedError",
    "OperatorActionKind",
    "OrderIntent",
    "OrderState",
    "Outcome",
    "QueryChangedError",
    "QueryKind",
    "QueryStatus",
    "QueryView",
    "RakutenGatewayError",
    "SubmitOrderAck",
    "TaskDetail",
    "TaskNotFoundError",
    "TaskStatus",
    "TaskSummary",
    "TransportError",
    "WaitTimeoutError",
]

__version__ = "0.1.0"
