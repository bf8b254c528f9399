"""The webhook receiver helper: signatures (also as the real gateway makes them), the event
model, and deduplication by ``sequence`` and ``event_id``."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rakuten_gateway import AlertKind, Client
from rakuten_gateway.webhooks import (
    AlertEvent,
    Deduplicator,
    EventStore,
    InvalidEventError,
    MemoryEventStore,
    Receiver,
    SignatureError,
    SqliteEventStore,
    parse_event,
    sign,
    verify_signature,
)
from services import TOKEN, intent, start_gateway

SECRET = "webhook-secret-0123456789"
NOW = 1_785_000_000


def event(**kw: Any) -> dict[str, Any]:
    e = {
        "event_id": "0199a:raised",
        "alert_id": "0199a",
        "kind": "task_stale",
        "state": "raised",
        "subject": "po-1",
        "summary": "task po-1 lease expired",
        "task_id": "po-1",
        "occurred_at": "2026-07-27T09:20:01.000Z",
    }
    e.update(kw)
    return e


def body(**kw: Any) -> bytes:
    return json.dumps(event(**kw)).encode()


# --- signatures ---------------------------------------------------------------------------------


def test_a_signature_verifies_and_returns_its_time() -> None:
    b = body()
    assert verify_signature(SECRET, sign(SECRET, NOW, b), b, now=NOW + 5) == NOW


def test_the_signature_is_hmac_sha256_of_time_dot_body_in_hex() -> None:
    b = b'{"a":1}'
    mac = hmac.new(SECRET.encode(), b"%d.%s" % (NOW, b), hashlib.sha256).hexdigest()
    assert sign(SECRET, NOW, b) == f"t={NOW},v1={mac}"


@pytest.mark.parametrize(
    ("header", "why"),
    [
        (None, "no X-Rakuten-Signature"),
        ("", "no X-Rakuten-Signature"),
        ("v1=abcd", "malformed"),
        (f"t={NOW}", "malformed"),
        (f"t={NOW},v1=zz", "malformed"),
        (f"t=-{NOW},v1=00", "malformed"),
    ],
)
def test_a_missing_or_malformed_header_is_refused(header: str | None, why: str) -> None:
    with pytest.raises(SignatureError, match=why):
        verify_signature(SECRET, header, body(), now=NOW)


def test_a_changed_body_or_another_secret_is_refused() -> None:
    b = body()
    h = sign(SECRET, NOW, b)
    with pytest.raises(SignatureError, match="does not match"):
        verify_signature(SECRET, h, b + b" ", now=NOW)
    with pytest.raises(SignatureError, match="does not match"):
        verify_signature("another-secret-0123456789", h, b, now=NOW)


def test_an_old_or_future_timestamp_is_refused_as_a_replay() -> None:
    b = body()
    with pytest.raises(SignatureError, match="replay"):
        verify_signature(SECRET, sign(SECRET, NOW - 301, b), b, now=NOW)
    with pytest.raises(SignatureError, match="replay"):
        verify_signature(SECRET, sign(SECRET, NOW + 301, b), b, now=NOW)
    assert verify_signature(SECRET, sign(SECRET, NOW - 3000, b), b, now=NOW, tolerance_seconds=3600)


def test_during_rotation_either_secret_verifies() -> None:
    b = body()
    old, new = "old-secret-0123456789", "new-secret-0123456789"
    for s in (old, new):
        assert verify_signature([new, old], sign(s, NOW, b), b, now=NOW) == NOW
    both = f"t={NOW},v1={sign(old, NOW, b).split('v1=')[1]},v1={sign(new, NOW, b).split('v1=')[1]}"
    assert verify_signature(new, both, b, now=NOW) == NOW


def test_every_comparison_is_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    b = body()
    verify_signature(["k1-0123456789abcdef", SECRET], sign(SECRET, NOW, b), b, now=NOW)
    assert len(calls) == 2  # each secret compared, no early exit


# --- events ---------------------------------------------------------------------------------


def test_an_event_reads_with_its_sequence_and_keeps_unknown_fields() -> None:
    e = parse_event(body(sequence=2, state="cleared", delivered_by="gw-2", kind="disk_full"))
    assert e.sequence == 2
    assert e.state == "cleared"
    assert e.kind == "disk_full"
    assert not e.kind.is_known
    assert e.model_extra == {"delivered_by": "gw-2"}
    assert parse_event(body()).sequence is None
    with pytest.raises(InvalidEventError):
        parse_event(b'{"text": "[ALERT] slack format"}')


# --- deduplication ----------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    if request.param == "memory":
        yield MemoryEventStore()
    else:
        s = SqliteEventStore(tmp_path / "events.db")
        yield s
        s.close()


def ev(**kw: Any) -> AlertEvent:
    return AlertEvent.model_validate(event(**kw))


def test_a_repeated_event_id_is_dropped(store: EventStore) -> None:
    d = Deduplicator(store)
    assert d.admit(ev())
    assert not d.admit(ev())
    assert d.admit(ev(event_id="0199a:cleared", state="cleared"))


def test_an_event_at_or_below_the_highest_sequence_of_its_alert_is_dropped(
    store: EventStore,
) -> None:
    d = Deduplicator(store)
    cleared = ev(event_id="0199a:cleared", state="cleared", sequence=2)
    raised = ev(event_id="0199a:raised", state="raised", sequence=1)
    assert d.admit(cleared)
    assert not d.admit(raised)  # overtaken: arrived after the newer event
    assert not d.admit(ev(event_id="0199a:other", sequence=2))  # same place, another id
    assert d.admit(ev(event_id="0199b:raised", alert_id="0199b", sequence=1))  # another alert
    assert d.admit(ev(event_id="0199a:third", sequence=3))


def test_a_failed_handling_forgets_the_event_so_its_retry_is_taken(store: EventStore) -> None:
    d = Deduplicator(store)
    e1 = ev(event_id="a:1", alert_id="a", sequence=1)
    e2 = ev(event_id="a:2", alert_id="a", sequence=2)
    assert d.admit(e1)
    assert d.admit(e2)
    with pytest.raises(RuntimeError), d.handling(e2):
        raise RuntimeError("the pager was down")
    assert d.admit(e2)  # the gateway's retry
    assert not d.admit(e1)


def test_the_sqlite_store_remembers_across_restarts(tmp_path: Path) -> None:
    s = SqliteEventStore(tmp_path / "events.db")
    assert s.admit("e1", "a", 1)
    s.close()
    again = SqliteEventStore(tmp_path / "events.db")
    assert not again.admit("e1", "a", 1)
    assert not again.admit("e0", "a", 1)
    assert again.admit("e2", "a", 2)
    assert again.prune(older_than_seconds=-1) == 2
    again.close()


def test_the_receiver_verifies_parses_and_drops_repeats() -> None:
    r = Receiver([SECRET])
    b = body(sequence=1)
    headers = {"x-rakuten-signature": sign(SECRET, NOW, b)}
    e = r.receive(headers, b, now=NOW)
    assert e is not None
    assert e.kind is AlertKind.TASK_STALE
    assert r.receive(headers, b, now=NOW) is None
    with pytest.raises(SignatureError):
        r.receive({}, b, now=NOW)
    with pytest.raises(ValueError, match="secret"):
        Receiver([])


# --- the real gateway's deliveries ---------------------------------------------------------------


class Hook:
    """A loopback HTTP receiver that runs ``handle`` per delivery and records each one."""

    def __init__(self, handle: Callable[[dict[str, str], bytes], int]) -> None:
        self.deliveries: list[tuple[dict[str, str], bytes, int]] = []
        hook = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                status = handle(headers, raw)
                hook.deliveries.append((headers, raw, status))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_real_gateways_signed_deliveries_verify_and_a_failed_one_is_retried(
    tmp_path: Path, uid: str
) -> None:
    receiver = Receiver(["previous-secret-0123456789", SECRET])
    handled: list[AlertEvent] = []
    failed_once: set[str] = set()

    def handle(headers: dict[str, str], raw: bytes) -> int:
        try:
            e = receiver.receive(headers, raw)
        except SignatureError:
            return 401
        if e is None:
            return 200
        try:
            with receiver.handling(e):
                if e.event_id not in failed_once:
                    failed_once.add(e.event_id)
                    raise RuntimeError("the first attempt at each event fails")
                handled.append(e)
        except RuntimeError:
            return 500
        return 200

    hook = Hook(handle)
    gw = start_gateway(
        tmp_path,
        QUEUED_ALERT_SECONDS="0.3",
        SWEEP_INTERVAL_SECONDS="0.1",
        ALERT_WEBHOOK_URLS=hook.url,
        ALERT_WEBHOOK_SECRET=SECRET,
        ALERT_WEBHOOK_MAX_BACKOFF_SECONDS="1",
    )
    try:
        with Client(gw.url, TOKEN) as c:
            task_id = c.submit(intent(), task_id=f"py-hook-{uid}").task_id
            deadline = time.monotonic() + 30
            while not any(e.state == "raised" for e in handled) and time.monotonic() < deadline:
                time.sleep(0.05)
            c.cancel(task_id, reason="cleared by the test")
            while not any(e.state == "cleared" for e in handled) and time.monotonic() < deadline:
                time.sleep(0.05)
    finally:
        gw.stop()
        hook.close()
    assert [(e.kind, e.state, e.task_id) for e in handled] == [
        ("task_queued_too_long", "raised", task_id),
        ("task_queued_too_long", "cleared", task_id),
    ]
    raised, cleared = handled
    assert raised.alert_id == cleared.alert_id
    assert raised.occurred_at <= cleared.occurred_at
    # Each event arrived twice (the first attempt answered 500), signed by the gateway itself.
    statuses = [(json.loads(b)["event_id"], s) for _, b, s in hook.deliveries]
    assert statuses == [
        (raised.event_id, 500),
        (raised.event_id, 200),
        (cleared.event_id, 500),
        (cleared.event_id, 200),
    ]
    headers, raw, _ = hook.deliveries[1]
    assert headers["x-rakuten-event-id"] == raised.event_id
    assert verify_signature(SECRET, headers["x-rakuten-signature"], raw) > 0
    # A late repeat of a delivered event is dropped.
    assert receiver.receive(headers, raw) is None
