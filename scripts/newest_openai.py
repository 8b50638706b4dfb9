#!/usr/bin/env python3
"""Fail unless an environment holds the newest ``openai`` release on the package index.

    scripts/newest_openai.py PYTHON

``PYTHON`` is the interpreter of the environment to check. The index is asked with the pip of the
interpreter running this script (``pip index versions openai``: the index, extra indexes and
find-links pip installs from), so "newest" means what a fresh ``pip install toolstitch`` would get
today. `.ci/run` runs it on the environment of ``./dev test``, and ``scripts/matrix`` on its
``newest`` leg: users get the newest release the day it appears, and CI must test that one, not
whatever a cache or a resolver conflict left behind. A release published between the install and
this check fails it once; the next run installs it.
"""

from __future__ import annotations

import re
import subprocess
import sys


def newest_on_the_index() -> str:
    found = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "openai", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=False,
    )
    match = re.search(r"^openai \(([^)]+)\)$", found.stdout, re.M)
    if match is None:
        sys.exit(f"scripts/newest_openai.py: could not ask the index for openai's releases:\n{found.stderr}")
    return match.group(1)


def installed(python: str) -> str:
    found = subprocess.run(
        [python, "-c", "import openai; print(openai.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        sys.exit(f"scripts/newest_openai.py: {python} cannot import openai:\n{found.stderr}")
    return found.stdout.strip()


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    newest, have = newest_on_the_index(), installed(sys.argv[1])
    if have != newest:
        sys.exit(
            f"scripts/newest_openai.py: {sys.argv[1]} has openai {have}, but the newest release on the "
            f"index is {newest}: CI must test the release users get"
        )
    print(f"openai {have}: the newest release on the index")


if __name__ == "__main__":
    main()
