"""The one reader held against an oracle: a plain, obviously correct merge written for the tests.

The oracle (:func:`oracle`) is what the design says in the fewest lines: fragments keyed by
``(choice, index)``, the first non-empty ``id`` and ``name`` kept, argument text appended and parsed
once, when the choice has a ``finish_reason``. It knows no quirk, so it is compared only where no
quirk applies, and there it must agree with the reader on every call: identity, text, status,
parsed value, the final completion, and the events (one ``ArgumentsDelta`` per piece of text, in
order). Where the stream is hostile (mutated corpus streams), the reader may refuse more, never
less: a call it marks ``ready`` is one the oracle would have built whole from exactly that text.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolstitch as ts
from tests.conftest import examples
from tests.core.test_adversarial_mutations import STREAMS, _mutate


class OracleCall:
    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.pieces: list[str] = []
        self.finished = False
        self.odd = False

    @property
    def arguments(self) -> str:
        return "".join(self.pieces)

    def parsed(self) -> Any:
        try:
            value = json.loads(self.arguments)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _list(value: Any) -> list[Any]:
    return value if type(value) is list else []


def oracle(chunks: list[Any]) -> dict[tuple[int, int], OracleCall]:
    """The plain merge: every standard stream's calls, keyed by (choice, index). What it cannot
    read (a hostile shape) marks every call ``odd``: the oracle says nothing about those."""
    calls: dict[tuple[int, int], OracleCall] = {}
    odd = False
    for chunk in chunks:
        for choice in _list(_get(chunk, "choices")):
            c = _get(choice, "index")
            if type(c) is not int:
                odd = True
                continue
            delta = _get(choice, "delta")
            for entry in _list(_get(delta, "tool_calls") if isinstance(delta, dict) else None):
                index = _get(entry, "index")
                function = _get(entry, "function")
                if type(index) is not int or not isinstance(function, (dict, type(None))):
                    odd = True
                    continue
                call = calls.setdefault((c, index), OracleCall())
                cid, name, text = _get(entry, "id"), _get(function, "name"), _get(function, "arguments")
                if not all(v is None or type(v) is str for v in (cid, name, text)):
                    odd = True
                    continue
                call.id = call.id or cid or None
                call.name = call.name or name or None
                call.pieces.append(text or "")
            if _get(choice, "finish_reason"):
                for (cc, _), call in calls.items():
                    if cc == c:
                        call.finished = True
    if odd:
        for call in calls.values():
            call.odd = True
    return calls


def _standard(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int]:
    """A standard stream: 1-2 choices, 1-4 calls each, arguments cut anywhere and interleaved."""
    choices = draw(st.integers(1, 2))
    pending: list[list[dict[str, Any]]] = []
    for c in range(choices):
        for i in range(draw(st.integers(1, 4))):
            value = draw(
                st.dictionaries(
                    st.text(min_size=1, max_size=5),
                    st.one_of(st.integers(), st.text(max_size=8), st.booleans(), st.none()),
                    max_size=3,
                )
            )
            text = json.dumps(value, ensure_ascii=draw(st.booleans()))
            cuts = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=6))))
            pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True) if a < b]
            head = {
                "index": i,
                "id": f"call_{c}_{i}",
                "type": "function",
                "function": {"name": "f", "arguments": ""},
            }
            steps = [head] + [{"index": i, "function": {"arguments": p}} for p in pieces]
            pending.append([{"choices": [{"index": c, "delta": {"tool_calls": [s]}}]} for s in steps])
    chunks: list[dict[str, Any]] = []
    started: set[int] = set()
    while any(pending):
        # Calls of a choice open in index order (a header names the next index); once open, their
        # pieces interleave in any order.
        eligible = [k for k, q in enumerate(pending) if q and k in started]
        fresh = [k for k, q in enumerate(pending) if q and k not in started]
        if fresh:
            eligible.append(fresh[0])
        k = draw(st.sampled_from(eligible))
        started.add(k)
        chunks.append(pending[k].pop(0))
    for c in range(choices):
        chunks.append({"choices": [{"index": c, "delta": {}, "finish_reason": "tool_calls"}]})
    return chunks, choices


@st.composite
def standard_streams(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int]:
    return _standard(draw)


TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(standard_streams(), st.booleans())
def test_the_reader_agrees_with_the_oracle_on_standard_streams(
    case: tuple[list[Any], int], want: bool
) -> None:
    chunks, _ = case
    acc = ts.Accumulator(tools=TOOLS)
    deltas: dict[tuple[int, int], list[str]] = {}
    for chunk in chunks:
        for event in acc.feed(copy.deepcopy(chunk), events=want):
            if isinstance(event, ts.events.ArgumentsDelta):
                deltas.setdefault((event.call.choice, event.call.index), []).append(event.text)
    expected = oracle(chunks)
    got = {(c.choice, c.index): c for c in acc.calls()}
    assert set(got) == set(expected)
    for key, want_call in expected.items():
        call = got[key]
        assert (call.id, call.name, call.arguments) == (want_call.id, want_call.name, want_call.arguments)
        assert call.status == "ready" and call.parsed == want_call.parsed()
        if want:
            assert deltas.get(key, []) == [p for p in want_call.pieces if p]
    completion = acc.get_final_completion()
    for choice in completion.choices:
        for message_call in choice.message.tool_calls or []:
            want_call = expected[
                (choice.index, next(k for k in expected if expected[k].id == message_call.id)[1])
            ]
            assert message_call.function.arguments == want_call.arguments
    assert [a.code for a in acc.anomalies] == []


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_on_mutated_corpus_streams_a_ready_call_is_the_oracles_whole_call(data: st.DataObject) -> None:
    name, chunks, tools = data.draw(st.sampled_from(STREAMS))
    chunks = _mutate(chunks, data)
    acc = ts.Accumulator(tools=tools)
    for chunk in copy.deepcopy(chunks):
        acc.feed(chunk, events=data.draw(st.booleans()))
    acc.end()
    expected = oracle(chunks)
    for call in acc.calls():
        if call.status != "ready":
            continue
        # A ready call's text is everything that arrived for it, and it parses to what it says.
        assert json.loads(call.arguments) == call.parsed
        plain = expected.get((call.choice, call.index))
        if plain is not None and not plain.odd and plain.id == call.id:
            # Finished, or a repair the reader made visible (a call opened after its finish and
            # sealed at a clean end, a finish_reason missing beside a finished choice).
            assert plain.finished or call.anomalies or acc.anomalies, name
            # Equal, unless the reader repaired something (and said so): a piece at a new index
            # read as the open call's continuation (Q05) leaves the oracle's call longer.
            assert call.arguments == plain.arguments or call.anomalies or acc.anomalies, name


def test_the_oracle_and_the_reader_agree_on_every_standard_corpus_stream() -> None:
    """Corpus streams the reader reads without any anomaly are standard: there the two agree."""
    compared = 0
    for name, chunks, tools in STREAMS:
        acc = ts.Accumulator(tools=tools)
        for chunk in copy.deepcopy(chunks):
            acc.feed(chunk)
        acc.end()
        if acc.anomalies:
            continue
        compared += 1
        expected = oracle(chunks)
        got = {(c.choice, c.index): c for c in acc.calls()}
        assert set(got) == set(expected), name
        for key, plain in expected.items():
            assert (got[key].id, got[key].name, got[key].arguments) == (plain.id, plain.name, plain.arguments)
            assert got[key].ready == (
                plain.finished and plain.parsed() is not None and got[key].error is None
            )
    assert compared > 0
