"""Recording streams to JSONL, replaying them, and the timeline model with its reports.

* :mod:`._recorder`     writes raw chunks with their offsets (never breaking the live stream).
* :mod:`._secrets`      what a recording never holds: credentials by name, by shape, or known.
* :mod:`._redact`       optional masking of argument and content text, shapes kept.
* :mod:`._replay`       reads recordings and raw ``.sse`` bodies back through the core.
* :mod:`._timeline`     the per-call timeline model, built while replaying.
* :mod:`._report_data`  the replay report as plain JSON data (``toolstitch replay --json``).
* :mod:`._report_text`  the report for an 80-column terminal.
* :mod:`._report_html`  the report as one self-contained HTML page.
* :mod:`._plain`        plain, bounded JSON data from requests, chunks and completions.
* :mod:`._contract`     the request's contract, read one way for live streams and replays.

The command line over these (``toolstitch replay``) lives in :mod:`toolstitch.cli`.
"""

from __future__ import annotations

from ._recorder import Recorder
from ._replay import Replay, replay

__all__ = ["Recorder", "Replay", "replay"]
