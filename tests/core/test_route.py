"""``core._route``: which call a fragment belongs to, and what it writes there."""

from __future__ import annotations

from typing import Any

from toolstitch.core._anomaly import Anomaly
from toolstitch.core._limits import Limits
from toolstitch.core._owner import CallOwner, Identity
from toolstitch.core._route import (
    FURTHER,
    NEW_ID,
    SKIP,
    CallTable,
    argument_text,
    ensure_ids,
    open_call,
    resolve_call,
)

LIMITS = Limits()


class Fragment:
    """A cleaned ``delta.tool_calls`` entry, as the reader hands its values to the router."""

    def __init__(self, index: Any, id: Any, name: Any, args: Any, replace: bool) -> None:
        self.index, self.id, self.name, self.arguments, self.replace = index, id, name, args, replace
        self.type = "function" if id is not None else None
        self.raw = {"index": index}
        self.further = False


def frag(
    index: Any = None, id: Any = None, name: Any = None, args: Any = None, replace: bool = False
) -> Fragment:
    return Fragment(index, id, name, args, replace)


class Router:
    """Drives the router the way the reader does, without the accumulator."""

    def __init__(self) -> None:
        self.table = CallTable()
        self.notes: list[Anomaly] = []
        self.owner = CallOwner(LIMITS, lambda: 0.0)

    def feed(self, f: Fragment) -> Any:
        call, index, flags = resolve_call(
            self.table, f.index, f.id, f.name, f.arguments, True, 0, f.raw, self.notes
        )
        f.further = bool(flags & FURTHER)
        if index == SKIP:
            return None
        opening = call is None
        if call is None:
            call = open_call(self.table, self.owner, 0, index, 0.0, True)
        text, whole = None, False
        if f.arguments:
            text, whole = argument_text(
                self.table, call, f.arguments, f.replace, bool(flags & FURTHER), f.raw, self.notes
            )
        if f.id is not None or f.name is not None or f.type is not None or opening:
            identity = Identity(f.id, f.name, f.type, None, bool(flags & NEW_ID), f.raw)
            self.owner.identify(call, identity, [], opening=opening)
        if whole:
            self.owner.resend(call, (text or "", f.raw, False), [])
        else:
            self.owner.fragment(call, (text or "", f.raw, False), [])
        self.notes.extend(self.owner.take_notes())
        if f.id is not None and call.id == f.id:
            self.table.by_id.setdefault(f.id, call)
        return call

    def codes(self) -> list[str]:
        return [n.code for n in self.notes]


def test_fragments_are_keyed_by_index_and_interleave() -> None:
    r = Router()
    a = r.feed(frag(0, "a", "f", '{"x":'))
    b = r.feed(frag(1, "b", "g", '{"y":'))
    assert r.feed(frag(1, args="2}")) is b
    assert r.feed(frag(0, args="1}")) is a
    assert (a.arguments, b.arguments) == ('{"x":1}', '{"y":2}')
    assert r.table.by_id == {"a": a, "b": b}


def test_an_empty_entry_at_a_new_index_opens_nothing() -> None:
    r = Router()
    assert r.feed(frag(0)) is None
    assert r.table.calls == [] and r.codes() == ["empty_tool_call"]


def test_index_not_from_zero_and_gaps_are_noted() -> None:
    r = Router()
    r.feed(frag(1, "a", "f", "{}"))
    r.feed(frag(5, "b", "f", "{}"))
    assert r.codes() == ["index_not_from_zero", "index_gap"]


def test_a_new_id_at_a_used_index_opens_a_new_call() -> None:
    r = Router()
    a = r.feed(frag(0, "a", "f", "{}"))
    b = r.feed(frag(0, "b", "g", "{}"))
    assert a is not b and "index_reused" in r.codes()


def test_a_further_value_without_id_or_name_stays_in_the_call() -> None:
    r = Router()
    a = r.feed(frag(0, "a", "f", '{"c": ""}'))
    f = frag(0, args='{"c": "Italy"}')
    assert r.feed(f) is a
    assert f.further and a.arguments == '{"c": ""}{"c": "Italy"}'
    assert "further_json_value" in r.codes()


def test_an_exact_resend_of_a_complete_value_is_dropped() -> None:
    r = Router()
    a = r.feed(frag(0, "a", "f", '{"c": 1}'))
    f = frag(0, args='{"c": 1}')
    assert r.feed(f) is a and not f.further
    assert a.arguments == '{"c": 1}'


def test_a_named_new_value_at_a_complete_index_opens_a_call() -> None:
    r = Router()
    a = r.feed(frag(0, "a", "f", "{}"))
    b = r.feed(frag(0, name="f", args='{"k": 2}'))
    assert a is not b and b.name == "f"


def test_unindexed_fragments_route_by_id_then_position() -> None:
    r = Router()
    a = r.feed(frag(None, "a", "f", '{"x":'))
    b = r.feed(frag(None, "b", "g", '{"y":'))
    assert r.feed(frag(None, "a", args="1}")) is a
    assert r.feed(frag(None, args="2}")) is b  # no id: the latest call
    assert [c.index for c in (a, b)] == [0, 1]
    assert set(r.codes()) == {"missing_index", "id_repeated", "type_repeated"}


def test_id_changing_mid_arguments_keeps_the_later_one() -> None:
    r = Router()
    a = r.feed(frag(0, "tmp", "f", '{"x":'))
    assert r.feed(frag(0, "canonical", args="1}")) is a
    assert a.id == "canonical" and "id_changed" in r.codes()


def test_identity_is_written_once_and_repeats_are_noted() -> None:
    r = Router()
    a = r.feed(frag(0, "a", "edit_ex"))
    r.feed(frag(0, "a", "isting_file", '{"x": 1'))
    assert a.name == "edit_existing_file"
    r.feed(frag(0, "a", "other"))  # a different name once arguments flow: kept the first
    b = r.feed(frag(1, "b", "g", "{}"))
    assert r.feed(frag(0, "b", args="}")) is a  # b's id at a's index: the index wins (Q39)
    assert (a.id, a.name, b.id) == ("a", "edit_existing_file", "b")
    assert {"id_repeated", "name_fragmented", "id_conflict", "name_conflict"} <= set(r.codes())


def test_cumulative_resends_keep_only_the_new_text() -> None:
    r = Router()
    a = r.feed(frag(0, "a", "f", '{"x": 1'))
    r.feed(frag(0, args='{"x": 1, "y"'))
    r.feed(frag(0, args='{"x": 1, "y": 2}'))
    assert a.arguments == '{"x": 1, "y": 2}'
    assert "arguments_cumulative" in r.codes()


def test_a_standard_stream_is_never_read_as_cumulative() -> None:
    r = Router()
    a = r.feed(frag(0, "a", "f", '{"'))
    r.feed(frag(0, args='{": 1}'))
    assert a.arguments == '{"{": 1}'
    assert "arguments_cumulative" not in r.codes()


def test_arguments_as_a_whole_object_replace_the_text() -> None:
    r = Router()
    a = r.feed(frag(0, "a", "f", '{"x"'))
    r.feed(frag(0, args='{"x": 2}', replace=True))
    assert a.arguments == '{"x": 2}'


def test_ensure_ids_synthesizes_missing_and_duplicate_ids_stably() -> None:
    r = Router()
    a = r.feed(frag(0, None, "f\udc80", "{}"))
    b = r.feed(frag(1, "dup", "f", "{}"))
    c = r.feed(frag(2, None, "f", "{}"))
    r.owner.give_id(c, "dup")
    repaired = list(ensure_ids([a, b, c], "basis"))
    assert [call for call, _, _ in repaired] == [a, c]
    assert [n.code for _, _, n in repaired] == ["id_synthesized", "call_id_reused"]
    made = {call.slot: made for call, made, _ in repaired}
    assert made[a.slot].startswith("call_ts") and made[c.slot] != "dup"
    again = list(ensure_ids([a], "basis"))
    assert again[0][1] == made[a.slot]  # stable for the same basis
