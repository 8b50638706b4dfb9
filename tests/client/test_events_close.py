"""Closing or finalising a toolstitch generator early is silent, and releases the stream (issue 42).

``stream.events()`` closed after ``stream.close()``, closed on its own, left by ``break`` and
collected, ``aclose()`` after leaving ``async for``: none raises (``generator ignored
GeneratorExit``), none reports an unraisable error, and each releases the HTTP response (open calls
``incomplete``). Both APIs, sync and async. A structural check holds every generator of the package
to the rule that makes this so: a handler that yields on an exception never sees ``GeneratorExit``.
"""

from __future__ import annotations

import ast
import asyncio
import gc
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolstitch as ts
from toolstitch.testing import LocalServer, StreamScript, response_events, tool_call_chunks

RESPONSES = importlib.util.find_spec("openai.types.responses") is not None
SRC = Path(ts.__file__).parent


@pytest.fixture
def unraisable(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    seen: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(f"{u.exc_value!r} in {u.object!r}"))
    yield seen
    gc.collect()


def _script(api: str) -> StreamScript:
    if api == "responses":
        return StreamScript.responses(response_events([("c1", "f", '{"a": 1}')], pieces=6), delay=0.005)
    return StreamScript(tool_call_chunks([("c1", "f", '{"a": 1}')], pieces=6), delay=0.005)


def _create(client: Any, api: str) -> Any:
    if api == "responses":
        return client.responses.create(model="m", input="x", stream=True)
    return client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True)


APIS = ["chat", pytest.param("responses", marks=pytest.mark.skipif(not RESPONSES, reason="no Responses API"))]


def _released(stream: Any) -> bool:
    return bool(stream.response.is_closed) and all(c.status != "open" for c in stream.calls())


def _break(stream: Any) -> None:
    for _event in stream.events():
        break
    gc.collect()


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("how", ["close-stream-then-events", "close-events", "break-and-collect"])
def test_closing_sync_events_early_is_silent_and_releases(api: str, how: str, unraisable: list[str]) -> None:
    with LocalServer() as server:
        server.enqueue(_script(api))
        stream = _create(ts.wrap(server.client()), api)
        if how == "break-and-collect":
            _break(stream)
        else:
            gen = stream.events()
            next(gen)
            if how == "close-stream-then-events":
                stream.close()
            gen.close()  # raised RuntimeError: generator ignored GeneratorExit
        gc.collect()
        assert _released(stream)
    assert unraisable == []


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("how", ["aclose", "close-stream-then-aclose", "abandon"])
def test_closing_async_events_early_is_silent_and_releases(api: str, how: str, unraisable: list[str]) -> None:
    async def main(server: LocalServer) -> Any:
        stream = await _create(ts.wrap(server.async_client()), api)
        gen = stream.events()
        async for _event in gen:
            break
        if how == "close-stream-then-aclose":
            await stream.close()
        if how != "abandon":
            await gen.aclose()
        else:
            del gen
            gc.collect()
            await asyncio.sleep(0.05)  # the loop's finaliser closes it
        return stream

    with LocalServer() as server:
        server.enqueue(_script(api))
        stream = asyncio.run(main(server))
        assert _released(stream)
    assert unraisable == []


def _yields(nodes: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Yield | ast.YieldFrom) for node in nodes for n in ast.walk(node))


def _names(handler: ast.ExceptHandler) -> set[str]:
    kind = handler.type
    if kind is None:
        return {"BaseException"}
    parts = kind.elts if isinstance(kind, ast.Tuple) else [kind]
    return {p.id for p in parts if isinstance(p, ast.Name)}


def test_no_generator_yields_while_it_is_being_closed() -> None:
    """In every ``try`` whose body yields, a handler that catches ``GeneratorExit`` (``BaseException``,
    a bare ``except``) and yields must come after one for ``GeneratorExit`` itself; no ``finally``
    of such a ``try`` yields. Else closing the generator there raises ``RuntimeError``."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Try) or not _yields(node.body):
                continue
            for handler in node.handlers:
                names = _names(handler)
                if "GeneratorExit" in names:
                    break
                if "BaseException" in names and _yields(handler.body):
                    found.append(f"{path.relative_to(SRC)}:{handler.lineno}")
            if _yields(node.finalbody):
                found.append(f"{path.relative_to(SRC)}:{node.lineno} (finally)")
    assert found == []
