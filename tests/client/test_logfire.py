"""``wrap`` beside logfire's ``instrument_openai`` (a test-only dependency), applied before or after
``wrap``, to the real ``openai`` client over real HTTP: every entry point is still stitched, logfire
still records every request once (one span) and every streamed response once (its log holds the
tool calls, read from the chunks it saw), and toolstitch gives the same chunks and calls as without it.

How logfire instruments (``logfire/_internal/integrations/llm_providers/llm_provider.py``): given a
client, it replaces that instance's ``request`` method and sets ``_is_instrumented_by_logfire`` on it
(a second call is a no-op); given nothing, it does the same to the ``OpenAI`` and ``AsyncOpenAI``
classes. A streamed request gets a stream class of its own that records each chunk. It asserts
``issubclass(type(client), openai.OpenAI)`` (or ``AsyncOpenAI``): ``type(ts.wrap(client))`` must be a
subclass of the client's class, ``isinstance`` alone is not enough.

logfire is configured ``local=True`` (its own providers; OpenTelemetry's global ones stay unset for
the other tests), with nothing sent and nothing printed; every instance these tests patch belongs to
one test, and the ``capture`` fixture puts the classes back as they were.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

import toolstitch as ts
from tests.client.instrumented import AFTER, BEFORE, ORDERS, astitched, stitched, wrapped_in_order
from tests.client.test_dropin import ARGS, ASYNC_ENTRIES, CLIENTS, EXPECTED, HAS_HELPER, SYNC_ENTRIES
from tests.core.test_accumulator import seed_stream
from toolstitch.testing import LocalServer, StreamScript, response_events

logfire = pytest.importorskip("logfire")
logfire_testing = pytest.importorskip("logfire.testing")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

#: What logfire sets on what it instruments (and ``_request``, its name in old openai releases).
PATCHED = ("request", "_request", "_is_instrumented_by_logfire", "_original_request_method")
ABSENT = object()


class Capture:
    """A local logfire instance and what it exported."""

    def __init__(self) -> None:
        self.exporter = logfire_testing.TestExporter()
        self.logfire = logfire.configure(
            local=True,
            send_to_logfire=False,
            console=False,
            metrics=False,
            additional_span_processors=[SimpleSpanProcessor(self.exporter)],
        )

    def instrument(self, client: Any = None) -> Any:
        return self.logfire.instrument_openai(client)

    def _records(self, kind: str, template: str) -> list[Any]:
        return [
            s
            for s in self.exporter.exported_spans
            if s.attributes.get("logfire.span_type") == kind
            and str(s.attributes.get("logfire.msg_template", "")).startswith(template)
        ]

    def requests(self) -> list[Any]:
        """One finished span per instrumented request."""
        return self._records("span", "Chat Completion")

    def responses(self) -> list[Any]:
        """One log per streamed response, with what logfire read from its chunks."""
        return self._records("log", "streaming response")


@pytest.fixture
def capture() -> Iterator[Capture]:
    classes = (openai.OpenAI, openai.AsyncOpenAI)
    saved = {(cls, name): vars(cls).get(name, ABSENT) for cls in classes for name in PATCHED}
    capture = Capture()
    try:
        # logfire's newest release may not support an old openai release (it imports SDK modules
        # that did not exist yet): the one case skipped, with logfire's own words.
        with capture.instrument(openai.OpenAI(api_key="probe", base_url="http://127.0.0.1:9/v1")):
            pass
    except ImportError as exc:
        if not (exc.name or "").startswith("openai"):
            raise
        pytest.skip(f"logfire {logfire.VERSION} does not support openai {openai.__version__}: {exc}")
    yield capture
    capture.logfire.shutdown(flush=False)
    for (cls, name), value in saved.items():
        if value is ABSENT:
            if name in vars(cls):
                delattr(cls, name)
        else:
            setattr(cls, name, value)


def tool_calls_logged(capture: Capture) -> list[Any]:
    """The arguments of the tool calls logfire recorded from the one streamed response."""
    (response,) = capture.responses()  # one streamed response, recorded once
    assert response.attributes["gen_ai.response.id"] == "chatcmpl-test"
    (message,) = json.loads(response.attributes["gen_ai.output.messages"])
    return [part["arguments"] for part in message["parts"] if part["type"] == "tool_call"]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("entry", sorted(SYNC_ENTRIES))
def test_every_sync_entry_point_with_logfire(
    server: LocalServer, capture: Capture, entry: str, order: str
) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=7))
    client = wrapped_in_order(server.client(), order, capture.instrument)
    assert isinstance(client, ts.client.WrappedClient)
    stream = stitched(SYNC_ENTRIES[entry], client)
    assert [c.parsed for c in stream.tool_calls] == EXPECTED
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    (request,) = capture.requests()  # one request, instrumented once
    assert request.attributes["gen_ai.request.model"] == "test-model"
    assert tool_calls_logged(capture) == EXPECTED


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("entry", sorted(ASYNC_ENTRIES))
async def test_every_async_entry_point_with_logfire(
    server: LocalServer, capture: Capture, entry: str, order: str
) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=7))
    client = wrapped_in_order(server.async_client(), order, capture.instrument)
    stream = await astitched(ASYNC_ENTRIES[entry], client)
    assert [c.parsed for c in stream.tool_calls] == EXPECTED
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    (request,) = capture.requests()
    assert request.attributes["async"] is True
    assert tool_calls_logged(capture) == EXPECTED


@pytest.mark.parametrize("kind", sorted(CLIENTS))
async def test_every_client_class_instrumented_after_wrap(
    server: LocalServer, capture: Capture, kind: str
) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=7))
    wrapped = wrapped_in_order(CLIENTS[kind](server), AFTER, capture.instrument)
    if "Async" in kind:
        stream = await astitched(ASYNC_ENTRIES["create"], wrapped)
    else:
        stream = stitched(SYNC_ENTRIES["create"], wrapped)
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    assert len(capture.requests()) == 1
    assert tool_calls_logged(capture) == EXPECTED


def _seen(stream: Any, chunks: list[Any], completion: Any) -> dict[str, Any]:
    """What toolstitch gave for one stream: the chunks, every call, the final completion."""
    return {
        "chunks": [c.model_dump() for c in chunks],
        "calls": [(c.index, c.id, c.name, c.arguments, c.status, c.parsed) for c in stream.tool_calls],
        "completion": completion.model_dump(),
    }


@pytest.mark.parametrize("order", ORDERS)
def test_logfire_changes_nothing_toolstitch_gives(server: LocalServer, capture: Capture, order: str) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=3), StreamScript(seed_stream(), fragment=3))
    seen = []
    for client in (ts.wrap(server.client()), wrapped_in_order(server.client(), order, capture.instrument)):
        with client.chat.completions.create(**ARGS, stream=True) as stream:
            chunks = list(stream)
        seen.append(_seen(stream, chunks, stream.get_final_completion()))
    assert seen[0] == seen[1]
    assert seen[1]["calls"] and all(call[4] == "ready" for call in seen[1]["calls"])
    assert len(capture.requests()) == 1  # the uninstrumented client made the other request


@pytest.mark.parametrize("order", ORDERS)
async def test_logfire_changes_nothing_the_async_twin_gives(
    server: LocalServer, capture: Capture, order: str
) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=3), StreamScript(seed_stream(), fragment=3))
    seen = []
    for client in (
        ts.wrap(server.async_client()),
        wrapped_in_order(server.async_client(), order, capture.instrument),
    ):
        stream = await client.chat.completions.create(**ARGS, stream=True)
        async with stream:
            chunks = [c async for c in stream]
        seen.append(_seen(stream, chunks, await stream.get_final_completion()))
    assert seen[0] == seen[1]
    assert len(capture.requests()) == 1


@pytest.mark.skipif(not HAS_HELPER, reason="this openai release has no chat.completions.stream")
@pytest.mark.parametrize("order", ORDERS)
def test_the_sdk_helper_gives_the_same_events_and_calls_under_logfire(
    server: LocalServer, capture: Capture, order: str
) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=3), StreamScript(seed_stream(), fragment=3))
    seen = []
    for client in (ts.wrap(server.client()), wrapped_in_order(server.client(), order, capture.instrument)):
        with client.chat.completions.stream(**ARGS) as helper:
            events = [e.model_dump() if hasattr(e, "model_dump") else repr(e) for e in helper]
        calls = [(c.id, c.name, c.arguments, c.status) for c in helper.tool_calls]
        seen.append((events, calls))
    assert seen[0] == seen[1]
    assert [c[3] for c in seen[1][1]] == ["ready", "ready"]
    assert len(capture.requests()) == 1
    assert tool_calls_logged(capture) == EXPECTED


@pytest.mark.parametrize("first", ORDERS)
def test_instrumenting_before_and_after_wrap_instruments_once(
    server: LocalServer, capture: Capture, first: str
) -> None:
    server.enqueue(StreamScript(seed_stream()))
    plain = server.client()
    wrapped = ts.wrap(plain)
    for target in (plain, wrapped) if first == BEFORE else (wrapped, plain):
        capture.instrument(target)
    stream = stitched(SYNC_ENTRIES["create"], wrapped)
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    assert len(capture.requests()) == 1 and len(capture.responses()) == 1


@pytest.mark.parametrize("order", ORDERS)
async def test_the_async_client_instrumented_twice_is_instrumented_once(
    server: LocalServer, capture: Capture, order: str
) -> None:
    server.enqueue(StreamScript(seed_stream()))
    plain = server.async_client()
    wrapped = wrapped_in_order(plain, order, capture.instrument)
    capture.instrument(plain if order == AFTER else wrapped)
    await astitched(ASYNC_ENTRIES["create"], wrapped)
    assert len(capture.requests()) == 1 and len(capture.responses()) == 1


@pytest.mark.parametrize("order", ORDERS)
def test_leaving_the_instrument_context_uninstruments_the_wrapped_client(
    server: LocalServer, capture: Capture, order: str
) -> None:
    server.enqueue(StreamScript(seed_stream()), StreamScript(seed_stream()))
    plain = server.client()
    contexts: list[Any] = []
    wrapped = wrapped_in_order(plain, order, lambda c: contexts.append(capture.instrument(c)))
    with contexts[0]:
        stitched(SYNC_ENTRIES["create"], wrapped)
    assert len(capture.requests()) == 1
    # logfire put back what it found: the SDK's own method (after wrap: under toolstitch's
    # pass-through, which logfire read from the wrapper)
    assert inspect.unwrap(plain.request).__func__ is type(plain).request
    assert not getattr(plain, "_is_instrumented_by_logfire", False)
    stream = stitched(SYNC_ENTRIES["create"], wrapped)
    assert [c.parsed for c in stream.tool_calls] == EXPECTED
    assert len(capture.requests()) == 1  # nothing recorded any more


@pytest.mark.parametrize("order", ORDERS)
async def test_instrumenting_the_classes_covers_wrapped_clients_once(
    server: LocalServer, capture: Capture, order: str
) -> None:
    server.enqueue(StreamScript(seed_stream()), StreamScript(seed_stream()), StreamScript(seed_stream()))
    sdk_request = openai.AsyncOpenAI.request
    with capture.instrument():  # OpenAI and AsyncOpenAI themselves
        # Instrumenting the client too changes nothing: the class is instrumented already.
        wrapped = wrapped_in_order(server.async_client(), order, capture.instrument)
        await astitched(ASYNC_ENTRIES["create"], wrapped)
        stitched(SYNC_ENTRIES["create"], ts.wrap(server.client()))
        assert len(capture.requests()) == 2 and len(capture.responses()) == 2
    assert openai.AsyncOpenAI.request is sdk_request
    stream = await astitched(ASYNC_ENTRIES["create"], wrapped)
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    assert len(capture.requests()) == 2


# ---------------------------------------------------------- the same spans, plain and wrapped

_RESPONSES = hasattr(openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1"), "responses")
RESPONSE_TOOLS = [
    {"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": False}
]
RID = "resp_bg"
#: Where logfire found the call in the caller's code: not from the call's arguments (an editable
#: install of toolstitch is not skipped as a library is, so the frame may be toolstitch's own).
CODE_LOCATION = ("code.filepath", "code.lineno", "code.function")


def spans_of(capture: Capture) -> list[dict[str, Any]]:
    """The attributes of every span logfire finished, in order (the location in code left out)."""
    spans = [
        {k: v for k, v in dict(s.attributes).items() if k not in CODE_LOCATION}
        for s in capture.exporter.exported_spans
        if s.attributes.get("logfire.span_type") == "span"
    ]
    capture.exporter.clear()
    return spans


def calls_made(client: Any) -> None:
    """A streamed chat request with arguments logfire records, and, where the release has it, a
    background Responses stream and its retrieve by keyword (pydantic-ai's background mode)."""
    stream = client.chat.completions.create(
        **{**ARGS, "tools": tuple(ARGS["tools"])}, temperature=0.5, seed=3, stream=True
    )
    list(stream)
    if _RESPONSES:
        list(
            client.responses.create(model="m", input="hi", tools=RESPONSE_TOOLS, background=True, stream=True)
        )
        list(client.responses.retrieve(response_id=RID, stream=True, starting_after=2))


def scripts() -> list[Any]:
    events = response_events([("call_1", "get_weather", '{"city": "Zürich"}')], id=RID, background=True)
    return [StreamScript(seed_stream(), fragment=7), StreamScript.responses(events)]


@pytest.mark.parametrize("order", ORDERS)
def test_logfire_records_the_same_spans_plain_and_wrapped(
    server: LocalServer, capture: Capture, order: str
) -> None:
    """logfire records each request from the SDK's own request options: through a wrapped client
    they are those of a plain one, for every call (the span of ``retrieve(response_id=...)``
    included), so every attribute that comes from the call's arguments is equal."""
    server.enqueue(*scripts())
    plain = server.client()
    capture.instrument(plain)
    calls_made(plain)
    seen_plain = spans_of(capture)
    server.enqueue(*scripts())
    wrapped = wrapped_in_order(server.client(), order, capture.instrument)
    calls_made(wrapped)
    assert spans_of(capture) == seen_plain
    assert len(seen_plain) == (3 if _RESPONSES else 1)
    assert seen_plain[0]["gen_ai.request.temperature"] == 0.5  # the arguments are in them
    assert "get_weather" in seen_plain[0]["gen_ai.tool.definitions"]
    if _RESPONSES:
        assert seen_plain[2]["url"] == f"/responses/{RID}"


async def acalls_made(client: Any) -> None:
    """The async twin of :func:`calls_made`."""
    tools = tuple(ARGS["tools"])
    async for _ in await client.chat.completions.create(
        **{**ARGS, "tools": tools}, temperature=0.5, stream=True
    ):
        pass
    if _RESPONSES:
        stream = await client.responses.create(
            model="m", input="hi", tools=RESPONSE_TOOLS, background=True, stream=True
        )
        async for _ in stream:
            pass
        async for _ in await client.responses.retrieve(response_id=RID, stream=True, starting_after=2):
            pass


@pytest.mark.parametrize("order", ORDERS)
async def test_logfire_records_the_same_async_spans_plain_and_wrapped(
    server: LocalServer, capture: Capture, order: str
) -> None:
    server.enqueue(*scripts())
    plain = server.async_client()
    capture.instrument(plain)
    await acalls_made(plain)
    seen_plain = spans_of(capture)
    server.enqueue(*scripts())
    await acalls_made(wrapped_in_order(server.async_client(), order, capture.instrument))
    assert spans_of(capture) == seen_plain
    assert len(seen_plain) == (3 if _RESPONSES else 1) and seen_plain[0]["async"] is True
