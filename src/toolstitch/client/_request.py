"""Reading a streamed request once, and dressing an SDK ``create`` that intercepts it.

Every intercepted ``create`` (chat completions in ``_wrap``, the Responses API in
``_responses_stream``) goes through these two: a module of its own, so that no module imports
``_wrap`` back (no import cycle, ``tests/test_architecture.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..core import now
from ._lowlevel import streaming
from ._proxy import like

__all__ = ["creator", "read_request"]


def read_request(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], float]:
    """The keyword arguments to send, the request as the checks read it, and when it started.

    The request is the contract (rule 10), and the caller's arguments reach the SDK as they were
    given (drop-in): ``kwargs`` itself is sent, the very objects the caller passed. ``tools`` and
    ``functions`` that are not a sequence the contract reader takes (a ``dict.values()`` view, a
    generator, ``map``) are read here, once, into a list for the checks, so every call is checked
    against exactly the tools the model was offered. A view, a list or a tuple of the builtin kind
    iterates the same every time: the SDK gets the caller's own object. Anything else (an iterator,
    a generator, a class of the caller's own) could give the SDK other tools on its own read (a
    generator would be empty): that one is sent as the list read here, the one thing a caller's
    argument is ever replaced by (docs/wrap.md). What is not a sequence of tools (a mapping, a
    string) is left as it is: the contract reader cannot read it and refuses every call.
    """
    started = now()
    read: dict[str, list[Any]] = {}
    replaced: dict[str, list[Any]] = {}
    for key in ("tools", "functions"):
        value = kwargs.get(key)
        stable = _stable(value)
        if stable and isinstance(value, list | tuple):
            continue  # read as it is
        if not isinstance(value, Iterable) or isinstance(value, str | bytes | bytearray | Mapping):
            continue
        items = list(value)  # what it raises is the caller's, as the SDK's own read would raise it
        read[key] = items
        if not stable:
            replaced[key] = items
    if not read:
        return kwargs, kwargs, started
    sent = {**kwargs, **replaced} if replaced else kwargs
    return sent, {**kwargs, **read}, started


#: The iterations that give the same items each time they run: those of the builtin ``list`` and
#: ``tuple`` and of the ``dict`` views.
_STABLE: tuple[Any, ...] = (
    list.__iter__,
    tuple.__iter__,
    type({}.keys()).__iter__,
    type({}.values()).__iter__,
    type({}.items()).__iter__,
)


def _stable(value: Any) -> bool:
    """Whether ``value`` iterates by one of the :data:`_STABLE` iterations (a subclass that keeps
    its builtin's ``__iter__`` counts; one that overrides it does not). Read from the class
    dictionaries, so that no code of the caller's runs here."""
    for klass in type(value).__mro__:
        own = vars(klass).get("__iter__")
        if own is not None:
            return any(own is stable for stable in _STABLE)
    return False


def creator(sdk_create: Any, awaits: bool, on_stream: Callable[[Any, dict[str, Any], float], Any]) -> Any:
    """``create`` as the SDK defines it (name, docstring, signature), except that a streamed
    request goes through :func:`read_request` and its result through ``on_stream``. ``awaits``:
    the SDK's ``create`` returns an awaitable (async clients; not ``with_streaming_response``)."""
    if awaits:

        async def acreate(*args: Any, **kwargs: Any) -> Any:
            if not streaming(kwargs):
                return await sdk_create(*args, **kwargs)
            sent, request, started = read_request(kwargs)
            return on_stream(await sdk_create(*args, **sent), request, started)

        return like(sdk_create, acreate)

    def create(*args: Any, **kwargs: Any) -> Any:
        if not streaming(kwargs):
            return sdk_create(*args, **kwargs)
        sent, request, started = read_request(kwargs)
        return on_stream(sdk_create(*args, **sent), request, started)

    return like(sdk_create, create)
