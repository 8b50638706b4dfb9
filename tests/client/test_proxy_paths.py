"""``Wrapped``: each path a proxy follows to another proxy (``client.chat``, ``chat.completions``,
``with_raw_response`` …) reads the target's attribute of the same name when asked, and gives it
inside the declared proxy, with the same options."""

from __future__ import annotations

import types
from typing import Any

import pytest

import toolstitch  # noqa: F401  # loads every client module
from toolstitch.client import _responses, _responses_stream, _websocket, _wrap
from toolstitch.client._proxy import Proxy, Wrapped

MODULES = (_wrap, _responses, _responses_stream, _websocket)


def _paths() -> list[tuple[type[Proxy], str, Wrapped]]:
    found = []
    for module in MODULES:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Proxy) and value.__module__ == module.__name__:
                found += [(value, n, d) for n, d in vars(value).items() if isinstance(d, Wrapped)]
    return found


PATHS = _paths()


def _proxy_of(cls: type[Proxy], target: Any, opts: Any) -> Any:
    proxy = object.__new__(cls)  # without its constructor: only the two slots every proxy has
    object.__setattr__(proxy, "_target", target)
    object.__setattr__(proxy, "_opts", opts)
    return proxy


def test_the_paths_are_found() -> None:
    names = {(cls.__name__, name) for cls, name, _ in PATHS}
    assert {("WrappedClient", "chat"), ("_Chat", "completions"), ("Responses", "with_raw_response")} <= names
    assert len(PATHS) >= 16


@pytest.mark.parametrize(("cls", "name", "descriptor"), PATHS, ids=[f"{c.__name__}.{n}" for c, n, _ in PATHS])
def test_each_path_reads_the_target_when_asked(cls: type[Proxy], name: str, descriptor: Wrapped) -> None:
    assert getattr(cls, name) is descriptor  # on the class: the descriptor itself
    opts = object()
    target = types.SimpleNamespace(**{name: object()})
    proxy = _proxy_of(cls, target, opts)
    for _ in range(2):
        value = getattr(proxy, name)
        assert issubclass(type(value), Proxy) and type(value) is descriptor._proxy
        assert object.__getattribute__(value, "_target") is getattr(target, name)
        assert object.__getattribute__(value, "_opts") is opts
        setattr(target, name, object())  # the SDK's attribute is read again on the next read


def test_a_path_the_target_lacks_is_its_attribute_error() -> None:
    cls, name, _ = PATHS[0]
    with pytest.raises(AttributeError, match=name):
        getattr(_proxy_of(cls, types.SimpleNamespace(), object()), name)
