"""The gate: what a tool call must pass before its function runs, in this order.

1. **Ready.** The call is sealed and its arguments parsed (rule 4 of docs/design.md). A call that is
   ``open``, ``incomplete`` (cut off) or ``invalid`` because its text is not a JSON object never goes
   further. (A call the accumulator marked ``invalid`` only because of the *request's* schema check
   goes on to step 3: the tool's own validator is the authority, and it knows, for instance, that a
   parameter with a default may be left out.)
2. **Registered.** The name is a tool of this toolbox, looked up exactly. An unknown name is never
   looked up anywhere else: no fuzzy match, no attribute, no global. A custom tool's call
   (``call.type == "custom"``, text input) runs only a custom tool, and a function call only a
   function tool.
3. **Valid.** The arguments validate: pydantic for typed tools, ``jsonschema`` for raw-schema tools.
   Invalid arguments never reach the function.
4. **Confirmed.** A ``confirm=True`` tool needs a yes: the toolbox's callback (the executor asks,
   since the callback may be async or slow), or an approval given to ``ts.run(approvals=...)``
   (see ``_approval.py``). ``ts.Deny(reason)`` says no with a reason the model reads.

Each refusal is a :class:`Refusal` whose ``message`` is written for the model: it says precisely what
was wrong and that the call did not run, so the next step can correct it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..core import ToolCall
from ..errors import CallIncomplete, MissingName, SchemaViolation, UnknownTool
from ..history import call_refusal_text, invalid_arguments_text, unknown_tool_text, wrong_kind_text
from ._definition import Tool

if TYPE_CHECKING:
    from ._toolbox import Toolbox

__all__ = [
    "Admission",
    "Refusal",
    "RefusalReason",
    "admit",
    "denied",
    "in_progress",
    "ledger_unavailable",
    "not_approved",
    "outcome_unknown",
]

RefusalReason = Literal[
    "not_ready",
    "incomplete",
    "unknown_tool",
    "invalid_arguments",
    "not_approved",
    "outcome_unknown",
    "in_progress",
    "ledger_unavailable",
]
"""Why the gate refused a call: a stable code, also used to count corrective rounds."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """The gate said no. ``message`` is what the model reads; ``problems`` lists each finding."""

    reason: RefusalReason
    message: str
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Admission:
    """The gate said yes (so far): the tool, and the keyword arguments its function will receive."""

    tool: Tool
    kwargs: dict[str, Any]


def _shown(name: str | None) -> str:
    return repr(name) if name else "(no name)"


def admit(call: ToolCall, box: Toolbox) -> Admission | Refusal:
    """Steps 1-3 of the gate (pure, no I/O). Confirmation is the executor's job. What the model
    reads of a refusal is written once, in ``history/_refusals.py`` (``ts.call_error_text`` uses
    the same words)."""
    status, error = call.status, call.error
    parsed_ok = status == "ready" or (
        status == "invalid" and isinstance(error, (SchemaViolation, UnknownTool))
    )
    if not parsed_ok:
        return _not_ready(call)
    t = box.get(call.name)
    if t is None:
        return Refusal("unknown_tool", unknown_tool_text(call.name, box.names))
    if t.custom != (call.type == "custom"):
        # A custom tool's text never reaches a function that expects JSON arguments, nor the reverse.
        return Refusal("unknown_tool", wrong_kind_text(call.name, t.custom))
    return check_arguments(call.name or "", t, call.parsed)


def check_arguments(name: str, t: Tool, parsed: Any) -> Admission | Refusal:
    """Step 3 alone (the eager dispatcher uses it on arguments that are complete but not sealed)."""
    kwargs, problems = t.bind(parsed)
    if kwargs is None:
        return Refusal("invalid_arguments", invalid_arguments_text(name, problems), tuple(problems))
    return Admission(t, kwargs)


def _not_ready(call: ToolCall) -> Refusal:
    error = call.error
    text = call_refusal_text(call.name, call.status, error, call.type == "custom")
    if call.status == "incomplete" or isinstance(error, CallIncomplete):
        return Refusal("incomplete", text)
    if call.status == "open" or isinstance(error, MissingName):
        return Refusal("not_ready", text)
    return Refusal("not_ready", text, (error.message if error is not None else "the call is not ready",))


def not_approved(call: ToolCall, why: str | None = None) -> Refusal:
    """Step 4 said no (the callback declined, failed, or there is no callback)."""
    detail = f" ({why})" if why else ""
    return Refusal(
        "not_approved",
        f"Error: the call to {_shown(call.name)} was not approved{detail}; it was not run.",
    )


def denied(call: ToolCall, reason: str) -> Refusal:
    """Step 4 said no with a reason (``ts.Deny(reason)``): the model reads the reason as given."""
    if not reason.strip():
        return not_approved(call)
    return Refusal(
        "not_approved",
        f"Error: the call to {_shown(call.name)} was not approved; it was not run. Reason: {reason}",
    )


def outcome_unknown(call: ToolCall) -> Refusal:
    """The ledger says this call started once and never finished: it may have had its effect."""
    return Refusal(
        "outcome_unknown",
        f"Error: the call to {_shown(call.name)} was started earlier and did not report a result; "
        "it was not run again because it may already have taken effect.",
    )


def in_progress(call: ToolCall) -> Refusal:
    """Another executor holds this call's claim and did not finish within the time allowed."""
    return Refusal(
        "in_progress",
        f"Error: the call to {_shown(call.name)} is being run by another worker and did not finish in "
        "time; it was not run again here.",
    )


def ledger_unavailable(call: ToolCall, exc: BaseException) -> Refusal:
    """The ledger could not be asked (a database that is down, a file that is locked): without a
    claim nobody can tell whether another worker runs this call, so it does not run (fail closed)."""
    detail = f"{type(exc).__name__}: {exc}"
    if len(detail) > 300:
        detail = detail[:300] + "…"
    return Refusal(
        "ledger_unavailable",
        f"Error: the call to {_shown(call.name)} was not run: the ledger that makes sure each call runs "
        f"once could not be reached ({detail}).",
    )
