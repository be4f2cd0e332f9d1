"""Retries: creates and sends survive 503s, dropped connections and lost answers, exactly once."""

from __future__ import annotations

import time
import uuid

import pytest

import chatd

from .proxy import Proxy, Seen


def test_a_retry_after_a_dropped_connection_does_not_create_a_second_chat(
    proxy: Proxy, client: chatd.Client, token: str
) -> None:
    # Requests 0-3 create the chat, 4-7 send a message: each call gets a 503,
    # a dropped connection and a lost answer (done by the server, never
    # seen) before its answer comes through.
    plan = ["503", "drop", "lost", None]
    proxy.plan = lambda n, s: plan[n % 4]
    with chatd.Client(proxy.url, token, backoff=0.01) as flaky:
        created = flaky.create_chat("Exactly once.")
        sent = flaky.send(created.chat_id, "Sent exactly once.")
    assert len(proxy.seen) == 8
    create_keys = {s.idempotency_key for s in proxy.seen[:4]}
    send_keys = {s.idempotency_key for s in proxy.seen[4:]}
    assert len(create_keys) == 1 and len(send_keys) == 1, "a call's retries reuse its key"
    assert create_keys.isdisjoint(send_keys) and None not in create_keys | send_keys
    mine = [c for c in client.iter_chats(page_size=200) if str(c.id) == created.chat_id]
    assert len(mine) == 1
    page = client.list_messages(created.chat_id)
    texts = [p.text for m in [*page.messages, *page.queued_messages] for p in m.content if isinstance(p, chatd.types.TextPart)]
    assert texts.count("Exactly once.") == 1 and texts.count("Sent exactly once.") == 1
    assert sent.message is not None or sent.queued_message is not None


def test_a_call_that_is_not_a_create_or_send_is_not_retried(proxy: Proxy, token: str) -> None:
    proxy.plan = lambda n, s: "503" if n == 0 else None
    with chatd.Client(proxy.url, token, backoff=0.01) as flaky:
        with pytest.raises(chatd.ServiceUnavailableError) as info:
            flaky.interrupt(str(uuid.uuid4()))
    assert info.value.status == 503 and len(proxy.seen) == 1


def test_reads_are_retried_and_give_up(proxy: Proxy, token: str) -> None:
    proxy.plan = lambda n, s: "drop"
    with chatd.Client(proxy.url, token, backoff=0.01, max_retries=2) as flaky:
        with pytest.raises(chatd.APIConnectionError):
            flaky.list_chats()
    assert len(proxy.seen) == 3


def test_retry_after_is_honoured(proxy: Proxy, token: str) -> None:
    def plan(n: int, s: Seen) -> str | None:
        return "503" if n in (0, 2) else None

    proxy.plan = plan
    # Retry-After: 1 is waited for, though the backoff is 10 ms.
    proxy.retry_after = "1"
    with chatd.Client(proxy.url, token, backoff=0.01) as flaky:
        started = time.monotonic()
        flaky.list_chats(limit=1)
        assert time.monotonic() - started >= 0.95
        # Retry-After: 0 means at once, though the backoff is 2 s.
        proxy.retry_after = "0"
        flaky.backoff = 2.0
        started = time.monotonic()
        flaky.list_chats(limit=1)
        assert time.monotonic() - started < 1.5
    assert len(proxy.seen) == 4


def test_a_given_idempotency_key_replays_the_first_answer(client: chatd.Client) -> None:
    key = str(uuid.uuid4())
    a = client.create_chat("Once.", idempotency_key=key)
    b = client.create_chat("Once.", idempotency_key=key)
    assert a.chat_id == b.chat_id


def test_a_token_callable_is_asked_for_each_request_and_again_after_a_401(base_url: str, token: str) -> None:
    # Each call's first token has expired (as a JWT may on the way); the
    # callable gives a fresh one when asked again.
    tokens = ["expired", token, token, "expired", token]

    def fresh() -> str:
        return tokens.pop(0)

    with chatd.Client(base_url, fresh) as c:
        c.list_chats(limit=1)  # 401, then the fresh token
        turn = c.create_chat("Stream me.")
        with c.stream(turn.chat_id) as events:  # a stream asks for its own: 401, then fresh
            assert isinstance(next(events), chatd.types.StreamMessageEvent)
    assert tokens == []
    with chatd.Client(base_url, lambda: "wrong") as c:
        with pytest.raises(chatd.AuthenticationError) as info:
            c.list_chats()
    assert info.value.status == 401 and info.value.request_id
