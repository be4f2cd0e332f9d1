"""Client tools: Python callables the model calls, their schemas from type hints."""

from __future__ import annotations

import asyncio
import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, overload

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, create_model
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import to_jsonable_python

from . import types as t

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

ToolFunction = Callable[..., Any]


@dataclass(frozen=True)
class Tool:
    """A client tool: its declaration (name, description, input schema) and its callable."""

    name: str
    description: str | None
    input_schema: dict[str, Any]
    fn: ToolFunction
    _args: type[BaseModel]
    _single: bool

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def declaration(self) -> dict[str, Any]:
        """The chat's dynamic_tools entry."""
        d: dict[str, Any] = {"name": self.name, "input_schema": self.input_schema}
        if self.description:
            d["description"] = self.description
        return d

    def invoke(self, args: Any) -> Any:
        """Calls the function with the validated arguments (a coroutine for an async one)."""
        validated = self._args.model_validate(args if args is not None else {})
        if self._single:
            return self.fn(validated)
        return self.fn(**{k: getattr(validated, k) for k in type(validated).model_fields})


@overload
def tool(fn: ToolFunction, /) -> Tool: ...
@overload
def tool(*, name: str | None = None, description: str | None = None) -> Callable[[ToolFunction], Tool]: ...
def tool(
    fn: ToolFunction | None = None, /, *, name: str | None = None, description: str | None = None
) -> Tool | Callable[[ToolFunction], Tool]:
    """Makes a client tool of a function (sync or async), as a decorator or a call.

    The input schema comes from the parameters' type hints (each parameter a
    property; those with defaults optional), or, when the only parameter is a
    Pydantic model, from that model. The description is the docstring's first
    paragraph unless given.
    """

    def make(f: ToolFunction) -> Tool:
        return _make_tool(f, name, description)

    return make(fn) if fn is not None else make


def _make_tool(fn: ToolFunction, name: str | None, description: str | None) -> Tool:
    tool_name = name or getattr(fn, "__name__", "")
    if not _NAME.match(tool_name):
        raise ValueError(f"chatd: a tool name must match {_NAME.pattern}: {tool_name!r}")
    hints = typing.get_type_hints(fn, include_extras=True)
    params = [p for p in inspect.signature(fn).parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    single = len(params) == 1 and isinstance(hints.get(params[0].name), type) and issubclass(hints[params[0].name], BaseModel)
    if single:
        args_model: type[BaseModel] = hints[params[0].name]
    else:
        fields: dict[str, Any] = {
            p.name: (hints.get(p.name, Any), ... if p.default is p.empty else p.default) for p in params
        }
        args_model = create_model(f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    schema = args_model.model_json_schema()
    doc = description if description is not None else (inspect.getdoc(fn) or "").split("\n\n")[0].strip() or None
    return Tool(tool_name, doc, schema, fn, args_model, single)


class Tools:
    """The client tools of a chat, by name. Pass it as tools= to create_chat and to run()."""

    def __init__(self, tools: Iterable[Tool | ToolFunction] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for x in tools:
            self.add(x)

    def add(self, fn: Tool | ToolFunction) -> Tool:
        tl = fn if isinstance(fn, Tool) else tool(fn)
        if tl.name in self._tools:
            raise ValueError(f"chatd: two tools named {tl.name!r}")
        self._tools[tl.name] = tl
        return tl

    def __call__(self, fn: ToolFunction) -> ToolFunction:
        """Registers a function as a tool (a decorator that returns the function unchanged)."""
        self.add(fn)
        return fn

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> typing.Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def declarations(self) -> list[dict[str, Any]]:
        """The dynamic_tools of a create."""
        return [x.declaration() for x in self._tools.values()]


ToolsLike = Tools | Iterable[Tool | ToolFunction]


def tools_of(tools: ToolsLike | None) -> Tools | None:
    if tools is None or isinstance(tools, Tools):
        return tools
    return Tools(tools)


def error_result(call: t.ToolCall, message: str) -> dict[str, Any]:
    return {"tool_call_id": call.tool_call_id, "output": message, "is_error": True}


def ok_result(call: t.ToolCall, output: Any) -> dict[str, Any]:
    return {"tool_call_id": call.tool_call_id, "output": to_jsonable_python(output)}


def run_call(tools: Tools, call: t.ToolCall) -> dict[str, Any]:
    """Answers a call on the sync client: an async tool runs to completion in its own event loop."""
    tl = tools.get(call.tool_name)
    if tl is None:
        return error_result(call, f"No client tool named {call.tool_name!r}.")
    try:
        ret = tl.invoke(call.args)
        if is_awaitable(ret):
            ret = asyncio.run(_awaited(ret))
    except PydanticValidationError as e:
        return error_result(call, f"Invalid arguments: {e}")
    except Exception as e:  # a tool's failure is the model's to handle
        return error_result(call, f"{type(e).__name__}: {e}")
    return ok_result(call, ret)


async def run_call_async(tools: Tools, call: t.ToolCall) -> dict[str, Any]:
    """Answers a call on the async client: a sync tool runs in a worker thread."""
    tl = tools.get(call.tool_name)
    if tl is None:
        return error_result(call, f"No client tool named {call.tool_name!r}.")
    try:
        if tl.is_async:
            ret = await tl.invoke(call.args)
        else:
            ret = await anyio.to_thread.run_sync(tl.invoke, call.args)
    except PydanticValidationError as e:
        return error_result(call, f"Invalid arguments: {e}")
    except Exception as e:  # a tool's failure is the model's to handle
        return error_result(call, f"{type(e).__name__}: {e}")
    return ok_result(call, ret)


async def _awaited(x: Awaitable[Any]) -> Any:
    return await x


def is_awaitable(x: Any) -> typing.TypeGuard[Awaitable[Any]]:
    return inspect.isawaitable(x)


def pending_calls(ev: t.StreamEvent) -> list[t.ToolCall]:
    """The client tool calls an event says the chat waits for."""
    if isinstance(ev, t.StreamActionRequiredEvent):
        return list(ev.data.tool_calls)
    if isinstance(ev, t.StreamStatusEvent) and ev.data.status == "requires_action":
        return list(ev.data.pending_tool_calls or [])
    return []


def as_mapping(x: Any) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}  # pyright: ignore[reportUnknownVariableType]
