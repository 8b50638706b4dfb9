"""Mutated real streams over real HTTP, through ``ts.wrap`` and the real ``openai`` client.

The same mutations as ``tests/core/test_adversarial_mutations.py`` (hostile values anywhere, dropped
keys, duplicated, reordered and missing chunks), encoded as a server would send them (JSON escapes for
lone surrogates, ``NaN`` literals), served by :class:`toolstitch.testing.LocalServer`, sometimes
re-cut into tiny writes and sometimes with the connection dropped mid-body, read sync and async.

Whatever arrives: iterating raises nothing but the SDK's own errors; ``get_final_completion()``
returns a completion that dumps to JSON, or raises ``IncompleteStreamError``; a ``ready`` call is
one the request offered, with arguments valid against its schema, and never after a cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolstitch as ts
from tests.conftest import examples
from tests.core.test_adversarial_mutations import STREAMS, _finished_choices, _mutate
from toolstitch.testing import LocalServer, StreamScript


@pytest.fixture(scope="module")
def shared_server() -> Iterator[LocalServer]:
    with LocalServer() as srv:
        yield srv


def _wire(chunks: list[Any]) -> list[Any]:
    """Each chunk as the server writes it: ASCII JSON, so lone surrogates travel as escapes."""
    return [f"data: {json.dumps(c)}\n\n" for c in chunks]


def _check_calls(stream: Any, tools: list[Any] | None, cut: bool) -> None:
    schemas = {t["function"]["name"]: t["function"].get("parameters", {}) for t in tools or []}
    for call in stream.tool_calls:
        if call.status != "ready":
            continue
        assert not cut, call  # cut here means: no finish_reason was sent
        value = json.loads(call.arguments)
        assert isinstance(value, dict)
        if tools is not None:
            assert call.name in schemas
            jsonschema.validate(value, schemas[call.name])


def _check_completion(completion: Any) -> None:
    completion.model_dump_json()
    for i in range(len(completion.choices)):
        ts.validate_history([{"role": "user", "content": "hi"}, ts.assistant_message(completion, choice=i)])


def _script(data: st.DataObject) -> tuple[StreamScript, list[Any] | None, bool]:
    _, chunks, tools = STREAMS[data.draw(st.integers(0, len(STREAMS) - 1))]
    mutated = _mutate(chunks, data)
    items = _wire(mutated)
    small = sum(len(i) for i in items) < 20_000  # tiny writes of a megabyte would take minutes
    fragment = data.draw(st.sampled_from([None, 1, 7])) if small else None
    cut = data.draw(st.booleans())
    cut_after = data.draw(st.integers(0, len(items))) if cut else None
    sent = mutated if cut_after is None else mutated[:cut_after]
    # A call may be ready only when a finish_reason reached the client before any cut.
    return StreamScript(items, fragment=fragment, cut_after=cut_after), tools, not _finished_choices(sent)


def _kwargs(tools: list[Any] | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    if tools is not None:
        kwargs["tools"] = (t for t in tools)  # an iterable, read once by wrap
    return kwargs


@settings(max_examples=examples(30), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_streams_over_http_sync(shared_server: LocalServer, data: st.DataObject) -> None:
    script, tools, cut = _script(data)
    shared_server.enqueue(script)
    client = ts.wrap(shared_server.client(max_retries=0))
    stream = client.chat.completions.create(**_kwargs(tools))
    try:
        for _ in stream:
            pass
    except openai.OpenAIError:
        pass
    _check_calls(stream, tools, cut)
    with contextlib.suppress(ts.IncompleteStreamError):
        _check_completion(stream.get_final_completion())


@settings(max_examples=examples(30), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_streams_over_http_async(shared_server: LocalServer, data: st.DataObject) -> None:
    script, tools, cut = _script(data)
    shared_server.enqueue(script)

    async def run() -> Any:
        client = ts.wrap(shared_server.async_client(max_retries=0))
        stream = await client.chat.completions.create(**_kwargs(tools))
        try:
            async for _ in stream:
                pass
        except openai.OpenAIError:
            pass
        _check_calls(stream, tools, cut)
        with contextlib.suppress(ts.IncompleteStreamError):
            _check_completion(await stream.get_final_completion())

    asyncio.run(run())
