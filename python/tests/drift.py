"""Compares the client's models with the gateway's served OpenAPI document, on what both name.

For an answer model (the gateway sends, the client reads), a problem is:
- a property the server requires that the client model lacks;
- a field the client requires that the server does not require (the client would refuse an
  answer without it);
- a property both name whose server types the client does not accept (``null`` included).

For a request model (the client sends, the server reads), a problem is:
- a client field the server does not name (the gateway refuses unknown fields: 422);
- a property the server requires that the client does not require;
- a field both name whose client types the server does not accept.

An optional server property the client does not name is no problem (the client keeps unknown
fields), and neither is an enum value the client does not know at run time — but the
vocabularies are compared too (:func:`enum_problems`), so the client learns new values.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel

Schema = dict[str, Any]

JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "object", "array", "null"})


def deref(doc: Schema, s: Schema) -> Schema:
    """``s`` with its ``$ref`` chain followed (in ``doc``)."""
    seen = 0
    while "$ref" in s:
        ref: str = s["$ref"]
        node: Any = doc
        for part in ref.removeprefix("#/").split("/"):
            node = node[part]
        extra = {k: v for k, v in s.items() if k != "$ref"}
        s = {**node, **extra} if extra else node
        seen += 1
        if seen > 50:
            raise ValueError(f"$ref loop at {ref}")
    return s


def without_null(doc: Schema, s: Schema) -> Schema:
    """The non-null alternative of a nullable ``oneOf``/``anyOf`` (else ``s``)."""
    s = deref(doc, s)
    for key in ("oneOf", "anyOf"):
        alts = [deref(doc, a) for a in s.get(key, [])]
        rest = [a for a in alts if a.get("type") != "null"]
        if len(alts) > len(rest) and len(rest) == 1:
            return deref(doc, rest[0])
    return s


def object_shape(doc: Schema, s: Schema) -> tuple[dict[str, Schema], set[str]]:
    """Properties and required names of an object schema, ``allOf`` parts merged."""
    s = deref(doc, s)
    props: dict[str, Schema] = dict(s.get("properties", {}))
    required: set[str] = set(s.get("required", []))
    for part in s.get("allOf", []):
        p, r = object_shape(doc, part)
        props.update(p)
        required |= r
    return props, required


def types(doc: Schema, s: Schema) -> set[str] | None:
    """The JSON types a schema admits; ``None`` for any."""
    s = deref(doc, s)
    for key in ("oneOf", "anyOf"):
        if key in s:
            out: set[str] = set()
            for alt in s[key]:
                t = types(doc, alt)
                if t is None:
                    return None
                out |= t
            return out
    if "allOf" in s:
        return {"object"}
    t = s.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return set(t)
    if "properties" in s:
        return {"object"}
    if "enum" in s:
        return {_json_type(v) for v in s["enum"]}
    if "const" in s:
        return {_json_type(s["const"])}
    return None


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def accepts(reader: set[str] | None, sent: set[str] | None) -> set[str]:
    """The types in ``sent`` that ``reader`` does not take (an integer is a number)."""
    if reader is None:
        return set()
    if sent is None:
        return {"any"}
    return {t for t in sent if not (t in reader or (t == "integer" and "number" in reader))}


def _items(doc: Schema, s: Schema) -> Schema | None:
    s = without_null(doc, s)
    items = s.get("items")
    return items if isinstance(items, dict) else None


def client_schema(model: type[BaseModel]) -> Schema:
    return model.model_json_schema(mode="validation", ref_template="#/$defs/{model}")


def answer_problems(doc: Schema, server: Schema, model: type[BaseModel], where: str) -> list[str]:
    """What keeps ``model`` from reading every answer the server schema allows."""
    mine = client_schema(model)
    s_props, s_req = object_shape(doc, without_null(doc, server))
    c_props, c_req = object_shape(mine, mine)
    fields = {f.alias or n: f for n, f in model.model_fields.items()}
    out = []
    for name in sorted(s_req - set(c_props)):
        out.append(f"{where}: the server requires `{name}`, the client model lacks it")
    for name in sorted(c_req - s_req):
        out.append(f"{where}: the client requires `{name}`, the server does not always send it")
    for name in sorted(set(s_props) & set(c_props)):
        missing = accepts(types(mine, c_props[name]), types(doc, s_props[name]))
        if missing:
            out.append(
                f"{where}.{name}: the server sends {sorted(missing)}, the client model does not "
                f"take it ({fields[name].annotation})"
            )
        s_items, c_items = _items(doc, s_props[name]), _items(mine, c_props[name])
        if s_items is not None and c_items is not None:
            missing = accepts(types(mine, c_items), types(doc, s_items))
            if missing:
                out.append(f"{where}.{name}[]: the server sends {sorted(missing)}")
    return out


def request_problems(doc: Schema, server: Schema, model: type[BaseModel], where: str) -> list[str]:
    """What keeps the server from reading every body ``model`` sends (``None``s are left out)."""
    mine = client_schema(model)
    s_props, s_req = object_shape(doc, without_null(doc, server))
    c_props, c_req = object_shape(mine, mine)
    out = []
    for name in sorted(set(c_props) - set(s_props)):
        out.append(f"{where}: the client sends `{name}`, the server does not name it (422)")
    for name in sorted(s_req - c_req):
        out.append(f"{where}: the server requires `{name}`, the client does not always send it")
    for name in sorted(set(s_props) & set(c_props)):
        sent = types(mine, c_props[name])
        if sent is not None:
            sent = sent - {"null"}
        missing = accepts(types(doc, s_props[name]), sent)
        if missing:
            out.append(f"{where}.{name}: the client sends {sorted(missing)}, the server refuses it")
    return out


def enum_problems(doc: Schema, name: str, enum: type[Enum]) -> list[str]:
    """Values of the server's vocabulary ``name`` that ``enum`` lacks, and values ``enum`` has
    that the server no longer does."""
    s = doc["components"]["schemas"].get(name)
    if s is None:
        return [f"{name}: the server document has no such schema"]
    server = set(s.get("enum", []))
    client = {str(m.value) for m in enum}
    out = []
    if server - client:
        out.append(f"{name}: the server has {sorted(server - client)}, the client enum lacks them")
    if client - server:
        out.append(f"{name}: the client has {sorted(client - server)}, the server no longer does")
    return out


def response_data(doc: Schema, method: str, path: str) -> Schema:
    """The ``data`` schema of a route's 200 envelope."""
    op = doc["paths"][path][method.lower()]
    content = op["responses"]["200"]["content"]["application/json"]["schema"]
    env = deref(doc, content)
    return without_null(doc, env["properties"]["data"])


def request_body(doc: Schema, method: str, path: str) -> Schema | None:
    op = doc["paths"][path][method.lower()]
    body = op.get("requestBody")
    if body is None:
        return None
    return without_null(doc, body["content"]["application/json"]["schema"])
