"""One focused test per provider quirk toolstitch handles (ids from ``docs/quirks.md``).

Each test feeds the chunks a provider sends (copied from the catalogue's examples where it gives one)
and checks the calls a user gets *and* the anomaly code that tells them what their provider did.
Every stream runs twice: as plain dicts (replays, other transports) and as the SDK's own chunk
objects, built the way ``openai.Stream`` builds them (``construct_type``, no validation); both must
agree.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

import toolstitch as ts
from toolstitch.testing import chunk

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


def tc(index: Any = ..., id: Any = ..., name: Any = ..., args: Any = ..., **extra: Any) -> dict[str, Any]:
    """One ``delta.tool_calls`` entry with exactly the keys given (``...`` = key absent)."""
    entry: dict[str, Any] = {}
    if index is not ...:
        entry["index"] = index
    if id is not ...:
        entry["id"] = id
    function: dict[str, Any] = {}
    if name is not ...:
        function["name"] = name
    if args is not ...:
        function["arguments"] = args
    if function:
        entry["function"] = function
    entry.update(extra)
    return entry


def calls(*entries: dict[str, Any], finish: str | None = None, **delta: Any) -> dict[str, Any]:
    return chunk(delta={"tool_calls": list(entries), **delta}, finish_reason=finish)


def done(reason: str = "tool_calls") -> dict[str, Any]:
    return chunk(delta={}, finish_reason=reason)


def _summary(acc: ts.Accumulator) -> Any:
    return (
        [(c.choice, c.index, c.id, c.name, c.status, c.arguments) for c in acc.calls()],
        [(a.code, a.choice, a.call_index) for a in acc.anomalies],
        acc.finish_reasons,
    )


def run(chunks: list[Any], *, sdk: bool = True, **options: Any) -> ts.Accumulator:
    """Feed dicts to one accumulator and SDK objects to another; they must agree. Returns the first."""
    plain = ts.Accumulator(**options)
    for c in chunks:
        plain.feed(json.loads(json.dumps(c)))
    plain.end()
    if sdk:
        objects = ts.Accumulator(**options)
        for c in chunks:
            objects.feed(construct_type(type_=ChatCompletionChunk, value=json.loads(json.dumps(c))))
        objects.end()
        assert _summary(plain) == _summary(objects)
    return plain


def codes(obj: ts.Accumulator | ts.ToolCall) -> set[str]:
    return {a.code for a in obj.anomalies}


def ready(acc: ts.Accumulator, choice: int = 0) -> list[tuple[str | None, Any]]:
    """(name, parsed) of the calls of ``choice``, all of which must be ready."""
    out = []
    for call in acc.calls(choice):
        assert call.status == "ready", (call, call.error)
        out.append((call.name, call.parsed))
    return out


# --------------------------------------------------------------------------- index (Q01-Q06, Q37)


def test_q01_missing_index_gemini_whole_call_keeps_extra_content() -> None:
    # OpenMAIC#1556, measured on Gemini's OpenAI-compatible endpoint.
    gemini = {
        "choices": [
            {
                "delta": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "extra_content": {"google": {"thought_signature": "sig=="}},
                            "function": {
                                "arguments": '{"offset":1,"limit":100,"path":"/app/skills/SKILL.md"}',
                                "name": "read",
                            },
                            "id": "call_297140",
                            "type": "function",
                        }
                    ],
                },
                "index": 0,
            }
        ],
        "model": "gemini-3.8-flash",
        "object": "chat.completion.chunk",
    }
    acc = run([gemini, done()])
    assert ready(acc) == [("read", {"offset": 1, "limit": 100, "path": "/app/skills/SKILL.md"})]
    call = acc.tool_calls[0]
    assert call.id == "call_297140"
    assert "missing_index" in codes(call)
    sent = acc.get_final_completion().choices[0].message.tool_calls[0]  # type: ignore[index]
    assert sent.model_extra == {"extra_content": {"google": {"thought_signature": "sig=="}}}


def test_q01_missing_index_args_without_id_continue_the_latest_call() -> None:
    # chatanywhere/GPT_API_free#254: header without index, then argument pieces without index.
    header = tc(id="call_UnVtKL0WOa8iFRgWgrvdf4JY", name="squareRoot", args="", type="function")
    acc = run([calls(header), calls(tc(args='{"x"')), calls(tc(args=": 16}")), done()])
    assert ready(acc) == [("squareRoot", {"x": 16})]
    assert "missing_index" in codes(acc.tool_calls[0])


def test_q01_missing_index_parallel_calls_opened_by_new_ids() -> None:
    acc = run(
        [
            calls(tc(id="a", name="f", args='{"n": 1}', type="function")),
            calls(tc(id="b", name="f", args='{"n": 2}', type="function")),
            done(),
        ]
    )
    assert ready(acc) == [("f", {"n": 1}), ("f", {"n": 2})]
    assert [c.id for c in acc.tool_calls] == ["a", "b"]


def test_q01_early_sglang_index_none_id_repeated_name_empty() -> None:
    # sglang PR #4067: index=None, id='0' on every delta, name '' on continuations.
    acc = run(
        [
            calls(tc(index=None, id="0", name="get_current_weather", args="", type="function")),
            calls(tc(index=None, id="0", name="", args='{"city": "', type="function")),
            calls(tc(index=None, id="0", name="", args='Paris"}', type="function")),
            done(),
        ]
    )
    assert ready(acc) == [("get_current_weather", {"city": "Paris"})]
    call = acc.tool_calls[0]
    assert call.id == "0"
    assert {"missing_index", "id_repeated", "empty_string_field"} <= codes(call)


def test_q02_a_further_value_without_id_or_name_stays_one_refused_call() -> None:
    # dyedd/lens#49 (gemini-3.1-pro via a channel), and hosted Mistral (issue 10): at index 0, after
    # the call's value is complete, another complete value arrives with no id and name "". Nothing
    # says it is another call, and splitting it off left the first value ready although the provider
    # went on to contradict it: it stays one call, holding both values, and is refused.
    first, second = '{"path":"","pattern":"**/*"}', '{"path":"content/wiki","pattern":""}'
    acc = run(
        [
            calls(tc(index=0, id="toolu_530f", name="glob", args="", type="function")),
            calls(tc(index=0, name="", args=first)),
            calls(tc(index=0, name="", args=second)),
            done(),
        ]
    )
    (call,) = acc.tool_calls
    assert (call.name, call.status, call.arguments) == ("glob", "invalid", first + second)
    assert isinstance(call.error, ts.errors.MalformedArguments)
    assert "further JSON value" in call.error.message
    assert "further_json_value" in codes(call)


def test_q02_index_reused_with_new_ids_and_duplicate_closing_fragments() -> None:
    # LiteLLM PR #21498 "Before" (ChatGPT backend): every call at index 0, each followed by a dup.
    acc = run(
        [
            calls(tc(index=0, id="call_aaa", name="get_country", args='{"name":"Japan"}')),
            calls(tc(index=0, id="call_aaa", name="get_country", args="")),
            calls(tc(index=0, id="call_bbb", name="get_currency", args='{"code":"USD"}')),
            calls(tc(index=0, id="call_bbb", name="get_currency", args="")),
            done(),
        ]
    )
    assert ready(acc) == [("get_country", {"name": "Japan"}), ("get_currency", {"code": "USD"})]
    assert [c.id for c in acc.tool_calls] == ["call_aaa", "call_bbb"]
    assert "index_reused" in codes(acc.tool_calls[1])
    assert "id_repeated" in codes(acc.tool_calls[0])


def test_q02_interleaved_calls_sharing_an_index_are_told_apart_by_id() -> None:
    acc = run(
        [
            calls(tc(index=0, id="a", name="f", args='{"x":')),
            calls(tc(index=0, id="b", name="g", args='{"y":')),
            calls(tc(index=0, id="a", args="1}")),
            calls(tc(index=0, id="b", args="2}")),
            done(),
        ]
    )
    assert ready(acc) == [("f", {"x": 1}), ("g", {"y": 2})]


def test_q02_index_reused_with_a_new_name_and_no_id() -> None:
    acc = run(
        [
            calls(tc(index=0, name="f", args='{"x": 1}')),
            calls(tc(index=0, name="g", args="")),
            calls(tc(index=0, args='{"y": 2}')),
            done(),
        ]
    )
    assert ready(acc) == [("f", {"x": 1}), ("g", {"y": 2})]
    assert "index_reused" in codes(acc.tool_calls[1])


def test_q03_index_starting_at_1_anthropic_via_proxy() -> None:
    # router-for-me/CLIProxyAPI#5229.
    acc = run(
        [
            calls(
                tc(
                    index=1,
                    id="toolu_01PfK17cHPYe3FT7yMeoCCJp",
                    type="function",
                    name="get_weather",
                    args='{"city": "Paris"}',
                )
            ),
            calls(
                tc(
                    index=2,
                    id="toolu_01VHozdG7zqmG24dkFveqsLq",
                    type="function",
                    name="get_time",
                    args='{"city": "Tokyo"}',
                )
            ),
            done(),
        ]
    )
    assert ready(acc) == [("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tokyo"})]
    assert [c.index for c in acc.tool_calls] == [1, 2]
    assert "index_not_from_zero" in codes(acc.tool_calls[0])


def test_q03_litellm_bedrock_index_1_with_an_empty_second_fragment() -> None:
    # BerriAI/litellm#11407.
    first = tc(
        id="tooluse_BawIVFHuQ2uaPLDBdWlblA",
        name="jira_get_worklog",
        args="",
        type="function",
        index=1,
    )
    acc = run(
        [
            calls(first, content="", role="assistant"),
            calls(tc(args="", type="function", index=1), content="", role="assistant"),
            calls(tc(args='{"issue": "X-1"}', index=1)),
            done(),
        ]
    )
    assert ready(acc) == [("jira_get_worklog", {"issue": "X-1"})]
    assert {"index_not_from_zero", "type_repeated"} <= codes(acc.tool_calls[0])


def test_q03_index_gap() -> None:
    acc = run(
        [
            calls(tc(index=0, id="a", name="f", args="{}")),
            calls(tc(index=2, id="b", name="g", args="{}")),
            done(),
        ]
    )
    assert ready(acc) == [("f", {}), ("g", {})]
    assert "index_gap" in codes(acc.tool_calls[1])


def test_q04_two_entries_with_the_same_index_in_one_chunk() -> None:
    # openai/openai-python#3201.
    first = {
        "delta": {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "functions.list_files:0",
                    "function": {"name": "list_files"},
                    "type": "function",
                },
                {"index": 0, "function": {"arguments": ' {"'}},
            ]
        },
        "index": 0,
    }
    acc = run([chunk(choices=[first]), calls(tc(index=0, args='path": "."}')), done()])
    assert ready(acc) == [("list_files", {"path": "."})]
    assert acc.tool_calls[0].id == "functions.list_files:0"
    assert codes(acc) == set()


def test_q05_continuation_at_an_incremented_index_without_id_or_name() -> None:
    # dirac-run/dirac PR #215 (Nebius, Cerebras; claimed).
    acc = run(
        [
            calls(tc(index=0, id="c1", name="get_weather", args='{"ci')),
            calls(tc(index=1, args='ty": "Oslo"')),
            calls(tc(index=2, args="}")),
            done(),
        ]
    )
    assert ready(acc) == [("get_weather", {"city": "Oslo"})]
    assert "index_changed" in codes(acc.tool_calls[0])


def test_q06_index_only_on_the_first_delta_continuations_carry_the_id() -> None:
    # diegosouzapw/OmniRoute PR #6905 (unnamed proxies).
    acc = run(
        [
            calls(tc(index=0, id="c1", name="f", args="")),
            calls(tc(index=1, id="c2", name="g", args="")),
            calls(tc(id="c1", args='{"a": 1}')),
            calls(tc(id="c2", args='{"b": 2}')),
            done(),
        ]
    )
    assert ready(acc) == [("f", {"a": 1}), ("g", {"b": 2})]
    assert "missing_index" in codes(acc.tool_calls[0])


@pytest.mark.parametrize("index", [-1, "0", 0.0])
def test_q37_non_integer_or_negative_index(index: Any) -> None:
    # openai-go PR #822: Bedrock sends -1 for a single call; "0" is a hypothesis in langchain#34654.
    # (The SDK itself turns "0" and 0.0 into 0 when it builds its objects: only dicts see them.)
    entry = tc(index=index, id="c1", name="f", args='{"a": 1}', type="function")
    acc = run([calls(entry), done()], sdk=index == -1)
    assert ready(acc) == [("f", {"a": 1})]
    assert "non_integer_index" in codes(acc.tool_calls[0])


# --------------------------------------------------------------------------- identity (Q07-Q15, Q39)


def test_q07_id_type_repeated_on_every_chunk_fireworks() -> None:
    # SillyTavern PR #5948 (Fireworks glm-5p2): id, type and a stray tool-level "name": null repeat.
    def piece(args: str) -> dict[str, Any]:
        return {
            "id": "chatcmpl-b7de",
            "object": "chat.completion.chunk",
            "created": 1783459695,
            "model": "accounts/fireworks/models/glm-5p2",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "chatcmpl-tool-aa62",
                                "type": "function",
                                "function": {"name": "debug_tool", "arguments": args},
                                "name": None,
                            }
                        ]
                    },
                    "finish_reason": None,
                    "raw_output": None,
                }
            ],
            "usage": None,
        }

    acc = run([piece(""), piece('{"level":'), piece(' "high"}'), done()])
    assert ready(acc) == [("debug_tool", {"level": "high"})]
    call = acc.tool_calls[0]
    assert call.id == "chatcmpl-tool-aa62"  # not "chatcmpl-tool-aa62chatcmpl-tool-aa62..."
    assert {"id_repeated", "name_repeated", "type_repeated"} <= codes(call)
    sent = acc.get_final_completion().choices[0].message.tool_calls[0]  # type: ignore[index]
    assert "name" not in (sent.model_extra or {})  # a null carries nothing and is not replayed


def test_q08_name_repeated_on_every_chunk_minimax() -> None:
    # hermes-agent#8259 (MiniMax via NVIDIA NIM): "read_fileread_file" in naive mergers.
    acc = run(
        [
            calls(tc(index=0, id="c", name="read_file", args='{"path":')),
            calls(tc(index=0, name="read_file", args=' "a.txt"}')),
            done(),
        ]
    )
    assert ready(acc) == [("read_file", {"path": "a.txt"})]
    assert "name_repeated" in codes(acc.tool_calls[0])


def test_q08_name_in_pieces_before_the_arguments_is_joined() -> None:
    # continuedev/continue PR #5849: Gemini "can stream function name in chunks".
    acc = run(
        [
            calls(tc(index=0, id="c", name="edit_ex", args="")),
            calls(tc(index=0, name="isting_file", args="")),
            calls(tc(index=0, args='{"path": "a"}')),
            done(),
        ]
    )
    assert ready(acc) == [("edit_existing_file", {"path": "a"})]
    assert "name_fragmented" in codes(acc.tool_calls[0])


def test_q08_a_different_name_after_the_arguments_started_is_a_conflict() -> None:
    acc = run(
        [
            calls(tc(index=0, id="c", name="alpha", args='{"a":')),
            calls(tc(index=0, name="beta", args=" 1}")),
            done(),
        ]
    )
    assert ready(acc) == [("alpha", {"a": 1})]
    assert "name_conflict" in codes(acc.tool_calls[0])


def test_q09_name_empty_string_on_every_argument_chunk_lm_studio() -> None:
    # lmstudio-ai/lmstudio-bug-tracker#649.
    def lm(args: str, name: str = "") -> dict[str, Any]:
        entry = {"index": 0, "type": "function", "function": {"name": name, "arguments": args}}
        return {
            "id": "chatcmpl-8cybkqa7743exgha66o2hg",
            "object": "chat.completion.chunk",
            "created": 1746707722,
            "model": "qwen3-30b-a3b-128k",
            "system_fingerprint": "qwen3-30b-a3b-128k",
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [entry]},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }

    head = lm("", name="count_words")
    head["choices"][0]["delta"]["tool_calls"][0]["id"] = "217"
    acc = run([head, lm('{"'), lm("count"), lm('": 3}'), done()])
    assert ready(acc) == [("count_words", {"count": 3})]
    assert {"empty_string_field", "type_repeated"} <= codes(acc.tool_calls[0])


def test_q09_empty_opening_name_then_the_real_name_vmlx() -> None:
    # jjang-ai/vmlx PR #244: opening delta {"name": "", "arguments": ""}, the real name later.
    acc = run(
        [
            calls(tc(index=0, id="c", name="", args="", type="function")),
            calls(tc(index=0, name="search", args='{"q": "x"}')),
            done(),
        ]
    )
    assert ready(acc) == [("search", {"q": "x"})]
    assert "empty_string_field" in codes(acc.tool_calls[0])


def test_q10_name_null_string_uppercase_type_empty_id_behind_litellm() -> None:
    # BerriAI/litellm#12513.
    first = {
        "index": 0,
        "id": "chatcmpl-tool-947d3bbb3869454d9621be17ce825130",
        "type": "FUNCTION",
        "function": {"name": "list_directory", "arguments": '{"path": ".'},
    }
    second = {"index": 0, "id": "", "type": "FUNCTION", "function": {"name": "null", "arguments": '"}'}}
    acc = run([calls(first), calls(second), done()])
    assert ready(acc) == [("list_directory", {"path": "."})]
    call = acc.tool_calls[0]
    assert call.id == "chatcmpl-tool-947d3bbb3869454d9621be17ce825130"
    assert {"type_unexpected", "null_string_field", "empty_string_field", "type_repeated"} <= codes(call)
    sent = acc.get_final_completion().choices[0].message.tool_calls[0]  # type: ignore[index]
    assert sent.type == "function"


def test_q11_name_arrives_after_the_first_arguments() -> None:
    # vercel/ai#14722.
    acc = run(
        [
            calls(tc(index=0, id="c", args='{"q": ', type="function")),
            calls(tc(index=0, name="search", args='"x"}')),
            done(),
        ]
    )
    assert ready(acc) == [("search", {"q": "x"})]


def test_q12_id_missing_everywhere_is_synthesized_stable_and_unique() -> None:
    stream = [
        calls(tc(index=0, name="f", args='{"a": 1}', type="function")),
        calls(tc(index=1, name="f", args='{"a": 2}', type="function")),
        done(),
    ]
    acc = run(stream)
    ids = [c.id for c in acc.tool_calls]
    assert all(isinstance(i, str) and i for i in ids)
    assert len(set(ids)) == 2
    assert all("id_synthesized" in codes(c) for c in acc.tool_calls)
    message = acc.get_final_completion().choices[0].message
    assert [c.id for c in message.tool_calls or []] == ids  # the same ids everywhere
    assert [c.id for c in run(stream).tool_calls] == ids  # and on a replay of the same stream
    later_turn = [{**c, "created": c["created"] + 60} for c in stream]
    assert not set(ids) & {c.id for c in run(later_turn).tool_calls}  # not across turns


def test_q13_integer_id() -> None:
    # anomalyco/opencode#25786 (GLM-5.1 via NVIDIA), Poolside.
    acc = run([calls(tc(index=0, id=123, name="f", args="{}", type="function")), done()])
    assert acc.tool_calls[0].id == "123"
    assert "id_not_string" in codes(acc.tool_calls[0])


def test_q14_empty_id_on_continuations_vllm() -> None:
    # InternLM/lmdeploy#3412 (vLLM): id='' and type='function' on every continuation.
    acc = run(
        [
            calls(tc(index=0, id="chatcmpl-tool-1", name="f", args="", type="function")),
            calls(tc(index=0, id="", args='{"x": 1}', type="function")),
            done(),
        ]
    )
    assert ready(acc) == [("f", {"x": 1})]
    assert acc.tool_calls[0].id == "chatcmpl-tool-1"
    assert "empty_string_field" in codes(acc.tool_calls[0])


def test_q15_id_changes_mid_call_the_later_id_is_kept() -> None:
    # poolsideai/pool#9: "Poolside's canonical ID appears in the second chunk onward".
    acc = run(
        [
            calls(tc(index=0, id="tmp-1", name="f", args='{"a": ', type="function")),
            calls(tc(index=0, id="pool_abc", args="1}")),
            done(),
        ]
    )
    assert ready(acc) == [("f", {"a": 1})]
    assert acc.tool_calls[0].id == "pool_abc"
    assert "id_changed" in codes(acc.tool_calls[0])


def test_q39_the_same_id_for_two_calls_tgi() -> None:
    # huggingface/text-generation-inference PR #2954: id "0" for every call, on every fragment.
    acc = run(
        [
            calls(tc(index=0, id="0", name="f", args='{"a"', type="function")),
            calls(tc(index=1, id="0", name="g", args='{"b"', type="function")),
            calls(tc(index=0, id="0", args=": 1}", type="function")),
            calls(tc(index=1, id="0", args=": 2}", type="function")),
            done(),
        ]
    )
    assert ready(acc) == [("f", {"a": 1}), ("g", {"b": 2})]
    ids = [c.id for c in acc.tool_calls]
    assert ids[0] == "0" and ids[1] and ids[1] != "0"
    assert "call_id_reused" in codes(acc.tool_calls[1])


# --------------------------------------------------------------------------- arguments (Q16-Q20)


def test_q16_whole_call_in_one_chunk_with_finish_reason_ollama() -> None:
    # ollama PR #5915: no index, content "", finish_reason in the same chunk.
    one = {
        "id": "chatcmpl-20",
        "object": "chat.completion.chunk",
        "created": 1721830177,
        "model": "llama3-groq-tool-use:8b",
        "system_fingerprint": "fp_ollama",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "call_ejieksiz",
                            "type": "function",
                            "function": {"name": "function_1", "arguments": '{"a":10,"b":11}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
    acc = run([one])
    assert ready(acc) == [("function_1", {"a": 10, "b": 11})]
    assert acc.get_final_completion().choices[0].message.content is None


def test_q17_cumulative_identical_resends() -> None:
    # hermes-agent PR #5384 (codex-lb): complete name and arguments in every delta.
    piece = tc(index=0, name="apply_learnings", args='{"task":"debug"}')
    acc = run([calls({**piece, "id": "c"}), calls(piece), calls(piece), done()])
    assert ready(acc) == [("apply_learnings", {"task": "debug"})]
    assert "arguments_cumulative" in codes(acc.tool_calls[0])


def test_q17_cumulative_growing_resends_cut_inside_strings() -> None:
    # hermes-agent PR #35718 (DeepSeek / Qianfan): each fragment repeats the text so far.
    full = '{"city": "Paris", "days": 3}'
    cuts = [5, 12, 15, 20, 26, len(full)]
    stream = [calls(tc(index=0, id="c", name="get_weather", args=""))]
    stream += [calls(tc(index=0, args=full[:n])) for n in cuts]
    acc = run([*stream, done()], tools=[WEATHER_TOOL])
    assert ready(acc) == [("get_weather", {"city": "Paris", "days": 3})]
    assert acc.tool_calls[0].arguments == full
    assert "arguments_cumulative" in codes(acc.tool_calls[0])


def test_q17_a_standard_stream_that_looks_like_a_resend_is_not_one() -> None:
    # The key "{" cut after '{"': the second piece starts with the first, and is still a piece.
    acc = run([calls(tc(index=0, id="c", name="f", args='{"')), calls(tc(index=0, args='{": null}')), done()])
    assert ready(acc) == [("f", {"{": None})]
    assert "arguments_cumulative" not in codes(acc)


@pytest.mark.parametrize("args", [{"transaction_id": "T1001"}, {}])
def test_q18_arguments_as_a_json_object_tgi(args: dict[str, Any]) -> None:
    # huggingface/text-generation-inference#2136.
    acc = run([calls(tc(index=0, id="c", name="pay", args=args, type="function")), done()])
    assert ready(acc) == [("pay", args)]
    assert json.loads(acc.tool_calls[0].arguments) == args
    assert "arguments_object" in codes(acc.tool_calls[0])


def test_q19_null_or_missing_arguments_and_null_function_add_nothing() -> None:
    acc = run(
        [
            calls(tc(index=0, id="c", name="vector_store", type="function")),  # vLLM: no arguments key
            calls(tc(index=0, args=None)),  # vLLM 0.6.3: arguments None
            calls({"index": 0, "function": None}),  # LiteLLM: function None
            calls(tc(index=0, args='{"q": 1}')),
            done(),
        ]
    )
    assert ready(acc) == [("vector_store", {"q": 1})]


def test_q19_empty_arguments_for_a_parameterless_tool() -> None:
    stream = [calls(tc(index=0, id="c", name="now", args="", type="function")), done()]
    strict = run(stream)
    assert strict.tool_calls[0].status == "invalid"
    assert isinstance(strict.tool_calls[0].error, ts.errors.EmptyArguments)
    lenient = run(stream, empty_arguments="object")
    assert ready(lenient) == [("now", {})]
    assert "empty_arguments_as_object" in codes(lenient.tool_calls[0])


def test_q20_truncated_arguments_are_refused_not_repaired() -> None:
    # vllm-project/vllm#32152: the hermes parser drops the final "}".
    acc = run([calls(tc(index=0, id="c", name="get", args='{"id": 42', type="function")), done()])
    call = acc.tool_calls[0]
    assert call.status == "invalid"
    assert isinstance(call.error, ts.errors.MalformedArguments)
    assert call.error.raw == '{"id": 42'


# --------------------------------------------------------------------------- finish_reason (Q21, Q22, Q44)


def test_q21_finish_reason_stop_after_tool_calls_openai() -> None:
    # ollama PR #7963: gpt-4o-2024-08-06 streamed finish_reason='stop' for a tool call.
    acc = run([calls(tc(index=0, id="c", name="f", args="{}", type="function")), done("stop")])
    assert ready(acc) == [("f", {})]
    assert "finish_reason_stop_with_tool_calls" in codes(acc)
    assert acc.finish_reasons == {0: ["stop"]}


def test_q22_finish_reason_empty_string_sglang_is_not_a_finish() -> None:
    # sgl-project/sglang#3387: "finish_reason":"" on every content chunk.
    sglang = {
        "id": "pvTMmBwCgREi3g-CaZkn1",
        "object": "chat.completion.chunk",
        "created": 1738962833,
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "choices": [
            {
                "index": 0,
                "delta": {"role": None, "content": "name", "tool_calls": None},
                "logprobs": None,
                "finish_reason": "",
                "matched_stop": None,
            }
        ],
        "usage": None,
    }
    acc = run([sglang, calls(tc(index=0, id="c", name="f", args="{}"), finish=""), done()])
    assert ready(acc) == [("f", {})]
    assert acc.finish_reasons == {0: ["tool_calls"]}
    assert "finish_reason_empty" in codes(acc)


def test_q22_duplicated_finish_chunks_openrouter() -> None:
    # skye-harris/hass_local_openai_llm PR #92: two finish_reason chunks, the second with usage.
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    second = {**done(), "usage": usage}
    acc = run([calls(tc(index=0, id="c", name="f", args="{}")), done(), second])
    assert ready(acc) == [("f", {})]
    assert acc.finish_reasons == {0: ["tool_calls", "tool_calls"]}
    assert "finish_reason_repeated" in codes(acc)
    assert acc.get_final_completion().usage.total_tokens == 3  # type: ignore[union-attr]


def test_q22_a_resent_call_after_finish_leaves_the_sealed_call_as_it_was() -> None:
    piece = tc(index=0, id="c", name="f", args='{"a": 1}')
    acc = run([calls(piece), done(), calls(piece)])
    assert ready(acc) == [("f", {"a": 1})]
    assert "arguments_cumulative" in codes(acc.tool_calls[0])


def test_q22_a_changed_fragment_after_finish_refuses_the_call() -> None:
    acc = run([calls(tc(index=0, id="c", name="rm", args='{"path": "/tmp/x"}')), done()])
    assert acc.tool_calls[0].ready
    late = ts.Accumulator()
    for c in [
        calls(tc(index=0, id="c", name="rm", args='{"path": "/tmp/x')),
        done(),
        calls(tc(index=0, args='"}')),
    ]:
        late.feed(c)
    assert late.tool_calls[0].status == "invalid"
    assert isinstance(late.tool_calls[0].error, ts.errors.LateFragment)


def test_q22_a_new_call_after_finish_reason() -> None:
    acc = run(
        [
            chunk(delta={"role": "assistant", "content": "ok"}),
            done("stop"),
            calls(tc(index=0, id="c", name="f", args='{"a": 1}')),
        ]
    )
    assert ready(acc) == [("f", {"a": 1})]
    assert "fragment_after_finish" in codes(acc.tool_calls[0])


def test_q22_a_new_call_after_finish_reason_stays_incomplete_if_the_stream_fails() -> None:
    acc = ts.Accumulator()
    for c in [done("stop"), calls(tc(index=0, id="c", name="f", args='{"a": 1}'))]:
        acc.feed(c)
    acc.end(ConnectionError("dropped"))
    assert acc.tool_calls[0].status == "incomplete"


def test_q44_complete_json_is_not_ready_before_finish_reason() -> None:
    # vercel/ai PR #13137 (VULN-6861): finalizing on parsable JSON ran truncated calls.
    acc = ts.Accumulator()
    acc.feed(calls(tc(index=0, id="c", name="search", args='{"query": "test"}')))
    assert acc.tool_calls[0].scanner.complete
    assert acc.tool_calls[0].status == "open"
    acc.end()
    assert acc.tool_calls[0].status == "incomplete"


def test_finish_reason_missing_on_one_choice_of_two() -> None:
    two = [
        chunk(
            choices=[
                {"index": 0, "delta": {"tool_calls": [tc(index=0, id="a", name="f", args='{"n": 0}')]}},
                {"index": 1, "delta": {"tool_calls": [tc(index=0, id="b", name="f", args='{"n": 1}')]}},
            ]
        ),
        chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
    ]
    acc = run(two)
    assert ready(acc, 0) == [("f", {"n": 0})]
    assert ready(acc, 1) == [("f", {"n": 1})]
    assert "finish_reason_missing" in codes(acc)
    assert [c.finish_reason for c in acc.get_final_completion().choices] == ["tool_calls", "tool_calls"]


def test_finish_reason_missing_on_one_choice_with_an_unfinished_value_stays_incomplete() -> None:
    two = [
        chunk(
            choices=[
                {"index": 0, "delta": {"tool_calls": [tc(index=0, id="a", name="f", args='{"n": 0}')]}},
                {"index": 1, "delta": {"tool_calls": [tc(index=0, id="b", name="f", args='{"n": 1')]}},
            ]
        ),
        chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
    ]
    acc = run(two)
    assert acc.calls(1)[0].status == "incomplete"
    with pytest.raises(ts.IncompleteStreamError):
        acc.get_final_completion()


# --------------------------------------------------------------------------- envelope (Q23, Q25-Q27, Q38)


def test_q23_azure_prompt_filter_preamble_and_choice_without_delta() -> None:
    # AbanteAI/archive-old-cli-mentat#429 and microsoft/autogen#6465.
    safe = {"filtered": False, "severity": "safe"}
    filters = {"hate": safe, "self_harm": safe, "sexual": safe, "violence": safe}
    preamble = {
        "id": "",
        "choices": [],
        "created": 0,
        "model": "",
        "object": "",
        "system_fingerprint": None,
        "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": filters}],
    }
    trailing = {
        "id": "",
        "choices": [
            {
                "finish_reason": None,
                "index": 0,
                "content_filter_offsets": {"check_offset": 3329, "start_offset": 3329, "end_offset": 3438},
                "content_filter_results": filters,
            }
        ],
        "created": 0,
        "model": "",
        "object": "",
    }
    acc = run([preamble, calls(tc(index=0, id="c", name="f", args="{}")), trailing, done()])
    assert ready(acc) == [("f", {})]
    assert "empty_choices" in codes(acc)
    completion = acc.get_final_completion()
    assert completion.id == "chatcmpl-test"  # the empty preamble id does not win
    assert completion.model_extra["prompt_filter_results"][0]["prompt_index"] == 0  # type: ignore[index]


def test_q23_usage_chunk_with_empty_choices_openai_include_usage() -> None:
    # Lambdua/openai4j#60.
    usage_chunk = {
        "id": "chatcmpl-A4yfRYHaCuVyGtk5r0DnV9donhXja",
        "object": "chat.completion.chunk",
        "created": 1725749881,
        "model": "gpt-4o-2024-05-13",
        "choices": [],
        "usage": {"prompt_tokens": 611, "completion_tokens": 13, "total_tokens": 624},
        "system_fingerprint": "fp_992d1ea92d",
    }
    acc = run([calls(tc(index=0, id="c", name="f", args="{}", type="function")), done(), usage_chunk])
    assert ready(acc) == [("f", {})]
    assert codes(acc) == set()
    assert acc.get_final_completion().usage.total_tokens == 624  # type: ignore[union-attr]


def test_q23_cost_chunk_without_envelope_opencode_zen() -> None:
    # anomalyco/opencode#39606: {"choices":[],"cost":"..."} without id/object/created/model.
    acc = run([calls(tc(index=0, id="c", name="f", args="{}")), done(), {"choices": [], "cost": "0.0012"}])
    assert ready(acc) == [("f", {})]
    assert acc.get_final_completion().model_extra["cost"] == "0.0012"  # type: ignore[index]


def test_q25_usage_on_every_chunk_the_last_one_wins() -> None:
    def with_usage(c: dict[str, Any], n: int) -> dict[str, Any]:
        return {**c, "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n}}

    acc = run(
        [
            with_usage(calls(tc(index=0, id="c", name="f", args='{"a":')), 1),
            with_usage(calls(tc(index=0, args=" 1}")), 2),
            with_usage(done(), 3),
        ]
    )
    assert ready(acc) == [("f", {"a": 1})]
    assert "usage_repeated" in codes(acc)
    assert acc.usage["total_tokens"] == 8


def test_q26_stream_cut_mid_call_never_runs_it() -> None:
    acc = run([calls(tc(index=0, id="c", name="write", args='{"text": "hello'))])
    assert acc.tool_calls[0].status == "incomplete"
    with pytest.raises(ts.IncompleteStreamError) as failed:
        acc.get_final_completion()
    assert [c.status for c in failed.value.tool_calls] == ["incomplete"]


@pytest.mark.parametrize(
    "error",
    [
        {
            "code": "api_error",
            "message": "Internal server error",
            "param": None,
            "type": "invalid_request_error",
        },
        "thinking_budget is not supported with speculative decoding in the server.",
    ],
)
def test_q27_in_band_error_fed_by_hand_ends_the_stream(error: Any) -> None:
    # anthropics/anthropic-sdk-typescript#711 (object) and Blaizzy/nativ PR #195 (string).
    acc = ts.Accumulator()
    acc.feed(calls(tc(index=0, id="c", name="f", args='{"a": 1}')))
    acc.feed({"error": error})
    assert acc.ended
    assert isinstance(acc.error, ts.ToolstitchError)
    assert acc.tool_calls[0].status == "incomplete"
    assert "in_band_error" in codes(acc)
    with pytest.raises(ts.IncompleteStreamError):
        acc.get_final_completion()


def test_q38_envelope_oddities() -> None:
    # TensorRT-Edge-LLM#93 (no "object"), foundry-local#273 ("error": null, extra fields).
    odd = {
        "id": "chat.id.1",
        "created": 1,
        "model": "m",
        "error": None,
        "IsDelta": True,
        "choices": [{"index": 0, "delta": {"tool_calls": [tc(index=0, id="c", name="f", args="{}")]}}],
    }
    acc = run([odd, {**done(), "id": "chat.id.2"}])
    assert ready(acc) == [("f", {})]
    completion = acc.get_final_completion()
    assert completion.id == "chat.id.1"
    assert "error" not in (completion.model_extra or {})
    assert completion.model_extra["IsDelta"] is True  # type: ignore[index]


# --------------------------------------------------------------------------- message fields (Q29-Q34, Q46)


def test_q29_reasoning_fields_are_kept_and_labels_are_not() -> None:
    acc = run(
        [
            chunk(delta={"role": "assistant", "reasoning_content": "Let me ", "channel": "analysis"}),
            chunk(delta={"reasoning_content": "think.", "channel": "analysis", "token_id": 7}),
            chunk(delta={"reasoning": "Also vLLM's field."}),
            chunk(delta={"reasoning_details": [{"type": "reasoning.text", "text": "a"}]}),
            chunk(delta={"reasoning_details": [{"type": "reasoning.text", "text": "b"}]}),
            calls(tc(index=0, id="c", name="f", args="{}")),
            done(),
        ]
    )
    message = acc.get_final_completion().choices[0].message
    extra = message.model_extra or {}
    assert extra["reasoning_content"] == "Let me think."
    assert extra["reasoning"] == "Also vLLM's field."
    assert [d["text"] for d in extra["reasoning_details"]] == ["a", "b"]
    assert "channel" not in extra and "token_id" not in extra


def test_q29_mistral_index_inside_the_delta_does_not_reach_the_message() -> None:
    # vercel-ai transcript mistral_zai-glm-5-2: "index": 0 inside the delta.
    acc = run([calls(tc(index=0, id="c", name="f", args="{}"), index=0, content=""), done()])
    assert "index" not in (acc.get_final_completion().choices[0].message.model_extra or {})


def test_q31_gemini_thought_signature_on_a_standalone_metadata_delta() -> None:
    # open-webui/computer#224: a metadata-only delta carrying extra_content.
    acc = run(
        [
            calls(tc(id="c", name="f", args='{"a": 1}', type="function")),
            calls({"extra_content": {"google": {"thought_signature": "xyz"}}}),
            done(),
        ]
    )
    assert ready(acc) == [("f", {"a": 1})]
    assert acc.tool_calls[0].extra == {"extra_content": {"google": {"thought_signature": "xyz"}}}


def test_q33_null_and_empty_content_beside_tool_deltas() -> None:
    # vllm-project/vllm-ascend#14501.
    first = {
        "content": None,
        "tool_calls": [tc(id="call_xxx", type="function", index=0, name="read_file", args="")],
    }
    acc = run(
        [
            chunk(delta={"role": "assistant", "content": ""}),
            chunk(delta=first),
            calls(tc(index=0, args='{"p": 1}'), content=""),
            done(),
        ]
    )
    assert ready(acc) == [("read_file", {"p": 1})]
    assert acc.get_final_completion().choices[0].message.content is None


def test_q34_empty_tool_calls_and_refusal_on_every_delta_codebuddy() -> None:
    # router-for-me/CLIProxyAPI#5333.
    def cb(text: str) -> dict[str, Any]:
        return chunk(
            delta={
                "content": text,
                "reasoning_content": "",
                "function_call": None,
                "refusal": "",
                "tool_calls": [],
            }
        )

    acc = run([cb("Hel"), cb("lo"), done("stop")])
    assert acc.calls() == []
    message = acc.get_final_completion().choices[0].message
    assert message.content == "Hello"
    assert message.refusal is None
    assert codes(acc) == set()


def test_q35_legacy_function_call_streaming() -> None:
    acc = run(
        [
            chunk(delta={"role": "assistant", "function_call": {"name": "f", "arguments": ""}}),
            chunk(delta={"function_call": {"arguments": '{"a": 1}'}}),
            done("function_call"),
        ]
    )
    assert ready(acc) == [("f", {"a": 1})]
    assert "legacy_function_call" in codes(acc.tool_calls[0])


def test_q36_several_choices_are_kept_apart() -> None:
    acc = run(
        [
            chunk(
                choices=[{"index": 1, "delta": {"tool_calls": [tc(index=0, id="b", name="g", args='{"x":')]}}]
            ),
            chunk(
                choices=[{"index": 0, "delta": {"tool_calls": [tc(index=0, id="a", name="f", args='{"x":')]}}]
            ),
            chunk(choices=[{"index": 0, "delta": {"tool_calls": [tc(index=0, args="0}")]}}]),
            chunk(choices=[{"index": 1, "delta": {"tool_calls": [tc(index=0, args="1}")]}}]),
            chunk(
                choices=[
                    {"index": 0, "delta": {}, "finish_reason": "tool_calls"},
                    {"index": 1, "delta": {}, "finish_reason": "tool_calls"},
                ]
            ),
        ]
    )
    assert ready(acc, 0) == [("f", {"x": 0})]
    assert ready(acc, 1) == [("g", {"x": 1})]


def test_q46_refusal_deltas_are_kept() -> None:
    acc = run(
        [
            chunk(delta={"role": "assistant", "content": None, "refusal": "I can't "}),
            chunk(delta={"refusal": "help with that."}),
            done("stop"),
        ]
    )
    assert acc.get_final_completion().choices[0].message.refusal == "I can't help with that."


def test_role_repeated_on_every_delta() -> None:
    acc = run(
        [
            chunk(delta={"role": "assistant", "content": "a"}),
            chunk(delta={"role": "assistant", "content": "b"}),
            done("stop"),
        ]
    )
    assert acc.get_final_completion().choices[0].message.content == "ab"
    assert "role_repeated" in codes(acc)


def test_an_empty_tool_call_entry_opens_no_call() -> None:
    # litellm#17425: empty tool-call objects beside Anthropic parallel calls.
    acc = run(
        [
            calls({"index": 1}),
            calls({"index": 2, "type": "function", "function": {"arguments": ""}}),
            calls(tc(index=0, id="c", name="f", args="{}")),
            done(),
        ]
    )
    assert ready(acc) == [("f", {})]
    assert "empty_tool_call" in codes(acc)


# --------------------------------------------------------------------------- Q32: recovery (opt-in)


def _text_stream(*texts: str, finish: str = "stop") -> list[dict[str, Any]]:
    return [chunk(delta={"role": "assistant", "content": t}) for t in texts] + [done(finish)]


HERMES = [
    "I will check.\n<tool_c",
    'all>{"name": "get_weather", "arg',
    'uments": {"city": "Oslo"}}</tool_call>',
]


def test_q32_text_tool_calls_are_left_alone_by_default() -> None:
    acc = run(_text_stream(*HERMES))
    assert acc.calls() == []
    assert "<tool_call>" in (acc.get_final_completion().choices[0].message.content or "")


def test_q32_hermes_tool_call_tag_is_recovered_when_asked() -> None:
    acc = run(_text_stream(*HERMES), recover_text_tool_calls=True, tools=[WEATHER_TOOL])
    assert ready(acc) == [("get_weather", {"city": "Oslo"})]
    call = acc.tool_calls[0]
    assert call.id
    assert "tool_call_in_content" in codes(call)
    [note] = [a for a in call.anomalies if a.code == "tool_call_in_content"]
    assert note.raw.startswith("<tool_call>")
    message = acc.get_final_completion().choices[0].message
    assert message.content == "I will check."
    assert [c.function.name for c in message.tool_calls or []] == ["get_weather"]


def test_q32_qwen3_coder_xml_values_are_typed_by_the_schema() -> None:
    # lmstudio-bug-tracker#1071: Qwen3 Coder XML tool calls in streaming.
    xml = (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
    )
    acc = run(_text_stream(xml), recover_text_tool_calls=True, tools=[WEATHER_TOOL])
    assert ready(acc) == [("get_weather", {"city": "Oslo", "days": 3})]
    assert acc.get_final_completion().choices[0].message.content is None


def test_q32_glm_arg_key_format() -> None:
    # getsigit/sigit PR #85: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>.
    glm = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>"
    acc = run(_text_stream(glm), recover_text_tool_calls=True, tools=[WEATHER_TOOL])
    assert ready(acc) == [("get_weather", {"city": "Oslo"})]


def test_q32_bare_json_message_needs_the_tool_to_be_offered() -> None:
    # sgl-project/sglang#3387 (Llama-3.1): the raw tool JSON as content.
    text = '{"name": "get_weather", "parameters": {"city": "Oslo"}}'
    recovered = run(_text_stream(text), recover_text_tool_calls=True, tools=[WEATHER_TOOL])
    assert ready(recovered) == [("get_weather", {"city": "Oslo"})]
    unknown = run(_text_stream(text), recover_text_tool_calls=True)
    assert unknown.calls() == []


def test_q32_what_is_not_a_finished_call_stays_text() -> None:
    think = '<think>maybe <tool_call>{"name": "get_weather", "arguments": {"city": "X"}}</tool_call></think>'
    broken = '<tool_call>{"name": "get_weather", "arguments": {"city": </tool_call>'
    for text in (think, broken):
        acc = run(_text_stream(text), recover_text_tool_calls=True, tools=[WEATHER_TOOL])
        assert acc.calls() == []
        assert acc.get_final_completion().choices[0].message.content == text
    # Cut by the token limit: nothing is recovered from a text that may be truncated.
    cut = run(_text_stream(*HERMES, finish="length"), recover_text_tool_calls=True)
    assert cut.calls() == []
    # Never from a stream that ended without a finish_reason.
    unfinished = run(_text_stream(*HERMES)[:-1], recover_text_tool_calls=True)
    assert unfinished.calls() == []


def test_q32_a_choice_with_structured_calls_is_not_read_twice() -> None:
    # guoqingbao/xinfer#383: the JSON as content, then the proper tool_calls chunk.
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    acc = run(
        [
            chunk(delta={"content": text}),
            calls(tc(index=0, id="c", name="get_weather", args='{"city": "Oslo"}')),
            done(),
        ],
        recover_text_tool_calls=True,
    )
    assert ready(acc) == [("get_weather", {"city": "Oslo"})]
    assert "tool_call_in_content" not in codes(acc)


def test_q32_recovered_calls_are_checked_against_the_schema() -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"days": 2}}</tool_call>'
    acc = run(_text_stream(text), recover_text_tool_calls=True, tools=[WEATHER_TOOL])
    assert acc.tool_calls[0].status == "invalid"
    assert isinstance(acc.tool_calls[0].error, ts.errors.SchemaViolation)


def test_q32_mistral_tool_calls_marker_with_several_calls() -> None:
    one = '{"name": "get_weather", "arguments": {"city": "%s"}}'
    text = f"[TOOL_CALLS][{one % 'A'}, {one % 'B'}]"
    acc = run(_text_stream(text), recover_text_tool_calls=True, tools=[WEATHER_TOOL])
    assert ready(acc) == [("get_weather", {"city": "A"}), ("get_weather", {"city": "B"})]
    assert len({c.id for c in acc.tool_calls}) == 2
