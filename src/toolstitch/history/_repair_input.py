"""Explicit repair of a Responses API ``input`` list: ``ts.repair_history(input, api="responses")``.

The Responses twin of :mod:`._repair`, with the same promises and the same report
(:class:`~._repair_report.RepairReport`, one :class:`~._repair_report.RepairChange` per change,
``remaining`` as :func:`~._validate_input.validate_input` finds the result). What it fixes, each
without inventing a fact (rules of ``docs/history-rules.md``):

* ``R01`` a ``function_call_output`` whose call no ``function_call`` before it made: moved right
  after the calls of its turn when its call comes later in ``input``; dropped when no call (nor the
  previous response, when given) made it. With only ``previous_response_id`` such an output cannot
  be judged, and it stays.
* ``R03`` a second output for one call: dropped (the first one answers it).
* ``R04`` a ``function_call`` repeated with the same ``call_id``, ``name`` and ``arguments`` (an
  output appended twice): kept once, and the repeated ``reasoning`` item that came with it (the
  same item again, right before it) is dropped with it. A repeated ``call_id`` with other
  arguments is two different facts: it stays, reported.
* ``R05`` an output without a ``call_id`` answers nothing: dropped.
* ``R08`` a call of ``previous`` sent back with its item id but without the reasoning item it came
  with: that reasoning item, copied from ``previous``, is put back right before it.
* ``R02`` a call no output answers (in ``input``, or a call of ``previous``): answered with
  :data:`~._repair_report.NOT_EXECUTED`, an error text that tells the model the call did not run,
  placed after the calls and outputs of its turn (at the start of ``input`` for a call of the
  previous response).

A custom tool's ``custom_tool_call`` and ``custom_tool_call_output`` are repaired as a function's
call and output are (a missing output is a ``custom_tool_call_output``); an output of one type for
a call of the other answers nothing the server accepts, and is dropped (``R01``).

Arguments, names, outputs and every other item are never changed, and ``input`` is never mutated.
Linear in the size of ``input``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._common import Repairing, _plain
from ._repair_report import NOT_EXECUTED, Action, RepairChange, RepairReport
from ._responses import _CALLS, _OUTPUTS, _is_call
from ._validate_input import _item_id, _kind, _previous_items, _required_reasoning, validate_input

__all__ = ["repair_input"]

_RUN = frozenset({*_CALLS, *_OUTPUTS})


@dataclass
class _Entry(Repairing):
    """An input item being repaired (``Repairing``), and what repair put after or before it."""

    after: list[_Entry] = field(default_factory=list)  # outputs moved or inserted after this one
    before: list[_Entry] = field(default_factory=list)  # the reasoning put back before this call


def _call_id(item: Any) -> str | None:
    call_id = item.get("call_id") if isinstance(item, Mapping) else None
    return call_id if isinstance(call_id, str) and call_id else None


class _RepairInput:
    def __init__(self, items: list[Any], previous: Any, previous_response_id: Any) -> None:
        self.entries = [_Entry(item, i) for i, item in enumerate(items)]
        self.previous = previous
        self.previous_response_id = previous_response_id
        self.log: list[tuple[Action, str, _Entry, str]] = []
        self.head: list[_Entry] = []  # outputs inserted before the first item
        self.pending: list[tuple[_Entry, _Entry]] = []  # (call, output to put after its turn)

    def note(self, action: Action, rule: str, entry: _Entry, detail: str) -> None:
        self.log.append((action, rule, entry, detail))

    def drop(self, entry: _Entry, rule: str, detail: str) -> None:
        entry.dropped = True
        self.note("dropped", rule, entry, detail)

    def run(self) -> tuple[list[Any], RepairReport]:
        calls = self.repeated_calls()
        self.outputs(calls)
        self.place()
        self.reasoning()
        out = self.rebuild()
        changes = tuple(
            RepairChange(action, rule, entry.src, entry.out, detail)
            for action, rule, entry, detail in self.log
        )
        remaining = validate_input(
            out, previous=self.previous, previous_response_id=self.previous_response_id
        )
        return out, RepairReport(changes, tuple(remaining))

    def repeated_calls(self) -> dict[str, _Entry]:
        """The first ``function_call`` of each ``call_id``; exact repeats (and the repeated
        reasoning item of their turn, the last one before them) dropped. One pass."""
        first: dict[str, _Entry] = {}
        reasoning: dict[str, Any] = {}  # id -> the first reasoning item with that id
        last: _Entry | None = None  # the last reasoning item of the current run of calls
        for entry in self.entries:
            item = entry.value
            kind = _kind(item)
            if kind == "reasoning":
                last = entry
                if isinstance(item.get("id"), str):
                    reasoning.setdefault(item["id"], item)
                continue
            if kind not in _CALLS:
                last = None  # the turn's run of reasoning and calls ended
                continue
            call_id = _call_id(item)
            kept = None if call_id is None else first.get(call_id)
            if call_id is None or kept is None:
                if call_id is not None:
                    first[call_id] = entry
                continue
            text = _CALLS[kind]
            if (kind, item.get("name"), item.get(text)) != (
                _kind(kept.value),
                kept.value.get("name"),
                kept.value.get(text),
            ):
                continue  # two different calls under one id: not ours to choose (R04 remains)
            what = "custom tool call" if kind == "custom_tool_call" else "function call"
            self.drop(entry, "R04", f"a repeat of {what} {call_id!r} (item {kept.src})")
            rid = None if last is None else last.value.get("id")
            if last is not None and not last.dropped and isinstance(rid, str):
                original = reasoning.get(rid)
                if original is not last.value and original == last.value:
                    self.drop(last, "R04", f"a repeat of reasoning item {rid!r}, beside a repeated call")
        return first

    def outputs(self, calls: dict[str, _Entry]) -> None:
        """Each output kept where it answers a call made before it, moved after a call made later,
        or dropped; then every call left unanswered answered with ``NOT_EXECUTED``."""
        previous = {
            i["call_id"]: i["type"]
            for i in _previous_items(self.previous)
            if _is_call(i.get("type")) and isinstance(i.get("call_id"), str)
        }
        cannot_judge = self.previous is None and self.previous_response_id is not None
        answered: set[str] = set()
        seen_calls: dict[str, str] = {}  # call id -> its item type
        for entry in self.entries:
            item = entry.value
            kind = _kind(item)
            if entry.dropped:
                continue
            if kind in _CALLS and (call_id := _call_id(item)) is not None:
                seen_calls[call_id] = kind
                continue
            if kind not in _OUTPUTS:
                continue
            call_id = _call_id(item)
            made = None if call_id is None else seen_calls.get(call_id) or previous.get(call_id)
            if made is None and call_id in calls:
                made = _kind(calls[call_id].value)
            if call_id is None:
                self.drop(entry, "R05", f"a {kind} without call_id answers no call")
            elif made is not None and made != _OUTPUTS[kind]:
                # The server pairs a call with an output of its own type: this one answers nothing.
                self.drop(entry, "R01", f"a {kind} for {call_id!r}, which is a {made}")
            elif call_id in answered:
                self.drop(entry, "R03", f"a second output for call {call_id!r}")
            elif call_id in seen_calls or call_id in previous:
                answered.add(call_id)
            elif call_id in calls:
                answered.add(call_id)
                entry.dropped = True  # from here; it reappears after its call's turn
                self.pending.append((calls[call_id], entry))
                self.note(
                    "moved",
                    "R01",
                    entry,
                    f"output for {call_id!r} moved after its call (item {calls[call_id].src})",
                )
            elif not cannot_judge:
                self.drop(entry, "R01", f"an output for {call_id!r}, which no call before it made")
        for call_id, made in previous.items():
            if call_id not in answered and call_id not in calls:  # a call sent back: answered below
                answered.add(call_id)
                self.head.append(self.not_executed(call_id, made, "of the previous response"))
        for call_id, entry in calls.items():
            if call_id not in answered:
                answered.add(call_id)
                made = _kind(entry.value)
                self.pending.append((entry, self.not_executed(call_id, made, f"(item {entry.src})")))

    def reasoning(self) -> None:
        """A call of ``previous`` sent back without the reasoning item it came with gets that item
        back, copied from ``previous``, right before it (R08): the response's own item, not an
        invented one."""
        earlier = _previous_items(self.previous)
        required = _required_reasoning(earlier)
        if not required:
            return
        by_id = {_item_id(i): i for i in earlier if i.get("type") == "reasoning"}
        seen: set[Any] = set()
        for entry in self.entries:
            item = entry.value
            kind = _kind(item)
            if entry.dropped:
                continue
            if kind == "reasoning":
                seen.add(_item_id(item))
            if kind not in _CALLS:
                continue
            item_id = _item_id(item)
            needed = None if item_id is None else required.get(item_id)
            if needed is None or needed in seen or needed not in by_id:
                continue
            seen.add(needed)
            restored = _Entry(_plain(by_id[needed]), None)
            entry.before.append(restored)
            self.note(
                "inserted",
                "R08",
                restored,
                f"reasoning item {needed!r} of the previous response, before its call",
            )

    def not_executed(self, call_id: str, made: str | None, where: str) -> _Entry:
        kind = "custom_tool_call_output" if made == "custom_tool_call" else "function_call_output"
        item = {"type": kind, "call_id": call_id, "output": NOT_EXECUTED}
        entry = _Entry(item, None)
        self.note("inserted", "R02", entry, f"'not executed' output for call {call_id!r} {where}")
        return entry

    def place(self) -> None:
        """Put each moved or inserted output after the last item kept of the run of calls and
        outputs its call is part of: where the outputs of its turn end (never past the next turn's
        reasoning or message). One pass over ``input`` finds every run's end."""
        end: dict[int, _Entry] = {}  # id(entry) -> the last kept entry of its run
        run: list[_Entry] = []
        for entry in [*self.entries, None]:
            if entry is not None and _kind(entry.value) in _RUN:
                run.append(entry)
                continue
            kept = [e for e in run if not e.dropped]
            for member in run:
                end[id(member)] = kept[-1] if kept else member
            run = []
        for call, extra in self.pending:
            end.get(id(call), call).after.append(extra)

    def rebuild(self) -> list[Any]:
        out: list[Any] = []

        def put(entry: _Entry) -> None:
            entry.out = len(out)
            out.append(entry.value)

        for entry in self.head:
            put(entry)
        for entry in self.entries:
            for extra in entry.before:
                put(extra)
            if not entry.dropped:
                put(entry)
            for extra in entry.after:
                put(extra)
        return out


def repair_input(
    input: Any, *, previous: Any = None, previous_response_id: Any = None
) -> tuple[Any, RepairReport]:
    """``ts.repair_history(input, api="responses", ...)``: see the module docstring. ``input``
    that is not a list (a string, or something no repair can read) is returned as it is, with
    what :func:`validate_input` finds in it."""
    if not isinstance(input, list | tuple):
        remaining = validate_input(input, previous=previous, previous_response_id=previous_response_id)
        return input, RepairReport((), tuple(remaining))
    items: list[Any] = []
    for entry in input:
        try:
            items.append(_plain(entry))
        except Exception:  # validate_input reports what cannot be read
            items.append(entry)
    return _RepairInput(items, previous, previous_response_id).run()
