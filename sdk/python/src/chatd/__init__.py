"""chatd: the Python client of the chatd HTTP API.

Client and AsyncClient call the API (httpx); response_format= takes a
Pydantic model class or any type a TypeAdapter accepts, and results come back
validated into it. The wire types are in chatd.types.
"""

from . import types
from ._async_client import AsyncClient, AsyncEventStream, AsyncPartials, AsyncStructuredTurn, AsyncTurn
from ._client import Client, EventStream, Partials, StructuredTurn, Turn
from ._core import ReconnectInfo, Scope, UnknownEvent
from ._errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ChatdError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    OutputValidationError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    ServiceUnavailableError,
    StructuredOutputCancelled,
    StructuredOutputFailed,
    StructuredOutputNotSucceeded,
    TurnFailed,
    UnprocessableEntityError,
    WaitTimeout,
)
from ._jwt import async_jwt_source, jwt_source
from ._structured import Output, Partial, StructuredResult, output_of
from ._tools import Tool, Tools, tool
from ._unknown import UnknownPart

__version__ = "0.1.0"

__all__ = [
    "APIConnectionError",
    "APIError",
    "APITimeoutError",
    "AsyncClient",
    "AsyncEventStream",
    "AsyncPartials",
    "AsyncStructuredTurn",
    "AsyncTurn",
    "AuthenticationError",
    "BadRequestError",
    "ChatdError",
    "Client",
    "ConflictError",
    "EventStream",
    "InternalServerError",
    "NotFoundError",
    "Output",
    "OutputValidationError",
    "Partial",
    "Partials",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitError",
    "ReconnectInfo",
    "Scope",
    "ServiceUnavailableError",
    "StructuredOutputCancelled",
    "StructuredOutputFailed",
    "StructuredOutputNotSucceeded",
    "StructuredResult",
    "StructuredTurn",
    "Tool",
    "Tools",
    "Turn",
    "TurnFailed",
    "UnknownEvent",
    "UnknownPart",
    "UnprocessableEntityError",
    "WaitTimeout",
    "__version__",
    "async_jwt_source",
    "jwt_source",
    "output_of",
    "tool",
    "types",
]
