"""MCP servers as tools, with the same guarantees as Python functions::

    import toolstitch as ts
    from toolstitch import mcp

    box = ts.Toolbox(
        [get_weather],
        mcp=[
            mcp.stdio("python", ["-m", "notes"], read_only=["search_notes"]),
            mcp.http("http://127.0.0.1:8000/mcp", headers={"Authorization": "Bearer ..."}),
        ],
    )

Each server's tools are offered beside the functions, with their names, descriptions and input
schemas; each call is checked against the server's schema, claimed in the ledger, confirmed, cached
and recorded like any tool's, then sent as ``tools/call`` on the server's one session. A server's
annotations are hints: nothing is ``read_only`` unless the caller says so (``read_only=[...]``) or
trusts the server (``trust_annotations=True``). It needs the ``mcp`` package:
``pip install 'toolstitch[mcp]'``. docs/mcp.md says the rest.
"""

from __future__ import annotations

from .errors import MCPServerError, OutcomeUnknown
from .tools import MCPServer, http, stdio

__all__ = ["MCPServer", "MCPServerError", "OutcomeUnknown", "http", "stdio"]
