"""``docs/providers.md`` is what ``scripts/providers_page.py`` makes of the transcripts, unedited.

The page is generated so that it cannot drift from what providers actually send and what toolstitch
records; this test fails when the code (new anomaly codes, changed repairs) or the corpus changed
and the page was not regenerated. Skipped without the corpus.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import TRANSCRIPTS

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("providers_page", ROOT / "scripts" / "providers_page.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason=f"no transcripts at {TRANSCRIPTS}")
def test_committed_providers_page_is_the_generated_one() -> None:
    page = _script().render(TRANSCRIPTS)
    committed = (ROOT / "docs" / "providers.md").read_text(encoding="utf-8")
    assert committed == page, "docs/providers.md is out of date: run scripts/providers_page.py"


@pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason=f"no transcripts at {TRANSCRIPTS}")
def test_the_page_covers_every_transcript() -> None:
    page = _script().render(TRANSCRIPTS)
    for path in TRANSCRIPTS.glob("*/*.sse"):
        assert f"`{path.relative_to(TRANSCRIPTS).as_posix()}`" in page
