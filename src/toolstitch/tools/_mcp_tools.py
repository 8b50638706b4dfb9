"""The tools of a toolbox's MCP servers: made from each server's list, checked when the toolbox is
built, read again when a server says its list changed, and run through the executor's door.

Each MCP tool is a :class:`~toolstitch.tools.Tool` made with ``Tool.from_schema`` from the server's
``inputSchema``, whose function (``CallTool`` of ``_mcp_session.py``) is the ``tools/call`` on the
server's session. So the gate checks the arguments against the server's own schema before
anything is sent, the ledger claims the call, the confirmation, the cache and the timeouts apply, and
the result is recorded, exactly as for a Python function: there is no second door.

**A list the server lets us keep.** A 2026-07-28 server says how long its tool list may be kept
(``ttlMs``; 0, the default, means not at all). Within that time a new toolbox for the same server
(same command, arguments, environment and directory, or the same URL and headers) is built from the
list it already read, without waiting for the server: the session then opens when the first request
offering its tools is sent (a warm-up, while the model writes), not before. At most
:data:`MAX_LISTS` lists are kept, in this process only.

A tool the model could not be offered safely is left out, with a WARNING on the ``"toolstitch"``
logger: a name OpenAI refuses, an input schema that is no JSON Schema of an object. A name two tools
share is refused when the toolbox is built (``ValueError``); when it appears in a later list, the
newcomer is left out.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from ..core import now
from ..errors import MCPServerError
from ._definition import Tool
from ._mcp import MCPServer, offerable, policy
from ._mcp_session import CallTool, Session, mcp_package

__all__ = ["MCPTools"]

logger = logging.getLogger("toolstitch")

MAX_LISTS = 64
"""At most this many servers' tool lists are kept (the least recently used goes first)."""


class _Lists:
    """The tool lists servers let this process keep, by server identity, until they expire."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, tuple[float, list[Any]]] = OrderedDict()

    @staticmethod
    def identity(server: MCPServer) -> str:
        """What makes two descriptions the same server (never its name or the caller's options);
        a digest, so that no header or variable is kept in the clear as a key."""
        env = sorted(server.env.items()) if server.env is not None else None
        parts = [server.transport, server.command, list(server.args), env, server.cwd, server.url]
        parts.append(sorted(server.headers.items()))
        return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()

    def get(self, server: MCPServer) -> list[Any] | None:
        key = self.identity(server)
        with self._lock:
            found = self._kept.get(key)
            if found is None:
                return None
            if found[0] <= now():
                del self._kept[key]
                return None
            self._kept.move_to_end(key)
            return list(found[1])

    def put(self, server: MCPServer, tools: list[Any], ttl_ms: int) -> None:
        key = self.identity(server)
        with self._lock:
            self._kept.pop(key, None)
            if ttl_ms > 0:
                self._kept[key] = (now() + ttl_ms / 1000.0, list(tools))
                while len(self._kept) > MAX_LISTS:
                    self._kept.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


LISTS = _Lists()


def _tool(session: Session, listed: Any) -> Tool | None:
    """A :class:`Tool` for one listed MCP tool, or None (logged) when it cannot be offered."""
    server = session.server
    name = getattr(listed, "name", None)
    if not isinstance(name, str) or not offerable(name):
        logger.warning("MCP server %r: tool %r is left out: OpenAI refuses its name", server.name, name)
        return None
    schema = getattr(listed, "input_schema", None)
    description = getattr(listed, "description", None)
    if not isinstance(description, str):
        title = getattr(listed, "title", None)
        description = title if isinstance(title, str) else ""
    rules = policy(server, name, getattr(listed, "annotations", None))
    try:
        if not isinstance(schema, dict):
            raise ValueError("its input schema is not an object")
        made = Tool.from_schema(
            CallTool(session, name, rules),
            parameters=schema,
            name=name,
            description=description,
            read_only=rules.read_only,
            confirm=rules.confirm,
            timeout=server.timeout,
            cache=server.cache if rules.read_only else None,
            strict=False,
            isolation="thread",
        )
    except Exception as exc:  # a schema no validator takes (fail closed: not offered)
        logger.warning("MCP server %r: tool %r is left out: %s", server.name, name, exc)
        return None
    made.server = server.name
    return made


class MCPTools:
    """The MCP servers of one toolbox and the tools they gave it. ``loop_of`` gives the toolbox's
    loop thread, where every session lives."""

    def __init__(
        self, servers: Iterable[MCPServer], loop_of: Callable[[], asyncio.AbstractEventLoop]
    ) -> None:
        self.sessions: list[Session] = []
        for s in servers:
            if not isinstance(s, MCPServer):
                raise TypeError(
                    f"mcp= takes servers made by toolstitch.mcp.stdio() or .http(), got {type(s).__name__}"
                )
            self.sessions.append(Session(s, loop_of))
        self.by_tool: dict[str, Session] = {}

    def __bool__(self) -> bool:
        return bool(self.sessions)

    def _listed(self, session: Session) -> list[Any]:
        """The server's tool list, read over its session (opened now, if it is not), and kept as
        long as the server allows."""
        server = session.server
        try:
            tools, ttl_ms = session.run(session.list_tools(), server.start_timeout)
            LISTS.put(server, tools, ttl_ms)
            return list(tools)
        except TimeoutError:
            raise MCPServerError(
                server.name, f"no tool list within start_timeout ({server.start_timeout:g}s)"
            ) from None
        except Exception as exc:
            raise MCPServerError(server.name, f"could not be started or listed ({exc})") from exc

    def build(self, taken: Callable[[str], str | None]) -> list[Tool]:
        """Make every server's tools (blocking): from the list it lets us keep, else from its
        session, opened now. ``taken(name)`` says who else has a name (None: nobody); a clash, or a
        ``read_only``/``confirm`` override naming a tool the server does not have, raises
        ``ValueError``."""
        mcp_package()
        made: list[Tool] = []
        owners: dict[str, str] = {}
        for session in self.sessions:
            server = session.server
            listed = LISTS.get(server)
            if listed is None:
                listed = self._listed(session)
            tools = [t for t in (_tool(session, item) for item in listed) if t is not None]
            names = {t.name for t in tools}
            for what, wanted in (("read_only", server.read_only), ("confirm", server.confirm)):
                missing = sorted(wanted - names)
                if missing:
                    raise ValueError(
                        f"MCP server {server.name!r} has no tool {', '.join(map(repr, missing))} "
                        f"(named in {what}=); it offers {sorted(names)}"
                    )
            for t in tools:
                other = taken(t.name) or owners.get(t.name)
                if other is not None:
                    raise ValueError(
                        f"two tools are named {t.name!r}: one of MCP server {server.name!r} and {other}"
                    )
                owners[t.name] = f"one of MCP server {server.name!r}"
                self.by_tool[t.name] = session
                made.append(t)
        return made

    def changed(self) -> bool:
        return any(s.changed for s in self.sessions)

    def refresh(self, tools: dict[str, Tool]) -> None:
        """Read the lists of the servers that said theirs changed, and update ``tools`` (the
        toolbox's tools by name) in place. A server that cannot be listed keeps its tools."""
        for session in self.sessions:
            if not session.changed or session.closed:
                continue
            try:
                listed = self._listed(session)
            except MCPServerError as exc:
                logger.warning("%s; its tools are kept as they were", exc)
                continue
            for name in [n for n, s in self.by_tool.items() if s is session]:
                del self.by_tool[name]
                tools.pop(name, None)
            for t in (_tool(session, item) for item in listed):
                if t is None:
                    continue
                if t.name in tools:
                    logger.warning(
                        "MCP server %r: new tool %r is left out: another tool has its name",
                        session.server.name,
                        t.name,
                    )
                    continue
                tools[t.name] = t
                self.by_tool[t.name] = session

    def session_of(self, name: str | None) -> Session | None:
        return self.by_tool.get(name) if name is not None else None

    def warm_up(self, names: Iterable[str | None] | None) -> None:
        """Open (off the critical path) the sessions of the named tools (default: every server)
        that are not open: after a death, the next request offering their tools opens a new one."""
        if names is None:
            sessions = list(self.sessions)
        else:
            sessions = [s for s in (self.session_of(n) for n in names) if s is not None]
        for session in dict.fromkeys(sessions):
            session.open_soon()

    def close(self) -> None:
        """Close every session (in parallel), at most a few seconds in all."""
        opened = [s for s in self.sessions if s.started]
        loop = opened[0].loop() if opened else None
        for s in self.sessions:
            s.closed = True  # nothing opens from now on
        if loop is None:
            return

        async def close_all() -> None:
            await asyncio.gather(*(s.close() for s in opened), return_exceptions=True)

        try:
            future = asyncio.run_coroutine_threadsafe(close_all(), loop)
            future.result(timeout=8.0)
        except Exception as exc:  # the loop stopped meanwhile, or a server would not end
            logger.warning("MCP sessions did not all close in time (%s)", type(exc).__name__)
