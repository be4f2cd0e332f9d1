"""Static checks of the SDK's typing (pyright --strict reads this file; it is never run).

response_format= types what wait(), partials() and their results give; the
token API answers with the generated models; JWT sources are token callables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, TypeAdapter
from typing_extensions import TypedDict, assert_type

import chatd
from chatd import types as t


class Item(BaseModel):
    name: str


class Row(TypedDict):
    name: str


@dataclasses.dataclass
class Point:
    x: int


def sync(c: chatd.Client) -> None:
    assert_type(c.create_chat("x", response_format=Item).wait().parsed, Item)
    assert_type(c.create_chat("x", response_format=list[Item]).wait().parsed, list[Item])
    assert_type(c.create_chat("x", response_format=Row).wait().parsed, Row)
    assert_type(c.create_chat("x", response_format=Point).wait().parsed, Point)
    assert_type(c.create_chat("x", response_format=TypeAdapter[int | str](int | str)).wait().parsed, int | str)
    assert_type(c.create_chat("x", response_format={"type": "object"}).wait().parsed, Any)
    assert_type(c.create_chat("x"), chatd.Turn)
    assert_type(c.create_chat("x").text(), str)
    assert_type(c.send("chat", "x", response_format=Item), chatd.StructuredTurn[Item])
    assert_type(c.wait_structured_output("request", Item), chatd.StructuredResult[Item])
    with c.create_chat("x", response_format=list[Item]).partials() as partials:
        for p in partials:
            assert_type(p.parsed, list[Item] | None)
        assert_type(partials.result.parsed, list[Item])


async def asynchronous(c: chatd.AsyncClient) -> None:
    turn = await c.create_chat("x", response_format=Item)
    assert_type(turn, chatd.AsyncStructuredTurn[Item])
    assert_type((await turn.wait()).parsed, Item)
    async with turn.partials() as partials:
        async for p in partials:
            assert_type(p.parsed, Item | None)
    assert_type(await (await c.create_chat("x")).text(), str)


def identity(c: chatd.Client, fetch: Callable[[], str]) -> None:
    made = c.create_token("u", scopes=["read"], act_as=True, expires_in=timedelta(hours=1))
    assert_type(made, t.CreateTokenResponse)
    assert_type(made.token.scopes, list[chatd.Scope])
    assert_type(c.list_tokens(user="u").tokens, list[t.Token])
    assert_type(c.revoke_token(made.token.id), None)
    assert_type(c.list_users(limit=10).users, list[t.User])
    assert_type(next(c.iter_users()), t.User)
    assert_type(chatd.jwt_source(fetch), Callable[[], str])
    assert_type(chatd.Client(token=chatd.jwt_source(fetch), act_as="subject").act_as("other"), chatd.Client)
    try:
        c.create_chat("x")
    except chatd.PermissionDeniedError as e:
        assert_type(e.required_scope, str | None)


async def identity_async(c: chatd.AsyncClient, fetch: Callable[[], Awaitable[str]]) -> None:
    assert_type(await c.create_token("u", scopes=["write", "admin"]), t.CreateTokenResponse)
    assert_type(await c.revoke_token("id"), None)
    assert_type([u async for u in c.iter_users()], list[t.User])
    source = chatd.async_jwt_source(fetch)
    assert_type(source, Callable[[], Awaitable[str]])
    assert_type(chatd.AsyncClient(token=source).act_as("subject"), chatd.AsyncClient)
