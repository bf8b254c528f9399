"""Schemathesis hooks for the order gateway's fuzzing run (.ci/fuzz-api), loaded through
SCHEMATHESIS_HOOKS.

The gateway's OpenAPI document states every rule the server enforces that JSON Schema can carry.
Two rules it can only say in words, in the fields' descriptions, because each compares a field
with something outside the field:

- `POST /api/orders`: a new task's `not_after` must lie after the gateway's clock, else 422
  (D-task-not-after-expired). JSON Schema has no "after now", so `2000-01-01T00:00:00Z` looks
  valid to schemathesis.
- `POST /api/orders/{task_id}/report`: `evidence_ref` must name this task's evidence,
  `{task_id}/{NN}-{step}` with the path's task id (D-evidence-ref-and-order-number-forms). The
  pattern checks the form; it cannot refer to the path parameter.

A refusal of either would read as the server breaking its document, so this hook meets the two
rules in positive cases and leaves everything else as generated: `not_after` becomes one day after
now, `evidence_ref` gets the path's task id in front of its `/NN-step` (D-fuzz-rules-schema-cannot-state).
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
