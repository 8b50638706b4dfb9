"""What one executed (or refused, reused, abandoned) tool call comes to: :class:`ToolResult`.

It lives apart from the executor so that the run loop, the ledgers and users' own code can read it
without the machinery that produces it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

from ..core import ToolCall, timings_dict
from ..history import Dialect, result_message

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionToolMessageParam

__all__ = ["CallTimings", "ResultStatus", "ToolResult"]

ResultStatus = Literal["ok", "error", "timeout", "cancelled", "refused", "not_started"]
"""``not_started``: the call was claimed but never began (out of time before a worker was free, or
cancelled while queued); nothing ran, nothing was recorded, so a retry runs it."""


@dataclass(slots=True)
class CallTimings:
    """Where one call's time went (seconds; ``*_at`` are ``time.monotonic()`` instants, placed on
    the Unix time line by ``toolstitch.metrics.wall_clock`` and :meth:`as_dict`).

    ``streaming``     from the call's first fragment to its seal
    ``arguments``     from the call's first fragment to the moment its JSON value closed
    ``validation``    spent in the gate (name lookup and argument validation)
    ``confirmation``  spent waiting for the approval callback
    ``execution``     the function's own running time
    ``eager``         the call started before its stream was sealed
    ``warm``          spent waiting for the tool's warm-up (``@tool(warm=...)``) before it started
    ``cached``        the result came from the tool's result cache (``@tool(cache=...)``); nothing ran
    """

    streaming: float | None = None
    arguments: float | None = None
    validation: float = 0.0
    confirmation: float = 0.0
    execution: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    eager: bool = False
    warm: float = 0.0
    cached: bool = False

    def as_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready): durations in seconds, ``started_at``/``finished_at`` as Unix time."""
        return timings_dict({f.name: getattr(self, f.name) for f in fields(self)})


@dataclass(slots=True, eq=False)
class ToolResult:
    """The outcome of one tool call, ready for the history (``ts.tool_messages``).

    ``status``     ``"ok"``, ``"error"`` (the tool raised), ``"timeout"`` (it started and did not
                   finish in time), ``"cancelled"``, ``"not_started"`` (it never began: a retry
                   runs it) or ``"refused"`` (the gate or the ledger said no: ``reason`` says why)
    ``value``      what the function returned (``ok`` only)
    ``error``      what the model is told when the call did not succeed
    ``reason``     a stable code: the gate's refusal reason, ``"raised"``, ``"timeout"``,
                   ``"outcome_unknown"`` (an ``error``: an MCP server died during the call) …
    ``exception``  the exception the tool raised, if it raised
    ``reused``     the result was taken from the ledger; the function did not run now
    ``cached``     the result was taken from the tool's result cache (``@tool(cache=...)``): an
                   earlier call with the same arguments; the function did not run now
    ``content``    the tool message's text: the value (a ``str`` as is, anything else as JSON), or
                   ``error``
    """

    call: ToolCall
    status: ResultStatus
    value: Any = None
    error: str | None = None
    reason: str | None = None
    exception: BaseException | None = None
    reused: bool = False
    timings: CallTimings = field(default_factory=CallTimings)
    problems: tuple[str, ...] = ()
    """For ``invalid_arguments`` refusals: each validation problem on its own."""
    content: str = ""
    cached: bool = False

    def __post_init__(self) -> None:
        if not self.content:
            self.content = _content(self.value) if self.status == "ok" else (self.error or "Error")
        self.content = _valid_text(self.content)

    @property
    def ok(self) -> bool:
        """True when the tool ran and returned a value."""
        return self.status == "ok"

    @property
    def tool_call_id(self) -> str:
        """The id of the call this result answers."""
        return self.call.id or ""

    @property
    def name(self) -> str | None:
        """The tool name the model called."""
        return self.call.name

    def to_message(self, dialect: str | Dialect = "openai") -> ChatCompletionToolMessageParam:
        """The tool message answering the call (``ChatCompletionToolMessageParam``), shaped for
        ``dialect`` like ``ts.tool_message`` does: ``toolstitch.history.result_message(self)``."""
        return result_message(self, dialect)

    def __repr__(self) -> str:
        try:
            detail = f"value={self.value!r}" if self.ok else f"reason={self.reason!r}"
        except Exception:  # a hostile value's own repr
            detail = f"value=<{type(self.value).__name__}>"
        return f"ToolResult(id={self.call.id!r}, name={self.call.name!r}, status={self.status!r}, {detail})"


def _valid_text(text: str) -> str:
    """``text`` as valid Unicode: a lone surrogate (a tool that returned one) becomes U+FFFD, since
    no server can read it (the request body is UTF-8); a split pair is joined."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _content(value: Any) -> str:
    """The model-facing text of a value: a ``str`` as is, anything else as JSON. Never raises on a
    hostile value (nested too deep, a ``__str__`` that fails): it is described instead."""
    if isinstance(value, str):
        return value
    from pydantic_core import to_json

    try:
        return to_json(value, fallback=str).decode()
    except Exception:
        pass
    try:
        text = str(value)
    except Exception:  # RecursionError included
        return f"<a {type(value).__name__} value that cannot be shown>"
    return text if isinstance(text, str) else f"<a {type(value).__name__} value>"
