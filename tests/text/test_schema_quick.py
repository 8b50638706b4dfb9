"""The quick schema check says yes only where ``jsonschema`` says yes (``text/_schema_quick.py``).

Schemas are generated in and around the subset the quick check compiles (so that both the compiled
and the refused branches run), values are generated to fit them often and miss them often, and
every value the predicate accepts must be valid for ``jsonschema`` under the same schema, whichever
draft ``jsonschema`` picks for it.
"""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

import toolstitch as ts
from tests.conftest import examples
from toolstitch.text._schema_quick import compile_quick

_TYPES = ["object", "array", "string", "integer", "number", "boolean", "null"]
_NAMES = st.sampled_from(["a", "b", "c", "path", "text"])


def _schemas() -> st.SearchStrategy[Any]:
    leaf = st.one_of(
        st.fixed_dictionaries({"type": st.sampled_from(_TYPES)}),
        st.fixed_dictionaries(
            {"type": st.lists(st.sampled_from(_TYPES), min_size=1, max_size=3, unique=True)}
        ),
        st.just({}),
        st.fixed_dictionaries({"type": st.just("string"), "description": st.text(max_size=5)}),
        st.fixed_dictionaries({"enum": st.lists(st.sampled_from([1, True, "x", None, 1.0]), min_size=1)}),
        st.fixed_dictionaries({"type": st.just("integer"), "minimum": st.integers(-2, 2)}),
    )

    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        obj = st.fixed_dictionaries(
            {"type": st.sampled_from(["object", ["object", "null"]])},
            optional={
                "properties": st.dictionaries(_NAMES, inner, max_size=3),
                "required": st.lists(_NAMES, max_size=3, unique=True),
                "additionalProperties": st.one_of(st.booleans(), st.just({"type": "string"})),
            },
        )
        arr = st.fixed_dictionaries({"type": st.just("array")}, optional={"items": inner})
        return st.one_of(obj, arr)

    return st.recursive(leaf, extend, max_leaves=6)


_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 3),
        st.sampled_from([0.0, 1.0, -1.5, 2.0]),
        st.sampled_from(["", "x", "notes.txt"]),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_NAMES, inner, max_size=4)),
    max_leaves=8,
)


@settings(max_examples=examples(1500), deadline=None)
@given(
    schema=_schemas(), values=st.lists(_VALUES, min_size=1, max_size=6), draft=st.sampled_from([None, 4, 7])
)
def test_a_quick_yes_is_a_jsonschema_yes(schema: Any, values: list[Any], draft: int | None) -> None:
    quick = compile_quick(schema)
    if quick is None:
        return
    cls = {
        None: jsonschema.Draft202012Validator,
        4: jsonschema.Draft4Validator,
        7: jsonschema.Draft7Validator,
    }[draft]
    validator = cls(schema)
    for value in values:
        if quick(value):
            assert validator.is_valid(value), (schema, value)


def test_the_common_shapes_compile_and_the_rest_does_not() -> None:
    """The subset is what tool schemas use; anything else is left to jsonschema."""
    write_file = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "text": {"type": "string", "description": "d"}},
        "required": ["path", "text"],
        "additionalProperties": False,
    }
    quick = compile_quick(write_file)
    assert quick is not None
    assert quick({"path": "a", "text": "b"})
    assert not quick({"path": "a"}) and not quick({"path": "a", "text": 1}) and not quick([])
    assert not quick({"path": "a", "text": "b", "x": 1}) and not quick({"path": True, "text": "b"})
    numbers = compile_quick(
        {"type": "object", "properties": {"n": {"type": "integer"}, "m": {"type": "number"}}}
    )
    assert numbers is not None
    assert numbers({"n": 1, "m": 2.5}) and not numbers({"n": True}) and not numbers({"n": 1.0})
    for outside in (
        {"type": "string", "enum": ["a"]},
        {"type": "string", "format": "date"},
        {"$ref": "#/$defs/a", "$defs": {"a": {}}},
        {"anyOf": [{"type": "string"}]},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "array", "items": [{"type": "string"}]},
        {"type": "strange"},
        {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object"},
    ):
        assert compile_quick(outside) is None, outside


def test_a_call_the_quick_check_refuses_gets_jsonschemas_verdict_and_messages() -> None:
    """A quick no is not a verdict: the sealed call carries jsonschema's own error, and a value the
    quick check cannot vouch for (``1.0`` for an integer) is still accepted where jsonschema does."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {
                    "type": "object",
                    "properties": {"n": {"type": "integer"}},
                    "required": ["n"],
                    "additionalProperties": False,
                },
            },
        }
    ]
    for arguments, ready in (('{"n": 2}', True), ('{"n": 2.0}', True), ('{"n": "2"}', False), ("{}", False)):
        chunks = ts.testing.tool_call_chunks([("c1", "f", arguments)], pieces=2)
        acc = ts.Accumulator(tools=tools)
        for c in chunks:
            acc.feed(c)
        call = acc.tool_calls[0]
        assert call.ready is ready, (arguments, call.error)
        if not ready:
            assert isinstance(call.error, ts.errors.SchemaViolation)
            assert "is not of type 'integer'" in str(call.error) or "'n' is a required property" in str(
                call.error
            )


def test_each_type_agrees_with_every_draft() -> None:
    """Every type name against every kind of JSON value, under drafts 4, 7 and 2020-12: where the
    quick check says yes, each draft does; and it says yes for the plain cases."""
    samples: list[Any] = [None, True, False, 0, 1, -7, 0.0, 1.0, 2.5, "", "s", [], [1], {}, {"a": 1}]
    drafts = (jsonschema.Draft4Validator, jsonschema.Draft7Validator, jsonschema.Draft202012Validator)
    for name in _TYPES:
        quick = compile_quick({"type": name})
        assert quick is not None
        accepted = [v for v in samples if quick(v)]
        assert accepted, name
        for value in accepted:
            for cls in drafts:
                assert cls({"type": name}).is_valid(value), (name, value, cls.__name__)


def test_a_quick_check_that_fails_leaves_the_verdict_to_jsonschema(monkeypatch: Any) -> None:
    """Fail closed: if the quick predicate itself raises, jsonschema still decides (yes and no)."""
    from toolstitch.core import _schema

    def broken(schema: Any) -> Any:
        def check(value: Any) -> bool:
            raise RuntimeError("quick check broke")

        return check

    monkeypatch.setattr(_schema, "compile_quick", broken)
    monkeypatch.setattr(_schema, "_cache", {})
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    checks = _schema.ToolSchemas([{"type": "function", "function": {"name": "f", "parameters": schema}}])
    assert checks.check("f", {"n": 1}, '{"n": 1}') is None
    refused = checks.check("f", {"n": "1"}, '{"n": "1"}')
    assert isinstance(refused, ts.errors.SchemaViolation)
