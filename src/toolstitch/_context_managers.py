"""``with x:`` for the classes that are left by closing or stopping them, written once.

Eight classes in six places share the protocol, six lines each where it was written out: the
streams (``client/_stream.py``, the helper streams of ``client/_responses.py``) and the toolbox
(``tools/_toolbox.py``) give themselves and are closed on leaving (:class:`ClosedOnExit`, and
:class:`ClosedOnAsyncExit` for the async streams, whose ``close()`` is awaited as the SDK's
``AsyncStream.close()`` is); the web demo (``cli/_web.py``) and the local test server
(``testing.py``) are started on entering and stopped on leaving (:class:`StoppedOnExit`). However
the block ended, the exception that ended it goes on: ``__exit__`` takes it as ``*exc_info``
without looking at it and returns None, as the standard library's ``contextlib.closing`` does.

It lives at the top of the package and imports nothing of toolstitch, so that every layer (each
imports only the layers below it) and the test server (which imports none) may use it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol, TypeVar

_T = TypeVar("_T")


class _Closes(Protocol):
    def close(self) -> None: ...


class _ClosesAsync(Protocol):
    def close(self) -> Awaitable[None]: ...


class _Starts(Protocol):
    def start(self) -> object: ...

    def stop(self) -> None: ...


_Started = TypeVar("_Started", bound=_Starts)


class ClosedOnExit:
    """``with x:`` gives ``x`` and calls ``x.close()`` on leaving."""

    __slots__ = ()  # a mixin: it adds no state, so a class with ``__slots__`` keeps none

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self: _Closes, *exc_info: object) -> None:
        self.close()


class StoppedOnExit:
    """``with x:`` calls ``x.start()`` and gives ``x``; leaving calls ``x.stop()``."""

    __slots__ = ()

    def __enter__(self: _Started) -> _Started:
        self.start()
        return self

    def __exit__(self: _Starts, *exc_info: object) -> None:
        self.stop()


class ClosedOnAsyncExit:
    """``async with x:`` gives ``x`` and awaits ``x.close()`` on leaving."""

    __slots__ = ()

    async def __aenter__(self: _T) -> _T:
        return self

    async def __aexit__(self: _ClosesAsync, *exc_info: object) -> None:
        await self.close()
