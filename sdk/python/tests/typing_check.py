"""Static checks of the SDK's typing (pyright --strict reads this file; it is never run).

response_format= types what wait(), partials() and their results give.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel, TypeAdapter
from typing_extensions import TypedDict, assert_type

import chatd


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
