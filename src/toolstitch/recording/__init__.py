"""Recording streams to JSONL, replaying them, and the timeline model with its reports.

* :mod:`._recorder`  writes raw chunks with their offsets (never breaking the live stream).
* :mod:`._replay`    reads recordings and raw ``.sse`` bodies back through the core.
* :mod:`._timeline`  the per-call timeline model and its text, JSON and HTML reports.
"""

from __future__ import annotations

from ._recorder import Recorder
from ._replay import Replay, replay

__all__ = ["Recorder", "Replay", "replay"]
