"""The run loop against a hostile model, over real HTTP (``toolstitch.testing.LocalServer``).

What a user relies on: a call whose arguments did not arrive exactly, or that names a tool the
request did not offer, never runs; 200 parallel calls each run once; a call the model repeats with
the same id in a later step is answered from the ledger, not run again; a stream cut mid-body runs
nothing from that attempt, and the retry runs each call once. Only documented errors come out.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.tools._support import Recorder, calls_reply, text_reply, tool_messages_of, user
from toolstitch.errors import ToolstitchError
from toolstitch.history import validate_history
from toolstitch.loop import RetryPolicy, arun, run
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks
from toolstitch.tools import Toolbox, tool


def _box(ran: Recorder) -> Toolbox:
    @tool
    def keep(p: str) -> str:
        """Keep p."""
        ran.add("keep", p)
        return f"kept {p}"

    return Toolbox([keep])


def _go(mode: str, server: LocalServer, box: Toolbox, **kw: Any) -> Any:
    if mode == "sync":
        with server.client(max_retries=0) as client:
            return run(client, model="m", messages=user(), toolbox=box, **kw)

    async def main() -> Any:
        async with server.async_client(max_retries=0) as client:
            return await arun(client, model="m", messages=user(), toolbox=box, **kw)

    return asyncio.run(main())


def _raw_call(call_id: str, name: str, raw_arguments_json: str) -> str:
    """An SSE data line whose arguments string is given as raw JSON text (escapes kept)."""
    return (
        '{"id":"x","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,'
        '"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"' + call_id + '","type":"function",'
        '"function":{"name":"' + name + '","arguments":' + raw_arguments_json + "}}]},"
        '"finish_reason":null}]}'
    )


def _finish() -> dict[str, Any]:
    return chunk(delta={}, finish_reason="tool_calls")


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    "raw",
    [
        json.dumps('{"p": "/data/old\\udc80"}'),  # a lone surrogate escape inside the JSON text
        '"{\\"p\\": \\"/data/old\\udc80\\"}"',  # the JSON string itself carries the lone surrogate
        json.dumps('{"p": "x", "p": "y"}'),
        json.dumps('{"p": 1}'),
        json.dumps('{"p": "x"} {"p": "y"}'),
    ],
    ids=["escaped", "raw-surrogate", "duplicate-key", "wrong-type", "two-values"],
)
def test_hostile_arguments_never_run_altered(server: LocalServer, mode: str, raw: str) -> None:
    ran = Recorder()
    answers = iter([StreamScript([_raw_call("c1", "keep", raw), _finish()])])
    server.handler = lambda body: next(answers, text_reply("done"))
    with _box(ran) as box:
        try:
            result = _go(mode, server, box, max_steps=3)
        except ToolstitchError:
            assert ran.calls == []
            return
    for _, p in ran.calls:  # whatever ran, ran on exactly what arrived
        assert p in ("/data/old\udc80",), p
    assert result.stop_reason in ("done", "max_steps", "max_corrections")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_unknown_tools_and_two_hundred_parallel_calls_run_only_what_may_run(
    server: LocalServer, mode: str
) -> None:
    ran = Recorder()
    calls = [(f"c{i}", "keep", json.dumps({"p": str(i)})) for i in range(200)]
    calls += [("u1", "rm_rf", '{"p": "/"}'), ("u2", "keep\u0000", '{"p": "z"}'), ("u3", "", "{}")]
    answers = iter([calls_reply(calls)])
    server.handler = lambda body: next(answers, text_reply("done"))
    with _box(ran) as box:
        result = _go(mode, server, box, max_steps=3)
    # Limits.max_calls_per_choice (128 by default): the calls beyond it are refused, never run.
    assert sorted(int(p) for _, p in ran.calls) == list(range(128))
    assert result.stop_reason == "done"
    statuses = {r.call.id: r.status for r in result.results}
    assert all(statuses[f"c{i}"] == "ok" for i in range(128))
    assert all(statuses.get(f"c{i}") != "ok" for i in range(128, 200))
    assert all(statuses.get(u) != "ok" for u in ("u1", "u2", "u3"))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_id_reused_in_a_later_step_is_a_new_call_with_a_fresh_id(server: LocalServer, mode: str) -> None:
    # Quirk Q39: TGI and SGLang send "0" for every call, so an id seen in an earlier turn is a new
    # request of the model (it asked again), renamed in the history so that ids stay unique.
    ran = Recorder()
    same = [("rep", "keep", '{"p": "again"}')]
    answers = iter([calls_reply(same), calls_reply(same), calls_reply(same)])
    server.handler = lambda body: next(answers, text_reply("done"))
    with _box(ran) as box:
        result = _go(mode, server, box, max_steps=6)
    assert ran.calls == [("keep", "again")] * 3
    assert validate_history(result.messages) == []
    ids = [m["tool_call_id"] for m in result.messages if isinstance(m, dict) and m.get("role") == "tool"]
    assert len(set(ids)) == 3


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stream_cut_mid_body_runs_nothing_and_the_retry_runs_once(server: LocalServer, mode: str) -> None:
    ran = Recorder()
    complete_call = tool_call_chunks([("c1", "keep", '{"p": "a"}')], finish_reason=None)
    cut = StreamScript([*complete_call, chunk(delta={"content": "more"})], cut_after=len(complete_call))
    seen: list[int] = []

    def handler(body: dict[str, Any]) -> StreamScript:
        seen.append(len(tool_messages_of(body)))
        if len(seen) == 1:
            return cut
        if not tool_messages_of(body):
            return calls_reply([("c1", "keep", '{"p": "a"}')])
        return text_reply("done")

    server.handler = handler
    with _box(ran) as box:
        result = _go(mode, server, box, retry=RetryPolicy(), eager=True)
    assert ran.calls == [("keep", "a")]
    assert result.stop_reason == "done"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stream_cut_on_every_attempt_ends_in_a_documented_error(server: LocalServer, mode: str) -> None:
    ran = Recorder()
    complete_call = tool_call_chunks([("c1", "keep", '{"p": "a"}')], finish_reason=None)
    server.handler = lambda body: StreamScript(complete_call, cut_after=len(complete_call))
    with _box(ran) as box:
        try:
            _go(mode, server, box, eager=True)
        except Exception as exc:
            import openai

            assert isinstance(exc, (ToolstitchError, openai.APIError)), repr(exc)
    assert ran.calls == []
