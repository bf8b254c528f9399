"""Schemathesis hooks for both services' fuzzing runs (.ci/fuzz-api), loaded through
SCHEMATHESIS_HOOKS.

Each service's OpenAPI document states every rule its server enforces that JSON Schema can carry.
A few rules it can only say in words, in the descriptions, because each compares a field with
something outside the field. The gateway's:

- `POST /api/orders`: a new task's `not_after` must lie after the gateway's clock, else 422
  (D-task-not-after-expired). JSON Schema has no "after now", so `2000-01-01T00:00:00Z` looks
  valid to schemathesis.
- `POST /api/orders/{task_id}/report`: `evidence_ref` must name this task's evidence,
  `{task_id}/{NN}-{step}` with the path's task id (D-evidence-ref-and-order-number-forms). The
  pattern checks the form; it cannot refer to the path parameter.

card-polling's, all in `POST /api/admin/import`, rules between the rows of one file
(D-import-checks-before-writing): a key listed twice in its table (a shop, account, card or device
id, an account's token, a binding's device and card), a card with two active bindings, shops whose
parents lead back to themselves. The hook keeps the first row of each key, makes a later active
binding of the same card inactive, and drops the parent of a shop whose parents loop.

A refusal of any of these would read as the server breaking its document, so this hook meets the two
rules in positive cases and leaves everything else as generated: `not_after` becomes one day after
now, `evidence_ref` gets the path's task id in front of its `/NN-step`, an import's rows as above
(D-fuzz-rules-schema-cannot-state).
Negative cases are sent as generated.
"""

import datetime
import re
import urllib.parse

import schemathesis

# `{NN}-{step}` after the last slash, as the document's pattern has it.
EVIDENCE_NAME = re.compile(r"/([0-9]{2,}-[a-z0-9-]+)$")
MAX_EVIDENCE_REF_CHARS = 256


def _positive(case):
    meta = case.meta
    return meta is None or not meta.generation.mode.is_negative


@schemathesis.hook
def before_call(context, case, kwargs):
    operation = case.operation
    if operation.method.upper() != "POST" or not _positive(case):
        return
    body = case.body
    if not isinstance(body, dict):
        return
    if operation.path == "/api/orders" and isinstance(body.get("not_after"), str):
        tomorrow = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
        body["not_after"] = tomorrow.strftime("%Y-%m-%dT%H:%M:%SZ")
    if operation.path == "/api/orders/{task_id}/report" and isinstance(
        body.get("evidence_ref"), str
    ):
        # Path parameters are kept percent-encoded as they go in the URL.
        task_id = urllib.parse.unquote(str((case.path_parameters or {}).get("task_id", "")))
        found = EVIDENCE_NAME.search(body["evidence_ref"])
        name = found.group(1) if found else "00-step"
        ref = f"{task_id}/{name}"
        if len(ref) > MAX_EVIDENCE_REF_CHARS:
            ref = f"{task_id}/00-step"
        body["evidence_ref"] = ref


IMPORT_KEYS = {
    "shops": ("id",),
    "accounts": ("id",),
    "cards": ("iccid",),
    "devices": ("device_no",),
    "bindings": ("device_no", "iccid"),
}


def _first_of_each_key(rows, key):
    seen = set()
    kept = []
    for row in rows:
        if not isinstance(row, dict):
            kept.append(row)
            continue
        k = tuple(str(row.get(f)) for f in key)
        if k not in seen:
            seen.add(k)
            kept.append(row)
    return kept


def _meet_import_rules(body):
    for table, key in IMPORT_KEYS.items():
        if isinstance(body.get(table), list):
            body[table] = _first_of_each_key(body[table], key)
    if isinstance(body.get("accounts"), list):
        tokens = set()
        kept = []
        for row in body["accounts"]:
            token = row.get("token") if isinstance(row, dict) else None
            if token is None or token not in tokens:
                tokens.add(token)
                kept.append(row)
        body["accounts"] = kept
    if isinstance(body.get("bindings"), list):
        active = set()
        for row in body["bindings"]:
            if isinstance(row, dict) and row.get("active") is True:
                if row.get("iccid") in active:
                    row["active"] = False
                active.add(row.get("iccid"))
    if isinstance(body.get("shops"), list):
        parent = {
            s.get("id"): s.get("parent_id") for s in body["shops"] if isinstance(s, dict)
        }
        for shop in body["shops"]:
            if not isinstance(shop, dict):
                continue
            seen = {shop.get("id")}
            up = parent.get(shop.get("id"))
            while up is not None and up in parent:
                if up in seen:
                    shop["parent_id"] = None
                    parent[shop.get("id")] = None
                    break
                seen.add(up)
                up = parent.get(up)


@schemathesis.hook("before_call")
def meet_import_rules(context, case, kwargs):
    operation = case.operation
    if (
        operation.method.upper() == "POST"
        and operation.path == "/api/admin/import"
        and _positive(case)
        and isinstance(case.body, dict)
    ):
        _meet_import_rules(case.body)
