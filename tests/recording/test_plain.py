"""``plain``: the one conversion to JSON data that recordings and reports share, bounded."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import openai
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion

import toolstitch as ts
from toolstitch.recording._plain import MAX_DEPTH, TOO_DEEP, plain
from toolstitch.recording._replay import replay
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": [value]}
    return value


def test_nesting_deeper_than_the_bound_becomes_a_marker() -> None:
    data = plain(nested(900))
    text = json.dumps(data)
    assert TOO_DEEP in text
    assert text.count("[") <= MAX_DEPTH


def test_non_finite_numbers_become_strings_only_when_asked() -> None:
    values = [math.nan, math.inf, -math.inf, 1.5]
    assert plain(values, finite=True) == ["NaN", "Infinity", "-Infinity", 1.5]
    assert math.isnan(plain(values)[0])


def test_sdk_sentinels_classes_and_models() -> None:
    data = plain({"a": openai.NOT_GIVEN, "cls": ChatCompletion, "obj": object(), "t": (1, 2)})
    assert "a" not in data
    assert data["cls"] == "openai.types.chat.chat_completion.ChatCompletion"
    assert data["obj"].startswith("<object object")
    assert data["t"] == [1, 2]


def test_a_model_too_deep_for_pydantic_is_walked_field_by_field() -> None:
    completion = ChatCompletion.model_construct(
        id="c", object="chat.completion", created=1, model="m", choices=[], provider_field=nested(900)
    )
    data = plain(completion, finite=True)
    assert data["model"] == "m"
    assert TOO_DEEP in json.dumps(data, allow_nan=False)


@given(
    st.recursive(
        st.none() | st.floats() | st.text() | st.integers(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_the_result_is_always_strict_json(value: Any) -> None:
    json.dumps(plain(value, finite=True), allow_nan=False)


def test_a_chunk_nested_900_deep_is_recorded_and_replays(server: LocalServer, tmp_path: Path) -> None:
    deep = chunk(delta={"content": "hi"})
    deep["provider_field"] = nested(450)  # 900 levels of JSON: beyond pydantic's serialisation depth
    script = [deep, *tool_call_chunks([("call_a", "f", '{"x": 1}')])]
    server.enqueue(StreamScript(script))
    client = ts.wrap(server.client(), record=tmp_path)
    with client.chat.completions.create(model="m", messages=[], stream=True) as stream:
        for _ in stream:
            pass
    assert stream.recorder is not None and stream.recorder.error is None
    (path,) = tmp_path.glob("*.jsonl")
    replayed = replay(path)
    assert [(c.name, c.arguments) for c in replayed.tool_calls] == [("f", '{"x": 1}')]
