"""The run loop: stream, seal, gate, execute, append results, ask again.

``run`` (sync) and ``arun`` (async) are thin twins over one shared core: ``_Loop`` holds the run's
state and ``_Turn`` one step's, and every decision and all bookkeeping live there. The run's order is
one generator (``_flow.py``) that yields its I/O (sending the request, reading the stream, executing
the calls, sleeping between attempts); the twins only perform it, blocking or awaiting, so they
cannot drift apart. One step is:

1. stream a request with ``tools=box.definitions()`` through a ``ts.wrap``-ped client (the caller's
   client is wrapped when it is not already), retrying with tenacity when the request fails before
   any call was sealed;
2. append ``assistant_message(completion)``;
3. gate and execute every call of choice 0 (one result per call, even refused ones, so the history
   stays valid), and append their tool messages in declared order;
4. stop when a step has no tool calls, after ``max_steps``, or when a tool's arguments were still
   invalid after ``max_corrections`` corrective rounds.

What can never happen: a call executed from a stream that did not finish (rule 4 of docs/design.md); a
call executed twice because a request was retried (calls run only after their stream succeeded, and
the ledger answers a call id it has seen finish); a tool's exception escaping (unless
``raise_tool_errors``).

**Eager dispatch** (the default; ``eager=False`` turns it off, and so does ``@tool(eager=False)``
for one tool): a call to a ``read_only`` tool that needs no confirmation starts as soon as its
arguments are a complete, schema-valid JSON value and it passes the gate, while the model is still
streaming the rest. An eager start passes the same door as a sealed call (``tools/_executor.py``):
it is claimed on the run's ledger under the id the history will carry, answered by the cache when
it holds the answer, and only then launched. When the stream is sealed, the result is used only if
the sealed call is admitted with exactly the same text; otherwise it is discarded (an async tool is
cancelled, a sync tool's :class:`~toolstitch.CancelToken` is cancelled) and the call is answered as
the sealed call deserves: refused when it did not end ``ready``. A stream that fails keeps its eager
starts for the retry: the retry's identical call (same id, same text) adopts the running or finished
start instead of running again (``EagerStarts``); what no call adopts is discarded when the step
ends. A tool that is not ``read_only`` never starts before the seal. Results enter the history in
call order.

**Resuming.** When ``messages`` ends with an assistant message whose calls are not all answered (a
run that was interrupted after saving it), those calls are executed first, through the ledger: with
the same :class:`~toolstitch.SQLiteLedger`, calls that finished before the interruption are not run
again.

**The Responses API** (``api="responses"``): the same loop (gate, executor, ledger, approvals,
eager dispatch, events, tracing) over ``client.responses.create(stream=True)``, statelessly: the
history is the request's ``input`` (pass ``input=[...]`` instead of ``messages``); each step sends it
whole with the toolbox's tools in this API's flat shape, appends the response's output items
(``ts.response_items``: ``function_call`` items as received, reasoning kept) and one
``function_call_output`` per call, and asks again until the model answers without calls.
``result.input`` is the history to store and ``result.output_text`` the final text.
``previous_response_id`` is the loop's own, so a caller's is refused: ``transport="websocket"`` (one
connection, OpenAI's WebSocket mode) and ``incremental=True`` over HTTP continue each response with it
and send only the new items, keeping the whole history for a server that forgot (``_chain.py``).

**Approvals that wait for a person.** A call to a ``confirm=True`` tool needs a yes. When the toolbox
has no confirmation callback, the step runs its other calls, runs nothing that needs approval, and
the run returns with ``stop_reason == "awaiting_approval"`` and ``result.pending`` (those calls, with
the ids the history carries); the ledger records each one (``tools/_approval.py``). The history
(``result.messages``, plain JSON) can be stored; later, in any process, ``run(..., messages=saved,
approvals={call_id: True or ts.Deny("why")}, ledger=the same ledger)`` resumes (a run given no
ledger finds the in-memory ledger of the run that returned the same history, in the same process:
``tools/_approval.py``): approvals are checked
first (each must name a call that awaits approval, unchanged since the ledger recorded it, else
:class:`~toolstitch.errors.ApprovalError` and nothing runs), approved calls run through the ledger
(once), denied ones are answered with the reason, and only then is the model asked again. Calls
left without an answer keep the run awaiting approval.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict, overload

import tenacity
from openai import AsyncOpenAI, OpenAI
from openai.types.chat import ChatCompletion

from ..client import WrappedClient, aresume, calls_of, resume
from ..core import (
    Accumulator,
    Anomaly,
    ArgumentsMalformed,
    ChoiceFinished,
    Event,
    ResponseAccumulator,
    ToolCall,
    ToolCallInvalid,
    ToolCallStarted,
    now,
    parse_arguments,
    valid_unicode,
)
from ..errors import ApprovalError, RequestError
from ..history import (
    Dialect,
    HistoryProblem,
    get_dialect,
    validate_request,
)
from ..tools import (
    Admission,
    Approval,
    ClaimLedger,
    EagerStarts,
    ErrorMessage,
    MemoryLedger,
    ResultCache,
    Started,
    StoredResult,
    StreamObserver,
    Toolbox,
    ToolResult,
    admit,
    approval_problems,
    async_twin_of,
    bound,
    cache_for,
    cached,
    chat_span,
    check_arguments,
    current,
    duplicate_ids,
    record_waiting,
    remember_ledger,
    remembered_ledger,
    validated_approvals,
)
from ._api import API_ADAPTERS, LoopAPI, wrapped_client
from ._chain import Chain
from ._entries import (
    CALL_ITEMS,
    OUTPUT_ITEMS,
    as_sent,
    corrected,
    correction_text,
    list_field,
    plain_entry,
    text_of,
)
from ._flow import adrive, drive, run_flow
from ._results import (
    CallAwaitingApproval,
    CallDispatched,
    CallFinished,
    EventHook,
    RequestRetried,
    ResponseReceived,
    RunEvent,
    RunResult,
    Step,
    StepFinished,
    StepStarted,
    StepTimings,
    StopReason,
    StreamAbandoned,
    trace,
)
from ._retry import Backoff, RetryPolicy, is_retryable
from ._stream_event import StreamEvent
from ._timeline import build_timeline, stage_events

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._options import ChatRunOptions, ResponsesRunOptions

__all__ = ["arun", "run"]

logger = logging.getLogger("toolstitch")

API = Literal["chat", "responses"]
Transport = Literal["http", "websocket"]
_BACKGROUND_FP = "background-response"  # the ledger fingerprint of a step's background response
# Refusals that the model can fix by sending a better call: they count as corrective rounds.
_CORRECTABLE = frozenset({"invalid_arguments", "not_ready", "unknown_tool"})


@dataclass(frozen=True, slots=True)
class _RunOptions:
    """The keyword arguments of :func:`run` and :func:`arun`, written once: ``run`` spells them out
    (its signature is the documented one), ``arun`` takes the same through ``async_twin_of``."""

    model: str
    messages: Sequence[Any] | None
    toolbox: Toolbox | Sequence[Any]  # a list or tuple of tools is made a Toolbox (``_toolbox_of``)
    max_steps: int
    ledger: ClaimLedger | None
    retry: RetryPolicy | None
    max_corrections: int
    eager: bool
    on_event: EventHook | None
    raise_tool_errors: bool
    dialect: str | Dialect
    approvals: Mapping[str, Approval] | None
    error_message: ErrorMessage | None
    create_kwargs: dict[str, Any]
    api: API = "chat"
    input: Any = None
    fail_fast: bool = False
    transport: Transport = "http"
    incremental: bool | None = None
    connection: Any = None

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> _RunOptions:
        """From ``run``'s arguments (``locals()`` at its top, or ``bound(run, ...)``)."""
        fields = {k: v for k, v in arguments.items() if k in cls.__dataclass_fields__}
        if fields.get("model") is None:  # optional in the SDK's Responses parameters, not here
            raise TypeError("run() needs model=: the loop names the model in every request")
        return cls(**{**fields, "create_kwargs": dict(arguments.get("create_kwargs") or {})})


def _toolbox_of(value: Any) -> tuple[Toolbox, bool]:
    """``toolbox=`` as a :class:`Toolbox`, and whether the run made it. A list or tuple of tools
    (functions, ``ts.tool`` objects, ``(definition, fn)`` pairs) is made one as ``ts.Toolbox([...])``
    makes it (the run closes it when it ends: nobody else holds it); anything else is a
    ``TypeError`` that says what to pass, before anything is sent."""
    if isinstance(value, Toolbox):
        return value, False
    if isinstance(value, list | tuple):
        return Toolbox(value), True
    name = getattr(value, "name", None) or getattr(value, "__name__", None)
    one = f"[{name}]" if callable(value) and isinstance(name, str) else "[fn, ...]"
    raise TypeError(
        f"toolbox= takes a ts.Toolbox or a list of tools, got {type(value).__name__}: pass "
        f"toolbox=ts.Toolbox({one}) or toolbox={one}"
    )


class _Loop:
    """State shared by both twins: history, ledger keys, steps, corrections, events."""

    def __init__(self, options: _RunOptions) -> None:
        toolbox, self.owns_box = _toolbox_of(options.toolbox)
        self.box = toolbox
        messages, max_steps = options.messages, options.max_steps
        max_corrections, ledger, retry = options.max_corrections, options.ledger, options.retry
        eager, create_kwargs = options.eager, options.create_kwargs
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if max_corrections < 0:
            raise ValueError("max_corrections must be >= 0")
        if options.api not in API_ADAPTERS:
            raise ValueError(f'api must be "chat" or "responses", not {options.api!r}')
        self.api: LoopAPI = API_ADAPTERS[options.api]
        """The API this run speaks, chosen once (``_api.py``): the loop asks it wherever the two
        APIs differ, and never tests which one it is."""
        for key in self.api.own_keys:
            if key in create_kwargs:
                raise TypeError(f"run() sets {key!r} itself; do not pass it")
        self.chain = Chain(
            options.api, options.transport, options.incremental, options.connection, create_kwargs
        )
        """How each step reaches the model: whole or continued, over HTTP or a connection (``_chain.py``)."""
        messages = self.api.history(messages, options.input)
        if not isinstance(messages, list | tuple):
            try:
                messages = list(messages)  # None is refused just below
            except TypeError:  # None, a number...: say so as validate_request does
                raise RequestError(validate_request(messages=messages)) from None
        self.history: list[Any] = [as_sent(entry) for entry in messages]
        self.model = options.model
        self.max_steps = max_steps
        self.approvals, problems = validated_approvals(options.approvals)
        self.own_ledger = ledger is None
        """The run was given no ledger: its in-memory one is remembered while it awaits approval
        (``defer``), and a run given approvals finds it again by the history (``tools/_approval.py``)."""
        if ledger is None and self.approvals:
            ledger = remembered_ledger(self.history)
        self.ledger = ledger if ledger is not None else MemoryLedger()
        self.cache = cache_for(self.ledger)
        """The results of ``cache=`` tools, for this ledger's scope (``tools/_cache.py``)."""
        self.policy = retry if retry is not None else RetryPolicy()
        self.max_corrections = max_corrections
        self.eager = eager and any(t.eager for t in toolbox)
        self.fail_fast = options.fail_fast
        self.correction: str | None = None
        """What the next request tells the model about a call refused while it streamed."""
        self.on_event = options.on_event
        # ``arun_events`` (loop/_pull.py) gives its on_event a ``pace()`` coroutine: the async twin
        # awaits it after each stream event, so its reader sees each event before the next is read.
        self.pace: Callable[[], Awaitable[None]] | None = getattr(options.on_event, "pace", None)
        self.raise_tool_errors = options.raise_tool_errors
        self.dialect = options.dialect
        self.create_kwargs = create_kwargs
        self.definitions = toolbox.definitions()
        self.steps: list[Step] = []
        self.t0 = now()
        self.corrections: Counter[str] = Counter()
        self.completion: ChatCompletion | None = None
        self.renamed: dict[str, str] = {}  # ids of the current step rewritten in the history
        self.error_message = options.error_message
        if problems:
            raise ApprovalError(problems)

    # -- events --------------------------------------------------------------------------------

    def emit(self, event: RunEvent) -> None:
        trace(event)
        if self.on_event is not None:
            self.on_event(event)

    def hooks(self, step: int) -> tuple[Callable[[ToolCall, bool], None], Callable[[ToolResult], None]]:
        def on_start(call: ToolCall, eager: bool) -> None:
            if not eager:  # eager calls were announced when they really started
                self.emit(CallDispatched(step, call, False))

        def on_result(result: ToolResult) -> None:
            self.emit(CallFinished(step, result))

        return on_start, on_result

    def request_kwargs(self) -> dict[str, Any]:
        """The next request's keyword arguments, checked: :class:`~toolstitch.errors.RequestError`
        (before anything is sent) when ``validate_request`` finds an error in them."""
        kwargs = dict(self.create_kwargs)
        correction, self.correction = self.correction, None
        history = corrected(list(self.history), correction, self.api.answers_with_output)
        return self.api.request(self, kwargs, history)

    # -- eager dispatch ------------------------------------------------------------------------

    def over(self, client: WrappedClient) -> None:
        """The loop runs over ``client``. A client wrapped with ``guard=True`` promises that no call
        of a choice runs unless every call of it is ready when it finishes, so nothing is dispatched
        before its choice finished (no eager dispatch): an unsafe choice then raises
        ``UnsafeToolCallError`` with none of its calls run. It is not retried: the answer was complete."""
        if client.guarded:
            self.eager = False

    def eager_candidate(
        self, call: ToolCall, seen: set[int], taken: set[str]
    ) -> tuple[Admission, Any] | None:
        """An admission for a call whose arguments just became complete, and its parsed arguments,
        if it may start now. A
        call whose id the history already carries (``taken``) waits for the seal: the history will
        carry it under a fresh id (``adopt_message``), the key its claim must be made under."""
        if id(call) in seen or call.status != "open" or call.type == "custom" or not call.scanner.complete:
            return None  # a custom tool's text input is complete only when its stream is sealed
        if call.scanner.error is not None or not call.id:
            return None
        seen.add(id(call))
        if self.api.history_id(self, call) in taken:
            return None
        t = self.box.get(call.name)
        if t is None or not t.eager or not t.read_only or t.confirm:
            return None
        parsed, error = parse_arguments(call.arguments)
        if error is not None:
            return None
        verdict = check_arguments(t.name, t, parsed)
        if not isinstance(verdict, Admission):
            return None
        if cached(self.cache, t, _Parsed(parsed))[1] is not None:
            return None  # answered from the cache after the seal: nothing to start
        return verdict, parsed

    def taken_ids(self, answers: tuple[str, ...] = ("tool_call_id", "call_id")) -> set[str]:
        """Every call id the history carries: an assistant message's calls, and the answers under
        the keys ``answers`` (by default both APIs')."""
        taken: set[str] = set()
        for earlier in self.history:
            data = plain_entry(earlier)
            for key in answers:
                if isinstance(data.get(key), str):
                    taken.add(data[key])
            for c in list_field(data.get("tool_calls")):
                if isinstance(plain_entry(c).get("id"), str):
                    taken.add(plain_entry(c)["id"])
        return taken

    # -- after the stream ----------------------------------------------------------------------

    def adopt_message(self, message: dict[str, Any], calls: Sequence[ToolCall]) -> list[str]:
        """Make the new assistant message's call ids unique in the history; return each call's id
        as the history carries it (also its ledger key).

        Some providers reuse ids across turns (TGI and SGLang send ``"0"``; quirk Q39), and every
        server rejects a history that answers one id twice (H06). A reused id gets a fresh one, in
        the assistant message and in its tool message alike; the call objects keep what the provider
        sent. Keying the ledger by the history's id keeps a resumed run (which reads ids back from
        the saved history) on the same keys.
        """
        d = get_dialect(self.dialect)
        taken = self.taken_ids(("tool_call_id",))
        renamed: dict[str, str] = {}
        for c in message.get("tool_calls") or []:
            call_id = c.get("id")
            if isinstance(call_id, str) and call_id in taken:
                c["id"] = renamed[call_id] = self._fresh_id(d, call_id, taken, "tool call id", "history")
            if isinstance(c.get("id"), str):
                taken.add(c["id"])
        self.renamed = renamed
        ids = [renamed.get(i, i) for i in (d.normalize_id(c.id or "") for c in calls)]
        carried = [c.get("id") for c in list_field(message.get("tool_calls"))]
        if len(carried) == len(ids):
            # A call that came without an id has the one assistant_message gave it: key it by that,
            # so that two id-less calls of different turns are not taken for one.
            ids = [i or (h if isinstance(h, str) else "") for i, h in zip(ids, carried, strict=True)]
        return ids

    def adopt_items(self, items: list[dict[str, Any]], calls: Sequence[ToolCall]) -> list[str]:
        """``adopt_message`` for the Responses API: a ``call_id`` an earlier item of the history
        already carries gets a fresh one in the new ``function_call`` item (and so in its output);
        returns each call's ``call_id`` as the history carries it."""
        d = get_dialect("openai")
        taken = {
            data["call_id"]
            for data in (plain_entry(i) for i in self.history)
            if isinstance(data.get("call_id"), str)
        }
        renamed: dict[str, str] = {}
        for item in items:
            call_id = item.get("call_id")
            if item.get("type") not in CALL_ITEMS or not isinstance(call_id, str):
                continue
            if call_id in taken:
                item["call_id"] = renamed[call_id] = self._fresh_id(d, call_id, taken, "call_id", "input")
            taken.add(item["call_id"])
        self.renamed = renamed
        ids = [valid_unicode(c.id or "") for c in calls]  # as ``response_items`` wrote them
        return [renamed.get(i, i) for i in ids]

    def _fresh_id(self, dialect: Dialect, call_id: str, taken: set[str], named: str, where: str) -> str:
        """A fresh id for ``call_id``, which an earlier turn already carries (``taken``), said in the
        log: ``named`` is what the API calls the id, ``where`` what it calls the history."""
        fresh = dialect.fresh_id(f"{call_id}:{len(self.history)}", taken)
        logger.warning(
            "the provider reused %s %r from an earlier turn; it is %r in the %s", named, call_id, fresh, where
        )
        return fresh

    def append_results(self, results: Sequence[ToolResult], keys: Sequence[str]) -> None:
        """The tool messages of ``results`` join the history, answering the ids it carries
        (``keys``, one per result)."""
        self.api.answer(self, results, keys)

    def count_corrections(self, results: Sequence[ToolResult]) -> bool:
        """Count this step's correctable refusals per tool; True when a tool is out of rounds."""
        names = {r.call.name or "(no name)" for r in results if r.reason in _CORRECTABLE}
        for name in names:
            self.corrections[name] += 1
        return any(self.corrections[n] > self.max_corrections for n in names)

    def _trailing(self) -> tuple[int, list[dict[str, Any]]] | None:
        """The trailing assistant message with tool calls (only tool messages after it): its index
        in the history and its calls as dicts; None when the history does not end with one."""
        for i in range(len(self.history) - 1, -1, -1):
            data = plain_entry(self.history[i])
            role = data.get("role")
            if role == "tool":
                continue
            if role == "assistant" and data.get("tool_calls"):
                return i, [plain_entry(c) for c in list_field(data.get("tool_calls"))]
            return None
        return None

    def _unanswered_items(self) -> list[dict[str, Any]]:
        """The ``function_call`` items of a Responses history that no output answers (a run
        resumed after a crash), in order."""
        items = [plain_entry(i) for i in self.history]
        answered = {i.get("call_id") for i in items if i.get("type") in OUTPUT_ITEMS}
        return [
            i
            for i in items
            if i.get("type") in CALL_ITEMS
            and isinstance(i.get("call_id"), str)
            and i["call_id"]
            and i["call_id"] not in answered
        ]

    def pending(self) -> list[ToolCall] | None:
        """The unanswered calls a resumed history ends with (a run resumed after a crash)."""
        return self.api.pending(self)

    def pending_messages(self) -> list[ToolCall] | None:
        """The unanswered calls of a trailing assistant message (Chat Completions)."""
        trailing = self._trailing()
        if trailing is None:
            return None
        last, raw = trailing
        replies = (plain_entry(m).get("tool_call_id") for m in self.history[last + 1 :])
        answered = {a for a in replies if isinstance(a, str)}
        # A call without an id cannot be answered, so it is not run (validate_request says why).
        todo = [c for c in raw if isinstance(c.get("id"), str) and c["id"] and c["id"] not in answered]
        if not todo:
            return None
        # Each read by the chat reader as a finished message is (``calls_of``): sealed and checked
        # as a streamed call is, a custom tool's call held to its format, a call whose shape
        # disagrees with its type refused. One message per entry, so that each call keeps its
        # entry's id even where two share one (that history is refused by ``plan_resume``).
        calls = [
            found for entry in todo for found in calls_of(_finished([entry]), tools=self.definitions or None)
        ]
        ids = [c["id"] for c in todo]
        return _one_by_one(calls, ids, "H00", "unanswered calls of the last assistant message")

    def pending_items(self) -> list[ToolCall] | None:
        """The unanswered ``function_call`` items of a Responses input, read by the Responses reader
        as the output of a response (``read_response``): sealed and checked as a streamed call is,
        and ``incomplete`` when an item's ``status`` is not ``"completed"`` (what a crash after an
        incomplete response leaves), so that it never runs, approved or not; the gate refuses it and
        the model is told. An item without a status (one a user built) is read as completed. The
        reader gives one call per item, in order, under the item's ``call_id``; anything else (a
        reader bound hit) refuses the input before anything of it runs."""
        items = self._unanswered_items()
        if not items:
            return None
        reader = ResponseAccumulator(self.definitions or None)
        reader.read_response({"status": "completed", "output": items})
        ids = [i["call_id"] for i in items]
        return _one_by_one(list(reader.tool_calls), ids, "R00", "unanswered function_call items of the input")

    def duplicate_ids(self) -> list[str]:
        """The call ids the trailing assistant message carries more than once. Such a history is
        refused before anything of it runs: the ledger, the approvals and the tool messages all go
        by id, so two calls under one id cannot be told apart (and no server accepts it: H06)."""
        return self.api.duplicate_ids(self)

    def duplicate_item_ids(self) -> list[str]:
        """``duplicate_ids`` of a Responses input: its unanswered ``function_call`` items."""
        return duplicate_ids(i["call_id"] for i in self._unanswered_items())

    def duplicate_message_ids(self) -> list[str]:
        """``duplicate_ids`` of a chat history: its trailing assistant message."""
        trailing = self._trailing()
        if trailing is None:
            return []
        return duplicate_ids(c["id"] for c in trailing[1] if isinstance(c.get("id"), str) and c["id"])

    def finish_step(
        self,
        index: int,
        completion: ChatCompletion | None,
        calls: list[ToolCall],
        results: list[ToolResult],
        timings: StepTimings,
        anomalies: list[Anomaly],
        marks: dict[str, float] | None = None,
        correction: str | None = None,
    ) -> Step:
        step = Step(index, completion, calls, results, timings, anomalies, correction, dict(marks or {}))
        self.steps.append(step)
        self.emit(StepFinished(step))
        return step

    def result(self, stop: StopReason) -> RunResult:
        pending = (self.pending() or []) if stop == "awaiting_approval" else []
        timeline = build_timeline(self.steps, self.t0, self.box)
        stage_events(timeline)
        return RunResult(self.history, self.completion, self.steps, stop, pending, timeline)

    # -- approvals -----------------------------------------------------------------------------

    def needs_approval(self, call: ToolCall) -> bool:
        """The call names a ``confirm=True`` tool of the toolbox."""
        t = self.box.get(call.name)
        return t is not None and t.confirm

    def waits(self, call: ToolCall, key: str) -> bool:
        """The call must wait for a person: it would pass the gate, its tool needs approval, and
        neither the toolbox's callback nor an approval given to this run answers it."""
        if self.box.confirm is not None or key in self.approvals or not self.needs_approval(call):
            return False
        return isinstance(admit(call, self.box), Admission)

    def plan_resume(self, calls: list[ToolCall] | None) -> tuple[list[ToolCall], list[ToolCall]]:
        """The unanswered calls of the input history, split into those that run now and those that
        keep waiting. Checks the history and ``approvals`` first (ledger I/O), before anything runs:
        :class:`~toolstitch.errors.ApprovalError` for approvals that do not match (every call
        carrying an approved id is checked, see ``approval_problems``), and for a history that
        carries one call id twice (:class:`~toolstitch.errors.RequestError` when no approvals were
        given)."""
        calls = calls or []
        duplicates = self.duplicate_ids()
        if self.approvals:
            unanswered = [(c.id or "", c) for c in calls]
            problems = approval_problems(
                self.approvals, unanswered, self.needs_approval, self.ledger, duplicates
            )
            if problems:
                raise ApprovalError(problems)
        if duplicates:
            self.api.refuse_duplicates(self, duplicates)
        now_: list[ToolCall] = []
        waiting: list[ToolCall] = []
        for c in calls:
            (waiting if self.waits(c, c.id or "") else now_).append(c)
        return now_, waiting

    def defer(self, step: int) -> None:
        """The unanswered calls of the history wait for approval: record each in the ledger (ledger
        I/O) and announce it. A ledger that cannot record them leaves them unrecorded: their
        approval will then be refused (fail closed), never run unchecked."""
        for call in self.pending() or []:
            try:
                record_waiting(self.ledger, call.id or "", call)
            except Exception as exc:
                logger.warning(
                    "the ledger could not record that call %s awaits approval (%s); approving it will "
                    "be refused",
                    call.id,
                    type(exc).__name__,
                )
            self.emit(CallAwaitingApproval(step, call))
        if self.own_ledger:  # for the run that answers, given no ledger either (same process)
            remember_ledger(self.history, self.ledger)

    # -- steps ---------------------------------------------------------------------------------

    def step_indices(self) -> range:
        """The indices of the steps that send a request (after the resumed step 0, if any)."""
        return range(len(self.steps), len(self.steps) + self.max_steps)

    def begin_step(self, index: int) -> _Turn:
        """Announce step ``index`` and return its state for the twin that runs it. The tools it
        offers are read again: an MCP server may have said its list changed (``tools/_mcp_tools.py``)."""
        if index > 0:
            self.definitions = self.box.definitions()
        self.emit(StepStarted(index))
        return _Turn(self, index)

    def execute_kwargs(
        self, index: int, keys: list[str], started: dict[int, Started] | None = None
    ) -> _ExecuteKwargs:
        """The keyword arguments of ``execute``/``aexecute`` for the calls of step ``index``."""
        on_start, on_result = self.hooks(index)
        return _ExecuteKwargs(
            ledger=self.ledger,
            keys=keys,
            raise_tool_errors=self.raise_tool_errors,
            started=started,
            on_start=on_start,
            on_result=on_result,
            error_message=self.error_message,
            approvals=self.approvals,
            cache=self.cache,
        )

    def resume_kwargs(self, calls: Sequence[ToolCall]) -> _ExecuteKwargs:
        """For the resumed step 0: the saved history's ids are the ledger keys (see ``adopt_message``)."""
        return self.execute_kwargs(0, [c.id or "" for c in calls])

    def resumed(self, calls: list[ToolCall], results: list[ToolResult], t0: float, waiting: bool) -> None:
        """Close the resumed step 0 (begun at ``t0``): its tool messages join the history. With
        ``waiting``, calls still wait for approval (``defer`` records them next); they are listed
        among the step's calls, without a result."""
        self.append_results(results, [c.id or "" for c in calls])
        # The approvals answered the calls of the input history, now answered: no later call (the
        # model's, under a fresh id) is ever approved by them.
        self.approvals = {}
        elapsed = now() - t0
        if waiting:
            calls = calls + (self.pending() or [])
        self.finish_step(0, None, calls, results, StepTimings(execution=elapsed, total=elapsed), [])


class _ExecuteKwargs(TypedDict):
    """What the run loop passes to ``execute``/``aexecute`` besides the toolbox and the calls."""

    ledger: ClaimLedger
    keys: list[str]
    raise_tool_errors: bool
    started: dict[int, Started] | None
    on_start: Callable[[ToolCall, bool], None]
    on_result: Callable[[ToolResult], None]
    error_message: ErrorMessage | None
    approvals: Mapping[str, Approval]
    cache: ResultCache


class _Turn:
    """One step of the loop, between the twins' I/O: its request, attempts, eager calls and timings.

    A twin only sends the request, iterates the stream, starts eager calls, runs the sealed calls
    and sleeps between attempts (sync or async); every decision and all bookkeeping around those
    live here, once. The twin sets ``stream`` when a request was sent and ``completion`` when its
    stream finished.
    """

    completion: ChatCompletion  # set by the twin when the stream finished

    def __init__(self, loop: _Loop, index: int) -> None:
        self.loop = loop
        self.index = index
        self.t_step = now()
        self.timings = StepTimings()
        # The failed attempt had sealed a call: its answer was complete, so it is not asked again.
        self.sealed = False
        self.starts: EagerStarts | None = None  # made at the first eager start of the step
        self.taken: set[str] | None = None  # the history's call ids (``eager_candidate``)
        self.seen: set[int] = set()
        self.request = loop.request_kwargs()
        self.stream: Any = None
        self.t_request = 0.0
        self.observer = StreamObserver(loop.model, 0.0)
        self.t_end = 0.0
        self.calls: list[ToolCall] = []
        self.keys: list[str] = []
        self.running: list[int] = []  # the indexes of ``calls`` that run now (the rest wait for approval)
        self.aio: asyncio.AbstractEventLoop | None = None  # the async twin's loop (warm-ups run there)
        self.background = loop.api.background(loop.model, index, self.request)
        """The ledger key of this step's background response (``background=True``): once its id is
        known it is recorded there, so that another process running the same step resumes it."""
        self.recorded = self.background is None
        self.resume_from: tuple[str, int | None] | None = None
        """A background response of this step that a previous process recorded: the first attempt
        resumes it (``ts.resume``) instead of sending the request again."""
        self.marks: dict[str, float] = {}  # the step's instants (``Step.marks``)
        self.abandoned: tuple[ToolCall, str] | None = None  # fail_fast: the call refused mid-stream

    def retrying_kwargs(self) -> dict[str, Any]:
        """The arguments of ``tenacity.Retrying``/``AsyncRetrying`` (the async twin adds ``sleep``)."""
        loop, step = self.loop, self.index

        def retryable(exc: BaseException) -> bool:
            again = not self.sealed and is_retryable(exc)  # a sealed answer was complete: not again
            if not again:
                self.discard()
            return again

        stop_after = tenacity.stop_after_attempt(loop.policy.attempts)

        def stop(retry_state: tenacity.RetryCallState) -> bool:
            if stop_after(retry_state):
                self.discard()  # no attempt will adopt the calls the failed ones started
                return True
            return False

        def before_sleep(retry_state: tenacity.RetryCallState) -> None:
            outcome = retry_state.outcome
            error = outcome.exception() if outcome is not None else None
            wait = retry_state.next_action.sleep if retry_state.next_action is not None else 0.0
            if error is not None:
                logger.warning(
                    "request of step %d failed (%s: %s); retry %d in %.2fs",
                    step,
                    type(error).__name__,
                    error,
                    retry_state.attempt_number,
                    wait,
                )
                loop.emit(RequestRetried(step, retry_state.attempt_number, error, wait))

        return dict(
            stop=stop,
            wait=Backoff(loop.policy),
            retry=tenacity.retry_if_exception(retryable),
            before_sleep=before_sleep,
            reraise=True,
        )

    def attempt_started(self, aio: asyncio.AbstractEventLoop | None = None) -> None:
        """Called before each request is sent (``aio``: the async twin's running loop). The
        request offers every tool of the toolbox: their warm-ups start now (``tools/_warm.py``)."""
        self.aio = aio
        self.loop.box.warm_up_on(None, aio)
        self.timings.attempts += 1
        self.sealed = False
        self.stream = None
        self.t_request = now()
        self.marks = {"request_sent": self.t_request}
        self.observer = StreamObserver(self.loop.model, self.t_request)

    def reading(self) -> Any:
        """A context for reading the stream: the openai instrumentation's ``chat`` span (when it is
        active) is current in it, so that the stream's span events nest under it."""
        return current(chat_span(self.stream))

    def streamed(self, event: Event) -> None:
        """Each event of the stream, in order: to telemetry (span events, anomaly logs), to
        ``on_event`` as a :class:`StreamEvent` of this step (text, argument deltas with their
        preview, calls ready/invalid/incomplete …), then the eager calls it made startable."""
        loop = self.loop
        if not self.recorded:
            self.record_background()
        if type(event) is ToolCallStarted:  # at the latest: a call to the tool is announced
            loop.box.warm_up_on([event.call.name], self.aio)
        elif type(event) is ChoiceFinished:
            self.marks.setdefault("finish", now())
        self.observer(event)  # telemetry and anomaly logs
        if loop.on_event is not None:
            loop.emit(StreamEvent(self.index, event))
        if loop.fail_fast:
            self.check_refused(event)
        self.dispatch_eager()

    def check_refused(self, event: Event) -> None:
        """``fail_fast``: note a call of choice 0 that turned invalid (or can no longer become valid)
        before its choice finished; the twin then stops reading and ``abandon`` closes the step.
        Any such event counts, so a core that refuses earlier needs no change here."""
        if self.abandoned is not None or "finish" in self.marks:
            return
        if isinstance(event, ToolCallInvalid):
            call, reason = event.call, text_of(event.error)
        elif isinstance(event, ArgumentsMalformed):
            at = "" if event.position is None else f" (at character {event.position})"
            call, reason = event.call, f"the arguments are not valid JSON: {event.reason}{at}"
        else:
            return
        if call.choice == 0:
            self.abandoned = (call, reason)

    def abandon(self) -> StopReason | None:
        """``fail_fast``: the stream was closed because a call was refused while it streamed. The
        step ends without a completion (nothing joins the history), the next request tells the model
        what was wrong, and the tool spends a corrective round: ``"max_corrections"`` when it is out
        of them."""
        loop, timings = self.loop, self.timings
        assert self.abandoned is not None
        call, reason = self.abandoned
        self.discard()
        self.t_end = now()
        self.marks["stream_end"] = self.t_end
        acc = self.stream.accumulator
        if acc.metrics.first_chunk_at is not None:
            self.marks["first_chunk"] = acc.metrics.first_chunk_at
            timings.first_chunk = acc.metrics.first_chunk_at - self.t_request
        timings.streaming = self.t_end - self.t_request
        timings.total = now() - self.t_step
        self.observer.finished(acc.metrics.first_chunk_at, None)
        correction = correction_text(call, reason)
        loop.correction = correction
        loop.emit(StreamAbandoned(self.index, call, reason, correction))
        calls = list(acc.tool_calls)
        loop.finish_step(self.index, None, calls, [], timings, list(acc.anomalies), self.marks, correction)
        name = call.name or "(no name)"
        loop.corrections[name] += 1
        return "max_corrections" if loop.corrections[name] > loop.max_corrections else None

    def dispatch_eager(self) -> None:
        """When a call's arguments became complete (``eager``): start through the door the calls
        that may run before the stream is sealed (``EagerStarts``: claimed on the run's ledger,
        answered by its cache, or launched), or adopt the same call a failed attempt started."""
        loop = self.loop
        if not loop.eager:
            return
        for call in self.stream.accumulator.tool_calls:
            if self.taken is None:
                self.taken = loop.taken_ids()
            candidate = loop.eager_candidate(call, self.seen, self.taken)
            if candidate is None:
                continue
            admission, parsed = candidate
            if self.starts is None:
                where = self.aio if self.aio is not None else loop.box.runtime().loop()
                self.starts = EagerStarts(loop.box, loop.ledger, loop.cache, where)
            if self.starts.start(call, admission, loop.api.history_id(loop, call), parsed):
                loop.emit(CallDispatched(self.index, call, True))

    def discard(self) -> None:
        """End the eager starts no sealed call adopted (see ``EagerStarts``)."""
        if self.starts is not None:
            self.starts.discard()

    def record_background(self) -> None:
        """Once the background response's id is known: record it in the ledger, once per step,
        with the sequence number to resume after (the event that announced the response: a
        process that resumes after it reads every call whole; a later number would leave the
        calls open there without their first events)."""
        stream = self.stream
        response_id = getattr(stream, "response_id", None)
        if not response_id or self.background is None:
            return
        self.recorded = True
        record = {"response_id": response_id, "starting_after": stream.resume_point}
        stored = StoredResult("background_response", response_id, None, record)
        try:
            self.loop.ledger.record_finished(self.background, _BACKGROUND_FP, stored)
        except Exception as exc:  # the run goes on; only a later process could not resume it
            logger.warning("step %d: could not record the background response (%s)", self.index, exc)

    def recorded_background(self) -> tuple[str, int | None] | None:
        """The background response a previous process recorded for this step, if any."""
        if self.background is None:
            return None
        try:
            entry = self.loop.ledger.get(self.background, _BACKGROUND_FP)
        except Exception:
            return None
        value = entry.value if entry is not None and entry.state == "finished" else None
        if not isinstance(value, dict) or type(value.get("response_id")) is not str:
            return None
        after = value.get("starting_after")
        return value["response_id"], after if type(after) is int and after >= 0 else None

    def send(self, wrapped: Any, model: str) -> Any:
        """What the twin's attempt reads: the request sent, or (first attempt of a step a previous
        process left mid-stream) the recorded background response resumed by id, under this
        request's contract; a resume that fails is a failed attempt, and the next one sends."""
        found, self.resume_from = self.resume_from, None
        request = self.request
        if found is not None:
            self.recorded = True
            return (aresume if self.aio is not None else resume)(
                wrapped,
                found[0],
                tools=request.get("tools") or [],
                tool_choice=request.get("tool_choice"),
                parallel_tool_calls=request.get("parallel_tool_calls"),
                starting_after=found[1],
            )
        return self.loop.chain.send(self.loop, wrapped, model, request, self.aio is not None)

    def attempt_failed(self, error: BaseException) -> None:
        """The request or its stream failed (the exception is then re-raised to tenacity)."""
        if self.stream is not None:
            self.observer.finished(self.stream.accumulator.metrics.first_chunk_at, error)
        if self.starts is not None:  # kept for the retry: its identical calls adopt them
            self.starts.attempt_failed()
        self.seen.clear()
        if self.stream is not None:
            self.sealed = any(c.status in ("ready", "invalid") for c in self.stream.accumulator.calls())

    def received(self) -> StopReason | None:
        """After the successful attempt: the assistant message joins the history. ``"done"`` (the
        step is then over) when it has no calls; None when the twin must now run ``calls``."""
        loop, timings = self.loop, self.timings
        acc: Accumulator = self.stream.accumulator
        self.observer.finished(acc.metrics.first_chunk_at, None)
        self.t_end = acc.metrics.ended_at or now()
        self.marks["stream_end"] = self.t_end
        if acc.metrics.first_chunk_at is not None:
            self.marks["first_chunk"] = acc.metrics.first_chunk_at
            timings.first_chunk = acc.metrics.first_chunk_at - self.t_request
        timings.streaming = self.t_end - self.t_request
        completion = self.completion
        loop.completion = completion
        self.calls = acc.tool_calls
        message, self.keys = loop.api.adopt(loop, completion, self.calls)
        loop.chain.received(loop, completion, self.stream)
        loop.emit(ResponseReceived(self.index, completion, message))
        if self.calls:
            return None
        self.discard()
        timings.total = now() - self.t_step
        loop.finish_step(self.index, completion, [], [], timings, list(acc.anomalies), self.marks)
        return "done"

    def to_run(self) -> list[ToolCall]:
        """The calls that run now: all but those that wait for a person's approval."""
        loop = self.loop
        self.running = [i for i, c in enumerate(self.calls) if not loop.waits(c, self.keys[i])]
        return [self.calls[i] for i in self.running]

    def execute_kwargs(self) -> _ExecuteKwargs:
        """For running ``to_run()``: keyed as the history carries them, adopting the eager calls."""
        started = None
        if self.starts is not None:
            self.starts.discard(earlier_only=True)  # no sealed call adopted them: none will now
            started = self.starts.by_call  # ``execute`` adopts these or discards them
        return self.loop.execute_kwargs(self.index, [self.keys[i] for i in self.running], started)

    @property
    def waiting(self) -> bool:
        """Some calls of this step wait for approval (``executed`` then returns ``awaiting_approval``;
        the twin records them with ``loop.defer``)."""
        return len(self.running) < len(self.calls)

    def executed(self, results: list[ToolResult]) -> StopReason | None:
        """Close the step with the results of the calls that ran; ``"awaiting_approval"`` when calls
        wait for a person, ``"max_corrections"`` when a tool is out of corrective rounds."""
        loop, timings = self.loop, self.timings
        loop.append_results(results, [self.keys[i] for i in self.running])
        self.marks["results_ready"] = now()
        timings.execution = now() - self.t_end
        timings.add_calls(self.calls, results, self.t_request)
        timings.total = now() - self.t_step
        anomalies = list(self.stream.accumulator.anomalies)
        loop.finish_step(self.index, self.completion, self.calls, results, timings, anomalies, self.marks)
        out_of_rounds = loop.count_corrections(results)
        if self.waiting:
            return "awaiting_approval"
        return "max_corrections" if out_of_rounds else None


@dataclass(frozen=True, slots=True)
class _Parsed:
    """The parsed arguments of a call still streaming, read as ``canonical_key`` reads a call."""

    parsed: Any


def _one_by_one(calls: list[ToolCall], ids: list[str], rule: str, what: str) -> list[ToolCall]:
    """The calls read from a resumed history's unanswered entries, when the reader gave one per
    entry, in order, under its id; else :class:`~toolstitch.errors.RequestError` (``rule``), before
    anything of them runs."""
    if [c.id for c in calls] != ids:
        said = f"the {len(ids)} {what} could not be read one by one; nothing of them was run"
        raise RequestError([HistoryProblem(None, rule, "error", said)])
    return calls


def _finished(tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    """A finished completion of one assistant message holding ``tool_calls`` (for ``calls_of``)."""
    return {"choices": [{"index": 0, "message": {"tool_calls": tool_calls}, "finish_reason": "tool_calls"}]}


# ----------------------------------------------------------------------------- run and arun


@overload
def run(client: OpenAI, **options: Unpack[ChatRunOptions]) -> RunResult: ...
@overload
def run(client: OpenAI, **options: Unpack[ResponsesRunOptions]) -> RunResult: ...


def run(
    client: Any,
    *,
    model: str | None = None,
    messages: Iterable[Any] | None = None,
    toolbox: Toolbox | Sequence[Any],
    max_steps: int = 8,
    ledger: ClaimLedger | None = None,
    retry: RetryPolicy | None = None,
    max_corrections: int = 2,
    eager: bool = True,
    on_event: EventHook | None = None,
    raise_tool_errors: bool = False,
    dialect: str | Dialect = "openai",
    approvals: Mapping[str, Approval] | None = None,
    error_message: ErrorMessage | None = None,
    api: API = "chat",
    input: Any = None,
    fail_fast: bool = False,
    transport: Transport = "http",
    incremental: bool | None = None,
    connection: Any = None,
    **create_kwargs: Any,
) -> RunResult:
    """Run the tool loop with a sync client (``openai.OpenAI`` or a ``ts.wrap``-ped one).

    ``ledger`` defaults to a fresh in-memory :class:`~toolstitch.MemoryLedger`; pass a
    :class:`~toolstitch.SQLiteLedger` for runs that must survive a restart. ``retry`` defaults to
    ``RetryPolicy()``. ``on_event`` receives :data:`RunEvent` objects in order (latency breakdowns
    included): step boundaries, every event of each step's stream as a :class:`StreamEvent` (text,
    argument deltas whose ``call.preview`` is display-only, calls ready/invalid/incomplete), each
    tool's start and result. ``ts.run_events`` hands out the same events to a reader that pulls.
    ``dialect`` shapes the history for the target server (see ``ts.assistant_message``). Other
    keyword arguments go to ``chat.completions.create``.

    ``eager`` (default True) starts calls to ``read_only`` tools while the model is still writing
    the rest of its answer (see the module docs); ``eager=False`` waits for the seal.

    ``fail_fast=True``: when a call is refused while the model is still writing it (it can no
    longer become valid), the stream is closed at once and the model is asked again, told which
    call was refused and why; the abandoned answer never enters the history, and each such retry
    is a step (``max_steps``) and a corrective round of that tool (``max_corrections``).

    ``max_steps`` counts requests to the model; resuming the unanswered calls of ``messages`` (see the
    module docs) is an extra step 0 with no request.

    ``approvals`` (``{call_id: True | False | ts.Deny("why")}``) answers calls that a previous run
    left awaiting approval (``stop_reason == "awaiting_approval"``); pass the same ``ledger``. It is
    checked before anything runs (:class:`~toolstitch.errors.ApprovalError`). ``error_message(call,
    exc) -> str`` overrides the toolbox's hook: what the model reads when a tool raises.

    ``api="responses"`` runs the same loop over the Responses API (``client.responses.create``),
    statelessly, with the history as ``input=[...]`` (a string is one user message) instead of
    ``messages``: see the module docs. ``result.input`` is then the history to store and
    ``result.output_text`` the answer.

    ``transport="websocket"`` (with ``api="responses"``) sends every step over one connection
    (OpenAI's WebSocket mode, ``client.responses.connect()``; ``connection=`` takes one the caller
    opened), continuing each response with ``previous_response_id`` and only the new items.
    ``incremental=True`` does the same over HTTP (the server must store the responses). The run
    keeps the whole history either way, and sends it whole when the server has forgotten (see
    ``loop/_chain.py``).
    """
    options = _RunOptions.of(locals())
    wrapped = wrapped_client(client, want_async=False, api=options.api, transport=options.transport)
    loop = _Loop(options)
    loop.over(wrapped)
    return drive(run_flow(loop, wrapped, options.model), loop)


@overload
async def arun(client: AsyncOpenAI, **options: Unpack[ChatRunOptions]) -> RunResult: ...
@overload
async def arun(client: AsyncOpenAI, **options: Unpack[ResponsesRunOptions]) -> RunResult: ...


async def arun(client: Any, **options: Any) -> RunResult:
    """The async twin of :func:`run` (``openai.AsyncOpenAI``), with the same keyword arguments.
    Cancelling it closes the stream and cancels running async tools."""
    opts = _RunOptions.of(bound(run, client, **options))
    wrapped = wrapped_client(client, want_async=True, api=opts.api, transport=opts.transport)
    loop = _Loop(opts)
    loop.over(wrapped)
    return await adrive(run_flow(loop, wrapped, opts.model), loop)


# help(arun) shows run's keywords (the overloads above are what a type checker reads).
async_twin_of(run)(arun)
