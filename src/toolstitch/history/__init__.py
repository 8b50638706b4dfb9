"""History turns the next request accepts: builders, an offline validator, and explicit repair.

After a tool call, the next request must carry the assistant message with its ``tool_calls`` and
one ``tool`` message per call. A history that breaks the server's rules earns a 400 on every later
request, because the broken turn stays in the saved history. The rules enforced here (ids from
``docs/history-rules.md``; the table with their dialects is in :mod:`._dialects`):

* H01-H04  a ``tool`` message answers a call declared by the assistant message directly before its
  run of tool messages; every declared call is answered before the next non-tool message.
* H05      results come in declared order (an error where templates pair results by position).
* H06/H07  ``tool_call_id`` present and unique.
* H08-H13  assistant content, non-empty ``tool_calls``, string ``arguments``, ``type``/``id``/
  ``function`` present, id length, function-name pattern.
* H18-H20  tool content is text; legacy ``function`` messages; message ``name`` pattern.
* dialect rules: Azure's ``content`` key (H23), Anthropic's id pattern and empty content (H29, H32),
  Mistral's 9-character ids, role order and strict schema (H35-H39, H70), Gemini's names and
  thought signatures (H45-H47), DeepSeek's ``reasoning_content`` (H62), local servers' JSON
  arguments and non-null content (H73, H82, H84). Request-level rules (H14-H17, H30, H31, H34) are
  checked by :func:`validate_request`.
* toolstitch's own: H00 input that is no chat message list; H90 a message nested too deep to send;
  and, in :func:`validate_request`, the request as a contract: H91 ``parameters`` that are not JSON
  Schema, H92 a tool without ``"type": "function"``, H93 a ``tool_choice`` naming no offered tool,
  H30 two tools with one name.

Four promises hold everywhere in this package: the ``arguments`` text is never re-serialised or
changed; the input is never mutated; every repair is reported; and hostile input (``None``, a
message nested 900 levels deep, 20,000 tool calls) costs linear time and gives problems, not
exceptions.

What lives where, so that each concern can be read (and changed) on its own:

* :mod:`._build`     builders: ``assistant_message``, ``tool_message``, ``tool_messages``,
  ``result_message`` (an executed result, read by its fields), ``call_error_text``.
* :mod:`._refusals`  what the model reads about a refused call, per kind of refusal: the words of
  ``call_error_text`` and of ``ts.run``'s gate (``tools/_gate.py``), written once.
* :mod:`._validate`  the validator: ``validate_history``, ``validate_request``,
  ``ensure_valid_history``, ``HistoryProblem`` and the ``_Checker`` that runs
  the rules.
* :mod:`._repair`    repair: ``repair_history``; :mod:`._repair_input` its Responses twin
  (``repair_history(input, api="responses")``); :mod:`._repair_report` what both report
  (``RepairReport``, ``RepairChange``, ``NOT_EXECUTED``). Repair depends on the validators (it
  re-validates what it returns), never the other way round.
* :mod:`._dialects`  the rule table and per-provider dialects.
* :mod:`._responses` the Responses API: ``response_items`` (the output items to send back) and
  ``function_call_output(s)`` (the answers, paired by ``call_id``); :mod:`._validate_input` its
  validator, ``validate_input`` (rules R00-R09 of its ``input``) and the ``_InputChecker`` that
  runs them, the twin of :mod:`._validate`.
* :mod:`._common`    what more than one of them needs: reading input as the SDK sends it
  (``to_plain``, which the run loop reads its caller's history with too), a message's
  ``tool_calls``, and the shape of a tool message.

Import from this package (``toolstitch.history``), not from the modules inside it. Its errors
(``HistoryError``, ``CallNotReadyError``) live in :mod:`toolstitch.errors` with every other.
"""

from __future__ import annotations

from ._build import assistant_message, call_error_text, result_message, tool_message, tool_messages
from ._common import to_plain
from ._dialects import DIALECT_NAMES, Dialect, get_dialect
from ._refusals import call_refusal_text, invalid_arguments_text, unknown_tool_text, wrong_kind_text
from ._repair import repair_history
from ._repair_report import NOT_EXECUTED, RepairChange, RepairReport
from ._responses import function_call_output, function_call_outputs, response_items
from ._validate import (
    HistoryProblem,
    ensure_valid_history,
    schema_error,
    validate_history,
    validate_request,
)
from ._validate_input import validate_input

__all__ = [  # the names users meet (toolstitch or a public module hands them out)
    "assistant_message",
    "call_error_text",
    "ensure_valid_history",
    "function_call_output",
    "function_call_outputs",
    "repair_history",
    "response_items",
    "tool_message",
    "tool_messages",
    "validate_history",
    "validate_input",
    "validate_request",
]
__all__ += [  # for the layers above only
    "DIALECT_NAMES",
    "NOT_EXECUTED",
    "Dialect",
    "HistoryProblem",
    "RepairChange",
    "RepairReport",
    "call_refusal_text",
    "get_dialect",
    "invalid_arguments_text",
    "result_message",
    "schema_error",
    "to_plain",
    "unknown_tool_text",
    "wrong_kind_text",
]
