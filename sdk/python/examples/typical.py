"""Typical chatd code: a structured request typed by a Pydantic model, its
partial values, failures, a client tool, and the same with the async client.

Run it against `make run` and `make mockllm` with CHATD_URL and CHATD_TOKEN
set: the mock's rules answer #weather with a tool call, #refuse with a
refusal and #hold not at all.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import BaseModel, Field

import chatd
from chatd.types import Attempt


class Step(BaseModel):
    name: str
    command: str


class ProjectReport(BaseModel):
    """How to run the project's tests."""

    command: str = Field(description="The command that runs the tests.")
    steps: list[Step]
    confidence: Literal["low", "medium", "high"]


def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, str | int]:
    """The weather in a city."""
    return {"city": city, "forecast": "sunny", "temperature": 24 if unit == "c" else 75}


def why(attempts: list[Attempt]) -> str:
    return "; ".join(f"#{a.attempt} {a.reason}: {a.errors[0].message}" for a in attempts if a.errors)


def structured(client: chatd.Client) -> ProjectReport:
    turn = client.create_chat("Inspect the project and report its test command.", response_format=ProjectReport)
    result = turn.wait()
    report: ProjectReport = result.parsed
    print(f"report: {report.command} ({len(report.steps)} steps, {report.confidence}), repairs: {len(result.attempts)}")
    return report


def partials(client: chatd.Client) -> None:
    turn = client.create_chat("Write the report again.", response_format=ProjectReport)
    with turn.partials() as values:
        for p in values:  # previews while the model writes: never a result
            print("so far:", p.value, "(restarted)" if p.restarted else "")
    print("partials ended with:", values.result.parsed.command)


def failures(client: chatd.Client) -> None:
    refused = client.create_chat("#refuse Report the test command.", response_format=ProjectReport)
    try:
        refused.wait()
    except chatd.StructuredOutputFailed as e:
        print(f"failed: {e.code}: {e.message} {why(e.attempts)}".rstrip())
    held = client.create_chat("#hold Report the test command.", response_format=ProjectReport)
    client.interrupt(held.chat_id)
    try:
        held.wait(timeout=60)
    except chatd.StructuredOutputCancelled as e:
        print(f"cancelled: {e.code}")
    try:
        client.create_chat("x", response_format={"type": "json_schema", "json_schema": {"name": "no spaces!", "schema": {}}})
    except chatd.BadRequestError as e:
        print(f"refused: HTTP {e.status} {e.fields} (request {e.request_id})")


def tools(client: chatd.Client) -> None:
    turn = client.create_chat("#weather What is the weather in Florence?", tools=[get_weather])
    print("answer:", turn.text())  # get_weather ran here, its result went back to the model


async def main_async() -> None:
    async with chatd.AsyncClient() as client:
        turns = await asyncio.gather(
            *(client.create_chat(f"Report {n}.", response_format=ProjectReport) for n in range(3))
        )
        results = await asyncio.gather(*(t.wait() for t in turns))
        print("async reports:", [r.parsed.command for r in results])
        weather = await client.create_chat("#weather And in Rome?", tools=[get_weather])
        print("async answer:", await weather.text())
        async with client.stream(weather.chat_id) as events:
            async for ev in events:
                if isinstance(ev, chatd.types.StreamStatusEvent):
                    print("async status:", ev.data.status)
                    break


def main() -> None:
    with chatd.Client() as client:
        structured(client)
        partials(client)
        failures(client)
        tools(client)
    asyncio.run(main_async())


if __name__ == "__main__":
    main()
