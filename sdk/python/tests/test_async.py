"""The async client: the same calls, awaited."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

import chatd
from chatd import types as t

pytestmark = pytest.mark.anyio


class Report(BaseModel):
    command: str


async def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


async def test_async_create_wait_partials_text_tools() -> None:
    tokens: list[int] = []

    async def token() -> str:  # an async token callable
        tokens.append(1)
        import os

        return os.environ["CHATD_TOKEN"]

    async with chatd.AsyncClient(token=token) as c:
        turn = await c.create_chat("Report.", response_format=Report)
        result = await turn.wait()
        assert isinstance(result.parsed, Report)
        plain = await c.create_chat("[weather] there?", tools=[get_weather])
        assert await plain.text() == "mockllm: [weather] there?"
        failed = await c.create_chat("[invalid-always] Report.", response_format=Report)
        with pytest.raises(chatd.StructuredOutputFailed) as info:
            async with failed.partials() as partials:
                async for _ in partials:
                    pass
        assert len(info.value.attempts) == 3
        seen = 0
        async with c.stream(turn.chat_id) as events:
            async for ev in events:
                seen += 1
                if isinstance(ev, t.StreamStatusEvent):
                    break
        assert seen >= 2
        chats = [ch async for ch in c.iter_chats(page_size=2)]
        assert len(chats) >= 3
    assert len(tokens) >= 5
