"""Structured output: types in, validated values out, failures raised with their attempts."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter
from typing_extensions import TypedDict

import chatd
from chatd.types import Attempt


class Step(BaseModel):
    name: str


class Report(BaseModel):
    """How to run the project's tests."""

    command: str
    steps: list[Step]


class Item(TypedDict):
    name: str
    count: int


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_parsed_is_an_instance_of_the_model(client: chatd.Client) -> None:
    turn = client.create_chat("Report the test command.", response_format=Report)
    assert turn.response.messages[0].structured_output_request_id is not None
    result = turn.wait()
    assert isinstance(result.parsed, Report)
    assert all(isinstance(s, Step) for s in result.parsed.steps)
    assert result.value == result.parsed.model_dump()  # the raw value beside it
    assert result.request_id == turn.request_id and result.chat_id == turn.chat_id
    assert result.receipt_message_id is not None and result.usage is not None


def test_the_schema_sent_is_the_models(client: chatd.Client) -> None:
    turn = client.create_chat("Report.", response_format=Report)
    rf = turn.output.response_format
    assert rf["json_schema"]["name"] == "Report"
    assert rf["json_schema"]["description"] == "How to run the project's tests."
    assert rf["json_schema"]["schema"] == Report.model_json_schema()
    turn.wait()


@pytest.mark.parametrize(
    ("tp", "check"),
    [
        (list[Step], lambda v: isinstance(v, list) and all(isinstance(s, Step) for s in v)),  # pyright: ignore[reportUnknownLambdaType, reportUnknownVariableType, reportUnknownArgumentType]
        (Item, lambda v: isinstance(v, dict) and isinstance(v["count"], int)),  # pyright: ignore[reportUnknownLambdaType, reportUnknownArgumentType]
        (Point, lambda v: isinstance(v, Point)),  # pyright: ignore[reportUnknownLambdaType]
        (TypeAdapter(int | str), lambda v: isinstance(v, (int, str))),  # pyright: ignore[reportUnknownLambdaType]
    ],
)
def test_typeadapter_types(client: chatd.Client, tp: Any, check: Any) -> None:
    result = client.create_chat("A value.", response_format=tp).wait()
    assert check(result.parsed), result


def test_a_json_schema_dict_gives_the_raw_value(client: chatd.Client) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    result = client.create_chat("A number.", response_format=schema, schema_name="number").wait()
    assert isinstance(result.parsed, dict) and isinstance(result.parsed["n"], int)
    assert result.parsed == result.value


def test_a_failed_receipt_raises_with_the_attempts(client: chatd.Client) -> None:
    turn = client.create_chat("[invalid-always] Report the test command.", response_format=Report)
    with pytest.raises(chatd.StructuredOutputFailed) as info:
        turn.wait()
    err = info.value
    assert err.code == "validation_exhausted" and err.status == "failed"
    assert re.match(r"^3 attempts were rejected; the last: .*\.$", err.message), err.message
    assert "coder_structured_output" not in err.message
    assert [(a.attempt, a.reason) for a in err.attempts] == [(i, "invalid_value") for i in (1, 2, 3)]
    for a in err.attempts:
        assert isinstance(a, Attempt) and a.errors
        assert all(e.keyword and e.message and isinstance(e.instance_path, str) for e in a.errors)
        assert a.truncated == (a.errors_total > len(a.errors))
    assert err.request_id == turn.request_id and err.chat_id == turn.chat_id
    assert isinstance(err, chatd.StructuredOutputNotSucceeded) and isinstance(err, chatd.ChatdError)


def test_a_failed_receipt_on_the_stream_raises_with_the_attempts(client: chatd.Client) -> None:
    # The receipt message's own error.attempts, read through the stream (partials), not the lookup.
    turn = client.create_chat("[invalid-always] Report.", response_format=Report)
    with pytest.raises(chatd.StructuredOutputFailed) as info:
        turn.partials().until_done()
    assert info.value.code == "validation_exhausted"
    assert [a.attempt for a in info.value.attempts] == [1, 2, 3]


def test_a_repaired_request_lists_its_attempt(client: chatd.Client) -> None:
    result = client.create_chat("[invalid-once] Report.", response_format=Report).wait()
    assert isinstance(result.parsed, Report)
    assert [a.reason for a in result.attempts] == ["invalid_value"]


def test_cancelled_raises(client: chatd.Client) -> None:
    turn = client.create_chat("[hold] Report.", response_format=Report)
    with pytest.raises(chatd.WaitTimeout):
        turn.wait(timeout=0.5)
    client.interrupt(turn.chat_id)
    with pytest.raises(chatd.StructuredOutputCancelled) as info:
        turn.wait()
    assert info.value.code == "interrupted" and info.value.status == "cancelled"


def test_a_value_the_type_refuses_raises_with_the_raw_value(client: chatd.Client) -> None:
    class Strict(BaseModel):
        command: str

        def model_post_init(self, context: Any) -> None:
            raise ValueError("never good enough")

    turn = client.create_chat("Report.", response_format=Strict)
    with pytest.raises(chatd.OutputValidationError) as info:
        turn.wait()
    assert isinstance(info.value.value, dict)


def test_wait_structured_output_by_id(client: chatd.Client) -> None:
    turn = client.create_chat("Report.", response_format=Report)
    result = client.wait_structured_output(turn.request_id, Report)
    assert isinstance(result.parsed, Report)
    raw = client.get_structured_output(turn.request_id)
    assert raw.status == "succeeded" and raw.value == result.value


def test_send_a_structured_message(client: chatd.Client) -> None:
    first = client.create_chat("Hello.")
    first.text()
    turn = client.send(first.chat_id, "Now report.", response_format=Report)
    assert isinstance(turn.wait().parsed, Report)
    queued = client.send(first.chat_id, "[hold] report", response_format=Report)
    behind = client.send(first.chat_id, "And again.", response_format=Report)
    assert behind.queued_message is not None and behind.message is None
    client.interrupt(first.chat_id)
    with pytest.raises(chatd.StructuredOutputCancelled):
        queued.wait()
    assert isinstance(behind.wait().parsed, Report)
