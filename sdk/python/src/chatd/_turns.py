"""Following one turn on a chat's stream, without I/O: the sync and async clients feed it events."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from . import types as t
from ._core import UnknownEvent
from ._errors import ChatdError, TurnFailed
from ._structured import Output, Partial, StructuredResult, result_of_receipt
from ._tools import Tools, pending_calls

T = TypeVar("T")


@dataclass
class Step(Generic[T]):
    """What one event asks of the follower."""

    calls: list[t.ToolCall] = field(default_factory=lambda: [])
    partial: Partial[T] | None = None
    done: bool = False


class Tracker(Generic[T]):
    """Follows one turn: the client tool calls to answer, the partial values, and its end.

    A structured turn ends with its receipt (raised when it is not
    succeeded); a plain one when the chat goes idle or the next turn starts
    (raised when it ends in error). A queued message is recognised when it
    moves into history: the first user message with its content, created no
    earlier than it was queued.
    """

    def __init__(
        self,
        chat_id: str,
        *,
        message_id: int | None = None,
        queued: t.QueuedMessage | None = None,
        request_id: str | None = None,
        output: Output[T] | None = None,
        tools: Tools | None = None,
    ) -> None:
        self.chat_id = chat_id
        self.message_id = message_id
        self.queued = queued
        self.request_id = request_id
        self.output = output
        self.tools = tools
        self.answered: set[str] = set()
        self.restarted = False
        self.next_user: int | None = None
        self.assistant: dict[int, t.ChatMessage] = {}
        self.result: StructuredResult[T] | None = None

    def feed(self, ev: t.StreamEvent | UnknownEvent) -> Step[T]:
        step: Step[T] = Step()
        if isinstance(ev, UnknownEvent):
            return step
        if self.tools is not None:
            step.calls = [c for c in pending_calls(ev) if c.tool_call_id not in self.answered]
            self.answered.update(c.tool_call_id for c in step.calls)
        if isinstance(ev, t.StreamPreviewResetEvent):
            self.restarted = True
        elif isinstance(ev, t.StreamStructuredOutputPartialEvent):
            step.partial = self._partial(ev.data)
        elif isinstance(ev, t.StreamMessageEvent):
            step.done = self._message(ev.data)
        elif isinstance(ev, t.StreamHistoryResetEvent):
            self.assistant.clear()
        elif self.request_id is None:
            step.done = self._plain_end(ev)
        return step

    def _partial(self, p: t.StructuredOutputPartial) -> Partial[T] | None:
        if self.request_id is None or str(p.request_id) != self.request_id or self.output is None:
            return None
        part = Partial(value=p.value, parsed=self.output.partial(p.value), restarted=self.restarted, data=p)
        self.restarted = False
        return part

    def _message(self, m: t.ChatMessage) -> bool:
        if self.request_id is not None:
            so = m.structured_output
            if so is None or str(so.request_id) != self.request_id:
                return False
            assert self.output is not None
            self.result = result_of_receipt(m, self.output)
            return True
        if self.message_id is None and self.queued is not None and self._is_queued_message(m):
            self.message_id = m.id
            return False
        if self.message_id is None or m.id <= self.message_id:
            return False
        if m.role == "user":
            self.next_user = m.id if self.next_user is None else min(self.next_user, m.id)
            return True  # the next turn started: ours is over
        if m.role == "assistant" and (self.next_user is None or m.id < self.next_user):
            self.assistant[m.id] = m
        return False

    def _is_queued_message(self, m: t.ChatMessage) -> bool:
        q = self.queued
        assert q is not None
        return m.role == "user" and _texts(m.content) == _texts(q.content) and _after(m.created_at, q.created_at)

    def _plain_end(self, ev: t.StreamEvent) -> bool:
        if isinstance(ev, t.StreamErrorEvent) and self.message_id is not None:
            raise TurnFailed(self.chat_id, ev.data.code, ev.data.message)
        if not isinstance(ev, t.StreamStatusEvent) or ev.data.status not in ("waiting", "error"):
            return False
        if self.message_id is None:
            raise ChatdError(f"chatd: the queued message of chat {self.chat_id} did not run (was it deleted?)")
        if ev.data.status == "error":
            err = ev.data.last_error
            raise TurnFailed(self.chat_id, err.code if err else None, err.message if err else "The turn failed.")
        return True

    def text(self) -> str:
        """The text of the turn's answer: the text parts of its last assistant message with text."""
        for mid in sorted(self.assistant, reverse=True):
            texts = [p.text for p in self.assistant[mid].content if isinstance(p, t.TextPart)]
            if texts:
                return "".join(texts)
        return ""


def _texts(content: list[Any]) -> list[str]:
    return [p.text for p in content if isinstance(p, t.TextPart)]


def _after(a: datetime, b: datetime) -> bool:
    return a >= b
