"""Every error toolstitch raises or records derives from :class:`ToolstitchError`.

Two families live here:

* errors *raised* to the caller (:class:`IncompleteStreamError`), and
* errors *recorded* on a :class:`~toolstitch.ToolCall` (``call.error``): the subclasses of
  :class:`ToolCallError`. They are exceptions too, so a user can ``raise call.error`` in their own loop,
  but toolstitch never raises them into the user's iteration: a bad call must not stop the stream.

Every call error keeps ``raw``: the argument text as received (or a bounded sample of it), because the
first thing anyone needs when a tool call goes wrong is the exact text the provider sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._call import ToolCall

__all__ = [
    "ArgumentsNotAnObject",
    "CallIncomplete",
    "EmptyArguments",
    "InBandError",
    "IncompleteStreamError",
    "LateFragment",
    "LimitExceeded",
    "MalformedArguments",
    "MissingName",
    "SchemaViolation",
    "ToolCallError",
    "ToolstitchError",
    "UnknownTool",
]


class ToolstitchError(Exception):
    """Base class of every error toolstitch raises or records."""


class IncompleteStreamError(ToolstitchError):
    """The stream ended before every choice received a ``finish_reason``.

    Raised by ``get_final_completion()``. ``partial`` is the completion as far as it arrived (built
    without validation, since a choice without ``finish_reason`` is not a valid ``ChatCompletion``);
    ``tool_calls`` are the calls of all choices, none of them ``ready`` unless its choice was sealed.
    """

    def __init__(self, message: str, *, partial: Any, tool_calls: list[ToolCall]) -> None:
        super().__init__(message)
        self.partial = partial
        self.tool_calls = tool_calls


class ToolCallError(ToolstitchError):
    """Why a tool call is ``invalid``. ``raw`` keeps the received argument text (or a sample)."""

    #: A stable, machine-readable code, e.g. ``"malformed_arguments"``.
    code: str = "tool_call_error"

    def __init__(self, message: str, *, raw: str = "", position: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.raw = raw
        self.position = position

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class MalformedArguments(ToolCallError):
    """The arguments are not valid JSON (found by the scanner early, or by the strict parser at seal)."""

    code = "malformed_arguments"


class ArgumentsNotAnObject(ToolCallError):
    """The arguments are valid JSON but not an object; function arguments must be a JSON object."""

    code = "arguments_not_an_object"


class EmptyArguments(ToolCallError):
    """No argument text arrived at all (``""``). Never silently read as ``{}``."""

    code = "empty_arguments"


class MissingName(ToolCallError):
    """The call was sealed without a function name, so it cannot be dispatched."""

    code = "missing_name"


class UnknownTool(ToolCallError):
    """The model named a function that the request's ``tools`` did not offer."""

    code = "unknown_tool"


class SchemaViolation(ToolCallError):
    """The arguments parse, but do not satisfy the tool's JSON Schema. ``errors`` lists every problem."""

    code = "schema_violation"

    def __init__(self, message: str, *, raw: str = "", errors: list[str] | None = None) -> None:
        super().__init__(message, raw=raw)
        self.errors = errors or []


class LimitExceeded(ToolCallError):
    """A :class:`~toolstitch.Limits` bound was exceeded; ``raw`` holds a bounded sample only."""

    code = "limit_exceeded"

    def __init__(self, message: str, *, raw: str = "", limit: str = "", value: int = 0) -> None:
        super().__init__(message, raw=raw)
        self.limit = limit
        self.value = value


class LateFragment(ToolCallError):
    """A non-empty fragment arrived for a call that was already sealed; the call was not changed."""

    code = "late_fragment"


class CallIncomplete(ToolCallError):
    """The stream ended or failed before the call was sealed; its text may be truncated."""

    code = "incomplete"


class InBandError(ToolstitchError):
    """A chunk carried an ``error`` field: the server reported a failure inside the stream (Q27).

    The SDK raises ``openai.APIError`` for such an event before toolstitch sees it; this error ends
    the input when chunks are fed by hand (replays, other transports), so that no open call can
    become ``ready``. ``body`` is the error value as sent (an object or a string).
    """

    def __init__(self, body: Any) -> None:
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"in-band error: {message if isinstance(message, str) else body!r}")
        self.body = body
