"""Recording: each stream's raw chunks, with their timing, as one JSONL file.

When a tool call comes out wrong in production, the only reliable evidence is the stream exactly as
the provider sent it, with its timing. A recording is that evidence, in a form that
:func:`toolstitch.replay` turns back into the same calls::

    {"type": "header", "format": "toolstitch.recording", "version": 1, "toolstitch": "0.1.0",
     "openai": "1.99.0", "recorded_at": "2025-01-01T12:00:00.000Z", "request": {...}, ...}
    {"type": "chunk", "offset_ms": 181.204, "chunk": {...the chunk as received...}}
    ...
    {"type": "footer", "offset_ms": 912.5, "outcome": "completed", "chunks": 57, "error": null}

* ``offset_ms`` is monotonic time since the request started (the same origin as
  :class:`~toolstitch.StreamMetrics`), so the first chunk's offset is the time to first chunk.
* A chunk is written as the SDK decoded it: ``model_dump(exclude_unset=True)`` of the SDK's lazily
  constructed object gives back exactly the JSON keys the provider sent, unknown fields included.
* Nothing written holds a secret (see ``_secrets``): ``extra_headers`` and ``extra_query`` values
  are replaced; keys that name credentials are masked wherever they appear, except inside the JSON
  schemas of ``tools`` and ``response_format`` (there a key is a parameter name, and replay needs
  the schema as sent); text shaped like a credential is masked in every parameter but
  ``messages`` and the schemas, and in the footer's error; and the client's API key, its
  credential headers and every value masked so far are masked wherever they appear, chunks and
  error texts included, and also when a server echoes one a few characters per chunk: each streamed
  text (a choice's content, refusal or reasoning, a call's arguments, a Responses delta's item and
  part) is one text, whose fragments are masked where they hold part of a secret. A chunk whose text
  ends in what may be the start of a secret is written once the next fragment of that text shows
  whether it is (or at the end of the stream); the chunks after it wait behind it, in order, up to
  :data:`_HOLD` of them, and past that the oldest is written with that start masked (fail closed).
* ``outcome`` is ``completed``, ``error`` (the SDK raised; ``error`` says what) or ``closed`` (the
  caller closed the stream early).

Recording must never hurt the stream it observes: every failure (a full disk, a read-only
directory, an unserialisable value) is caught, reported once as a :class:`RecordingWarning` and in
:attr:`Recorder.error`, and the recorder goes quiet while the stream flows on. Writes go through a
buffered file (no flush per chunk, no fsync), so the per-chunk cost is a ``model_dump`` and a
buffered write; a process killed mid-stream loses at most the last buffer of lines and the chunks
held back for a split secret, which replay reads as a stream without footer.

Redaction (``redact=True``, ``"arguments"`` or ``"content"``) masks text but keeps its shape;
see ``_redact``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import uuid
import warnings
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from .._version import __version__
from ..core import CallStore, now
from ..errors import RecordingWarning
from ._plain import is_sentinel, plain
from ._redact import Masker, Redact, redact_parts
from ._secrets import (
    REDACTED,
    LiteralSecrets,
    Piece,
    StreamedLiterals,
    StreamedText,
    client_secrets,
    is_secret_key,
    mask_private_keys,
    mask_shapes,
    secret_lines,
)

# ``Redact`` and ``redact_parts`` live in ``_redact``; the stream wrappers take them from here.
__all__ = ["FORMAT", "Recorder", "Redact", "recording_path", "redact_parts"]

FORMAT = "toolstitch.recording"
VERSION = 1


#: Streamed text fields followed for secrets cut over chunks (choices x calls x fields, items x parts).
_MAX_STREAMED = 4096
#: Chunks held back behind one whose text may go on into a secret. Past this the oldest is written
#: with that text's possible start of a secret masked: memory stays bounded, and no part of a secret
#: is written in clear (a content that ends in "s" and waits behind 4,096 argument chunks loses it).
_HOLD = 4096
#: The same bound in the held chunks' size (their JSON, measured as each is held): a hostile server
#: that echoes the start of the key and then sends large chunks cannot make the file's queue grow.
_HOLD_BYTES = 8 * 1024 * 1024
# Request options that travel as HTTP headers or query parameters: any value may be a credential.
_TRANSPORT_OPTIONS = ("extra_headers", "extra_query")
# Request parameters that hold JSON schemas (chat and Responses): inside a schema a key is a
# parameter name (a tool may well take a ``password``), not a credential, and replay checks calls
# against it, so each schema is kept as sent. Around the schemas these parameters are scrubbed like
# any other: a remote MCP tool carries its ``authorization`` and ``headers`` there.
_SCHEMA_OPTIONS = ("tools", "functions", "response_format", "text")
# The keys under which those parameters hold a schema (``function.parameters``, ``json_schema.schema``,
# ``text.format.schema``, an MCP tool's ``input_schema``).
_SCHEMA_KEYS = frozenset({"parameters", "schema", "input_schema", "output_schema"})
# The conversation is evidence (and the model saw it): only names and known secrets are masked in it.
_CONTENT_OPTIONS = ("messages",)


_last_ns = 0
_last_ns_lock = threading.Lock()


def recording_path(directory: str | os.PathLike[str]) -> Path:
    """A new, unique file name in ``directory``: UTC time to the nanosecond first
    (``20250102T030405.123456789-<10 hex>.jsonl``), so that ``sorted(os.listdir(directory))`` lists
    the recordings in the order they were started, many within one second included.

    Within a process the stamps strictly increase (threads take them under one lock, and a clock
    that stepped back, or a coarse one, never gives an earlier or equal stamp); processes writing to
    one directory share the system clock, read at nanosecond resolution. The random part keeps
    names unique whatever the clocks do.
    """
    global _last_ns
    with _last_ns_lock:
        stamp_ns = _last_ns = max(time.time_ns(), _last_ns + 1)
    seconds, fraction = divmod(stamp_ns, 1_000_000_000)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(seconds))
    return Path(directory) / f"{stamp}.{fraction:09d}-{uuid.uuid4().hex[:10]}.jsonl"


class Recorder:
    """Writes one stream to a JSONL file (or to an open text file) as it flows.

    The stream wrappers call :meth:`on_chunk` for each chunk before it reaches the caller and
    :meth:`on_end` once when the stream ends; neither ever raises. ``started_at`` is the monotonic
    time the request started (offsets are measured from it). ``request`` is the keyword arguments
    given to ``create()``; ``options`` describes the accumulator (limits, empty-arguments policy),
    so a replay can check the calls the same way. ``secrets`` are strings masked wherever they
    appear in what is written (the client's API key: see :func:`client_secrets`).
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | IO[str],
        *,
        request: Mapping[str, Any] | None = None,
        redact: Redact = False,
        started_at: float | None = None,
        options: Mapping[str, Any] | None = None,
        secrets: Iterable[object] = (),
    ) -> None:
        self.path: Path | None = None if _is_file(target) else Path(target)  # type: ignore[arg-type]
        """Where the recording goes (``None`` when writing to a file object)."""
        self.error: BaseException | None = None
        """The first failure, if writing failed; the recording stopped there."""
        self.chunks = 0
        """Chunks written so far."""
        self.ended = False
        self.started_at = now() if started_at is None else started_at
        self._mask = Masker(redact)
        self._secrets = LiteralSecrets(secrets)
        # Each streamed text field, for a private key and a literal secret cut between chunks.
        self._texts: dict[tuple[Any, ...], tuple[StreamedText, StreamedLiterals]] = {}
        self._held: deque[_Held] = deque()  # chunks not written yet, in order (a split secret)
        self._held_bytes = 0  # their size (``_HOLD_BYTES``)
        self._owns_file = False
        self._out: IO[str] | None = None
        try:
            if _is_file(target):
                self._out = target  # type: ignore[assignment]
            else:
                assert self.path is not None
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # A lone surrogate (a provider split "\ud83d\ude00" across chunks) cannot be
                # encoded as UTF-8; backslashreplace writes it as "\ud83d", which inside a JSON
                # string is exactly the escape that reads back as the same character.
                self._out = open(self.path, "w", encoding="utf-8", errors="backslashreplace")  # noqa: SIM115
                self._owns_file = True
            self._write(self._header(request or {}, options or {}))
        except Exception as exc:
            self._fail(exc)

    @classmethod
    def for_stream(
        cls,
        target: str | os.PathLike[str] | IO[str],
        accumulator: CallStore,
        request: Mapping[str, Any] | None,
        *,
        redact: Redact = False,
        client: Any = None,
    ) -> Recorder:
        """A recorder for a stream fed to ``accumulator`` (its start time, limits and policy), sent
        by ``client`` (whose API key and credential headers are masked wherever they appear)."""
        return cls(
            target,
            request=request,
            redact=redact,
            started_at=accumulator.metrics.started_at,
            options=accumulator.check_options,
            secrets=client_secrets(client),
        )

    def __repr__(self) -> str:
        where = self.path if self.path is not None else "<file>"
        return f"Recorder({where!s}, chunks={self.chunks}, ended={self.ended}, error={self.error!r})"

    # -- the hooks the stream wrappers call ------------------------------------------------------

    def on_chunk(self, chunk: Any) -> None:
        """Write one chunk with its offset. Never raises."""
        if self._out is None:
            return
        try:
            offset = (now() - self.started_at) * 1000.0
            data = _chunk_data(chunk)
            held = _Held({"type": "chunk", "offset_ms": round(offset, 3), "chunk": data})
            self._streamed_texts(held, data)
            if held.waiting or self._held:
                # Written later: serialised now, once (the size bound is exact, and the line is
                # written as it is unless a masking or the redaction changes the chunk meanwhile).
                held.line = _line(held.record)
                held.size = len(held.line)
                self._held_bytes += held.size
                self._held.append(held)
                self._release()
            else:
                self._write_chunk(held.record)
        except Exception as exc:
            self._fail(exc)

    def on_end(self, error: BaseException | None) -> None:
        """Write the footer and close the file. Idempotent; never raises.

        ``error`` is what ended the stream: ``None`` when it completed, ``GeneratorExit`` when the
        caller closed it early, otherwise the exception the SDK raised.
        """
        if self.ended:
            return
        self.ended = True
        if self._out is None:
            return
        try:
            for _, literals in self._texts.values():  # nothing follows: held chunks settle as they are
                self._settled(literals.end())
            self._release()
            if error is None:
                outcome = "completed"
            elif isinstance(error, GeneratorExit):
                outcome, error = "closed", None
            else:
                outcome = "error"
            footer = {
                "type": "footer",
                "offset_ms": round((now() - self.started_at) * 1000.0, 3),
                "outcome": outcome,
                "chunks": self.chunks,
                "error": None if error is None else self._error_data(error),
            }
            self._write(footer)
            self._close()
        except Exception as exc:
            self._fail(exc)

    # -- internals ---------------------------------------------------------------------------

    def _header(self, request: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
        import openai

        clean = self._request_data(request)
        if self._mask.active:
            clean = self._mask.request(clean)
        return {
            "type": "header",
            "format": FORMAT,
            "version": VERSION,
            "toolstitch": __version__,
            "openai": getattr(openai, "__version__", None),
            "python": sys.version.split()[0],
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "redacted": sorted(self._mask.parts),
            "options": dict(options),
            "request": clean,
        }

    def _streamed_texts(self, held: _Held, data: Any) -> None:
        """Each streamed text field of the chunk (:func:`_text_fields`) fed to its stream: a private
        key (:class:`StreamedText`) masked at once, a literal secret (:class:`StreamedLiterals`)
        masked once the fragments that may hold it are known; until then ``held`` waits."""
        found: list[str] = []
        secrets = self._secrets
        known = bool(secrets)
        for key, container, field in _text_fields(data):
            streams = self._texts.get(key)
            if streams is None:
                if len(self._texts) >= _MAX_STREAMED:
                    continue  # a hostile stream of fields: each record is still masked on its own
                streams = self._texts[key] = (StreamedText(), StreamedLiterals())
            text = container[field] = streams[0].feed(container[field], found)
            literals = streams[1]
            if known and not literals.passes(text, secrets):
                held.waiting += 1
                piece = Piece(text, (held, container, field))
                held.pieces.append((literals, piece))
                self._settled(literals.feed(piece, secrets))
        if found:
            self._remember_found(found)

    def _settled(self, pieces: list[Piece]) -> None:
        """Fragments no later one can change: put back, masked, where they came from."""
        for piece in pieces:
            held, container, field = piece.owner
            if piece.cuts:
                container[field] = piece.masked()
                held.line = None  # serialised again when written
            held.waiting -= 1

    def _release(self) -> None:
        """Write the held chunks that wait for nothing, in order; past :data:`_HOLD`, settle the
        oldest by force (what may start a secret in it is masked)."""
        queue = self._held
        while queue:
            first = queue[0]
            if first.waiting and (len(queue) > _HOLD or self._held_bytes > _HOLD_BYTES):
                for literals, piece in first.pieces:
                    self._settled(literals.force(piece, self._secrets))
            if first.waiting:
                return
            queue.popleft()
            self._held_bytes -= first.size
            self._write_chunk(first.record, first.line)

    def _write_chunk(self, record: dict[str, Any], line: str | None = None) -> None:
        """A chunk's record, redacted if asked (in order: the redaction reads each text in turn);
        ``line``: the record already serialised, as it stands."""
        if self._mask.active:
            record["chunk"] = self._mask.chunk(record["chunk"])
            line = None
        self._write(record, line)
        self.chunks += 1

    def _write(self, record: Mapping[str, Any], line: str | None = None) -> None:
        assert self._out is not None
        if line is None:
            line = _line(record)
        if "---" in line:
            # A PEM private key may sit in any string of any record (every BEGIN line holds dashes,
            # which JSON never escapes, so a line without them holds none). Masked in a fresh copy,
            # in document order; each block becomes a literal secret, masked in later records too.
            found: list[str] = []
            data = mask_private_keys(json.loads(line), found)
            if found:
                self._remember_found(found)
                record = data
                line = _line(record)
        if self._secrets and self._secrets.found_in(line):
            line = json.dumps(self._secrets.mask(dict(record)), ensure_ascii=False, separators=(",", ":"))
        self._out.write(line + "\n")

    def _request_data(self, request: Mapping[Any, Any], *, top: bool = True) -> dict[str, Any]:
        """The request parameters as plain JSON, without credentials and without SDK sentinels.
        Every value masked here becomes a literal secret, masked wherever else it shows up."""
        out: dict[str, Any] = {}
        for name, value in request.items():
            key = str(name)
            if is_sentinel(value):
                continue
            if key in _TRANSPORT_OPTIONS and isinstance(value, Mapping):
                # Headers and query parameters travel beside the body: any of them may be a credential.
                out[key] = {str(k): REDACTED for k in value}
                self._remember(value.values())
            elif is_secret_key(key):
                out[key] = REDACTED
                self._remember([value])
            elif key in _SCHEMA_OPTIONS:
                out[key] = self._scrub(self._plain(value), shapes=True, schemas=True)
            elif top and key == "extra_body" and isinstance(value, Mapping):
                # Merged over the request by the SDK: its schema fields are schemas (the contract a
                # replay checks against), its other fields request parameters.
                out[key] = self._request_data(value, top=False)
            else:
                out[key] = self._scrub(self._plain(value), shapes=key not in _CONTENT_OPTIONS)
        return out

    def _plain(self, value: Any) -> Any:
        """:func:`plain`, with every PEM private key masked (and remembered) before anything else
        looks at it: a key spread over a list of its lines is masked whole only while it is whole."""
        found: list[str] = []
        data = mask_private_keys(plain(value), found)
        if found:
            self._remember_found(found)
        return data

    def _scrub(self, value: Any, *, shapes: bool, schemas: bool = False) -> Any:
        """Values under credential names masked (and remembered), at any depth; with ``shapes``,
        credential-shaped text masked too, in keys as in values (and remembered: an echo of it is
        masked as well). With ``schemas``, a value under a schema key (:data:`_SCHEMA_KEYS`) is
        kept as sent. Iterative: ``plain`` bounds the depth, and no depth costs a Python frame."""
        root: list[Any] = [None]
        # Each task: the value to scrub, the container and the slot its result goes in.
        work: list[tuple[Any, Any, Any]] = [(value, root, 0)]
        while work:
            node, parent, slot = work.pop()
            if isinstance(node, dict):
                out: dict[str, Any] = {}
                parent[slot] = out
                for k, v in node.items():
                    if is_secret_key(k):
                        out[k] = REDACTED
                        self._remember([v])
                    elif schemas and k in _SCHEMA_KEYS and isinstance(v, dict):
                        out[k] = v
                    else:
                        name = self._shapes(k) if shapes else k
                        out[name] = None
                        work.append((v, out, name))
            elif isinstance(node, list):
                items: list[Any] = [None] * len(node)
                parent[slot] = items
                work.extend((v, items, i) for i, v in enumerate(node))
            elif shapes and isinstance(node, str):
                parent[slot] = self._shapes(node)
            else:
                parent[slot] = node
        return root[0]

    def _shapes(self, text: str) -> str:
        """:func:`mask_shapes`, every credential it masks remembered as a literal secret."""
        found: list[str] = []
        masked = mask_shapes(text, found)
        if found:
            self._remember_found(found)
        return masked

    def _remember_found(self, found: Iterable[str]) -> None:
        """Credentials found by shape become literal secrets (a PEM block line by line, too)."""
        for piece in found:
            for literal in secret_lines(piece):
                self._secrets.add(literal)

    def _remember(self, values: Iterable[Any]) -> None:
        """Every string in ``values`` (nested ones too) is a literal secret from now on."""
        stack = list(values)
        while stack:
            value = stack.pop()
            if isinstance(value, str):
                self._secrets.add(value)
                self._secrets.add(value.partition(" ")[2])  # "Bearer <token>": the token alone
            elif isinstance(value, Mapping):
                stack.extend(value.values())
            elif isinstance(value, (list, tuple)):
                stack.extend(value)

    def _error_data(self, error: BaseException) -> dict[str, Any]:
        """What ended the stream, with credential-shaped text masked (a server error may echo the
        key it was sent; known secrets are masked again on the way out, in :meth:`_write`)."""
        data: dict[str, Any] = {
            "type": type(error).__name__,
            "module": type(error).__module__,
            "message": self._shapes(str(error)),
        }
        status = getattr(error, "status_code", None)
        if isinstance(status, int):
            data["status_code"] = status
        body = getattr(error, "body", None)
        if body is not None:
            data["body"] = self._scrub(self._plain(body), shapes=True)
        return data

    def _close(self) -> None:
        out, self._out = self._out, None
        if out is None:
            return
        if self._owns_file:
            out.close()
        else:
            out.flush()

    def _fail(self, exc: BaseException) -> None:
        """Report the first failure once, then stop writing: the stream must not notice."""
        if self.error is None:
            self.error = exc
            where = self.path if self.path is not None else "a file object"
            # Even with warnings turned into errors (-W error) the stream must not notice: the
            # failure stays on ``self.error`` either way.
            with contextlib.suppress(Warning):
                warnings.warn(
                    RecordingWarning(
                        f"toolstitch: recording to {where} failed ({type(exc).__name__}: {exc});"
                        " the stream continues unrecorded"
                    ),
                    stacklevel=3,
                )
        out, self._out = self._out, None
        if out is not None and self._owns_file:
            # The disk already failed once; the first error is the one reported.
            with contextlib.suppress(Exception):
                out.close()


class _Held:
    """A chunk's record, and how many of its text fragments may still be part of a secret."""

    __slots__ = ("line", "pieces", "record", "size", "waiting")

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record
        self.waiting = 0
        self.size = 0
        self.line: str | None = None
        """The record serialised when it was held (None once a masking changed it)."""
        self.pieces: list[tuple[StreamedLiterals, Piece]] = []


def _line(record: Mapping[str, Any]) -> str:
    """A record as the line it is written as."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _key(value: Any) -> Any:
    return value if isinstance(value, int | str) else None


def _text_fields(data: Any) -> list[tuple[tuple[Any, ...], dict[str, Any], str]]:
    """The streamed text fields of one chunk, each as (which text it belongs to, its container,
    its key): a chat choice's content, refusal and reasoning and each call's arguments; a
    Responses ``*.delta`` event's delta, one text per event type, item, content part and summary."""
    if not isinstance(data, dict):
        return []
    fields: list[tuple[tuple[Any, ...], dict[str, Any], str]] = []
    choices = data.get("choices")
    if not isinstance(choices, list):
        kind = data.get("type")
        if isinstance(kind, str) and kind.endswith(".delta") and isinstance(data.get("delta"), str):
            item = (data.get("item_id"), data.get("output_index"))
            part = (data.get("content_index"), data.get("summary_index"))
            fields.append(((kind, *map(_key, item), *map(_key, part)), data, "delta"))
        return fields
    for position, choice in enumerate(choices):
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            continue
        index = choice.get("index", position)
        where = index if isinstance(index, int | str) else position
        for field in ("content", "refusal", "reasoning_content", "reasoning"):
            if isinstance(delta.get(field), str):
                fields.append(((where, field), delta, field))
        legacy = delta.get("function_call")
        if isinstance(legacy, dict) and isinstance(legacy.get("arguments"), str):
            fields.append(((where, "function_call"), legacy, "arguments"))
        calls = delta.get("tool_calls")
        for n, call in enumerate(calls if isinstance(calls, list) else ()):
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                k = call.get("index", n)
                fields.append(((where, "call", k if isinstance(k, int | str) else n), function, "arguments"))
    return fields


def _is_file(target: object) -> bool:
    return not isinstance(target, (str, os.PathLike))


def _chunk_data(chunk: Any) -> Any:
    """The chunk as received: the SDK builds chunks without validation, so ``exclude_unset`` yields
    exactly the keys the provider sent (unknown ones included), and nothing the SDK defaulted.
    A chunk that will not serialise (nested deeper than pydantic goes) is written bounded."""
    try:
        if isinstance(chunk, Mapping):
            return json.loads(json.dumps(chunk))  # a private copy, safe to mask
        dump = getattr(chunk, "model_dump", None)
        if callable(dump):
            return dump(mode="json", exclude_unset=True, by_alias=True, warnings=False)
    except (TypeError, ValueError, RecursionError):
        pass
    return plain(chunk)
