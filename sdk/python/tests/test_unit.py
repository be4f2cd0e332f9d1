"""What needs no server: SSE decoding, open unions, response formats, JWT sources."""

from __future__ import annotations

import base64
import json
import threading
import time
from datetime import timedelta
from typing import get_args

import anyio
import pytest

import chatd
from chatd import _core as core  # pyright: ignore[reportPrivateUsage]
from chatd import _jwt  # pyright: ignore[reportPrivateUsage]
from chatd import output_of, types as t


def test_sse_decoder() -> None:
    d = core.SSEDecoder()
    lines = [": keep-alive", "event: message_part", "id: 7:1:1:3", 'data: {"a":', "data: 1}", "", "", "data: x", ""]
    got = [e for e in (d.line(x) for x in lines) if e is not None]
    assert [(e.event, e.id, e.data) for e in got] == [("message_part", "7:1:1:3", '{"a":\n1}'), ("message", None, "x")]


def test_unknown_events_and_parts_do_not_fail() -> None:
    ev = core.decode_stream_event(core.RawEvent("newfangled", '{"x":1}', "3"))
    assert isinstance(ev, core.UnknownEvent) and ev.event == "newfangled" and ev.data == {"x": 1}
    msg = t.ChatMessage.model_validate({
        "id": 1, "chat_id": "0a6e0000-0000-4000-8000-000000000000", "role": "assistant",
        "created_at": "2026-01-01T00:00:00Z",
        "content": [{"type": "text", "text": "hi"}, {"type": "image", "url": "u"}],
    })
    text, unknown = msg.content
    assert isinstance(text, t.TextPart) and text.type == "text"
    assert isinstance(unknown, t.UnknownPart) and unknown.type == "unknown" and unknown.original_type == "image"
    assert unknown.model_extra == {"url": "u"}


def test_message_events_keep_their_id() -> None:
    ev = core.decode_stream_event(core.RawEvent("history_reset", "{}", None))
    assert isinstance(ev, t.StreamHistoryResetEvent)


def test_response_format_names() -> None:
    assert output_of(list[int]).response_format["json_schema"]["name"] == "list"
    rf = output_of({"type": "string", "title": "A title!"}).response_format
    assert rf["json_schema"]["name"] == "A_title" and rf["json_schema"]["schema"]["type"] == "string"
    wire = {"type": "json_schema", "json_schema": {"name": "n", "schema": {}}}
    assert output_of(wire).response_format == wire


def fake_jwt(claims: object) -> str:
    """A JWT's form with these claims (unsigned: only the server verifies)."""
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"e30.{body}.sig"


def test_jwt_expiry_reads_exp_only_when_there_is_one() -> None:
    assert _jwt.jwt_expiry(fake_jwt({"exp": 1700000000})) == 1700000000
    for token in (fake_jwt({"sub": "x"}), fake_jwt({"exp": "soon"}), fake_jwt({"exp": True}), fake_jwt([1]),
                  "chatd_opaque", "a.%%%.c", "a.e30"):
        assert _jwt.jwt_expiry(token) == 0, token


def test_jwt_source_reuses_until_the_margin() -> None:
    fetched: list[int] = []

    def fetch(expires_in: int) -> str:
        fetched.append(expires_in)
        return fake_jwt({"exp": time.time() + expires_in, "n": len(fetched)})

    soon = chatd.jwt_source(lambda: fetch(30))
    assert soon() != soon() and fetched == [30, 30], "30 s from its exp is within the 60 s margin"
    fetched.clear()
    hour = chatd.jwt_source(lambda: fetch(3600))
    assert hour() == hour() and fetched == [3600]
    no_exp = chatd.jwt_source(lambda: fetched.append(0) or "opaque")
    no_exp()
    no_exp()
    assert fetched == [3600, 0, 0]


def literals(annotation: object) -> set[str]:
    """The string literals anywhere in a type (list[Literal[...]] | None: its literals)."""
    args = get_args(annotation)
    return {a for a in args if isinstance(a, str)} | {s for a in args for s in literals(a)}


def test_scope_is_the_generated_vocabulary() -> None:
    for model in (t.CreateTokenRequest, t.Token):
        assert literals(model.model_fields["scopes"].annotation) == set(get_args(chatd.Scope)), model


def test_token_expiry_in_whole_seconds_rounded_up() -> None:
    assert core.token_body("u", None, None, 0.2) == {"user": "u", "expires_in": 1}
    assert core.token_body("u", ["read"], True, timedelta(hours=1)) == {
        "user": "u", "scopes": ["read"], "act_as": True, "expires_in": 3600}


def test_jwt_source_shares_one_fetch_among_threads() -> None:
    release, entered = threading.Event(), threading.Event()
    fetches = 0

    def fetch() -> str:
        nonlocal fetches
        fetches += 1
        entered.set()
        assert release.wait(30)
        return fake_jwt({"exp": time.time() + 3600})

    source = chatd.jwt_source(fetch)
    got: list[str] = []
    started = threading.Semaphore(0)

    def ask() -> None:
        started.release()
        got.append(source())

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for th in threads:
        th.start()
    for _ in threads:
        assert started.acquire(timeout=30)
    assert entered.wait(30)
    release.set()
    for th in threads:
        th.join(30)
    assert fetches == 1 and len(got) == 4 and len(set(got)) == 1


@pytest.mark.anyio
async def test_async_jwt_source_shares_one_fetch() -> None:
    release = anyio.Event()
    fetches = 0

    async def fetch() -> str:
        nonlocal fetches
        fetches += 1
        await release.wait()
        return fake_jwt({"exp": time.time() + 3600})

    source = chatd.async_jwt_source(fetch)
    got: list[str] = []

    async def ask() -> None:
        got.append(await source())

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(ask)
        await anyio.wait_all_tasks_blocked()  # every task waits: on the fetch, or for it
        release.set()
    assert fetches == 1 and len(got) == 4 and len(set(got)) == 1
