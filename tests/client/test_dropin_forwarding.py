"""Every SDK method ``ts.wrap`` replaces receives exactly what the caller passed.

A spy (a test double, or an instrumentation that wraps SDK methods and reads their arguments to
name its spans) must see the same call through a wrapped client as through a plain one: positional
stays positional, keyword stays keyword, the very objects the caller passed, nothing added, nothing
dropped, sync and async, on every client class.

The replaced methods are found, not listed: starting from the wrapped client, every property a
toolstitch proxy defines is read; a proxy it gives is walked in turn, and a function it gives that
is dressed as an SDK method (``__wrapped__``, the one way ``_proxy.like`` re-exposes one) is a
replacement. A spy takes the SDK method's place on the SDK object, and each replacement is called
in the forms its SDK signature allows (every positional parameter given positionally, then by
keyword) and in a few the signature does not know (the SDK's own ``TypeError`` is the SDK's to
raise: the replacement passes them on). What the spy returns stands for the SDK's result; a result
the wrapper hands back as a proxy of its own (a raw response, a stream manager) is walked the same
way, so ``parse`` is found there. A new replacement is checked without touching this file.

The one documented exception (docs/wrap.md, "The request is the contract"): ``tools`` or
``functions`` given as a one-shot iterable (a generator, ``map``, an iterable class of the caller's)
are read once, and the SDK gets that list, with the same items.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import openai
import pytest

import toolstitch as ts
from toolstitch.client._proxy import Proxy, Wrapped
from toolstitch.testing import LocalServer

ABSENT = object()
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


def plain_clients() -> dict[str, Callable[[], Any]]:
    """Every client class, built without a server (the spies answer in its place)."""
    azure = {"azure_endpoint": "http://127.0.0.1:9", "api_key": "k", "api_version": "2024-10-21"}
    return {
        "OpenAI": lambda: openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"),
        "AsyncOpenAI": lambda: openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"),
        "AzureOpenAI": lambda: openai.AzureOpenAI(**azure),
        "AsyncAzureOpenAI": lambda: openai.AsyncAzureOpenAI(**azure),
    }


class Marker:
    """An argument nobody else has: the spy must receive this very object."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


class Result:
    """What a spy returns in place of the SDK's result: any method asked of it is a spy too (async
    for an async client, as the SDK's ``parse`` is), made once per name."""

    def __init__(self, awaits: bool) -> None:
        self.awaits = awaits
        self.seen: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        method = spy(self.seen.setdefault(name, []), self.awaits)
        setattr(self, name, method)
        return method


def spy(seen: list[tuple[tuple[Any, ...], dict[str, Any]]], awaits: bool) -> Any:
    """A stand-in for an SDK method: it records each call as it came and returns a :class:`Result`."""
    if awaits:

        async def aspy(*args: Any, **kwargs: Any) -> Any:
            seen.append((args, kwargs))
            return Result(awaits)

        return aspy

    def sspy(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        return Result(awaits)

    return sspy


@dataclass
class Replaced:
    """One replaced SDK method: where it is, the SDK object it stands on, and the SDK's own."""

    path: str
    proxy: Any
    name: str
    target: Any
    sdk: Any


def is_proxy(value: Any) -> bool:
    return issubclass(type(value), Proxy)  # isinstance() would read the proxy's __class__, the SDK's


def replaced_methods(proxy: Any, path: str) -> Iterator[Replaced]:
    """Every replaced SDK method under ``proxy``, found by reading each property its classes define."""
    target = object.__getattribute__(proxy, "_target")
    names = {n for k in type(proxy).__mro__ if issubclass(k, Proxy) for n, v in vars(k).items()
             if isinstance(v, property | Wrapped) and not n.startswith("_")}  # fmt: skip
    for name in sorted(names):
        try:
            value = getattr(proxy, name)
        except AttributeError:  # a path this openai release does not have
            continue
        if is_proxy(value) and not isinstance(value, ts.client.WrappedClient):
            yield from replaced_methods(value, f"{path}.{name}")
        elif callable(value):
            assert hasattr(value, "__wrapped__"), f"{path}.{name} is not dressed as the SDK's method (like)"
            yield Replaced(f"{path}.{name}", proxy, name, target, getattr(target, name))


#: Values for the SDK parameters toolstitch reads (so that its own paths run), by name; any other
#: parameter gets a :class:`Marker`.
VALUES: dict[str, Any] = {
    "path": "/chat/completions",
    "response_id": "resp_1",
    "body": {"model": "m", "messages": [], "tools": [TOOL], "stream": True},
    "messages": [],
    "model": "m",
    "tools": [TOOL],
    "stream": True,
}


def forms(sdk: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The calls to try: the SDK signature's positional parameters given positionally and then by
    keyword (each with ``stream`` True, False and left out where the method takes it, and with
    ``tools`` of each builtin kind), and calls the signature does not know."""
    try:
        parameters = list(inspect.signature(sdk).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keyword_only = {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
    values = [VALUES.get(p.name, Marker(p.name)) for p in positional]
    by_keyword = {
        p.name: v for p, v in zip(positional, values, strict=True) if p.kind is not p.POSITIONAL_ONLY
    }
    streams: list[dict[str, Any]] = [{}]
    if "stream" in keyword_only:
        streams += [{"stream": True}, {"stream": False}]
    tools: list[dict[str, Any]] = [{}]
    if "tools" in keyword_only:
        tools += [{"tools": [TOOL]}, {"tools": (TOOL,)}, {"tools": {"w": TOOL}.values()}]
    out: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for stream in streams:
        for offered in tools:
            extra = {**stream, **offered, "extra_headers": Marker("extra_headers")}
            out.append((tuple(values), dict(extra)))
            if len(by_keyword) == len(values):
                out.append(((), {**by_keyword, **extra}))
            if values:  # the first positionally, the rest by keyword
                rest = {k: v for k, v in list(by_keyword.items())[1:]}
                out.append(((values[0],), {**rest, **extra}))
    out += [((), {}), ((Marker("a"), Marker("b")), {"unknown": Marker("c")})]
    return out


def same_call(
    seen: tuple[tuple[Any, ...], dict[str, Any]], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> bool:
    """Whether the spy saw ``args`` and ``kwargs`` themselves: the same objects, in the same order."""
    seen_args, seen_kwargs = seen
    return (
        len(seen_args) == len(args)
        and all(a is b for a, b in zip(seen_args, args, strict=True))
        and list(seen_kwargs) == list(kwargs)
        and all(seen_kwargs[k] is v for k, v in kwargs.items())
    )


def call_both_ways(item: Replaced, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], Any]:
    """The SDK method called plain and wrapped, a spy in its place: what the spy saw, and what the
    wrapped call returned."""
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    # The SDK's async methods are not all coroutine functions to inspect (``required_args`` wraps
    # ``create`` in a plain function): toolstitch's replacement of one is.
    awaits = inspect.iscoroutinefunction(item.sdk) or inspect.iscoroutinefunction(
        getattr(item.proxy, item.name)
    )
    own = vars(item.target).get(item.name, ABSENT)  # the SDK sets some methods on the instance
    setattr(item.target, item.name, spy(seen, awaits))
    try:
        plain = getattr(item.target, item.name)
        wrapped = getattr(item.proxy, item.name)
        assert wrapped.__wrapped__ is plain, f"{item.path} does not stand for the SDK's method"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a spy's result is no stream: toolstitch says so
            if awaits:

                async def both() -> Any:
                    await plain(*args, **kwargs)
                    return await wrapped(*args, **kwargs)

                result = asyncio.run(both())
            else:
                plain(*args, **kwargs)
                result = wrapped(*args, **kwargs)
    finally:
        if own is ABSENT:
            delattr(item.target, item.name)
        else:
            setattr(item.target, item.name, own)
    return seen, result


def check(item: Replaced, depth: int = 0) -> int:
    """Every form of ``item``'s call reaches the spy as it was given, plain and wrapped; the proxies
    the wrapped call returns are checked the same way. The number of calls compared."""
    compared = 0
    for args, kwargs in forms(item.sdk):
        seen, result = call_both_ways(item, args, kwargs)
        assert len(seen) == 2, f"{item.path}: the SDK method was called {len(seen)} times, not twice"
        plain, wrapped = seen
        assert same_call(plain, args, kwargs)  # the spy itself
        assert same_call(wrapped, args, kwargs), (
            f"{item.path}{args, kwargs}: the SDK's method received {wrapped} through the wrapper"
        )
        compared += 1
        if depth == 0 and is_proxy(result) and not isinstance(result, ts.client.WrappedClient):
            for inner in replaced_methods(result, f"{item.path}(...)"):
                compared += check(inner, depth + 1)
    return compared


@pytest.mark.parametrize("kind", sorted(plain_clients()))
def test_every_replaced_sdk_method_receives_the_callers_arguments_as_given(kind: str) -> None:
    wrapped = ts.wrap(plain_clients()[kind]())
    found = list(replaced_methods(wrapped, "client"))
    paths = {r.path for r in found}
    # what the walk must at least find (so that it cannot pass by finding nothing)
    assert {"client.chat.completions.create", "client.post", "client.request"} <= paths
    assert any(p.endswith("chat.completions.stream") for p in paths)  # old releases: under beta
    assert "client.with_raw_response.chat.completions.create" in paths
    if hasattr(openai.OpenAI(api_key="k"), "responses"):
        assert {"client.responses.create", "client.responses.retrieve", "client.responses.stream"} <= paths
    compared = sum(check(item) for item in found)
    assert compared > 10 * len(found)


def test_the_walk_finds_parse_on_a_raw_response() -> None:
    wrapped = ts.wrap(plain_clients()["OpenAI"]())
    create = next(r for r in replaced_methods(wrapped, "client") if r.path.endswith("raw_response.create"))
    _, result = call_both_ways(create, (), {"model": "m", "messages": [], "stream": True})
    assert [r.path for r in replaced_methods(result, "raw")] == ["raw.parse"]


def test_a_replacement_that_forwards_differently_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolstitch.client import _wrap

    def adding(self: Any) -> Any:
        sdk_create = self._target.create

        def create(*args: Any, **kwargs: Any) -> Any:
            return sdk_create(*args, **{**kwargs, "timeout": 5})

        return functools.wraps(sdk_create)(create)

    monkeypatch.setattr(_wrap._Completions, "create", property(adding))
    wrapped = ts.wrap(plain_clients()["OpenAI"]())
    item = next(r for r in replaced_methods(wrapped, "client") if r.path == "client.chat.completions.create")
    with pytest.raises(AssertionError, match="received"):
        check(item)


# ------------------------------------------------------------------------- the one exception


def one_shot_tools() -> list[Any]:
    class Catalogue:
        def __iter__(self) -> Iterator[Any]:
            return iter([TOOL])

    class Listing(list[Any]):
        def __iter__(self) -> Iterator[Any]:
            return super().__iter__()

    return [(t for t in [TOOL]), map(dict, [TOOL]), iter([TOOL]), Catalogue(), Listing([TOOL])]


@pytest.mark.parametrize("position", range(5))
def test_one_shot_tools_reach_the_sdk_as_the_one_list_that_was_read(position: int) -> None:
    wrapped = ts.wrap(plain_clients()["OpenAI"]())
    item = next(r for r in replaced_methods(wrapped, "client") if r.path == "client.chat.completions.create")
    tools = one_shot_tools()[position]
    seen, _ = call_both_ways(item, (), {"model": "m", "messages": [], "tools": tools, "stream": True})
    sent = seen[1][1]["tools"]
    assert type(sent) is list and sent == [TOOL]


@pytest.mark.parametrize("tools", [[TOOL], (TOOL,), {"w": TOOL}.values(), {"w": TOOL}.keys()], ids=repr)
def test_stable_tools_reach_the_sdk_as_the_very_object(tools: Any) -> None:
    wrapped = ts.wrap(plain_clients()["OpenAI"]())
    item = next(r for r in replaced_methods(wrapped, "client") if r.path == "client.chat.completions.create")
    seen, _ = call_both_ways(item, (), {"model": "m", "messages": [], "tools": tools, "stream": True})
    assert seen[1][1]["tools"] is tools


def raising_tools() -> list[Any]:
    class Refusing(list[Any]):
        def __iter__(self) -> Iterator[Any]:
            raise RuntimeError("the caller's own error")

    def halfway() -> Iterator[Any]:
        yield TOOL
        raise RuntimeError("the caller's own error")

    return [Refusing([TOOL]), halfway()]


@pytest.mark.parametrize("position", range(2), ids=["list subclass", "generator"])
def test_tools_that_raise_as_they_are_read_raise_as_they_do_plain(server: LocalServer, position: int) -> None:
    for client in (server.client(), ts.wrap(server.client())):
        with pytest.raises(RuntimeError, match="the caller's own error"):
            client.chat.completions.create(
                model="m", messages=[], tools=raising_tools()[position], stream=True
            )
    assert server.requests == []  # nothing was sent, plain or wrapped
