"""A background Responses stream whose connection drops resumes by itself, over real HTTP.

The real ``openai`` client against the project's local server on 127.0.0.1, which keeps a
background response whole, drops its stream after a chosen byte and answers ``GET
/v1/responses/{id}?stream=true&starting_after=N`` as OpenAI documents (or as a hostile server
would: another response, a replay with other text, a gap, a stream that never ends, one that
drops again at once). What must hold: the SDK's own events, none twice; calls that span the cut end
as on an unbroken stream; every event that cannot be trusted refuses the open calls; bounded
requests and time; the original error when no resume succeeds.
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any

import openai
import pytest

import toolstitch as ts
from toolstitch.client import ResumePolicy
from toolstitch.client._resume import can_resume
from toolstitch.errors import ResumeUnavailableError
from toolstitch.testing import ErrorReply, LocalServer, StreamScript, response_events, sse_body

_SDK_RESPONSES = getattr(openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9"), "responses", None)
RESUMABLE = _SDK_RESPONSES is not None and can_resume(_SDK_RESPONSES.retrieve)
needs_resume = pytest.mark.skipif(not RESUMABLE, reason="this openai release cannot stream retrieve")
needs_responses = pytest.mark.skipif(
    _SDK_RESPONSES is None, reason="this openai release has no Responses API"
)

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": False,
}
TIME = {"type": "function", "name": "get_time", "parameters": {"type": "object"}, "strict": False}
TOOLS = [WEATHER, TIME]
CALLS = [("call_1", "get_weather", '{"city": "Zürich"}'), ("call_2", "get_time", '{"tz": "Europe/Zurich"}')]
RID = "resp_bg"
EVENTS = response_events(CALLS, text="Looking.", id=RID, background=True, pieces=4)
BODY = len(sse_body(EVENTS, done=False))
CALL_1 = next(n for n, e in enumerate(EVENTS) if e.get("item", {}).get("call_id") == "call_1")
"""The number of the event that opens call_1."""
FAST = ResumePolicy(attempts=3, initial=0.01, maximum=0.05, timeout=5.0)


def offset_of(events: list[dict[str, Any]], number: int) -> int:
    """The byte where event ``number`` starts (a cut there, plus a few bytes, is inside it)."""
    return len(sse_body(events[:number], done=False))


def create(client: Any, **kw: Any) -> Any:
    return client.responses.create(model="m", input="hi", tools=TOOLS, stream=True, **kw)


def unbroken(server: LocalServer) -> tuple[list[Any], Any, list[Any]]:
    server.enqueue(StreamScript.responses(EVENTS))
    stream = create(ts.wrap(server.client()), background=True)
    events = list(stream)
    return events, stream.get_final_response(), stream.tool_calls


def calls_of(stream: Any) -> list[tuple[Any, ...]]:
    return [(c.id, c.name, c.status, c.arguments, c.parsed) for c in stream.tool_calls]


# --------------------------------------------------------------------------- resuming


@needs_resume
@pytest.mark.parametrize("where", [offset_of(EVENTS, 3) + 5, offset_of(EVENTS, 12) + 40, BODY - 20])
def test_a_cut_stream_resumes_with_the_sdks_events_none_twice(server: LocalServer, where: int) -> None:
    plain_events, plain_response, plain_calls = unbroken(server)
    server.requests.clear()
    server.enqueue(StreamScript.responses(EVENTS, cut_after_bytes=where))
    stream = create(ts.wrap(server.client(), resume=FAST), background=True)
    events = list(stream)
    assert [type(e) for e in events] == [type(e) for e in plain_events]
    assert [e.model_dump() for e in events] == [e.model_dump() for e in plain_events]
    numbers = [e.sequence_number for e in events]
    assert numbers == sorted(set(numbers))
    assert calls_of(stream) == [(c.id, c.name, c.status, c.arguments, c.parsed) for c in plain_calls]
    assert all(c.status == "ready" for c in stream.tool_calls)
    assert stream.get_final_response().model_dump() == plain_response.model_dump()
    # One request for the response, one retrieve for the rest: nothing was generated twice.
    assert len(server.requests) == 1
    [retrieve] = server.retrieves
    [resume] = stream.resumes
    assert retrieve == {"id": RID, "stream": True, "starting_after": str(resume.after)}
    assert resume.resumed and resume.requests == 1 and isinstance(resume.error, openai.APIConnectionError)
    assert "stream_resumed" in [a.code for a in stream.anomalies]


@needs_resume
def test_every_cut_point_gives_the_same_calls(server: LocalServer) -> None:
    """A cut at any byte (inside an event, a line, a character) ends as the unbroken stream."""
    _, _, plain_calls = unbroken(server)
    expected = [(c.id, c.status, c.arguments) for c in plain_calls]
    client = ts.wrap(server.client(), resume=FAST)
    for where in range(offset_of(EVENTS, 1) + 1, BODY, 173):  # after response.created: its id
        server.enqueue(StreamScript.responses(EVENTS, cut_after_bytes=where))
        stream = create(client, background=True)
        numbers = [e.sequence_number for e in stream]
        assert numbers == list(range(len(EVENTS))), where
        assert [(c.id, c.status, c.arguments) for c in stream.tool_calls] == expected, where


@needs_resume
async def test_the_async_twin_resumes_too(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(EVENTS, cut_after_bytes=offset_of(EVENTS, 14) + 7))
    client = ts.wrap(server.async_client(), resume=FAST)
    stream = await create(client, background=True)
    numbers = [e.sequence_number async for e in stream]
    assert numbers == list(range(len(EVENTS)))
    assert [(c.id, c.status) for c in stream.tool_calls] == [("call_1", "ready"), ("call_2", "ready")]
    assert len(stream.resumes) == 1 and len(server.retrieves) == 1 and len(server.requests) == 1
    assert (await stream.get_final_response()).status == "completed"


@needs_resume
def test_a_stream_cut_twice_resumes_twice(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(EVENTS, cut_after_bytes=offset_of(EVENTS, 5) + 3))
    server.enqueue_retrieve(lambda events: StreamScript.responses(events, cut_after_bytes=900))
    stream = create(ts.wrap(server.client(), resume=FAST), background=True)
    assert [e.sequence_number for e in stream] == list(range(len(EVENTS)))
    assert [r.after for r in stream.resumes] == [int(r["starting_after"]) for r in server.retrieves]
    assert len(stream.resumes) == 2 and all(c.status == "ready" for c in stream.tool_calls)


@needs_responses
def test_resume_false_reports_the_cut_as_before(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(EVENTS, cut_after_bytes=offset_of(EVENTS, 12)))
    # extra_body: releases before background mode (1.66.0) send it too
    stream = create(ts.wrap(server.client(), resume=False), extra_body={"background": True})
    with pytest.raises(openai.APIConnectionError):
        list(stream)
    assert {c.status for c in stream.tool_calls} == {"incomplete"}
    assert server.retrieves == [] and stream.resumes == []


@needs_responses
def test_without_background_a_cut_is_reported_as_before(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(EVENTS, cut_after_bytes=offset_of(EVENTS, 12)))
    stream = create(ts.wrap(server.client()))
    with pytest.raises(openai.APIConnectionError):
        list(stream)
    assert {c.status for c in stream.tool_calls} == {"incomplete"}
    assert server.retrieves == []


@needs_resume
def test_when_every_attempt_fails_the_original_error_reaches_the_caller(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(EVENTS, cut_after_bytes=offset_of(EVENTS, 12)))
    server.enqueue_retrieve(*[ts_error(503)] * FAST.attempts)
    stream = create(ts.wrap(server.client(), resume=FAST), background=True)
    with pytest.raises(openai.APIConnectionError) as caught:
        list(stream)
    assert caught.value is stream.resumes[0].error
    assert isinstance(stream.resumes[0].failure, openai.InternalServerError)
    assert len(server.retrieves) == FAST.attempts
    assert {c.status for c in stream.tool_calls} == {"incomplete"}


def ts_error(status: int) -> ErrorReply:
    return ErrorReply(status)


@needs_resume
def test_an_unknown_response_is_not_asked_again(server: LocalServer) -> None:
    """A 404 will not change: one retrieve, then the original error."""
    server.enqueue(StreamScript.responses(EVENTS, cut_after_bytes=offset_of(EVENTS, 12)))
    server.enqueue_retrieve(ts_error(404))
    stream = create(ts.wrap(server.client(), resume=FAST), background=True)
    with pytest.raises(openai.APIConnectionError):
        list(stream)
    assert len(server.retrieves) == 1


@needs_resume
def test_a_cut_before_the_response_id_is_reported_as_before(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(EVENTS, cut_after_bytes=10))
    stream = create(ts.wrap(server.client(), resume=FAST), background=True)
    with pytest.raises(openai.APIConnectionError):
        list(stream)
    assert server.retrieves == []


# --------------------------------------------------------------------------- hostile servers


def cut_run(
    server: LocalServer, *retrieves: Any, at: int = 12, policy: ResumePolicy = FAST, client: Any = None
) -> Any:
    """A stream cut inside event ``at`` whose resumes are answered by ``retrieves``."""
    server.enqueue(StreamScript.responses(EVENTS, cut_after_bytes=offset_of(EVENTS, at) + 3))
    server.enqueue_retrieve(*retrieves)
    return create(ts.wrap(client or server.client(), resume=policy), background=True)


@needs_resume
def test_a_retrieve_stream_of_another_response_refuses_the_calls(server: LocalServer) -> None:
    other = response_events(CALLS, text="Looking.", id="resp_other", background=True, pieces=4)
    stream = cut_run(server, lambda events: StreamScript.responses(other[len(other) - len(events) :]))
    with pytest.raises(openai.APIConnectionError):
        list(stream)
    assert {c.status for c in stream.tool_calls} == {"invalid"}
    assert "stream_other_response" in [a.code for a in stream.anomalies]
    assert len(server.retrieves) == 1


@needs_resume
def test_a_retrieve_stream_that_starts_before_is_deduplicated(server: LocalServer) -> None:
    """Replayed events equal to those yielded are dropped: none is yielded twice."""
    stream = cut_run(server, lambda events: StreamScript.responses(EVENTS[5:]))
    numbers = [e.sequence_number for e in stream]
    assert numbers == list(range(len(EVENTS)))
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    assert stream.resumes[0].replayed == stream.resumes[0].after - 4


@needs_resume
def test_a_retrieve_stream_that_starts_after_refuses_the_open_calls(server: LocalServer) -> None:
    """The events skipped could have been call_1's (open at the cut); call_2 opened after them."""
    stream = cut_run(server, lambda events: StreamScript.responses(events[2:]), at=CALL_1 + 1)
    list(stream)
    assert [(c.id, c.status) for c in stream.tool_calls] == [("call_1", "invalid"), ("call_2", "ready")]
    assert "stream_gap" in [a.code for a in stream.anomalies]
    assert any("never arrived" in a.message for a in stream.anomalies if a.code == "stream_gap")


@needs_resume
def test_a_replay_with_other_text_refuses_the_open_calls(server: LocalServer) -> None:
    def replay(events: list[dict[str, Any]]) -> StreamScript:
        changed = [dict(e) for e in EVENTS[CALL_1 - 1 :]]
        changed[2]["delta"] = changed[2]["delta"].upper()  # a delta of call_1 the caller has seen
        return StreamScript.responses(changed)

    stream = cut_run(server, replay, at=CALL_1 + 3)
    numbers = [e.sequence_number for e in stream]
    assert numbers == list(range(len(EVENTS)))
    assert [(c.id, c.status) for c in stream.tool_calls] == [("call_1", "invalid"), ("call_2", "ready")]
    assert "stream_replay_conflict" in [a.code for a in stream.anomalies]


@needs_resume
def test_a_retrieve_stream_that_never_ends_gets_bounded_time(server: LocalServer) -> None:
    """It sends nothing and holds the connection: each request's timeout, then the next attempt,
    then the original error; the calls stay not ready."""
    policy = ResumePolicy(attempts=2, initial=0.01, maximum=0.01, timeout=0.3)
    stall = StreamScript.responses([], stall=60)
    stream = cut_run(server, stall, stall, policy=policy)
    with pytest.raises(openai.APIConnectionError) as caught:
        list(stream)
    assert caught.value is stream.resumes[0].error
    assert len(server.retrieves) == 2
    assert {c.status for c in stream.tool_calls} == {"incomplete"}


@needs_resume
def test_a_retrieve_stream_that_never_ends_after_its_final_event_is_not_read_past_it(
    server: LocalServer,
) -> None:
    stream = cut_run(server, lambda events: StreamScript.responses(events, stall=60))
    assert [e.sequence_number for e in stream] == list(range(len(EVENTS)))
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]


@needs_resume
def test_a_retrieve_stream_that_drops_at_every_byte_ends_with_the_original_error(
    server: LocalServer,
) -> None:
    drops = [lambda events: StreamScript.responses(events, cut_after_bytes=1)] * FAST.attempts
    stream = cut_run(server, *drops)
    with pytest.raises(openai.APIConnectionError) as caught:
        list(stream)
    assert caught.value is stream.resumes[0].error
    assert len(server.retrieves) == FAST.attempts
    assert {c.status for c in stream.tool_calls} == {"incomplete"}


@needs_resume
def test_a_retrieve_stream_that_drops_after_every_event_still_ends(server: LocalServer) -> None:
    """Each resume brings one event, then drops: progress each time, so it goes on to the end."""

    def one_event(events: list[dict[str, Any]]) -> StreamScript:
        return StreamScript.responses(events, cut_after_bytes=len(sse_body(events[:1], done=False)) + 1)

    stream = cut_run(server, *[one_event] * len(EVENTS), at=len(EVENTS) - 4)
    assert [e.sequence_number for e in stream] == list(range(len(EVENTS)))
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]


# --------------------------------------------------------------------------- retrieve streams


@needs_resume
def test_retrieve_of_a_response_this_client_created_is_stitched(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(EVENTS))
    client = ts.wrap(server.client())
    list(create(client, background=True))
    again = client.responses.retrieve(RID, stream=True)
    assert isinstance(again, ts.StitchedResponseStream)
    assert [e.sequence_number for e in again] == list(range(len(EVENTS)))
    assert [c.status for c in again.tool_calls] == ["ready", "ready"]


@needs_resume
@pytest.mark.parametrize("by_keyword", [True, False], ids=["response_id=", "positional"])
def test_retrieve_by_keyword_is_stitched_and_reaches_the_sdk_as_given(
    server: LocalServer, by_keyword: bool
) -> None:
    """pydantic-ai's background mode: ``retrieve(response_id=..., stream=True, starting_after=...)``.
    A spy around the SDK's ``retrieve`` (as an instrumentation wraps it) sees the call as it was
    made, and the stream is still stitched from the event after ``starting_after``."""
    server.enqueue(StreamScript.responses(EVENTS))
    plain = server.client()
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    sdk_retrieve = plain.responses.retrieve

    @functools.wraps(sdk_retrieve)  # as wrapt keeps it: the signature says it can resume
    def spying(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, dict(kwargs)))
        return sdk_retrieve(*args, **kwargs)

    plain.responses.retrieve = spying  # type: ignore[method-assign]
    client = ts.wrap(plain)
    list(create(client, background=True))
    after = CALL_1 - 1
    if by_keyword:
        again = client.responses.retrieve(response_id=RID, stream=True, starting_after=after)
        assert seen == [((), {"response_id": RID, "stream": True, "starting_after": after})]
    else:
        again = client.responses.retrieve(RID, stream=True, starting_after=after)
        assert seen == [((RID,), {"stream": True, "starting_after": after})]
    assert isinstance(again, ts.StitchedResponseStream)
    assert [e.sequence_number for e in again] == list(range(CALL_1, len(EVENTS)))
    assert [c.status for c in again.tool_calls] == ["ready", "ready"]


@needs_resume
def test_retrieve_of_an_unknown_response_is_the_sdks(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(EVENTS))
    list(create(server.client(), background=True))  # created by a plain client
    again = ts.wrap(server.client()).responses.retrieve(RID, stream=True)
    assert not isinstance(again, ts.StitchedResponseStream)
    assert isinstance(again, openai.Stream)


@needs_resume
def test_ts_resume_holds_the_stream_to_the_given_contract(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(EVENTS))
    list(create(server.client(), background=True))
    stream = ts.resume(server.client(), RID, tools=TOOLS)
    assert [c.status for c in stream.tool_calls] == []  # nothing read yet
    assert [(c.id, c.status) for c in stream.until_done().tool_calls] == [
        ("call_1", "ready"),
        ("call_2", "ready"),
    ]
    refused = ts.resume(server.client(), RID, tools=[WEATHER]).until_done()
    assert [c.status for c in refused.tool_calls] == ["ready", "invalid"]
    with pytest.raises(TypeError, match="tools="):
        ts.resume(server.client(), RID)


@needs_resume
def test_ts_resume_from_a_sequence_number_reads_only_what_follows(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(EVENTS))
    list(create(server.client(), background=True))
    second = next(n for n, e in enumerate(EVENTS) if e.get("item", {}).get("call_id") == "call_2")
    stream = ts.resume(server.client(), RID, tools=TOOLS, starting_after=second - 1)
    numbers = [e.sequence_number for e in stream]
    assert numbers == list(range(second, len(EVENTS)))
    assert server.retrieves[-1]["starting_after"] == str(second - 1)
    # call_2 was read whole; call_1 began before the number asked for: its text is read from the
    # final response (as an item never streamed), held to the same checks.
    calls = {c.id: c for c in stream.tool_calls}
    assert calls["call_2"].status == "ready" and not calls["call_2"].anomalies
    assert "item_not_streamed" in [a.code for a in calls["call_1"].anomalies]


@needs_resume
async def test_ts_aresume_is_the_async_twin(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(EVENTS, cut_after_bytes=offset_of(EVENTS, 8)))
    client = ts.wrap(server.async_client(), resume=False)
    with pytest.raises(openai.APIConnectionError):
        async for _ in await create(client, background=True):
            pass
    stream = await ts.aresume(client, RID)  # this client created it: its request is the contract
    assert isinstance(stream, ts.AsyncStitchedResponseStream)
    await stream.until_done()
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    with pytest.raises(TypeError):
        await ts.aresume(server.client(), RID, tools=TOOLS)


def test_resume_names_are_twins() -> None:
    assert list(inspect.signature(ts.resume).parameters) == list(inspect.signature(ts.aresume).parameters)


@pytest.mark.skipif(RESUMABLE, reason="this openai release can stream retrieve")
def test_on_a_release_without_resumable_retrieve_ts_resume_says_so(server: LocalServer) -> None:
    with pytest.raises(ResumeUnavailableError):
        ts.resume(server.client(), RID, tools=TOOLS)


@needs_resume
def test_events_tell_the_refusals_of_a_resume(server: LocalServer) -> None:
    """``stream.events()`` hands out what the resume did to the calls: call_1 refused by the gap."""
    from toolstitch.events import AnomalyRecorded, ToolCallInvalid, ToolCallReady

    stream = cut_run(server, lambda events: StreamScript.responses(events[2:]), at=CALL_1 + 1)
    seen = list(stream.events())
    assert {e.call.id for e in seen if isinstance(e, ToolCallInvalid)} == {"call_1"}
    assert [e.call.id for e in seen if isinstance(e, ToolCallReady)] == ["call_2"]
    codes = [e.anomaly.code for e in seen if isinstance(e, AnomalyRecorded)]
    assert "stream_gap" in codes and codes.count("stream_resumed") == 1


@needs_resume
def test_a_retrieve_stream_that_sends_events_forever_ends_at_the_deadline(server: LocalServer) -> None:
    """New events, one after another, never the final one: the resume deadline ends it."""

    def endless(events: list[dict[str, Any]]) -> StreamScript:
        start = events[0]["sequence_number"]
        text = {"type": "response.output_text.delta", "item_id": "msg_0", "output_index": 0}
        more = [{**text, "content_index": 0, "delta": ".", "sequence_number": start + n} for n in range(5000)]
        return StreamScript.responses(more, delay=0.01)

    policy = ResumePolicy(attempts=2, initial=0.01, maximum=0.01, timeout=5.0, deadline=0.5)
    stream = cut_run(server, endless, at=CALL_1 + 2, policy=policy)
    with pytest.raises(openai.APIConnectionError) as caught:
        list(stream)
    assert caught.value is stream.resumes[0].error
    assert stream.tool_calls[0].status == "invalid"
    assert len(server.retrieves) == 1


@needs_resume
@pytest.mark.parametrize("retrieve", ["honest", "404"])
def test_a_stream_that_ends_before_the_final_event_is_resumed_too(server: LocalServer, retrieve: str) -> None:
    """A body that ends cleanly mid-response (a close-delimited body, a proxy) is a drop too: OpenAI
    ends every stream with a final event. When no resume brings the rest, it ends as it did."""
    server.enqueue(StreamScript.responses(EVENTS[: CALL_1 + 2]))
    server.enqueue_retrieve(
        StreamScript.responses(EVENTS[CALL_1 + 2 :]) if retrieve == "honest" else ts_error(404)
    )
    stream = create(ts.wrap(server.client(), resume=FAST), background=True)
    numbers = [e.sequence_number for e in stream]  # no error either way
    assert len(server.retrieves) == 1
    if retrieve == "honest":
        assert numbers == list(range(len(EVENTS)))
        assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
        assert [type(r.error).__name__ for r in stream.resumes] == ["ConnectionError"]
    else:
        assert numbers == list(range(CALL_1 + 2))
        assert {c.status for c in stream.tool_calls} == {"incomplete"}


@needs_resume
async def test_the_async_twin_resumes_a_stream_that_ended_early(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(EVENTS[: CALL_1 + 2]))
    server.enqueue_retrieve(StreamScript.responses(EVENTS[CALL_1 + 2 :]))
    stream = await create(ts.wrap(server.async_client(), resume=FAST), background=True)
    assert [e.sequence_number async for e in stream] == list(range(len(EVENTS)))
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]


# --------------------------------------------------------------------------- the client's timeout


@pytest.fixture
def sent_timeouts(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The timeout each streamed ``responses.retrieve`` request was sent with, as the SDK wrote it on
    the HTTP request (the ``timeout`` extension), for every client and ``with_options`` copy."""
    sent: list[dict[str, Any]] = []
    async_client = openai.AsyncOpenAI(api_key="x", base_url="http://127.0.0.1:9")
    for cls in (type(_SDK_RESPONSES), type(async_client.responses)):
        real = cls.retrieve
        if inspect.iscoroutinefunction(real):

            async def spy(self: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
                result = await _real(self, *args, **kwargs)
                sent.append(result.response.request.extensions["timeout"])
                return result

        else:

            def spy(self: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
                result = _real(self, *args, **kwargs)
                sent.append(result.response.request.extensions["timeout"])
                return result

        monkeypatch.setattr(cls, "retrieve", functools.wraps(real)(spy))
    return sent


def seconds(timeout: float) -> dict[str, float]:
    return {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}


RESUME = ResumePolicy(attempts=3, initial=0.01, maximum=0.05)
"""FAST without a timeout of its own: the default, the client's."""


PARTS = openai.Timeout(3.0, connect=1.0)
"""A timeout with parts of its own (the SDK's default is one: 600 s, 5 s to connect)."""


@needs_resume
@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("client", seconds(3.0)),
        ("with_options", seconds(4.0)),
        ("per_request", seconds(2.5)),
        ("policy", seconds(7.0)),
        ("sdk_default", openai.DEFAULT_TIMEOUT.as_dict()),
        ("client_parts", PARTS.as_dict()),
        ("with_options_parts", PARTS.as_dict()),
    ],
)
def test_a_resumed_request_has_the_clients_timeout(
    server: LocalServer, sent_timeouts: list[dict[str, Any]], how: str, expected: dict[str, Any]
) -> None:
    """Issue 42, item 7: ``ResumePolicy.timeout`` was 60 s per retrieve whatever the client said,
    so a resumed stream whose server went silent held a turn of a ``timeout=3`` client for minutes.
    None (the default) is the timeout the cut request was sent with; a number in the policy wins."""
    server.enqueue(StreamScript.responses(EVENTS, cut_after_bytes=offset_of(EVENTS, 12) + 3))
    timeouts = {"sdk_default": {}, "client_parts": {"timeout": PARTS}}
    sdk = server.client(**timeouts.get(how, {"timeout": 3.0}))
    policy = ResumePolicy(attempts=3, initial=0.01, maximum=0.05, timeout=7.0) if how == "policy" else RESUME
    client = ts.wrap(sdk, resume=policy)
    if how.startswith("with_options"):
        client = client.with_options(timeout=PARTS if how.endswith("parts") else 4.0)
    stream = create(client, background=True, **({"timeout": 2.5} if how == "per_request" else {}))
    assert [e.sequence_number for e in stream] == list(range(len(EVENTS)))
    assert len(stream.resumes) == 1 and len(server.retrieves) == 1
    assert sent_timeouts == [expected]


@needs_resume
async def test_the_async_twin_resumes_with_the_clients_timeout(
    server: LocalServer, sent_timeouts: list[dict[str, Any]]
) -> None:
    server.enqueue(StreamScript.responses(EVENTS, cut_after_bytes=offset_of(EVENTS, 12) + 3))
    client = ts.wrap(server.async_client(timeout=3.0), resume=RESUME)
    stream = await create(client, background=True)
    assert [e.sequence_number async for e in stream] == list(range(len(EVENTS)))
    assert sent_timeouts == [seconds(3.0)]


@needs_resume
def test_a_silent_resumed_stream_ends_with_the_clients_timeout(server: LocalServer) -> None:
    """The retrieve stream sends nothing until ``silent`` is set, which it never is while the
    stream is read (the server gives up holding after 10 s, then sends the rest: with the old 60 s
    default the resume succeeded then, and the turn was held that long). With the client's
    timeout the attempt ends with the SDK's timeout error and the cut reaches the caller."""
    silent = threading.Event()
    try:
        stream = cut_run(
            server,
            lambda events: StreamScript.responses(events, hold={0: silent}),
            policy=ResumePolicy(attempts=1),
            client=server.client(timeout=1.0),
        )
        with pytest.raises(openai.APIConnectionError) as caught:
            list(stream)
    finally:
        silent.set()  # the server's thread goes on at once
    [resume] = stream.resumes
    assert caught.value is resume.error
    assert isinstance(resume.failure, openai.APITimeoutError)
    assert resume.requests == 1
    assert len(server.retrieves) == 1
    assert {c.status for c in stream.tool_calls} == {"incomplete"}


def test_the_default_resume_timeout_is_the_clients() -> None:
    assert ResumePolicy().timeout is None
    assert ResumePolicy(timeout=2.0).timeout == 2.0
    with pytest.raises(ValueError):
        ResumePolicy(timeout=0)
