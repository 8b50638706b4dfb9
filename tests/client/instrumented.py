"""What the tests of ``wrap`` beside an instrumentation share (OpenTelemetry's openai-v2 in
``test_instrumentation``, logfire's ``instrument_openai`` in ``test_logfire``): the two orders, and
running one entry point of ``test_dropin`` with the unstitched-stream warning as an error."""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import toolstitch as ts
from toolstitch.errors import UnstitchedStreamWarning

BEFORE = "instrumented before wrap"
AFTER = "instrumented after wrap"
#: Both orders, for ``pytest.mark.parametrize("order", ORDERS)``.
ORDERS = [BEFORE, AFTER]


def wrapped_in_order(plain: Any, order: str, instrument: Callable[[Any], object]) -> Any:
    """``ts.wrap(plain)``, with ``instrument`` applied to the plain client before wrapping it, or to
    the wrapped client after (an instrumentation that is global ignores its argument)."""
    if order == BEFORE:
        instrument(plain)
        return ts.wrap(plain)
    wrapped = ts.wrap(plain)
    instrument(wrapped)
    return wrapped


def stitched(entry: Callable[[Any], Any], client: Any) -> Any:
    """``entry(client)`` (a ``test_dropin`` entry point), failing if any path went unstitched."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnstitchedStreamWarning)
        return entry(client)


async def astitched(entry: Callable[[Any], Awaitable[Any]], client: Any) -> Any:
    """The async twin of :func:`stitched`."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnstitchedStreamWarning)
        return await entry(client)
