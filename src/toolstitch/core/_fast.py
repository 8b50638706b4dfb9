"""The fast path: one common shape of chunk, read with no per-chunk objects (rule 7, issue 12).

Nearly every chunk of a tool-call stream is a continuation: one choice, one ``delta.tool_calls``
entry with an ``index`` and a piece of ``arguments``, for a call that is already open; or a piece
of ``content``. The general path (``_read.py`` then ``_route.py``) builds an ``Envelope``, a
``ChoicePiece`` and a ``ToolFragment`` for it and runs every quirk check, which costs several times
the work itself. :func:`take_common_chunk` reads such a chunk directly: one ``__dict__`` read per
object (pydantic keeps an SDK model's fields there), no objects built, the call's buffer and its
scanner written in place.

The rule that keeps it honest: it takes a chunk only when the general path would do exactly the
same thing with it, and it decides that **before it changes anything**. Every field it does not
expect, every quirk (an id or name on a continuation, a missing or odd index, an extra field, a
cumulative-resend check still running, a call not open or already complete, a limit that would be
reached, a finish_reason, usage, a new choice or call), answers ``None``, and the accumulator reads
the chunk on the general path instead. ``tests/core/test_fast_path.py`` feeds the same streams
through both paths and compares everything they produce.

:func:`take_common_chunk` has a compiled twin (``_speedups.c``, where it is built): inside a live
HTTP stream this function runs with cold caches after the SDK's own decoding and cost three times
its tight-loop time, which grows with the bytecodes it executes; the twin makes the same decisions
and writes in a fraction of the instructions. :data:`take_chunk` is whichever is in use; this
function stays the reference (``tests/core/test_speedups.py``) and reads every chunk that is not
one of the SDK's own objects.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import (
    Choice,
    ChoiceDelta,
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)

from ._call import _BATCH, CallMetrics, ToolCall, push
from ._choice import ChoiceState
from ._events import (
    ArgumentsComplete,
    ArgumentsDelta,
    ArgumentsMalformed,
    ContentDelta,
    Event,
    arguments_delta,
    content_delta,
)
from ._route import CallTable, _Chain
from ._scanner import _native_scan

if TYPE_CHECKING:
    from ._accumulator import Accumulator

__all__ = ["take_chunk", "take_common_chunk"]

# Keys a plain-dict chunk may carry for the fast path: exactly the ones whose meaning it knows.
# Anything else is an unknown field the general path keeps (or an in-band ``error``).
_CHUNK_KEYS = frozenset(
    {
        "id",
        "object",
        "created",
        "model",
        "system_fingerprint",
        "service_tier",
        "usage",
        "choices",
        "obfuscation",
    }
)
_DELTA_KEYS = frozenset({"role", "content", "refusal", "tool_calls", "function_call"})
_ENTRY_KEYS = frozenset({"index", "id", "type", "function"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})
_NONE: Sequence[Event] = ()
# One C call per SDK object reads the fields the fast path looks at.
_CHUNK = itemgetter("usage", "choices")
_CHOICE = itemgetter("index", "finish_reason", "logprobs", "delta")
_DELTA = itemgetter("role", "refusal", "function_call", "content", "tool_calls")
_ENTRY = itemgetter("id", "type", "index", "function")
_FUNCTION = itemgetter("name", "arguments")
_ABSENT = (None, "")
# String content that leaves a scanner inside the string with nothing pending: characters other
# than a quote, a backslash or a control character, and complete escapes (JSON's eight, \uXXXX).
_STRING_BODY = re.compile(r'[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*').fullmatch


def take_common_chunk(acc: Accumulator, chunk: Any, want_events: bool) -> Sequence[Event] | None:
    """Take ``chunk`` when it has the common shape, else ``None`` (nothing was changed).

    ``want_events=False`` builds no event objects (the stream's quiet entry); the state written is
    the same either way.
    """
    # -- decide: read and check everything, change nothing ----------------------------------------
    kind = type(chunk)
    if kind is ChatCompletionChunk:
        # The SDK's own objects: every declared field is in ``__dict__`` (a missing one raises
        # KeyError below: not the common shape), unknown fields in ``__pydantic_extra__``.
        if chunk.__pydantic_extra__:
            return None
        fields = chunk.__dict__
        try:
            usage, choices = _CHUNK(fields)
            if usage is not None or type(choices) is not list or len(choices) != 1:
                return None
            # Envelope fields: the first usable value is kept. Once kept (or while the chunk has
            # none), the chunk changes nothing; a first value arriving now is the general path's.
            # (An empty string, which the general path reads as unset too, is left to it.)
            nones = acc._envelope_nones
            if nones is not None and nones[0](fields) != nones[1]:
                return None
            choice = choices[0]
            if type(choice) is not Choice:
                return None
            index, finish_reason, logprobs, delta = _CHOICE(choice.__dict__)
            if (
                finish_reason is not None
                or logprobs is not None
                or type(delta) is not ChoiceDelta
                or delta.__pydantic_extra__
            ):
                return None
            state = acc._choices.get(index)
            role, refusal, function_call, content, tool_calls = _DELTA(delta.__dict__)
            if state is None or role is not None or refusal is not None or function_call is not None:
                return None
            call = None
            text = ""
            if tool_calls:
                if type(tool_calls) is not list or len(tool_calls) != 1:
                    return None
                entry = tool_calls[0]
                if type(entry) is not ChoiceDeltaToolCall or entry.__pydantic_extra__:
                    return None
                call_id, call_type, call_index, function = _ENTRY(entry.__dict__)
                if (
                    call_id is not None
                    or call_type is not None
                    or type(function) is not ChoiceDeltaToolCallFunction
                    or function.__pydantic_extra__
                ):
                    return None
                name, text = _FUNCTION(function.__dict__)
                # ``_fast`` is set by the general path after a fragment, only while the call is
                # open, not complete or malformed, and no cumulative resend was found for it; every
                # change of its status clears it (``_call.py``).
                call = state.table.by_index.get(call_index) if type(call_index) is int else None
                if name is not None or type(text) is not str or call is None or not call._fast:
                    return None
            elif tool_calls is not None and type(tool_calls) is not list:
                return None
        except (KeyError, TypeError, ValueError):
            return None
    elif kind is dict:
        found = _read_dict(acc, chunk)
        if found is None:
            return None
        state, index, content, call, text = found
    else:
        return None
    if content is not None and (type(content) is not str or (content and state.finish_reason is not None)):
        return None
    content_size = size = 0
    if content:
        content_size = len(content) if content.isascii() else len(content.encode("utf-8", "surrogatepass"))
    if text:
        assert call is not None
        if text.isascii():
            size = len(text)
        else:
            try:
                size = len(text.encode("utf-8"))
            except UnicodeEncodeError:  # a lone surrogate: the general path refuses the text
                return None
        if call._bytes_left < size:
            return None
        # The cumulative-resend check (``_route.argument_text``): a call's first piece starts a
        # chain; the next piece ends it unless it repeats the first and starts a new ``{``
        # (ambiguous: the general path decides). A latched chain clears ``_fast``.
        chains = state.table.chains
        chain = chains.get(call._slot) if chains else None
        if chain is not None:
            last = chain.last
            if len(text) >= len(last) and text.startswith(last) and text.lstrip().startswith("{"):
                return None
    if content_size + size > acc._bytes_left:
        return None

    # -- apply: the same writes the general path makes, in the same order ---------------------
    # Events are built last, as a tuple (most chunks make exactly one), and only when wanted.
    said: Event | None = None
    if content:
        acc._bytes_left -= content_size
        push(state.content, content)
        if want_events:
            said = content_delta(index, content)
    if call is None or not text:
        if call is not None:
            call._metrics.fragments += 1
        return (said,) if said is not None else _NONE
    metrics = call._metrics
    metrics.fragments += 1
    if chain is not None:
        del chains[call._slot]
    elif call._chars == 0:
        chains[call._slot] = _Chain(text)
    if metrics.first_argument_at is None:
        metrics.first_argument_at = acc._clock()
    acc._bytes_left -= size
    metrics.bytes += size
    call._bytes_left -= size
    parts = call._parts
    parts.append(text)
    if len(parts) >= _BATCH:
        call._done.append("".join(parts))
        parts.clear()
    call._joined = None
    call._chars += len(text)
    scanner = call._scanner
    if (
        scanner._in_string
        and not scanner._escape
        and not scanner._hex_left
        and (('"' not in text and "\\" not in text and text.isprintable()) or _STRING_BODY(text) is not None)
    ):
        # Inside a string, text made only of string characters and whole, valid escapes changes
        # nothing but the offset (what ``JSONScanner.feed`` would find, without its loop);
        # anything else (a quote, a control character, an escape cut at the end of the
        # fragment) is the scanner's.
        scanner.offset += len(text)
    else:
        scanner.feed(text)
        if scanner.complete or scanner.error is not None:
            call._fast = False
            if scanner.complete:
                metrics.arguments_complete_at = acc._clock()
            if not want_events:
                return _NONE
            closed: Event
            if scanner.complete:
                closed = ArgumentsComplete(call)
            else:
                closed = ArgumentsMalformed(call, scanner.error or "", scanner.error_at)
            delta = arguments_delta(call, text)
            return (said, delta, closed) if said is not None else (delta, closed)
    if not want_events:
        return _NONE
    delta = arguments_delta(call, text)
    return (said, delta) if said is not None else (delta,)


def _read_dict(acc: Accumulator, chunk: dict[str, Any]) -> tuple[Any, int, Any, Any, str] | None:
    """The common shape in a plain ``dict`` chunk (as decoded from SSE, or replayed): ``(choice
    state, choice index, content, call, argument text)``, or None. Keys may be missing here."""
    if not chunk.keys() <= _CHUNK_KEYS:
        return None
    get = chunk.get
    if get("usage") is not None:
        return None
    for key in acc._envelope_unset:
        if get(key) not in _ABSENT:
            return None
    choices = get("choices")
    if type(choices) is not list or len(choices) != 1:
        return None
    choice = choices[0]
    if type(choice) is not dict:
        return None
    index = choice.get("index")
    if (
        type(index) is not int
        or choice.get("finish_reason") is not None
        or choice.get("logprobs") is not None
    ):
        return None
    state = acc._choices.get(index)
    delta = choice.get("delta")
    if state is None or type(delta) is not dict or not delta.keys() <= _DELTA_KEYS:
        return None
    dget = delta.get
    if dget("role") is not None or dget("refusal") is not None or dget("function_call") is not None:
        return None
    tool_calls = dget("tool_calls")
    call = None
    text: Any = ""
    if tool_calls:
        if type(tool_calls) is not list or len(tool_calls) != 1:
            return None
        entry = tool_calls[0]
        if type(entry) is not dict or not entry.keys() <= _ENTRY_KEYS:
            return None
        if entry.get("id") is not None or entry.get("type") is not None:
            return None
        call_index = entry.get("index")
        function = entry.get("function")
        if type(call_index) is not int or type(function) is not dict or not function.keys() <= _FUNCTION_KEYS:
            return None
        text = function.get("arguments")
        call = state.table.by_index.get(call_index)
        if function.get("name") is not None or type(text) is not str or call is None or not call._fast:
            return None
    elif tool_calls is not None and type(tool_calls) is not list:
        return None
    return state, index, dget("content"), call, text


Take = Callable[["Accumulator", Any, bool], "Sequence[Event] | None"]


def _load_native_take() -> Take | None:
    """The compiled :func:`take_common_chunk` (``_speedups.c``): the same decisions and writes for
    the SDK's own chunk objects, this function for everything else. None where it is not built,
    where the compiled scanner is not in use, or with ``TOOLSTITCH_PURE_PYTHON`` set."""
    if os.environ.get("TOOLSTITCH_PURE_PYTHON") or _native_scan is None:
        return None
    try:
        from ._speedups import bind, take

        bind(
            Choice=ChoiceState,
            CallTable=CallTable,
            ToolCall=ToolCall,
            CallMetrics=CallMetrics,
            Chain=_Chain,
            ChatCompletionChunk=ChatCompletionChunk,
            SdkChoice=Choice,
            ChoiceDelta=ChoiceDelta,
            ChoiceDeltaToolCall=ChoiceDeltaToolCall,
            ChoiceDeltaToolCallFunction=ChoiceDeltaToolCallFunction,
            fallback=take_common_chunk,
            ContentDelta=ContentDelta,
            ArgumentsDelta=ArgumentsDelta,
            ArgumentsComplete=ArgumentsComplete,
            ArgumentsMalformed=ArgumentsMalformed,
            none=_NONE,
            batch=_BATCH,
        )
    except Exception:  # built from another version of the classes: run the Python code
        return None
    native: Take = take
    return native


take_chunk: Take = _load_native_take() or take_common_chunk
"""What the accumulator calls for each chunk: the compiled twin when it is built, else
:func:`take_common_chunk`. Both answer None (nothing changed) for a chunk of another shape."""
