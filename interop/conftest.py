"""What every framework is tried with: one streamed two-step tool conversation, and two unsafe streams.

The conversation: the model streams a call ``get_weather({"city": "Paris"})``, the framework runs
the tool, sends its result back, and the model streams the answer ``It is sunny in Paris.``. Each
framework runs it with its plain client and with ``ts.wrap(client, record=folder)``: the requests the
server receives, the tool runs and the final output must be the same, and every stream must have
been stitched (one recording per request, whose replay holds the call, ``ready``).

The unsafe streams each finish with ``finish_reason: "tool_calls"``: a call whose arguments were cut
off (``{"city": "Par``) and one whose arguments break the tool's schema (``"a": "17"`` for an
integer). With ``ts.wrap(client, guard=True)`` the framework must run no tool and surface
``UnsafeToolCallError`` (itself, or as the cause of its own error).

Everything runs against toolstitch.testing's local server over real HTTP: nothing here reaches the
network (LiteLLM reads its bundled model cost map; tracing is off).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_TELEMETRY", "False")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
os.environ.pop("OPENAI_API_KEY", None)
os.environ.pop("OPENAI_BASE_URL", None)

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import toolstitch as ts
from toolstitch.errors import UnsafeToolCallError
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks

ROOT = Path(__file__).resolve().parent.parent

MODEL = "test-model"
QUESTION = "What is the weather in Paris?"
CALL = tool_call_chunks([("call_1", "get_weather", '{"city": "Paris"}')])
ANSWER_TEXT = "It is sunny in Paris."
ANSWER = [
    chunk(delta={"role": "assistant", "content": "It is sunny "}),
    chunk(delta={"content": "in Paris."}),
    chunk(delta={}, finish_reason="stop"),
]
#: A structured answer, as JSON text in ``content`` (``response_format``) and as a call to a tool.
STRUCTURED = {"city": "Paris", "sky": "sunny"}
STRUCTURED_TEXT = [
    chunk(delta={"role": "assistant", "content": '{"city": "Paris", '}),
    chunk(delta={"content": '"sky": "sunny"}'}),
    chunk(delta={}, finish_reason="stop"),
]


def structured_call(name: str) -> list[dict[str, Any]]:
    """The structured answer as a call to the tool ``name`` that a framework offers for it."""
    return tool_call_chunks([("call_2", name, '{"city": "Paris", "sky": "sunny"}')])


#: The tool runs the conversation makes, as (tool, arguments).
RUNS = [("get_weather", {"city": "Paris"})]
#: Streams no framework may act on, each finishing with ``finish_reason: "tool_calls"``.
UNSAFE = {
    "truncated": tool_call_chunks([("call_1", "get_weather", '{"city": "Par')]),
    "schema-breaking": tool_call_chunks([("call_1", "add", '{"a": "17", "b": 1}')]),
}

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
#: The tools as a Chat Completions request offers them (for the frameworks that take them so).
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA, "strict": True}},
    {"type": "function", "function": {"name": "add", "parameters": ADD_SCHEMA, "strict": True}},
]


@dataclass
class Tools:
    """The two tools, recording every run."""

    runs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def get_weather(self, city: str) -> str:
        """The weather in a city."""
        self.runs.append(("get_weather", {"city": city}))
        return f"sunny in {city}"

    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        self.runs.append(("add", {"a": a, "b": b}))
        return a + b

    def run(self, name: str, arguments: dict[str, Any]) -> Any:
        return getattr(self, name)(**arguments)


@dataclass
class Conversation:
    """What one run of the conversation did: the requests the server got, the tools that ran, the
    final output, and (wrapped) the folder the streams were recorded to."""

    requests: list[dict[str, Any]]
    runs: list[tuple[str, dict[str, Any]]]
    output: Any
    recorded: Path | None = None


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer() as running:
        yield running


def enqueue_conversation(server: LocalServer) -> int:
    """Queue the two streams of the conversation; the number of requests made so far."""
    server.enqueue(StreamScript(CALL), StreamScript(ANSWER))
    return len(server.requests)


def assert_same_and_stitched(
    plain: Conversation,
    wrapped: Conversation,
    *,
    runs: list[tuple[str, dict[str, Any]]] = RUNS,
    calls: list[tuple[str, str, Any]] | None = None,
) -> None:
    """The wrapped run made the same requests, the same tool runs and the same output as the plain
    one, and every one of its streams was stitched: one recording per request, each completed, whose
    calls are ``calls`` (by default the conversation's ``get_weather`` call, ``ready``)."""
    assert len(plain.requests) == len(wrapped.requests) >= 1, plain.requests
    assert wrapped.requests == plain.requests
    assert plain.runs == wrapped.runs == runs
    assert plain.output == wrapped.output
    assert wrapped.recorded is not None
    replays = [ts.replay(path) for path in sorted(wrapped.recorded.glob("*.jsonl"))]
    assert len(replays) == len(wrapped.requests)
    assert all(r.outcome == "completed" for r in replays), [r.outcome for r in replays]
    got = sorted((c.name, c.status, c.parsed) for r in replays for c in r.calls())
    want = [("get_weather", "ready", {"city": "Paris"})] if calls is None else calls
    assert got == sorted(want)


def surfaced(error: BaseException) -> UnsafeToolCallError:
    """The guard's error inside what a framework raised: the error itself, or what its own error
    was raised from (``__cause__`` / ``__context__``, exception groups), found a few levels deep."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [error]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, UnsafeToolCallError):
            return current
        todo += [current.__cause__, current.__context__, *getattr(current, "exceptions", ())]
    raise AssertionError(f"no UnsafeToolCallError in {error!r}") from error


def assert_refused(error: BaseException, case: str, tools: Tools, server: LocalServer, sent: int) -> None:
    """The framework ran nothing, made one request, and surfaced the guard's error for ``case``."""
    assert tools.runs == []
    assert len(server.requests) == sent + 1  # no retry, no second step
    found = surfaced(error)
    assert [c.status for c in found.tool_calls] == ["invalid"]
    why = "MalformedArguments" if case == "truncated" else "SchemaViolation"
    assert type(found.tool_calls[0].error).__name__ == why


# ------------------------------------------------------------------------- docs/frameworks.md

_FENCE = re.compile(r"^(`{3,})(.*)$")


def interop_blocks(page: Path, env: str) -> list[tuple[str, str]]:
    """``(id, code)`` of the blocks of ``page`` fenced ```` ```python interop ```` (run in the
    frameworks' environment) or ```` ```python interop instructor ```` (instructor's own)."""
    found = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        ticks, info = fence.group(1), fence.group(2).split()
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != ticks:
            end += 1
        if info[:2] == ["python", "interop"] and (
            info[2:] == [env] or (not info[2:] and env == "frameworks")
        ):
            found.append(
                (f"{page.relative_to(ROOT).as_posix()}:{i + 1}", "\n".join(lines[i + 1 : end]) + "\n")
            )
        i = end + 1
    return found


def pytest_configure(config: pytest.Config) -> None:
    # LiteLLM's own TypedDicts make pydantic warn about ReadOnly items when its types load: theirs.
    config.addinivalue_line("filterwarnings", r"ignore:Items? .* using the `ReadOnly` qualifier:UserWarning")
