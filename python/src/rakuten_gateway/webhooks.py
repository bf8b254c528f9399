"""Receiving the gateway's alert webhooks.

The gateway POSTs each alert raise and clear to every receiver, at least once (retried with
backoff until a 2xx), signed when ``RAKUTEN_ALERT_WEBHOOK_SECRET`` is set::

    X-Rakuten-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
    X-Rakuten-Event-Id:  <event_id>

A receiver (1) checks the signature over the raw body bytes, in constant time, with ``t``
recent (:func:`verify_signature`), (2) reads the event (:func:`parse_event`), and (3) drops a
repeat or an event that arrives after a newer one of the same alert (:class:`Deduplicator`).
:class:`Receiver` does all three::

    receiver = Receiver(secrets=[os.environ["RAKUTEN_ALERT_WEBHOOK_SECRET"]])
    event = receiver.receive(request.headers, raw_body)   # SignatureError → answer 400/401
    if event is not None:                                 # None: a repeat, already handled
        with receiver.handling(event):                    # an exception forgets the event,
            notify_someone(event)                         # so the gateway's retry is taken
"""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from .enums import AlertEventState, AlertKind
from .errors import RakutenGatewayError

__all__ = [
    "EVENT_ID_HEADER",
    "SIGNATURE_HEADER",
    "AlertEvent",
    "Deduplicator",
    "EventStore",
    "InvalidEventError",
    "MemoryEventStore",
    "Receiver",
    "SignatureError",
    "SqliteEventStore",
    "parse_event",
    "sign",
    "verify_signature",
]

SIGNATURE_HEADER = "X-Rakuten-Signature"
EVENT_ID_HEADER = "X-Rakuten-Event-Id"

#: How far ``t`` may be from the receiver's clock, seconds (replays older than this are refused).
DEFAULT_TOLERANCE_SECONDS = 300


class SignatureError(RakutenGatewayError):
    """The request is not signed by a secret this receiver holds (or too long ago): refuse it."""


class InvalidEventError(RakutenGatewayError):
    """The body is not an alert event."""


SecretLike = str | bytes


def _key(secret: SecretLike) -> bytes:
    return secret.encode() if isinstance(secret, str) else secret


def sign(secret: SecretLike, unix_seconds: int, body: bytes) -> str:
    """The header value the gateway sends for ``body`` at ``unix_seconds``."""
    mac = hmac.new(_key(secret), f"{unix_seconds}.".encode() + body, hashlib.sha256)
    return f"t={unix_seconds},v1={mac.hexdigest()}"


def verify_signature(
    secrets: SecretLike | Iterable[SecretLike],
    header: str | None,
    body: bytes,
    *,
    now: float | None = None,
    tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
) -> int:
    """Checks ``X-Rakuten-Signature`` over the raw ``body``; returns its ``t``.

    ``secrets`` may hold several secrets while one is being replaced: a signature by any of them
    passes. Every ``v1`` the header carries is compared with :func:`hmac.compare_digest`.

    Raises :class:`SignatureError` when the header is missing or malformed, ``t`` is more than
    ``tolerance_seconds`` away from ``now`` (a replay), or no secret made the signature.
    """
    keys = [_key(secrets)] if isinstance(secrets, str | bytes) else [_key(s) for s in secrets]
    if not keys or any(not k for k in keys):
        raise ValueError("at least one non-empty secret is needed")
    if not header:
        raise SignatureError(f"no {SIGNATURE_HEADER} header")
    t: int | None = None
    sent: list[bytes] = []
    for part in header.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep:
            continue
        if name == "t" and value.isascii() and value.isdigit():
            t = int(value)
        elif name == "v1":
            try:
                sent.append(bytes.fromhex(value))
            except ValueError:
                continue
    if t is None or not sent:
        raise SignatureError(f"malformed {SIGNATURE_HEADER} header")
    current = time.time() if now is None else now
    if abs(current - t) > tolerance_seconds:
        raise SignatureError(
            f"signature timestamp {t} is {abs(current - t):.0f} s away from now "
            f"(tolerance {tolerance_seconds:g} s): refused as a possible replay"
        )
    signed = f"{t}.".encode() + body
    ok = False
    for k in keys:
        expected = hmac.new(k, signed, hashlib.sha256).digest()
        for s in sent:
            # No early exit: every pair is compared, so timing says nothing about which matched.
            ok |= hmac.compare_digest(expected, s)
    if not ok:
        raise SignatureError("signature does not match any configured secret")
    return t


class AlertEvent(BaseModel):
    """One alert raise or clear, as the gateway POSTs it (fields it adds later are kept)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    OPENAPI_SCHEMA: ClassVar[str | None] = "AlertNotice"

    event_id: str
    alert_id: str
    kind: AlertKind
    state: AlertEventState
    subject: str
    summary: str
    task_id: str | None = None
    worker_id: str | None = None
    occurred_at: datetime
    #: The event's place among its alert's events (raised before cleared); ``None`` from a
    #: gateway that does not number them.
    sequence: int | None = None


def parse_event(body: bytes | str) -> AlertEvent:
    """The event in a webhook body (raises :class:`InvalidEventError`)."""
    try:
        return AlertEvent.model_validate_json(body)
    except ValidationError as e:
        raise InvalidEventError(f"not an alert event: {e}") from e


class EventStore(Protocol):
    """Where a :class:`Deduplicator` remembers the events it let through.

    ``admit`` must check and record in one step (two deliveries of one event may arrive at
    once).
    """

    def admit(self, event_id: str, alert_id: str, sequence: int | None) -> bool:
        """Records the event and returns ``True`` when it is new: its ``event_id`` was not seen,
        and, when ``sequence`` is given, it is above every sequence seen for ``alert_id``."""
        ...

    def forget(self, event_id: str) -> None:
        """Undoes ``admit`` for an event whose handling failed (its retry is then taken)."""
        ...


class MemoryEventStore:
    """:class:`EventStore` in memory, for one process; keeps the newest ``max_events`` event ids
    and the highest sequence of the newest ``max_events`` alerts."""

    def __init__(self, max_events: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._events: OrderedDict[str, tuple[str, int | None]] = OrderedDict()
        self._top: OrderedDict[str, int] = OrderedDict()
        self._max = max_events

    def admit(self, event_id: str, alert_id: str, sequence: int | None) -> bool:
        with self._lock:
            if event_id in self._events:
                return False
            if sequence is not None:
                top = self._top.get(alert_id)
                if top is not None and sequence <= top:
                    return False
                self._top[alert_id] = sequence
                self._top.move_to_end(alert_id)
                while len(self._top) > self._max:
                    self._top.popitem(last=False)
            self._events[event_id] = (alert_id, sequence)
            while len(self._events) > self._max:
                self._events.popitem(last=False)
            return True

    def forget(self, event_id: str) -> None:
        with self._lock:
            gone = self._events.pop(event_id, None)
            if gone is None or gone[1] is None:
                return
            alert_id = gone[0]
            rest = [s for a, s in self._events.values() if a == alert_id and s is not None]
            if rest:
                self._top[alert_id] = max(rest)
            else:
                self._top.pop(alert_id, None)


class SqliteEventStore:
    """:class:`EventStore` in a SQLite file: survives restarts, shared by processes."""

    def __init__(self, path: str | Path) -> None:
        self._path = str(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS webhook_events ("
            " event_id TEXT PRIMARY KEY, alert_id TEXT NOT NULL, sequence INTEGER,"
            " received_at REAL NOT NULL)"
        )
        self._db.execute(
            "CREATE INDEX IF NOT EXISTS webhook_events_alert ON webhook_events (alert_id, sequence)"
        )

    def admit(self, event_id: str, alert_id: str, sequence: int | None) -> bool:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                seen = self._db.execute(
                    "SELECT 1 FROM webhook_events WHERE event_id = ?", (event_id,)
                ).fetchone()
                if seen is not None:
                    return False
                if sequence is not None:
                    (top,) = self._db.execute(
                        "SELECT MAX(sequence) FROM webhook_events WHERE alert_id = ?", (alert_id,)
                    ).fetchone()
                    if top is not None and sequence <= top:
                        return False
                self._db.execute(
                    "INSERT INTO webhook_events (event_id, alert_id, sequence, received_at)"
                    " VALUES (?, ?, ?, ?)",
                    (event_id, alert_id, sequence, time.time()),
                )
                return True
            finally:
                self._db.execute("COMMIT")

    def forget(self, event_id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM webhook_events WHERE event_id = ?", (event_id,))

    def prune(self, older_than_seconds: float) -> int:
        """Deletes events received longer ago than this; returns how many."""
        with self._lock:
            cur = self._db.execute(
                "DELETE FROM webhook_events WHERE received_at < ?",
                (time.time() - older_than_seconds,),
            )
            return cur.rowcount

    def close(self) -> None:
        """Closes the database."""
        self._db.close()


class Deduplicator:
    """Lets each event through once, in order per alert.

    With a ``sequence`` (per ``alert_id``), an event at or below the highest sequence seen for
    its alert is dropped: a repeat, or one overtaken by a newer event (a ``raised`` arriving
    after its ``cleared``). Without one, a repeated ``event_id`` is dropped.
    """

    def __init__(self, store: EventStore | None = None) -> None:
        self.store: EventStore = store if store is not None else MemoryEventStore()

    def admit(self, event: AlertEvent) -> bool:
        """``True`` for an event to handle; records it."""
        return self.store.admit(event.event_id, event.alert_id, event.sequence)

    def forget(self, event: AlertEvent) -> None:
        """Forgets an admitted event whose handling failed, so that its retry is admitted."""
        self.store.forget(event.event_id)

    @contextmanager
    def handling(self, event: AlertEvent) -> Iterator[None]:
        """Wraps the handling of an admitted event: an exception forgets it and propagates."""
        try:
            yield
        except BaseException:
            self.forget(event)
            raise


def _header(headers: Mapping[str, str], name: str) -> str | None:
    v = headers.get(name)
    if v is not None:
        return v
    low = name.lower()
    for k, val in headers.items():
        if k.lower() == low:
            return val
    return None


class Receiver:
    """Signature check, parsing and deduplication in one call (:meth:`receive`)."""

    def __init__(
        self,
        secrets: Sequence[SecretLike] | None,
        *,
        store: EventStore | None = None,
        tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
    ) -> None:
        """``secrets``: the current secret and, while rotating, the previous ones. ``None``
        accepts unsigned requests (only for a gateway without a secret, on a trusted network)."""
        self.secrets = list(secrets) if secrets is not None else None
        if self.secrets is not None and not self.secrets:
            raise ValueError("give at least one secret, or None for unsigned requests")
        self.dedup = Deduplicator(store)
        self.tolerance_seconds = tolerance_seconds

    def receive(
        self, headers: Mapping[str, str], body: bytes, *, now: float | None = None
    ) -> AlertEvent | None:
        """The event to handle, or ``None`` for a repeat or an overtaken event (answer 2xx
        either way, so the gateway stops retrying). Raises :class:`SignatureError` (answer 401)
        or :class:`InvalidEventError` (answer 400)."""
        if self.secrets is not None:
            verify_signature(
                self.secrets,
                _header(headers, SIGNATURE_HEADER),
                body,
                now=now,
                tolerance_seconds=self.tolerance_seconds,
            )
        event = parse_event(body)
        return event if self.dedup.admit(event) else None

    def handling(self, event: AlertEvent) -> AbstractContextManager[None]:
        """See :meth:`Deduplicator.handling`."""
        return self.dedup.handling(event)
