"""Recorded exchanges with the local server, replayed offline by vcrpy.

The first run records ``cassettes/*.yaml`` from :class:`toolstitch.testing.LocalServer`; later runs
(CI included) replay them with ``record_mode="none"`` against an address where nothing listens, so the
test proves the stitching works on the recorded bytes alone. Authorization headers are filtered out.
Delete a cassette to record it again.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
import vcr

import toolstitch as ts
from tests.conftest import ROOT, offered
from tests.core.test_accumulator import seed_stream
from toolstitch.testing import LocalServer, StreamScript, tool_call_chunks

CASSETTES = ROOT / "cassettes"
# Cassettes match on method and path only: the recording server's port is ephemeral.
_vcr = vcr.VCR(
    cassette_library_dir=str(CASSETTES),
    match_on=["method", "path"],
    filter_headers=["authorization", "api-key", "openai-organization", "openai-project"],
    decode_compressed_response=True,
)

PARALLEL = [
    ("call_w1", "get_weather", '{"city": "Zürich", "unit": "c"}'),
    ("call_w2", "get_weather", '{"city": "東京", "unit": "c"}'),
    ("call_fx", "convert_currency", '{"amount": 12.5, "from": "EUR", "to": "JPY"}'),
]
CASES: dict[str, tuple[list[Any], list[dict[str, Any]]]] = {
    "seed_two_interleaved_calls": (seed_stream(), [{"city": "深圳"}, {"city": "上海", "unit": '"u"'}]),
    "parallel_three_calls": (
        tool_call_chunks(
            PARALLEL, pieces=6, usage={"prompt_tokens": 9, "completion_tokens": 30, "total_tokens": 39}
        ),
        [
            {"city": "Zürich", "unit": "c"},
            {"city": "東京", "unit": "c"},
            {"amount": 12.5, "from": "EUR", "to": "JPY"},
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cassette_replays_to_the_same_calls(name: str) -> None:
    chunks, expected = CASES[name]
    path = CASSETTES / f"{name}.yaml"
    if path.exists():
        client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-replay", max_retries=0)
        with _vcr.use_cassette(path.name, record_mode="none"):
            calls = _run(client)
    else:
        with LocalServer() as server:
            server.enqueue(StreamScript(chunks, fragment=7))
            with _vcr.use_cassette(path.name, record_mode="once"):
                calls = _run(server.client(api_key="sk-secret-never-recorded"))
    assert [c.parsed for c in calls] == expected
    assert all(c.ready for c in calls)
    text = path.read_text()
    assert "sk-secret-never-recorded" not in text and "sk-replay" not in text


# The tools the cases call, offered so their calls can be ready (a request offering none refuses them).
TOOLS = offered(["get_weather", "convert_currency"])


def _run(client: openai.OpenAI) -> list[ts.ToolCall]:
    stream = ts.wrap(client).chat.completions.create(
        model="test-model", messages=[{"role": "user", "content": "hi"}], tools=TOOLS, stream=True
    )
    stream.get_final_completion()
    return stream.tool_calls
