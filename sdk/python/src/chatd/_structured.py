"""Structured output the Python way: types in, validated values out."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, Union

from pydantic import BaseModel, TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from . import types as t
from ._errors import (
    OutputValidationError,
    StructuredOutputCancelled,
    StructuredOutputFailed,
    StructuredOutputNotSucceeded,
)

T = TypeVar("T")

# What response_format= takes: a Pydantic model class or any type a
# TypeAdapter accepts (list[Item], a TypedDict, a dataclass), a TypeAdapter,
# a JSON Schema (a dict), or the wire ResponseFormat itself.
ResponseFormatLike = Union[type[Any], TypeAdapter[Any], Mapping[str, Any], t.ResponseFormat]

_NAME_RE = re.compile(r"[^A-Za-z0-9_-]+")


def schema_name(name: str) -> str:
    """A json_schema name the server accepts (^[A-Za-z0-9_-]{1,64}$)."""
    n = _NAME_RE.sub("_", name).strip("_")[:64]
    return n or "output"


class Output(Generic[T]):
    """A response format and the type its values are validated into."""

    def __init__(self, response_format: dict[str, Any], adapter: TypeAdapter[T] | None) -> None:
        self.response_format = response_format
        self._adapter = adapter

    @property
    def typed(self) -> bool:
        return self._adapter is not None

    def parse(self, value: Any, request_id: str) -> T:
        """The receipt's value validated into T (the raw value without a type)."""
        if self._adapter is None:
            return value
        try:
            return self._adapter.validate_python(value)
        except PydanticValidationError as e:
            raise OutputValidationError(value, request_id, e) from e

    def partial(self, value: Any) -> T | None:
        """A partial value validated as far as Pydantic's partial validation allows, or None."""
        if self._adapter is None:
            return value
        try:
            return self._adapter.validate_python(value, experimental_allow_partial=True)
        except (PydanticValidationError, TypeError, ValueError):
            return None


def output_of(
    response_format: ResponseFormatLike, name: str | None = None, description: str | None = None
) -> Output[Any]:
    """Builds the wire response_format and the validator of a response_format= argument."""
    if isinstance(response_format, t.ResponseFormat):
        return Output(response_format.model_dump(mode="json", by_alias=True, exclude_none=True), None)
    if isinstance(response_format, Mapping):
        doc = dict(response_format)
        if doc.get("type") in ("json_schema", "text") and ("json_schema" in doc or doc.get("type") == "text"):
            return Output(doc, None)  # already the wire form
        return Output(_json_schema_format(doc, name or str(doc.get("title") or "output"), description), None)
    adapter: TypeAdapter[Any] = (
        response_format if isinstance(response_format, TypeAdapter) else TypeAdapter(response_format)
    )
    schema = adapter.json_schema()
    default = getattr(response_format, "__name__", None) or str(schema.get("title") or "output")
    desc = description
    if desc is None and isinstance(response_format, type) and issubclass(response_format, BaseModel):
        desc = (response_format.__doc__ or "").strip() or None
    return Output(_json_schema_format(schema, name or default, desc), adapter)


def _json_schema_format(schema: dict[str, Any], name: str, description: str | None) -> dict[str, Any]:
    js: dict[str, Any] = {"name": schema_name(name), "schema": schema}
    if description:
        js["description"] = description.encode()[:1024].decode("utf-8", "ignore")
    return {"type": "json_schema", "json_schema": js}


@dataclass(frozen=True)
class StructuredResult(Generic[T]):
    """A `succeeded` structured request: its value validated into T, and the raw value."""

    parsed: T
    """The value, validated into the type given as response_format (the raw value for a JSON Schema)."""
    value: Any
    """The value as the receipt holds it (JSON: dicts, lists, ...)."""
    request_id: str
    chat_id: str
    attempts: list[t.Attempt] = field(default_factory=lambda: [])
    """The rejected attempts the request needed before it succeeded (repairs)."""
    usage: t.Usage | None = None
    receipt_message_id: int | None = None
    trace_id: str | None = None
    status: Literal["succeeded"] = "succeeded"


@dataclass(frozen=True)
class Partial(Generic[T]):
    """A partial value of a structured request while the model writes it: a preview, never a result."""

    value: Any
    """The value so far, as the server parsed it (dicts and lists, cut where the model is)."""
    parsed: T | None
    """value validated into T with Pydantic's partial validation (lists, dicts, TypedDicts:
    the incomplete last item dropped), or None where that does not pass yet (a model
    whose required fields are still missing)."""
    restarted: bool
    """A preview_reset came first: the model writes the value again (a repair, a new attempt)."""
    data: t.StructuredOutputPartial


def result_of_lookup(res: t.StructuredOutputResult, output: Output[T]) -> StructuredResult[T]:
    """A terminal lookup as a result, or its failure raised."""
    rid = str(res.request_id)
    if res.status == "succeeded":
        value = res.value
        return StructuredResult(
            parsed=output.parse(value, rid), value=value, request_id=rid, chat_id=str(res.chat_id),
            attempts=list(res.attempts or []), usage=res.usage, receipt_message_id=res.receipt_message_id,
            trace_id=res.trace_id,
        )
    raise not_succeeded(res.status, res.error, rid, str(res.chat_id), res.attempts, res.usage)


def result_of_receipt(msg: t.ChatMessage, output: Output[T]) -> StructuredResult[T]:
    """A receipt message as a result, or its failure raised."""
    so = msg.structured_output
    assert so is not None
    rid = str(so.request_id)
    if so.status == "succeeded":
        return StructuredResult(
            parsed=output.parse(so.value, rid), value=so.value, request_id=rid, chat_id=str(msg.chat_id),
            usage=so.usage, receipt_message_id=msg.id,
        )
    raise not_succeeded(so.status, so.error, rid, str(msg.chat_id), None, so.usage)


def not_succeeded(
    status: str,
    error: t.StructuredOutputError | None,
    request_id: str,
    chat_id: str | None,
    attempts: list[t.Attempt] | None,
    usage: t.Usage | None,
) -> StructuredOutputNotSucceeded:
    err = error or t.StructuredOutputError(code="not_produced", message=f"The request is {status}.")
    cls = StructuredOutputCancelled if status == "cancelled" else StructuredOutputFailed
    return cls(status, err, request_id, chat_id, attempts, usage)
