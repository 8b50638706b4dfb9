"""Opt-in recovery of tool calls that a server wrote as text inside ``content`` (Q32).

When a serving stack's tool parser fails (SGLang, vllm-mlx, LM Studio, mlx-vlm, old Ollama), the
model's tool call reaches the client as plain text: ``<tool_call>{"name": ..., "arguments": ...}
</tool_call>``, Qwen3-Coder's ``<function=NAME><parameter=KEY>VALUE</parameter></function>``,
GLM's ``NAME<arg_key>K</arg_key><arg_value>V</arg_value>``, Mistral's ``[TOOL_CALLS][...]``, or a
bare JSON object when the whole message is the call. ``Accumulator(recover_text_tool_calls=True)``
turns such text into ordinary tool calls.

Why it is off by default, and what keeps it safe when on:

* Text is the model talking; reading it as an action is a guess. Only the choice's *finished*
  content is read (at its ``finish_reason``, never a prefix of it, and never after ``length``), so
  a half-written block is never run; a choice that already has structured tool calls is left alone
  (xinfer streams the JSON as text *and* as ``tool_calls``: recovering it would run it twice).
* A block that does not parse stays text. Blocks inside ``<think>`` … ``</think>`` stay text: a
  model thinking about a call has not made it.
* A bare JSON message is read as a call only when the request's ``tools`` name it.
* Every recovered call goes through the same seal, parse and schema check as a streamed one, has a
  synthesized id, and carries a ``tool_call_in_content`` anomaly whose ``raw`` is the block text.
* The recovered blocks are removed from the final message's ``content`` (the call is in
  ``tool_calls`` now; replaying both would show the model its call twice). The live
  ``ContentDelta`` events and the SDK chunks themselves are not changed: they went out as they came.

XML-style values are text; when the tool's schema gives a property a non-string type, the value is
read as JSON (``"3"`` → ``3`` for an integer), else it stays a string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ._anomaly import Anomaly, AnomalyCode
from ._schema import _as_mapping
from ._values import json_text

__all__ = ["TextToolCallRecovery"]

# One alternation, scanned left to right, so a <function=...> inside a <tool_call> block is read
# as part of that block, not on its own.
_BLOCK = re.compile(
    r"<tool_call>(?P<tc>.*?)</tool_call>"
    r"|<\|tool_call>(?P<tc2>.*?)<tool_call\|>"
    r"|(?P<fn><function=[^>\n]+>.*?</function>)",
    re.DOTALL,
)
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_MISTRAL = "[TOOL_CALLS]"
_QWEN_FUNCTION = re.compile(r"^<function=([^>\n]+)>(.*?)</function>$", re.DOTALL)
_QWEN_PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*?)</parameter>", re.DOTALL)
_GLM_NAME = re.compile(r"^<name>(.*?)</name>\s*<arguments>(.*?)</arguments>$", re.DOTALL)
_GLM_ARG = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)
_NAME = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")

_Call = tuple[str, dict[str, Any]]


def _tool_parameters(tools: Iterable[Any] | None) -> dict[str, Mapping[str, Any] | None]:
    """Function name -> its parameters schema (or None), from the request's ``tools``."""
    out: dict[str, Mapping[str, Any] | None] = {}
    for tool in tools or ():
        spec = _as_mapping(tool)
        function = spec.get("function") if spec is not None else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            params = function.get("parameters")
            out[function["name"]] = params if isinstance(params, Mapping) else None
    return out


def _json_call(value: Any) -> _Call | None:
    """``{"name": ..., "arguments"|"parameters": {...} or "<json text>"}`` as a call, else None."""
    if not isinstance(value, dict):
        return None
    name = value.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        return None
    args = value.get("arguments", value.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return None
    return (name, args) if isinstance(args, dict) else None


def _json_calls(text: str) -> list[_Call] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    items = value if isinstance(value, list) else [value]
    calls = [_json_call(v) for v in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


class TextToolCallRecovery:
    """Finds tool calls written as text; one per accumulator, built from the request's tools."""

    __slots__ = ("_params",)

    def __init__(self, tools: Iterable[Any] | None = None) -> None:
        self._params = _tool_parameters(tools)

    def _typed(self, name: str, raw: Mapping[str, str]) -> dict[str, Any]:
        """XML-style string values, read as JSON where the tool's schema wants a non-string."""
        params = self._params.get(name)
        props = params.get("properties") if params is not None else None
        out: dict[str, Any] = {}
        for key, text in raw.items():
            value = text.strip("\n")
            spec = props.get(key) if isinstance(props, Mapping) else None
            wanted = spec.get("type") if isinstance(spec, Mapping) else None
            types = [wanted] if isinstance(wanted, str) else wanted if isinstance(wanted, list) else []
            if types and "string" not in types:
                try:
                    out[key] = json.loads(value)
                    continue
                except (ValueError, RecursionError):
                    pass
            out[key] = value
        return out

    def _block_calls(self, body: str) -> list[_Call] | None:
        body = body.strip()
        if body.startswith(("{", "[")):
            return _json_calls(body)
        m = _QWEN_FUNCTION.match(body)
        if m is not None:
            name, inner = m.group(1).strip(), m.group(2).strip()
            if inner.startswith("{"):  # Llama 4: <function=NAME>{"param": "value"}</function>
                call = _json_call({"name": name, "arguments": inner})
                return [call] if call is not None else None
            raw = {k.strip(): v for k, v in _QWEN_PARAMETER.findall(inner)}
            return [(name, self._typed(name, raw))] if _NAME.match(name) else None
        m = _GLM_NAME.match(body)
        if m is not None:
            name = m.group(1).strip()
            call = _json_call({"name": name, "arguments": m.group(2).strip()})
            return [call] if call is not None else None
        name, _, rest = body.partition("<arg_key>")
        name = name.strip()
        if _NAME.match(name) and (not rest or _GLM_ARG.search("<arg_key>" + rest)):
            raw = {k.strip(): v for k, v in _GLM_ARG.findall("<arg_key>" + rest)} if rest else {}
            return [(name, self._typed(name, raw))]
        return None

    def find(self, text: str) -> tuple[str, list[tuple[_Call, str]]]:
        """The text without recovered blocks, and each recovered call with its block's text."""
        thinking = [m.span() for m in _THINK.finditer(text)] if "<think>" in text else []
        found: list[tuple[_Call, str]] = []
        kept: list[str] = []
        last = 0
        think = 0  # blocks and thinking spans both come in text order: one walk, linear
        for m in _BLOCK.finditer(text):
            start = m.start()
            while think < len(thinking) and thinking[think][1] <= start:
                think += 1
            if think < len(thinking) and thinking[think][0] <= start:
                continue
            body = m.group("tc")
            if body is None:
                body = m.group("tc2")
            if body is None:
                body = m.group("fn")
            calls = self._block_calls(body) if body is not None else None
            if not calls:
                continue
            kept.append(text[last : m.start()])
            last = m.end()
            found.extend((call, m.group(0)) for call in calls)
        kept.append(text[last:])
        rest = "".join(kept)
        if not found:
            rest, found = self._whole_message(rest)
        return (rest.strip() if found else rest), found

    def _whole_message(self, text: str) -> tuple[str, list[tuple[_Call, str]]]:
        """Mistral's ``[TOOL_CALLS]`` list, or a bare JSON call naming an offered tool."""
        at = text.find(_MISTRAL)
        if at >= 0:
            body = text[at + len(_MISTRAL) :]
            calls = _json_calls(body.strip())
            if calls:
                return text[:at], [(c, text[at:]) for c in calls]
        stripped = text.strip()
        if self._params and stripped.startswith(("{", "[")):
            calls = _json_calls(stripped)
            if calls and all(name in self._params for name, _ in calls):
                return "", [(c, stripped) for c in calls]
        return text, []

    def entries(
        self, text: str, first_index: int, max_depth: int = 64
    ) -> tuple[str, list[tuple[dict[str, Any], Anomaly]]]:
        """The remaining text, and per recovered call a ``delta.tool_calls`` entry (as a provider
        would have streamed it, read by the one reader) and the anomaly that says where it came from."""
        rest, found = self.find(text)
        entries: list[tuple[dict[str, Any], Anomaly]] = []
        for offset, ((name, args), block) in enumerate(found):
            arguments, _ = json_text(args, max_depth)
            entry = {
                "index": first_index + offset,
                "type": "function",
                "function": {"name": name, "arguments": args if arguments is None else arguments},
            }
            note = Anomaly(
                AnomalyCode.TOOL_CALL_IN_CONTENT,
                f"a call to {name!r} written as text in content was recovered",
                raw=block,
            )
            entries.append((entry, note))
        return rest, entries
