"""The protocol v1 server: an ASGI app (Starlette) over a site object's steps.

What it does for every adapter, so that a site object only works pages:

- **Steps not provided answer 5003** and touch nothing (no key, no capture, no site call).
- **Evidence on every answer** of a step that ran, value or failure: ``site.capture()`` after
  the step (bounded in time; a capture that fails leaves the answer without evidence, logged).
- **The idempotency-key fence** of submit and pay, kept in SQLite across restarts
  (:class:`~rakuten_gateway.adapter.keys.KeyStore`): written before the step acts; a repeat is
  refused with 5002 naming what the first call did; a clear refusal before the point of no
  return frees the key, any other outcome keeps it.
- **After the point of no return, anything but a value is 5006** (exceptions, refusals, the
  step's timeout): the order may exist, so the worker verifies instead of acting again.
- **Failures map to codes**: :class:`~rakuten_gateway.adapter.StepError` subclasses carry
  theirs (5004 is sent as 5002); the step's timeout is 5007 (5006 past the point of no return);
  any other exception 5006; a value of the wrong shape 5002 (5006 for submit and pay).
- **One step at a time** (a lock: one browser tab, one account).
- **Answers stay under 32 MiB**: the screenshot is dropped first, then the HTML is cut, then
  the raw page state of list/detail values; the worker takes anything larger as no answer.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .keys import KeyStore
from .protocol import (
    AMBIGUOUS,
    CODES,
    PROTOCOL_VERSION,
    CartLine,
    CartValue,
    ConfirmValue,
    DetailValue,
    Evidence,
    ListValue,
    PayRequest,
    PayValue,
    StepError,
    SubmitRequest,
)
from .steps import PointOfNoReturn, SiteAdapter, SyncSiteAdapter

__all__ = ["MAX_ANSWER_BYTES", "MAX_REQUEST_BYTES", "create_app"]

log = logging.getLogger("rakuten_gateway.adapter")

#: The largest answer the worker reads, bytes.
MAX_ANSWER_BYTES = 32 * 1024 * 1024
#: The largest request body read, bytes (the worker's are a few hundred).
MAX_REQUEST_BYTES = 1024 * 1024
#: Default bound of one step, seconds: below the worker's default HTTP timeout (30 s), so the
#: worker gets this adapter's answer (with evidence) rather than its own timeout.
DEFAULT_STEP_TIMEOUT = 25.0
#: Bound of one capture, seconds.
CAPTURE_TIMEOUT = 10.0

T = TypeVar("T")


class _BadRequestError(Exception):
    pass


@dataclass(frozen=True)
class _Op:
    path: str
    step: str
    request: type[BaseModel] | None
    irreversible: bool = False


_OPS = (
    _Op("/v1/session/check", "session_check", None),
    _Op("/v1/cart/add", "cart_add", CartLine),
    _Op("/v1/cart/check", "cart_check", None),
    _Op("/v1/order/confirm", "order_confirm", None),
    _Op("/v1/order/submit", "order_submit", SubmitRequest, irreversible=True),
    _Op("/v1/order/pay", "order_pay", PayRequest, irreversible=True),
    _Op("/v1/orders/list", "orders_list", None),
    _Op("/v1/orders/detail", "orders_detail", None),
)


class _Outcome:
    """What one step did: a value (wire form) or a failure code and message."""

    def __init__(
        self, value: Any = None, code: int | None = None, message: str = "", *, ran: bool = True
    ) -> None:
        self.value = value
        self.code = code
        self.message = message
        self.ran = ran

    @property
    def ok(self) -> bool:
        return self.code is None


def _timeout_like(e: BaseException) -> bool:
    if isinstance(e, TimeoutError):
        return True
    name = type(e).__name__
    return name.endswith(("TimeoutError", "TimeoutException", "Timeout"))


def _base_stub(site: object, step: str) -> bool:
    """Whether ``site``'s ``step`` is missing or the base classes' 5003 stub."""
    impl = getattr(type(site), step, None)
    if impl is None:
        return getattr(site, step, None) is None
    return impl is getattr(SiteAdapter, step, None) or impl is getattr(SyncSiteAdapter, step, None)


class _Kit:
    def __init__(self, site: object, keys: KeyStore, step_timeout: float) -> None:
        self.site = site
        self.keys = keys
        self.step_timeout = step_timeout
        self.lock = asyncio.Lock()
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="site-steps")

    async def call(self, name: str, *args: Any) -> Any:
        """Calls the site's method ``name``: awaited, or on the steps' thread."""
        fn: Callable[..., Any] = getattr(self.site, name)
        if inspect.iscoroutinefunction(fn):
            return await fn(*args)
        result = await asyncio.get_running_loop().run_in_executor(
            self.thread, functools.partial(fn, *args)
        )
        if inspect.isawaitable(result):
            return await result
        return result

    async def capture(self) -> Evidence | None:
        if getattr(self.site, "capture", None) is None:
            return None
        try:
            ev = await asyncio.wait_for(self.call("capture"), CAPTURE_TIMEOUT)
        except Exception:
            log.warning("capture after the step failed; the answer has no evidence", exc_info=True)
            return None
        if ev is None:
            return None
        if isinstance(ev, Evidence):
            return ev
        try:
            return Evidence.model_validate(ev)
        except ValidationError:
            log.warning("capture() returned %r, not Evidence; the answer has no evidence", ev)
            return None

    # ------------------------------------------------------------------------------------------

    async def run_step(self, op: _Op, args: tuple[Any, ...], point: PointOfNoReturn) -> _Outcome:
        task = asyncio.ensure_future(self.call(op.step, *args))
        done, _ = await asyncio.wait({task}, timeout=self.step_timeout)
        if not done:
            task.cancel()
            # Let the step see its cancellation (a browser call is abandoned) before the capture.
            await asyncio.wait({task}, timeout=CAPTURE_TIMEOUT)
            return _failed(point, 5007, f"{op.step}: no result within {self.step_timeout:g} s")
        try:
            raw = task.result()
        except StepError as e:
            code = e.code if e.code in CODES else 5002
            if code == 5003 and not point.crossed:
                return _Outcome(code=5003, message=e.message, ran=False)
            return _failed(point, code, e.message)
        except Exception as e:
            log.warning("step %s raised", op.step, exc_info=True)
            code = 5007 if _timeout_like(e) else 5006
            return _failed(point, code, f"{op.step}: {type(e).__name__}: {e}")
        try:
            return _Outcome(value=_wire_value(op.step, raw))
        except (ValidationError, TypeError, ValueError) as e:
            log.warning("step %s returned a value of the wrong shape: %r", op.step, raw)
            code = 5006 if op.irreversible else 5002
            return _failed(point, code, f"{op.step} returned a value of the wrong shape: {e}")

    async def handle(self, op: _Op, body: Any) -> dict[str, Any]:
        try:
            args = _args(op, body)
        except _BadRequestError as e:
            return _answer(_Outcome(code=5002, message=f"bad request body: {e}", ran=False), None)
        if _base_stub(self.site, op.step):
            return _answer(
                _Outcome(
                    code=5003,
                    message=f"{op.path}: this adapter does not provide the step; nothing sent",
                    ran=False,
                ),
                None,
            )
        key: str | None = None
        if op.irreversible:
            req = args[0]
            assert isinstance(req, SubmitRequest | PayRequest)
            key = f"{op.step.removeprefix('order_')}:{req.idempotency_key}"
            first = self.keys.reserve(key)
            if first is not None:
                return _answer(
                    _Outcome(
                        code=5002,
                        message=(
                            f"idempotency key {req.idempotency_key!r} was used before ({first}): "
                            "refused, nothing sent to the site"
                        ),
                        ran=False,
                    ),
                    None,
                )
        point = PointOfNoReturn()
        step_args = (*args, point) if op.irreversible else args
        async with self.lock:
            outcome = await self.run_step(op, step_args, point)
            evidence = await self.capture() if outcome.ran else None
        if key is not None:
            if outcome.ok:
                self.keys.settle(key, _done(op, args[0], outcome.value))
            elif outcome.code in AMBIGUOUS or point.crossed:
                self.keys.settle(key, f"no clear answer: {outcome.message}")
            else:
                self.keys.free(key)
        return _answer(outcome, evidence)


def _failed(point: PointOfNoReturn, code: int, message: str) -> _Outcome:
    """A failure; past the point of no return always 5006: the action may have happened."""
    if point.crossed and code != 5006:
        return _Outcome(
            code=5006,
            message=(
                f"{message} (code {code}, after the point of no return): whether it took "
                "effect is unknown"
            ),
        )
    return _Outcome(code=code, message=message)


def _args(op: _Op, body: Any) -> tuple[Any, ...]:
    if op.request is not None:
        try:
            return (op.request.model_validate(body),)
        except ValidationError as e:
            raise _BadRequestError(str(e)) from e
    if op.step == "orders_list":
        page = body.get("page") if isinstance(body, dict) else None
        if not isinstance(page, int) or isinstance(page, bool) or page < 1:
            raise _BadRequestError('want {"page": <integer ≥ 1>}')
        return (page,)
    if op.step == "orders_detail":
        n = body.get("order_number") if isinstance(body, dict) else None
        if not isinstance(n, str) or not n:
            raise _BadRequestError('want {"order_number": <string>}')
        return (n,)
    if not isinstance(body, dict):
        raise _BadRequestError("want a JSON object")
    return ()


def _as(model: type[BaseModel], v: Any) -> Any:
    return v if isinstance(v, model) else model.model_validate(v)


def _wire_value(step: str, v: Any) -> Any:  # noqa: PLR0911 - one branch per step
    """A step's return value in the protocol's form (raises on the wrong shape)."""
    if step == "session_check":
        if not isinstance(v, bool):
            raise TypeError(f"session_check must return a bool, not {type(v).__name__}")
        return {"logged_in": v}
    if step == "cart_add":
        return None
    if step == "cart_check":
        return _as(CartValue, v).model_dump(mode="json")
    if step == "order_confirm":
        return _as(ConfirmValue, v).model_dump(mode="json")
    if step == "order_submit":
        if not isinstance(v, str) or not v:
            raise TypeError("order_submit must return the site's order number (a string)")
        return {"site_order_id": v}
    if step == "order_pay":
        return _as(PayValue, v).wire()
    if step == "orders_list":
        return _as(ListValue, v).wire()
    if step == "orders_detail":
        return _as(DetailValue, v).model_dump(mode="json")
    raise ValueError(step)


def _done(op: _Op, req: Any, value: Any) -> str:
    if op.step == "order_submit":
        return f"order {value['site_order_id']}"
    assert isinstance(req, PayRequest)
    return f"payment of {req.site_order_id}: {value.get('status')}"


def _answer(outcome: _Outcome, evidence: Evidence | None) -> dict[str, Any]:
    out: dict[str, Any] = {"protocol": PROTOCOL_VERSION, "ok": outcome.ok}
    if outcome.ok:
        out["value"] = outcome.value
    else:
        out["error"] = {"code": outcome.code, "message": outcome.message}
    if evidence is not None:
        out["evidence"] = evidence.model_dump(mode="json")
    return out


def _encode(answer: dict[str, Any]) -> bytes:
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode()


def fit(answer: dict[str, Any], limit: int | None = None) -> bytes:
    """The answer's JSON, made to fit ``limit`` bytes (default :data:`MAX_ANSWER_BYTES`) by
    dropping what matters least first: the screenshot, then HTML past what fits, then raw page
    state; else a 5006."""
    limit = MAX_ANSWER_BYTES if limit is None else limit
    body = _encode(answer)
    if len(body) <= limit:
        return body
    ev = answer.get("evidence")
    if isinstance(ev, dict) and ev.get("png_base64") is not None:
        ev["png_base64"] = None
        log.warning("answer over %d bytes: screenshot dropped", limit)
        body = _encode(answer)
        if len(body) <= limit:
            return body
    if isinstance(ev, dict) and isinstance(ev.get("html"), str):
        over = len(body) - limit
        html: str = ev["html"]
        keep = max(0, len(html.encode()) - over - 256)
        cut = html.encode()[:keep].decode(errors="ignore")
        ev["html"] = cut + "<!-- cut to fit the 32 MiB answer bound -->"
        log.warning("answer over %d bytes: HTML cut", limit)
        body = _encode(answer)
        if len(body) <= limit:
            return body
    value = answer.get("value")
    if isinstance(value, dict) and "raw" in value:
        value["raw"] = None
        body = _encode(answer)
        if len(body) <= limit:
            return body
    return _encode(
        {
            "protocol": PROTOCOL_VERSION,
            "ok": False,
            "error": {"code": 5006, "message": f"the answer does not fit in {limit} bytes"},
        }
    )


async def _read_json(request: Request) -> Any:
    size = 0
    chunks = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            raise _BadRequestError(f"body over {MAX_REQUEST_BYTES} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError as e:
        raise _BadRequestError(f"not JSON: {e}") from e


def create_app(
    site: object,
    *,
    keys_db: str | Path,
    step_timeout: float = DEFAULT_STEP_TIMEOUT,
) -> Starlette:
    """The protocol's routes over ``site`` (a :class:`SiteAdapter`, a :class:`SyncSiteAdapter`,
    or any object with some of their methods). ``keys_db``: the SQLite file of the
    idempotency keys (kept across restarts; one per account)."""
    keys = KeyStore(keys_db)
    kit = _Kit(site, keys, step_timeout)

    async def info(_: Request) -> Response:
        return JSONResponse(
            {
                "protocol": PROTOCOL_VERSION,
                "name": str(getattr(site, "name", type(site).__name__)),
                "account": str(getattr(site, "account", "default")),
            }
        )

    def endpoint(op: _Op) -> Callable[[Request], Any]:
        async def handler(request: Request) -> Response:
            try:
                body = await _read_json(request)
            except _BadRequestError as e:
                answer = _answer(
                    _Outcome(code=5002, message=f"bad request body: {e}", ran=False), None
                )
            else:
                answer = await kit.handle(op, body)
            return Response(fit(answer), media_type="application/json")

        return handler

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if getattr(site, "start", None) is not None:
            await kit.call("start")
        try:
            yield
        finally:
            try:
                if getattr(site, "close", None) is not None:
                    await kit.call("close")
            finally:
                kit.thread.shutdown(wait=False)
                keys.close()

    routes = [Route("/v1/info", info, methods=["GET"])]
    routes += [Route(op.path, endpoint(op), methods=["POST"]) for op in _OPS]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.keys = keys
    return app


def png_bytes(evidence: Evidence) -> bytes | None:
    """The screenshot of ``evidence`` as PNG bytes."""
    return None if evidence.png_base64 is None else base64.b64decode(evidence.png_base64)
