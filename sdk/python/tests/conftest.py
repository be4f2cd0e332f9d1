"""Fixtures: the live chatd that internal/pytest started (CHATD_URL, CHATD_TOKEN).

With it: an admin token (CHATD_ADMIN_TOKEN), and the ID tokens two users got
by signing in at the identity provider whose JWTs it accepts (CHATD_JWT_A,
CHATD_JWT_B; their subjects CHATD_SUBJECT_A, CHATD_SUBJECT_B).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

import chatd

from .proxy import Proxy


_VARS = ("CHATD_URL", "CHATD_TOKEN", "CHATD_ADMIN_TOKEN", "CHATD_JWT_A", "CHATD_SUBJECT_A", "CHATD_JWT_B",
         "CHATD_SUBJECT_B")


def pytest_configure(config: pytest.Config) -> None:
    missing = [v for v in _VARS if not os.environ.get(v)]
    if missing:
        raise pytest.UsageError(f"{', '.join(missing)} must be set (run through go test ./internal/pytest)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def base_url() -> str:
    return os.environ["CHATD_URL"]


@pytest.fixture
def token() -> str:
    return os.environ["CHATD_TOKEN"]


@pytest.fixture
def client() -> Iterator[chatd.Client]:
    with chatd.Client() as c:
        yield c


@pytest.fixture
def proxy(base_url: str) -> Iterator[Proxy]:
    p = Proxy(base_url)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def admin(base_url: str) -> Iterator[chatd.Client]:
    """A client with a token of the admin scope."""
    with chatd.Client(base_url, os.environ["CHATD_ADMIN_TOKEN"]) as c:
        yield c


@dataclass(frozen=True)
class SignedIn:
    """A user of the app signed in at its identity provider: the ID token (a JWT) and its subject."""

    jwt: str
    subject: str


@pytest.fixture
def user_a() -> SignedIn:
    return SignedIn(os.environ["CHATD_JWT_A"], os.environ["CHATD_SUBJECT_A"])


@pytest.fixture
def user_b() -> SignedIn:
    return SignedIn(os.environ["CHATD_JWT_B"], os.environ["CHATD_SUBJECT_B"])
