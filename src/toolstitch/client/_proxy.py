"""The proxy that ``wrap`` builds its objects from, and the one way it re-exposes an SDK method.

A proxy answers every attribute of the object it stands for (reads, writes and deletes go to that
object), and claims that object's class: ``proxy.__class__`` is the SDK class, so
``isinstance(ts.wrap(client), openai.OpenAI)`` holds, as it does for a ``wrapt.ObjectProxy``
(``isinstance`` falls back to ``__class__`` when the proxy's own type is not a subclass).
``type(proxy)`` stays the proxy's own class, except for the wrapped client, whose class also derives
from the SDK client's class (``_wrap._subclassing``: logfire checks ``type(client)``). It is written
out here rather than taken from ``wrapt``: twenty lines, and ``wrapt.ObjectProxy`` would forward
``__enter__`` to the client (``with ts.wrap(c) as x`` must give the wrapper), so most of what it
brings would be overridden.

:func:`like` gives an intercepting function the SDK method's name, docstring and signature
(``functools.wraps``, so ``inspect.signature`` follows ``__wrapped__`` to the SDK's own method).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import openai

if TYPE_CHECKING:
    from ._wrap import _Options

__all__ = ["Proxy", "Wrapped", "like", "proxied_stream"]

_F = TypeVar("_F", bound=Callable[..., Any])


class Proxy:
    """Forwards every attribute to ``_target``; subclasses intercept a few by defining them."""

    __slots__ = ("_opts", "_target")

    _target: Any
    _opts: _Options

    def __init__(self, target: Any, opts: _Options) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_opts", opts)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance() reads it: the proxy claims the SDK class
        return type(self._target)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._target, name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._target)) | set(dir(type(self))))

    def __repr__(self) -> str:
        return f"toolstitch.wrap({self._target!r})"


class Wrapped:
    """A proxy's attribute that is its target's attribute of the same name, inside another proxy:
    ``chat = Wrapped(_Chat)`` reads ``target.chat`` and gives ``_Chat(target.chat, opts)``, on each
    read as a property would (the SDK builds its resources lazily, so nothing is read before it is
    asked for). One descriptor in place of a three-line property per path the wrapper follows."""

    __slots__ = ("_name", "_proxy")

    def __init__(self, proxy: Callable[[Any, _Options], Any]) -> None:
        self._proxy = proxy
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, proxy: Proxy | None, owner: type | None = None) -> Any:
        if proxy is None:
            return self
        return self._proxy(getattr(proxy._target, self._name), proxy._opts)


def like(sdk_method: Any, function: _F) -> _F:
    """``function``, dressed as ``sdk_method``: its name, docstring, signature and ``__wrapped__``."""
    return cast(_F, functools.wraps(sdk_method)(function))


def proxied_stream(value: Any) -> Any:
    """``value`` if it is an ``openai.Stream``/``AsyncStream``, else the SDK stream inside a proxy of
    one (a ``wrapt`` ``__wrapped__``, or the ``stream`` attribute OpenTelemetry's openai-v2
    instrumentation uses), looked for a few levels deep; None when there is none."""
    for _ in range(4):
        if isinstance(value, openai.Stream | openai.AsyncStream):
            return value
        try:
            inner = vars(value).get("__wrapped__", vars(value).get("stream"))
        except TypeError:  # no __dict__ (slots, builtins): not a proxy we know
            return None
        if inner is None or inner is value:
            return None
        value = inner
    return None
