"""The gateway's vocabularies as open string enums.

An answer from a newer gateway may carry a value this package does not know yet (a new task
status, a new alert kind). Parsing never fails on one: the value becomes a member that is not
one of the class's own (``is_known`` is ``False``) and keeps the raw string, so it compares,
prints and serializes as what the gateway sent.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self


class OpenStrEnum(StrEnum):
    """A string enum that keeps unknown values instead of refusing them."""

    @classmethod
    def _missing_(cls, value: object) -> Self | None:
        if not isinstance(value, str):
            return None
        member = str.__new__(cls, value)
        member._name_ = value
        member._value_ = value
        return member

    @property
    def is_known(self) -> bool:
        """Whether this value is one of the class's own members."""
        return type(self).__members__.get(self._name_) is self


class TaskStatus(OpenStrEnum):
    """Who holds a task and whether it is done."""

    QUEUED = "queued"
    LEASED = "leased"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    NEEDS_HUMAN = "needs_human"
    STALE = "stale"
    #: Its ``not_after`` passed while it was queued: never leased, nothing was ordered.
    EXPIRED = "expired"

    @property
    def in_progress(self) -> bool:
        """Queued or held by a worker: the gateway is still working on it."""
        return self in _TASK_IN_PROGRESS

    @property
    def is_terminal(self) -> bool:
        """A final status this package knows (``succeeded``, ``failed``, ``needs_human``,
        ``expired``)."""
        return self in _TASK_TERMINAL

    @property
    def needs_person(self) -> bool:
        """``needs_human`` or ``stale``: nothing moves until a person acts."""
        return self in _TASK_NEEDS_PERSON


_TASK_IN_PROGRESS = frozenset({TaskStatus.QUEUED, TaskStatus.LEASED, TaskStatus.RUNNING})
_TASK_TERMINAL = frozenset(
    {TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.NEEDS_HUMAN, TaskStatus.EXPIRED}
)
_TASK_NEEDS_PERSON = frozenset({TaskStatus.NEEDS_HUMAN, TaskStatus.STALE})


class OrderState(OpenStrEnum):
    """Where an order stands on the site."""

    CREATED = "created"
    IN_CART = "in_cart"
    ORDERED = "ordered"
    AWAITING_PAYMENT = "awaiting_payment"
    PAID = "paid"
    SHIPPED = "shipped"
    DELIVERED = "delivered"
    CANCELLED = "cancelled"


class Outcome(OpenStrEnum):
    """The terminal outcome of a task."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    NEEDS_HUMAN = "needs_human"


class QueryStatus(OpenStrEnum):
    """Status of an account query."""

    QUEUED = "queued"
    LEASED = "leased"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EXPIRED = "expired"

    @property
    def in_progress(self) -> bool:
        """Queued or being read by a worker."""
        return self in (QueryStatus.QUEUED, QueryStatus.LEASED)


class QueryKind(OpenStrEnum):
    """The kind of account read."""

    ORDER_LIST = "order_list"
    ORDER_DETAIL = "order_detail"


class AlertKind(OpenStrEnum):
    """What an alert is about."""

    WORKER_OFFLINE = "worker_offline"
    TASK_QUEUED_TOO_LONG = "task_queued_too_long"
    TASK_STALE = "task_stale"
    TASK_NEEDS_HUMAN = "task_needs_human"
    ACCOUNT_LOGGED_OUT = "account_logged_out"
    WEBHOOK_FAILING = "webhook_failing"
    CLOCK_JUMP = "clock_jump"
    CLOCK_SKEW = "clock_skew"
    TASK_EXPIRED = "task_expired"
    TASK_STATE_CONTRADICTS_OUTCOME = "task_state_contradicts_outcome"


class AlertState(OpenStrEnum):
    """Whether an alert's cause is still there."""

    OPEN = "open"
    CLEARED = "cleared"


class AlertEventState(OpenStrEnum):
    """What a webhook event reports: the alert was raised or cleared."""

    RAISED = "raised"
    CLEARED = "cleared"


class OperatorActionKind(OpenStrEnum):
    """What an operator did."""

    RESOLVE = "resolve"
    CANCEL = "cancel"
    RECLAIM = "reclaim"
    RETIRE_WORKER = "retire_worker"
