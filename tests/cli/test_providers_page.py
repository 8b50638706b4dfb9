"""``docs/providers.md`` is what ``scripts/providers_page.py`` makes of the provider cassettes, unedited.

The page is generated so that it cannot drift from what providers actually send and what toolstitch
records; this test fails when the code (new anomaly codes, changed repairs) or the corpus
(``cassettes/providers``) changed and the page was not regenerated.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from tests.corpus import CASSETTES, CORPUS

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("providers_page", ROOT / "scripts" / "providers_page.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_providers_page_is_the_generated_one() -> None:
    page = _script().render(CASSETTES, ROOT / "docs" / "providers.md")
    committed = (ROOT / "docs" / "providers.md").read_text(encoding="utf-8")
    assert committed == page, "docs/providers.md is out of date: run scripts/providers_page.py"


def test_the_page_covers_and_links_every_cassette() -> None:
    page = (ROOT / "docs" / "providers.md").read_text(encoding="utf-8")
    assert len(CORPUS) == 40
    for stream in CORPUS:
        assert f"[`{stream.name}`](../cassettes/providers/{stream.name}.yaml)" in page
