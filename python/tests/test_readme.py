"""The package README's examples run as written."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rakuten_gateway.webhooks import AlertEvent, sign

README = Path(__file__).resolve().parents[1] / "README.md"


def example(name: str) -> str:
    text = README.read_text(encoding="utf-8")
    m = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", text, re.S)
    assert m is not None, f"no example {name!r} in the README"
    return m.group(1)


def test_the_fastapi_receiver_example_verifies_drops_repeats_and_refuses_forgeries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(
        "RAKUTEN_ALERT_WEBHOOK_SECRET", "new-secret-0123456789,old-secret-0123456789"
    )
    ns: dict[str, Any] = {"__name__": "receiver"}
    exec(compile(example("fastapi-receiver"), "README.md", "exec"), ns)
    paged: list[AlertEvent] = []
    ns["page_someone"] = paged.append

    event = {
        "event_id": "0199b:raised",
        "alert_id": "0199b",
        "kind": "worker_offline",
        "state": "raised",
        "subject": "pc-1",
        "summary": "worker pc-1 silent for 300 s",
        "worker_id": "pc-1",
        "occurred_at": "2026-07-27T09:20:01.000Z",
        "sequence": 1,
    }
    body = json.dumps(event).encode()
    now = int(time.time())

    def post(secret: str, raw: bytes = body) -> int:
        r = client.post(
            "/rakuten/alerts",
            content=raw,
            headers={
                "content-type": "application/json",
                "X-Rakuten-Signature": sign(secret, now, raw),
            },
        )
        status: int = r.status_code
        return status

    with TestClient(ns["app"]) as client:
        assert post("old-secret-0123456789") == 200  # still accepted while rotating
        assert post("new-secret-0123456789") == 200  # the gateway's retry: dropped
        assert post("forged-secret-0123456789") == 401
        assert post("new-secret-0123456789", b'{"text": "slack"}') == 400
    assert [e.event_id for e in paged] == ["0199b:raised"]
    assert (tmp_path / "webhook-events.db").exists()
