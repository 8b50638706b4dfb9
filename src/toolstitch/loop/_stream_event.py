"""``StreamEvent``: one event of a step's stream, as the run loop hands it to ``on_event``.

The loop streams each step through a wrapped client; a UI wants what a person would see while it
streams (the text as it is written, each call's arguments as they arrive, calls turning ready), not
only the step's outcome. Every event of the stream (``toolstitch.events``: ``ContentDelta``,
``ToolCallStarted``, ``ArgumentsDelta`` with ``event.call.preview``, ``ToolCallReady`` …,
``StreamEnded``) reaches ``on_event`` in order, wrapped with the number of the step it belongs to.

A step whose request is retried streams again from the start: the events after ``RequestRetried``
are those of the new attempt (a UI clears what it showed for the step). A preview is never safe to
act on: only the calls of ``ToolCallReady`` run, and only after the gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core import Event, JSONForm, json_form

__all__ = ["StreamEvent"]


@dataclass(frozen=True, slots=True)
class StreamEvent(JSONForm):
    """An event of step ``step``'s stream (``event``: one of ``toolstitch.events``' stream events)."""

    step: int
    event: Event

    def to_dict(self) -> dict[str, Any]:
        """The stream event's own form with its step: ``{"type": "content_delta", "step": 0, ...}``."""
        inner = json_form(self.event)
        if not isinstance(inner, dict):  # not one of toolstitch's events
            inner = {"event": inner}
        return {"type": inner.pop("type", "stream_event"), "step": self.step, **inner}
