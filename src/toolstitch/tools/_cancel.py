"""The cancellation token a tool may ask for: how a sync tool learns that its result is not wanted.

An async tool is cancelled the asyncio way (``CancelledError`` at its next ``await``). A sync tool
runs in a thread, and a thread cannot be stopped from outside; so a tool that can stop early (a
long query, a loop over pages) declares a parameter annotated :class:`CancelToken` and reads it.
The executor then passes a fresh token with each call (it is not part of the schema the model sees)
and cancels it when the result is no longer wanted: an eager call whose stream ended differently
(``"discarded"``), a call past its timeout (``"timeout"``), a batch that was interrupted
(``"cancelled"``).

Reading it is cheap and thread-safe; a tool that ignores it is fine too (its result is dropped).
"""

from __future__ import annotations

import concurrent.futures
import threading

__all__ = ["CancelToken"]


class CancelToken:
    """Whether the call this token was handed to is still wanted.

    ``cancelled``  True once the result is no longer wanted
    ``reason``     why: ``"discarded"`` (an eager call whose stream ended otherwise),
                   ``"timeout"`` or ``"cancelled"``; None while it is wanted
    ``wait(t)``    block up to ``t`` seconds (None: for ever) until it is cancelled; True if it was
                   (a cancellable ``time.sleep``)
    ``raise_if_cancelled()``  raise ``concurrent.futures.CancelledError`` once it is cancelled

    Tokens made by hand (``CancelToken()``) are never cancelled unless :meth:`cancel` is called,
    so a tool can be called directly, in tests, with one.
    """

    __slots__ = ("_event", "_reason")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason: str | None = None

    @property
    def cancelled(self) -> bool:
        """True once the call's result is no longer wanted."""
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        """Why it was cancelled (``"discarded"``, ``"timeout"``, ``"cancelled"``), or None."""
        return self._reason

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the token is cancelled or ``timeout`` seconds passed; True if cancelled."""
        return self._event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise ``concurrent.futures.CancelledError`` when the token is cancelled."""
        if self._event.is_set():
            raise concurrent.futures.CancelledError(self._reason or "cancelled")

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel the token (the first reason is kept). The executor calls this; so may a test."""
        if not self._event.is_set():
            self._reason = reason
            self._event.set()

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self.cancelled}, reason={self._reason!r})"
