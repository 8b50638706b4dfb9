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


def read_request(kwargs: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """The keyword arguments to send, and when the request started.

    The request is the contract (rule 10). ``tools`` and ``functions`` given as any iterable (a
    generator, ``dict.values()``, ``map``, a tuple) are read here, once, into a list, as the SDK
    reads them; that same list goes to the SDK and to the checks, so every call is checked against
    exactly the tools the model was offered (read twice, a generator would be sent by the SDK and be
    empty for the check). What is not a sequence of tools (a mapping, a string) is left as it is:
    the contract reader cannot read it and refuses every call.
    """
    started = now()
    read: dict[str, list[Any]] = {}
    for key in ("tools", "functions"):
        value = kwargs.get(key)
        if isinstance(value, Iterable) and not isinstance(value, list | str | bytes | bytearray | Mapping):
            read[key] = list(value)
    if read:
        kwargs = {**kwargs, **read}
    return kwargs, started


def creator(sdk_create: Any, awaits: bool, on_stream: Callable[[Any, dict[str, Any], float], Any]) -> Any:
    """``create`` as the SDK defines it (name, docstring, signature), except that a streamed
    request goes through :func:`read_request` and its result through ``on_stream``. ``awaits``:
    the SDK's ``create`` returns an awaitable (async clients; not ``with_streaming_response``)."""
    if awaits:

        async def acreate(*args: Any, **kwargs: Any) -> Any:
            if not streaming(kwargs):
                return await sdk_create(*args, **kwargs)
            request, started = read_request(kwargs)
            return on_stream(await sdk_create(*args, **request), request, started)

        return like(sdk_create, acreate)

    def create(*args: Any, **kwargs: Any) -> Any:
        if not streaming(kwargs):
            return sdk_create(*args, **kwargs)
        request, started = read_request(kwargs)
        return on_stream(sdk_create(*args, **request), request, started)

    return like(sdk_create, create)
