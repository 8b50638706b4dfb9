"""The cassettes themselves: the corpus is whole, keeps no credential, says where each stream came
from, and is what ``scripts/provider_cassettes.py`` writes.

The corpus's use (every stream assembles as expected) is ``test_conformance.py``; this file checks
what a maintainer or a reviewer of the repository relies on: no ``Authorization``, ``api-key`` or
cookie header in any cassette under ``cassettes/``, and the source, path, commit and license of every
provider stream in its metadata and in ``cassettes/README.md``.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.corpus import CASSETTES, CORPUS, SECRET_HEADERS, ProviderStream

ALL_CASSETTES = sorted((ROOT / "cassettes").rglob("*.yaml"))


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "provider_cassettes", ROOT / "scripts" / "provider_cassettes.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def secret_headers(document: Any) -> list[str]:
    """Every request or response header of a cassette whose name could carry a credential."""
    found = []
    for number, interaction in enumerate(document.get("interactions") or []):
        for side in ("request", "response"):
            headers = (interaction.get(side) or {}).get("headers") or {}
            found += [f"{side} {number}: {name}" for name in headers if name.lower() in SECRET_HEADERS]
    return found


def test_the_corpus_is_whole() -> None:
    assert len(CORPUS) == 40
    assert len({s.provider for s in CORPUS}) >= 13
    for stream in CORPUS:
        source = stream.metadata["source"]
        assert {"repository", "path", "commit", "license", "url"} <= set(source), stream.name
        assert source["license"] in {"Apache-2.0", "MIT"}, stream.name
        assert len(source["commit"]) == 40, stream.name
        assert stream.metadata["request"] in {"recorded", "synthesized"}, stream.name
        assert {"error", "choices"} <= set(stream.expected), stream.name
        assert stream.body.startswith(("data:", "event:", ":")), stream.name


@pytest.mark.parametrize("path", ALL_CASSETTES, ids=lambda p: p.relative_to(ROOT / "cassettes").as_posix())
def test_no_cassette_keeps_a_credential_header(path: Path) -> None:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert secret_headers(document) == []


def test_the_credential_check_sees_every_spelling() -> None:
    leaky = {
        "interactions": [
            {
                "request": {"headers": {"Authorization": ["Bearer sk-x"], "api-key": ["k"]}},
                "response": {"headers": {"Set-Cookie": ["s=1"]}},
            },
            {"request": {"headers": {"Cookie": ["a=b"], "X-Api-Key": ["k"]}}, "response": {}},
        ]
    }
    assert secret_headers(leaky) == [
        "request 0: Authorization",
        "request 0: api-key",
        "response 0: Set-Cookie",
        "request 1: Cookie",
        "request 1: X-Api-Key",
    ]


def test_the_readme_names_every_source_and_license() -> None:
    readme = (ROOT / "cassettes" / "README.md").read_text(encoding="utf-8")
    script = _script()
    section = readme.split(script.BEGIN, 1)[1].split(script.END, 1)[0].strip()
    assert section == script.sources_table(CASSETTES), "run scripts/provider_cassettes.py"
    for stream in CORPUS:
        source = stream.metadata["source"]
        row = next(line for line in section.splitlines() if f"`{stream.name}.yaml`" in line)
        for value in (source["repository"], source["path"], source["commit"][:12], source["license"]):
            assert value in row, (stream.name, value)
    for license_file in ("Apache-2.0.txt", "MIT-magentic.txt", "MIT-mirascope.txt", "MIT-pydantic-ai.txt"):
        assert (CASSETTES / "LICENSES" / license_file).is_file()
        assert f"providers/LICENSES/{license_file}" in readme


def _transcript(stream: ProviderStream, folder: Path) -> dict[str, Any]:
    """The transcript (body, expected result, request, index row) that the cassette was made from."""
    meta, source = stream.metadata, stream.metadata["source"]
    sse = folder / f"{stream.name}.sse"
    sse.parent.mkdir(parents=True, exist_ok=True)
    sse.write_bytes(stream.body.encode("utf-8"))
    sse.with_name(sse.name[:-4] + ".expected.json").write_text(json.dumps(meta["expected"]), "utf-8")
    if meta["request"] == "recorded":
        sse.with_name(sse.name[:-4] + ".request.json").write_text(json.dumps(stream.request), "utf-8")
    return {
        "file": f"{stream.name}.sse",
        "provider": meta["provider"],
        "model": meta["model"],
        "repo": source["repository"],
        "path": source["path"],
        "commit": source["commit"],
        "license": source["license"],
        "converted": meta["converted_from_chunk_list"],
        "notes": source.get("notes", ""),
        "interaction": source.get("interaction"),
        "features": meta["features"],
        "quirks": meta["quirks"],
    }


def test_the_generator_writes_these_cassettes(tmp_path: Path) -> None:
    """From the transcripts the cassettes hold, the generator writes the same files again, byte for
    byte (so a cassette edited by hand, or a generator changed without regenerating, fails here)."""
    corpus_dir, out = tmp_path / "transcripts", tmp_path / "cassettes"
    rows = [_transcript(stream, corpus_dir) for stream in CORPUS]
    (corpus_dir / "INDEX.json").write_text(json.dumps(rows), encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text((ROOT / "cassettes" / "README.md").read_text(encoding="utf-8"), encoding="utf-8")
    assert _script().main([str(corpus_dir), "--out", str(out), "--readme", str(readme)]) == 0
    for stream in CORPUS:
        written = (out / f"{stream.name}.yaml").read_text(encoding="utf-8")
        assert written == stream.cassette.read_text(encoding="utf-8"), stream.name
    assert readme.read_text(encoding="utf-8") == (ROOT / "cassettes" / "README.md").read_text(
        encoding="utf-8"
    )
