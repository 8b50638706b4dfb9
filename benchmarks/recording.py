"""What masking the client's own secrets costs a recorded stream, measured in one run.

Run: ``.venv/bin/python benchmarks/recording.py`` (``--rounds N`` for more samples).

A recording masks the client's API key and credential headers wherever they appear, also when a
server echoes one a few characters per chunk (``recording/_secrets.py``: each streamed text is
followed for a secret cut between its fragments, and a chunk whose text may go on into one is
written a little later). The workload is a realistic answer of about 2,000 chunks: a content text
in word-sized pieces (most of them end in a letter, so many may start a key), then two tool calls
whose arguments come in 5-character fragments. Per stream it times:

* ``recorder``         :meth:`Recorder.on_chunk` for every chunk (the SDK's ``ChatCompletionChunk``
  objects, decoded once outside the timing), then ``on_end``, to a file: the recording alone, so
  its ratio is the strictest;
* ``recorded stream``  what a recorded stream spends per chunk: the SDK's decoding of the SSE
  payload (``json.loads`` and ``construct_type``, as ``openai.Stream`` does; not its SSE parsing
  nor httpx), ``Recorder.on_chunk``, ``Accumulator.feed``; then the end. The requirement bounds
  this one: split masking costs at most 5% of it.

Three sides, with the client's secrets as ``wrap(client, record=...)`` gives them (a 164-character
``sk-proj-`` key and a credential header): ``no secret`` (none known: no literal searched at all),
``whole only`` (known, masked where one record holds one, as before split masking: the streamed
texts are not followed; :meth:`StreamedLiterals.passes` patched to take every fragment as it is) and
``split too`` (the recorder as it is). ``split/whole`` is what split masking adds; ``split/none`` all
that knowing the secrets costs. A last row has the key echoed in the content five times, cut in
4-character pieces (masked every time): a stream that does hold the key.

Times are the process's CPU time (``time.process_time``), best of several rounds, the two sides
alternating; the ratios measured in one run are what to compare.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import string
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk
from workloads import TOOLS, arguments_of, decode  # benchmarks/ is on sys.path when run as a script

import toolstitch as ts
from toolstitch.recording import Recorder
from toolstitch.recording._secrets import StreamedLiterals
from toolstitch.testing import chunk

_random = random.Random(42)
KEY = "sk-proj-" + "".join(_random.choice(string.ascii_letters + string.digits + "_-") for _ in range(156))
HEADER = "org-" + "".join(_random.choice(string.ascii_letters + string.digits) for _ in range(24))
SECRETS = [KEY, HEADER]


def answer(echo: bool = False) -> list[str]:
    """About 2,000 chunks: content in word-sized pieces, then two calls' arguments in 5-char pieces."""
    words = ("Looking at the request, the sensible steps are these: read the notes, write the file "
             "and check the result against what was asked for. ") * 20  # fmt: skip
    if echo:
        words = words[:1500] + (" " + KEY + " ") * 5 + words[1500:]
    pieces = [words[k : k + 4] for k in range(0, len(words), 4)][: 600 if not echo else None]
    out: list[dict[str, Any]] = [chunk(delta={"role": "assistant", "content": ""})]
    out += [chunk(delta={"content": p}) for p in pieces]
    calls = [arguments_of(3500, seed) for seed in (1, 2)]
    for i in range(2):
        header = {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": "write_file"}}
        out.append(chunk(delta={"tool_calls": [header]}))
        for k in range(0, len(calls[i]), 5):
            fragment = {"index": i, "function": {"arguments": calls[i][k : k + 5]}}
            out.append(chunk(delta={"tool_calls": [fragment]}))
    out.append(chunk(delta={}, finish_reason="tool_calls"))
    return [json.dumps(c, ensure_ascii=False) for c in out]


def recorder_only(chunks: Sequence[Any], path: str, secrets: Sequence[str]) -> None:
    recorder = Recorder(path, secrets=secrets)
    for item in chunks:
        recorder.on_chunk(item)
    recorder.on_end(None)
    assert recorder.error is None


def recorded_stream(payloads: Sequence[Any], path: str, secrets: Sequence[str]) -> None:
    accumulator = ts.Accumulator(tools=TOOLS)
    recorder = Recorder(path, started_at=accumulator.metrics.started_at, secrets=secrets)
    for payload in payloads:
        item = construct_type(type_=ChatCompletionChunk, value=json.loads(payload))
        recorder.on_chunk(item)
        accumulator.feed(item, events=False)
    accumulator.end()
    recorder.on_end(None)
    assert recorder.error is None


def whole_only(self: StreamedLiterals, text: str, secrets: Any) -> bool:
    return True  # every fragment taken as it is: no split secret is looked for


def best(rounds: int, run: Callable[[Sequence[str]], None]) -> list[float]:
    """The best CPU time of each side over ``rounds`` rounds, the sides alternating in each round."""
    sides = [((), False), (SECRETS, True), (SECRETS, False)]
    times = [float("inf")] * len(sides)
    split = StreamedLiterals.passes
    for _ in range(rounds):
        for n, (secrets, patched) in enumerate(sides):
            StreamedLiterals.passes = whole_only if patched else split  # type: ignore[method-assign]
            gc.collect()
            start = time.process_time()
            try:
                run(secrets)
            finally:
                StreamedLiterals.passes = split  # type: ignore[method-assign]
            times[n] = min(times[n], time.process_time() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=15, help="rounds; the best of each side is kept")
    args = parser.parse_args()
    plain, echoed = answer(), answer(echo=True)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "recording.jsonl")
        rows: list[tuple[str, Callable[[Sequence[Any], str, Sequence[str]], None], Sequence[Any]]] = [
            ("recorder", recorder_only, decode(plain)),
            ("recorded stream", recorded_stream, plain),
            ("recorded stream, key echoed", recorded_stream, echoed),
        ]
        print(
            f"{len(plain)} chunks ({len(echoed)} with the key echoed), best of {args.rounds} rounds, CPU ms"
        )
        heads = (
            ("no secret", 9),
            ("whole only", 10),
            ("split too", 9),
            ("split/whole", 11),
            ("split/none", 10),
        )
        print(f"  {'':28}" + "".join(f" {head:>{width}}" for head, width in heads))
        for name, run, items in rows:
            none, whole, split = best(
                args.rounds, lambda secrets, run=run, items=items: run(items, path, secrets)
            )
            print(
                f"  {name:28} {none * 1000:9.2f} {whole * 1000:10.2f} {split * 1000:9.2f}"
                f" {split / whole:10.3f}x {split / none:9.3f}x"
            )
        with open(path, encoding="utf-8") as recorded:
            assert KEY[8:20] not in recorded.read()  # the last run recorded the echoed key, masked
    print(f"command: python benchmarks/recording.py --rounds {args.rounds}")


if __name__ == "__main__":
    main()
