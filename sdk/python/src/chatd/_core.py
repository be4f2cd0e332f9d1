"""What the sync and async clients share: requests, retries, SSE decoding."""

from __future__ import annotations

import email.utils
import json
import math
import os
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, Literal, TypeVar, cast, get_args

import httpx
from pydantic import BaseModel, TypeAdapter

from . import types as t
from ._errors import ChatdError

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8080"
# A long poll asks the server to hold a pending request this long (its cap is 60 s).
LONG_POLL_SECONDS = 30
# Streams get a keep-alive comment every 15 s: four missed ones mean a dead connection.
STREAM_READ_TIMEOUT = 60.0
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
MAX_BACKOFF = 8.0


Scope = Literal["read", "write", "admin"]
"""What a token may do: read (GET routes and streams), write (everything a user does; brings read), admin (the token and user API)."""

# X-Chatd-User: the user a request acts for (a token with the act-as capability).
ACT_AS_HEADER = "X-Chatd-User"


def base_url_of(base_url: str | None) -> str:
    return (base_url or os.environ.get("CHATD_URL") or DEFAULT_URL).rstrip("/")


def env_token() -> str | None:
    return os.environ.get("CHATD_TOKEN") or None


@dataclass
class Call(Generic[T]):
    """One API call: what to send, how to read the answer, whether to retry it."""

    method: str
    path: str
    adapter: TypeAdapter[T]
    params: dict[str, Any] = field(default_factory=lambda: {})
    body: Any = None
    # Retried on connection errors, 429 and 503: reads, and creates and
    # sends, which carry an Idempotency-Key.
    retried: bool = False
    idempotency_key: str | None = None
    timeout: httpx.Timeout | None = None

    def headers(self) -> dict[str, str]:
        h = {"Accept": "application/json"}
        if self.idempotency_key is not None:
            h["Idempotency-Key"] = self.idempotency_key
        return h

    def query(self) -> dict[str, str]:
        return {k: str(v) for k, v in self.params.items() if v is not None}

    def parse(self, content: bytes) -> T:
        if not content:  # 204: no body
            return self.adapter.validate_python(None)
        return self.adapter.validate_json(content)


def new_key() -> str:
    """A fresh Idempotency-Key."""
    return str(uuid.uuid4())


def retry_after(resp: httpx.Response) -> float | None:
    """The Retry-After header in seconds (delta or HTTP date), if any."""
    v = resp.headers.get("retry-after")
    if not v:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        pass
    when = email.utils.parsedate_to_datetime(v) if v else None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff(base: float, attempt: int) -> float:
    """The wait before retry number `attempt` (1, 2, ...): doubling, with jitter."""
    d = min(MAX_BACKOFF, base * 2 ** (attempt - 1))
    return d * (0.75 + random.random() / 2)


def delay(resp: httpx.Response, base: float, attempt: int) -> float:
    """The wait before retrying a 429 or 503: its Retry-After (0 too), else the backoff."""
    after = retry_after(resp)
    return min(after, 60.0) if after is not None else backoff(base, attempt)


RETRIED_STATUSES = frozenset({429, 503})


def safe_to_retry(exc: httpx.TransportError) -> bool:
    """Whether a transport error proves the request never reached the server."""
    return isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))


def text_parts(content: str | Sequence[t.TextPart | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The wire form of message content: a string is one text part."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out: list[dict[str, Any]] = []
    for p in content:
        out.append(p.model_dump(mode="json", exclude_none=True) if isinstance(p, BaseModel) else {str(k): v for k, v in p.items()})
    return out


def wire(value: Any) -> Any:
    """A request value as JSON: models by alias, without unset fields."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, Mapping):
        return {str(k): wire(v) for k, v in cast(Mapping[Any, Any], value).items()}
    if isinstance(value, (list, tuple)):
        return [wire(v) for v in cast(Sequence[Any], value)]
    return value


def drop_none(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: wire(v) for k, v in d.items() if v is not None}


def auth_headers(token: str | None, act_as: str | None) -> dict[str, str]:
    """The credentials of a request: the token, and X-Chatd-User when acting for a user."""
    if not token:
        raise ChatdError("chatd: no token: pass token= or set CHATD_TOKEN")
    h = {"Authorization": f"Bearer {token}"}
    if act_as is not None:
        h[ACT_AS_HEADER] = act_as
    return h


def token_body(
    user: str, scopes: Sequence[Scope] | None, act_as: bool | None, expires_in: float | timedelta | None
) -> dict[str, Any]:
    """The body of POST /api/v1/tokens; expires_in in whole seconds, rounded up (0 would be never)."""
    seconds = expires_in.total_seconds() if isinstance(expires_in, timedelta) else expires_in
    return drop_none({
        "user": user, "scopes": list(scopes) if scopes is not None else None, "act_as": act_as,
        "expires_in": math.ceil(seconds) if seconds is not None else None,
    })


# The adapters of the answers, built once.
CHAT = TypeAdapter(t.Chat)
CREATE = TypeAdapter(t.CreateChatResponse)
SEND = TypeAdapter(t.SendMessageResponse)
LIST_CHATS = TypeAdapter(t.ListChatsResponse)
LIST_MESSAGES = TypeAdapter(t.ListMessagesResponse)
EDIT = TypeAdapter(t.EditMessageResponse)
DELETE_QUEUED = TypeAdapter(t.DeleteQueuedResponse)
DELETE_CHAT = TypeAdapter(t.DeleteChatResponse)
ERASURE = TypeAdapter(t.ErasureReport)
TOOL_RESULTS = TypeAdapter(t.ToolResultsResponse)
LOOKUP = TypeAdapter(t.StructuredOutputResult)
TICKET = TypeAdapter(t.StreamTicket)
CREATE_TOKEN = TypeAdapter(t.CreateTokenResponse)
LIST_TOKENS = TypeAdapter(t.ListTokensResponse)
LIST_USERS = TypeAdapter(t.ListUsersResponse)
NO_CONTENT = TypeAdapter(type(None))
STREAM_EVENT: TypeAdapter[t.StreamEvent] = TypeAdapter(t.StreamEvent)
WATCH_EVENT: TypeAdapter[t.WatchEvent] = TypeAdapter(t.WatchEvent)



def event_names(alias: Any) -> frozenset[str]:
    """The event names of a generated union of events (each member's `event` literal).

    Taken from the generated types, so an event the document adds is
    decoded as soon as the types are regenerated.
    """
    union = get_args(alias.__value__)[0]
    names: set[str] = set()
    for member in get_args(union):
        names.update(get_args(member.model_fields["event"].annotation))
    return frozenset(names)


STREAM_EVENTS = event_names(t.StreamEvent)
WATCH_EVENTS = event_names(t.WatchEvent)


@dataclass(frozen=True)
class UnknownEvent:
    """An event this SDK does not know (a newer server's): its name and data."""

    event: str
    data: Any
    id: str | None = None


@dataclass(frozen=True)
class ReconnectInfo:
    """Told to on_reconnect before a stream reconnects."""

    attempt: int
    last_event_id: str | None
    cause: BaseException | None


@dataclass
class RawEvent:
    event: str
    data: str
    id: str | None


class SSEDecoder:
    """Decodes text/event-stream lines into events (comments are keep-alives)."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.event = "message"
        self.data: list[str] = []
        self.id: str | None = None

    def line(self, line: str) -> RawEvent | None:
        line = line.rstrip("\r\n")
        if line == "":
            if not self.data:
                self._reset()
                return None
            ev = RawEvent(self.event, "\n".join(self.data), self.id)
            self._reset()
            return ev
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self.event = value
        elif name == "data":
            self.data.append(value)
        elif name == "id":
            self.id = value
        return None


def decode_stream_event(raw: RawEvent) -> t.StreamEvent | UnknownEvent:
    data: Any = json.loads(raw.data) if raw.data else {}
    if raw.event not in STREAM_EVENTS:
        return UnknownEvent(raw.event, data, raw.id)
    ev: dict[str, Any] = {"event": raw.event, "data": data}
    if raw.event == "message":
        ev["id"] = raw.id
    return STREAM_EVENT.validate_python(ev)


def decode_watch_event(raw: RawEvent) -> t.WatchEvent | UnknownEvent:
    data: Any = json.loads(raw.data) if raw.data else {}
    if raw.event not in WATCH_EVENTS:
        return UnknownEvent(raw.event, data, raw.id)
    return WATCH_EVENT.validate_python({"event": raw.event, "data": data})


def stream_params(after_id: int | None, after: str | None) -> dict[str, Any]:
    return {"after_id": after_id, "after": after}


def stream_headers(last_event_id: str | None) -> dict[str, str]:
    h = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
    if last_event_id is not None:
        h["Last-Event-ID"] = last_event_id
    return h


def is_fatal_stream_status(status: int) -> bool:
    """A stream answer that reconnecting cannot fix: a 4xx other than 429."""
    return 400 <= status < 500 and status != 429


OnReconnect = Callable[[ReconnectInfo], None]


EXPORT_HEADERS = {"Accept": "application/x-ndjson"}


class ExportLines:
    """Decodes an export's JSON Lines, and tells a whole export (its `end` line last) from a cut one."""

    def __init__(self) -> None:
        self.ended = False

    def decode(self, line: str) -> dict[str, Any] | None:
        if not line.strip():
            return None
        obj = cast(dict[str, Any], json.loads(line))
        self.ended = obj.get("type") == "end"
        return obj

    def check(self, path: str) -> None:
        if not self.ended:
            from ._errors import APIConnectionError

            raise APIConnectionError(f"chatd: GET {path}: the export ended without its end line")
