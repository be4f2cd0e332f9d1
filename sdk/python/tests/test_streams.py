"""Streams: typed events, resumed with Last-Event-ID, partials, text, watch."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

import chatd
from chatd import types as t

from .proxy import Proxy, Seen


class Item(BaseModel):
    name: str
    tags: list[str]


class Doc(BaseModel):
    title: str
    items: list[Item]


def ready() -> str:
    """Say that you are ready."""
    return "ready"


def cut_first_stream(proxy: Proxy) -> None:
    """The proxy cuts the first stream after its 12th message_part event."""

    def plan(n: int, s: Seen) -> tuple[str, int] | None:
        streams = [x for x in proxy.seen if x.path.split("?")[0].endswith("/stream")]
        return ("cut", 12) if s in streams[:1] else None

    proxy.plan = plan


def is_receipt(ev: Any, request_id: str) -> bool:
    so = ev.data.structured_output if isinstance(ev, t.StreamMessageEvent) else None
    return so is not None and str(so.request_id) == request_id


def check_resumed(proxy: Proxy, events: list[Any], reconnects: list[chatd.ReconnectInfo]) -> None:
    """One reconnection, at a cursor inside the finalizer's generation, and
    every fragment of that generation once, in order, with no preview_reset."""
    assert len(reconnects) == 1, reconnects
    resumed = [s.last_event_id for s in proxy.seen if s.path.split("?")[0].endswith("/stream")][1:]
    assert resumed and resumed[0] is not None and resumed[0].count(":") == 3, resumed
    parts = [ev.data for ev in events if isinstance(ev, t.StreamMessagePartEvent)]
    gen = (parts[-1].history_version, parts[-1].generation_attempt)
    mine = [p for p in parts if (p.history_version, p.generation_attempt) == gen]
    _, hist, attempt, seq = map(int, resumed[0].split(":"))
    assert (hist, attempt) == gen and 1 < seq < mine[-1].seq, f"cut at {resumed[0]}, not within {gen}"
    first = events.index(next(ev for ev in events if isinstance(ev, t.StreamMessagePartEvent) and ev.data in mine))
    assert not any(isinstance(ev, t.StreamPreviewResetEvent) for ev in events[first:])
    expect = mine[0].from_seq or mine[0].seq
    for p in mine:
        start = p.from_seq or p.seq
        assert start == expect, f"fragment {start}..{p.seq} after {expect - 1}: a gap or a duplicate"
        expect = p.seq + 1
    args = "".join(p.part.args_delta or "" for p in mine if isinstance(p.part, t.ToolCallPart))
    assert '"output"' in args and "ünïcödé" in args
    ids = [ev.data.id for ev in events if isinstance(ev, t.StreamMessageEvent)]
    assert len(ids) == len(set(ids)), "no message twice"


def test_a_stream_cut_mid_step_resumes_without_duplicates_or_gaps(proxy: Proxy, token: str) -> None:
    # "[slow-doc]": the model calls the client tool "ready" (the test answers
    # it once its stream is open), then writes the document 40 ms a
    # fragment. The proxy cuts the stream mid-step; the SDK reconnects with
    # the event id of the last fragment it got.
    cut_first_stream(proxy)
    reconnects: list[chatd.ReconnectInfo] = []
    events: list[Any] = []
    with chatd.Client(proxy.url, token, backoff=0.01) as c:
        turn = c.create_chat("[slow-doc] write the document.", response_format=Doc, tools=[ready])
        with c.stream(turn.chat_id, on_reconnect=reconnects.append) as stream:
            for ev in stream:
                events.append(ev)
                if isinstance(ev, t.StreamActionRequiredEvent):
                    call = ev.data.tool_calls[0]
                    c.submit_tool_results(turn.chat_id, [{"tool_call_id": call.tool_call_id, "output": "ready"}])
                if is_receipt(ev, turn.request_id):
                    break
    check_resumed(proxy, events, reconnects)


@pytest.mark.anyio
async def test_an_async_stream_cut_mid_step_resumes_without_duplicates_or_gaps(proxy: Proxy, token: str) -> None:
    cut_first_stream(proxy)
    reconnects: list[chatd.ReconnectInfo] = []
    events: list[Any] = []
    async with chatd.AsyncClient(proxy.url, token, backoff=0.01) as c:
        turn = await c.create_chat("[slow-doc] write the document.", response_format=Doc, tools=[ready])
        async with c.stream(turn.chat_id, on_reconnect=reconnects.append) as stream:
            async for ev in stream:
                events.append(ev)
                if isinstance(ev, t.StreamActionRequiredEvent):
                    call = ev.data.tool_calls[0]
                    await c.submit_tool_results(turn.chat_id, [{"tool_call_id": call.tool_call_id, "output": "ready"}])
                if is_receipt(ev, turn.request_id):
                    break
    check_resumed(proxy, events, reconnects)


def test_partials_grow_then_the_result(client: chatd.Client) -> None:
    turn = client.create_chat("[slow-doc] write the document.", response_format=Doc, tools=[ready])
    got: list[chatd.Partial[Doc]] = []
    with turn.partials() as partials:
        for p in partials:
            got.append(p)
    result = partials.result
    assert isinstance(result.parsed, Doc)
    assert len(got) >= 2, got
    prev = ""
    for p in got:
        title = str(p.value.get("title", ""))
        assert title.startswith(prev), (title, prev)
        prev = title
    assert got[-1].value == result.value, "the last partial is the receipt's value"
    assert got[-1].parsed == result.parsed  # complete: it validates
    assert any(p.parsed is None for p in got), "a model validates only once complete"


def test_partials_of_a_list_validate_as_they_grow(client: chatd.Client) -> None:
    turn = client.create_chat("[slow-doc] write the document.", response_format=Doc, tools=[ready])
    turn.wait()
    # A list of models validates partially (the incomplete last item dropped).
    out = chatd.output_of(list[Item])
    assert out.partial([{"name": "a", "tags": ["x"]}, {"name": "b"}]) == [Item(name="a", tags=["x"])]
    assert chatd.output_of(Doc).partial({"title": "x"}) is None


def test_text_of_a_plain_turn(client: chatd.Client) -> None:
    turn = client.create_chat("Say hello.")
    assert turn.text() == "mockllm: Say hello."
    again = client.send(turn.chat_id, "Once more.")
    assert again.text() == "mockllm: Once more."


def test_text_of_a_queued_turn(client: chatd.Client) -> None:
    first = client.create_chat("[hold] a long one")
    queued = client.send(first.chat_id, "Queued one.")
    assert queued.queued_message is not None
    client.interrupt(first.chat_id)
    assert queued.text() == "mockllm: Queued one."


def test_a_failed_turn_raises_turn_failed(client: chatd.Client) -> None:
    turn = client.create_chat("[provider-fail] please")
    with pytest.raises(chatd.TurnFailed) as info:
        turn.text()
    assert info.value.code == "provider_error" and info.value.message


def test_a_failed_turn_is_an_error_event_not_a_transport_error(client: chatd.Client) -> None:
    turn = client.create_chat("[provider-fail] please")
    reconnects: list[chatd.ReconnectInfo] = []
    with client.stream(turn.chat_id, on_reconnect=reconnects.append) as stream:
        for ev in stream:
            if isinstance(ev, t.StreamErrorEvent):
                assert ev.data.code == "provider_error"
                break
    assert reconnects == []


def test_a_stream_of_an_unknown_chat_raises_not_found(client: chatd.Client) -> None:
    with pytest.raises(chatd.NotFoundError):
        with client.stream(str(uuid.uuid4())) as stream:
            next(stream)


def test_watch_yields_chat_events(client: chatd.Client) -> None:
    turn = client.create_chat("Watch me.")
    with client.watch() as events:
        for ev in events:
            if isinstance(ev, t.WatchChatEvent) and str(ev.data.id) == turn.chat_id:
                break


def test_event_source_url_carries_a_single_use_ticket(client: chatd.Client) -> None:
    turn = client.create_chat("Ticket.")
    url = client.event_source_url(turn.chat_id, after_id=0)
    assert "ticket=cst_" in url
    with httpx.stream("GET", url, headers={"Accept": "text/event-stream"}) as first:
        assert first.status_code == 200
    assert httpx.get(url).status_code == 401


def test_text_times_out_on_a_silent_turn(client: chatd.Client) -> None:
    turn = client.create_chat("[hold] never answered")
    with pytest.raises(chatd.WaitTimeout):
        turn.text(timeout=1.0)
    client.interrupt(turn.chat_id)
