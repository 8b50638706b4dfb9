"""A hostile corpus over real HTTP: the real ``openai`` client decodes each body, the core reads it.

The SDK's own decoding is part of the test: JSON escapes become lone surrogates, ``NaN`` becomes a
float, a 900-deep value is built as nested dicts, a 5,000-digit index stays a string, and unknown
fields are kept on the SDK's objects. Whatever arrives, ``feed``, ``end`` and
``get_final_completion`` raise nothing of toolstitch's own, and a ``ready`` call holds exactly the
text that arrived, valid, allowed by the request.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import toolstitch as ts
from toolstitch.testing import LocalServer, StreamScript

HEAD = '"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"'


def tc(entry: str, finish: str = "null", extra: str = "") -> str:
    return (
        f'data: {{{HEAD}{extra}, "choices": [{{"index": 0, "delta": {{"tool_calls": [{entry}]}}, '
        f'"finish_reason": {finish}}}]}}\n\n'
    )


DONE = f'data: {{{HEAD}, "choices": [{{"index": 0, "delta": {{}}, "finish_reason": "tool_calls"}}]}}\n\n'
OPEN = '{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}'
DEEP = '{"k": ' * 900 + "1" + "}" * 900

CORPUS: dict[str, list[str]] = {
    "lone surrogate": [
        tc(OPEN),
        tc('{"index": 0, "function": {"arguments": "{\\"a\\": \\"x\\udc80\\"}"}}'),
        DONE,
    ],
    "split pair": [
        tc(OPEN),
        tc('{"index": 0, "function": {"arguments": "{\\"a\\": \\"\\ud83d"}}'),
        tc('{"index": 0, "function": {"arguments": "\\ude00\\"}"}}'),
        DONE,
    ],
    "surrogate name, no id": [tc('{"index": 0, "function": {"name": "f\\udc80", "arguments": "{}"}}'), DONE],
    "superscript index": [
        tc('{"index": "\\u00b2", "id": "a", "function": {"name": "f", "arguments": "{}"}}'),
        DONE,
    ],
    "circled index": [
        tc('{"index": "\\u2460", "id": "a", "function": {"name": "f", "arguments": "{}"}}'),
        DONE,
    ],
    "5000-digit index": [
        tc('{"index": "' + "7" * 5000 + '", "id": "a", "function": {"name": "f", "arguments": "{}"}}'),
        DONE,
    ],
    "bool index": [tc('{"index": true, "id": "a", "function": {"name": "f", "arguments": "{}"}}'), DONE],
    "NaN in object arguments": [
        tc('{"index": 0, "id": "a", "function": {"name": "f", "arguments": {"x": NaN}}}'),
        DONE,
    ],
    "900 deep field": [
        tc(OPEN, extra=f', "provider": {DEEP}'),
        tc('{"index": 0, "extra_content": ' + DEEP + ', "function": {"arguments": "{}"}}'),
        DONE,
    ],
    "900 deep arguments object": [
        tc('{"index": 0, "id": "a", "function": {"name": "f", "arguments": ' + DEEP + "}}"),
        DONE,
    ],
    "logprobs of the wrong type": [
        tc(OPEN),
        tc('{"index": 0, "function": {"arguments": "{}"}}'),
        f'data: {{{HEAD}, "choices": [{{"index": 0, "delta": {{}}, "logprobs": {{"content": 5}}, '
        '"finish_reason": "tool_calls"}]}\n\n',
    ],
    "mistral further values": [
        tc(
            '{"index": 0, "id": "abc123xyz", "function": {"name": "f", '
            '"arguments": "{\\"country\\": \\"\\"}"}}'
        ),
        tc('{"index": 0, "function": {"name": "", "arguments": "{\\"country\\": \\"Italy\\"}"}}'),
        tc('{"index": 0, "function": {"name": "", "arguments": "{}"}}'),
        DONE,
    ],
}
NEVER_READY = {
    "lone surrogate",
    "surrogate name, no id",
    "NaN in object arguments",
    "900 deep arguments object",
    "mistral further values",
}


def _check(acc: ts.Accumulator) -> None:
    for call in acc.calls():
        if call.ready:
            assert call.name
            call.name.encode("utf-8")
            call.arguments.encode("utf-8")
            assert json.loads(call.arguments) == call.parsed
    assert "internal_error" not in {a.code for a in acc.anomalies}
    try:
        completion = acc.get_final_completion()
    except ts.errors.IncompleteStreamError as exc:
        completion = exc.partial
    completion.model_dump(warnings=False)


@pytest.mark.parametrize("name", sorted(CORPUS))
@pytest.mark.parametrize("parallel", [None, False])
def test_the_hostile_corpus_over_real_http(server: LocalServer, name: str, parallel: Any) -> None:
    server.enqueue(StreamScript(CORPUS[name], fragment=7))
    stream = server.client().chat.completions.create(model="m", messages=[], stream=True)
    acc = ts.Accumulator(
        tools=[{"type": "function", "function": {"name": "f"}}], parallel_tool_calls=parallel
    )
    for chunk in stream:
        acc.feed(chunk)
    acc.end()
    _check(acc)
    if name in NEVER_READY:
        assert not any(c.ready for c in acc.calls()), acc.calls()
    if name == "split pair":
        assert acc.tool_calls[0].ready and acc.tool_calls[0].parsed == {"a": "😀"}


def test_a_forced_tool_choice_over_real_http(server: LocalServer) -> None:
    server.enqueue(
        StreamScript(
            [
                tc(
                    '{"index": 0, "id": "a", "type": "function", '
                    '"function": {"name": "g", "arguments": "{}"}}'
                ),
                DONE,
            ]
        )
    )
    tools = [{"type": "function", "function": {"name": n}} for n in ("f", "g")]
    forced = {"type": "function", "function": {"name": "f"}}
    stream = server.client().chat.completions.create(
        model="m",
        messages=[],
        stream=True,
        tools=tools,
        tool_choice=forced,  # type: ignore[arg-type]
    )
    acc = ts.Accumulator(tools=tools, tool_choice=server.requests[-1]["tool_choice"])
    for chunk in stream:
        acc.feed(chunk)
    acc.end()
    (call,) = acc.tool_calls
    assert isinstance(call.error, ts.errors.ContractViolation)
