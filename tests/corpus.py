"""The provider corpus: 40 real streamed responses, kept as vcrpy cassettes in ``cassettes/providers``.

Each cassette holds one request and the provider's response body exactly as it was sent, with its
source, license and expected result in ``metadata`` (``cassettes/README.md`` describes them;
``scripts/provider_cassettes.py`` writes them). This module loads them once for every test that needs
real provider streams, and replays them through the real ``openai`` client with vcrpy
(:func:`replay`), optionally re-cut into small pieces on the way to the SDK's SSE decoder.

The corpus is part of the repository: tests that read it never skip (``test_the_corpus_is_whole``
in ``tests/client/test_provider_cassettes.py`` fails if a cassette is missing).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import vcr
import yaml

from tests.conftest import ROOT

CASSETTES = ROOT / "cassettes" / "providers"
#: Where the cassettes say the requests went; ``.invalid`` never resolves, so a replay that misses
#: its cassette fails instead of reaching a network.
BASE_URL = "https://provider.invalid/v1"
#: Headers that could carry a credential: no cassette may keep one.
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie", "set-cookie"}
)


@dataclass(frozen=True)
class ProviderStream:
    """One cassette of the corpus."""

    name: str
    """``PROJECT/NAME``, the stream's id in test names and on the providers page."""
    cassette: Path
    body: str
    """The response body exactly as the provider sent it (``data:`` lines, ``event:`` and ``:``
    comment lines where it had them)."""
    request: dict[str, Any]
    """The request body: as recorded, or synthesized (``metadata["request"]``)."""
    metadata: dict[str, Any]

    @property
    def expected(self) -> dict[str, Any]:
        return dict(self.metadata["expected"])

    @property
    def provider(self) -> str:
        return str(self.metadata["provider"])

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        """The request's ``tools`` (recorded, or the called names without schemas), or None."""
        tools = self.request.get("tools")
        return list(tools) if tools else None

    def create_kwargs(self) -> dict[str, Any]:
        """What the tests pass to ``chat.completions.create``: the request's model, messages and
        tools (not its ``tool_choice`` or ``parallel_tool_calls``: the corpus is about assembling
        what the provider sent)."""
        out: dict[str, Any] = {
            "model": self.request.get("model") or "test-model",
            "messages": self.request.get("messages") or [{"role": "user", "content": "hi"}],
        }
        if self.tools:
            out["tools"] = self.tools
        return out

    @property
    def recorded_tools(self) -> list[dict[str, Any]] | None:
        """The ``tools`` of a recorded request (with their schemas); None when the source kept no
        request."""
        return self.tools if self.metadata["request"] == "recorded" else None

    def chunks(self) -> list[Any]:
        """The JSON value of every ``data:`` line but ``[DONE]`` (an in-band error's object
        included), as the body holds them."""
        out: list[Any] = []
        for line in self.body.splitlines():
            if line.startswith("data:"):
                payload = line[5:].strip()
                if payload and payload != "[DONE]":
                    try:
                        out.append(json.loads(payload))
                    except ValueError:
                        continue
        return out


# libyaml's safe loader when PyYAML has it (ten times faster than the pure-Python one).
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(path: Path) -> ProviderStream:
    document = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    [interaction] = document["interactions"]
    return ProviderStream(
        name=path.relative_to(CASSETTES).with_suffix("").as_posix(),
        cassette=path,
        body=interaction["response"]["body"]["string"],
        request=json.loads(interaction["request"]["body"]),
        metadata=document["metadata"],
    )


#: Every stream of the corpus, sorted by name.
CORPUS: tuple[ProviderStream, ...] = tuple(_load(p) for p in sorted(CASSETTES.glob("*/*.yaml")))
#: The corpus by name.
BY_NAME: dict[str, ProviderStream] = {s.name: s for s in CORPUS}

# Cassettes match on method and path: the base URL is the same for all of them.
_vcr = vcr.VCR(
    cassette_library_dir=str(CASSETTES),
    match_on=["method", "path"],
    record_mode="none",
    filter_headers=sorted(SECRET_HEADERS),
    decode_compressed_response=True,
)


def _httpx() -> Any:
    """The HTTP library the installed ``openai`` is built on (``httpx``; ``httpx2`` from 3.0)."""
    return importlib.import_module("httpx2" if int(openai.__version__.split(".")[0]) >= 3 else "httpx")


def _recut_transport(size: int, asynchronous: bool) -> Any:
    """A transport that lets vcrpy answer (vcrpy patches ``HTTPTransport``) and hands the body to
    the client in ``size``-byte pieces, cutting UTF-8 characters, SSE lines and JSON tokens alike,
    as a slow network does."""
    httpx = _httpx()

    def pieces(body: bytes) -> Iterator[bytes]:
        return (body[k : k + size] for k in range(0, len(body), size))

    class Pieces(httpx.SyncByteStream):  # type: ignore[misc, name-defined]
        def __init__(self, body: bytes) -> None:
            self.body = body

        def __iter__(self) -> Iterator[bytes]:
            return pieces(self.body)

    class AsyncPieces(httpx.AsyncByteStream):  # type: ignore[misc, name-defined]
        def __init__(self, body: bytes) -> None:
            self.body = body

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for piece in pieces(self.body):
                yield piece

    class Recut(httpx.HTTPTransport):  # type: ignore[misc, name-defined]
        def handle_request(self, request: Any) -> Any:
            response = super().handle_request(request)
            body = response.read()
            return httpx.Response(
                response.status_code, headers=response.headers, stream=Pieces(body), request=request
            )

    class AsyncRecut(httpx.AsyncHTTPTransport):  # type: ignore[misc, name-defined]
        async def handle_async_request(self, request: Any) -> Any:
            response = await super().handle_async_request(request)
            body = await response.aread()
            return httpx.Response(
                response.status_code, headers=response.headers, stream=AsyncPieces(body), request=request
            )

    return AsyncRecut() if asynchronous else Recut()


def client(recut: int | None = None) -> openai.OpenAI:
    """A real sync client for replayed cassettes; ``recut=N`` hands it the body in N-byte pieces."""
    options: dict[str, Any] = {"base_url": BASE_URL, "api_key": "sk-replay", "max_retries": 0}
    if recut is not None:
        options["http_client"] = openai.DefaultHttpxClient(transport=_recut_transport(recut, False))
    return openai.OpenAI(**options)


def async_client(recut: int | None = None) -> openai.AsyncOpenAI:
    """A real async client for replayed cassettes, as :func:`client`."""
    options: dict[str, Any] = {"base_url": BASE_URL, "api_key": "sk-replay", "max_retries": 0}
    if recut is not None:
        options["http_client"] = openai.DefaultAsyncHttpxClient(transport=_recut_transport(recut, True))
    return openai.AsyncOpenAI(**options)


def replay(stream: ProviderStream) -> Any:
    """vcrpy replaying ``stream``'s cassette (a context manager); nothing else may be requested
    inside it, and nothing reaches a network."""
    return _vcr.use_cassette(stream.cassette.relative_to(CASSETTES).as_posix(), allow_playback_repeats=True)
