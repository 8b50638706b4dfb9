"""OpenTelemetry for tool execution and the run loop: optional, and free when absent.

``pip install "toolstitch[otel]"`` brings ``opentelemetry-api``; configure an SDK (exporters, a
``TracerProvider``, a ``MeterProvider``) as for any other library. Without the API installed nothing
is imported and every hook here is a no-op; with the API but no SDK, OpenTelemetry's own no-op
providers make it nearly free.

What toolstitch reports (GenAI semantic conventions where they define it, ``toolstitch.*`` else):

**Spans.** ``execute_tool {gen_ai.tool.name}`` (kind ``INTERNAL``) around each tool function that
runs, with ``gen_ai.operation.name = "execute_tool"``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``gen_ai.tool.type = "function"`` and, when the call did not succeed, ``error.type`` (the exception's
class for a tool that raised, else ``timeout``, ``cancelled`` …) and an ``ERROR`` status. Its parent is
the span that was current when the calls were handed to the executor (``ts.run`` or
``box.execute``); the tool's own spans nest under it.

**Span events**, on the span current at that moment (so, while a stream is read by ``ts.run``, on
the official openai instrumentation's ``chat`` span when it is active; else on yours):
``toolstitch.tool_call.started``, ``.arguments_complete``, ``.ready``, ``.invalid``, ``.incomplete``
(from the stream); ``toolstitch.anomaly`` (``toolstitch.anomaly.code``, ``.message``); and, after the
stream, ``toolstitch.tool_call.dispatched``, ``.awaiting_approval`` and ``.finished``
(``toolstitch.tool_call.status``, ``.reason``). Anomalies are also logged at INFO on the
``toolstitch`` logger, with or without OpenTelemetry.

**Metrics** (histograms, seconds): ``gen_ai.client.operation.time_to_first_chunk`` (request sent to
first chunk), ``toolstitch.tool_call.time_to_complete_arguments`` (request sent to the moment the
call's arguments were a complete JSON value) and ``gen_ai.execute_tool.duration`` (the tool
function's own running time).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..core import (
    AnomalyRecorded,
    ArgumentsComplete,
    ToolCallIncomplete,
    ToolCallInvalid,
    ToolCallReady,
    ToolCallStarted,
    now,
)

if TYPE_CHECKING:
    from ..core import ToolCall
    from ._definition import Tool
    from ._result import ToolResult

__all__ = [
    "StreamObserver",
    "activated",
    "call_event",
    "chat_span",
    "current",
    "current_context",
    "enabled",
    "end_tool",
    "span_context",
    "stage_event",
    "start_tool",
]

logger = logging.getLogger("toolstitch")

_NAME = "toolstitch"


class _Otel:
    """The OpenTelemetry API modules and toolstitch's tracer, meter and instruments (made once)."""

    def __init__(self) -> None:
        from opentelemetry import context, metrics, trace

        self.context = context
        self.trace = trace
        self.tracer = trace.get_tracer(_NAME, __version__)
        meter = metrics.get_meter(_NAME, __version__)
        self.first_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_to_first_chunk",
            unit="s",
            description="Time from sending a streamed request to its first chunk.",
        )
        self.arguments = meter.create_histogram(
            "toolstitch.tool_call.time_to_complete_arguments",
            unit="s",
            description="Time from sending a streamed request to the moment a tool call's arguments were "
            "a complete JSON value.",
        )
        self.tool_duration = meter.create_histogram(
            "gen_ai.execute_tool.duration", unit="s", description="Duration of tool execution."
        )


_loaded: _Otel | None = None
_tried = False


def _otel() -> _Otel | None:
    """The API, imported on first use; None (for good) when ``opentelemetry-api`` is absent."""
    global _loaded, _tried
    if not _tried:
        _tried = True
        try:
            _loaded = _Otel()
        except ImportError:
            _loaded = None
        except Exception as exc:  # an API that fails to start must not break tool execution
            logger.warning("OpenTelemetry could not be set up (%s); no telemetry", type(exc).__name__)
            _loaded = None
    return _loaded


def enabled() -> bool:
    """Whether ``opentelemetry-api`` is installed (toolstitch then reports through it)."""
    return _otel() is not None


def current_context() -> Any:
    """The caller's OpenTelemetry context (the parent of the tool spans), or None."""
    o = _otel()
    return o.context.get_current() if o is not None else None


# ----------------------------------------------------------------------------- tool spans


def start_tool(call: ToolCall, tool: Tool, parent: Any) -> Any:
    """Start the ``execute_tool`` span of a call (None without OpenTelemetry)."""
    o = _otel()
    if o is None:
        return None
    try:
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool.name,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": call.id or "",
        }
        if tool.description:
            attributes["gen_ai.tool.description"] = tool.description[:1000]
        if tool.server is not None:  # an MCP tool: the call is the server's tools/call
            attributes["mcp.method.name"] = "tools/call"
            attributes["toolstitch.mcp.server"] = tool.server
        return o.tracer.start_span(
            f"execute_tool {tool.name}",
            context=parent,
            kind=o.trace.SpanKind.INTERNAL,
            attributes=attributes,
        )
    except Exception:  # telemetry never fails a call
        return None


def span_context(span: Any) -> Any:
    """A context in which ``span`` is current (the tool function runs in it), or None."""
    o = _otel()
    if o is None or span is None:
        return None
    return o.trace.set_span_in_context(span)


@contextlib.contextmanager
def activated(ctx: Any) -> Iterator[None]:
    """Make ``ctx`` (from :func:`span_context`) current for the block; nothing when it is None."""
    o = _otel()
    if o is None or ctx is None:
        yield
        return
    token = o.context.attach(ctx)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # detached in another context: OpenTelemetry logs it
            o.context.detach(token)


def _error_type(result: ToolResult) -> str | None:
    if result.status == "ok":
        return None
    if result.exception is not None and not result.reused:
        return type(result.exception).__qualname__
    return result.reason or result.status


def end_tool(span: Any, result: ToolResult) -> None:
    """End the call's span with its outcome, and record the tool's duration."""
    o = _otel()
    if o is None:
        return
    try:
        error = _error_type(result)
        name = result.call.name or ""
        if span is not None:
            if error is not None:
                span.set_attribute("error.type", error)
                span.set_status(o.trace.Status(o.trace.StatusCode.ERROR, result.reason or result.status))
            span.end()
        duration = result.timings.execution
        if duration is not None:
            attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
            if error is not None:
                attributes["error.type"] = error
            o.tool_duration.record(duration, attributes)
    except Exception:
        pass


# ----------------------------------------------------------------------------- the run loop


def _call_attributes(call: ToolCall) -> dict[str, Any]:
    return {
        "gen_ai.tool.call.id": call.id or "",
        "gen_ai.tool.name": call.name or "",
        "toolstitch.tool_call.index": call.index,
    }


def chat_span(stream: Any) -> Any:
    """The openai instrumentation's ``chat`` span of a stitched stream, when its SDK stream is the
    instrumentation's proxy (``span``, or ``invocation.span``); None otherwise."""
    o = _otel()
    if o is None:
        return None
    value = getattr(stream, "sdk_stream", None)
    for _ in range(4):
        try:
            attrs = vars(value)
        except TypeError:
            return None
        span = attrs.get("span")
        if span is None and attrs.get("invocation") is not None:
            span = getattr(attrs["invocation"], "span", None)
        if isinstance(span, o.trace.Span):
            return span
        value = attrs.get("__wrapped__", attrs.get("stream"))
        if value is None:
            return None
    return None


_REPORTED = frozenset(
    {AnomalyRecorded, ToolCallStarted, ArgumentsComplete, ToolCallReady, ToolCallInvalid, ToolCallIncomplete}
)


class StreamObserver:
    """Watches one stream's toolstitch events in ``ts.run``: span events for each call's lifecycle
    and each anomaly (on the current span), INFO logs for anomalies, and the time metrics."""

    __slots__ = ("fallback", "model", "o", "sent_at")

    def __init__(self, model: str, sent_at: float) -> None:
        self.o = o = _otel()
        self.model = model
        self.sent_at = sent_at
        self.fallback = o.trace.get_current_span() if o is not None else None
        """The span current when the request was sent: events go there once a ``chat`` span ended
        (the instrumentation ends it when the SDK stream is exhausted)."""

    def __call__(self, event: Any) -> None:
        kind = type(event)
        if kind is AnomalyRecorded:
            a = event.anomaly
            logger.info(
                "anomaly %s: %s (choice %s, call index %s)", a.code, a.message, a.choice, a.call_index
            )
        o = self.o
        if o is None or kind not in _REPORTED:  # most events are text and argument deltas: skip fast
            return
        with contextlib.suppress(Exception):  # telemetry never breaks the stream
            self._report(o, event)

    def _report(self, o: _Otel, event: Any) -> None:
        span = o.trace.get_current_span()
        if not span.is_recording() and self.fallback is not None:
            span = self.fallback
        if isinstance(event, AnomalyRecorded):
            a = event.anomaly
            attributes: dict[str, Any] = {
                "toolstitch.anomaly.code": a.code,
                "toolstitch.anomaly.message": a.message,
            }
            if a.choice is not None:
                attributes["toolstitch.choice"] = a.choice
            if a.call_index is not None:
                attributes["toolstitch.tool_call.index"] = a.call_index
            span.add_event("toolstitch.anomaly", attributes)
        elif isinstance(event, ToolCallStarted):
            span.add_event("toolstitch.tool_call.started", _call_attributes(event.call))
        elif isinstance(event, ArgumentsComplete):
            span.add_event("toolstitch.tool_call.arguments_complete", _call_attributes(event.call))
            at = event.call.metrics.arguments_complete_at
            elapsed = (at if at is not None else now()) - self.sent_at
            o.arguments.record(
                max(0.0, elapsed),
                {"gen_ai.request.model": self.model, "gen_ai.tool.name": event.call.name or ""},
            )
        elif isinstance(event, ToolCallReady):
            span.add_event("toolstitch.tool_call.ready", _call_attributes(event.call))
        elif isinstance(event, ToolCallInvalid):
            attributes = _call_attributes(event.call)
            attributes["error.type"] = getattr(event.error, "code", type(event.error).__name__)
            span.add_event("toolstitch.tool_call.invalid", attributes)
        elif isinstance(event, ToolCallIncomplete):
            span.add_event("toolstitch.tool_call.incomplete", _call_attributes(event.call))

    def finished(self, first_chunk_at: float | None, error: BaseException | None) -> None:
        """The attempt is over: record its time to first chunk (if a chunk came)."""
        o = self.o
        if o is None or first_chunk_at is None:
            return
        try:
            attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": self.model}
            if error is not None:
                attributes["error.type"] = type(error).__qualname__
            o.first_chunk.record(max(0.0, first_chunk_at - self.sent_at), attributes)
        except Exception:
            pass


@contextlib.contextmanager
def current(span: Any) -> Iterator[None]:
    """Make ``span`` current for the block (the ``chat`` span while its stream is read), unless it
    already is: the instrumentation's newer mode keeps it current until the stream ends, and
    attaching it again would leave it current after the block (contexts are detached in order)."""
    o = _otel()
    if o is None or span is None or o.trace.get_current_span() is span:
        yield
        return
    with o.trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
        yield


def call_event(name: str, call: ToolCall, **attributes: Any) -> None:
    """A lifecycle event of a call after its stream (``dispatched``, ``awaiting_approval``,
    ``finished``) on the current span."""
    o = _otel()
    if o is None:
        return
    try:
        values = _call_attributes(call)
        values.update({f"toolstitch.tool_call.{k}": v for k, v in attributes.items() if v is not None})
        o.trace.get_current_span().add_event(f"toolstitch.tool_call.{name}", values)
    except Exception:
        pass


def stage_event(attributes: dict[str, Any], at: float) -> None:
    """One stage of a run's waterfall (``loop/_timeline.py``) as a ``toolstitch.stage`` span event
    on the current span, stamped ``at`` (Unix time); attributes under ``toolstitch.stage.``."""
    o = _otel()
    if o is None:
        return
    try:
        values = {f"toolstitch.stage.{k}": v for k, v in attributes.items() if v is not None and v != ""}
        o.trace.get_current_span().add_event("toolstitch.stage", values, timestamp=int(at * 1e9))
    except Exception:
        pass
