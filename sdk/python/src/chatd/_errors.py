"""The SDK's exceptions: one hierarchy under ChatdError."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from .types import Attempt, StructuredOutputError, Usage, ValidationError


class ChatdError(Exception):
    """Every exception the SDK raises."""


class APIError(ChatdError):
    """The server answered with an error status and its `Error` body.

    `message` is the server's sentence for people, `validations` the fields
    at fault (400, some 409s), `code` a machine-readable code when the
    server sends one, `request_id` the X-Request-ID the server logged.
    """

    status: int
    message: str
    code: str | None
    validations: list[ValidationError]
    request_id: str | None
    body: Any
    headers: Mapping[str, str]

    def __init__(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = dict(headers or {})
        self.request_id = self.headers.get("x-request-id")
        fields: Mapping[str, Any] = body if isinstance(body, Mapping) else {}  # pyright: ignore[reportUnknownVariableType]
        self.message = str(fields.get("message") or f"HTTP {status}")
        code = fields.get("code")
        self.code = code if isinstance(code, str) else None
        raw = fields.get("validations")
        self.validations = [ValidationError.model_validate(v) for v in raw] if isinstance(raw, list) else []  # pyright: ignore[reportUnknownVariableType]
        detail = "".join(f" [{v.field}: {v.detail}]" for v in self.validations)
        super().__init__(f"chatd: HTTP {status}: {self.message}{detail}")

    @property
    def fields(self) -> list[str]:
        """The names of the fields at fault, in the server's order."""
        return [v.field for v in self.validations]


class BadRequestError(APIError):
    """400: an invalid body, field or query parameter (see `validations`)."""


class AuthenticationError(APIError):
    """401: no token, or one that is unknown, revoked or expired."""


class PermissionDeniedError(APIError):
    """403: the token may not do this.

    `required_scope` is the scope the route needs when the token lacks it
    (`write` for a read token's write); None for another refusal, such as
    X-Chatd-User sent with a token that may not act for users.
    """

    required_scope: str | None

    def __init__(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status, body, headers)
        m = _SCOPE.search(self.headers.get("www-authenticate", ""))
        self.required_scope = m.group(1) if m else None


# The scope parameter of an insufficient_scope challenge (RFC 6750 section 3).
_SCOPE = re.compile(r'(?:^|[\s,])scope="([^"]*)"')


class NotFoundError(APIError):
    """404: no such chat, request or route of the caller's."""


class ConflictError(APIError):
    """409: the chat's state does not allow it (a full queue, nothing to interrupt, ...)."""


class PayloadTooLargeError(APIError):
    """413: the body is larger than the server's limit."""


class UnprocessableEntityError(APIError):
    """422: an Idempotency-Key reused for another request."""


class RateLimitError(APIError):
    """429: too many open streams (retried with backoff before it is raised)."""


class InternalServerError(APIError):
    """5xx: the server failed."""


class ServiceUnavailableError(InternalServerError):
    """503: the database is unreachable (retried, honouring Retry-After, before it is raised)."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: UnprocessableEntityError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def api_error(status: int, content: bytes, headers: Mapping[str, str]) -> APIError:
    """The APIError of an error answer: its class by status, its body decoded."""
    try:
        body: Any = json.loads(content) if content else {}
    except ValueError:
        body = {"message": content.decode("utf-8", "replace")}
    cls = _BY_STATUS.get(status) or (InternalServerError if status >= 500 else APIError)
    return cls(status, body, headers)


def error_of(resp: httpx.Response) -> APIError:
    """The APIError of a read httpx response."""
    return api_error(resp.status_code, resp.content, {k.lower(): v for k, v in resp.headers.items()})


class APIConnectionError(ChatdError):
    """No answer: the connection failed or dropped (after the retries)."""


class APITimeoutError(APIConnectionError):
    """No answer in time (after the retries)."""


class StructuredOutputNotSucceeded(ChatdError):
    """A structured request ended `failed` or `cancelled`: its receipt.

    `code` says why (`validation_exhausted`, `interrupted`, ...), `message`
    is the sentence for people, `attempts` the rejected attempts with their
    validation errors (a failed request's; empty when there were none).
    """

    status: str
    code: str
    message: str
    attempts: list[Attempt]
    request_id: str
    chat_id: str | None
    usage: Usage | None
    error: StructuredOutputError

    def __init__(
        self,
        status: str,
        error: StructuredOutputError,
        request_id: str,
        chat_id: str | None,
        attempts: Sequence[Attempt] | None,
        usage: Usage | None,
    ) -> None:
        self.status = status
        self.error = error
        self.code = error.code
        self.message = error.message
        self.request_id = request_id
        self.chat_id = chat_id
        self.attempts = list(attempts or error.attempts or [])
        self.usage = usage
        super().__init__(f"chatd: structured request {request_id} {status} ({self.code}): {self.message}")


class StructuredOutputFailed(StructuredOutputNotSucceeded):
    """A `failed` receipt: the model did not produce a valid value, or the turn failed."""


class StructuredOutputCancelled(StructuredOutputNotSucceeded):
    """A `cancelled` receipt: interrupted, deleted from the queue or superseded by an edit."""


class OutputValidationError(ChatdError):
    """The server accepted a value that the Python type refuses.

    The server checked the value against the JSON Schema it was given; a
    Pydantic type can say more (validators, stricter types). `value` is the
    receipt's raw value; the Pydantic error is the `__cause__`.
    """

    value: Any
    request_id: str

    def __init__(self, value: Any, request_id: str, cause: Exception) -> None:
        self.value = value
        self.request_id = request_id
        super().__init__(f"chatd: the value of structured request {request_id} does not validate: {cause}")


class TurnFailed(ChatdError):
    """A plain turn ended in error (the chat's `last_error`, or a stream `error` event)."""

    code: str | None
    message: str
    chat_id: str

    def __init__(self, chat_id: str, code: str | None, message: str) -> None:
        self.chat_id = chat_id
        self.code = code
        self.message = message
        super().__init__(f"chatd: the turn of chat {chat_id} failed ({code or 'error'}): {message}")


class WaitTimeout(ChatdError, TimeoutError):
    """A wait given a timeout ran out before the request (or turn) ended."""
