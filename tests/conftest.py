"""Shared test settings.

Hypothesis runs derandomized under the ``ci`` profile (``HYPOTHESIS_PROFILE=ci``, set by ``.ci/run``)
so a CI run is repeatable; locally it explores new examples each run.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

#: The provider transcripts beside the repository (never copied into it). Tests skip without them.
TRANSCRIPTS = Path(__file__).resolve().parent.parent.parent / "shared" / "transcripts"
