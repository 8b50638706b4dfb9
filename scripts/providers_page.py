"""Generate ``docs/providers.md`` from the provider cassettes, so the page stays true.

Run: ``.venv/bin/python scripts/providers_page.py`` (``--check`` exits 1 when the committed page
differs; ``--corpus DIR`` reads cassettes from another folder).

For every recorded stream in ``cassettes/providers`` (one vcrpy cassette per stream, see
``cassettes/README.md``) it reads the provider's raw body with the ``openai`` SDK's
own SSE decoder, describes what the provider's stream looks like (chunk count, whether tool-call
entries carry ``index``, ``id`` and ``type``, where usage arrives, the ``finish_reason`` values), and
runs :class:`toolstitch.Accumulator` over it (with the request's ``tools`` when recorded) to list the
anomalies toolstitch records on it. Nothing on the page is written by hand except the legend.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml
from openai._streaming import SSEDecoder

import toolstitch as ts

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "cassettes" / "providers"
OUTPUT = ROOT / "docs" / "providers.md"


class Stream:
    """What one cassette's body contains, as the SDK decodes it."""

    def __init__(self, path: Path, corpus: Path) -> None:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        [interaction] = document["interactions"]
        self.name = path.relative_to(corpus).with_suffix("").as_posix()
        self.path = path
        self.provider = str(document["metadata"].get("provider") or "unknown")
        self.chunks: list[dict[str, Any]] = []
        self.done = False
        self.error = False
        for event in _events(interaction["response"]["body"]["string"].encode("utf-8")):
            if event.data.startswith("[DONE]"):
                self.done = True
                break
            try:
                data = event.json()
            except ValueError:
                continue
            if event.event == "error" or (isinstance(data, dict) and data.get("error")):
                self.error = True
                break
            if isinstance(data, dict):
                self.chunks.append(data)
        # The request's tools, when the source recorded the request (not the synthesized ones).
        self.tools = None
        if document["metadata"].get("request") == "recorded":
            self.tools = json.loads(interaction["request"]["body"]).get("tools")

    def choices(self) -> Iterator[dict[str, Any]]:
        for c in self.chunks:
            for choice in c.get("choices") or []:
                if isinstance(choice, dict):
                    yield choice

    def entries(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for choice in self.choices():
            delta = choice.get("delta") or {}
            out.extend(e for e in delta.get("tool_calls") or [] if isinstance(e, dict))
        return out

    def run(self) -> ts.Accumulator:
        acc = ts.Accumulator(tools=self.tools)
        for c in self.chunks:
            acc.feed(c)
        acc.end(RuntimeError("in-band error") if self.error else None)
        return acc


def _events(body: bytes) -> Iterator[Any]:
    return SSEDecoder().iter_bytes(iter([body]))


def _kind(value: Any, present: bool) -> str:
    if not present:
        return "absent"
    if value is None:
        return "null"
    if value == "":
        return '""'
    return "value"


def _field(entries: list[dict[str, Any]], calls: int, key: str, function: bool = False) -> str:
    """How a tool-call field appears across a stream's entries, in a few words."""
    kinds = []
    for entry in entries:
        holder = entry.get("function") if function else entry
        holder = holder if isinstance(holder, dict) else {}
        kinds.append(_kind(holder.get(key), key in holder))
    with_value = kinds.count("value")
    later = sorted({k for k in kinds if k != "value"})
    if with_value == 0:
        return "never" + (f" ({', '.join(later)})" if later and later != ["absent"] else "")
    if with_value > calls:
        head = "every fragment" if with_value == len(kinds) else "repeated"
    else:
        head = "once per call"
    rest = [k for k in later if k != "absent"]
    return head + (f"; {', '.join(rest)} on others" if rest else "")


def _index(entries: list[dict[str, Any]]) -> str:
    kinds = {"int" if type(e.get("index")) is int else _kind(e.get("index"), "index" in e) for e in entries}
    if kinds == {"int"}:
        return "yes"
    if "int" not in kinds:
        return "no (" + ", ".join(sorted(kinds)) + ")"
    return "some"


def _usage(stream: Stream) -> str:
    where = []
    carrying = [c for c in stream.chunks if isinstance(c.get("usage"), dict)]
    if not carrying:
        return "none"
    if len(carrying) == len(stream.chunks) and len(carrying) > 1:
        return "every chunk"
    if any(not c.get("choices") for c in carrying):
        where.append("empty-choices chunk")
    if any(c.get("choices") for c in carrying):
        where.append("choice chunk")
    return " + ".join(where)


def _reasoning(stream: Stream) -> list[str]:
    fields: set[str] = set()
    for choice in stream.choices():
        delta = choice.get("delta") or {}
        fields.update(k for k in ("reasoning_content", "reasoning", "reasoning_details") if delta.get(k))
    return sorted(fields)


def _codes(acc: ts.Accumulator) -> list[str]:
    return sorted({a.code for a in acc.anomalies})


def _cell(items: Iterable[str], empty: str = "–") -> str:
    items = list(items)
    return ", ".join(f"`{i}`" for i in items) if items else empty


#: The page's opening example: a stream shaped like the Gemini endpoint's below (the whole call in one
#: chunk, no index, an empty id, ``finish_reason: "stop"``), stitched, with what toolstitch records.
OPENING = [
    "A stream shaped like Gemini's: the whole call in one chunk, no `index`, an empty `id`, and",
    '`finish_reason: "stop"`. toolstitch assembles it and records each difference.',
    "",
    "```python",
    "import toolstitch as ts",
    "from toolstitch.testing import chunk",
    "",
    'weather = {"name": "get_weather", "arguments": \'{"city": "Oslo"}\'}',
    'call = {"id": "", "type": "function", "function": weather}  # no index, an empty id',
    'chunks = [chunk(delta={"tool_calls": [call]}), chunk(delta={}, finish_reason="stop")]',
    'stream = ts.stitch(chunks, tools=[{"type": "function", "function": {"name": "get_weather"}}])',
    "[result] = stream.until_done().tool_calls",
    "print(result.status, result.parsed)  # ready {'city': 'Oslo'}",
    "print(sorted({a.code for a in stream.anomalies}))",
    "```",
]


def render(corpus: Path = CORPUS, output: Path = OUTPUT) -> str:
    """The page for the cassettes in ``corpus`` (links are relative to ``output``'s folder)."""
    by_provider: dict[str, list[tuple[Stream, ts.Accumulator]]] = defaultdict(list)
    for path in sorted(corpus.glob("*/*.yaml")):
        stream = Stream(path, corpus)
        by_provider[stream.provider].append((stream, stream.run()))

    out = [
        "# Providers",
        "",
        "<!-- Generated by scripts/providers_page.py from cassettes/providers. Do not edit by hand. -->",
        "",
        *OPENING,
        "",
        f"What {sum(len(v) for v in by_provider.values())} recorded streams from "
        f"{len(by_provider)} providers look like, and what toolstitch records on each. Every stream was",
        "read with the `openai` SDK's own SSE decoder and fed to `toolstitch.Accumulator` (with the",
        "request's `tools` when the recording kept them); every one assembles correctly (see",
        "`tests/client/test_conformance.py`). Each stream links to its cassette, which names its",
        "source and license. The anomaly codes are explained in [quirks.md](quirks.md).",
        "",
        "Columns: **chunks** data chunks in the body; **frag/call** tool-call entries per call (1: the",
        "whole call in one chunk); **index**, **id**, **type**, **name** how tool-call entries carry those",
        'fields ("once per call" is the OpenAI reference; `""`/null on others: the other entries send an',
        "empty value); **usage** where token usage arrives; **finish** the `finish_reason` values seen.",
        "",
        "## Summary",
        "",
        "| provider | streams | tool-call index | ids | anomalies toolstitch records |",
        "|---|---|---|---|---|",
    ]
    for provider in sorted(by_provider):
        rows = by_provider[provider]
        index = sorted({_index(s.entries()) for s, a in rows if s.entries()})
        ids = sorted({_field(s.entries(), len(a.calls()), "id") for s, a in rows if s.entries()})
        codes = sorted({c for _, a in rows for c in _codes(a)})
        out.append(
            f"| {provider} | {len(rows)} | {'; '.join(index) or '–'} | {'; '.join(ids) or '–'} "
            f"| {_cell(codes, 'none')} |"
        )
    for provider in sorted(by_provider):
        rows = by_provider[provider]
        models = sorted({str(c.get("model")) for s, _ in rows for c in s.chunks if c.get("model")})
        out += [
            "",
            f"## {provider}",
            "",
            f"Models: {', '.join(f'`{m}`' for m in models) or 'not stated'}.",
            "",
            "| stream | chunks | calls | frag/call | index | id | type | name | usage | finish "
            "| `[DONE]` | reasoning | anomalies |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for stream, acc in rows:
            entries = stream.entries()
            n_calls = len(acc.calls())
            per_call = f"{len(entries) / n_calls:.1f}".rstrip("0").rstrip(".") if n_calls else "–"
            finishes = [r for rs in acc.finish_reasons.values() for r in rs]
            tail = " (in-band error)" if stream.error else ""
            if entries:
                fields = [
                    _index(entries),
                    _field(entries, n_calls, "id"),
                    _field(entries, n_calls, "type"),
                    _field(entries, n_calls, "name", function=True),
                ]
            else:
                fields = ["–"] * 4
            out.append(
                f"| [`{stream.name}`]({_link(stream.path, output)}){tail} "
                f"| {len(stream.chunks)} | {n_calls} | {per_call} | "
                + " | ".join(fields)
                + f" | {_usage(stream)} | {_cell(finishes, 'none')} | {'yes' if stream.done else 'no'} "
                f"| {_cell(_reasoning(stream))} | {_cell(_codes(acc), 'none')} |"
            )
    return "\n".join(out) + "\n"


def _link(path: Path, output: Path) -> str:
    return Path(os.path.relpath(path.resolve(), output.resolve().parent)).as_posix()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the provider cassettes' folder")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="where the page goes")
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is out of date")
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"no cassettes at {args.corpus}", file=sys.stderr)
        return 2
    page = render(args.corpus, args.output)
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != page:
            print(f"{args.output} is out of date: run scripts/providers_page.py", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(page, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
