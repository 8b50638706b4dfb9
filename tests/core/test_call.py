"""``core._owner`` and ``core._call``: the owner of a call's life (its table of states and events),
the call buffer, and what users may do with a call."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import toolstitch as ts
from toolstitch.core._call import (
    ToolCall,
    has_lone_surrogate,
    parse_arguments,
    text_size,
)
from toolstitch.core._limits import Limits
from toolstitch.core._owner import (
    EVENTS,
    TRANSITIONS,
    CallOwner,
    Finish,
    Identity,
    Statement,
    render_table,
)
from toolstitch.core._seal import CallChecks

CHECKS = CallChecks(None)


class Life:
    """One call and its owner, driven through the owner's events as a reader would."""

    def __init__(self, limits: Limits | None = None, clock: float = 0.0, name: str | None = "f") -> None:
        self.owner = CallOwner(limits or Limits(), lambda: clock)
        self.call = self.owner.open(0, 0, 0, clock)
        self.notes: list[Any] = []
        self.events: list[Any] = []
        self.owner.identify(self.call, Identity(None, name, "function", None), self.events, opening=True)
        self.owner.fragment(self.call, ("", None, False), self.events)

    def append(self, text: str) -> ToolCall:
        self.owner.fragment(self.call, (text, None, False), self.events)
        self.notes.extend(self.owner.take_notes())
        return self.call

    def state(self, text: str | None) -> ToolCall:
        self.owner.state(self.call, Statement(text, None, None, "a statement"), self.events)
        self.notes.extend(self.owner.take_notes())
        return self.call

    def seal(self, t: float = 0.0) -> ToolCall:
        self.owner.seal(self.call, Finish(t, CHECKS, True))
        self.notes.extend(self.owner.take_notes())
        return self.call


def test_open_then_ready() -> None:
    life = Life(clock=2.0)
    call = life.append('{"a": ')
    life.append("1}")
    assert call.status == "open" and not call.sealed
    # Scanned when asked (rule 2), and timed then: the clock the call was given says 2.0.
    assert call.scanner.complete and call.metrics.arguments_complete_at == 2.0
    life.seal(3.0)
    assert call.ready and call.parsed == {"a": 1} and call.metrics.sealed_at == 3.0


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", ts.errors.EmptyArguments),
        ('{"a": ', ts.errors.MalformedArguments),
        ("[1]", ts.errors.ArgumentsNotAnObject),
        ('{"a": NaN}', ts.errors.MalformedArguments),
        ('{"a": "\udc80"}', ts.errors.MalformedArguments),
    ],
)
def test_open_then_invalid(text: str, error: type[Exception]) -> None:
    life = Life()
    life.append(text)
    call = life.seal()
    assert call.status == "invalid" and isinstance(call.error, error)
    assert call.arguments == text


def test_sealing_without_a_name_is_invalid() -> None:
    life = Life(name=None)
    life.append("{}")
    assert isinstance(life.seal().error, ts.errors.MissingName)


def test_open_then_incomplete_and_sealed_calls_are_frozen() -> None:
    life = Life()
    call = life.append('{"a": 1')
    assert life.owner.end(call, "cut")
    assert call.status == "incomplete" and isinstance(call.error, ts.errors.CallIncomplete)
    life.seal()
    assert call.status == "incomplete"
    life.append("}")
    assert call.status == "incomplete" and call.arguments == '{"a": 1'


def test_a_late_fragment_refuses_a_ready_call_and_keeps_its_text() -> None:
    life = Life()
    life.append("{}")
    call = life.seal()
    life.append("x")
    assert call.arguments == "{}" and isinstance(call.error, ts.errors.LateFragment)
    assert any(isinstance(e, ts.events.ToolCallInvalid) for e in life.events)


def test_the_byte_limit_keeps_a_sample_only() -> None:
    life = Life(Limits(max_argument_bytes=10, sample_chars=4))
    call = life.append('{"a": "' + "x" * 100 + '"}')
    assert call.status == "invalid" and call.arguments == '{"a"'
    life.append("more")
    assert call.arguments == '{"a"' and call.metrics.bytes > 100


def test_the_stream_budget_counts_every_call() -> None:
    owner = CallOwner(Limits(max_stream_bytes=10), lambda: 0.0)
    calls = [owner.open(0, i, i, 0.0) for i in range(3)]
    for call in calls:
        owner.fragment(call, ("abcd", None, False), [])
    assert [c.status for c in calls] == ["open", "open", "invalid"]
    assert isinstance(calls[2].error, ts.errors.LimitExceeded)


def test_a_taint_refuses_at_seal_even_when_the_text_parses() -> None:
    life = Life()
    life.append("{}")
    error = ts.errors.MalformedArguments("contradicted")
    life.owner.taint(life.call, error)
    assert life.seal().error is error


def test_byte_accounting_never_raises() -> None:
    assert text_size("abc") == 3
    assert text_size("é") == 2
    assert text_size("\udc80") == 3
    assert has_lone_surrogate("a\ud83d") and not has_lone_surrogate("😀") and not has_lone_surrogate("abc")
    assert parse_arguments('{"a": "\ud83d"}')[1] is not None


def test_split_surrogate_pairs_rejoin_in_the_joined_text() -> None:
    life = Life()
    life.append('{"e": "\ud83d')
    call = life.append('\ude00"}')
    # The pieces are kept as received (``chars`` counts them); the text handed out rejoins the pair.
    assert call.arguments == '{"e": "😀"}' and call.chars == len(call.arguments) + 1
    assert life.seal().ready


# -- the table ------------------------------------------------------------------------------------


def test_docs_design_shows_the_table_as_it_is() -> None:
    """Rule 12's table in docs/design.md is the one in the code, rendered (never kept by hand)."""
    design = (Path(__file__).parents[2] / "docs" / "design.md").read_text(encoding="utf-8")
    start = design.index("<!-- the table: written by core._owner.render_table")
    block = design[design.index("\n", start) + 1 : design.index("    <!-- end of the table -->")]
    assert [line.strip() for line in block.splitlines()] == render_table().splitlines()


def test_each_cell_says_where_the_call_goes() -> None:
    """No cell hides its next state in its action: an action moves nothing itself (the owner moves
    the call to the cell's state, or to ``invalid`` when the action refuses it)."""
    import inspect

    from toolstitch.core import _owner as _call

    for row in TRANSITIONS.values():
        for cell in row.values():  # type: ignore[attr-defined]
            action = cell.action
            if action is not None and action.__name__ != "unlisted":
                assert "_move(" not in inspect.getsource(action), action.__name__
    assert not [
        name
        for name, fn in vars(_call).items()
        if inspect.isfunction(fn) and fn.__module__ == _call.__name__ and _is_empty(fn)
    ]


def _is_empty(fn: Any) -> bool:
    """A function whose body is only a docstring (and perhaps ``return None``/``...``)."""
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return False
    body = tree.body[0].body  # type: ignore[attr-defined]
    rest = [n for n in body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    return all(
        isinstance(n, ast.Return) and (n.value is None or isinstance(n.value, ast.Constant)) for n in rest
    )


def test_a_cell_the_table_leaves_out_refuses_the_call_and_says_so() -> None:
    """ready + verdict is left out of the table: the call is refused (``TransitionRefused``) and
    the refusal is announced, never passed over."""
    life = Life()
    life.append("{}")
    call = life.seal()
    assert call.ready
    events: list[Any] = []
    life.owner.verdict(call, ts.errors.SchemaViolation("too late", errors=["too late"]), events)
    assert call.status == "invalid" and isinstance(call.error, ts.errors.TransitionRefused)
    assert [type(e).__name__ for e in events] == ["ToolCallInvalid"]


def test_a_call_refused_while_it_streams_is_a_state_of_its_own() -> None:
    """``refused`` (issue 44): announced ``invalid`` at the verdict, still "open" to users, its text
    kept as it arrives, sealed ``invalid`` with the seal's own error, and that verdict is no news."""
    life = Life()
    life.append('{"a": ')
    events: list[Any] = []
    error = ts.errors.SchemaViolation("no", errors=["no"])
    life.owner.verdict(life.call, error, events)
    call = life.append("1}")
    assert [type(e).__name__ for e in events] == ["ToolCallInvalid"]
    assert call.status == "open" and call.error is error and call.arguments == '{"a": 1}'
    assert TRANSITIONS["refused"]["fragment"] == TRANSITIONS["open"]["fragment"]  # the append
    assert life.owner.seal(call, Finish(0.0, CHECKS, True)) is False  # announced at the verdict
    assert call.status == "invalid" and call.error is error


@pytest.mark.parametrize("state", ["ready", "invalid"])
def test_a_sealed_calls_whole_text_resent_is_dropped_and_anything_else_refuses(state: str) -> None:
    """The owner's frozen cells: the exact text again is noted and dropped (the call unchanged);
    other text refuses a ready call and counts against a refused one."""
    life = Life()
    life.append('{"a": 1}')
    call = life.seal()
    if state == "invalid":
        life.owner.refuse(call, ts.errors.InternalFault("x"))
    before = (call.status, call.metrics.bytes)
    life.append('{"a": 1}')
    assert (call.status, call.metrics.bytes) == before
    assert [n.code for n in life.notes][-1] == "arguments_cumulative"
    life.append('{"a": 2}')
    assert call.status == "invalid" and isinstance(call.error, ts.errors.LateFragment)
    assert call.arguments == '{"a": 1}'


def test_every_state_lists_every_event() -> None:
    assert set(TRANSITIONS) == {"open", "stated", "refused", "ready", "invalid", "incomplete"}
    for row in TRANSITIONS.values():
        assert set(row) == set(EVENTS)
        # ``CallOwner.fragment`` (the hot path) runs the cell's action and moves nothing itself.
        assert row["fragment"].action is not None and row["fragment"].to is None


@pytest.mark.parametrize("late", ["x", " ", "\n", ', "unit": "f"}'])
def test_text_after_a_statement_refuses_the_call_whitespace_included(late: str) -> None:
    life = Life()
    life.append('{"city": "Paris"')
    call = life.state('{"city": "Paris"')
    assert call.status == "open" and call.stated
    life.append(late)
    assert call.status == "invalid" and isinstance(call.error, ts.errors.TransitionRefused)
    assert call.arguments == '{"city": "Paris"'
    life.seal()
    assert call.status == "invalid"


def test_a_statement_that_disagrees_refuses_and_one_that_agrees_freezes() -> None:
    life = Life()
    life.append('{"a": 1}')
    call = life.state('{"a": 2}')
    assert call.status == "invalid" and isinstance(call.error, ts.errors.TransitionRefused)
    life = Life()
    life.append('{"a": 1}')
    call = life.state('{"a": 1}')
    assert life.seal().ready


def test_a_statement_is_adopted_only_when_nothing_streamed() -> None:
    life = Life()
    call = life.state('{"a": 1}')
    assert call.arguments == '{"a": 1}' and call.stated
    assert life.seal().ready
    life = Life()
    life.owner.state(life.call, Statement('{"a": 1}', None, None, "w", adopt=False), [])
    assert life.call.status == "invalid"


def test_a_statement_after_seal_is_held_to_the_sealed_text() -> None:
    life = Life()
    life.append('{"a": 1}')
    call = life.seal()
    life.state('{"a": 1}')
    assert call.ready
    life.state('{"a": 2}')
    assert call.status == "invalid"


def test_a_long_id_is_kept_as_sent_and_one_past_the_bound_refuses_naming_the_id() -> None:
    real = "call_" + "a" * 32 + "__thought__" + "x" * 5500
    owner = CallOwner(Limits(), lambda: 0.0)
    call = owner.open(0, 0, 0, 0.0)
    owner.identify(call, Identity(real, "f", None, None), [], opening=True)
    owner.fragment(call, ("{}", None, False), [])
    owner.seal(call, Finish(0.0, CHECKS, True))
    assert call.ready and call.id == real
    owner = CallOwner(Limits(max_id_chars=100), lambda: 0.0)
    call = owner.open(0, 0, 0, 0.0)
    owner.identify(call, Identity("c" * 101, "f", None, None), [], opening=True)
    owner.fragment(call, ("{}", None, False), [])
    assert call.status == "invalid" and isinstance(call.error, ts.errors.LimitExceeded)
    assert "id" in call.error.message and "argument" not in call.error.message.split(";")[0]


def test_no_module_but_the_owner_touches_a_calls_private_state() -> None:
    """Rule 12: outside ``core/_owner.py`` no code reads or writes a ``ToolCall``'s underscore
    attributes (its slots and private methods), but the class's own methods on ``self``
    (``core/_call.py``, its caches); the count is 0."""
    private = {n for n in ToolCall.__slots__} | {
        n for n in vars(ToolCall) if n.startswith("_") and not n.startswith("__")
    }
    root = Path(ts.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "core" / "_owner.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in private
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno} .{node.attr}")
    assert found == []


def test_users_cannot_write_a_call() -> None:
    call = Life().call
    for attr in (
        "status",
        "arguments",
        "parsed",
        "error",
        "id",
        "name",
        "index",
        "choice",
        "metrics",
        "anomalies",
    ):
        with pytest.raises(AttributeError):
            setattr(call, attr, None)
    public = {n for n in dir(call) if not n.startswith("_")}
    assert not public & {"append", "seal", "invalidate", "mark_incomplete", "replace_arguments"}
    with pytest.raises(AttributeError):
        call.new_attribute = 1  # type: ignore[attr-defined]
