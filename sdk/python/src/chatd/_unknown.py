"""The fallback of open unions: a member the SDK does not know yet."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, model_validator


class UnknownPart(BaseModel):
    """A message part of a type this SDK does not know (a newer server's).

    `type` is "unknown"; the part's own type is `original_type`, and its
    other members are kept as extra fields (`model_extra`).
    """

    model_config = ConfigDict(extra="allow")
    type: Literal["unknown"] = "unknown"
    original_type: str = ""

    @model_validator(mode="before")
    @classmethod
    def _keep_type(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        fields = cast(dict[str, Any], data)
        if "original_type" in fields:
            return fields
        rest = {k: v for k, v in fields.items() if k != "type"}
        rest["original_type"] = str(fields.get("type", ""))
        return rest


def tag_of(prop: str, known: Collection[str]) -> Callable[[Any], str]:
    """A callable discriminator: the member's tag, or "unknown"."""

    def tag(value: Any) -> str:
        t: object = cast(dict[str, Any], value).get(prop) if isinstance(value, dict) else getattr(value, prop, None)
        return t if isinstance(t, str) and t in known else "unknown"

    return tag
