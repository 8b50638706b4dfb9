"""``core._recover``: tool calls written as text in ``content`` (opt-in, Q32)."""

from __future__ import annotations

import pytest

from toolstitch.core._recover import TextToolCallRecovery

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    }
]


@pytest.mark.parametrize(
    ("text", "calls", "rest"),
    [
        (
            'Sure.<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>',
            [("get_weather", {"city": "Oslo"})],
            "Sure.",
        ),
        (
            "<function=get_weather><parameter=city>Oslo</parameter><parameter=days>3</parameter></function>",
            [("get_weather", {"city": "Oslo", "days": 3})],
            "",
        ),
        (
            "get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value>",
            [],
            "get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value>",
        ),
        (
            "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>",
            [("get_weather", {"city": "Oslo"})],
            "",
        ),
        (
            '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
            [("get_weather", {"city": "Oslo"})],
            "",
        ),
        ('{"name": "get_weather", "arguments": {"city": "Oslo"}}', [("get_weather", {"city": "Oslo"})], ""),
        ('{"name": "not_offered", "arguments": {}}', [], '{"name": "not_offered", "arguments": {}}'),
        ('<think><tool_call>{"name": "get_weather", "arguments": {}}</tool_call></think>', [], None),
        ("<tool_call>{broken</tool_call>", [], "<tool_call>{broken</tool_call>"),
    ],
)
def test_formats(text: str, calls: list[tuple[str, dict[str, object]]], rest: str | None) -> None:
    got_rest, found = TextToolCallRecovery(TOOLS).find(text)
    assert [c for c, _ in found] == calls
    if rest is not None:
        assert got_rest == rest


def test_hostile_text_never_raises_and_is_linear() -> None:
    recovery = TextToolCallRecovery(TOOLS)
    deep = "<tool_call>" + '{"name": "get_weather", "arguments": ' + "[" * 5000 + "]" * 5000 + "}</tool_call>"
    assert recovery.find(deep)[1] == []
    many = "<think>x</think><tool_call>{}</tool_call>" * 20_000  # thinking spans and blocks interleaved
    assert recovery.find(many)[1] == []
    _, entries = recovery.entries(
        '<tool_call>{"name": "get_weather", "arguments": {"city": NaN}}</tool_call>', 0
    )
    # NaN is not JSON: the entry carries the value itself, which the reader refuses.
    assert type(entries[0][0]["function"]["arguments"]) is dict
