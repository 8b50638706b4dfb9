"""Explicit repair: a fixed copy of a history and a report of every change made.

``repair_history`` fixes what it can without inventing facts and re-validates the result with
:func:`~toolstitch._history._validate.validate_history`, so ``RepairReport.remaining`` is exactly
what the validator still finds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from ._common import _MISSING, Message, Repairing, _plain, _tool_calls, _tool_dict
from ._dialects import Dialect, get_dialect
from ._repair_input import repair_input
from ._repair_report import NOT_EXECUTED, Action, RepairChange, RepairReport
from ._validate import validate_history

# --------------------------------------------------------------------------------- repair


@dataclass
class _Slot:
    """One declared call and the tool message assigned to answer it."""

    owner: Repairing
    call: dict[str, Any]
    result: Repairing | None = None


class _Repair:
    def __init__(self, messages: Sequence[Any], d: Dialect) -> None:
        self.d = d
        # _plain copies (a deep copy as far as anything here could change), so no deepcopy: that
        # would recurse, and fail on a provider field nested deeper than the recursion limit.
        self.items = [Repairing(_plain(m), i) for i, m in enumerate(messages)]
        self.log: list[tuple[Action, str, Repairing, str]] = []
        self.slots: dict[int, list[_Slot]] = {}  # id(owner item) -> its slots

    def note(self, action: Action, rule: str, item: Repairing, detail: str) -> None:
        self.log.append((action, rule, item, detail))

    def run(self) -> tuple[list[Message], RepairReport]:
        for item in self.items:
            if isinstance(item.value, dict):
                self.fix_message(item)
        self.echo_reasoning()
        self.assign()
        self.rewrite_ids()
        out = self.rebuild()
        changes = tuple(
            RepairChange(action, rule, item.src, item.out, detail) for action, rule, item, detail in self.log
        )
        return out, RepairReport(changes, tuple(validate_history(out, self.d)))

    # -- one message ------------------------------------------------------------------------

    def fix_message(self, item: Repairing) -> None:
        m: dict[str, Any] = item.value
        role = m.get("role")
        d = self.d
        if d.strict_keys is not None and isinstance(role, str):
            self.drop_keys(item, m, d.strict_keys.get(role), "")
        if role != "assistant":
            return
        calls = m.get("tool_calls")
        if isinstance(calls, list) and not calls:
            del m["tool_calls"]
            self.note("fixed", "H09", item, "removed an empty tool_calls list")
        for k, call in enumerate(_tool_calls(m)):
            if not isinstance(call, dict):
                continue
            if d.strict_keys is not None:
                self.drop_keys(item, call, d.strict_keys.get("tool_call"), f"tool_calls[{k}].")
                if isinstance(call.get("function"), dict):
                    where = f"tool_calls[{k}].function."
                    self.drop_keys(item, call["function"], d.strict_keys.get("function"), where)
            if "type" not in call and isinstance(call.get("function"), dict):
                call["type"] = "function"
                self.note("fixed", "H11", item, f'added "type": "function" to tool call {k}')
        content = m.get("content", _MISSING)
        if _tool_calls(m):
            if content is _MISSING:
                m["content"] = d.empty_content
                self.note("fixed", "H23", item, f"added content {d.empty_content!r}")
            elif content is None and d.empty_content == "":
                m["content"] = ""
                self.note("fixed", "H82" if d.name != "ollama" else "H84", item, "content null -> ''")
            elif content == "" and d.name == "anthropic-compat":
                m["content"] = None
                self.note("fixed", "H32", item, "content '' -> null next to tool_calls")
        elif m.get("function_call") is None:
            empty = content is _MISSING or content is None
            empty_text = content == "" and (
                d.name == "mistral" or (d.name == "anthropic-compat" and item is not self.items[-1])
            )
            if (empty or empty_text) and not m.get("refusal"):
                item.dropped = True
                self.note(
                    "dropped",
                    "H39" if d.name == "mistral" else "H08",
                    item,
                    "an assistant message with neither content nor tool calls",
                )
            elif empty:
                m["content"] = ""
                self.note("fixed", "H08", item, "content null -> '' (the message has a refusal)")

    def drop_keys(
        self, item: Repairing, data: dict[str, Any], allowed: frozenset[str] | None, where: str
    ) -> None:
        if allowed is None:
            return
        extra = [key for key in data if key not in allowed]
        for key in extra:
            del data[key]
        if extra:
            names = ", ".join(f"{where}{key}" for key in extra)
            self.note("fixed", "H70", item, f"removed fields {self.d.label} rejects: {names}")

    def echo_reasoning(self) -> None:
        """DeepSeek thinking mode: every tool-call turn must carry ``reasoning_content`` (H62).
        A turn that lost it gets ``""``, which DeepSeek accepts for a turn without reasoning."""
        live = [i for i in self.items if isinstance(i.value, dict) and not i.dropped]
        if self.d.name != "deepseek" or not any(i.value.get("reasoning_content") is not None for i in live):
            return
        for item in live:
            if _tool_calls(item.value) and item.value.get("reasoning_content") is None:
                item.value["reasoning_content"] = ""
                self.note("fixed", "H62", item, "added reasoning_content ''")

    # -- pairing ----------------------------------------------------------------------------

    def assign(self) -> None:
        """Give each tool message the declared call it answers, or mark it dropped.

        Linear in the number of calls and messages, even when every call repeats one id: each id
        keeps its unanswered slots on a stack (the latest declared on top) and, per assistant
        message, in a queue (declared order); an answered slot is skipped once, lazily.
        """
        latest: dict[str, list[_Slot]] = {}  # id -> its slots, latest declared last
        own: dict[tuple[str, int], deque[_Slot]] = {}  # (id, owner item) -> slots, declared order
        current: Repairing | None = None  # the assistant whose contiguous tool run we are in
        for item in self.items:
            m = item.value
            if item.dropped:
                continue
            if not (isinstance(m, dict) and m.get("role") == "tool"):
                calls = [c for c in _tool_calls(m) if isinstance(c, dict)] if isinstance(m, dict) else []
                current = item if calls else None
                slots = self.slots[id(item)] = [_Slot(item, c) for c in calls]
                for slot in slots:
                    call_id = slot.call.get("id")
                    if isinstance(call_id, str) and call_id:
                        latest.setdefault(call_id, []).append(slot)
                        own.setdefault((call_id, id(item)), deque()).append(slot)
                continue
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                self.drop(item, "H07", "a tool message without tool_call_id")
                continue
            here = own.get((call_id, id(current))) if current is not None else None
            while here and here[0].result is not None:
                here.popleft()
            waiting = latest.get(call_id)
            if here:
                here.popleft().result = item
            elif waiting and _pop_answered(waiting):
                slot = waiting[-1]
                slot.result = item
                self.note("moved", "H04", item, f"result for {call_id!r} moved after #{slot.owner.src}")
            elif waiting is not None:
                self.drop(item, "H06", f"a second result for {call_id!r}")
            else:
                self.drop(item, "H01", f"a result for {call_id!r}, which no earlier call declared")

    def drop(self, item: Repairing, rule: str, detail: str) -> None:
        item.dropped = True
        self.note("dropped", rule, item, detail)

    def rewrite_ids(self) -> None:
        """Ids the dialect rejects, missing ids and repeated ids get new ones, on both sides."""
        used: set[str] = set()
        d = self.d
        for item in self.items:
            for k, slot in enumerate(self.slots.get(id(item), [])):
                old = slot.call.get("id")
                new = d.normalize_id(old) if isinstance(old, str) and old else None
                rule = {"mistral": "H35", "anthropic": "H29"}.get(d.id_style, "H12")
                if new is None:
                    rule = "H11"
                elif new in used:
                    rule = "H06"
                if new is None or new in used:
                    new = d.fresh_id(f"{item.src}:{k}:{old}", used)
                used.add(new)
                if new == old:
                    continue
                slot.call["id"] = new
                if slot.result is not None:
                    slot.result.value["tool_call_id"] = new
                self.note("rewrote_id", rule, item, f"tool call id {old!r} -> {new!r}")

    def rebuild(self) -> list[Message]:
        out: list[Any] = []
        for item in self.items:
            m = item.value
            if item.dropped or (isinstance(m, dict) and m.get("role") == "tool"):
                continue
            item.out = len(out)
            out.append(m)
            slots = self.slots.get(id(item), [])
            results = [s.result for s in slots if s.result is not None]
            if [r.src for r in results] != sorted(r.src for r in results if r.src is not None):
                self.note("reordered", "H05", item, "tool results put in declared order")
            for slot in slots:
                if slot.result is None:
                    slot.result = Repairing(self.not_executed(slot.call), None)
                    call_id = slot.call.get("id")
                    self.note("inserted", "H03", slot.result, f"'not executed' result for {call_id!r}")
                slot.result.out = len(out)
                out.append(slot.result.value)
        return out

    def not_executed(self, call: Mapping[str, Any]) -> Message:
        body = call.get("function") or call.get("custom") or {}
        name = body.get("name") if isinstance(body, Mapping) else None
        return _tool_dict(str(call.get("id")), NOT_EXECUTED, name, self.d)


def _pop_answered(slots: list[_Slot]) -> bool:
    """Drop answered slots from the top of ``slots``; True when an unanswered one is left."""
    while slots and slots[-1].result is not None:
        slots.pop()
    return bool(slots)


@overload
def repair_history(
    messages: Sequence[Any], dialect: str | Dialect = ..., *, api: Literal["chat"] = ...
) -> tuple[list[Message], RepairReport]: ...


@overload
def repair_history(
    messages: Any,
    dialect: str | Dialect = ...,
    *,
    api: Literal["responses"],
    previous: Any = ...,
    previous_response_id: Any = ...,
) -> tuple[Any, RepairReport]: ...


def repair_history(
    messages: Any,
    dialect: str | Dialect = "openai",
    *,
    api: Literal["chat", "responses"] = "chat",
    previous: Any = None,
    previous_response_id: Any = None,
) -> tuple[Any, RepairReport]:
    """A copy of ``messages`` with what can be fixed without inventing facts fixed, and a report.

    ``api="responses"`` repairs a Responses API ``input`` list instead (``previous``,
    ``previous_response_id``: what the request continues, as for ``ts.validate_input``): orphan
    outputs dropped (R01, R05), outputs placed before their call moved after it (R01), second
    outputs dropped (R03), a call repeated exactly kept once (R04), calls left unanswered answered
    with :data:`NOT_EXECUTED` (R02); the same report, ``remaining`` as ``ts.validate_input`` finds
    the result. The rest of this docstring is about chat histories.

    * tool results are moved directly after the assistant message that declared them, in declared
      order (H04, H05);
    * tool messages that answer nothing (orphans, second results, no ``tool_call_id``) are dropped
      (H01, H02, H06, H07);
    * a declared call with no result gets an explicit error result, :data:`NOT_EXECUTED` (H03);
    * ids the dialect rejects, and repeated or missing ids, are rewritten on the call and its result
      together (H06, H11, H12, H29, H35);
    * shape fixes: empty ``tool_calls`` removed (H09), ``type`` added (H11), content made what the
      dialect needs (H08, H23, H32, H82, H84), fields Mistral rejects removed (H70), empty
      ``reasoning_content`` for DeepSeek (H62); assistant messages with nothing in them dropped.

    Arguments, function names and results are never changed, and ``messages`` is never mutated.
    What cannot be fixed stays, listed in ``report.remaining``.
    """
    if api == "responses":
        if dialect != "openai":
            raise ValueError("dialect= is for chat histories; the Responses API has one set of rules")
        return repair_input(messages, previous=previous, previous_response_id=previous_response_id)
    if api != "chat":
        raise ValueError(f'api must be "chat" or "responses", not {api!r}')
    if previous is not None or previous_response_id is not None:
        raise TypeError('previous= and previous_response_id= are for api="responses"')
    d = get_dialect(dialect)
    return _Repair(messages, d).run()
