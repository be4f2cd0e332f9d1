"""The asynchronous client (asyncio or trio, through httpx and anyio)."""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Generic, Literal, TypeVar, overload
from urllib.parse import quote, urlencode
from uuid import UUID

import anyio
import httpx
from pydantic import TypeAdapter

from . import _core as c  # pyright: ignore[reportPrivateUsage]
from . import types as t
from ._errors import APIConnectionError, APITimeoutError, ChatdError, ConflictError, WaitTimeout, error_of
from ._structured import Output, Partial, ResponseFormatLike, StructuredResult, output_of, result_of_lookup
from ._tools import Tools, ToolsLike, is_awaitable, run_call_async, tools_of
from ._turns import Tracker

T = TypeVar("T")
E = TypeVar("E")

Token = str | Callable[[], str] | Callable[[], Awaitable[str]]
Content = str | Sequence[t.TextPart | Mapping[str, Any]]


def _p(s: str | Any) -> str:
    return quote(str(s), safe="")


class AsyncClient:
    """The chatd HTTP API, asynchronously (httpx; asyncio or trio).

    base_url and token default to CHATD_URL and CHATD_TOKEN. token may be a
    callable, sync or async, that returns a fresh token (a JWT that expires;
    async_jwt_source wraps an identity provider's token getter): it is
    called for every request and stream connection, and once more after a
    401. act_as makes every request that user's (X-Chatd-User; the token
    needs the act-as capability). Reads, creates and sends
    are retried on connection errors, 429 and 503 (honouring Retry-After),
    `max_retries` times with exponential backoff from `backoff` seconds;
    creates and sends carry one Idempotency-Key across their retries, so a
    retry never creates twice.
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: Token | None = None,
        *,
        act_as: str | None = None,
        max_retries: int = 3,
        backoff: float = 0.25,
        timeout: float | httpx.Timeout = c.DEFAULT_TIMEOUT,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = c.base_url_of(base_url)
        self._token = token if token is not None else c.env_token()
        self._act_as = act_as
        self.max_retries = max_retries
        self.backoff = backoff
        self._timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self._http = http_client or httpx.AsyncClient(timeout=self._timeout)
        self._owns_http = http_client is None

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def act_as(self, user: str) -> AsyncClient:
        """A client whose requests act for user (X-Chatd-User), sharing this one's token and connections.

        user is the user's subject at the server's identity provider, or
        its name when the server has none. Closing it leaves the
        connections open: they are this client's.
        """
        other = copy.copy(self)
        other._act_as = user
        other._owns_http = False
        return other

    async def _auth(self) -> dict[str, str]:
        tok: Any = self._token() if callable(self._token) else self._token
        if is_awaitable(tok):
            tok = await tok
        return c.auth_headers(tok, self._act_as)

    async def _request(self, call: c.Call[T]) -> T:
        attempt = 0
        refreshed = False
        while True:
            attempt += 1
            last = attempt > self.max_retries
            headers = {**call.headers(), **await self._auth()}
            try:
                resp = await self._http.request(
                    call.method, self.base_url + call.path, params=call.query(), headers=headers,
                    json=call.body, timeout=call.timeout or self._timeout,
                )
            except httpx.TransportError as e:
                if last or not (call.retried or c.safe_to_retry(e)):
                    cls = APITimeoutError if isinstance(e, httpx.TimeoutException) else APIConnectionError
                    raise cls(f"chatd: {call.method} {call.path}: {e!r}") from e
                await anyio.sleep(c.backoff(self.backoff, attempt))
                continue
            if resp.is_success:
                return call.parse(resp.content)
            if resp.status_code == 401 and callable(self._token) and not refreshed:
                refreshed = True  # the token may have expired on the way: ask for a fresh one
                attempt -= 1
                continue
            if resp.status_code in c.RETRIED_STATUSES and call.retried and not last:
                await anyio.sleep(c.delay(resp, self.backoff, attempt))
                continue
            raise error_of(resp)

    # Chats

    @overload
    async def create_chat(
        self, content: Content, *, response_format: type[T] | TypeAdapter[T], schema_name: str | None = None,
        model: str | None = None, title: str | None = None, system_prompt: str | None = None,
        tools: ToolsLike | None = None, mcp_servers: Sequence[str] | None = None, spawn_agents: bool | None = None,
        idempotency_key: str | None = None,
    ) -> AsyncStructuredTurn[T]: ...
    @overload
    async def create_chat(
        self, content: Content, *, response_format: Mapping[str, Any] | t.ResponseFormat,
        schema_name: str | None = None, model: str | None = None, title: str | None = None,
        system_prompt: str | None = None, tools: ToolsLike | None = None, mcp_servers: Sequence[str] | None = None,
        spawn_agents: bool | None = None, idempotency_key: str | None = None,
    ) -> AsyncStructuredTurn[Any]: ...
    @overload
    async def create_chat(
        self, content: Content, *, response_format: None = None, schema_name: str | None = None,
        model: str | None = None, title: str | None = None, system_prompt: str | None = None,
        tools: ToolsLike | None = None, mcp_servers: Sequence[str] | None = None, spawn_agents: bool | None = None,
        plan_mode: bool | None = None, parent_chat_id: str | None = None, idempotency_key: str | None = None,
    ) -> AsyncTurn: ...
    async def create_chat(
        self, content: Content, *, response_format: ResponseFormatLike | None = None,
        schema_name: str | None = None, model: str | None = None, title: str | None = None,
        system_prompt: str | None = None, tools: ToolsLike | None = None, mcp_servers: Sequence[str] | None = None,
        spawn_agents: bool | None = None, plan_mode: bool | None = None, parent_chat_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> AsyncTurn | AsyncStructuredTurn[Any]:
        """Creates a chat with its first message; its turn starts at once.

        With response_format (a Pydantic model class, a type such as
        list[Item] or a TypedDict, a TypeAdapter, or a JSON Schema dict) the
        message is a structured request: the turn's wait() returns its value
        validated into that type. tools are client tools the model may call;
        wait(), text() and partials() answer them.
        """
        tl = tools_of(tools)
        out = output_of(response_format, schema_name) if response_format is not None else None
        body = c.drop_none({
            "content": c.text_parts(content), "response_format": out.response_format if out else None,
            "model": model, "title": title, "system_prompt": system_prompt,
            "dynamic_tools": tl.declarations() if tl else None, "mcp_servers": mcp_servers,
            "spawn_agents": spawn_agents, "plan_mode": plan_mode, "parent_chat_id": parent_chat_id,
        })
        key = idempotency_key or c.new_key()
        res = await self._request(c.Call("POST", "/api/v1/chats", c.CREATE, body=body, retried=True, idempotency_key=key))
        return _turn(self, str(res.chat.id), res.messages[0], None, res, out, tl, res.warnings)

    @overload
    async def send(
        self, chat_id: str, content: Content, *, response_format: type[T] | TypeAdapter[T],
        schema_name: str | None = None, busy_behavior: Literal["queue", "interrupt"] | None = None,
        plan_mode: bool | None = None, tools: ToolsLike | None = None, idempotency_key: str | None = None,
    ) -> AsyncStructuredTurn[T]: ...
    @overload
    async def send(
        self, chat_id: str, content: Content, *, response_format: Mapping[str, Any] | t.ResponseFormat,
        schema_name: str | None = None, busy_behavior: Literal["queue", "interrupt"] | None = None,
        plan_mode: bool | None = None, tools: ToolsLike | None = None, idempotency_key: str | None = None,
    ) -> AsyncStructuredTurn[Any]: ...
    @overload
    async def send(
        self, chat_id: str, content: Content, *, response_format: None = None, schema_name: str | None = None,
        busy_behavior: Literal["queue", "interrupt"] | None = None, plan_mode: bool | None = None,
        tools: ToolsLike | None = None, idempotency_key: str | None = None,
    ) -> AsyncTurn: ...
    async def send(
        self, chat_id: str, content: Content, *, response_format: ResponseFormatLike | None = None,
        schema_name: str | None = None, busy_behavior: Literal["queue", "interrupt"] | None = None,
        plan_mode: bool | None = None, tools: ToolsLike | None = None, idempotency_key: str | None = None,
    ) -> AsyncTurn | AsyncStructuredTurn[Any]:
        """Sends a message: into history when the chat is idle, else to its queue.

        tools: the client tools to answer while following the turn (the
        chat's were declared at its creation).
        """
        out = output_of(response_format, schema_name) if response_format is not None else None
        body = c.drop_none({
            "content": c.text_parts(content), "response_format": out.response_format if out else None,
            "busy_behavior": busy_behavior, "plan_mode": plan_mode,
        })
        key = idempotency_key or c.new_key()
        res = await self._request(c.Call("POST", f"/api/v1/chats/{_p(chat_id)}/messages", c.SEND, body=body, retried=True,
                                   idempotency_key=key))
        if isinstance(res, t.SendMessageQueued):
            return _turn(self, chat_id, None, res.queued_message, res, out, tools_of(tools), res.warnings)
        return _turn(self, chat_id, res.message, None, res, out, tools_of(tools), res.warnings)

    async def get_chat(self, chat_id: str) -> t.Chat:
        return await self._request(c.Call("GET", f"/api/v1/chats/{_p(chat_id)}", c.CHAT, retried=True))

    async def list_chats(
        self, *, limit: int | None = None, cursor: str | None = None, parent_chat_id: str | None = None
    ) -> t.ListChatsResponse:
        """One page of the caller's chats, most recently active first (next_cursor: the next page)."""
        params = {"limit": limit, "cursor": cursor, "parent_chat_id": parent_chat_id}
        return await self._request(c.Call("GET", "/api/v1/chats", c.LIST_CHATS, params=params, retried=True))

    async def iter_chats(
        self, *, page_size: int | None = None, parent_chat_id: str | None = None
    ) -> AsyncIterator[t.Chat]:
        """Every chat of the caller, page after page."""
        cursor: str | None = None
        while True:
            page = await self.list_chats(limit=page_size, cursor=cursor, parent_chat_id=parent_chat_id)
            for chat in page.chats:
                yield chat
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def list_messages(
        self, chat_id: str, *, after_id: int | None = None, limit: int | None = None
    ) -> t.ListMessagesResponse:
        params = {"after_id": after_id, "limit": limit}
        return await self._request(c.Call("GET", f"/api/v1/chats/{_p(chat_id)}/messages", c.LIST_MESSAGES, params=params,
                                    retried=True))

    async def update_chat(self, chat_id: str, *, title: str | None = None, plan_mode: bool | None = None) -> t.Chat:
        body = c.drop_none({"title": title, "plan_mode": plan_mode})
        return await self._request(c.Call("PATCH", f"/api/v1/chats/{_p(chat_id)}", c.CHAT, body=body))

    async def edit_message(
        self, chat_id: str, message_id: int, content: Content, *, response_format: ResponseFormatLike | None = None,
        schema_name: str | None = None,
    ) -> t.EditMessageResponse:
        out = output_of(response_format, schema_name) if response_format is not None else None
        body = c.drop_none({"content": c.text_parts(content), "response_format": out.response_format if out else None})
        return await self._request(c.Call("PATCH", f"/api/v1/chats/{_p(chat_id)}/messages/{int(message_id)}", c.EDIT,
                                    body=body))

    async def delete_queued(self, chat_id: str, queued_id: int) -> t.DeleteQueuedResponse:
        return await self._request(c.Call("DELETE", f"/api/v1/chats/{_p(chat_id)}/queue/{int(queued_id)}", c.DELETE_QUEUED))

    async def delete_chat(self, chat_id: str) -> t.DeleteChatResponse:
        """Deletes a chat and its child chats: a running turn stops, pending structured requests get their
        cancelled receipt (chat_deleted), then the content goes. Deleting it again raises NotFoundError."""
        return await self._request(c.Call("DELETE", f"/api/v1/chats/{_p(chat_id)}", c.DELETE_CHAT))

    def export_chat(self, chat_id: str) -> AsyncIterator[dict[str, Any]]:
        """The export of a chat and its child chats, line by line (the JSON Lines `chatd import` reads)."""
        return self._lines(f"/api/v1/chats/{_p(chat_id)}/export")

    async def interrupt(self, chat_id: str) -> t.Chat:
        return await self._request(c.Call("POST", f"/api/v1/chats/{_p(chat_id)}/interrupt", c.CHAT))

    async def compact(self, chat_id: str) -> t.Chat:
        return await self._request(c.Call("POST", f"/api/v1/chats/{_p(chat_id)}/compact", c.CHAT))

    async def submit_tool_results(
        self, chat_id: str, results: Sequence[t.ToolResult | Mapping[str, Any]]
    ) -> t.ToolResultsResponse:
        body = {"results": [c.wire(r) for r in results]}
        return await self._request(c.Call("POST", f"/api/v1/chats/{_p(chat_id)}/tool-results", c.TOOL_RESULTS, body=body))

    # Tokens and users (a token with the admin scope)

    async def create_token(
        self, user: str, *, scopes: Sequence[c.Scope] | None = None, act_as: bool | None = None,
        expires_in: float | timedelta | None = None,
    ) -> t.CreateTokenResponse:
        """Creates an API token for user (created on first use); its secret is in this answer only.

        scopes default to read and write; act_as lets it send X-Chatd-User;
        expires_in (seconds or a timedelta) makes it stop working then.
        """
        body = c.token_body(user, scopes, act_as, expires_in)
        return await self._request(c.Call("POST", "/api/v1/tokens", c.CREATE_TOKEN, body=body))

    async def list_tokens(self, *, user: str | None = None) -> t.ListTokensResponse:
        """Every token, or one user's by name; never a secret."""
        return await self._request(c.Call("GET", "/api/v1/tokens", c.LIST_TOKENS, params={"user": user},
                                          retried=True))

    async def revoke_token(self, token_id: str | UUID) -> None:
        """Revokes a token: every server refuses it, and ends its streams, within 5 s."""
        await self._request(c.Call("DELETE", f"/api/v1/tokens/{_p(token_id)}", c.NO_CONTENT))

    async def list_users(self, *, limit: int | None = None, cursor: str | None = None) -> t.ListUsersResponse:
        """One page of the users by name (next_cursor: the next page)."""
        params = {"limit": limit, "cursor": cursor}
        return await self._request(c.Call("GET", "/api/v1/users", c.LIST_USERS, params=params, retried=True))

    async def iter_users(self, *, page_size: int | None = None) -> AsyncIterator[t.User]:
        """Every user, page after page."""
        cursor: str | None = None
        while True:
            page = await self.list_users(limit=page_size, cursor=cursor)
            for u in page.users:
                yield u
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    # Users (admin scope)

    async def erase_user(self, name: str) -> t.ErasureReport:
        """Erases a user and everything of theirs, and answers what went (admin scope)."""
        return await self._request(c.Call("DELETE", f"/api/v1/users/{_p(name)}", c.ERASURE))

    def export_user(self, name: str) -> AsyncIterator[dict[str, Any]]:
        """The export of every chat of a user, streamed line by line (admin scope)."""
        return self._lines(f"/api/v1/users/{_p(name)}/export")

    async def _lines(self, path: str) -> AsyncIterator[dict[str, Any]]:
        lines = c.ExportLines()
        try:
            async with self._http.stream("GET", self.base_url + path, headers={**c.EXPORT_HEADERS, **await self._auth()},
                                         timeout=self._timeout) as resp:
                if not resp.is_success:
                    await resp.aread()
                    raise error_of(resp)
                async for line in resp.aiter_lines():
                    if (obj := lines.decode(line)) is not None:
                        yield obj
        except httpx.TransportError as e:
            raise APIConnectionError(f"chatd: GET {path}: {e!r}") from e
        lines.check(path)

    # Structured requests

    async def get_structured_output(self, request_id: str, *, wait: float | None = None) -> t.StructuredOutputResult:
        """Looks a structured request up; with wait (seconds, at most 60) a pending one is held."""
        params: dict[str, Any] = {"wait": f"{wait:g}s" if wait else None}
        timeout = self._timeout if not wait else httpx.Timeout(self._timeout.connect, read=wait + 15.0)
        return await self._request(c.Call("GET", f"/api/v1/structured-outputs/{_p(request_id)}", c.LOOKUP, params=params,
                                    retried=True, timeout=timeout))

    @overload
    async def wait_structured_output(
        self, request_id: str, output_type: type[T] | TypeAdapter[T], *, timeout: float | None = None
    ) -> StructuredResult[T]: ...
    @overload
    async def wait_structured_output(
        self, request_id: str, output_type: None = None, *, timeout: float | None = None
    ) -> StructuredResult[Any]: ...
    async def wait_structured_output(
        self, request_id: str, output_type: type[Any] | TypeAdapter[Any] | None = None, *,
        timeout: float | None = None,
    ) -> StructuredResult[Any]:
        """Long-polls until the request is terminal: its value validated into output_type.

        A failed or cancelled request raises StructuredOutputFailed or
        StructuredOutputCancelled; timeout (seconds) raises WaitTimeout.
        """
        out = output_of(output_type) if output_type is not None else Output[Any]({}, None)
        return await self._wait(request_id, out, timeout)

    async def _wait(self, request_id: str, out: Output[T], timeout: float | None) -> StructuredResult[T]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = float(c.LONG_POLL_SECONDS)
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise WaitTimeout(f"chatd: structured request {request_id} still pending after {timeout}s")
            res = await self.get_structured_output(request_id, wait=max(wait, 0.001))
            if res.status != "pending":
                return result_of_lookup(res, out)

    # Streams

    def stream(
        self, chat_id: str, *, after_id: int | None = None, after: str | None = None,
        last_event_id: str | None = None, on_reconnect: c.OnReconnect | None = None,
    ) -> AsyncEventStream[t.StreamEvent | c.UnknownEvent]:
        """Follows a chat: typed events, resumed with Last-Event-ID after a dropped connection.

        Use it as an iterator, and close it (or use it in a with block) when done.
        """
        path = f"/api/v1/chats/{_p(chat_id)}/stream"
        return AsyncEventStream(self, path, c.stream_params(after_id, after), c.decode_stream_event, last_event_id,
                           on_reconnect)

    def watch(self, *, on_reconnect: c.OnReconnect | None = None) -> AsyncEventStream[t.WatchEvent | c.UnknownEvent]:
        """Follows every chat of the caller: a `chat` event per chat, then one per change."""
        return AsyncEventStream(self, "/api/v1/chats/watch", {}, c.decode_watch_event, None, on_reconnect)

    async def create_stream_ticket(self, chat_id: str) -> t.StreamTicket:
        return await self._request(c.Call("POST", f"/api/v1/chats/{_p(chat_id)}/stream-ticket", c.TICKET))

    async def event_source_url(self, chat_id: str, *, after_id: int | None = None, after: str | None = None) -> str:
        """The chat's stream URL with a fresh single-use ticket, for a browser's EventSource."""
        ticket = (await self.create_stream_ticket(chat_id)).ticket
        q = urlencode({k: v for k, v in {"after_id": after_id, "after": after, "ticket": ticket}.items()
                       if v is not None})
        return f"{self.base_url}/api/v1/chats/{_p(chat_id)}/stream?{q}"

    @overload
    def partials(
        self, chat_id: str, request_id: str, output_type: type[T] | TypeAdapter[T], *, tools: ToolsLike | None = None
    ) -> AsyncPartials[T]: ...
    @overload
    def partials(
        self, chat_id: str, request_id: str, output_type: None = None, *, tools: ToolsLike | None = None
    ) -> AsyncPartials[Any]: ...
    def partials(
        self, chat_id: str, request_id: str, output_type: type[Any] | TypeAdapter[Any] | None = None, *,
        tools: ToolsLike | None = None,
    ) -> AsyncPartials[Any]:
        """The partial values of a structured request while the model writes them, then its result."""
        out = output_of(output_type) if output_type is not None else Output[Any]({}, None)
        return AsyncPartials(self, Tracker(chat_id, request_id=request_id, output=out, tools=tools_of(tools)))

    async def _follow(self, tracker: Tracker[Any], timeout: float | None) -> AsyncGenerator[Partial[Any], None]:
        """Follows a turn on its chat's stream until it ends, answering its client tools."""
        deadline = None if timeout is None else time.monotonic() + timeout
        after = tracker.message_id
        stream = self.stream(tracker.chat_id, after_id=after)
        stream.deadline = deadline
        async with stream as events:
            async for ev in events:
                step = tracker.feed(ev)
                if step.calls:
                    await self._answer(tracker.chat_id, tracker.tools, step.calls)
                if step.partial is not None:
                    yield step.partial
                if step.done:
                    return

    async def _answer(self, chat_id: str, tools: Tools | None, calls: list[t.ToolCall]) -> None:
        assert tools is not None
        results: list[dict[str, Any]] = [{} for _ in calls]

        async def answer(i: int, call: t.ToolCall) -> None:
            results[i] = await run_call_async(tools, call)

        async with anyio.create_task_group() as tg:  # the calls of one step run concurrently
            for i, call in enumerate(calls):
                tg.start_soon(answer, i, call)
        try:
            await self.submit_tool_results(chat_id, results)
        except ConflictError:
            pass  # answered meanwhile (another client, or the server's deadline)


def _turn(
    client: AsyncClient, chat_id: str, message: t.ChatMessage | None, queued: t.QueuedMessage | None, response: Any,
    out: Output[Any] | None, tools: Tools | None, warnings: list[t.SchemaWarning] | None,
) -> AsyncTurn | AsyncStructuredTurn[Any]:
    if out is None or out.response_format.get("type") != "json_schema":
        return AsyncTurn(client, chat_id, message, queued, response, tools, warnings)
    rid = (message.structured_output_request_id if message else None) or (
        queued.structured_output_request_id if queued else None)
    if rid is None:
        raise ChatdError("chatd: the server did not return the structured request's id")
    return AsyncStructuredTurn(client, chat_id, message, queued, response, tools, warnings, str(rid), out)


class AsyncTurn:
    """A sent message and the turn it starts (or waits for, queued)."""

    def __init__(
        self, client: AsyncClient, chat_id: str, message: t.ChatMessage | None, queued: t.QueuedMessage | None,
        response: Any, tools: Tools | None, warnings: list[t.SchemaWarning] | None,
    ) -> None:
        self.client = client
        self.chat_id = chat_id
        self.message = message
        """The user message, in history (None while queued)."""
        self.queued_message = queued
        """The queued message, when the chat was busy."""
        self.response = response
        """The create's or send's answer, as the server sent it."""
        self.tools = tools
        self.warnings: list[t.SchemaWarning] = list(warnings or [])
        """What the response_format schema holds that chatd admitted but does not check."""

    def _tracker(self, tools: ToolsLike | None) -> Tracker[Any]:
        return Tracker(self.chat_id, message_id=self.message.id if self.message else None,
                       queued=self.queued_message, tools=tools_of(tools) or self.tools)

    async def text(self, *, tools: ToolsLike | None = None, timeout: float | None = None) -> str:
        """Follows the turn to its end, answering client tools; the answer's text.

        Raises TurnFailed when the turn ends in error.
        """
        tracker = self._tracker(tools)
        async for _ in self.client._follow(tracker, timeout):  # pyright: ignore[reportPrivateUsage]
            pass
        return tracker.text()

    def stream(
        self, *, on_reconnect: c.OnReconnect | None = None
    ) -> AsyncEventStream[t.StreamEvent | c.UnknownEvent]:
        """The chat's events from this message on."""
        after = self.message.id - 1 if self.message else None
        return self.client.stream(self.chat_id, after_id=after, on_reconnect=on_reconnect)


class AsyncStructuredTurn(AsyncTurn, Generic[T]):
    """A structured request's turn: wait() for its typed result, partials() while it is written."""

    def __init__(
        self, client: AsyncClient, chat_id: str, message: t.ChatMessage | None, queued: t.QueuedMessage | None,
        response: Any, tools: Tools | None, warnings: list[t.SchemaWarning] | None, request_id: str,
        output: Output[T],
    ) -> None:
        super().__init__(client, chat_id, message, queued, response, tools, warnings)
        self.request_id = request_id
        self.output = output

    async def wait(self, *, tools: ToolsLike | None = None, timeout: float | None = None) -> StructuredResult[T]:
        """The request's result, its value validated into the response_format's type.

        Long-polls; with client tools it follows the chat's stream instead
        and answers them. Raises StructuredOutputFailed or
        StructuredOutputCancelled for a request that did not succeed.
        """
        tl = tools_of(tools) or self.tools
        if tl is None:
            return await self.client._wait(self.request_id, self.output, timeout)  # pyright: ignore[reportPrivateUsage]
        tracker = self._tracker_of(tl)
        async for _ in self.client._follow(tracker, timeout):  # pyright: ignore[reportPrivateUsage]
            pass
        assert tracker.result is not None
        return tracker.result

    def partials(self, *, tools: ToolsLike | None = None) -> AsyncPartials[T]:
        """The partial values while the model writes them; then .result (see Partials)."""
        return AsyncPartials(self.client, self._tracker_of(tools_of(tools) or self.tools))

    def _tracker_of(self, tools: Tools | None) -> Tracker[T]:
        after = self.message.id - 1 if self.message else None
        return Tracker(self.chat_id, message_id=after, request_id=self.request_id, output=self.output, tools=tools)


class AsyncPartials(Generic[T]):
    """An iterator of a structured request's partial values, then its result.

    Iterating yields Partial[T] until the receipt; .result is then the
    StructuredResult[T] (a failed or cancelled receipt raises at the end of
    the iteration). Close it, or use it in a with block, to stop early.
    """

    def __init__(self, client: AsyncClient, tracker: Tracker[T]) -> None:
        self._tracker = tracker
        self._it = client._follow(tracker, None)  # pyright: ignore[reportPrivateUsage]

    def __aiter__(self) -> AsyncIterator[Partial[T]]:
        return self

    async def __anext__(self) -> Partial[T]:
        return await self._it.__anext__()

    @property
    def result(self) -> StructuredResult[T]:
        """The receipt's result, once the iteration ended."""
        if self._tracker.result is None:
            raise ChatdError("chatd: the partials have not reached the receipt yet")
        return self._tracker.result

    async def until_done(self) -> StructuredResult[T]:
        """Reads the rest and returns the result."""
        async for _ in self:
            pass
        return self.result

    async def aclose(self) -> None:
        await self._it.aclose()

    async def __aenter__(self) -> AsyncPartials[T]:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class AsyncEventStream(Generic[E]):
    """A Server-Sent Events stream read with httpx, reconnecting with Last-Event-ID.

    A 4xx answer other than 429 raises its APIError; 429, 5xx, dropped
    connections and a server's shutdown are retried with backoff (on_reconnect
    is told). The server's own `error` event is an event, not an exception.
    """

    def __init__(
        self, client: AsyncClient, path: str, params: dict[str, Any], decode: Callable[[c.RawEvent], E],
        last_event_id: str | None, on_reconnect: c.OnReconnect | None,
    ) -> None:
        self._client = client
        self._path = path
        self._params = {k: str(v) for k, v in params.items() if v is not None}
        self._decode = decode
        self.last_event_id = last_event_id
        """Where a reconnection resumes: the last SSE id received."""
        self._on_reconnect = on_reconnect
        self.deadline: float | None = None
        """A time.monotonic() after which the stream raises WaitTimeout instead of waiting on."""
        self._it = self._events()

    def __aiter__(self) -> AsyncIterator[E]:
        return self

    async def __anext__(self) -> E:
        return await self._it.__anext__()

    async def aclose(self) -> None:
        await self._it.aclose()

    async def __aenter__(self) -> AsyncEventStream[E]:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _events(self) -> AsyncGenerator[E, None]:
        cl = self._client
        attempt = 0
        refreshed = False
        while True:
            cause: BaseException | None = None
            read = c.STREAM_READ_TIMEOUT
            if self.deadline is not None:
                read = min(read, self.deadline - time.monotonic())
                if read <= 0:
                    raise WaitTimeout(f"chatd: {self._path} did not end in time")
            timeout = httpx.Timeout(cl._timeout.connect, read=read)  # pyright: ignore[reportPrivateUsage]
            try:
                headers = {**c.stream_headers(self.last_event_id), **await cl._auth()}  # pyright: ignore[reportPrivateUsage]
                async with cl._http.stream("GET", cl.base_url + self._path, params=self._params, headers=headers,  # pyright: ignore[reportPrivateUsage]
                                     timeout=timeout) as resp:
                    if not resp.is_success:
                        await resp.aread()
                        err = error_of(resp)
                        if resp.status_code == 401 and callable(cl._token) and not refreshed:  # pyright: ignore[reportPrivateUsage]
                            refreshed = True  # ask the callable for a fresh token, once
                        elif c.is_fatal_stream_status(resp.status_code):
                            raise err
                        cause = err
                    else:
                        attempt = 0
                        refreshed = False
                        dec = c.SSEDecoder()
                        async for line in resp.aiter_lines():
                            raw = dec.line(line)
                            if raw is None:
                                continue
                            if raw.id is not None:
                                self.last_event_id = raw.id
                            yield self._decode(raw)
            except httpx.TransportError as e:
                cause = e
            if self.deadline is not None and time.monotonic() >= self.deadline:
                raise WaitTimeout(f"chatd: {self._path} did not end in time") from cause
            attempt += 1
            if self._on_reconnect is not None:
                self._on_reconnect(c.ReconnectInfo(attempt, self.last_event_id, cause))
            await anyio.sleep(c.backoff(cl.backoff, attempt))
