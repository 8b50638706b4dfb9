"""The offline validator: every rule of a dialect, checked without sending a request.

``validate_history`` and ``validate_request`` return :class:`HistoryProblem` lists;
``ensure_valid_history`` raises :class:`HistoryError`. The rule texts and severities come from
:data:`toolstitch._dialects.RULES`; ``_Checker`` only decides where each rule applies.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import HistoryError
from ._common import _MISSING, COPY_DEPTH, _plain, _tool_calls, to_plain
from ._dialects import NESTING_LIMIT, RULES, Dialect, Severity, get_dialect

_ROLES_WITH_NAME = frozenset({"system", "developer", "user", "assistant"})
_NAME = re.compile(r"[a-zA-Z0-9_-]+")
_GEMINI_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.\-]{0,63}")

# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class HistoryProblem:
    """One rule a history breaks.

    ``index`` is the message's position in the list (``None`` for a request-level problem such as
    ``tools``); ``rule`` the rule id (``"H03"``); ``severity`` ``"error"`` (the server would reject
    the request, or silently answer the wrong call) or ``"warning"`` (accepted today but fragile);
    ``message`` says what is wrong and quotes ``server_error``, the text the server answers with,
    when one is known; ``param`` is the offending field in the server's notation.
    """

    index: int | None
    rule: str
    severity: Severity
    message: str
    server_error: str | None = None
    param: str | None = None

    def __str__(self) -> str:
        where = "-" if self.index is None else str(self.index)
        return f"#{where} {self.rule} {self.severity}: {self.message}"


# ------------------------------------------------------------------------- reading input


def _clip(text: str, size: int = 200) -> str:
    """``text`` cut to ``size`` characters: a problem quotes what it must, never a whole schema."""
    return text if len(text) <= size else text[: size - 3] + "..."


def _quote(value: Any) -> str:
    return _clip(repr(value), 80)


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def _json_type(value: Any) -> str:
    """A value's type in the words OpenAI's validator uses ("an object", "null", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return "a string" if isinstance(value, str) else f"a {type(value).__name__}"


# ----------------------------------------------------------------------------- validator


@dataclass
class _Block:
    """An assistant message with tool_calls and the results its contiguous tool run gives."""

    index: int
    declared: list[str]
    answered: dict[str, int] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    known: set[str] = field(init=False)  # ``declared`` as a set: one lookup per tool message

    def __post_init__(self) -> None:
        self.known = set(self.declared)


class _Checker:
    """Runs every rule of one dialect over one history, collecting problems in order."""

    def __init__(self, d: Dialect) -> None:
        self.d = d
        self.problems: list[HistoryProblem] = []

    def add(
        self,
        index: int | None,
        rule_id: str,
        what: str,
        *,
        variant: str = "",
        param: str | None = None,
        escalate: bool = False,
        **fields: Any,
    ) -> None:
        rule = RULES[rule_id]
        severity = rule.severity(self.d.name)
        if severity is None:
            return
        if escalate:
            severity = "error"
        text = rule.server_text(self.d.name, variant, **{"index": index, "param": param, **fields})
        if text is None:
            message = what
        elif severity == "error":
            message = f'{what}. {self.d.label} rejects it: "{text}"'
        else:
            message = f'{what}. Servers that enforce this answer: "{text}"'
        self.problems.append(HistoryProblem(index, rule_id, severity, message, text, param))

    # -- one message at a time --------------------------------------------------------------

    def message(self, i: int, m: Any, last: int) -> None:
        if not isinstance(m, Mapping):
            self.add(i, "H00", f"entry is {_json_type(m)}, not a message object")
            return
        role = m.get("role")
        if not isinstance(role, str) or role not in self.d.roles:
            known = ", ".join(sorted(self.d.roles))
            self.add(i, "H00", f"role {role!r} is not one of {known}", param=f"messages[{i}].role")
            return
        name = m.get("name")
        if role in _ROLES_WITH_NAME and name is not None and not _is_name(name):
            what = f"name {name!r} has characters outside a-z A-Z 0-9 _ -"
            self.add(i, "H20", what, param=f"messages[{i}].name")
        if role == "function" and not isinstance(name, str):
            self.add(i, "H19", "a function message has no name", param=f"messages[{i}].name")
        if m.get("function_call") is not None and role != "assistant":
            self.add(i, "H19", f"a {role} message carries function_call", variant="function_call")
        if isinstance(m.get("content"), Mapping):
            self.add(i, "H18", "content is an object", got="an object")
        self.strict_keys(i, role, m, "")
        if role == "assistant":
            self.assistant(i, m, last)
        elif role == "tool":
            self.tool(i, m)
        elif role in ("user", "system", "developer") and m.get("content") == "":
            self.add(i, "H32", f"{role} content is an empty string")

    def strict_keys(self, i: int, kind: str, data: Mapping[str, Any], where: str) -> None:
        allowed = (self.d.strict_keys or {}).get(kind)
        if allowed is None:
            return
        role = "assistant" if kind in ("tool_call", "function") else kind
        for key in data:
            if key not in allowed:
                self.add(
                    i,
                    "H70",
                    f"field {where}{key!r} is not accepted by {self.d.label}",
                    role=role,
                    key=f"{where}{key}",
                )

    def assistant(self, i: int, m: Mapping[str, Any], last: int) -> None:
        calls = m.get("tool_calls")
        has_calls = False
        if calls is not None:
            if not isinstance(calls, list):
                self.add(i, "H09", f"tool_calls is {_json_type(calls)}", variant="not_list")
            elif not calls:
                self.add(i, "H09", "tool_calls is an empty list; omit the key instead")
            else:
                has_calls = True
                self.calls(i, calls)
        content = m.get("content", _MISSING)
        if has_calls:
            if content is _MISSING:
                self.add(i, "H23", "an assistant message with tool_calls has no content key")
            elif content is None:
                what = "assistant content is null; this server needs '' instead"
                self.add(i, "H82", what)
                self.add(i, "H84", what)
            elif content == "":
                what = "assistant content is '' next to tool_calls; use null"
                self.add(i, "H32", what, variant="tool_calls")
        elif m.get("function_call") is None:
            if content is _MISSING or content is None:
                what = "an assistant message without tool_calls has no content"
                self.add(i, "H08", what, param=f"messages[{i}].content")
                self.add(i, "H39", what)
            elif content == "":
                self.add(i, "H39", "an assistant message has neither content nor tool_calls")
                if i != last:
                    self.add(i, "H32", "assistant content is an empty string")
        if isinstance(content, list):
            self.parts(i, "assistant", content, frozenset({"text", "refusal"}))

    def calls(self, i: int, calls: list[Any]) -> None:
        seen: set[str] = set()
        for k, call in enumerate(calls):
            p = f"messages[{i}].tool_calls[{k}]"
            if not isinstance(call, Mapping):
                self.add(i, "H11", f"tool call {k} is {_json_type(call)}", variant="bad_type")
                continue
            self.strict_keys(i, "tool_call", call, f"tool_calls[{k}].")
            kind = call.get("type")
            if kind is None:
                self.add(i, "H11", f"tool call {k} has no type", param=f"{p}.type")
            elif kind not in ("function", "custom"):
                self.add(i, "H11", f"tool call {k} has type {kind!r}", variant="bad_type")
            self.call_id(i, k, call.get("id"), seen)
            if kind == "custom":
                body, name_key, text_key = call.get("custom"), "name", "input"
            else:
                body, name_key, text_key = call.get("function"), "name", "arguments"
            part = "custom" if kind == "custom" else "function"
            if not isinstance(body, Mapping):
                self.add(i, "H11", f"tool call {k} has no {part}", param=f"{p}.{part}")
                continue
            if part == "function":
                self.strict_keys(i, "function", body, f"tool_calls[{k}].function.")
            name = body.get(name_key)
            if not isinstance(name, str) or not name:
                self.add(i, "H11", f"tool call {k} has no name", param=f"{p}.{part}.name")
            else:
                self.function_name(i, name, f"{p}.{part}.name")
            text = body.get(text_key, _MISSING)
            if text is _MISSING:
                self.add(i, "H11", f"tool call {k} has no {text_key}", param=f"{p}.{part}.{text_key}")
            elif not isinstance(text, str):
                got = _json_type(text)
                what = f"tool call {k}'s {text_key} is {got}, not a JSON string"
                self.add(i, "H10", what, param=f"{p}.{part}.{text_key}", position=k, got=got)
            elif part == "function" and text.strip() and not _is_json_object(text):
                self.add(i, "H73", f"tool call {k}'s arguments are not a JSON object: {text[:60]!r}")

    def call_id(self, i: int, k: int, call_id: Any, seen: set[str]) -> None:
        p = f"messages[{i}].tool_calls[{k}].id"
        if not isinstance(call_id, str) or not call_id:
            self.add(i, "H11", f"tool call {k} has no id", param=p, variant="id")
            return
        if call_id in seen:
            what = f"id {call_id!r} appears twice in one tool_calls list"
            self.add(i, "H06", what, variant="in_calls", id=call_id, position=k)
        seen.add(call_id)
        d = self.d
        if d.id_style == "openai" and len(call_id) > 40:
            over = len(call_id) > 64
            what = f"id {call_id[:24]!r}... is {len(call_id)} characters long"
            variant = "over_max" if over else ""
            self.add(i, "H12", what, param=p, length=len(call_id), variant=variant, escalate=over)
        elif d.id_style == "anthropic" and not d.id_ok(call_id):
            self.add(i, "H29", f"id {call_id!r} has characters outside a-z A-Z 0-9 _ -", position=k)
        elif d.id_style == "mistral" and not d.id_ok(call_id):
            self.add(i, "H35", f"id {call_id!r} is not 9 letters or digits", id=call_id)

    def function_name(self, i: int | None, name: str, param: str) -> None:
        if self.d.name == "gemini-compat":
            if not _GEMINI_NAME.fullmatch(name):
                self.add(i, "H47", f"function name {name!r} is not a valid Gemini name")
        elif len(name) > 64:
            what = f"function name {name[:20]!r}... is {len(name)} characters long"
            self.add(i, "H13", what, variant="too_long", param=param, length=len(name), name=name)
        elif not _NAME.fullmatch(name):
            what = f"function name {name!r} has characters outside a-z A-Z 0-9 _ -"
            self.add(i, "H13", what, param=param, name=name)

    def tool(self, i: int, m: Mapping[str, Any]) -> None:
        call_id = m.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            self.add(i, "H07", "a tool message has no tool_call_id", param=f"messages[{i}].tool_call_id")
        content = m.get("content", _MISSING)
        if content is _MISSING:
            self.add(i, "H18", "a tool message has no content", variant="missing")
        elif content is None:
            self.add(i, "H18", "tool content is null; send a string", got="null")
        elif isinstance(content, list):
            self.parts(i, "tool", content, frozenset({"text"}))
        elif not isinstance(content, str | Mapping):
            self.add(i, "H18", f"tool content is {_json_type(content)}", got=_json_type(content))

    def parts(self, i: int, role: str, parts: list[Any], allowed: frozenset[str]) -> None:
        for k, part in enumerate(parts):
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind is None:
                self.add(i, "H18", f"content part {k} has no type", variant="untyped", position=k)
            elif kind == "image_url":
                what = f"a {role} message contains an image; send images in a user message"
                self.add(i, "H18", what, variant="image", role=role)
            elif kind not in allowed:
                what = f"content part {k} of a {role} message is {kind!r}"
                self.add(i, "H18", what, variant="part")

    # -- across messages --------------------------------------------------------------------

    def structure(self, msgs: list[Any]) -> None:
        """H01-H06: pair every tool message with the assistant call it answers."""
        block: _Block | None = None
        unanswered: dict[str, tuple[int, int, str]] = {}  # id -> (assistant, interloper, ids)
        reported: set[tuple[int, int]] = set()
        first_result: dict[str, int] = {}
        run_after: str | None = None  # role of the message before the current tool run
        prev_role: str | None = None
        for i, m in enumerate(msgs):
            role = m.get("role") if isinstance(m, Mapping) else None
            if role != "tool":
                if block is not None:
                    self.close(block, i, msgs, unanswered)
                calls = _tool_calls(m) if isinstance(m, Mapping) else []
                ids = [c.get("id") for c in calls if isinstance(c, Mapping)]
                block = _Block(i, [x for x in ids if isinstance(x, str) and x]) if calls else None
                prev_role = role
                continue
            if prev_role != "tool":
                run_after = prev_role
            prev_role = "tool"
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                continue
            if call_id in first_result:
                what = f"a second result for {call_id!r} (the first is #{first_result[call_id]})"
                self.add(i, "H06", what, id=call_id, first=first_result[call_id])
            else:
                first_result[call_id] = i
            if block is None:
                if call_id in unanswered:
                    self.interloper(i, call_id, unanswered, reported, msgs)
                variant = "after_call" if run_after in ("assistant", "tool") else ""
                what = f"tool message for {call_id!r} does not follow an assistant's tool_calls"
                self.add(
                    i,
                    "H01",
                    what,
                    variant=variant,
                    param=f"messages[{i}].role",
                    id=call_id,
                    prev_role=run_after,
                )
            elif call_id not in block.known:
                if call_id in unanswered:
                    self.interloper(i, call_id, unanswered, reported, msgs)
                what = f"tool message answers {call_id!r}, which #{block.index} did not declare"
                self.add(i, "H02", what, id=call_id, param=f"messages[{i}].tool_call_id")
            elif call_id not in block.answered:
                block.answered[call_id] = i
                block.order.append(call_id)
        if block is not None:
            self.close(block, None, msgs, unanswered)

    def close(
        self,
        block: _Block,
        interloper: int | None,
        msgs: list[Any],
        unanswered: dict[str, tuple[int, int, str]],
    ) -> None:
        declared = list(dict.fromkeys(block.declared))
        missing = [x for x in declared if x not in block.answered]
        if missing:
            ids = ", ".join(missing)
            where = "the end of the list" if interloper is None else f"#{interloper}"
            what = f"no tool message answers {ids} before {where}"
            param = f"messages[{block.index}].role"
            self.add(block.index, "H03", what, ids=ids, at=block.index, param=param)
            if interloper is not None:
                for x in missing:
                    unanswered.setdefault(x, (block.index, interloper, ids))
        expected = [x for x in declared if x in block.answered]
        if block.order != expected:
            k = next(n for n, (a, b) in enumerate(zip(block.order, expected, strict=True)) if a != b)
            what = (
                f"results come in a different order from the calls: {block.order[k]!r} is "
                f"answered before {expected[k]!r}"
            )
            if self.d.pairs_by_position:
                what += f"; {self.d.label} pairs results with calls by position"
            self.add(block.answered[block.order[k]], "H05", what)

    def interloper(
        self,
        i: int,
        call_id: str,
        unanswered: dict[str, tuple[int, int, str]],
        reported: set[tuple[int, int]],
        msgs: list[Any],
    ) -> None:
        assistant, between, ids = unanswered[call_id]
        if (assistant, between) in reported:
            return
        reported.add((assistant, between))
        role = msgs[between].get("role") if isinstance(msgs[between], Mapping) else None
        what = (
            f"this {role} message sits between the tool_calls of #{assistant} and the result "
            f"for {call_id!r} at #{i}; results must directly follow their assistant message"
        )
        self.add(between, "H04", what, ids=ids, at=assistant, param=f"messages[{assistant}].role")

    def dialect_rules(self, msgs: list[Any]) -> None:
        """Rules that look at the whole list: role order, last role, echoed provider fields."""
        d = self.d
        views = [m if isinstance(m, Mapping) else {} for m in msgs]
        roles = [v.get("role") for v in views]
        for i, role in enumerate(roles):
            prev = roles[i - 1] if i else None
            if role == "user" and prev == "tool":
                self.add(i, "H37", "a user message directly follows a tool message")
            if _tool_calls(views[i]) and prev not in ("user", "tool"):
                what = f"a tool-call turn follows a {prev or 'missing'} message"
                self.add(i, "H45", what)
        if roles and roles[-1] not in ("user", "tool") and not views[-1].get("prefix"):
            what = f"the last message is a {roles[-1]} message, not a user or tool message"
            self.add(len(roles) - 1, "H38", what, role=roles[-1])
        if d.name == "gemini-compat" and any(_signed(v) for v in views):
            for i, v in enumerate(views):
                if _tool_calls(v) and not _signed(v):
                    what = "tool calls carry no thought signature (extra_content) while others do"
                    self.add(i, "H46", what)
        if d.name == "deepseek" and any(v.get("reasoning_content") is not None for v in views):
            for i, v in enumerate(views):
                if _tool_calls(v) and v.get("reasoning_content") is None:
                    what = "thinking mode: this tool-call turn lost its reasoning_content"
                    self.add(i, "H62", what)


def _signed(message: Mapping[str, Any]) -> bool:
    """True when one of the message's tool calls carries Gemini's ``extra_content``."""
    return any(isinstance(c, Mapping) and c.get("extra_content") for c in _tool_calls(message))


def _as_list(value: Any) -> list[Any] | None:
    """``value`` as a list when it is a list of entries (any iterable but text, bytes and
    mappings, which iterate to characters or keys), else ``None``."""
    if isinstance(value, list):
        return value
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        return None
    return list(value)


def _not_a_list(checker: _Checker, value: Any, what: str) -> None:
    checker.add(None, "H00", f"{what} is {_json_type(value)}, not a list", param=what)


def _read(messages: list[Any], checker: _Checker) -> list[Any]:
    """Each message as plain data, reporting the ones nested too deep to send (H90)."""
    out = []
    for i, m in enumerate(messages):
        data, depth = to_plain(m)
        if depth > COPY_DEPTH:
            checker.add(
                i, "H90", f"the message is nested more than {COPY_DEPTH} levels deep, or contains itself"
            )
        elif depth > NESTING_LIMIT:
            what = (
                f"the message is nested {depth} levels deep; servers' JSON parsers refuse more than "
                f"{NESTING_LIMIT} (pydantic) or 128 (serde_json)"
            )
            checker.add(i, "H90", what)
        out.append(data)
    return out


def _check(messages: list[Any], checker: _Checker) -> list[Any]:
    """Run every message rule over ``messages``; return them as plain data."""
    msgs = _read(messages, checker)
    if not msgs:
        checker.add(None, "H00", "the messages list is empty", variant="empty", param="messages")
    for i, m in enumerate(msgs):
        checker.message(i, m, len(msgs) - 1)
    checker.structure(msgs)
    checker.dialect_rules(msgs)
    return msgs


def _sorted(problems: list[HistoryProblem]) -> list[HistoryProblem]:
    return sorted(problems, key=lambda p: -1 if p.index is None else p.index)


def validate_history(messages: Sequence[Any], dialect: str | Dialect = "openai") -> list[HistoryProblem]:
    """Every problem the server of ``dialect`` would reject (errors) or that is fragile
    (warnings), ordered by message index; ``[]`` when the history is valid.

    ``messages`` holds dicts or the SDK's message models, as passed to ``create(messages=...)``.
    Anything else (``None``, a string, a dict) is one H00 problem, not an exception. The cost is
    linear in the size of the history, whatever it holds.
    """
    checker = _Checker(get_dialect(dialect))
    msgs = _as_list(messages)
    if msgs is None:
        _not_a_list(checker, messages, "messages")
    else:
        _check(msgs, checker)
    return _sorted(checker.problems)


def validate_request(
    body: Mapping[str, Any] | None = None, dialect: str | Dialect = "openai", **fields: Any
) -> list[HistoryProblem]:
    """:func:`validate_history` of the request's ``messages`` plus the request-level rules on
    ``tools``, ``tool_choice``, ``parallel_tool_calls`` and ``n`` (H13-H17, H30, H31, H34,
    H91-H93).

    The request is ``body`` (the keyword arguments of ``chat.completions.create``, or a saved
    request body), the keyword arguments, or both (keywords win)::

        validate_request({"messages": msgs, "tools": tools})
        validate_request(messages=msgs, tools=tools, tool_choice="auto")
        validate_request(**create_kwargs)

    ``tools`` given as another iterable than a list is read once, here: pass the same list to the
    request. Request-level problems have ``index=None``.
    """
    d = get_dialect(dialect)
    checker = _Checker(d)
    if body is not None and not isinstance(body, Mapping):
        checker.add(None, "H00", f"the request is {_json_type(body)}, not an object", param="body")
        return checker.problems
    request = {**(body or {}), **fields}
    raw_messages = request.get("messages")
    messages = _as_list(raw_messages)
    if messages is None:
        _not_a_list(checker, raw_messages, "messages")
        views: list[Any] = []
    else:
        views = _check(messages, checker)
    has_tools, tools = _offered_tools(checker, request)
    for key in ("tool_choice", "parallel_tool_calls"):
        if request.get(key) is not None and not has_tools:
            what = f"{key} is set but the request has no tools"
            checker.add(None, "H17", what, variant=key, param=key, key=key)
    if has_tools and request.get("tool_choice") is not None:
        _check_tool_choice(checker, request["tool_choice"], tools)
    if not has_tools and any(
        isinstance(m, Mapping) and (_tool_calls(m) or m.get("role") == "tool") for m in views
    ):
        checker.add(None, "H31", "the history has tool calls but the request has no tools")
    if request.get("n") not in (None, 1):
        checker.add(None, "H34", f"n is {request.get('n')!r}; this server only produces one choice")
    return _sorted(checker.problems)


def _offered_tools(checker: _Checker, request: Mapping[str, Any]) -> tuple[bool, dict[str, str]]:
    """Check ``tools``: whether the request offers any, and their names and kinds
    (``"function"``/``"custom"``) where they have one."""
    raw = request.get("tools")
    if raw is None:
        return False, {}
    tools = _as_list(raw)
    if tools is None:
        checker.add(None, "H92", f"tools is {_json_type(raw)}, not a list of tools", param="tools")
        return False, {}
    if not tools:
        checker.add(None, "H16", "tools is an empty list; omit the key instead", param="tools")
    if len(tools) > 128:
        checker.add(None, "H15", f"{len(tools)} tools", param="tools", length=len(tools))
    offered: dict[str, str] = {}
    for k, tool in enumerate(tools):
        name = _check_tool(checker, k, _plain(tool))
        if name is None:
            continue
        if name[0] in offered:
            checker.add(None, "H30", f"two tools are named {_quote(name[0])}", param=f"tools[{k}]")
        offered.setdefault(*name)
    return bool(tools), offered


def _check_tool(checker: _Checker, k: int, data: Any) -> tuple[str, str] | None:
    """Check one tool; ``(name, kind)`` when it has a name."""
    if not isinstance(data, Mapping):
        checker.add(None, "H92", f"tool {k} is {_json_type(data)}, not an object", param=f"tools[{k}]")
        return None
    kind = data.get("type")
    if kind not in ("function", "custom"):
        what = f'tool {k} has no "type": "function"' if kind is None else f"tool {k} has type {kind!r}"
        checker.add(None, "H92", what, param=f"tools[{k}].type")
    part = "custom" if kind == "custom" else "function"
    body = data.get(part)
    if not isinstance(body, Mapping):
        checker.add(None, "H11", f"tool {k} has no {part}", param=f"tools[{k}].{part}")
        return None
    name = body.get("name")
    description = body.get("description")
    if isinstance(description, str) and len(description) > 1024:
        param = f"tools[{k}].{part}.description"
        what = f"tool {name!r} has a {len(description)}-character description"
        checker.add(None, "H14", what, param=param, length=len(description))
    if part == "function" and "parameters" in body:
        _check_schema(checker, k, name, body["parameters"])
    if not isinstance(name, str) or not name:
        checker.add(None, "H11", f"tool {k} has no name", param=f"tools[{k}].{part}.name")
        return None
    checker.function_name(None, name, f"tools[{k}].{part}.name")
    return name, part


def _check_schema(checker: _Checker, k: int, name: Any, schema: Any) -> None:
    """H91: ``parameters`` must be a JSON Schema object, valid against its metaschema."""
    param = f"tools[{k}].function.parameters"
    if not isinstance(schema, Mapping):
        what = f"the parameters of tool {_quote(name)} are {_json_type(schema)}, not a JSON Schema object"
        checker.add(None, "H91", what, param=param, name=name)
        return
    try:
        text = json.dumps(schema, sort_keys=True, allow_nan=False)
    except Exception:  # not JSON: checked as it is, never remembered
        text = None
    if text is not None and len(text) <= _REMEMBERED_SCHEMA_CHARS:
        problem = _schema_problem_of_text(text)
    else:
        problem = _schema_problem(schema)
    if problem is not None:
        checker.add(None, "H91", problem.format(name=_quote(name)), param=param, name=name)


# A run sends the same tools with every request, and checking a schema against its metaschema costs
# milliseconds (jsonschema walks the whole metaschema): each schema's verdict is kept, by its
# canonical JSON text, for schemas up to this size and at most 256 of them.
_REMEMBERED_SCHEMA_CHARS = 64 * 1024


@functools.lru_cache(maxsize=256)
def _schema_problem_of_text(text: str) -> str | None:
    return _schema_problem(json.loads(text))


def _schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a valid JSON Schema (``{name}`` stands for the tool), or None."""
    found = schema_error(schema)
    if found is None:
        return None
    return "the parameters of tool {name} " + found[0].replace("{", "{{").replace("}", "}}")


def schema_error(schema: Any) -> tuple[str, BaseException] | None:
    """Why ``schema`` is not a valid JSON Schema, and the exception that said so; None when it is.

    The reason is short and names the offending part of the schema, ``are not a valid JSON Schema:
    at properties/limit/minimum: 'x' is not of type 'number'`` (jsonschema's own message for the
    one error it picked as the best match, never its dump of the whole metaschema), to follow
    "the parameters of tool X". One wording for the history check (H91) and ``ts.tool``, which
    raises it when a tool is defined (``tools/_definition.py``).
    """
    import jsonschema  # imported on first use, like the core's schema checks

    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        path = "/".join(str(p) for p in exc.absolute_path)[:100] or "(root)"
        return f"are not a valid JSON Schema: at {path}: {_clip(exc.message)}", exc
    except Exception as exc:  # a schema too deep or too odd to check is not known to be valid
        return f"could not be checked as a JSON Schema: {_clip(repr(exc))}", exc
    return None


def _check_tool_choice(checker: _Checker, choice: Any, offered: Mapping[str, str]) -> None:
    """H93: ``tool_choice`` is ``"none"``/``"auto"``/``"required"`` or names an offered tool."""
    if isinstance(choice, str):
        if choice not in ("none", "auto", "required"):
            what = f'tool_choice is {choice!r}, not "none", "auto", "required" or a named tool'
            checker.add(None, "H93", what, param="tool_choice")
        return
    data = _plain(choice)
    kind = data.get("type") if isinstance(data, Mapping) else None
    if kind in ("function", "custom"):
        body = data.get(kind)
        names = [body.get("name") if isinstance(body, Mapping) else None]
        where = f"tool_choice.{kind}.name"
    elif kind == "allowed_tools":
        allowed = data.get("allowed_tools")
        listed = allowed.get("tools") if isinstance(allowed, Mapping) else None
        if not isinstance(listed, list) or not listed:
            checker.add(None, "H93", "tool_choice allows no tools", param="tool_choice.allowed_tools")
            return
        names = []
        for tool in listed:
            entry = tool.get(tool.get("type", "function")) if isinstance(tool, Mapping) else None
            names.append(entry.get("name") if isinstance(entry, Mapping) else None)
        where = "tool_choice.allowed_tools.tools"
    else:
        what = f"tool_choice is {_json_type(choice)} without a known type ({kind!r})"
        checker.add(None, "H93", what, param="tool_choice")
        return
    known = _clip(", ".join(sorted(offered)[:20])) or "none"
    for name in names:
        if not isinstance(name, str) or not name:
            checker.add(None, "H93", "tool_choice names no tool", param=where)
        elif name not in offered:
            what = f"tool_choice names {_quote(name)}, which the request does not offer (offered: {known})"
            checker.add(None, "H93", what, param=where, name=name)


def ensure_valid_history(messages: Sequence[Any], dialect: str | Dialect = "openai") -> None:
    """Raise :class:`HistoryError`, listing every problem, when the history has any error."""
    problems = validate_history(messages, dialect)
    if any(p.severity == "error" for p in problems):
        raise HistoryError(problems)
