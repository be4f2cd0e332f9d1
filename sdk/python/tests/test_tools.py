"""Client tools: Python callables answer the model's calls, their schemas from type hints."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel

import chatd
from chatd import types as t


class Zone(BaseModel):
    name: str


class TimeArgs(BaseModel):
    zone: Zone


def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, object]:
    """Weather for a city.

    Longer notes that are not the description.
    """
    return {"city": city, "forecast": "sunny", "unit": unit}


async def get_time(args: TimeArgs) -> str:
    """The time in a zone."""
    return f"noon in {args.zone.name}"


def test_schemas_from_type_hints_and_models() -> None:
    w = chatd.tool(get_weather)
    assert w.name == "get_weather" and w.description == "Weather for a city."
    assert w.input_schema["required"] == ["city"]
    assert w.input_schema["properties"]["unit"]["enum"] == ["c", "f"]
    assert w.input_schema["additionalProperties"] is False
    tm = chatd.tool(get_time)
    assert tm.input_schema == TimeArgs.model_json_schema() and tm.is_async
    with pytest.raises(ValueError):
        chatd.tool(name="bad name")(get_weather)


def test_a_turn_answers_its_client_tool(client: chatd.Client) -> None:
    turn = client.create_chat("[weather] in Florence?", tools=[get_weather])
    assert turn.text() == "mockllm: [weather] in Florence?"
    msgs = client.list_messages(turn.chat_id).messages
    results = [p for m in msgs for p in m.content if isinstance(p, t.ToolResultPart)]
    assert [r.result for r in results] == [{"city": "Florence", "forecast": "sunny", "unit": "c"}]


def test_sync_and_async_tools_in_one_step_and_a_structured_result(client: chatd.Client) -> None:
    class Answer(BaseModel):
        summary: str

    tools = chatd.Tools([get_weather, get_time])
    turn = client.create_chat("[two-tools] weather and time", tools=tools, response_format=Answer)
    result = turn.wait()
    assert isinstance(result.parsed, Answer)
    msgs = client.list_messages(turn.chat_id).messages
    results = {p.tool_name: p.result for m in msgs for p in m.content if isinstance(p, t.ToolResultPart)}
    results.pop("coder_structured_output")  # the server's acknowledgement of the value
    assert results == {"get_weather": {"city": "Rome", "forecast": "sunny", "unit": "c"}, "get_time": "noon in Europe/Rome"}


def test_a_failing_tool_is_an_error_result(client: chatd.Client) -> None:
    def get_weather(city: str) -> str:
        raise RuntimeError(f"no forecast for {city}")

    turn = client.create_chat("[weather] in Florence?", tools=[get_weather])
    turn.text()
    msgs = client.list_messages(turn.chat_id).messages
    results = [p for m in msgs for p in m.content if isinstance(p, t.ToolResultPart)]
    assert len(results) == 1 and results[0].is_error
    assert "RuntimeError: no forecast for Florence" in str(results[0].result)
