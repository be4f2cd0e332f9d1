"""One exception hierarchy, mapped from the API's error body."""

from __future__ import annotations

import uuid

import pytest

import chatd


def test_a_400_names_the_field(client: chatd.Client) -> None:
    bad = {"type": "json_schema", "json_schema": {"name": "bad name!", "schema": {"type": "object"}}}
    with pytest.raises(chatd.BadRequestError) as info:
        client.create_chat("x", response_format=bad)
    err = info.value
    assert err.status == 400 and err.fields == ["response_format.json_schema.name"]
    assert err.validations[0].detail and err.message and err.request_id
    assert isinstance(err, chatd.APIError) and isinstance(err, chatd.ChatdError)


def test_statuses_map_to_classes(client: chatd.Client) -> None:
    with pytest.raises(chatd.NotFoundError):
        client.get_chat(str(uuid.uuid4()))
    turn = client.create_chat("Quick.")
    turn.text()
    with pytest.raises(chatd.ConflictError) as info:
        client.interrupt(turn.chat_id)
    assert "no turn to interrupt" in info.value.message


def test_no_token_is_a_chatd_error(base_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHATD_TOKEN")
    with chatd.Client(base_url) as c:
        with pytest.raises(chatd.ChatdError, match="no token"):
            c.list_chats()


def test_connection_refused_is_a_connection_error(token: str) -> None:
    with chatd.Client("http://127.0.0.1:9", token, backoff=0.001, max_retries=1) as c:
        with pytest.raises(chatd.APIConnectionError):
            c.get_chat(str(uuid.uuid4()))
