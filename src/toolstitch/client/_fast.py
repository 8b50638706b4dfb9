"""``decode="fast"``: the SDK's own stream, with its most expensive step done by pydantic-core.

Most of the CPU a streamed response costs is the SDK turning each ``data:`` line into a
``ChatCompletionChunk``: ``openai._models.construct_type`` walks the type annotations in Python and
builds a fresh ``TypeAdapter`` for every ``Optional`` field (about 60 µs per chunk), where
``ChatCompletionChunk.model_validate(data, strict=True)`` does the same in pydantic-core (about
4 µs). This module swaps that one step, and nothing else, inside the SDK's own ``Stream``:

* :func:`install` gives a not-yet-iterated ``openai.Stream``/``AsyncStream`` a stand-in client whose
  ``_process_response_data`` is :func:`build_chunk` (falling back to the real client's method), and
  (when :mod:`._sse` decodes exactly like this release's decoder) the faster SSE decoder. The SDK's
  ``__stream__`` still runs: ``[DONE]``, in-band ``error`` events, ``event:`` handling, closing and
  error translation are the SDK's code, so they cannot drift from it.

The contract is equality: a chunk built here has the same class, ``__dict__``, ``model_extra`` and
``model_fields_set`` (at every level) as the SDK's. Why strict validation gives that:

* ``construct_type`` builds a model that an annotation names bare (``choices: List[Choice]``,
  ``delta: ChoiceDelta``) with ``construct(**value)``: values kept as they are, unknown keys into
  ``model_extra`` but *not* into ``model_fields_set``.
* For an ``Optional[...]`` field it runs pydantic's lax validation (``validate_type``) and keeps the
  result when that succeeds (``usage``, ``logprobs``, ``tool_calls``, ``function``...): unknown keys
  there *are* in ``model_fields_set``.
* Strict validation accepts a subset of what lax validation accepts and gives the same values where
  both accept; on the construct-path models (the plan below) a strictly valid ``str``/``int``/
  ``bool``/``Literal`` is exactly the value ``construct`` keeps. So a strictly valid chunk equals the
  SDK's once the construct-path models' ``model_fields_set`` drop their extra keys.
* What strict validation rejects (a missing ``index``, ``type: ""``, ``"1"`` for an int, a null
  where a value is required, any non-object) is built by the SDK's own method for that chunk, as are
  the two keys that mean something else to ``construct(**value)`` (``_fields_set`` and its mangled
  ``__cls``).

The plan is derived from the installed release's annotations; anything it cannot prove (a float, a
dict, an alias, a non-``None`` default on a construct-path model) disables the fast builder. A
self-check at first use proves the rest on the installed release, against what it does now, not
what an older release did: the fast builder against the SDK's own ``_process_response_data`` on a
sample of chunks, the SDK's own stream loop run over sample bodies with the stand-in client and
without it, that method's parameters (the stand-in takes exactly those), and both SSE decoders on
a sample of bodies. A release where any of these differ keeps the SDK's decoding and says so once,
with a :class:`~toolstitch.errors.FastDecodeWarning`.

The SDK internals this relies on (each in docs/sdk-internals.md with the test that pins it), each
checked where it is used (a release without one, or where one behaves differently, keeps the SDK's
own decoding for that stream or for good):

* ``openai._models.construct_type`` and ``BaseModel.construct`` (how the SDK builds a chunk: the
  reference the self-check compares with, and the fallback for a chunk the fast builder declines);
* ``openai._base_client.BaseClient._process_response_data`` (the one step replaced; a client class
  that overrides it is left alone) and ``client._strict_response_validation`` (off, as by default);
* ``openai.Stream`` / ``AsyncStream``: ``_client``, ``_cast_to`` (must be ``ChatCompletionChunk``,
  or ``ResponseStreamEvent`` for a Responses stream, whose events :mod:`._fast_events` builds),
  ``_decoder`` and ``__stream__`` (run as it is, except a sync Responses stream's: :mod:`._fast_stream`
  runs its loop there, on a release where both loops agree on its sample bodies; ``_iterator`` and
  ``_iter_events`` for that);
* ``openai._streaming.SSEDecoder`` (the faster decoder in :mod:`._sse` is installed only where it
  decodes the sample bodies exactly as this class does).
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import threading
import types
import typing
import warnings
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from typing import Any, Literal

import openai
import pydantic
from openai import _base_client as openai_base
from openai import _models as sdk_models
from openai import _streaming as sdk_streaming
from openai.types.chat import ChatCompletionChunk

from .._sdk import http_module, stand_in_request
from ..errors import FastDecodeWarning
from . import _fast_events, _fast_stream, _sse

__all__ = ["Decode", "build_chunk", "fast_decode_status", "install", "same_value", "stream_from_bytes"]

Decode = Literal["sdk", "fast"]

# --------------------------------------------------------------------------- the plan


class _Node:
    """One construct-path model class: where its nested construct-path models are."""

    __slots__ = ("children",)

    def __init__(self) -> None:
        self.children: list[tuple[str, bool, _Node]] = []  # (field, is_list, node)


_LEAVES = (str, int, bool)


def _is_leaf(annotation: Any) -> bool:
    """A type whose strictly valid value is the value ``construct`` keeps: ``str``, ``int``,
    ``bool`` or a ``Literal`` of those (``float`` is not: ``construct`` keeps a large int whole)."""
    if annotation in _LEAVES:
        return True
    if typing.get_origin(annotation) is Literal:
        return all(type(a) in _LEAVES for a in typing.get_args(annotation))
    return False


def _is_union(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return origin is typing.Union or origin is types.UnionType


def _model_class(annotation: Any) -> type[pydantic.BaseModel] | None:
    if inspect.isclass(annotation) and issubclass(annotation, pydantic.BaseModel):
        return annotation
    return None


def _plan(cls: type[pydantic.BaseModel], seen: frozenset[type] = frozenset()) -> _Node | None:
    """The construct-path models under ``cls``, or ``None`` when equality cannot be shown."""
    if cls in seen or not issubclass(cls, sdk_models.BaseModel):
        return None
    config = cls.model_config
    if config.get("extra") != "allow" or config.get("populate_by_name") or config.get("strict"):
        return None
    if cls.__pydantic_decorators__.model_validators or cls.__pydantic_decorators__.field_validators:
        return None
    node = _Node()
    for name, field in cls.model_fields.items():
        if field.alias not in (None, name) or field.validation_alias not in (None, name):
            return None
        if not (field.is_required() or field.default is None) or field.default_factory is not None:
            return None  # construct() turns an explicit null into the default: only None is null
        annotation = field.annotation
        if _is_union(annotation):
            continue  # the SDK validates (lax) and keeps the result: strict success is the same
        if _is_leaf(annotation):
            continue
        inner, is_list = annotation, False
        if typing.get_origin(annotation) is list:
            (inner,) = typing.get_args(annotation) or (object,)
            is_list = True
        model = _model_class(inner)
        if model is None:
            return None
        child = _plan(model, seen | {cls})
        if child is None:
            return None
        node.children.append((name, is_list, child))
    return node


def _construct_keywords() -> frozenset[str]:
    """Keys that ``construct(**value)`` would take as its own parameters, not as fields."""
    parameters = inspect.signature(sdk_models.BaseModel.construct).parameters.values()
    return frozenset(p.name for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD) | {
        "_BaseModel__cls",
    }


_ROOT = _plan(ChatCompletionChunk)
_HAZARDS = _construct_keywords()
_validate = ChatCompletionChunk.model_validate


def _settle(model: Any, node: _Node) -> bool:
    """Make a strictly validated construct-path model look constructed (extra keys out of
    ``model_fields_set``); False when ``construct`` would have done something else."""
    extra = model.__pydantic_extra__
    if extra:
        if not _HAZARDS.isdisjoint(extra):
            return False
        model.__pydantic_fields_set__.difference_update(extra)
    for name, is_list, child in node.children:
        value = model.__dict__[name]
        if is_list:
            for item in value:
                if not _settle(item, child):
                    return False
        elif not _settle(value, child):
            return False
    return True


def build_chunk(data: Any) -> ChatCompletionChunk | None:
    """``data`` (one decoded ``data:`` payload) as the SDK would construct it, or ``None`` when only
    the SDK's own construction gives what the SDK gives (then call it)."""
    if _ROOT is None or type(data) is not dict:
        return None
    try:
        chunk = _validate(data, strict=True)
    except pydantic.ValidationError:
        return None
    except Exception:  # recursion limits, hostile values: the SDK's path decides what happens
        return None
    return chunk if _settle(chunk, _ROOT) else None


# --------------------------------------------------------------------------- equality


def same_value(a: Any, b: Any) -> bool:
    """Equality as the contract means it: same classes, ``__dict__``, extras and
    ``model_fields_set`` at every level (NaN equals NaN; ``1`` is not ``1.0``). Iterative, so a
    value nested deeper than the recursion limit compares too."""
    pending = [(a, b)]
    while pending:
        x, y = pending.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, pydantic.BaseModel):
            if x.model_fields_set != y.model_fields_set:
                return False
            pending.append((x.__pydantic_extra__, y.__pydantic_extra__))
            pending.append((x.__dict__, y.__dict__))
        elif isinstance(x, dict):
            if x.keys() != y.keys():
                return False
            pending.extend((v, y[k]) for k, v in x.items())
        elif isinstance(x, list | tuple):
            if len(x) != len(y):
                return False
            pending.extend(zip(x, y, strict=True))
        elif isinstance(x, float) and math.isnan(x):
            if not math.isnan(y):
                return False
        elif x != y:
            return False
    return True


# --------------------------------------------------------------------------- the stand-in client


class _FastClient:
    """The SDK client, except that ``_process_response_data`` tries :func:`build_chunk` first.

    Only the stream holds it (as ``stream._client``); every other attribute is the real client's.
    """

    __slots__ = ("_process_response_data", "_real")

    def __init__(self, real: Any, responses: bool = False) -> None:
        object.__setattr__(self, "_real", real)
        process = real._process_response_data
        # One stream, one ``cast_to``: the stand-in of a Responses stream asks only about events,
        # that of a chat stream only about chunks (names bound once, not looked up per payload).
        fast: Callable[[Any], Any] = _fast_events.build_event if responses else build_chunk
        fast_type: Any = _fast_events.EVENT_TYPE if responses else ChatCompletionChunk

        def process_response_data(*, data: object, cast_to: Any, response: Any) -> Any:
            if cast_to is fast_type and fast_type is not None:
                built = fast(data)
                if built is not None:
                    return built
            return process(data=data, cast_to=cast_to, response=response)

        object.__setattr__(self, "_process_response_data", process_response_data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._real, name, value)

    def __repr__(self) -> str:
        return repr(self._real)


def real_client(client: Any) -> Any:
    """The SDK client behind a stream's ``_client`` (itself, unless :func:`install` swapped it)."""
    return client._real if isinstance(client, _FastClient) else client


# --------------------------------------------------------------------------- the self-check


def _sample_chunks() -> list[Any]:
    """Chunks that exercise every rule above: common shapes, extras at every level, quirks that
    must fall back, and the values where lax and strict validation could part ways."""
    base: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    logprobs = {"content": [{"token": "a", "logprob": -1, "bytes": [97], "top_logprobs": []}]}

    def choice(delta: Any, **more: Any) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None, **more}

    return [
        {**base, "choices": [choice({"role": "assistant", "content": None})]},
        {**base, "choices": [choice({"tool_calls": [call]})]},
        {**base, "choices": [choice({"tool_calls": [{"index": 0, "function": {"arguments": '{"a'}}]})]},
        {**base, "choices": [choice({}, finish_reason="tool_calls")]},
        {**base, "choices": [], "usage": usage, "system_fingerprint": None},
        {**base, "choices": [], "usage": {**usage, "prompt_tokens_details": {"cached_tokens": 0, "x": 1}}},
        {**base, "x": {"y": [1, 2.5]}, "choices": [choice({"reasoning_content": "r", "content": "c"}, z=1)]},
        {**base, "choices": [choice({"tool_calls": [{**call, "extra_content": {"g": "s"}}]})]},
        {**base, "choices": [choice({"content": "a"}, logprobs=logprobs)]},
        {**base, "choices": [choice({"tool_calls": [{"id": "x", "function": {"name": "f"}}]})]},
        {**base, "choices": [choice({"tool_calls": [{**call, "type": ""}]})]},
        {**base, "choices": [choice({"tool_calls": [{**call, "index": "0"}]})]},
        {**base, "choices": [choice({"role": "model", "content": 5})]},
        {**base, "created": "1", "choices": [choice({}, finish_reason="eos")]},
        {**base, "created": True, "choices": [choice({}, index=None)]},
        {**base, "choices": None},
        {**base, "choices": [None, 1, "x"]},
        {**base, "choices": [choice(None)]},
        {**base, "_fields_set": ["id"], "choices": []},
        {**base, "__cls": 1, "_x": 2, "model_config": 3, "choices": []},
        {"choices": [choice({"content": "a"})]},
        [1, 2],
        "text",
        None,
    ]


def _sdk_process(data: Any, cast_to: Any) -> Any:
    """What the installed release's own step gives for ``data``: ``BaseClient._process_response_data``
    on a client that constructs (as every client does by default), the very method the stand-in
    replaces, so a release that changed it (another construction, a step after it) is compared as
    it now is, not as ``construct_type`` once was."""
    response = http_module().Response(200, request=stand_in_request())
    return _BytesClient()._process_response_data(data=data, cast_to=cast_to, response=response)


def _sdk_build(data: Any) -> Any:
    try:
        return ("value", _sdk_process(data, ChatCompletionChunk))
    except Exception as exc:
        return ("error", type(exc), str(exc))


#: The parameters of ``BaseClient._process_response_data`` the stand-in takes (by keyword, as the
#: SDK's stream loops pass them). A release that adds one may pass it: the stand-in would fail.
_PROCESSING_PARAMETERS = ("self", "data", "cast_to", "response")


def _processing_known() -> bool:
    """Whether this release's ``_process_response_data`` takes exactly what the stand-in takes."""
    method = getattr(openai_base.BaseClient, "_process_response_data", None)
    try:
        parameters = inspect.signature(method).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):  # gone, or not a function any more: nothing is proven
        return False
    return tuple(p.name for p in parameters) == _PROCESSING_PARAMETERS and all(
        p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in parameters
    )


_DONE = b"data: [DONE]\n\n"
_IN_BAND_ERROR = b'data: {"error": {"message": "overloaded"}}\n\n'


def _chat_loop_agrees() -> bool:
    """Whether the SDK's own chat stream loop, handed the stand-in client, yields and raises what
    it does with the SDK's client: over an in-band error, and over the sample chunks (one read
    each, then ``[DONE]``; after a sample the SDK raises on, the loop runs again over the rest). So
    a release whose loop calls the client differently is caught here, not in a user's stream."""

    def outcome(body: tuple[bytes, ...]) -> list[Any] | None:
        plain = _loop_outcome(body, None, ChatCompletionChunk)
        fast = _loop_outcome(body, None, ChatCompletionChunk, stand_in=True)
        return plain if same_value(plain, fast) else None

    if outcome((_IN_BAND_ERROR,)) is None:
        return False
    reads = [b"data: " + json.dumps(sample).encode() + b"\n\n" for sample in _sample_chunks()]
    while reads:
        body = (*reads, _DONE)
        plain = outcome(body)
        if plain is None:
            return False
        taken = plain[-1][0]  # how many reads the loop took: all of them, or up to what raised
        if not 0 < taken < len(body):
            break
        reads = reads[taken:]
    return True


def _builder_agrees() -> bool:
    for sample in _sample_chunks():
        chunk = build_chunk(_copy(sample))
        if chunk is None:
            continue
        expected = _sdk_build(_copy(sample))
        if expected[0] != "value" or not same_value(chunk, expected[1]):
            return False
    return True


def _events_agree() -> bool:
    """Whether every sample Responses event that builds fast equals the SDK's construction of it
    (and the common ones do build fast: a release where they cannot gains nothing)."""
    built = 0
    for sample in _fast_events.sample_events():
        event = _fast_events.build_event(_copy(sample))
        if event is None:
            continue
        built += 1
        try:
            expected = _sdk_process(_copy(sample), _fast_events.EVENT_TYPE)
        except Exception:
            return False
        if not same_value(event, expected):
            return False
    return built > 0


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _decoder_agrees() -> bool:
    """Whether :mod:`._sse` decodes the sample bodies exactly as this release's ``SSEDecoder``."""
    sdk_decoder = getattr(sdk_streaming, "SSEDecoder", None)
    if sdk_decoder is None:
        return False
    for body in _sse.SAMPLE_BODIES:
        for size in (1, 3, 7, len(body) or 1):
            reads = [body[k : k + size] for k in range(0, len(body), size)]
            if _events(sdk_decoder().iter_bytes, reads) != _events(_sse.SSEDecoder().iter_bytes, reads):
                return False
    return True


def _events(decode: Callable[[Any], Iterable[Any]], reads: list[bytes]) -> list[Any]:
    out: list[Any] = []
    try:
        for sse in decode(iter(reads)):
            out.append((sse.event, sse.data, sse.id, sse.retry))
    except Exception as exc:
        out.append((type(exc), str(exc)))
    return out


class _Status:
    """What the self-check found for the installed release (computed once, at first use).

    The Responses half (``events``, ``events_reason``) is computed when a Responses stream first
    asks for it, not with the chat half: it builds the validators of the SDK's whole event union
    (about half a second), which a program that only streams chat completions never needs."""

    __slots__ = ("_responses", "builder", "decoder", "reason")

    def __init__(
        self,
        builder: bool,
        decoder: bool,
        reason: str,
        events: bool = False,
        events_reason: str = "",
        *,
        responses_later: bool = False,
    ) -> None:
        self.builder = builder
        self.decoder = decoder
        self.reason = reason
        self._responses: tuple[bool, str] | None = None if responses_later else (events, events_reason)

    def _responses_half(self) -> tuple[bool, str]:
        found = self._responses
        if found is None:
            found = self._responses = _responses_status()
        return found

    @property
    def events(self) -> bool:
        """Responses API events build fast (:mod:`._fast_events`), equal to the SDK's."""
        return self._responses_half()[0]

    @property
    def events_reason(self) -> str:
        """Why not, when the release has the Responses API and they do not ("" otherwise)."""
        return self._responses_half()[1]


_lock = threading.Lock()


@functools.cache
def fast_decode_status() -> _Status:
    """Run the self-check once: can chunks be built fast, and can SSE be decoded fast, with
    results equal to this ``openai`` release's own? (Responses events: when first asked.)"""
    with _lock:
        version = getattr(openai, "__version__", "?")
        try:
            decoder = _decoder_agrees()
        except Exception:
            decoder = False
        if _ROOT is None:
            reason = f"openai {version}: ChatCompletionChunk has fields the fast builder cannot prove equal"
            return _Status(False, decoder, reason, responses_later=True)
        if not _processing_known():
            reason = f"openai {version}: its _process_response_data takes other parameters"
            return _Status(False, decoder, reason, responses_later=True)
        try:
            builder = _builder_agrees()
            loop = builder and _chat_loop_agrees()
        except Exception as exc:  # a self-check that fails proves nothing: keep the SDK's decoding
            reason = f"openai {version}: the self-check failed ({type(exc).__name__})"
            return _Status(False, decoder, reason, responses_later=True)
        if not builder:
            reason = f"openai {version}: its chunks differ from the fast builder's"
            return _Status(False, decoder, reason, responses_later=True)
        if not loop:
            reason = f"openai {version}: its stream loop hands chunks on differently with the fast builder"
            return _Status(False, decoder, reason, responses_later=True)
        return _Status(True, decoder, "", responses_later=True)


_responses_lock = threading.Lock()


@functools.cache
def _responses_status() -> tuple[bool, str]:
    """The Responses half of the self-check, run once, when a Responses stream first needs it."""
    with _responses_lock:
        return _events_status(getattr(openai, "__version__", "?"))


def _events_status(version: str) -> tuple[bool, str]:
    """``(events, reason)``: whether Responses events build fast on this release, and why not."""
    if _fast_events.EVENT_TYPE is None:
        return False, ""  # no Responses API: nothing to decode, nothing to say
    if not _processing_known():
        return False, f"openai {version}: its _process_response_data takes other parameters"
    try:
        if _events_agree():
            return True, ""
    except Exception as exc:
        return False, f"openai {version}: the Responses self-check failed ({type(exc).__name__})"
    return False, f"openai {version}: its Responses events differ from the fast builder's"


def _loop_outcome(
    reads: tuple[bytes, ...],
    loop: Callable[[Any], Iterator[Any]] | None,
    cast_to: Any = None,
    *,
    stand_in: bool = False,
) -> list[Any]:
    """What iterating a stream of ``cast_to`` (Responses events by default) over ``reads`` gives
    with the SDK's loop (or ``loop``, such as :func:`._fast_stream.iterate`; with ``stand_in``, the
    SDK's loop holding the fast stand-in client): its events, then its error, how many reads it
    took and whether its response ended closed."""
    http = http_module()
    taken: list[bytes] = []

    def body() -> Iterator[bytes]:
        for read in reads:
            taken.append(read)
            yield read

    response = http.Response(200, content=body(), request=stand_in_request("responses"))
    kind = _fast_events.EVENT_TYPE if cast_to is None else cast_to
    stream: Any = openai.Stream(cast_to=kind, response=response, client=_BytesClient())  # type: ignore[arg-type]
    if stand_in:
        stream._client = _FastClient(stream._client, kind is not ChatCompletionChunk)
    if loop is not None:
        stream._iterator = loop(stream)
    out: list[Any] = []
    try:
        for event in stream:
            out.append(event)
    except Exception as exc:
        out.append((type(exc), str(exc), getattr(exc, "body", None)))
    out.append((len(taken), response.is_closed))
    return out


def _loop_agrees() -> bool:
    """Whether :func:`._fast_stream.iterate` is this release's sync ``Stream.__stream__``: it reads
    no name the module does not know, and both loops agree on every sample body."""
    code = getattr(getattr(openai.Stream, "__stream__", None), "__code__", None)
    if code is None or not set(code.co_names) <= _fast_stream.KNOWN_NAMES:
        return False
    return all(
        same_value(_loop_outcome(reads, None), _loop_outcome(reads, _fast_stream.iterate))
        for reads in _fast_stream.SAMPLE_BODIES
    )


@functools.cache
def loop_status() -> bool:
    """Whether sync Responses streams run :mod:`._fast_stream`'s loop (checked once, at first use)."""
    with _responses_lock:
        try:
            return _fast_events.EVENT_TYPE is not None and _loop_agrees()
        except Exception:  # a self-check that fails proves nothing: keep the SDK's loop
            return False


def _own_loop(sdk_stream: Any) -> bool:
    """Whether ``sdk_stream`` (a Responses stream being switched to fast decoding) can run
    :mod:`._fast_stream`'s loop: a sync ``openai.Stream`` whose class keeps the SDK's loop, whose
    options ask for the plain loop and whose body nobody has read yet, on a release where the
    loops agree."""
    response = getattr(sdk_stream, "response", None)
    return (
        type(sdk_stream).__stream__ is openai.Stream.__stream__
        and isinstance(sdk_stream, openai.Stream)
        and _fast_stream.plain_options(getattr(sdk_stream, "_options", None))
        and getattr(response, "is_stream_consumed", True) is False
        and getattr(response, "is_closed", True) is False
        and loop_status()
    )


@functools.cache
def _warn_once(reason: str) -> None:
    warnings.warn(
        f'decode="fast" uses the SDK\'s own decoding instead: {reason}', FastDecodeWarning, stacklevel=4
    )


def _sdk_processing(client: Any) -> bool:
    """Whether ``client`` turns data into chunks with the SDK's own method (a subclass that
    overrides it means something else by it: leave its streams alone)."""
    method = getattr(type(client), "_process_response_data", None)
    return isinstance(client, _BytesClient) or method is openai_base.BaseClient._process_response_data


def install(sdk_stream: Any) -> bool:
    """Switch an SDK stream that has not been iterated yet to fast decoding; True when it was.

    The stream stays the SDK's object: its ``__stream__`` now builds chunks with
    :func:`build_chunk` (the real client's method for any chunk that does not qualify) and reads
    events with :class:`._sse.SSEDecoder` when that decoder is proven equal on this release. A
    client with ``_strict_response_validation`` (the SDK then validates instead of constructing), a
    client class that overrides ``_process_response_data``, or a stream of something other than chat
    completion chunks or Responses API events (:mod:`._fast_events`) is left as it is.
    """
    client = getattr(sdk_stream, "_client", None)
    if client is None or isinstance(client, _FastClient):
        return isinstance(client, _FastClient)
    cast_to = getattr(sdk_stream, "_cast_to", None)
    responses = cast_to is _fast_events.EVENT_TYPE and cast_to is not None
    if cast_to is not ChatCompletionChunk and not responses:
        return False
    if getattr(client, "_strict_response_validation", True) or not _sdk_processing(client):
        return False
    status = fast_decode_status()
    if responses and not status.events:
        if status.events_reason:
            _warn_once(status.events_reason)
        return False
    if not responses and not status.builder:
        _warn_once(status.reason)
        return False
    sdk_stream._client = _FastClient(client, responses)
    if status.decoder and type(getattr(sdk_stream, "_decoder", None)) is getattr(
        sdk_streaming, "SSEDecoder", None
    ):
        sdk_stream._decoder = _sse.SSEDecoder()
    if responses and _own_loop(sdk_stream):
        sdk_stream._iterator = _fast_stream.iterate(sdk_stream)
    return True


# --------------------------------------------------------------------------- raw bytes


class _BytesClient:
    """What an SDK stream needs of a client, for a body that came from no client: the SDK's own
    ``SSEDecoder`` and ``BaseClient._process_response_data`` (constructing, not validating)."""

    _strict_response_validation = False

    def _make_sse_decoder(self) -> Any:
        return sdk_streaming.SSEDecoder()

    def _process_response_data(self, *, data: object, cast_to: Any, response: Any) -> Any:
        return openai_base.BaseClient._process_response_data(
            self,  # type: ignore[arg-type]
            data=data,
            cast_to=cast_to,
            response=response,
        )


def as_bytes(read: Any) -> Any:
    """One read of a body as ``bytes``: any bytes-like object (``bytearray``, a ``memoryview`` of any
    format, shape or stride, an ``array``) is copied as its raw bytes in C order, which is what was
    sent, whatever its item type. Without this, each release's decoder takes the object as it is,
    and some cannot (older SDK decoders call ``splitlines``; a two-dimensional or strided view
    cannot be sliced; a view of 4-byte items is indexed by item, not by byte). Anything that is not
    bytes-like is passed on, for the HTTP library and the SDK to refuse as they do."""
    if type(read) is bytes:
        return read
    try:
        view = memoryview(read)
    except TypeError:
        return read
    return view.tobytes()


def _bytes(source: Iterable[Any]) -> Iterator[Any]:
    for read in source:
        yield as_bytes(read)


async def _abytes(source: AsyncIterable[Any]) -> AsyncIterator[Any]:
    async for read in source:
        yield as_bytes(read)


def stream_from_bytes(source: Iterable[bytes] | AsyncIterable[bytes], *, decode: Decode = "fast") -> Any:
    """An ``openai.Stream[ChatCompletionChunk]`` (``AsyncStream`` for an async iterable) over the raw
    bytes of a streamed chat completion body, decoded exactly as the SDK decodes a response:
    ``[DONE]``, in-band ``error`` events raised as ``openai.APIError``, and so on. With
    ``decode="fast"`` (the default here: there is no SDK decoding to stay compatible with) its
    chunks are built by :func:`build_chunk`, equal to the SDK's. For ``ts.stitch`` over bytes."""
    if decode not in ("sdk", "fast"):
        raise ValueError(f'decode must be "sdk" or "fast", not {decode!r}')
    http = http_module()
    request = stand_in_request("chat/completions")
    is_async = isinstance(source, AsyncIterable)
    reads: Any = source  # not iterable: the HTTP library says so, as it did
    if is_async:
        reads = _abytes(source)  # type: ignore[arg-type]
    elif isinstance(source, Iterable):
        reads = _bytes(source)
    response = http.Response(200, content=reads, request=request)
    cls = openai.AsyncStream if is_async else openai.Stream
    stream = cls(cast_to=ChatCompletionChunk, response=response, client=_BytesClient())  # type: ignore[arg-type]
    if decode == "fast":
        install(stream)
    return stream
