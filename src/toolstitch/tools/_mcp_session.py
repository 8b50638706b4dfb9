"""One MCP server's session for one toolbox: opened once, reused by every call and turn, opened
again after the server died, closed with the toolbox.

It lives on the toolbox's event-loop thread (``Runtime.loop()``), whatever loop the calls come from:
the MCP SDK's client is built on anyio task groups, whose scopes must be entered and left by one task,
and a session must outlive any one ``asyncio.run`` of the caller. One task owns it (:meth:`_own`:
it enters ``mcp.Client`` and leaves it); each call runs as a task of its own on that loop.

What a call can come to (:meth:`Session.call`):

* the server's ``CallToolResult`` (its ``isError`` included: the caller makes that an error result);
* :class:`_Unanswered`: the server answered ``tools/call`` with a JSON-RPC error (an unknown tool,
  bad parameters): the call was refused by the server, not run;
* :class:`_Lost`: the call was sent and its answer never came (the server died, the connection broke,
  an answer that cannot be read): whether it took effect is unknown;
* :class:`_Unreachable`: the server could not be started or reached: nothing was sent;
* the caller's cancellation (a timeout): the call's task is cancelled, which makes the MCP SDK send
  ``notifications/cancelled`` over stdio and abort the POST over HTTP.

A session knows its transport ended (the read stream ended: a stdio server that exited) without a
call having to fail first (:class:`_WatchedRead`), so a call after an idle death opens a new session
instead of sending into a dead one. An HTTP session learns it only by its next POST: when that
POST could not even connect, nothing was sent, and the call is sent again on a new session.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any

from ..core import now
from ..errors import OutcomeUnknown, ToolError
from ._mcp import RESULT_CHARS, MCPServer, ToolPolicy, result_text
from ._warm import WarmUp

__all__ = ["CallTool", "Session", "mcp_package"]

logger = logging.getLogger("toolstitch")

CLOSE_GRACE = 5.0
"""Seconds ``close()`` waits for a session to end (a stdio server is asked to exit, then ended)."""

MAX_TOOLS = 1000
"""At most this many tools are read from one server; pages past them are not asked for."""

MAX_PAGES = 100
"""At most this many pages of ``tools/list`` (a paginator that never ends cannot hang a build)."""


class _Lost(Exception):
    """The call was sent and no answer came back (its outcome is unknown)."""


class _Unanswered(Exception):
    """The server refused ``tools/call`` with a protocol error: the call did not run."""

    def __init__(self, code: Any, message: str) -> None:
        self.code = code
        super().__init__(message)


class _Unreachable(Exception):
    """The server could not be started or reached: nothing was sent."""


def mcp_package() -> Any:
    """The ``mcp`` package, or ``ImportError`` naming the extra that brings it."""
    try:
        import mcp
    except ImportError as exc:
        raise ImportError("MCP servers need the mcp package: pip install 'toolstitch[mcp]'") from exc
    return mcp


class _WatchedRead:
    """A transport's read stream that says when it ended (the server's side is gone)."""

    def __init__(self, inner: Any, ended: Callable[[], None]) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        import anyio

        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedRead:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside an exception group (anyio's task groups raise them), or ``[exc]``."""
    inner = getattr(exc, "exceptions", None)  # BaseExceptionGroup (3.11), or its 3.10 backport
    if isinstance(inner, tuple | list):
        return [leaf for e in inner if isinstance(e, BaseException) for leaf in _leaves(e)]
    return [exc]


def _never_connected(exc: BaseException | None) -> bool:
    """The transport failed because it could not connect at all (an HTTP server that is gone)."""
    if exc is None:
        return False
    leaves = _leaves(exc)
    return bool(leaves) and all(type(leaf).__name__ in ("ConnectError", "ConnectTimeout") for leaf in leaves)


class _Life:
    """One opening of the session: its client, the task that owns it, and how it ended."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.opened: asyncio.Future[Any] = loop.create_future()
        self.closing = asyncio.Event()
        self.ended = False
        self.error: BaseException | None = None
        self.owner: asyncio.Task[None] | None = None
        self.pending: dict[asyncio.Task[None], asyncio.Future[Any]] = {}
        self.warm: WarmUp | None = None


class Session:
    """The session of one MCP server in one toolbox (see the module). ``loop_of`` gives the
    toolbox's loop thread; every coroutine here runs on it."""

    def __init__(self, server: MCPServer, loop_of: Callable[[], asyncio.AbstractEventLoop]) -> None:
        self.server = server
        self._loop_of = loop_of
        self._loop: asyncio.AbstractEventLoop | None = None
        self._life: _Life | None = None
        self._lock = threading.Lock()
        self.closed = False
        self.changed = False
        """The server said its tool list changed (read again before the next request)."""
        self.opens = 0
        """How many sessions were opened (a new one after each death)."""
        self.warm: WarmUp | None = None
        """The latest opening, as a warm-up record (its start, end and status): the timeline's
        ``warm_up`` stage of this server's calls."""

    # -- the loop ----------------------------------------------------------------------------

    def loop(self) -> asyncio.AbstractEventLoop:
        """The toolbox's loop thread (``_Unreachable`` once the toolbox was closed)."""
        if self.closed:
            raise _Unreachable("the toolbox was closed")
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                self._loop = self._loop_of()
            return self._loop

    @property
    def started(self) -> bool:
        """It has a loop (it was opened at least once) that still runs."""
        return self._loop is not None and not self._loop.is_closed()

    def run(self, coro: Any, timeout: float | None) -> Any:
        """Run ``coro`` on the session's loop from another thread and wait at most ``timeout``."""
        loop = self.loop()
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:  # waiting here would block the loop that must do the work
            coro.close()
            raise RuntimeError("an MCP server's list cannot be read from the toolbox's own loop")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None

    async def on_loop(self, coro: Any) -> Any:
        """Await ``coro`` on the session's loop from any loop: cancelling the caller cancels it."""
        loop = self.loop()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    # -- opening and closing -----------------------------------------------------------------

    def _transport(self, stack: contextlib.AsyncExitStack, life: _Life) -> Any:
        server = self.server

        def ended() -> None:
            life.ended = True

        if server.transport == "stdio":
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=dict(server.env) if server.env is not None else None,
                cwd=server.cwd,
            )
            inner: Any = stdio_client(params)
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http_client = httpx2.AsyncClient(
                headers=dict(server.headers), timeout=httpx2.Timeout(30.0, read=300.0)
            )
            stack.push_async_callback(http_client.aclose)
            inner = streamable_http_client(server.url, http_client=http_client)

        @contextlib.asynccontextmanager
        async def watched() -> AsyncIterator[Any]:
            async with inner as (read, write):
                yield _WatchedRead(read, ended), write

        return watched()

    async def _on_message(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/tools/list_changed":
            self.changed = True

    async def _listen(self, client: Any) -> None:
        """Follow the server's tool-list changes on a 2026-07-28 session (``subscriptions/listen``);
        an older session gets them as notifications (:meth:`_on_message`)."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    self.changed = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # not supported, or lost with the session: nothing to follow
            logger.debug(
                "MCP server %r: no tool-list changes followed (%s)", self.server.name, type(exc).__name__
            )

    async def _own(self, life: _Life) -> None:
        """The task that owns one opening: enter the client, hand it out, wait to be closed."""
        warm = life.warm
        listener: asyncio.Task[None] | None = None
        try:
            mcp = mcp_package()
            async with contextlib.AsyncExitStack() as stack:
                client = mcp.Client(
                    self._transport(stack, life), message_handler=self._on_message, cache=None
                )
                await stack.enter_async_context(client)
                listener = asyncio.get_running_loop().create_task(self._listen(client))
                life.opened.set_result(client)
                if warm is not None:
                    warm.settle(None)
                await life.closing.wait()
                listener.cancel()
                await asyncio.wait({listener}, timeout=1.0)
        except BaseException as exc:  # the server died, could not start, or the loop is stopping
            life.error = exc
            if not life.opened.done():
                life.opened.set_exception(_Unreachable(f"{type(exc).__name__}: {_first_line(exc)}"))
                life.opened.exception()  # retrieved: a call that never came would log it
            if warm is not None and warm.finished_at is None:
                warm.settle(exc)
        finally:
            life.ended = True
            if listener is not None and not listener.done():
                listener.cancel()
            for task, done in list(life.pending.items()):
                if not done.done():
                    done.set_exception(_Lost("the session ended while the call was in flight"))
                task.cancel()

    def _start(self, loop: asyncio.AbstractEventLoop) -> _Life:
        life = _Life(loop)
        life.warm = self.warm = WarmUp(f"mcp:{self.server.name}", now())
        self.opens += 1
        life.owner = loop.create_task(self._own(life))
        self._life = life
        return life

    async def _client(self) -> tuple[_Life, Any]:
        """The open session (opening one when there is none, or the last one ended)."""
        if self.closed:
            raise _Unreachable("the toolbox was closed")
        loop = asyncio.get_running_loop()
        life = self._life
        if life is None or life.ended or (life.opened.done() and life.opened.exception() is not None):
            if life is not None:
                life.closing.set()  # its owner leaves the dead session's client (and its tasks)
            life = self._start(loop)
        return life, await asyncio.shield(life.opened)

    async def open(self) -> None:
        """Open the session now unless it is open (a warm-up: never raises)."""
        with contextlib.suppress(Exception):
            await self._client()

    def open_soon(self) -> None:
        """Start opening the session from any thread (the toolbox's warm-up), without waiting."""
        if self.closed:
            return
        life = self._life
        if life is not None and not life.ended and not (life.opened.done() and life.opened.exception()):
            return
        with contextlib.suppress(RuntimeError, _Unreachable):  # closed meanwhile
            asyncio.run_coroutine_threadsafe(self.open(), self.loop())

    async def close(self) -> None:
        """End the session (a stdio server is asked to exit, then ended by the SDK)."""
        self.closed = True
        life, self._life = self._life, None
        if life is None or life.owner is None:
            return
        life.closing.set()
        done, _ = await asyncio.wait({life.owner}, timeout=CLOSE_GRACE)
        if not done:
            life.owner.cancel()
            await asyncio.wait({life.owner}, timeout=1.0)

    # -- requests ----------------------------------------------------------------------------

    async def list_tools(self) -> tuple[list[Any], int]:
        """Every tool the server lists (page by page, bounded by :data:`MAX_TOOLS` and
        :data:`MAX_PAGES`), and how many milliseconds the server says the list may be kept (its
        ``ttlMs``, the least of its pages'; 0 when it says nothing)."""
        _, client = await self._client()
        self.changed = False
        tools: list[Any] = []
        keep: int | None = None
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools[: MAX_TOOLS - len(tools)])
            ttl = getattr(page, "ttl_ms", 0)
            ttl = ttl if type(ttl) is int and ttl > 0 else 0
            keep = ttl if keep is None else min(keep, ttl)
            cursor = page.next_cursor
            if not cursor or len(tools) >= MAX_TOOLS:
                break
        return tools, keep or 0

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Send ``tools/call`` once (see the module for what it comes to)."""
        for _ in range(2):
            life, client = await self._client()
            try:
                return await self._send(life, client, name, arguments)
            except _Lost:
                # An HTTP server that is gone: the POST could not connect, so nothing was sent.
                # Wait for the owner to say why it ended, and send again on a new session if so.
                if life.owner is not None:
                    await asyncio.wait({life.owner}, timeout=1.0)
                if not _never_connected(life.error):
                    raise
        raise _Unreachable("the server could not be reached")

    async def _send(self, life: _Life, client: Any, name: str, arguments: dict[str, Any]) -> Any:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        task = loop.create_task(self._request(client, name, arguments, done))
        life.pending[task] = done
        try:
            return await done
        except asyncio.CancelledError:
            task.cancel()  # the MCP SDK sends the server its cancellation
            raise
        finally:
            life.pending.pop(task, None)
            if done.done() and not done.cancelled() and isinstance(done.exception(), _Lost):
                life.ended = True  # the next call opens a new session

    async def _request(
        self, client: Any, name: str, arguments: dict[str, Any], done: asyncio.Future[Any]
    ) -> None:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        try:
            result = await client.call_tool(name, arguments)
        except asyncio.CancelledError:
            if not done.done():
                done.cancel()
            raise
        except MCPError as exc:
            if done.done():
                return
            if exc.code == CONNECTION_CLOSED:
                done.set_exception(_Lost("the connection closed during the call"))
            else:
                done.set_exception(_Unanswered(exc.code, _first_line(exc)))
        except Exception as exc:  # a transport error, an answer that cannot be read
            if not done.done():
                done.set_exception(_Lost(f"{type(exc).__name__}: {_first_line(exc)}"))
        else:
            if not done.done():
                done.set_result(result)


def _first_line(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        return type(exc).__name__
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:300]


class CallTool:
    """The function of one MCP tool: ``tools/call`` on its server's session, its result read for
    the model. A call lost with its session is sent once more on a new one when the tool is
    ``read_only`` or (trusted) idempotent; otherwise its outcome is unknown and it is not sent
    again."""

    def __init__(self, session: Session, name: str, rules: ToolPolicy) -> None:
        self.session = session
        self.name = name
        self.rules = rules
        self.__name__ = name
        self.__qualname__ = name

    async def __call__(self, **arguments: Any) -> Any:
        session, server = self.session, self.session.server.name
        tries = 2 if self.rules.retry else 1
        for attempt in range(1, tries + 1):
            try:
                result = await session.on_loop(session.call(self.name, arguments))
            except _Lost as exc:
                if attempt < tries:
                    logger.warning(
                        "MCP server %r: the call to %r was lost (%s); sent again on a new session",
                        server,
                        self.name,
                        exc,
                        extra={"tool_name": self.name},
                    )
                    continue
                if self.rules.read_only:
                    raise ToolError(
                        f"Error: the MCP server {server!r} stopped during the call to {self.name!r} "
                        f"({exc}); it has no result. It can be called again."
                    ) from exc
                raise OutcomeUnknown(
                    f"Error: the MCP server {server!r} stopped during the call to {self.name!r} "
                    f"({exc}). Whether it took effect is unknown, so it was not run again; check "
                    "before calling it again."
                ) from exc
            except _Unanswered as exc:
                raise ToolError(
                    f"Error: the MCP server {server!r} refused the call to {self.name!r}: {exc}"
                ) from exc
            except _Unreachable as exc:
                raise ToolError(
                    f"Error: the MCP server {server!r} could not be reached ({exc}); "
                    f"{self.name!r} was not run."
                ) from exc
            return _value(self.name, result)
        raise AssertionError("unreachable")  # pragma: no cover


def _value(name: str, result: Any) -> Any:
    """The tool's value: the structured content when there is some (JSON, within
    :data:`RESULT_CHARS`), else the text the model reads. An ``isError`` result raises
    ``ToolError`` with the text the server wrote for the model."""
    if getattr(result, "is_error", False) is True:
        text = result_text(result).strip()
        raise ToolError(text or f"Error: {name} failed; the MCP server gave no details.")
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        try:
            size = len(json.dumps(structured, ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError, RecursionError):
            size = RESULT_CHARS + 1
        if size <= RESULT_CHARS:
            return structured
    return result_text(result)
