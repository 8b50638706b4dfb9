"""The client's own low-level calls, ``post(...)`` and ``request(...)``, when they stream chat completions.

The SDK's resources build each request and hand it to the client's ``post`` (which hands it to
``request``); code can call them itself, as the SDK's README shows for endpoints it has no method for::

    wrapped.post("/chat/completions", body={...}, cast_to=ChatCompletion,
                 stream=True, stream_cls=openai.Stream[ChatCompletionChunk])

Such a call streams chat completions as ``create(stream=True)`` does, so it is stitched the same way
(rule 10: its body is the request, with ``options["extra_json"]`` over it as the SDK merges it, and
the tools, ``tool_choice`` and ``parallel_tool_calls`` there are the contract). What cannot be stitched
is passed on with one ``UnstitchedStreamWarning`` per client and call: a body that is not a mapping
(its tools cannot be read), or a result that is not an ``openai.Stream`` (a raw response asked for by
header). Streams of other endpoints are left alone, as their resources are (``responses``,
``completions``: toolstitch stitches chat completions), and so is every call that does not stream.

Only calls made on the wrapper go through here: the SDK's resources hold the client itself, never
the wrapper, so ``create`` and friends do not pass twice. One exception is handled: an
instrumentation that patches ``request`` through the wrapper (``logfire.instrument_openai(wrapped)``
reads ``wrapped.request`` and sets its own wrapper of it on the client) makes this module's function
the one the SDK calls for every request; found installed on the client (directly or under
``__wrapped__``), it stands aside and passes every call on untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..core._call import now
from ._proxy import like

if TYPE_CHECKING:
    from ._wrap import _Options

__all__ = ["post", "request", "streaming"]


def post(opts: _Options, client: Any) -> Any:
    """``client.post``, with a streamed chat-completions call stitched (see the module)."""
    sdk_post = client.post

    def begin(path: Any, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        label = f"post({path!r}, stream=True)"
        if not streaming(kwargs) or _installed(client, "post", intercepted) or not _is_chat(path):
            return label, None
        options = kwargs.get("options")
        extra = options.get("extra_json") if isinstance(options, Mapping) else None
        return label, _chat_request(opts, label, kwargs.get("body"), extra)

    if opts.is_async:

        async def apost(path: Any, *args: Any, **kwargs: Any) -> Any:
            label, request = begin(path, kwargs)
            if request is None:
                return await sdk_post(path, *args, **kwargs)
            started = now()
            return opts.stitched(await sdk_post(path, *args, **kwargs), request, started, label)

        intercepted: Callable[..., Any] = like(sdk_post, apost)
    else:

        def spost(path: Any, *args: Any, **kwargs: Any) -> Any:
            label, request = begin(path, kwargs)
            if request is None:
                return sdk_post(path, *args, **kwargs)
            started = now()
            return opts.stitched(sdk_post(path, *args, **kwargs), request, started, label)

        intercepted = like(sdk_post, spost)
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
        except Exception:
            return "", None
        label = f"request(<{path!r}>, stream=True)"
        if not _is_chat(path):
            return label, None
        return label, _chat_request(opts, label, body, extra)

    if opts.is_async:

        async def arequest(*args: Any, **kwargs: Any) -> Any:
            label, request = begin(args, kwargs)
            if request is None:
                return await sdk_request(*args, **kwargs)
            started = now()
            return opts.stitched(await sdk_request(*args, **kwargs), request, started, label)

        intercepted: Callable[..., Any] = like(sdk_request, arequest)
    else:

        def srequest(*args: Any, **kwargs: Any) -> Any:
            label, request = begin(args, kwargs)
            if request is None:
                return sdk_request(*args, **kwargs)
            started = now()
            return opts.stitched(sdk_request(*args, **kwargs), request, started, label)

        intercepted = like(sdk_request, srequest)
    return intercepted


def streaming(kwargs: Mapping[str, Any]) -> bool:
    """Whether the SDK will stream: it reads ``stream or False`` (its "not given" sentinels are
    falsy), so the same truth test decides here. A value whose truth cannot be read is left to the
    SDK to refuse."""
    try:
        return bool(kwargs.get("stream"))
    except Exception:
        return False


def _is_chat(path: Any) -> bool:
    """Whether ``path`` (relative, or a full URL as the SDK accepts) is chat completions."""
    if not isinstance(path, str):
        return False
    try:
        tail = urlsplit(path).path.rstrip("/")
    except ValueError:
        return False
    return tail == "chat/completions" or tail.endswith("/chat/completions")


def _chat_request(opts: _Options, label: str, body: Any, extra: Any) -> dict[str, Any] | None:
    """The request a streamed chat-completions call sends, as ``create``'s keyword arguments read
    (``extra_json`` as ``extra_body``, which the SDK merges over the body); None, with one warning,
    when the body cannot be read (the contract would be unknown: rule 10 fails closed, and a stream
    of nothing but invalid calls would say less than the warning)."""
    if body is None:
        body = {}
    if not isinstance(body, Mapping):
        why = f"its body is a {type(body).__name__}, not a mapping of the request's fields"
        opts.unstitched(label, why, stacklevel=5)
        return None
    request = {k: v for k, v in body.items() if k != "extra_body"}  # a field sent as is, not merged
    if isinstance(extra, Mapping) and extra:
        request["extra_body"] = dict(extra)
    return request


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
