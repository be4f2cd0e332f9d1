"""Deleting and exporting a chat; the admin routes refuse a user's token."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

import chatd


class Report(BaseModel):
    command: str


def test_export_then_delete_a_chat(client: chatd.Client) -> None:
    turn = client.create_chat("Report.", response_format=Report)
    turn.wait(timeout=60)
    lines = list(client.export_chat(turn.chat_id))
    types = [line["type"] for line in lines]
    assert types[0] == "chatd_export" and types[-1] == "end"
    assert "structured_request" in types and "message" in types
    deleted = client.delete_chat(turn.chat_id)
    assert [str(i) for i in deleted.deleted_chat_ids] == [turn.chat_id]
    assert deleted.cancelled_request_ids == []
    with pytest.raises(chatd.NotFoundError, match="was deleted"):
        client.delete_chat(turn.chat_id)
    with pytest.raises(chatd.NotFoundError):
        list(client.export_chat(turn.chat_id))
    looked = client.get_structured_output(str(turn.request_id))
    assert looked.status == "succeeded" and looked.chat_deleted is not None
    assert looked.chat_deleted.reason == "deleted" and looked.value is None


def test_admin_routes_need_the_admin_scope(client: chatd.Client) -> None:
    with pytest.raises(chatd.PermissionDeniedError):
        client.erase_user("someone")
    with pytest.raises(chatd.PermissionDeniedError):
        list(client.export_user("someone"))


@pytest.mark.anyio
async def test_async_export_and_delete() -> None:
    async with chatd.AsyncClient() as c:
        turn = await c.create_chat("Report.", response_format=Report)
        await turn.wait(timeout=60)
        types = [line["type"] async for line in c.export_chat(turn.chat_id)]
        assert types[0] == "chatd_export" and types[-1] == "end"
        deleted = await c.delete_chat(turn.chat_id)
        assert [str(i) for i in deleted.deleted_chat_ids] == [turn.chat_id]
        with pytest.raises(chatd.NotFoundError):
            await c.delete_chat(turn.chat_id)
