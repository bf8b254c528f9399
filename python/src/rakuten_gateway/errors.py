"""Every error of the gateway as an exception.

The gateway answers every error with the envelope ``{"success", "msg", "data", "code"}``; each
code has its class here (:data:`ERRORS_BY_CODE`), all under :class:`ApiError`, which carries the
envelope. Transport failures (no answer, timeout, an answer that is not an envelope) are
:class:`TransportError`. Everything derives from :class:`RakutenGatewayError`.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ERRORS_BY_CODE",
    "AmountOverLimitError",
    "ApiError",
    "ConflictError",
    "ForbiddenError",
    "GatewayTimeoutError",
    "GatewayUnreachableError",
    "IntentChangedError",
    "InternalServerError",
    "InvalidRequestError",
    "LeaseInvalidError",
    "NotFoundError",
    "PayloadTooLargeError",
    "QueryChangedError",
    "QueryLeaseInvalidError",
    "QueryNotFoundError",
    "RakutenGatewayError",
    "ServiceUnavailableError",
    "SiteChallengeError",
    "SiteError",
    "SiteLoginLostError",
    "SiteNotImplementedError",
    "SiteTimeoutError",
    "SiteUnavailableError",
    "SiteUnexpectedPageError",
    "TaskActiveElsewhereError",
    "TaskNotFoundError",
    "TaskStateConflictError",
    "TransportError",
    "UnauthorizedError",
    "UnexpectedAnswerError",
    "UnsupportedMediaTypeError",
    "WaitTimeoutError",
    "error_for",
]


class RakutenGatewayError(Exception):
    """Root of every exception this package raises."""


class TransportError(RakutenGatewayError):
    """No usable answer arrived: whether the gateway acted is unknown."""


class GatewayUnreachableError(TransportError):
    """The connection failed or broke before an answer arrived."""


class GatewayTimeoutError(TransportError):
    """No answer within the client's timeout."""


class UnexpectedAnswerError(TransportError):
    """An answer arrived that is not the gateway's envelope (a proxy's error page, …)."""

    def __init__(self, message: str, *, http_status: int, body: bytes) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.body = body


class ApiError(RakutenGatewayError):
    """The gateway answered with an error envelope.

    ``code``, ``msg``, ``data`` and ``success`` are the envelope's fields; ``http_status`` the
    answer's HTTP status (``None`` for a code read from a report or a query result).
    """

    code: int = 0

    def __init__(
        self,
        msg: str,
        *,
        code: int | None = None,
        data: Any = None,
        success: bool = False,
        http_status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(msg)
        if code is not None:
            self.code = code
        self.msg = msg
        self.data = data
        self.success = success
        self.http_status = http_status
        self.retry_after = retry_after

    @property
    def envelope(self) -> dict[str, Any]:
        """The envelope as the gateway sent it."""
        return {"success": self.success, "msg": self.msg, "data": self.data, "code": self.code}

    def __str__(self) -> str:
        status = f"HTTP {self.http_status}, " if self.http_status is not None else ""
        return f"{self.msg} ({status}code {self.code})"


class UnauthorizedError(ApiError):
    """1001: missing or wrong Bearer token (HTTP 401)."""

    code = 1001


class ForbiddenError(ApiError):
    """1002: the token is valid but its role may not do this (HTTP 403)."""

    code = 1002


class InvalidRequestError(ApiError):
    """1003: the request is malformed or invalid; ``msg`` names the field (HTTP 422)."""

    code = 1003


class PayloadTooLargeError(ApiError):
    """1004: body, request target or headers over the gateway's bounds (HTTP 413/414/431)."""

    code = 1004


class NotFoundError(ApiError):
    """1005: no such route or resource (HTTP 404)."""

    code = 1005


class ConflictError(ApiError):
    """1006: a conflicting change (HTTP 409)."""

    code = 1006


class IntentChangedError(ConflictError):
    """1006 on submit: this ``task_id`` exists with another site or intent; nothing changed.

    An unchanged repeat of a submit is not an error (``created`` is ``False``).
    """


class QueryChangedError(ConflictError):
    """1006 on a query submit: this ``query_id`` exists with another site, kind or params."""


class UnsupportedMediaTypeError(ApiError):
    """1007: a body the gateway does not read (not JSON, or compressed) (HTTP 415)."""

    code = 1007


class InternalServerError(ApiError):
    """1500: internal error; details only in the gateway's log (HTTP 500)."""

    code = 1500


class ServiceUnavailableError(ApiError):
    """1503: shutting down, or storage unavailable; ``retry_after`` seconds (HTTP 503)."""

    code = 1503


class SiteError(ApiError):
    """A site code (5001–5007), as a report or an account query result carries it."""


class SiteLoginLostError(SiteError):
    """5001: the site session is logged out."""

    code = 5001


class SiteUnexpectedPageError(SiteError):
    """5002: the site page did not have the expected structure, or the site refused."""

    code = 5002


class SiteNotImplementedError(SiteError):
    """5003: a site step that is not verified yet: not implemented."""

    code = 5003


class AmountOverLimitError(SiteError):
    """5004: the payable amount exceeds the limit (the worker's amount guard)."""

    code = 5004


class SiteChallengeError(SiteError):
    """5005: the site asks for a human challenge (3-D Secure, SMS)."""

    code = 5005


class SiteUnavailableError(SiteError):
    """5006: the site was unreachable or gave no answer (the action may have happened)."""

    code = 5006


class SiteTimeoutError(SiteError):
    """5007: a site step timed out (the action may have happened)."""

    code = 5007


class TaskNotFoundError(NotFoundError):
    """6001: no such task (HTTP 404)."""

    code = 6001


class LeaseInvalidError(ConflictError):
    """6002: invalid lease: not the holder, expired, superseded or finished (HTTP 409)."""

    code = 6002


class TaskStateConflictError(ConflictError):
    """6003: the task's status does not allow this (e.g. resolving a queued task) (HTTP 409)."""

    code = 6003


class TaskActiveElsewhereError(ApiError):
    """6004: another task is active; nothing handed out (diagnostic, HTTP 200)."""

    code = 6004


class QueryNotFoundError(NotFoundError):
    """6005: no such account query, or purged after retention (HTTP 404)."""

    code = 6005


class QueryLeaseInvalidError(ConflictError):
    """6006: account query lease invalid (HTTP 409)."""

    code = 6006


class WaitTimeoutError(RakutenGatewayError):
    """``wait`` gave up before the task or query finished; ``last`` is what was seen last."""

    def __init__(self, message: str, last: Any) -> None:
        super().__init__(message)
        self.last = last


#: Every code the gateway sends, with its exception class.
ERRORS_BY_CODE: dict[int, type[ApiError]] = {
    cls.code: cls
    for cls in (
        UnauthorizedError,
        ForbiddenError,
        InvalidRequestError,
        PayloadTooLargeError,
        NotFoundError,
        ConflictError,
        UnsupportedMediaTypeError,
        InternalServerError,
        ServiceUnavailableError,
        SiteLoginLostError,
        SiteUnexpectedPageError,
        SiteNotImplementedError,
        AmountOverLimitError,
        SiteChallengeError,
        SiteUnavailableError,
        SiteTimeoutError,
        TaskNotFoundError,
        LeaseInvalidError,
        TaskStateConflictError,
        TaskActiveElsewhereError,
        QueryNotFoundError,
        QueryLeaseInvalidError,
    )
}


def error_for(
    code: int,
    msg: str,
    *,
    data: Any = None,
    success: bool = False,
    http_status: int | None = None,
    retry_after: float | None = None,
) -> ApiError:
    """The exception for ``code`` (:class:`ApiError` for a code this package does not know)."""
    cls = ERRORS_BY_CODE.get(code, ApiError)
    return cls(
        msg,
        code=code,
        data=data,
        success=success,
        http_status=http_status,
        retry_after=retry_after,
    )
