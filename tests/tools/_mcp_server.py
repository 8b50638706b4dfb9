"""A real MCP server for the tests, built with the ``mcp`` package's own ``MCPServer``.

Run as a stdio subprocess (``python _mcp_server.py``) or over streamable HTTP on 127.0.0.1
(``python _mcp_server.py --http PORT``). Every tool that has an effect appends a line to
``$MARKS/<tool>`` so that a test can count what really ran on the server, across sessions.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import anyio
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent, ToolAnnotations
from pydantic import BaseModel

MARKS = Path(os.environ.get("MARKS", "."))

TTL = int(os.environ.get("LIST_TTL_MS", "0"))  # how long a client may keep the tool list (ttlMs)
server = MCPServer("toolstitch-tests", cache_hints={"tools/list": CacheHint(ttl_ms=TTL)} if TTL else None)


def mark(name: str, line: str = "ran") -> int:
    """Append ``line`` to the marks of ``name``; how many lines it now has."""
    path = MARKS / name
    with path.open("a") as f:
        f.write(line + "\n")
    return len(path.read_text().splitlines())


class Forecast(BaseModel):
    city: str
    celsius: float


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Echo the text back."""
    mark("echo", text)
    return text


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def forecast(city: str) -> Forecast:
    """The forecast for a city."""
    mark("forecast", city)
    return Forecast(city=city, celsius=21.5)


@server.tool(annotations=ToolAnnotations(destructive_hint=False))
def add_note(text: str) -> str:
    """Add a note (not destructive, not read-only)."""
    n = mark("add_note", text)
    return f"note {n} added"


@server.tool()
def delete_notes() -> str:
    """Delete every note (no annotations: destructive by MCP's defaults)."""
    mark("delete_notes")
    return "deleted"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lying_reader(path: str) -> str:
    """Claims to be read-only; writes a mark (a server's hint is not the truth)."""
    mark("lying_reader", path)
    return "read"


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, and mark whether it was cancelled."""
    mark("slow", "started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        mark("slow", "cancelled")
        raise
    mark("slow", "finished")
    return "slept"


@server.tool()
def die() -> str:
    """End the server in the middle of the call (after marking it)."""
    mark("die")
    os._exit(3)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def flaky_read(key: str) -> str:
    """Read-only: ends the server on its first call, answers on the next."""
    if mark("flaky_read", key) == 1:
        os._exit(3)
    return f"value of {key}"


@server.tool()
def exit_soon() -> str:
    """Answer, then end the server a moment later (it dies between calls)."""
    mark("exit_soon")
    threading.Timer(0.2, lambda: os._exit(4)).start()
    return "bye"


@server.tool()
def refuse(reason: str) -> str:
    """Fail with a text written for the model."""
    raise ToolError(f"cannot do that: {reason}")


@server.tool()
def picture() -> list[TextContent | ImageContent]:
    """A text part and an image."""
    return [
        TextContent(type="text", text="a cat"),
        ImageContent(type="image", data="aGVsbG8=", mime_type="image/png"),
    ]


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def header(name: str, ctx: Context) -> str:
    """A header of the HTTP request that carried this call ('' over stdio)."""
    request = getattr(ctx.request_context, "request", None)
    headers = getattr(request, "headers", None)
    return headers.get(name, "") if headers is not None else ""


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool 'added' and say the list changed."""
    if "added" not in {t.name for t in await server.list_tools()}:
        server.add_tool(lambda: "new", name="added", description="Added later.")
    await ctx.notify_tools_changed()
    return "grown"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
