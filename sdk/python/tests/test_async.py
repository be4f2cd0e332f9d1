"""The async client: the same calls, awaited."""

from __future__ import annotations

import threading

import pytest
from pydantic import BaseModel

import chatd
from chatd import types as t

from .test_tools import TimeArgs

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


async def test_async_client_runs_sync_and_async_tools_of_one_step() -> None:
    threads: list[str] = []

    def get_weather(city: str) -> str:  # sync: run in a worker thread, off the event loop
        threads.append(threading.current_thread().name)
        return f"sunny in {city}"

    async def get_time(args: TimeArgs) -> str:
        return f"noon in {args.zone.name}"

    async with chatd.AsyncClient() as c:
        turn = await c.create_chat("[two-tools] weather and time", tools=[get_weather, get_time])
        await turn.text()
        page = await c.list_messages(turn.chat_id)
    results = {p.tool_name: p.result for m in page.messages for p in m.content if isinstance(p, t.ToolResultPart)}
    assert results == {"get_weather": "sunny in Rome", "get_time": "noon in Europe/Rome"}
    assert threads and threads[0] != threading.main_thread().name
