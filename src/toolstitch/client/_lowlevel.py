"""The client's own low-level calls, ``post(...)`` and ``request(...)``, when they stream chat completions.

The SDK's resources build each request and hand it to the client's ``post`` (which hands it to
``request``); code can call them itself, as the SDK's README shows for endpoints it has no method for::

    wrapped.post("/chat/completions", body={...}, cast_to=ChatCompletion,
                 stream=True, stream_cls=openai.Stream[ChatCompletionChunk])

Such a call streams chat completions as ``create(stream=True)`` does, so it is stitched the same way
(rule 10: its body is the request, with ``options["extra_json"]`` over it as the SDK merges it, and
the tools, ``tool_choice`` and ``parallel_tool_calls`` there are the contract, read by
``recording._contract``: a field there that cannot be read refuses every call). The body may be a
mapping or JSON text (``content=b"{...}"``, or a bytes ``body``). Every path the SDK would send to
the endpoint counts, however it is spelled (``/chat/completions/.``, ``chat//completions``,
``chat/%63ompletions``, a full URL, a query string: see :func:`_is_chat`). What cannot be stitched is
passed on with one ``UnstitchedStreamWarning`` per client and call: a body that cannot be read (a
file or an iterator of bytes, text that is not one JSON object), or a result that is neither an
``openai.Stream`` nor a raw response. A raw response asked for by header (LiteLLM's ``client=``
path posts so) is the SDK's, whose ``parse()`` is stitched. Streams of other endpoints are left alone,
as their resources are (``responses``, ``completions``: toolstitch stitches chat completions), and so
is every call that does not stream.

Only calls made on the wrapper go through here: the SDK's resources hold the client itself, never
the wrapper, so ``create`` and friends do not pass twice. One exception is handled: an
instrumentation that patches ``request`` through the wrapper (``logfire.instrument_openai(wrapped)``
reads ``wrapped.request`` and sets its own wrapper of it on the client) makes this module's function
the one the SDK calls for every request; found installed on the client (directly or under
``__wrapped__``), it stands aside and passes every call on untouched.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from ..core import now
from ._proxy import like

if TYPE_CHECKING:
    from ._wrap import _Options

__all__ = ["post", "request", "streaming"]


def post(opts: _Options, client: Any) -> Any:
    """``client.post``, with a streamed chat-completions call stitched (see the module)."""
    sdk_post = client.post

    def begin(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        path = args[0] if args else kwargs.get("path")  # as the caller gave it: the SDK's call takes it
        if (
            not streaming(kwargs)
            or _installed(client, "post", intercepted)
            or not _reaches_chat(client, path)
        ):
            return "", None
        label = f"post({_shown(path)}, stream=True)"
        options = kwargs.get("options")
        extra = options.get("extra_json") if isinstance(options, Mapping) else None
        return label, _chat_request(opts, label, kwargs.get("body"), extra, kwargs.get("content"))

    intercepted = _intercepting(opts, sdk_post, begin)
    return intercepted


def request(opts: _Options, client: Any) -> Any:
    """``client.request``, with a streamed chat-completions call stitched (see the module)."""
    sdk_request = client.request

    def begin(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        if not streaming(kwargs) or _installed(client, "request", intercepted):
            return "", None
        options = kwargs["options"] if "options" in kwargs else args[1] if len(args) > 1 else None
        try:  # the SDK's FinalRequestOptions; anything else has no chat path to read
            path, body, extra = options.url, options.json_data, options.extra_json  # type: ignore[union-attr]
            content = getattr(options, "content", None)  # openai >= 2.x: raw bytes beside json_data
        except Exception:
            return "", None
        if not _reaches_chat(client, path):
            return "", None
        label = f"request(<{_shown(path)}>, stream=True)"
        return label, _chat_request(opts, label, body, extra, content)

    intercepted = _intercepting(opts, sdk_request, begin)
    return intercepted


_Begin = Callable[[tuple[Any, ...], dict[str, Any]], tuple[str, dict[str, Any] | None]]
"""What reads a call's arguments: its label and request when it streams chat completions (the
request None when it does not)."""


def _intercepting(opts: _Options, sdk_call: Callable[..., Any], begin: _Begin) -> Callable[..., Any]:
    """``sdk_call`` (the client's ``post`` or ``request``), dressed as itself, with a call that
    ``begin`` finds streaming chat completions stitched: the one decision is ``begin``'s, and each
    twin only calls the SDK (awaited or not)."""
    if opts.is_async:

        async def acall(*args: Any, **kwargs: Any) -> Any:
            label, request = begin(args, kwargs)
            if request is None:
                return await sdk_call(*args, **kwargs)
            started = now()
            return opts.stitched(await sdk_call(*args, **kwargs), request, started, label)

        return like(sdk_call, acall)

    def call(*args: Any, **kwargs: Any) -> Any:
        label, request = begin(args, kwargs)
        if request is None:
            return sdk_call(*args, **kwargs)
        started = now()
        return opts.stitched(sdk_call(*args, **kwargs), request, started, label)

    return like(sdk_call, call)


def _shown(path: Any) -> str:
    """``path`` for a warning's label: text (or an ``httpx.URL``'s text) as its ``repr``, anything
    else by its type (a caller's object's own ``repr`` is not run)."""
    if type(path) is not str and type(path).__name__ == "URL":
        with contextlib.suppress(Exception):
            path = str(path)
    return repr(path) if type(path) is str else f"<{type(path).__name__}>"


def streaming(kwargs: Mapping[str, Any]) -> bool:
    """Whether the SDK will stream: it reads ``stream or False`` (its "not given" sentinels are
    falsy), so the same truth test decides here. A value whose truth cannot be read is left to the
    SDK to refuse."""
    try:
        return bool(kwargs.get("stream"))
    except Exception:
        return False


#: How many times a path is percent-decoded at most: a server may decode once more than the SDK
#: encodes (``%2563`` is ``%63`` is ``c``); more layers than this are not a path anyone routes.
_DECODINGS = 4


def _reaches_chat(client: Any, path: Any) -> bool:
    """Whether a call to ``path`` on ``client`` reaches the chat-completions endpoint: the path
    joined to the client's ``base_url`` exactly as the SDK joins it (``_prepare_url``; so a
    ``base_url`` that already ends in ``/chat/`` or ``/chat/completions`` counts), or the path
    alone (when the join cannot be made, or says no: the doubt goes to yes)."""
    try:
        joined = client._prepare_url(path)
        target = joined.raw_path.decode("ascii", "replace")
    except Exception:
        target = None
    return (target is not None and _is_chat(target)) or _is_chat(path)


def _is_chat(path: Any) -> bool:
    """Whether ``path`` reaches the chat-completions endpoint: relative (joined to the client's
    ``base_url`` as the SDK joins it, which keeps the base's own segments in front) or a full URL,
    in any spelling a server would route there. The path alone decides (the query, the fragment and
    the host do not), normalised the way URL joins and servers normalise it: percent-encoding
    decoded (``%2F`` included), ``\\`` read as ``/``, empty segments (``//``), ``.`` and ``..``
    resolved, ``;params`` dropped, a trailing slash, dot or space ignored, case ignored. A false yes
    stitches a stream that is not chat completions (its chunks pass through unchanged, with
    anomalies); a false no would leave tool calls unchecked, so the doubt goes to yes."""
    if not isinstance(path, str):
        try:  # an httpx.URL (the SDK joins any URL it is given); anything else is no path
            path = str(path) if type(path).__name__ == "URL" else None
        except Exception:
            return False
        if path is None:
            return False
    try:
        tail = urlsplit(path).path
    except ValueError:
        tail = path.split("?", 1)[0].split("#", 1)[0]
    for _ in range(_DECODINGS):
        decoded = unquote(tail)
        if decoded == tail:
            break
        tail = decoded
    segments: list[str] = []
    for raw in tail.replace("\\", "/").split("/"):
        segment = raw.split(";", 1)[0].strip()
        if segment in ("", "."):
            continue
        if segment == "..":
            if segments:
                segments.pop()
            continue
        segments.append(segment.rstrip(". ").lower())
    return segments[-2:] == ["chat", "completions"]


def _chat_request(
    opts: _Options, label: str, body: Any, extra: Any, content: Any = None
) -> dict[str, Any] | None:
    """The request a streamed chat-completions call sends, as ``create``'s keyword arguments read
    (``extra_json`` as ``extra_body``, which the SDK merges over the body): the body as a mapping,
    or JSON text (``bytes``, ``bytearray``, ``memoryview`` or ``str``, given as ``content=`` or as a
    bytes ``body``) holding one object. None, with one warning, when the body cannot be read: raw
    content that is a file or an iterator (reading it would take it from the SDK), text that is not
    one JSON object (or holds a key twice: which value a server takes is its own choice), anything
    else. The contract inside a body that was read is :func:`read_contract`'s to judge: a field it
    cannot read refuses every call."""
    if body is None and content is not None:
        body = content
    if body is None:
        body = {}
    if not isinstance(body, Mapping):
        fields, why = _json_object(body)
        if fields is None:
            opts.unstitched(label, why, stacklevel=5)
            return None
        body = fields
    request = {k: v for k, v in body.items() if k != "extra_body"}  # a field sent as is, not merged
    if isinstance(extra, Mapping) and extra:
        request["extra_body"] = dict(extra)
    return request


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, value in pairs:
        if key in fields:
            raise ValueError(f"the key {key!r} appears twice")
        fields[key] = value
    return fields


def _json_object(body: Any) -> tuple[dict[str, Any] | None, str]:
    """``body`` read as the JSON object it holds (strict UTF-8 JSON, no NaN, no key twice), or None
    and why it cannot be read."""
    if isinstance(body, str):
        text = body
    elif isinstance(body, bytes | bytearray | memoryview):
        try:
            text = bytes(body).decode("utf-8")
        except (UnicodeDecodeError, TypeError, ValueError):
            return None, f"its body ({type(body).__name__}) is not UTF-8 text"
    else:
        return (
            None,
            f"its body is a {type(body).__name__}, not a mapping of the request's fields or JSON text",
        )
    try:
        fields = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        return None, f"its body ({type(body).__name__}) is not JSON toolstitch can read ({exc})"
    if not isinstance(fields, dict):
        return None, f"its body ({type(body).__name__}) holds a JSON {type(fields).__name__}, not an object"
    return fields, ""


def _installed(client: Any, name: str, function: Callable[..., Any]) -> bool:
    """Whether ``function`` was set on ``client`` itself as its ``name`` (or under a patch of it
    that keeps ``__wrapped__``, as ``functools.wraps`` and ``wrapt`` do)."""
    try:
        current = vars(client).get(name)
    except TypeError:
        return False
    for _ in range(16):
        if current is None:
            return False
        if current is function:
            return True
        current = getattr(current, "__wrapped__", None)
    return False
