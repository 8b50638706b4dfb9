"""The compiled twins (``core/_speedups.c``) do exactly what their Python references do.

``JSONScanner.feed`` and the fast path (``take_common_chunk``) have compiled twins, used where the
extension is built. The Python code is the reference: here the same text is fed to both scanners
piece by piece and every slot compared after each piece; the same chunks (the SDK's own objects,
then the same objects with hostile values written straight into their ``__dict__``, where no
validation ever looked) go through both fast paths, and everything the accumulators hold and
return is compared. ``test_fast_path.py`` compares both with the general path on the corpus,
hostile and generated streams. A scanner or a chunk the compiled code does not read exactly is
declined, never guessed at: the tests for that are here too.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolstitch as ts
from tests.conftest import ROOT, examples
from tests.core.test_fast_path import NATIVE, _run
from tests.core.test_fuzz import _sdk_object
from toolstitch.core import _scanner
from toolstitch.core._scanner import JSONScanner

native = pytest.mark.skipif(not NATIVE, reason="the compiled twins are not built here")


def test_the_compiled_twins_are_used_where_built() -> None:
    """``./dev test`` and the matrix set TOOLSTITCH_EXPECT_SPEEDUPS=1 when the machine has a C
    compiler: a build that silently failed would otherwise pass every test, only slower."""
    expected = os.environ.get("TOOLSTITCH_EXPECT_SPEEDUPS") == "1"
    if not expected and not NATIVE:
        pytest.skip("the compiled twins are not built here, and nobody expects them")
    assert NATIVE
    assert _scanner._native_scan is not None


def test_the_switch_runs_the_python_code() -> None:
    """TOOLSTITCH_PURE_PYTHON=1 (for a debugger, or a suspected difference) runs the references."""
    probe = (
        "import toolstitch as ts\nimport toolstitch.testing\n"
        "from toolstitch.core import _fast, _scanner\n"
        "assert _fast.take_chunk is _fast.take_common_chunk and _scanner._native_scan is None\n"
        "acc = ts.Accumulator()\n"
        "for c in ts.testing.tool_call_chunks([('c1', 'f', '{\"a\": [1, \"x\"]}')], pieces=7):\n"
        "    acc.feed(c)\n"
        "acc.end()\n"
        "assert acc.tool_calls[0].ready and acc.tool_calls[0].parsed == {'a': [1, 'x']}\n"
    )
    env = {**os.environ, "TOOLSTITCH_PURE_PYTHON": "1", "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# -- the scanner ----------------------------------------------------------------------------------

_JSONISH = st.lists(
    st.sampled_from(
        [
            *'{}[]":,\\ \t\r\nabu0123456789eEfF.-+/',
            "\x00",
            "\x1f",
            "é",
            "\u2028",
            "\ud800",
            "😀",
            "\\u00e9",
            '\\"',
            "\\n",
            "true",
            '{"k": "',
            '"}',
        ]
    ),
    max_size=40,
).map("".join)


def _slots(scanner: JSONScanner) -> dict[str, Any]:
    return {name: copy.copy(getattr(scanner, name)) for name in JSONScanner.__slots__}


@native
@settings(max_examples=examples(1500), deadline=None)
@given(text=_JSONISH, cuts=st.lists(st.integers(0, 40), max_size=8), prefix=st.sampled_from(["", '{"k": "']))
def test_the_compiled_scanner_matches_the_python_one(text: str, cuts: list[int], prefix: str) -> None:
    text = prefix + text
    points = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    compiled, reference = JSONScanner(), JSONScanner()
    for start, end in itertools.pairwise(points):
        piece = text[start:end]
        assert _scanner._native_scan is not None
        assert _scanner._native_scan(compiled, piece) is True
        reference._feed_python(piece)
        assert _slots(compiled) == _slots(reference), (text, piece)


_ODD_STATES: list[dict[str, Any]] = [
    {"_stack": ("}",)},
    {"_hex_left": 9},
    {"_hex_left": -1},
    {"_in_string": 1},
    {"_escape": None},
    {"offset": 2**80},
    {"offset": 1.5},
    {"complete": "yes"},
]


@native
@pytest.mark.parametrize("odd", _ODD_STATES, ids=[f"{k}={v!r}" for o in _ODD_STATES for k, v in o.items()])
def test_a_scanner_state_it_does_not_read_is_declined(odd: dict[str, Any]) -> None:
    """Declined means False with nothing changed; ``feed`` then runs the Python code."""
    scanner = JSONScanner()
    scanner.feed('{"k": [')
    for name, value in odd.items():
        setattr(scanner, name, value)
    before = _slots(scanner)
    assert _scanner._native_scan is not None
    assert _scanner._native_scan(scanner, '1, "x"]}') is False
    assert _slots(scanner) == before
    expected = copy.deepcopy(scanner)
    try:
        expected._feed_python('1, "x"]}')
        outcome: Any = _slots(expected)
    except Exception as exc:
        outcome = type(exc)
    try:
        scanner.feed('1, "x"]}')
    except Exception as exc:
        assert type(exc) is outcome
    else:
        assert _slots(scanner) == outcome


class _Closer(str):
    def __ne__(self, other: object) -> bool:
        return False


@native
@pytest.mark.parametrize("item", ["x", "]", _Closer("?"), 7])
def test_a_stack_item_it_did_not_push_is_compared_as_python_compares_it(item: Any) -> None:
    """Only the scanner pushes onto its stack, but an item put there by hand is read (at the
    bracket that closes it) the way the Python code reads it, not assumed to be a closer."""
    compiled, reference = JSONScanner(), JSONScanner()
    for scanner in (compiled, reference):
        scanner.feed('{"k": [')
        scanner._stack.insert(1, item)
    assert _scanner._native_scan is not None
    assert _scanner._native_scan(compiled, "1]}") is True
    reference._feed_python("1]}")
    assert _slots(compiled) == _slots(reference)
    compiled.feed("}]")
    reference._feed_python("}]")
    assert _slots(compiled) == _slots(reference)


def test_an_unset_slot_is_declined() -> None:
    scanner = JSONScanner()
    del scanner._stack
    if _scanner._native_scan is not None:
        assert _scanner._native_scan(scanner, "{") is False
    with pytest.raises(AttributeError):
        scanner.feed("{")


# -- the fast path ---------------------------------------------------------------------------------


def _stream() -> list[Any]:
    calls = [(f"call_{i}", "f", '{"a": "x\\"y é", "b": [1, {"c": null}]}') for i in range(2)]
    chunks = ts.testing.tool_call_chunks(calls, pieces=6, interleave=True, content="hi there")
    return [_sdk_object(c) for c in chunks]


class _Str(str):
    pass


class _Int(int):
    pass


class _Unhashable:
    __hash__ = None  # type: ignore[assignment]


class _HashRaises:
    def __hash__(self) -> int:
        raise RuntimeError("hash")


class _BoolRaises(dict[str, Any]):
    def __bool__(self) -> bool:
        raise RuntimeError("bool")


_HOSTILE: list[Any] = [
    None,
    "",
    0,
    True,
    -1,
    2**80,
    1.0,
    _Str("x"),
    _Int(0),
    [],
    [None],
    {},
    _Unhashable(),
    _HashRaises(),
    "\ud800",
    "😀" * 3,
    '{"a": 1}',
]


def _objects_inside(chunk: Any) -> list[Any]:
    """The chunk and every SDK object inside it (the ones the fast path reads a ``__dict__`` of)."""
    found = [chunk]

    def models(value: Any) -> list[Any]:
        items = value if isinstance(value, list) else [value]
        return [item for item in items if hasattr(item, "__pydantic_fields_set__")]

    level = [chunk]
    for key in ("choices", "delta", "tool_calls", "function"):
        level = [inner for outer in level for inner in models(outer.__dict__.get(key))]
        found.extend(level)
    return found


def _same_on_both_fast_paths(chunks: list[Any]) -> None:
    for mode in ("fast", "quiet"):
        try:
            compiled: Any = _run(chunks, mode)
        except AssertionError as exc:  # _run's own check: no internal error anomaly
            compiled = ("internal", str(exc)[:40])
        try:
            reference: Any = _run(chunks, mode + "-python")
        except AssertionError as exc:
            reference = ("internal", str(exc)[:40])
        assert compiled == reference


@native
@settings(
    max_examples=examples(600),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_hostile_values_inside_sdk_objects_read_the_same_on_both_fast_paths(data: st.DataObject) -> None:
    """Values written straight into an SDK object's ``__dict__`` (as a proxy library or a careless
    caller could): a field removed, replaced by a subclass, a huge int, an unhashable key, a lone
    surrogate, an ``__pydantic_extra__`` whose truth raises. The compiled fast path takes, declines
    or raises exactly as the Python one does, and the accumulator ends the same."""
    chunks = _stream()
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(2, len(chunks) - 1))
        chunks[at] = chunk = copy.deepcopy(chunks[at])
        target = data.draw(st.sampled_from(_objects_inside(chunk)))
        action = data.draw(st.sampled_from(["set", "delete", "extra"]))
        if action == "extra":
            target.__pydantic_extra__ = [None, {}, {"x": 1}, _BoolRaises()][data.draw(st.integers(0, 3))]
            continue
        name = data.draw(st.sampled_from(sorted(target.__dict__)))
        if action == "delete":
            del target.__dict__[name]
        else:
            target.__dict__[name] = _HOSTILE[data.draw(st.integers(0, len(_HOSTILE) - 1))]
    _same_on_both_fast_paths(chunks)


@native
def test_the_compiled_fast_path_takes_the_common_shape_and_raises_nothing() -> None:
    """It does take chunks (the comparisons above compare something) and builds the same events."""
    from toolstitch.core import _fast

    chunks = _stream()
    acc = ts.Accumulator()
    taken = 0
    for chunk in chunks[:3]:
        acc.feed(chunk)
    for chunk in chunks[3:-1]:
        result = _fast.take_chunk(acc, chunk, True)
        if result is None:
            acc.feed(chunk)
        else:
            taken += 1
            acc.metrics.chunks += 1
    acc.feed(chunks[-1])
    acc.end()
    assert taken >= len(chunks) // 2
    assert all(c.ready for c in acc.tool_calls)
    assert _run(chunks, "fast") == _run(chunks, "fast-python")


def _mischief(kind: str) -> Any:
    """A clock (the caller's, ``Accumulator(clock=...)``) that changes the accumulator's calls
    while the fast path is between its decision and its writes."""
    holder: dict[str, Any] = {}

    def clock() -> float:
        acc = holder.get("acc")
        for call in acc.calls() if acc is not None else ():
            if kind == "parts":
                call._parts = ("replaced",)
            elif kind == "delete":
                with contextlib.suppress(AttributeError):
                    del call._done
            elif kind == "metrics":
                call._metrics = None
            elif kind == "scanner":
                call._scanner._stack = None
            elif kind == "reenter" and not holder.get("busy"):
                holder["busy"] = True
                acc.feed(holder["chunk"])
                holder["busy"] = False
        return 1.0

    return holder, clock


@native
@pytest.mark.parametrize("kind", ["parts", "delete", "metrics", "scanner", "reenter"])
@pytest.mark.parametrize("events", [True, False])
def test_a_clock_that_changes_the_calls_meanwhile_is_survived(kind: str, events: bool) -> None:
    """No crash and no exception out of ``feed``; a call that ends ``ready`` holds exactly the
    text that arrived for it (anything else is refused)."""
    chunks = _stream()
    holder, clock = _mischief(kind)
    acc = ts.Accumulator(clock=clock)
    holder["acc"], holder["chunk"] = acc, chunks[4]
    for chunk in chunks:
        if events:
            acc.feed(chunk)
        else:
            acc._feed_quiet(chunk)
    acc.end()
    for call in acc.calls():
        if call.ready:
            assert call.arguments == '{"a": "x\\"y é", "b": [1, {"c": null}]}'
