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

The command line over these (``toolstitch replay``) lives in :mod:`toolstitch.cli`. ``Recorder``,
``Replay`` and ``replay`` are for users (``replay`` also at the top level); the other names are what
the client and the command line share with this package (the contract readers, the recording path
and masking, the reports and their text helpers), used from here and never from the modules inside.
"""

from __future__ import annotations

from ._contract import Contract, given_contract, read_contract
from ._plain import plain
from ._recorder import Recorder, Redact, recording_path, redact_parts
from ._replay import Replay, replay
from ._report_data import report_data
from ._report_html import report_html
from ._report_text import clip, render_latency, render_timeline, report_text, wrap_text
from ._responses_contract import given_responses_contract, read_responses_contract, responses_accumulator

__all__ = [  # the names users meet (toolstitch or a public module hands them out)
    "replay",
]
__all__ += [  # for the layers above only
    "Contract",
    "Recorder",
    "Redact",
    "Replay",
    "clip",
    "given_contract",
    "given_responses_contract",
    "plain",
    "read_contract",
    "read_responses_contract",
    "recording_path",
    "redact_parts",
    "render_latency",
    "render_timeline",
    "report_data",
    "report_html",
    "report_text",
    "responses_accumulator",
    "wrap_text",
]
