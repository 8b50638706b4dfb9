"""What a run returns (``RunResult``, its ``Step``s and their timings) and what it tells as it goes
(the ``RunEvent``s), apart from the loop that makes them, so that readers of a run (the pull
iterators, reports, users' hooks) need none of its machinery."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from openai.types.chat import ChatCompletion

from ..core import Anomaly, JSONForm, ToolCall, json_form
from ..tools import ToolResult, call_event
from ._stream_event import StreamEvent
from ._timeline import Timeline

if TYPE_CHECKING:
    # The history's types for type checkers: plain JSON dicts at run time (the SDK's param types
    # are TypedDicts), so ``messages=result.messages`` type-checks as the SDK's own messages would.
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.responses import ResponseInputItemParam

# What ``toolstitch.loop`` exports from here; ``EventHook``, ``StopReason`` and ``trace`` are read by
# the loop's own modules only.
__all__ = [
    "CallAwaitingApproval",
    "CallDispatched",
    "CallFinished",
    "RequestRetried",
    "ResponseReceived",
    "RunEvent",
    "RunResult",
    "Step",
    "StepFinished",
    "StepStarted",
    "StepTimings",
    "StreamAbandoned",
]

StopReason = Literal["done", "max_steps", "max_corrections", "awaiting_approval"]


@dataclass(slots=True)
class StepTimings:
    """Where one step's time went (seconds).

    ``first_chunk``   from sending the (successful) request to its first chunk
    ``arguments``     from sending it to the moment the last call's arguments were complete
    ``streaming``     from sending it to the end of its stream
    ``validation``    spent in the gate, all calls together
    ``confirmation``  spent waiting for approvals, all calls together
    ``execution``     from the end of the stream to the moment every result was ready
    ``total``         the whole step, failed attempts and backoff included
    ``attempts``      requests sent (1 when the first one succeeded)
    """

    first_chunk: float | None = None
    arguments: float | None = None
    streaming: float | None = None
    validation: float = 0.0
    confirmation: float = 0.0
    execution: float | None = None
    total: float = 0.0
    attempts: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready): every field above, in seconds (and ``attempts``)."""
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    def add_calls(self, calls: Sequence[ToolCall], results: Sequence[ToolResult], sent_at: float) -> None:
        """Fill the per-call parts of the breakdown from the calls and their results."""
        complete = [c.metrics.arguments_complete_at for c in calls if c.metrics.arguments_complete_at]
        if complete:
            self.arguments = max(complete) - sent_at
        self.validation = sum(r.timings.validation for r in results)
        self.confirmation = sum(r.timings.confirmation for r in results)


@dataclass(slots=True)
class Step:
    """One round trip: the completion, its calls (with their status) and their results.

    A step that resumes the unanswered calls of the input ``messages`` has ``completion=None``.
    """

    index: int
    completion: ChatCompletion | None
    calls: list[ToolCall]
    results: list[ToolResult]
    timings: StepTimings
    anomalies: list[Anomaly] = field(default_factory=list)
    correction: str | None = None
    """``fail_fast``: the step's stream was closed early because a call was refused while it
    streamed; this is what the next request told the model (the step has no completion, and its
    answer is not in the history)."""
    marks: dict[str, float] = field(default_factory=dict)
    """The step's instants (``time.monotonic()``): ``request_sent``, ``first_chunk``, ``finish``
    (the choice's ``finish_reason``), ``stream_end``, ``results_ready``; the timeline's source."""


@dataclass(slots=True)
class RunResult:
    """What :func:`run` returns.

    ``messages``     the whole history (input and new turns), valid by ``ts.validate_history``
                     (``api="responses"``: the ``input`` items, valid by ``ts.validate_input``;
                     also ``result.input``)
    ``completion``   the last ``ChatCompletion`` (``api="responses"``: the last ``Response``;
                     ``result.output_text`` is its text)
    ``steps``        per step: calls, their status, results, timings
    ``stop_reason``  ``"done"`` (a step without tool calls), ``"max_steps"``, ``"max_corrections"``,
                     ``"awaiting_approval"`` (calls wait for a person: see ``pending``)
    ``pending``      the calls awaiting approval (``stop_reason == "awaiting_approval"``), with the
                     ids the history carries: resume with ``run(..., messages=result.messages,
                     approvals={call.id: True or ts.Deny("why")})``. Until then ``messages`` leaves
                     them unanswered (so it is not a history to send as it is).
    """

    messages: list[ChatCompletionMessageParam]
    completion: ChatCompletion | None
    steps: list[Step]
    stop_reason: StopReason
    pending: list[ToolCall] = field(default_factory=list)
    timeline: Timeline | None = None
    """The run's waterfall: each step's and call's stages in milliseconds (``loop/_timeline.py``);
    ``timeline.as_dict()`` is plain data, ``timeline.save(path)`` what ``toolstitch replay --html``
    draws."""

    def to_html(self, title: str = "toolstitch run") -> str:
        """The run's waterfall as one self-contained HTML page (``RunResult.timeline``)."""
        timeline = self.timeline if self.timeline is not None else Timeline(0.0, 0.0)
        return timeline.to_html(title)

    @property
    def results(self) -> list[ToolResult]:
        """Every tool result of the run, in order."""
        return [r for s in self.steps for r in s.results]

    @property
    def input(self) -> list[ResponseInputItemParam]:
        """The history as the Responses API's ``input`` (``api="responses"``): the items to store
        and send again. The same list as ``messages``, typed as the Responses API's items."""
        return cast("list[ResponseInputItemParam]", self.messages)

    @property
    def output_text(self) -> str | None:
        """The model's last text: the last response's ``output_text`` (``api="responses"``), or
        the content of the last completion's first choice; None before any answer."""
        last = self.completion
        if last is None:
            return None
        text = getattr(last, "output_text", None)
        if isinstance(text, str):
            return text
        choices = getattr(last, "choices", None) or []
        content = getattr(getattr(choices[0], "message", None), "content", None) if choices else None
        return content if isinstance(content, str) else None


@dataclass(frozen=True, slots=True)
class StepStarted(JSONForm):
    """A step is about to send its request."""

    step: int


@dataclass(frozen=True, slots=True)
class RequestRetried(JSONForm):
    """A request failed before any call was sealed; it is sent again after ``wait`` seconds."""

    step: int
    attempt: int
    error: BaseException
    wait: float


@dataclass(frozen=True, slots=True)
class ResponseReceived(JSONForm):
    """The stream is sealed and ``message`` was appended to the history: save it here to resume an
    interrupted run (its calls have not run yet). With ``api="responses"``, ``completion`` is the
    ``Response`` and ``message`` is ``{"items": [...]}``, the output items appended to ``input``."""

    step: int
    completion: ChatCompletion
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CallDispatched(JSONForm):
    """A call passed the gate and started (``eager``: before its stream was sealed)."""

    step: int
    call: ToolCall
    eager: bool


@dataclass(frozen=True, slots=True)
class StreamAbandoned(JSONForm):
    """``fail_fast``: ``call`` was refused while the model was still writing it (``reason``); the
    stream was closed and the next request tells the model ``correction``."""

    step: int
    call: ToolCall
    reason: str
    correction: str


@dataclass(frozen=True, slots=True)
class CallAwaitingApproval(JSONForm):
    """A call needs approval and the toolbox has no callback: it waits for ``run(approvals=...)``.

    ``call.id`` is the id the history carries (the key of ``approvals``)."""

    step: int
    call: ToolCall


@dataclass(frozen=True, slots=True)
class CallFinished(JSONForm):
    """A call has its result (run, refused, reused, timed out); ``result.timings`` has the breakdown."""

    step: int
    result: ToolResult

    @property
    def cached(self) -> bool:
        """The result came from the tool's result cache (``@tool(cache=...)``): nothing ran."""
        return self.result.cached


@dataclass(frozen=True, slots=True)
class StepFinished(JSONForm):
    """A step is over; ``step.timings`` has the breakdown."""

    step: Step

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "step_finished", "step": <its index>, <the Step's other fields>...}``: the
        step number as in every other run event."""
        form = json_form(self.step)
        if not isinstance(form, dict):
            return {"type": "step_finished", "step": form}
        return {"type": "step_finished", "step": form.pop("index", None), **form}


RunEvent = (
    StepStarted
    | RequestRetried
    | StreamEvent
    | ResponseReceived
    | CallDispatched
    | StreamAbandoned
    | CallAwaitingApproval
    | CallFinished
    | StepFinished
)
EventHook = Callable[[RunEvent], None]


def trace(event: RunEvent) -> None:
    """A call's lifecycle after its stream, as span events on the current span (OpenTelemetry)."""
    if isinstance(event, CallDispatched):
        call_event("dispatched", event.call, eager=event.eager)
    elif isinstance(event, CallAwaitingApproval):
        call_event("awaiting_approval", event.call)
    elif isinstance(event, CallFinished):
        r = event.result
        call_event("finished", r.call, status=r.status, reason=r.reason, reused=r.reused, cached=r.cached)
