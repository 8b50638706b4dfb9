"""The MCP server of benchmarks/mcp_turn.py, built with the ``mcp`` package's ``MCPServer`` and run
over stdio: it takes ``START`` seconds to start (on top of the interpreter's own start), then each
call takes ``CALL`` seconds. ``LIST_TTL_MS`` (environment) is how long it lets a client keep its tool
list (``ttlMs``, SEP-2549; 0: not at all)."""

from __future__ import annotations

import os
import time

import anyio
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

START = float(os.environ.get("START", "0.3"))
CALL = float(os.environ.get("CALL", "0.15"))
TTL = int(os.environ.get("LIST_TTL_MS", "0"))

server = MCPServer("docs", cache_hints={"tools/list": CacheHint(ttl_ms=TTL)} if TTL else None)
READ = ToolAnnotations(read_only_hint=True)


@server.tool(annotations=READ)
async def search_docs(query: str, limit: int) -> str:
    """Search the product documentation."""
    await anyio.sleep(CALL)
    return f"3 pages about {query}"


@server.tool(annotations=READ)
async def get_price(sku: str, currency: str) -> str:
    """The price of a product."""
    await anyio.sleep(CALL)
    return f"{sku}: 42 {currency}"


@server.tool(annotations=ToolAnnotations(destructive_hint=False))
async def create_ticket(title: str, body: str) -> str:
    """Open a support ticket."""
    await anyio.sleep(CALL)
    return f"ticket opened: {title}"


if __name__ == "__main__":
    time.sleep(START)  # a server that connects to its backend before it serves
    server.run("stdio")
