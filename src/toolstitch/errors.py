"""Every exception toolstitch raises or records, in one place.

The hierarchy::

    Exception
    ├── ToolstitchError                  base of everything toolstitch raises or records
    │   ├── IncompleteStreamError        get_final_completion(): a choice never got a finish_reason
    │   ├── InBandError                  a chunk carried an ``error`` field (fed by hand, replays)
    │   ├── MalformedChunk (also ValueError)         a chunk that is not an object (kept inside the core)
    │   ├── HistoryError                 ensure_valid_history(): the next request would be rejected
    │   │   └── RequestError             run()/arun(): the request it was about to send is invalid
    │   ├── CallNotReadyError            tool_message() for a call that must not have run
    │   ├── UnusableMessageError (also ValueError)   assistant_message(): no assistant message there
    │   │   └── ChoiceNotFoundError      assistant_message(choice=n): the completion has no choice n
    │   ├── RecordedError                the error a recorded stream ended with, rebuilt by replay
    │   ├── RecordingFormatError (also ValueError)   a file that is no recording nor SSE body
    │   ├── LedgerUnavailableError       a ledger's database could not be reached or used (nothing ran)
    │   ├── ToolError                    raised by a tool on purpose: its text reaches the model verbatim
    │   │   └── OutcomeUnknown           a call's way to its effect broke mid-call (an MCP server died)
    │   ├── MCPServerError               an MCP server could not be started or listed (toolbox build)
    │   ├── ApprovalError (also ValueError)          run(approvals=...) named no call awaiting approval
    │   ├── ResumeUnavailableError (also NotImplementedError)  ts.resume: this openai cannot resume
    │   ├── UnsafeToolCallError (also openai.APIError)  guard=True: a choice finished with a call not ready
    │   └── ToolCallError                why a call is ``invalid``/``incomplete`` (``call.error``)
    │       ├── MalformedArguments       not valid JSON
    │       │   └── TransitionRefused    an event its state does not allow (text after a statement, …)
    │       ├── ArgumentsNotAnObject     valid JSON, not an object
    │       ├── EmptyArguments           ``""``: never read as ``{}``
    │       ├── MissingName              sealed without a function name
    │       ├── UnknownTool              a function the request did not offer
    │       ├── SchemaViolation          does not satisfy the tool's JSON Schema
    │       ├── LimitExceeded            a :class:`~toolstitch.Limits` bound was exceeded
    │       ├── LateFragment             text arrived after the call was sealed
    │       ├── ContractViolation        the request forbade the call (tool_choice, parallel_tool_calls)
    │       ├── InternalFault            toolstitch failed on a chunk that touched the call
    │       └── CallIncomplete           the stream ended before the call was sealed
    └── UserWarning
        ├── RecordingWarning             a recording could not be written (the stream went on)
        ├── UnstitchedStreamWarning      wrap(): a streaming path toolstitch cannot stitch (passed on as is)
        └── FastDecodeWarning            decode="fast" kept the SDK's decoding on this openai release

Errors *raised* to the caller are :class:`IncompleteStreamError`, :class:`HistoryError`,
:class:`CallNotReadyError`, :class:`UnusableMessageError`, :class:`RecordingFormatError`,
:class:`ApprovalError`, :class:`MCPServerError` (``Toolbox(mcp=...)``) and, from a stream guarded on
request, :class:`UnsafeToolCallError`.
:class:`ToolError` goes the other way: a tool raises it, toolstitch catches it. The
:class:`ToolCallError` family is
*recorded* on a call (``call.error``): they are exceptions so a user can ``raise call.error`` in their
own loop, but toolstitch never raises them into the user's iteration, since a bad call must not stop
the stream. Every call error keeps ``raw``: the argument text as received (or a bounded sample of it),
because the first thing anyone needs when a tool call goes wrong is the exact text the provider sent.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import openai

from ._sdk import init_api_error

if TYPE_CHECKING:
    from .core import ToolCall
    from .history import HistoryProblem

__all__ = [
    "ApprovalError",
    "ArgumentsNotAnObject",
    "CallIncomplete",
    "CallNotReadyError",
    "ChoiceNotFoundError",
    "ContractViolation",
    "EmptyArguments",
    "FastDecodeWarning",
    "HistoryError",
    "InBandError",
    "IncompleteStreamError",
    "InternalFault",
    "LateFragment",
    "LedgerUnavailableError",
    "LimitExceeded",
    "MCPServerError",
    "MalformedArguments",
    "MalformedChunk",
    "MissingName",
    "OutcomeUnknown",
    "RecordedError",
    "RecordingFormatError",
    "RecordingWarning",
    "RequestError",
    "ResumeUnavailableError",
    "SchemaViolation",
    "ToolCallError",
    "ToolError",
    "ToolstitchError",
    "TransitionRefused",
    "UnknownTool",
    "UnsafeToolCallError",
    "UnstitchedStreamWarning",
    "UnusableMessageError",
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
    """The model named a function that the request's ``tools`` did not offer, or called a tool as
    the other kind (a custom tool as a function, or the reverse).

    ``offered`` is the names the request offered, sorted, when the tool was not among them (None
    when that is not the reason); ``offered_as`` is ``"function"`` or ``"custom"`` when the tool was
    offered as the other kind. What the model is told to fix (``ts.call_error_text``) reads them.
    """

    code = "unknown_tool"

    def __init__(
        self,
        message: str,
        *,
        raw: str = "",
        offered: Sequence[str] | None = None,
        offered_as: str | None = None,
    ) -> None:
        super().__init__(message, raw=raw)
        self.offered = tuple(offered) if offered is not None else None
        self.offered_as = offered_as


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


class TransitionRefused(MalformedArguments):
    """Something happened to the call that its state does not allow (the owner's table in
    ``core/_owner.py``): text after its whole text was stated, a statement that disagrees with what
    streamed, an event the table has no entry for. The call is refused, never changed. A kind of
    :class:`MalformedArguments`: what would run is not certainly what the server meant."""

    code = "transition_refused"


class ContractViolation(ToolCallError):
    """The request did not allow this call (rule 10, "the request is the contract").

    ``tool_choice="none"`` with any call, a forced ``tool_choice`` naming another function (or an
    ``allowed_tools`` list without it), or every call after the first of a choice when the request
    said ``parallel_tool_calls=False``.
    """

    code = "contract_violation"

    def __init__(self, message: str, *, raw: str = "", kind: str = "") -> None:
        super().__init__(message, raw=raw)
        #: Which promise the call broke: ``"tool_choice_none"``, ``"tool_choice"`` (a forced function
        #: or an ``allowed_tools`` list without it), ``"parallel_tool_calls"``, or ``"unreadable"``
        #: (the contract could not be read); what the model is told to fix depends on it.
        self.kind = kind


class InternalFault(ToolCallError):
    """toolstitch itself failed while reading a chunk that touched this call (a bug, or a value it
    could not handle). The call is refused: what it holds may not be exactly what arrived."""

    code = "internal_error"


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
        if not isinstance(message, str):
            try:  # a hostile body (nested 100,000 deep, a huge integer) must not fail the message
                message = repr(body)
            except Exception:
                message = f"<a {type(body).__name__}>"
        if len(message) > 2000:
            message = message[:2000] + "…"
        super().__init__(f"in-band error: {message}")
        self.body = body


class MalformedChunk(ToolstitchError, ValueError):
    """A chunk that is not an object at all. Raised and caught inside the core, which records it as an
    anomaly; it never reaches the user's loop."""


class HistoryError(ToolstitchError):
    """The history would be rejected; ``problems`` lists every problem found (warnings too)."""

    def __init__(self, problems: Sequence[HistoryProblem]) -> None:
        self.problems = list(problems)
        errors = sum(p.severity == "error" for p in self.problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"invalid history: {errors} error(s)\n{lines}")


class RequestError(HistoryError):
    """``run``/``arun`` would send a request that ``validate_request`` rejects (an invalid tool
    schema, a tool without ``"type": "function"``, duplicate tool names, a ``tool_choice`` naming no
    tool, a broken history): raised before anything is sent. ``problems`` lists every problem."""

    def __init__(self, problems: Sequence[HistoryProblem]) -> None:
        super().__init__(problems)
        errors = sum(p.severity == "error" for p in self.problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        self.args = (f"invalid request: {errors} error(s)\n{lines}",)


class CallNotReadyError(ToolstitchError):
    """A tool message was asked for a call that must not have been executed.

    A call that is ``invalid``, ``incomplete`` or still ``open`` never ran, so it has no result.
    Answer it with an explicit error instead: ``tool_message(call, error=call_error_text(call))``.
    """

    def __init__(self, message: str, *, call: Any, status: str) -> None:
        super().__init__(message)
        self.call = call
        self.status = status


class UnusableMessageError(ToolstitchError, ValueError):
    """``assistant_message()`` was given something that holds no assistant message it can use (a
    message of another role, a completion without the requested choice).

    A ``ValueError`` too, so code written for the builders' earlier errors keeps working.
    """


class ChoiceNotFoundError(UnusableMessageError):
    """The completion has no choice with the requested ``index``.

    ``choice`` is the index asked for, ``available`` the indexes the completion has. A completion
    whose only choice has index 1 (an ``n=2`` request cut short, a proxy that renumbers) is answered
    this way rather than by silently taking another choice's message.
    """

    def __init__(self, choice: int, available: Sequence[int]) -> None:
        self.choice = choice
        self.available = list(available)
        super().__init__(f"the completion has no choice {choice} (choices: {self.available})")


class RecordingFormatError(ToolstitchError, ValueError):
    """The file is neither a toolstitch recording nor an SSE body (or is damaged beyond reading)."""


class LedgerUnavailableError(ToolstitchError):
    """A ledger's database could not be reached or used (down, restarting, refusing the schema).

    Raised by the ledger's own methods; the executor turns it into a ``ledger_unavailable`` refusal
    for each call it could not claim, so that nothing runs without a claim (fail closed).
    """


class ToolError(ToolstitchError):
    """Raise it from a tool to tell the model why the call failed: its text reaches the model verbatim.

    Any other exception a tool raises is reported to the model by its type only (``"Error: get_order
    failed (KeyError)..."``), since exception texts carry hostnames, connection strings and tokens;
    ``ToolError`` is how a tool says something useful on purpose::

        raise ts.ToolError(f"no order {order_id}; ask the user for the number on their receipt")
    """


class OutcomeUnknown(ToolError):
    """A call was sent and its answer was lost: an MCP server that died, or a connection that broke,
    during ``tools/call``. The effect may or may not have happened, so the call is never run again by
    itself (a ``read_only`` or trusted idempotent MCP tool is tried once more on a new session first).
    The model reads the text; the result's ``reason`` is ``"outcome_unknown"``."""


class MCPServerError(ToolstitchError):
    """``ts.Toolbox(mcp=[...])`` could not start an MCP server or read its tool list in time (or the
    ``mcp`` package is missing: ``pip install 'toolstitch[mcp]'``). Nothing was offered; the cause is
    ``__cause__``. ``server`` names the server."""

    def __init__(self, server: str, message: str) -> None:
        self.server = server
        super().__init__(f"MCP server {server!r}: {message}")


class ApprovalError(ToolstitchError, ValueError):
    """``run``/``arun`` were given ``approvals`` that do not match the calls awaiting approval.

    Raised before anything runs or is sent (fail closed): an id that is no unanswered call of the
    history, a call whose tool needs no approval, a call the ledger has no record of awaiting approval
    (a history from elsewhere, or another ledger), a call whose name or arguments changed since it
    was deferred (a tampered history), or a value that is neither ``True``, ``False`` nor a
    ``ts.Deny``. ``problems`` lists each one.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"approvals refused, nothing was run: {len(self.problems)} problem(s)\n{lines}")


class ResumeUnavailableError(ToolstitchError, NotImplementedError):
    """``ts.resume`` cannot stream a response from its id on this ``openai`` release: its
    ``responses.retrieve`` takes no ``stream`` and ``starting_after`` (openai 1.84 and newer do; the
    1.55.3 floor has no Responses API at all)."""


class UnsafeToolCallError(ToolstitchError, openai.APIError):
    """A guarded stream (``ts.wrap(client, guard=True)``, ``ts.stitch(..., guard=True)``) refused to
    go on: a choice finished, or the stream ended, holding a tool call that is not ``ready``.

    Raised by the stream in place of the chunk that finished the choice, so code that decides on its
    own what to execute (a framework) never sees that choice finish and runs none of its calls. It is
    an ``openai.APIError`` (``body`` holds ``type: "toolstitch_guard"`` and ``code:
    "unsafe_tool_call"``; ``request`` is the stream's HTTP request as the SDK keeps it for its own
    errors (openai 3.60 and newer: a copy without the secret headers), None when the stream had no
    HTTP request, such as ``ts.stitch`` over chunks), so
    a framework's own error handling and retries treat it as an error of the API call.

    ``tool_calls`` are the calls that are not ready (each with its ``status``, ``error`` and raw
    ``arguments``: the why); ``choice`` the choice that finished (None: the end of the stream).
    """

    def __init__(
        self, message: str, *, tool_calls: Sequence[ToolCall], choice: int | None, request: Any = None
    ) -> None:
        body = {"message": message, "type": "toolstitch_guard", "code": "unsafe_tool_call"}
        init_api_error(self, message, request, body=body)
        self.tool_calls = list(tool_calls)
        self.choice = choice

    @classmethod
    def of(cls, calls: Sequence[ToolCall], choice: int | None, *, request: Any = None) -> UnsafeToolCallError:
        """The error for ``calls`` (not ready) of ``choice``, its message naming each and why."""
        where = "the stream ended" if choice is None else f"choice {choice} finished"
        shown = []
        for call in calls[:5]:
            why = f"{type(call.error).__name__}: {call.error}" if call.error is not None else "no reason"
            if len(why) > 300:
                why = why[:300] + "…"
            shown.append(f"{call.name or '<no name>'} ({call.id or 'no id'}) is {call.status}: {why}")
        if len(calls) > 5:
            shown.append(f"and {len(calls) - 5} more")
        message = (
            f"toolstitch guard: {where} with {len(calls)} tool call(s) that are not ready, so none of "
            f"its calls may run; " + "; ".join(shown)
        )
        return cls(message, tool_calls=calls, choice=choice, request=request)


class RecordedError(ToolstitchError):
    """The error the recorded stream ended with, rebuilt from the recording.

    ``type_name`` is the original exception's class name (``APIConnectionError``, ``APIError`` …);
    ``body`` the provider's error object when there was one. The instance's class is a subclass of
    this one named ``type_name``, so whatever shows the class name (reports, tracebacks, a call's
    "the stream failed (APIConnectionError)") shows the original type; catch it as ``RecordedError``.
    """

    def __init__(
        self, message: str, *, type_name: str, body: Any = None, status_code: int | None = None
    ) -> None:
        named = _recorded_class(type_name)
        if named is not None:
            # Reports, tracebacks and the core's "the stream failed (X)" read the class name: it is
            # the original one (``APIConnectionError``), not this stand-in's. Still a RecordedError.
            self.__class__ = named
            super().__init__(message)
        else:
            super().__init__(f"{type_name}: {message}")
        self.message = message
        self.type_name = type_name
        self.body = body
        self.status_code = status_code

    def __reduce__(self) -> tuple[Any, ...]:
        # The class is made at run time (see _recorded_class): pickle rebuilds it from the name.
        return (_rebuild_recorded, (self.message, self.type_name, self.body, self.status_code))

    def data(self) -> dict[str, Any]:
        """Plain data for reports."""
        out: dict[str, Any] = {"type": self.type_name, "message": self.message}
        if self.status_code is not None:
            out["status_code"] = self.status_code
        if self.body is not None:
            out["body"] = self.body
        return out


def _rebuild_recorded(message: str, type_name: str, body: Any, status_code: int | None) -> RecordedError:
    """Unpickle a :class:`RecordedError` (its class is rebuilt from the recorded name)."""
    return RecordedError(message, type_name=type_name, body=body, status_code=status_code)


@functools.lru_cache(maxsize=64)
def _recorded_class(type_name: str) -> type[RecordedError] | None:
    """A subclass of :class:`RecordedError` named ``type_name`` (``None`` when the recorded name is
    not a plain class name: a hostile file cannot name a class anything). Bounded by the cache."""
    if not (type_name.isidentifier() and type_name.isascii() and len(type_name) <= 80):
        return None
    if type_name == "RecordedError":
        return None
    named = type(type_name, (RecordedError,), {"__module__": __name__, "__doc__": RecordedError.__doc__})
    named.__qualname__ = f"RecordedError[{type_name}]"
    return named


class RecordingWarning(UserWarning):
    """A recording could not be written; the stream itself was not affected."""


class UnstitchedStreamWarning(UserWarning):
    """A wrapped client streamed chat completions by a path toolstitch cannot stitch.

    The SDK's object is returned as it is (its chunks reach the caller, but no call is merged,
    checked or given a status). Warned once per wrapped client and path: filter it with
    ``warnings.filterwarnings("ignore", category=ts.errors.UnstitchedStreamWarning)`` when that is
    what you mean.
    """


class FastDecodeWarning(UserWarning):
    """``decode="fast"`` could not show that its chunks equal this ``openai`` release's own, so the
    stream is decoded by the SDK, as without the option; said once per process, with the reason."""
