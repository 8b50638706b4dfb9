"""Write the provider corpus as vcrpy cassettes: one cassette per recorded stream.

Run: ``.venv/bin/python scripts/provider_cassettes.py TRANSCRIPTS`` where ``TRANSCRIPTS`` is a folder
of real streamed Chat Completions bodies laid out as ``PROJECT/NAME.sse``, each with
``NAME.expected.json`` (what a correct merger must produce) and, where the source recorded it,
``NAME.request.json``, plus an ``INDEX.json`` naming each body's source repository, path, commit and
license. There is no default folder: the corpus is read from wherever it was handed to you.

For every body it writes ``cassettes/providers/PROJECT/NAME.yaml`` (``--out`` to change), a cassette
vcrpy replays through the real ``openai`` client:

* one interaction: the request (the recorded body, or, when the source kept none, a minimal request
  offering the tools the stream calls, without schemas; ``metadata.request`` says which) and the
  response, ``200``, ``text/event-stream``, with the body exactly as the provider sent it;
* ``metadata`` (vcrpy keeps this key beside the interactions; older releases ignore it): the source
  (repository, path, commit, license, link), the provider and model, the features and quirks the
  stream shows, and ``expected``, the result the conformance tests hold the stream to.

No header that could carry a credential is written (the cassettes hold none to begin with; the test
``tests/client/test_provider_cassettes.py`` fails if one ever appears). Every cassette is read back
with vcrpy's own loader and must give the body byte for byte. Cassettes of bodies no longer in the
index are removed, and the table of sources in ``cassettes/README.md`` (between its
``providers:begin``/``providers:end`` markers) is rewritten from the cassettes.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "cassettes" / "providers"
README = ROOT / "cassettes" / "README.md"
# Where the cassettes say the request went. ``.invalid`` never resolves: a replay that misses its
# cassette fails instead of reaching a network. The tests match on method and path only.
BASE_URL = "https://provider.invalid/v1"
BEGIN = "<!-- providers:begin (written by scripts/provider_cassettes.py) -->"
END = "<!-- providers:end -->"


class _Dumper(yaml.SafeDumper):
    """Readable cassettes: multi-line text as a literal block where YAML can hold it unchanged (it
    falls back to a quoted string otherwise, e.g. for trailing spaces)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _offered(names: set[str]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": n}} for n in sorted(names)]


def _request(row: dict[str, Any], sse: Path, expected: dict[str, Any]) -> tuple[dict[str, Any], str]:
    recorded = sse.with_name(sse.name[: -len(".sse")] + ".request.json")
    if recorded.exists():
        return json.loads(recorded.read_text(encoding="utf-8")), "recorded"
    names = {c["name"] for choice in expected["choices"] for c in choice["tool_calls"]}
    body: dict[str, Any] = {
        "model": row.get("model") or "unknown",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    }
    if names:
        body["tools"] = _offered(names)
    return body, "synthesized"


def cassette(row: dict[str, Any], corpus: Path) -> tuple[str, str]:
    """``(relative path, YAML text)`` of the cassette for one row of ``INDEX.json``."""
    sse = corpus / row["file"]
    body = sse.read_bytes().decode("utf-8")
    expected = json.loads(sse.with_name(sse.name[: -len(".sse")] + ".expected.json").read_text("utf-8"))
    request, how = _request(row, sse, expected)
    source = {
        "repository": row["repo"],
        "path": row["path"],
        "commit": row["commit"],
        "license": row["license"],
        "url": f"https://github.com/{row['repo']}/blob/{row['commit']}/{urllib.parse.quote(row['path'])}",
    }
    if row.get("interaction") is not None:
        source["interaction"] = row["interaction"]
    if row.get("notes"):
        source["notes"] = row["notes"]
    metadata = {
        "stream": row["file"][: -len(".sse")],
        "provider": row.get("provider") or "unknown",
        "model": row.get("model") or "unknown",
        "source": source,
        # The source kept the chunks as a list of JSON objects; they were written as ``data:`` lines,
        # unchanged, one event each.
        "converted_from_chunk_list": bool(row.get("converted")),
        "request": how,
        "features": list(row.get("features") or []),
        "quirks": list(row.get("quirks") or []),
        "expected": expected,
    }
    document = {
        "metadata": metadata,
        "interactions": [
            {
                "request": {
                    "body": json.dumps(request, ensure_ascii=False, separators=(",", ":")),
                    "headers": {"content-type": ["application/json"]},
                    "method": "POST",
                    "uri": f"{BASE_URL}/chat/completions",
                },
                "response": {
                    "body": {"string": body},
                    "headers": {"content-type": ["text/event-stream; charset=utf-8"]},
                    "status": {"code": 200, "message": "OK"},
                },
            }
        ],
        "version": 1,
    }
    header = (
        f"# {row['file']}: a real {metadata['provider']} stream, from {row['repo']}@{row['commit'][:12]}"
        f" ({row['license']}).\n# Written by scripts/provider_cassettes.py; see cassettes/README.md.\n"
    )
    text = header + yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    _check_round_trip(text, body.encode("utf-8"), row["file"])
    return row["file"][: -len(".sse")] + ".yaml", text


def _check_round_trip(text: str, body: bytes, name: str) -> None:
    """vcrpy's own loader must give back the body exactly."""
    from vcr.serialize import deserialize
    from vcr.serializers import yamlserializer

    _, responses, *_ = deserialize(text, yamlserializer)
    if responses[0]["body"]["string"] != body:
        raise SystemExit(f"{name}: the cassette does not give the body back unchanged")


def sources_table(folder: Path) -> str:
    """The README's table of sources, from the cassettes themselves."""
    rows = [
        "| cassette | provider | source project | path | commit | license |",
        "|---|---|---|---|---|---|",
    ]
    for path in sorted(folder.glob("*/*.yaml")):
        meta = yaml.safe_load(path.read_text(encoding="utf-8"))["metadata"]
        src = meta["source"]
        where = src["path"] + (f" (interaction {src['interaction']})" if "interaction" in src else "")
        rows.append(
            f"| `{path.relative_to(folder).as_posix()}` | {meta['provider']} "
            f"| [{src['repository']}](https://github.com/{src['repository']}) | [`{where}`]({src['url']}) "
            f"| `{src['commit'][:12]}` | {src['license']} |"
        )
    return "\n".join(rows)


def update_readme(readme: Path, folder: Path) -> None:
    text = readme.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme} has no {BEGIN} ... {END} section to write the sources into")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{BEGIN}\n{sources_table(folder)}\n{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transcripts", type=Path, help="the transcripts folder (with INDEX.json)")
    parser.add_argument("--out", type=Path, default=OUT, help="where the cassettes go")
    parser.add_argument("--readme", type=Path, default=README, help="the README whose table to rewrite")
    args = parser.parse_args(argv)
    index = args.transcripts / "INDEX.json"
    if not index.is_file():
        print(f"no INDEX.json in {args.transcripts}", file=sys.stderr)
        return 2
    written = set()
    for row in json.loads(index.read_text(encoding="utf-8")):
        relative, text = cassette(row, args.transcripts)
        target = args.out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.add(target)
    for stale in set(args.out.glob("*/*.yaml")) - written:
        stale.unlink()
    update_readme(args.readme, args.out)
    print(f"wrote {len(written)} cassettes to {args.out} and their sources to {args.readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
