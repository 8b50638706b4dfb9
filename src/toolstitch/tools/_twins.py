"""Sync and async twins that take the same arguments, written once.

The sync function spells its keyword arguments out (its signature is the documented one); the async
twin is declared with ``**options`` and :func:`async_twin_of` gives it the same signature, for type
checkers, ``help()`` and ``inspect`` alike. :func:`bound` reads the twin's arguments back with the
sync function's defaults, so both twins see exactly the same values.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

__all__ = ["async_twin_of", "bound"]

P = ParamSpec("P")
R = TypeVar("R")


def async_twin_of(
    sync: Callable[P, R],
) -> Callable[[Callable[..., Awaitable[R]]], Callable[P, Coroutine[Any, Any, R]]]:
    """Give an ``async def`` the signature of its sync twin ``sync``."""

    def adopt(fn: Callable[..., Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
        fn.__signature__ = inspect.signature(sync)  # type: ignore[attr-defined]
        return fn  # type: ignore[return-value]

    return adopt


def bound(sync: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The arguments of a call to ``sync`` (``TypeError`` as a real call would raise), defaults
    included; ``**kwargs`` of ``sync`` come as one dict under their parameter's name."""
    arguments = inspect.signature(sync).bind(*args, **kwargs)
    arguments.apply_defaults()
    return dict(arguments.arguments)
