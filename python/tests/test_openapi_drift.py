"""The client's models and routes against the OpenAPI document a real gateway serves, so that
they cannot drift apart unnoticed: re-run after every change to the gateway's API."""

from __future__ import annotations

import copy
import re
from enum import Enum
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from drift import (
    answer_problems,
    enum_problems,
    object_shape,
    request_body,
    request_problems,
    response_data,
    without_null,
)
from rakuten_gateway import _core, enums
from rakuten_gateway import models as m
from rakuten_gateway.webhooks import AlertEvent
from services import Process

#: route → (the model its answer's data is read as, the item model of a list, the body model)
ROUTE_MODELS: dict[
    tuple[str, str], tuple[type[BaseModel] | None, type[BaseModel] | None, type[BaseModel] | None]
] = {
    ("POST", "/api/orders"): (m.SubmitOrderAck, None, m.SubmitOrder),
    ("GET", "/api/orders"): (m.Page[m.TaskSummary], m.TaskSummary, None),
    ("GET", "/api/orders/{task_id}"): (m.TaskDetail, None, None),
    ("POST", "/api/orders/{task_id}/resolve"): (m.OperatorActionAck, None, m.ResolveTask),
    ("POST", "/api/orders/{task_id}/cancel"): (m.OperatorActionAck, None, m.CancelTask),
    ("POST", "/api/orders/{task_id}/reclaim"): (m.LeaseGrant, None, m.ReclaimTask),
    ("DELETE", "/api/workers/{worker_id}"): (m.OperatorActionView, None, None),
    ("GET", "/api/workers"): (m.Page[m.WorkerView], m.WorkerView, None),
    ("GET", "/api/alerts"): (m.Page[m.AlertView], m.AlertView, None),
    ("POST", "/api/account/queries"): (m.SubmitQueryAck, None, m.SubmitQuery),
    ("GET", "/api/account/queries"): (m.Page[m.QuerySummary], m.QuerySummary, None),
    ("GET", "/api/account/queries/{query_id}"): (m.QueryView, None, None),
}

VOCABULARIES: dict[str, type[Enum]] = {
    "TaskStatus": enums.TaskStatus,
    "OrderState": enums.OrderState,
    "Outcome": enums.Outcome,
    "QueryStatus": enums.QueryStatus,
    "QueryKind": enums.QueryKind,
    "AlertKind": enums.AlertKind,
    "AlertState": enums.AlertState,
    "OperatorActionKind": enums.OperatorActionKind,
}


@pytest.fixture(scope="module")
def served(gateway: Process) -> dict[str, Any]:
    r = httpx.get(f"{gateway.url}/openapi.json", timeout=10)
    r.raise_for_status()
    doc: dict[str, Any] = r.json()
    return doc


def problems(doc: dict[str, Any]) -> list[str]:
    """Every drift between ``doc`` and this package."""
    out: list[str] = []
    schemas = doc["components"]["schemas"]
    for model in m.CHECKED_MODELS:
        name = model.OPENAPI_SCHEMA
        assert name is not None
        if name not in schemas:
            out.append(f"{name}: the server document has no such schema")
        elif issubclass(model, m.Request):
            out += request_problems(doc, schemas[name], model, name)
        else:
            out += answer_problems(doc, schemas[name], model, name)
    # The webhook body, once the gateway documents it.
    if "AlertNotice" in schemas:
        out += answer_problems(doc, schemas["AlertNotice"], AlertEvent, "AlertNotice")
    for (method, path), (answer, item, body) in ROUTE_MODELS.items():
        where = f"{method} {path}"
        if path not in doc["paths"] or method.lower() not in doc["paths"][path]:
            out.append(f"{where}: not served")
            continue
        data = response_data(doc, method, path)
        if answer is not None:
            out += answer_problems(doc, data, answer, where)
        if item is not None:
            items = data if data.get("type") == "array" else object_shape(doc, data)[0]["items"]
            out += answer_problems(doc, without_null(doc, items)["items"], item, f"{where} item")
        if body is not None:
            s = request_body(doc, method, path)
            if s is None:
                out.append(f"{where}: the server takes no body, the client sends one")
            else:
                out += request_problems(doc, s, body, f"{where} body")
    for method, path, params in _core.ROUTES:
        op = doc["paths"].get(path, {}).get(method.lower())
        if op is None:
            out.append(f"{method} {path}: not served")
            continue
        named = {p["name"] for p in op.get("parameters", []) if p.get("in") == "query"}
        for p in sorted(params - named):
            out.append(f"{method} {path}: the client sends ?{p}, the server does not list it (422)")
    for name, enum in VOCABULARIES.items():
        out += enum_problems(doc, name, enum)
    return out


def test_the_client_matches_the_gateways_served_openapi(served: dict[str, Any]) -> None:
    found = problems(served)
    assert found == [], "the client drifted from the gateway:\n" + "\n".join(found)


def test_every_route_the_client_calls_is_in_its_route_table() -> None:
    src = __import__("inspect").getsource(_core)
    called = set(re.findall(r'Op\(\s*"(GET|POST|DELETE)",\s*f?"([^"]+)"', src))
    templated = {(meth, re.sub(r"\{seg\((\w+)\)\}", r"{\1}", p)) for meth, p in called}
    assert templated == {(meth, p) for meth, p, _ in _core.ROUTES}
    assert templated == set(ROUTE_MODELS)


# --- the comparison itself, on changes it must and must not report ------------------------------


def mutated(doc: dict[str, Any], change: Any) -> dict[str, Any]:
    d = copy.deepcopy(doc)
    change(d["components"]["schemas"], d)
    return d


def test_drift_is_reported_for_a_newly_required_field_a_type_change_and_a_new_status(
    served: dict[str, Any],
) -> None:
    def required_field(s: dict[str, Any], _: Any) -> None:
        s["TaskSummary"]["properties"]["priority"] = {"type": "integer"}
        s["TaskSummary"]["required"].append("priority")

    def type_change(s: dict[str, Any], _: Any) -> None:
        s["TaskSummary"]["properties"]["lease_count"] = {"type": "string"}

    def new_status(s: dict[str, Any], _: Any) -> None:
        s["TaskStatus"]["enum"].append("archived")

    def renamed_body_field(s: dict[str, Any], _: Any) -> None:
        s["CancelTask"]["properties"] = {"why": {"type": "string"}}
        s["CancelTask"]["required"] = ["why"]

    assert any("`priority`" in p for p in problems(mutated(served, required_field)))
    assert any("lease_count" in p for p in problems(mutated(served, type_change)))
    assert any("archived" in p for p in problems(mutated(served, new_status)))
    found = problems(mutated(served, renamed_body_field))
    assert any("client sends `reason`" in p for p in found)
    assert any("requires `why`" in p for p in found)


def test_changes_the_client_tolerates_are_not_drift(served: dict[str, Any]) -> None:
    def tolerated(s: dict[str, Any], _: Any) -> None:
        # An optional deadline on submit, and on the task.
        s["SubmitOrder"]["properties"]["not_after"] = {"type": ["string", "null"]}
        s["TaskSummary"]["properties"]["not_after"] = {"type": ["string", "null"]}
        # List pages carry a shorter intent, no longer required (the gateway's lists already
        # show a summary of it: the change is one the served document may have made).
        if "intent" in s["TaskSummary"].get("required", []):
            s["TaskSummary"]["required"].remove("intent")
        s["TaskSummary"]["properties"]["intent_summary"] = {"type": "object"}
        # The webhook body documented, with its sequence number.
        s["AlertNotice"] = {
            "type": "object",
            "required": [
                "event_id",
                "alert_id",
                "kind",
                "state",
                "subject",
                "summary",
                "occurred_at",
                "sequence",
            ],
            "properties": {
                "event_id": {"type": "string"},
                "alert_id": {"type": "string"},
                "kind": {"$ref": "#/components/schemas/AlertKind"},
                "state": {"type": "string"},
                "subject": {"type": "string"},
                "summary": {"type": "string"},
                "task_id": {"type": ["string", "null"]},
                "worker_id": {"type": ["string", "null"]},
                "occurred_at": {"type": "string", "format": "date-time"},
                "sequence": {"type": "integer", "format": "int64"},
            },
        }

    assert problems(mutated(served, tolerated)) == []
