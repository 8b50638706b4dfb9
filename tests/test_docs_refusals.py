"""``docs/refusals.md`` prints what it says it prints: each example's output is the text block below it."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tests.test_docs_examples import blocks, output

PAGE = "docs/refusals.md"


def promised(heading: str) -> str:
    """The ``text`` block that follows the python block under ``heading``: its promised output."""
    found = blocks(ROOT / PAGE)
    [position] = [n for n, b in enumerate(found) if b.heading == heading and b.language == "python"]
    after = found[position + 1]
    assert after.language == "text" and after.heading == heading
    return after.code


@pytest.mark.parametrize(
    "heading",
    [
        "The request's contract",
        "Arguments the strict parser refuses",
        "What `Limits` bounds",
        "When approvals are refused",
    ],
)
def test_each_example_prints_what_the_page_says(heading: str) -> None:
    assert output(PAGE, heading) == promised(heading)
