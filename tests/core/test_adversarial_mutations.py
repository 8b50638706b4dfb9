"""Real provider streams, mutated: every field replaced by a hostile value, keys dropped, chunks
duplicated and reordered, fed as dicts to an ``Accumulator`` that knows the request's tools.

The provider corpus (``cassettes/providers``, :mod:`tests.corpus`) holds real bodies; a mutation is
what a broken proxy or a hostile server could make of them. Whatever it does:

* ``feed``/``end`` never raise and never fail internally (no ``internal_error`` anomaly);
* a ``ready`` call has a name the request offered, arguments that a strict JSON parser reads as an
  object valid against that tool's schema, and its choice had a ``finish_reason`` in the stream;
* ``get_final_completion()`` returns a ``ChatCompletion`` that dumps to Python and to JSON, or raises
  the documented ``IncompleteStreamError``; the assistant message built from it and the history it
  starts never make ``assistant_message``/``validate_history``/``repair_history`` raise.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolstitch as ts
from tests.conftest import examples, field_paths
from tests.corpus import CORPUS


def _load() -> list[tuple[str, list[Any], list[Any] | None]]:
    """``(name, chunks as dicts, the recorded request's tools or None)`` for every corpus stream."""
    return [(s.name, s.chunks(), s.recorded_tools) for s in CORPUS if s.chunks()]


STREAMS = _load()


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


HOSTILE: list[Any] = [
    None, "", 0, -1, 2**64, 10**400 if False else 2**200, 1.5, float("nan"), float("inf"), True, False,
    [], {}, [None], {"": None}, _deep(900), "\ud83d", "\udc80x", "²", "١٢", "x" * 1_000_000,
    '{"', "}", "null", "FUNCTION", {"name": "f", "arguments": "{}"}, ["{}"],
]  # fmt: skip


def _mutate(chunks: list[Any], data: st.DataObject) -> list[Any]:
    chunks = copy.deepcopy(chunks)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["replace", "replace", "drop", "dup", "swap", "cut"]))
        if not chunks:
            break
        i = data.draw(st.integers(0, len(chunks) - 1))
        if kind == "dup":
            chunks.insert(i, copy.deepcopy(chunks[i]))
            continue
        if kind == "swap":
            j = data.draw(st.integers(0, len(chunks) - 1))
            chunks[i], chunks[j] = chunks[j], chunks[i]
            continue
        if kind == "cut":
            chunks = chunks[:i]
            continue
        paths = field_paths(chunks[i], 8)
        if not paths:
            continue
        path = data.draw(st.sampled_from(paths))
        parent = chunks[i]
        for step in path[:-1]:
            parent = parent[step]
        if kind == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(data.draw(st.sampled_from(HOSTILE)))
    return chunks


def _finished_choices(chunks: list[Any]) -> set[Any]:
    done: set[Any] = set()
    for chunk in chunks:
        if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
            continue
        for choice in chunk["choices"]:
            if isinstance(choice, dict) and choice.get("finish_reason"):
                done.add(repr(choice.get("index")))
    return done


def _check(chunks: list[Any], tools: list[Any] | None, **request: Any) -> None:
    acc = ts.Accumulator(tools=tools, **request)
    early: list[ts.ToolCall] = []  # refused while still streaming (``text/_early.py``)
    for chunk in chunks:
        for event in acc.feed(chunk):
            if isinstance(event, ts.events.ToolCallInvalid) and event.call.status == "open":
                early.append(event.call)
    acc.end()
    # An early verdict is the verdict: the call never becomes ready.
    assert all(call.status != "ready" for call in early), early
    codes = {a.code for a in acc.anomalies}
    assert "internal_error" not in codes, [a for a in acc.anomalies if a.code == "internal_error"]
    schemas = {}
    for tool in tools or []:
        fn = tool.get("function") or {}
        schemas[fn.get("name")] = fn.get("parameters", {})
    finished = _finished_choices(chunks)
    for call in acc.calls():
        if call.status != "ready":
            continue
        assert finished, call
        value = json.loads(call.arguments)
        assert isinstance(value, dict)
        if tools is not None:
            assert call.name in schemas, call
            jsonschema.validate(value, schemas[call.name])
    try:
        completion = acc.get_final_completion()
    except ts.IncompleteStreamError:
        return
    completion.model_dump()
    completion.model_dump_json()
    for i in range(len(completion.choices)):
        message = ts.assistant_message(completion, choice=i)
        history: list[Any] = [{"role": "user", "content": "hi"}, message]
        ts.validate_history(history)
        ts.repair_history(history)


@pytest.mark.parametrize("index", range(len(STREAMS)), ids=[s[0] for s in STREAMS])
@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_transcript(index: int, data: st.DataObject) -> None:
    _, chunks, tools = STREAMS[index]
    mutated = _mutate(chunks, data)
    request = data.draw(
        st.sampled_from(
            [{}, {"parallel_tool_calls": False}, {"tool_choice": "required"}, {"tool_choice": "none"}]
        )
    )
    _check(mutated, tools, **request)


def _chunk(delta: dict[str, Any], finish: str | None = None, **envelope: Any) -> dict[str, Any]:
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    base.update(envelope)
    base["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return base


def test_completion_with_surrogates_and_deep_values_serialises() -> None:
    """An emoji cut in two between chunks is whole again in the completion; a lone surrogate (in the
    id, the content, a kept unknown field) becomes U+FFFD; a value nested past what pydantic writes
    is dropped; each repair is an anomaly, and the completion dumps to JSON."""
    acc = ts.Accumulator()
    acc.feed(_chunk({"role": "assistant", "content": "a\ud83d"}, id="\udc80"))
    acc.feed(_chunk({"content": "\ude00b", "reasoning_content": "\ud83d"}))
    acc.feed({**_chunk({}, "stop"), "usage": {"prompt_tokens": 1, "deep": _deep(400)}})
    completion = acc.get_final_completion()
    dumped = json.loads(completion.model_dump_json())
    assert dumped["choices"][0]["message"]["content"] == "a\U0001f600b"
    assert dumped["id"] == "\ufffd"
    assert "lone UTF-16 surrogate" in " ".join(a.message for a in acc.anomalies)
    message = ts.assistant_message(completion)
    ts.validate_history([{"role": "user", "content": "hi"}, message])
