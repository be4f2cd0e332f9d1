"""What needs no server: SSE decoding, open unions, response formats."""

from __future__ import annotations

from chatd import _core as core  # pyright: ignore[reportPrivateUsage]
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
