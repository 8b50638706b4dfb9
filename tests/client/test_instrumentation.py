"""``wrap`` beside OpenTelemetry's official openai instrumentation (``opentelemetry-instrumentation-
openai-v2``, a test-only dependency), applied before or after ``wrap``: every entry point is still
stitched, the instrumentation still sees every chunk (its span holds the response), and each request
is instrumented once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.client.instrumented import ORDERS, astitched, stitched, wrapped_in_order
from tests.client.test_dropin import ASYNC_ENTRIES, EXPECTED, SYNC_ENTRIES, TOOLS
from tests.core.test_accumulator import seed_stream
from toolstitch.testing import LocalServer, StreamScript

openai_v2 = pytest.importorskip("opentelemetry.instrumentation.openai_v2")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = openai_v2.OpenAIInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()  # whatever another test left on
    exporter.provider = provider  # type: ignore[attr-defined]
    yield exporter
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


def instrument(exporter: InMemorySpanExporter) -> Callable[[Any], None]:
    """Instruments every client (the instrumentation is global: it ignores which one it is given)."""

    def instrument_all(_client: Any) -> None:
        openai_v2.OpenAIInstrumentor().instrument(tracer_provider=exporter.provider)  # type: ignore[attr-defined]

    return instrument_all


#: The instrumentation (2.4b0) replaces the SDK's raw and streaming responses of a streamed request
#: with its own stream proxy: no ``headers``, and a ``parse()`` that cannot be awaited, with or
#: without toolstitch. Those paths are not tested beside it (the raw entries that read no header
#: still run); through the streaming response, toolstitch warns that it cannot stitch the proxy.
BROKEN_BY_THE_INSTRUMENTATION = {
    "with_raw_response",
    "with_streaming_response",
    "client.with_streaming_response",
    "chat.with_streaming_response",
}


def chat_spans(exporter: InMemorySpanExporter) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("entry", sorted(SYNC_ENTRIES))
def test_every_sync_entry_point_with_the_openai_instrumentation(
    server: LocalServer, exporter: InMemorySpanExporter, entry: str, order: str
) -> None:
    if entry in BROKEN_BY_THE_INSTRUMENTATION:
        pytest.skip("the instrumentation replaces this response, with or without toolstitch")
    server.enqueue(StreamScript(seed_stream(), fragment=7))
    client = wrapped_in_order(server.client(), order, instrument(exporter))
    stream = stitched(SYNC_ENTRIES[entry], client)
    assert [c.parsed for c in stream.tool_calls] == EXPECTED
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    (span,) = chat_spans(exporter)  # one request, instrumented once
    assert span.attributes["gen_ai.response.id"] == "chatcmpl-test"  # read from the chunks it saw


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("entry", sorted(ASYNC_ENTRIES))
async def test_every_async_entry_point_with_the_openai_instrumentation(
    server: LocalServer, exporter: InMemorySpanExporter, entry: str, order: str
) -> None:
    if entry in BROKEN_BY_THE_INSTRUMENTATION:
        pytest.skip("the instrumentation replaces this response, with or without toolstitch")
    server.enqueue(StreamScript(seed_stream(), fragment=7))
    client = wrapped_in_order(server.async_client(), order, instrument(exporter))
    stream = await astitched(ASYNC_ENTRIES[entry], client)
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    assert len(chat_spans(exporter)) == 1


#: A request with arguments the instrumentation reads into its span (model, sampling, tools given
#: as a tuple, a seed, a stop list, the service tier ...).
SPANNED_REQUEST: dict[str, Any] = {
    "model": "test-model",
    "messages": [{"role": "user", "content": "Weather in Shenzhen?"}],
    "tools": tuple(TOOLS),
    "temperature": 0.25,
    "top_p": 0.5,
    "max_tokens": 99,
    "seed": 7,
    "stop": ["END"],
    "frequency_penalty": 0.1,
    "presence_penalty": 0.2,
    "service_tier": "default",
    "n": 1,
}


def span_attributes(exporter: InMemorySpanExporter) -> dict[str, Any]:
    (span,) = chat_spans(exporter)
    exporter.clear()
    return {k: tuple(v) if isinstance(v, list | tuple) else v for k, v in dict(span.attributes).items()}


@pytest.mark.parametrize("order", ORDERS)
def test_the_instrumentations_span_is_the_same_plain_and_wrapped(
    server: LocalServer, exporter: InMemorySpanExporter, order: str
) -> None:
    """The instrumentation wraps the SDK's ``create`` and reads its keyword arguments: through a
    wrapped client it reads the caller's own, so its span's attributes are those of a plain call."""
    server.enqueue(StreamScript(seed_stream(), fragment=7), StreamScript(seed_stream(), fragment=7))
    plain = server.client()
    instrument(exporter)(plain)
    list(plain.chat.completions.create(**SPANNED_REQUEST, stream=True))
    spanned_plain = span_attributes(exporter)
    wrapped = wrapped_in_order(server.client(), order, instrument(exporter))
    stream = wrapped.chat.completions.create(**SPANNED_REQUEST, stream=True)
    list(stream)
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    assert span_attributes(exporter) == spanned_plain
    assert spanned_plain["gen_ai.request.temperature"] == 0.25  # the arguments are in it


@pytest.mark.parametrize("order", ORDERS)
async def test_the_instrumentations_async_span_is_the_same_plain_and_wrapped(
    server: LocalServer, exporter: InMemorySpanExporter, order: str
) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=7), StreamScript(seed_stream(), fragment=7))
    plain = server.async_client()
    instrument(exporter)(plain)
    async for _ in await plain.chat.completions.create(**SPANNED_REQUEST, stream=True):
        pass
    spanned_plain = span_attributes(exporter)
    wrapped = wrapped_in_order(server.async_client(), order, instrument(exporter))
    stream = await wrapped.chat.completions.create(**SPANNED_REQUEST, stream=True)
    async for _ in stream:
        pass
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    assert span_attributes(exporter) == spanned_plain
