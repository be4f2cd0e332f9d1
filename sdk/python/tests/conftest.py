"""Fixtures: the live chatd that internal/pytest started (CHATD_URL, CHATD_TOKEN)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import chatd

from .proxy import Proxy


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("CHATD_URL") or not os.environ.get("CHATD_TOKEN"):
        raise pytest.UsageError("CHATD_URL and CHATD_TOKEN must be set (run through go test ./internal/pytest)")


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
