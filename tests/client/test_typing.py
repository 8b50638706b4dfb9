"""``wrap`` is typed: mypy sees the wrapped client as the client's own type and the stream as stitched.

One mypy run over a small snippet of ``reveal_type`` calls; each revealed type is checked. The run
uses the repository's mypy settings and its cache (``.mypy_cache``), so a warm run takes a second.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import toolstitch
from tests.conftest import ROOT

SNIPPET = """
from collections.abc import AsyncIterator

import openai
from openai.types.chat import ChatCompletionChunk
import toolstitch as ts

async def chunks() -> AsyncIterator[dict[str, object]]:
    yield {}

async def main() -> None:
    sync = ts.wrap(openai.OpenAI(api_key="x"))
    reveal_type(sync)  # OpenAI
    reveal_type(sync.chat.completions.create(model="m", messages=[], stream=True))  # stream
    reveal_type(sync.chat.completions.create(model="m", messages=[]))  # completion
    reveal_type(sync.with_options(timeout=5))  # with_options
    reveal_type(sync.models.list)  # untouched
    with sync.chat.completions.create(model="m", messages=[], stream=True) as stream:
        reveal_type(stream.tool_calls)  # calls
        reveal_type(stream.get_final_completion())  # final

    aio = ts.wrap(openai.AsyncOpenAI(api_key="x"))
    reveal_type(aio)  # AsyncOpenAI
    reveal_type(await aio.chat.completions.create(model="m", messages=[], stream=True))  # async stream
    reveal_type(await aio.chat.completions.create(model="m", messages=[]))  # async completion

    azure = ts.wrap(openai.AzureOpenAI(api_key="x", api_version="v", azure_endpoint="https://e"))
    reveal_type(azure)  # AzureOpenAI
    reveal_type(azure.chat.completions.create(model="m", messages=[], stream=True))  # azure stream
    aazure = ts.wrap(openai.AsyncAzureOpenAI(api_key="x", api_version="v", azure_endpoint="https://e"))
    reveal_type(aazure)  # AsyncAzureOpenAI
    reveal_type(ts.wrap(sync, limits=ts.Limits()))  # rewrap

    either: openai.OpenAI | openai.AsyncOpenAI = sync
    reveal_type(ts.wrap(either))  # union

    with ts.wrap(openai.OpenAI(api_key="x")) as entered:
        reveal_type(entered)  # entered
    async with ts.wrap(openai.AsyncOpenAI(api_key="x")) as aentered:
        reveal_type(aentered)  # async entered
    reveal_type(sync.copy(max_retries=1))  # copy

    sdk_stream: openai.Stream[ChatCompletionChunk] = sync.chat.completions.create(
        model="m", messages=[], stream=True
    )  # a stitched stream is an openai.Stream
    sdk_astream: openai.AsyncStream[ChatCompletionChunk] = await aio.chat.completions.create(
        model="m", messages=[], stream=True
    )

    with sync.chat.completions.stream(model="m", messages=[]) as helper:
        reveal_type(helper.tool_calls)  # helper calls
        reveal_type(helper.toolstitch)  # helper stitched
        helper_stream: openai.lib.streaming.chat.ChatCompletionStream[object] = helper
    async with aio.chat.completions.stream(model="m", messages=[]) as ahelper:
        reveal_type(ahelper.toolstitch)  # async helper stitched
    reveal_type(ts.stitch([{"choices": []}]))  # stitch
    reveal_type(ts.stitch(chunks()))  # async stitch
    reveal_type(ts.calls_of({}))  # calls_of
    for event in sync.chat.completions.create(model="m", messages=[], stream=True).events():
        reveal_type(event)  # event

    reveal_type(sync.responses.create(model="m", input="x", stream=True))  # responses stream
    reveal_type(sync.responses.create(model="m", input="x"))  # response
    reveal_type(await aio.responses.create(model="m", input="x", stream=True))  # async responses stream
    with sync.responses.create(model="m", input="x", stream=True) as rstream:
        reveal_type(rstream.get_final_response())  # final response
    with sync.responses.stream(model="m", input="x") as rhelper:
        reveal_type(rhelper.toolstitch)  # responses helper stitched

    ok: openai.OpenAI = sync  # the wrapped client is usable where the client's type is expected
    ok_async: openai.AsyncOpenAI = aio
    ok_azure: openai.AzureOpenAI = azure
"""

EXPECTED: dict[str, str | tuple[str, ...]] = {
    "OpenAI": "toolstitch.client._types.StitchedOpenAI",
    "stream": "toolstitch.client._stream.StitchedStream",
    "completion": "openai.types.chat.chat_completion.ChatCompletion",
    "with_options": "toolstitch.client._types.StitchedOpenAI",
    "untouched": "def (",  # the SDK's own method, not Any
    "calls": "list[toolstitch.",
    "final": "openai.types.chat.chat_completion.ChatCompletion",
    "AsyncOpenAI": "toolstitch.client._types.AsyncStitchedOpenAI",
    "async stream": "toolstitch.client._stream.AsyncStitchedStream",
    "async completion": "openai.types.chat.chat_completion.ChatCompletion",
    "AzureOpenAI": "toolstitch.client._types.StitchedAzureOpenAI",
    "azure stream": "toolstitch.client._stream.StitchedStream",
    "AsyncAzureOpenAI": "toolstitch.client._types.AsyncStitchedAzureOpenAI",
    "rewrap": "toolstitch.client._types.StitchedOpenAI",
    "entered": "toolstitch.client._types.StitchedOpenAI",
    "async entered": "toolstitch.client._types.AsyncStitchedOpenAI",
    "copy": "toolstitch.client._types.StitchedOpenAI",
    "helper calls": "list[toolstitch.core._call.ToolCall]",
    "helper stitched": "toolstitch.client._stream.StitchedStream",
    "async helper stitched": "toolstitch.client._stream.AsyncStitchedStream",
    "stitch": "toolstitch.client._stream.StitchedStream",
    "async stitch": "toolstitch.client._stream.AsyncStitchedStream",
    "calls_of": "list[toolstitch.core._call.ToolCall]",
    "event": "toolstitch.core._events.ToolCallReady",
    "responses stream": "toolstitch.client._responses_stream.StitchedResponseStream",
    "response": "openai.types.responses.response.Response",
    "async responses stream": "toolstitch.client._responses_stream.AsyncStitchedResponseStream",
    "final response": "openai.types.responses.response.Response",
    "responses helper stitched": "toolstitch.client._responses_stream.StitchedResponseStream",
    "union": ("toolstitch.client._types.StitchedOpenAI", "toolstitch.client._types.AsyncStitchedOpenAI"),
}


#: What names the SDK's own ``Response``, which releases before the Responses API do not have.
SDK_RESPONSE_TYPES = ("response", "final response")
HAS_RESPONSES = importlib.util.find_spec("openai.types.responses") is not None


def test_mypy_sees_the_clients_own_type_and_the_stitched_stream(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET)
    src = Path(toolstitch.__file__).resolve().parents[1]  # the sources under test
    env = {**os.environ, "MYPYPATH": str(src)}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), str(snippet)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    out = result.stdout + result.stderr
    lines = SNIPPET.splitlines()
    revealed: dict[str, str] = {}
    for match in re.finditer(r"snippet\.py:(\d+): note: Revealed type is \"(.*)\"", out):
        comment = lines[int(match.group(1)) - 1].split("#")[-1].strip()
        revealed[comment] = match.group(2)
    assert set(revealed) == set(EXPECTED), out
    for what, expected in EXPECTED.items():
        if what in SDK_RESPONSE_TYPES and not HAS_RESPONSES:
            # An openai release before the Responses API (the 1.55.3 floor) has no Response type
            # to name: the stitched streams are still typed, their final response is Any.
            continue
        for part in (expected,) if isinstance(expected, str) else expected:
            assert part in revealed[what], (what, revealed[what])
    errors = [line for line in out.splitlines() if "snippet.py" in line and ": error:" in line]
    assert errors == [], out
