"""Strict-mode schemas (``tools/_strict.py``), tested directly.

What a user relies on: a tool is sent with ``"strict": true`` only when its schema really is one that
OpenAI's strict mode accepts; optional parameters become required-but-nullable (null = the default);
what strict mode cannot say (maps, open objects, ``not``) turns strict mode off instead of sending a
schema the server rejects; hostile hand-written schemas never raise.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from toolstitch.tools._strict import clean_schema, is_strict_schema, strict_schema


class Address(BaseModel):
    street: str
    city: str = "Paris"


class Order(BaseModel):
    item: str = Field(description="What to buy", min_length=1)
    quantity: int = 1
    note: str | None = None
    ship_to: Address


def test_optional_fields_become_required_and_nullable_with_the_default_said() -> None:
    out = strict_schema(Order.model_json_schema())
    assert out is not None and is_strict_schema(out)
    assert out["required"] == ["item", "quantity", "note", "ship_to"]
    assert out["additionalProperties"] is False
    quantity = out["properties"]["quantity"]
    assert {"type": "null"} in quantity["anyOf"] and "null means the default: 1" in quantity["description"]
    # Already nullable: stays as it is, no second null.
    assert sum(v.get("type") == "null" for v in out["properties"]["note"]["anyOf"]) == 1
    # A narrowing keyword is dropped (pydantic still checks it), the description is kept.
    item = out["properties"]["item"]
    assert "minLength" not in item and item["description"] == "What to buy"


def test_nested_models_are_closed_too() -> None:
    out = strict_schema(Order.model_json_schema())
    assert out is not None
    address = out["$defs"]["Address"]
    assert address["additionalProperties"] is False and address["required"] == ["street", "city"]


def test_titles_are_stripped_and_the_input_is_not_mutated() -> None:
    schema = Order.model_json_schema()
    before = repr(schema)
    out = strict_schema(schema)
    assert repr(schema) == before
    assert out is not None and "title" not in out and "title" not in out["properties"]["item"]
    assert "title" not in clean_schema(schema)


def test_a_ref_with_siblings_is_inlined() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A", "description": "the a"}},
        "required": ["a"],
        "$defs": {"A": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}},
    }
    out = strict_schema(schema)
    assert out is not None and is_strict_schema(out)
    assert "$ref" not in out["properties"]["a"] and out["properties"]["a"]["description"] == "the a"


def test_what_strict_mode_cannot_say_turns_it_off() -> None:
    assert strict_schema({"type": "object", "additionalProperties": {"type": "string"}}) is None  # a map
    assert strict_schema({"type": "object"}) is None  # free-form object
    assert strict_schema({"type": "object", "properties": {"a": {"not": {"type": "null"}}}}) is None
    assert (
        strict_schema({"type": "object", "properties": {"a": {"$ref": "https://x/y", "title": "t"}}}) is None
    )
    assert strict_schema({"type": "string"}) is None  # parameters must be an object
    assert strict_schema({"type": "object", "properties": {"a": {"type": "array"}}}) is None


def test_a_recursive_ref_with_siblings_is_bounded() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/N", "description": "node"}},
        "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N", "description": "d"}}}},
    }
    assert strict_schema(schema) is None


def test_is_strict_schema_judges_raw_schemas_as_sent() -> None:
    closed = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert is_strict_schema(closed)
    assert not is_strict_schema({**closed, "required": []})  # every property must be required
    assert not is_strict_schema({**closed, "additionalProperties": True})
    assert not is_strict_schema({"type": "object", "properties": {"a": {"type": "string", "default": "x"}}})
    assert not is_strict_schema({"type": "array", "items": {"type": "string"}})  # top level: an object


def test_hostile_hand_written_schemas_never_raise() -> None:
    hostile: list[Any] = [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": 5},
        {"type": "object", "properties": {"a": {"type": "string", "format": ["date"]}}},
        {"type": "object", "properties": {"a": {"anyOf": "x"}}},
        {"type": "object", "properties": "nope"},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing", "title": "t"}}},
        {"type": "object", "properties": {"a": 3}, "required": ["a", 1]},
        {"type": "object", "$defs": [1, 2]},
        None,
        [],
    ]
    for schema in hostile:
        strict_schema(schema) if isinstance(schema, dict) else None
        is_strict_schema(schema)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=15,
)
_keyword = st.sampled_from(
    ["type", "properties", "required", "additionalProperties", "items", "anyOf", "$ref", "$defs", "default",
     "format", "enum", "description", "allOf", "oneOf", "title"]
)  # fmt: skip
_schema = st.recursive(
    st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "null", "object", "array"])}),
    lambda inner: st.dictionaries(_keyword, inner | _json, max_size=5),
    max_leaves=12,
)


@given(
    st.fixed_dictionaries(
        {"type": st.just("object"), "properties": st.dictionaries(st.text(max_size=4), _schema)}
    )
)
def test_a_strict_schema_made_from_anything_is_strict_or_none(schema: dict[str, Any]) -> None:
    out = strict_schema(schema)  # never raises
    if out is not None:
        assert is_strict_schema(out)


@given(_schema | _json)
def test_is_strict_schema_never_raises(schema: Any) -> None:
    assert is_strict_schema(schema) in (True, False)
