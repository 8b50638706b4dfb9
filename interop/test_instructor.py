"""instructor (in its own environment: its jiter cap holds openai back): ``instructor.from_openai(
ts.wrap(OpenAI()))`` with ``create_partial`` and ``create_iterable``, streamed, in a two-step
conversation (extract the call, run the tool, extract the answer from its result), plain and
wrapped; guarded, an unsafe stream runs nothing and instructor's own error is raised from
``UnsafeToolCallError``. Its examples in docs/frameworks.md run here too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import instructor
import pytest
from pydantic import BaseModel

import toolstitch as ts
from conftest import (
    MODEL,
    QUESTION,
    ROOT,
    Conversation,
    Tools,
    assert_refused,
    interop_blocks,
)
from toolstitch.testing import LocalServer, StreamScript, tool_call_chunks


class GetWeather(BaseModel):
    city: str


class Add(BaseModel):
    a: int
    b: int


class Answer(BaseModel):
    text: str


#: What the model sends for each model instructor asks for (by the tool name it offers).
REPLIES = {
    "GetWeather": '{"city": "Paris"}',
    "Answer": '{"text": "It is sunny in Paris."}',
}
UNSAFE = {"truncated": '{"city": "Par', "schema-breaking": '{"a": "17", "b": 1}'}


def reply(body: dict[str, Any], unsafe: str | None = None) -> StreamScript:
    """The stream for a request: a call to the one tool instructor offered (and forced)."""
    name = body["tools"][0]["function"]["name"]
    model = name.removeprefix("Partial").removeprefix("Iterable")
    arguments = UNSAFE[unsafe] if unsafe else REPLIES[model]
    if name.startswith("Iterable"):  # a list of the objects, cut off with its one object when truncated
        arguments = '{"tasks": [' + arguments + ("" if unsafe == "truncated" else "]}")
    return StreamScript(tool_call_chunks([("call_1", name, arguments)]))


def extract(client: Any, model: type[BaseModel], messages: list[dict[str, Any]], how: str) -> list[Any]:
    if how == "create_iterable":
        return list(
            client.chat.completions.create_iterable(model=MODEL, response_model=model, messages=messages)
        )
    last = None
    for partial in client.chat.completions.create_partial(
        model=MODEL, response_model=model, messages=messages
    ):
        last = partial
    return [last]


def conversation(client: Any, tools: Tools, how: str) -> Any:
    patched = instructor.from_openai(client)
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    for call in extract(patched, GetWeather, messages, how):
        result = tools.get_weather(call.city)
        messages += [
            {"role": "assistant", "content": f"get_weather({call.model_dump_json()})"},
            {"role": "user", "content": f"The tool answered: {result}"},
        ]
    return extract(patched, Answer, messages, "create_partial")[0].text


HOW = ["create_iterable", "create_partial"]


@pytest.mark.parametrize("how", HOW)
def test_the_conversation_is_the_same_and_every_stream_stitched(
    server: LocalServer, tmp_path: Path, how: str
) -> None:
    server.handler = reply
    runs = []
    for folder in (None, tmp_path):
        sent = len(server.requests)
        tools = Tools()
        client = server.client() if folder is None else ts.wrap(server.client(), record=folder)
        output = conversation(client, tools, how)
        runs.append(Conversation(server.requests[sent:], tools.runs, output, folder))
    assert runs[0].output == "It is sunny in Paris."
    plain, wrapped = runs
    # the model's calls are instructor's own tools (its response models), not get_weather: the
    # shared check (conftest.assert_same_and_stitched) is spelled out here for them
    assert wrapped.requests == plain.requests and len(plain.requests) == 2
    assert plain.runs == wrapped.runs == [("get_weather", {"city": "Paris"})]
    replays = [ts.replay(p) for p in sorted(tmp_path.glob("*.jsonl"))]
    assert len(replays) == 2
    assert [c.status for r in replays for c in r.calls()] == ["ready", "ready"]


@pytest.mark.parametrize("how", HOW)
def test_guarded_a_truncated_stream_runs_nothing_and_fails_the_extraction(
    server: LocalServer, how: str
) -> None:
    # Plain, instructor hands on the cut-off object ({"city": "Par"}) as its final result.
    server.handler = lambda body: reply(body, "truncated")
    sent = len(server.requests)
    tools = Tools()
    patched = instructor.from_openai(ts.wrap(server.client(), guard=True))
    with pytest.raises(Exception) as caught:
        for result in extract(patched, GetWeather, [{"role": "user", "content": QUESTION}], how):
            tools.get_weather(result.city)
    # create_partial raises its retry error from it (once: not a validation error); create_iterable, it itself
    raised = {"create_partial": "InstructorRetryException", "create_iterable": "UnsafeToolCallError"}
    assert type(caught.value).__name__ == raised[how]
    assert_refused(caught.value, "truncated", tools, server, sent)


@pytest.mark.parametrize("how", HOW)
def test_a_schema_breaking_stream_is_refused_by_instructor_itself_before_the_guard(
    server: LocalServer, how: str
) -> None:
    # instructor validates each object as it closes, strictly ("17" is not an integer), so its own
    # ValidationError (retried, then raised) comes before the finish the guard would refuse.
    server.handler = lambda body: reply(body, "schema-breaking")
    tools = Tools()
    patched = instructor.from_openai(ts.wrap(server.client(), guard=True))
    with pytest.raises(Exception) as caught:
        for result in extract(patched, Add, [{"role": "user", "content": QUESTION}], how):
            tools.add(**result.model_dump())
    assert tools.runs == []
    assert "valid integer" in str(caught.value)


BLOCKS = interop_blocks(ROOT / "docs" / "frameworks.md", "instructor")


@pytest.mark.parametrize("code", [code for _, code in BLOCKS], ids=[block_id for block_id, _ in BLOCKS])
def test_the_docs_examples_run(code: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == """refused: [('invalid', '{"city": "Par')]"""


def test_the_docs_have_an_instructor_example() -> None:
    assert BLOCKS
