"""Token callables over an identity provider's token getter: a JWT reused until shortly before its exp."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio

DEFAULT_REFRESH_BEFORE = 60.0


def jwt_expiry(token: str) -> float:
    """The exp of a JWT in seconds since the epoch; 0 when it has none (never reused).

    The token is not verified: the server does that. Only when to ask for a
    new one is read from it.
    """
    try:
        part = token.split(".")[1]
        claims: Any = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (IndexError, ValueError):
        return 0.0
    exp: Any = cast(dict[str, Any], claims).get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else 0.0


class _Current:
    """The JWT last fetched and when to fetch again."""

    def __init__(self, refresh_before: float) -> None:
        self.refresh_before = refresh_before
        self.token: str | None = None
        self.renew_at = 0.0

    def fresh(self) -> str | None:
        return self.token if self.token is not None and time.time() < self.renew_at else None

    def keep(self, token: str) -> str:
        self.token = token
        self.renew_at = jwt_expiry(token) - self.refresh_before
        return token


def jwt_source(fetch: Callable[[], str], *, refresh_before: float = DEFAULT_REFRESH_BEFORE) -> Callable[[], str]:
    """A token callable for Client over your identity provider's token getter.

    The JWT fetch() gave is reused until refresh_before seconds (60) before
    its exp, then fetched again; threads asking meanwhile share one fetch.
    A JWT without an exp is fetched for every request.
    """
    current = _Current(refresh_before)
    lock = threading.Lock()

    def token() -> str:
        with lock:
            return current.fresh() or current.keep(fetch())

    return token


def async_jwt_source(
    fetch: Callable[[], Awaitable[str]], *, refresh_before: float = DEFAULT_REFRESH_BEFORE
) -> Callable[[], Awaitable[str]]:
    """jwt_source for AsyncClient: fetch is awaited; concurrent tasks share one fetch."""
    current = _Current(refresh_before)
    lock = anyio.Lock()

    async def token() -> str:
        if (tok := current.fresh()) is not None:
            return tok
        async with lock:
            return current.fresh() or current.keep(await fetch())

    return token
