"""MCP servers as a toolbox's tools: what a server is (:class:`MCPServer`, made by :func:`stdio` and
:func:`http`), what its annotations may decide (:func:`policy`), and what the model reads of a result
(:func:`result_text`).

The session that talks to the server is ``_mcp_session.py``; the tools made from its list, and their
refresh, are ``_mcp_tools.py``. Every call of an MCP tool runs through the executor's one door, like
any function tool (rule 15 of docs/design.md): the tool's function is the ``tools/call`` itself.

**Trust.** A server's annotations are hints, written by the server: the MCP specification says
clients must not make tool-use decisions from the annotations of an untrusted server. So by default
no MCP tool is ``read_only`` (no eager start, no cache, never tried again), and which calls need a
confirmation is the caller's ``confirm=[...]``. ``trust_annotations=True`` says the caller trusts
this server: ``readOnlyHint`` then makes a tool ``read_only``, ``destructiveHint`` (true when absent,
as MCP says) makes a tool that is not read-only ask for confirmation, and ``idempotentHint`` lets a
call lost with its session be sent once more. The caller's per-tool ``read_only=[...]`` and
``confirm=[...]`` win over both.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

__all__ = ["RESULT_CHARS", "MCPServer", "ToolPolicy", "http", "offerable", "policy", "result_text", "stdio"]

RESULT_CHARS = 1_000_000
"""At most this many characters of one result reach the model (the rest is cut, and it says so): a
server's answer is input like any other, and one call must not fill the context."""

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class MCPServer:
    """An MCP server a toolbox offers the tools of: ``ts.Toolbox([...], mcp=[server, ...])``.

    Made by :func:`stdio` or :func:`http`; see there for each field."""

    transport: Literal["stdio", "http"]
    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    trust_annotations: bool = False
    read_only: frozenset[str] = frozenset()
    confirm: frozenset[str] = frozenset()
    timeout: float | None = None
    start_timeout: float = 30.0
    cache: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("an MCP server needs a name (name=...)")
        if not self.start_timeout > 0:
            raise ValueError("start_timeout must be a positive number of seconds")
        for value, what in ((self.timeout, "timeout"), (self.cache, "cache")):
            if value is not None and not value > 0:
                raise ValueError(f"{what} must be a positive number of seconds (or None)")


def _names(value: Iterable[str], what: str) -> frozenset[str]:
    if isinstance(value, str):
        raise TypeError(f"{what}= takes a list of tool names, not one string: {what}=[{value!r}]")
    names = frozenset(value)
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"{what}= takes tool names (str), got {type(n).__name__}")
    return names


def _options(
    trust_annotations: bool,
    read_only: Iterable[str],
    confirm: Iterable[str],
    timeout: float | None,
    start_timeout: float,
    cache: float | None,
) -> dict[str, Any]:
    """The options :func:`stdio` and :func:`http` share, checked once."""
    return {
        "trust_annotations": bool(trust_annotations),
        "read_only": _names(read_only, "read_only"),
        "confirm": _names(confirm, "confirm"),
        "timeout": timeout,
        "start_timeout": start_timeout,
        "cache": cache,
    }


def stdio(
    command: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    name: str | None = None,
    trust_annotations: bool = False,
    read_only: Iterable[str] = (),
    confirm: Iterable[str] = (),
    timeout: float | None = None,
    start_timeout: float = 30.0,
    cache: float | None = None,
) -> MCPServer:
    """An MCP server run as a subprocess, spoken to over its stdin and stdout.

    ``command``, ``args``  the program and its arguments (``mcp.stdio("python", ["-m", "notes"])``)
    ``env``                variables added to the MCP SDK's default environment (which leaves out
                           the parent's secrets)
    ``name``               how messages, spans and the timeline name it (default: the program's name)
    ``trust_annotations``  act on the server's ``readOnlyHint``, ``destructiveHint`` and
                           ``idempotentHint`` (see ``tools/_mcp.py``); default: hints only
    ``read_only``          tools to treat as ``read_only`` whatever the annotations say
    ``confirm``            tools whose calls need the toolbox's ``confirm`` callback first
    ``timeout``            seconds per call (default: the toolbox's); past it the call is cancelled,
                           and MCP's cancellation is sent
    ``start_timeout``      seconds to start the server and read its tool list
    ``cache``              seconds a result of a ``read_only`` tool answers the same call again
    """
    if not isinstance(command, str) or not command:
        raise ValueError("mcp.stdio() needs the command that starts the server")
    if isinstance(args, str):
        raise TypeError(f"args= takes a list of arguments, not one string: [{args!r}]")
    return MCPServer(
        "stdio",
        name or os.path.basename(command) or command,
        command=command,
        args=tuple(str(a) for a in args),
        env=dict(env) if env is not None else None,
        cwd=os.fspath(cwd) if cwd is not None else None,
        **_options(trust_annotations, read_only, confirm, timeout, start_timeout, cache),
    )


def http(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    name: str | None = None,
    trust_annotations: bool = False,
    read_only: Iterable[str] = (),
    confirm: Iterable[str] = (),
    timeout: float | None = None,
    start_timeout: float = 30.0,
    cache: float | None = None,
) -> MCPServer:
    """An MCP server over streamable HTTP at ``url`` (``http://127.0.0.1:8000/mcp``), sent
    ``headers`` (an ``Authorization``, say) on every request. The other options are
    :func:`stdio`'s; the default ``name`` is the URL's host."""
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"mcp.http() needs an http(s) URL, got {url!r}")
    return MCPServer(
        "http",
        name or parts.hostname,
        url=url,
        headers=dict(headers or {}),
        **_options(trust_annotations, read_only, confirm, timeout, start_timeout, cache),
    )


# ----------------------------------------------------------------------------- what hints decide


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """What toolstitch does with one MCP tool: ``read_only`` (eager start, cache, tried once more
    on a new session), ``confirm`` (the toolbox's callback first), ``retry`` (a call lost with its
    session is sent once more)."""

    read_only: bool
    confirm: bool
    retry: bool


def _hint(annotations: Any, attribute: str) -> bool | None:
    value = getattr(annotations, attribute, None) if annotations is not None else None
    return value if isinstance(value, bool) else None


def policy(server: MCPServer, name: str, annotations: Any) -> ToolPolicy:
    """The policy of tool ``name`` of ``server``, whose listing carried ``annotations`` (a
    ``ToolAnnotations`` or None). Only ``True`` itself counts as a yes: a hostile hint of another
    type is absent."""
    read_only = confirm = retry = False
    if server.trust_annotations:
        read_only = _hint(annotations, "read_only_hint") is True
        destructive = _hint(annotations, "destructive_hint") is not False  # MCP: true when absent
        confirm = destructive and not read_only
        retry = _hint(annotations, "idempotent_hint") is True
    if name in server.read_only:
        read_only, confirm = True, name in server.confirm
    if name in server.confirm:
        confirm = True
    return ToolPolicy(read_only, confirm, retry or read_only)


def offerable(name: Any) -> bool:
    """A name OpenAI accepts for a function (``^[a-zA-Z0-9_-]{1,64}$``)."""
    return isinstance(name, str) and _NAME.match(name) is not None


# ----------------------------------------------------------------------------- what the model reads


def _size_of(data: Any) -> str:
    if not isinstance(data, str):
        return "no data"
    try:
        n = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return f"{len(data)} characters of data that is not base64"
    return f"{n} bytes"


def _part_text(part: Any) -> str:
    """One content part as text: text as it is; anything else described (the chat API's tool
    message takes text only)."""
    kind = getattr(part, "type", None)
    if kind == "text":
        text = getattr(part, "text", "")
        return text if isinstance(text, str) else ""
    if kind in ("image", "audio"):
        mime = getattr(part, "mime_type", None)
        shown = mime if isinstance(mime, str) else "unknown type"
        return f"[{kind}: {shown}, {_size_of(getattr(part, 'data', None))}]"
    if kind == "resource_link":
        uri, title = getattr(part, "uri", ""), getattr(part, "name", None)
        named = f" ({title})" if isinstance(title, str) and title else ""
        return f"[resource link: {uri}{named}]"
    if kind == "resource":
        resource = getattr(part, "resource", None)
        uri = getattr(resource, "uri", "")
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return f"[resource {uri}]\n{text}"
        mime = getattr(resource, "mime_type", None)
        shown = mime if isinstance(mime, str) else "binary"
        return f"[resource {uri}: {shown}, {_size_of(getattr(resource, 'blob', None))}]"
    return f"[a content part of type {str(kind)[:40]!r}]"


def _bounded(text: str) -> str:
    if len(text) <= RESULT_CHARS:
        return text
    return (
        text[:RESULT_CHARS]
        + f"\n[cut: the result had {len(text)} characters; the first {RESULT_CHARS} are shown]"
    )


def result_text(result: Any) -> str:
    """What the model reads of a ``CallToolResult``: its structured content as JSON when it has
    one (the text parts then repeat it, as MCP asks of servers), else its parts, text as it is and
    images, audio and resources described; bounded by :data:`RESULT_CHARS`."""
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        try:
            return _bounded(json.dumps(structured, ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError, RecursionError):
            pass  # not JSON after all: the parts say it
    parts = getattr(result, "content", None)
    if not isinstance(parts, list):
        return ""
    return _bounded("\n".join(_part_text(p) for p in parts))
