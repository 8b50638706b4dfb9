"""The :class:`Toolbox`: the tools offered to the model, and the threads (and worker processes) their
calls run on.

It sits above the executor (``execute`` delegates to it) so that nothing below imports it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._context_managers import ClosedOnExit
from ..core import ToolCall
from ._definition import ConfirmCallback, Isolation, Tool, isolation_problem, tool
from ._executor import ErrorMessage, ToolResult, aexecute, execute
from ._mcp import MCPServer
from ._mcp_tools import MCPTools
from ._process import ISOLATIONS, importable_problem
from ._runtime import Runtime
from ._twins import async_twin_of
from ._warm import WarmUp, WarmUps

if TYPE_CHECKING:
    from ._claim import ClaimLedger

__all__ = ["Toolbox"]


class Toolbox(ClosedOnExit):
    """The tools offered to the model, and how their calls are executed.

    ``confirm``        asked before any ``confirm=True`` tool runs: ``confirm(call, tool)`` returns
                       ``True``, ``False`` or ``ts.Deny("reason")`` (sync or async; see
                       :data:`~toolstitch.tools.ConfirmCallback`). Without it, ``ts.run`` defers such
                       calls (``stop_reason == "awaiting_approval"``) and ``execute`` refuses them.
    ``error_message``  ``error_message(call, exc) -> str``: what the model reads when a tool raises
                       (``ts.ToolError`` excepted: its text is always used). Default: the tool failed,
                       and the exception's type, never its text.
    ``max_workers``    sync tools running at once (a bounded pool shared by every batch of this
                       toolbox; a tool abandoned past its timeout stops counting, and warm-ups run
                       beside it). Default: ``min(32, os.cpu_count() + 4)``.
    ``timeout``        seconds per call for tools that set none (None: no limit).
    ``total_timeout``  seconds for one batch of parallel calls, all together (None: no limit).
    ``warm_timeout``   seconds a call waits for its tool's warm-up (``@tool(warm=...)``) before it
                       runs cold.
    ``isolation``      where sync tools that set none run: ``"thread"`` (the default: a timeout
                       bounds the wait for the tool, not its run) or ``"process"`` (a worker process
                       killed at the timeout, so the timeout bounds the run; at most ``max_workers``
                       processes, kept for the next call: see ``tools/_process.py``). A tool's own
                       ``@tool(isolation=...)`` wins.

    ``mcp``            MCP servers (``toolstitch.mcp.stdio(...)``, ``toolstitch.mcp.http(...)``) whose
                       tools are offered beside the functions: each server is started and its tools
                       listed here (``MCPServerError`` when it cannot be; ``ValueError`` when two tools
                       share a name), unless it let this process keep the list it gave before (its
                       ``ttlMs``): then its session opens with the first request. Each keeps one
                       session, reused by every call and turn, opened again after the server died,
                       closed by :meth:`close`. Their calls pass the same door as a function's (see
                       ``tools/_mcp_tools.py``).

    A toolbox owns a pool of daemon threads (and, for async tools run from sync code, an event-loop
    thread; for process tools, worker processes); :meth:`close` releases them. It is also a context
    manager.
    """

    def __init__(
        self,
        tools: Iterable[Tool | Callable[..., Any] | tuple[Mapping[str, Any], Callable[..., Any]]] = (),
        *,
        confirm: ConfirmCallback | None = None,
        error_message: ErrorMessage | None = None,
        max_workers: int | None = None,
        timeout: float | None = None,
        total_timeout: float | None = None,
        warm_timeout: float = 10.0,
        isolation: Isolation = "thread",
        mcp: Iterable[MCPServer] = (),
    ) -> None:
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be 'thread' or 'process', got {isolation!r}")
        if not warm_timeout > 0:
            raise ValueError("warm_timeout must be a positive number of seconds")
        if max_workers is not None and max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        for value, what in ((timeout, "timeout"), (total_timeout, "total_timeout")):
            if value is not None and not value > 0:
                raise ValueError(f"{what} must be a positive number of seconds (or None)")
        self._tools: dict[str, Tool] = {}
        self.confirm = confirm
        self.error_message = error_message
        self.max_workers = max_workers
        self.timeout = timeout
        self.total_timeout = total_timeout
        self.warm_timeout = warm_timeout
        self._isolation: Isolation = isolation
        self._warm_ups = WarmUps()
        self._runtime: Runtime | None = None  # made on first use, released by close()
        self._runtime_lock = threading.Lock()
        for t in tools:
            if isinstance(t, tuple) and len(t) == 2 and isinstance(t[0], Mapping):
                self.add(t[0], t[1])
            else:
                self.add(t)
        self._mcp = MCPTools(mcp, lambda: self.runtime().loop())
        if self._mcp:
            try:
                for made in self._mcp.build(self._owner_of):
                    self._tools[made.name] = made
            except BaseException:
                self.close()  # the servers started so far end with it
                raise

    def _owner_of(self, name: str) -> str | None:
        t = self._tools.get(name)
        return None if t is None else (f"MCP server {t.server!r}'s" if t.server else "a function")

    def add(
        self, item: Tool | Callable[..., Any] | Mapping[str, Any], fn: Callable[..., Any] | None = None
    ) -> Tool:
        """Add a tool: a :class:`Tool`, a plain function (made a tool with :func:`tool`), or a
        request's tool definition with the function that runs its calls (``add(definition, fn)``,
        or a ``(definition, fn)`` pair given to the constructor): ``openai.pydantic_function_tool(Model)``
        gives ``fn`` the ``Model`` instance (see :meth:`Tool.from_definition`).

        A tool that runs in a worker process here (:meth:`isolation_of`) is checked now: it must be
        a sync function without a ``CancelToken`` or ``ToolCall`` parameter or a ``warm=``, that a
        fresh process can import by its module and name (``ValueError`` says what to change)."""
        if isinstance(item, Mapping):
            if fn is None:
                raise TypeError(
                    "a tool definition needs the function that runs its calls: add(definition, fn)"
                )
            t = Tool.from_definition(item, fn)
        elif fn is not None:
            raise TypeError("fn is only for a tool definition: add(definition, fn)")
        else:
            t = item if isinstance(item, Tool) else tool(item)
        if t.name in self._tools:
            raise ValueError(f"two tools are named {t.name!r}")
        if self.isolation_of(t) == "process":
            problem = isolation_problem(t) or importable_problem(t.name, t.reference, t)
            if problem is not None:
                raise ValueError(problem)
        self._tools[t.name] = t
        return t

    def get(self, name: str | None) -> Tool | None:
        """The tool registered under ``name`` exactly (no other lookup, ever), or None."""
        if name is None:
            return None
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"Toolbox({list(self._tools)!r})"

    @property
    def names(self) -> list[str]:
        """The registered tool names, in the order they were added."""
        return list(self._tools)

    def definitions(self) -> list[dict[str, Any]]:
        """The request's ``tools`` parameter. An MCP server that said its tool list changed is
        listed again first (``ts.run`` asks before each request)."""
        if self._mcp and self._mcp.changed():
            self._mcp.refresh(self._tools)
        return [t.definition() for t in self._tools.values()]

    @property
    def isolation(self) -> Isolation:
        """Where sync tools that set no ``isolation`` of their own run (``"thread"``, ``"process"``)."""
        return self._isolation

    def isolation_of(self, t: Tool) -> Isolation:
        """Where the calls of ``t`` run: its own ``isolation``, else the toolbox's. (An async tool
        runs on an event loop, cancelled at its timeout; it cannot be ``"process"``, so a toolbox
        whose default is ``"process"`` takes it only with its own ``isolation="thread"``.)"""
        return t.isolation if t.isolation is not None else self._isolation

    def timeout_for(self, t: Tool) -> float | None:
        """The per-call timeout of ``t``: its own, else the toolbox default."""
        return t.timeout if t.timeout is not None else self.timeout

    # -- warm-ups (tools/_warm.py) -------------------------------------------------------------

    def warm_up(self, names: Iterable[str | None] | None = None) -> None:
        """Start the warm-ups of the named tools (default: every tool) that declare one and have not
        started yet. The run loop calls this when it sends a request offering them and when a call
        is announced; call it yourself to warm a toolbox at start-up. From a coroutine, async
        warm-ups run on its event loop. Never raises for a warm-up (its failure is recorded). When a
        named tool runs in a worker process and none is idle, one is started in the background."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self.warm_up_on(names, loop)

    def warm_up_on(self, names: Iterable[str | None] | None, loop: asyncio.AbstractEventLoop | None) -> None:
        """:meth:`warm_up` with the loop async warm-ups run on given (None: the toolbox's loop
        thread): sync code that is called from a coroutine passes None, so nothing waits on a
        loop it blocks."""
        if self._mcp:
            self._mcp.warm_up(names)
        tools = list(self._tools.values()) if names is None else [self.get(n) for n in names]
        for t in tools:
            if t is not None and t.warm is not None:
                self._warm_ups.start(t.name, t.warm, self.runtime, loop)
        if any(t is not None and self.isolation_of(t) == "process" for t in tools):
            with contextlib.suppress(RuntimeError):  # closed meanwhile: the next call says so
                self.runtime().processes().spare_soon()

    def warm_state(self, name: str) -> WarmUp | None:
        """The warm-up of tool ``name`` (its status, start and end), or None when it has not started.
        For an MCP tool: the latest opening of its server's session."""
        session = self._mcp.session_of(name) if self._mcp else None
        if session is not None:
            return session.warm
        return self._warm_ups.get(name)

    @property
    def warm_ups(self) -> dict[str, WarmUp]:
        """Every warm-up started so far, by tool name."""
        return dict(self._warm_ups.by_tool)

    def runtime(self) -> Runtime:
        """The toolbox's threads, made on first use (the executor runs tools on them)."""
        with self._runtime_lock:
            if self._runtime is None:
                self._runtime = Runtime(self.max_workers)
            return self._runtime

    # -- execution (the work is done in _executor) -------------------------------------------

    def execute(
        self,
        calls: Sequence[ToolCall],
        *,
        ledger: ClaimLedger | None = None,
        timeout: float | None = None,
        raise_tool_errors: bool = False,
    ) -> list[ToolResult]:
        """Gate and run ``calls`` (one result per call, in the same order), for your own loop.

        Parallel calls run concurrently: sync tools in the toolbox's thread pool (``"process"``
        ones in worker processes, each waited for by a thread of that pool), async tools on an event
        loop in a background thread. ``timeout`` bounds the whole batch (default
        ``total_timeout``). A tool's exception becomes an error result unless ``raise_tool_errors``.
        """
        return execute(self, calls, ledger=ledger, timeout=timeout, raise_tool_errors=raise_tool_errors)

    @async_twin_of(execute)
    async def aexecute(self, calls: Sequence[ToolCall], **options: Any) -> list[ToolResult]:
        """The async twin of :meth:`execute`: async tools run as tasks of the running loop, sync
        tools in the thread pool. Cancelling it cancels the running async tools."""
        return await aexecute(self, calls, **options)

    def close(self) -> None:
        """End the MCP sessions (each server is asked to exit, at most a few seconds), then release
        the thread pool, the loop thread and the worker processes: refuse new calls, kill
        the worker processes (a process tool still running is ended), cancel the queued sync calls
        and the running async tools, and wait for what still runs at most 1 second in all
        (``CLOSE_GRACE``). A sync tool's thread cannot be killed: one still running after that (one
        abandoned past its timeout, say) finishes on its daemon thread, and the interpreter's exit
        waits for such threads at most 2 seconds in all (``EXIT_GRACE``) before it ends them."""
        mcp = getattr(self, "_mcp", None)
        if mcp:  # first, on the loop that is about to stop: each server is asked to exit
            mcp.close()
        with self._runtime_lock:
            runtime, self._runtime = self._runtime, None
        if runtime is not None:
            runtime.close()
