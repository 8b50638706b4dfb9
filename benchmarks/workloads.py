"""The benchmark workloads of issue 12, shared by every benchmark in this folder.

* **W2**: 8 parallel calls of 500 bytes of arguments each, cut into 5-byte fragments and
  interleaved round-robin, as OpenAI streams parallel calls (about 809 chunks).
* **W3**: one call of 200 KB of arguments cut into 4-byte fragments (about 50,002 chunks): a tool
  that writes a file through its arguments.
* :func:`single_call` builds W3's shape at any size, for the scaling series.

Each workload is a list of SSE ``data:`` payloads (JSON text, as the server sends them); the
benchmarks decode them into the SDK's ``ChatCompletionChunk`` objects once, with the SDK's own
decoding, so the timed loops see exactly what a wrapped stream sees.
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

from toolstitch.testing import chunk, tool_call_chunks

__all__ = ["TOOLS", "arguments_of", "decode", "served", "single_call", "w2", "w3"]

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "strict": True,
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
                "required": ["path", "text"],
                "additionalProperties": False,
            },
        },
    }
]
"""One tool every call of every workload names, with a schema, so that schema checks run at seal."""


def arguments_of(size: int, seed: int = 0) -> str:
    """A JSON object of ``size`` characters: a path and a long text with escapes and non-ASCII."""
    line = f'line {seed} with a \\"quote\\", a tab\\t and \\u00e9 é; '
    head = '{"path": "notes/' + str(seed) + '.txt", "text": "'
    # Whole lines only, so the text never ends inside an escape; padded to the size with spaces.
    count = max(0, size - len(head) - 2) // len(line)
    body = line * count
    body += " " * max(0, size - len(head) - 2 - len(body))
    text = head + body + '"}'
    json.loads(text)
    return text


def _cut(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _stream(calls: list[tuple[str, str, str]], fragment: int) -> list[str]:
    """SSE payloads: a role chunk, per call a header then its fragments (round-robin), the finish."""
    base = tool_call_chunks([(i, n, "") for i, n, _ in calls], pieces=1, interleave=True)
    role, headers, finish = base[0], base[1:-1], base[-1]
    frag_lists = [_cut(args, fragment) for _, _, args in calls]
    out: list[dict[str, Any]] = [role, *headers]
    width = max(len(f) for f in frag_lists)
    for k in range(width):
        for i, frags in enumerate(frag_lists):
            if k < len(frags):
                entry = {"index": i, "function": {"arguments": frags[k]}}
                out.append(chunk(delta={"tool_calls": [entry]}))
    out.append(finish)
    return [json.dumps(c, ensure_ascii=False) for c in out]


def w2() -> list[str]:
    """W2: 8 interleaved calls of 500 B in 5-byte fragments."""
    calls = [(f"call_{i}", "write_file", arguments_of(500, i)) for i in range(8)]
    return _stream(calls, 5)


def single_call(size: int, fragment: int = 4) -> list[str]:
    """One call of ``size`` bytes in ``fragment``-byte fragments (W3 at 200 KB)."""
    return _stream([("call_0", "write_file", arguments_of(size))], fragment)


def w3() -> list[str]:
    """W3: one 200 KB call in 4-byte fragments."""
    return single_call(200_000, 4)


def decode(lines: list[str]) -> list[Any]:
    """The SDK's own chunk objects for these payloads (``json.loads`` + ``construct_type``)."""
    return [construct_type(type_=ChatCompletionChunk, value=json.loads(line)) for line in lines]


def _serve(conn: Any, items: list[Any]) -> None:
    """The child process of :func:`served`: a local server streaming ``items`` to every request."""
    import threading

    from toolstitch import testing
    from toolstitch.testing import LocalServer, StreamScript

    # A thousand clients connect at once: the standard library's listen backlog of 5 would refuse
    # most of them (this process serves benchmarks only).
    testing._Server.request_queue_size = 4096
    server = LocalServer(handler=lambda body: StreamScript(items)).start()
    conn.send(server.base_url)
    threading.Event().wait()  # until the parent terminates this process


@contextmanager
def served(lines: list[str]) -> Iterator[str]:
    """Serve these SSE payloads to every chat request, from a separate process (so the server's
    threads never compete with the measured client for the interpreter); yields the base URL."""
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe()
    process = context.Process(target=_serve, args=(child, [json.loads(x) for x in lines]), daemon=True)
    process.start()
    try:
        yield parent.recv()
    finally:
        process.terminate()
        process.join()
