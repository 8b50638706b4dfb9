"""Tools from functions and raw schemas: the schema the model is shown, and how its arguments bind.

What a user relies on: the schema says what the function takes (types, defaults, docstring), strict
mode is used where OpenAI accepts it, and what the model sends under that schema reaches the function
as the Python values a direct call would get.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field, TypeAdapter

from toolstitch import ToolCall
from toolstitch.tools import Tool, Toolbox, tool
from toolstitch.tools._definition import parse_docstring
from toolstitch.tools._strict import is_strict_schema, strict_schema

try:  # openai >= 1.99.2 names the function-tool types apart from the new custom-tool ones
    from openai.types.chat import ChatCompletionFunctionToolParam
except ImportError:  # older releases: the same type under its former name
    from openai.types.chat import ChatCompletionToolParam as ChatCompletionFunctionToolParam  # type: ignore[assignment,no-redef]


class Address(BaseModel):
    street: str
    zip: str = "00000"


class HotelQuery(BaseModel):
    """Search hotels in a city."""

    city: str
    stars: int = Field(3, ge=1, le=5, description="minimum stars")
    near: Address | None = None
    tags: list[str] = []


@tool
def get_weather(city: str, unit: Literal["c", "f"] = "c", days: int | None = None) -> dict[str, Any]:
    """Get the current weather.

    Args:
        city: The city name,
            with its country.
        unit: Temperature unit.
        days (int): How many days ahead.

    Returns:
        The weather.
    """
    return {"city": city, "unit": unit, "days": days}


def walk(schema: Any) -> list[dict[str, Any]]:
    """Every sub-schema (object nodes) of a JSON schema."""
    out: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        out.append(schema)
        for key in ("properties", "$defs"):
            for sub in (schema.get(key) or {}).values():
                out.extend(walk(sub))
        for key in ("anyOf",):
            for sub in schema.get(key) or []:
                out.extend(walk(sub))
        if isinstance(schema.get("items"), dict):
            out.extend(walk(schema["items"]))
    return out


def assert_openai_strict(schema: dict[str, Any]) -> None:
    """The rules OpenAI's strict mode enforces on a function's parameters."""
    assert schema["type"] == "object"
    for node in walk(schema):
        assert "default" not in node
        if "properties" in node:
            assert node["additionalProperties"] is False
            assert sorted(node["required"]) == sorted(node["properties"])
        if "$ref" in node:
            assert len(node) == 1, "strict mode refuses keywords beside $ref"


# ----------------------------------------------------------------------------- schemas


def test_schema_comes_from_type_hints_and_docstring() -> None:
    definition = get_weather.definition()
    TypeAdapter(ChatCompletionFunctionToolParam).validate_python(definition)
    function = definition["function"]
    assert function["name"] == "get_weather"
    assert function["description"] == "Get the current weather."  # no Args/Returns block repeated
    assert function["strict"] is True
    props = function["parameters"]["properties"]
    assert props["city"] == {"type": "string", "description": "The city name, with its country."}
    assert {"enum": ["c", "f"], "type": "string"} in props["unit"]["anyOf"]
    assert "Temperature unit." in props["unit"]["description"]
    assert props["days"]["description"] == "How many days ahead."
    assert_openai_strict(function["parameters"])
    jsonschema.Draft202012Validator.check_schema(function["parameters"])


def test_a_defaulted_parameter_is_required_but_nullable_and_null_means_the_default() -> None:
    kwargs, problems = get_weather.bind({"city": "Paris", "unit": None, "days": None})
    assert problems == []
    assert kwargs is not None
    assert get_weather(**kwargs) == {"city": "Paris", "unit": "c", "days": None}


def test_a_provider_that_ignores_strict_may_leave_defaults_out() -> None:
    kwargs, problems = get_weather.bind({"city": "Paris"})
    assert problems == [] and kwargs == {"city": "Paris"}


def test_strict_arguments_the_model_may_send_are_accepted_by_the_binder() -> None:
    schema = get_weather.parameters
    for arguments in (
        {"city": "Oslo", "unit": "f", "days": 2},
        {"city": "Oslo", "unit": None, "days": None},
    ):
        jsonschema.validate(arguments, schema)
        assert get_weather.bind(arguments)[1] == []


def test_invalid_arguments_list_every_problem_with_its_path_and_value() -> None:
    kwargs, problems = get_weather.bind({"city": 3, "unit": "kelvin", "colour": "red"})
    assert kwargs is None
    assert "city: Input should be a valid string (got 3)" in problems
    assert any(p.startswith("unit: ") and "'kelvin'" in p for p in problems)
    assert "colour: unexpected argument (not in the schema)" in problems


def test_missing_arguments_and_non_objects_are_refused() -> None:
    assert get_weather.bind({})[1] == ["city: required argument is missing"]
    assert get_weather.bind(["Paris"])[1] == ["(arguments): must be a JSON object, got list"]


def test_a_single_pydantic_model_parameter_takes_the_models_fields_as_arguments() -> None:
    @tool(read_only=True, timeout=5)
    async def search_hotels(q: HotelQuery) -> list[str]:
        return [q.city]

    params = search_hotels.parameters
    assert set(params["properties"]) == {"city", "stars", "near", "tags"}
    assert search_hotels.definition()["function"]["description"] == "Search hotels in a city."
    assert_openai_strict(params)
    kwargs, problems = search_hotels.bind(
        {"city": "Rome", "stars": None, "near": {"street": "Via Appia", "zip": None}, "tags": None}
    )
    assert problems == [] and kwargs is not None
    query = kwargs["q"]
    assert isinstance(query, HotelQuery)
    assert query.stars == 3 and query.near == Address(street="Via Appia") and query.tags == []
    assert search_hotels.is_async and search_hotels.read_only and search_hotels.timeout == 5
    assert asyncio.run(search_hotels(query)) == ["Rome"]


def test_a_model_parameter_refuses_unknown_keys_even_when_the_model_ignores_extras() -> None:
    @tool
    def search(q: HotelQuery) -> None: ...

    kwargs, problems = search.bind({"city": "Rome", "stras": 4})
    assert kwargs is None
    assert problems == ["stras: unexpected argument (not in the schema)"]
    assert search.bind({"city": "Rome", "stars": 9})[1] == [
        "stars: Input should be less than or equal to 5 (got 9)"
    ]


def test_an_open_map_cannot_be_strict_so_the_full_schema_is_sent_without_strict() -> None:
    @tool
    def tag(labels: dict[str, int], note: str = "none") -> None:
        """Tag things.

        :param labels: label counts
        :param note: a note
        """

    function = tag.definition()["function"]
    assert "strict" not in function and tag.strict is False
    params = function["parameters"]
    assert params["properties"]["note"]["default"] == "none"
    assert params["required"] == ["labels"]
    assert params["additionalProperties"] is False
    assert params["properties"]["labels"]["description"] == "label counts"
    assert tag.bind({"labels": {"a": 1}}) == ({"labels": {"a": 1}}, [])
    with pytest.raises(ValueError, match="strict mode"):
        tool(strict=True)(tag.fn)


def test_strict_false_sends_the_plain_schema() -> None:
    plain = tool(strict=False)(get_weather.fn)
    assert plain.strict is False
    assert plain.parameters["required"] == ["city"]
    assert plain.parameters["properties"]["unit"]["default"] == "c"
    # Without strict mode, null is not a stand-in for the default.
    assert plain.bind({"city": "x", "unit": None})[0] is None


def test_parameter_names_that_shadow_basemodel_attributes_work() -> None:
    @tool
    def odd(json: str, model_config: int = 1, copy: bool = False) -> tuple[str, int, bool]:
        return json, model_config, copy

    assert set(odd.parameters["properties"]) == {"json", "model_config", "copy"}
    kwargs, problems = odd.bind({"json": "x", "model_config": 2, "copy": None})
    assert problems == [] and kwargs is not None
    assert odd(**kwargs) == ("x", 2, False)


def test_annotated_field_descriptions_and_constraints_are_kept() -> None:
    @tool
    def pick(n: Annotated[int, Field(ge=1, description="how many")]) -> int:
        return n

    prop = pick.parameters["properties"]["n"]
    assert prop["description"] == "how many" and prop["minimum"] == 1
    assert pick.bind({"n": 0})[1] == ["n: Input should be greater than or equal to 1 (got 0)"]


def test_a_toolcall_parameter_is_injected_not_shown_to_the_model() -> None:
    @tool
    def place_order(item: str, call: ToolCall) -> str:
        return f"{item}:{call.id}"

    assert set(place_order.parameters["properties"]) == {"item"}
    assert place_order.call_param == "call"


# ----------------------------------------------------------------------------- raw schemas


RAW = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
    "required": ["q"],
}


def test_a_raw_schema_tool_is_sent_unchanged_and_checked_with_jsonschema() -> None:
    def search(**kwargs: Any) -> dict[str, Any]:
        """Search the index."""
        return kwargs

    t = Tool.from_schema(search, name="search", parameters=RAW)
    function = t.definition()["function"]
    assert function["parameters"] == RAW and "strict" not in function
    assert function["description"] == "Search the index."
    assert t.bind({"q": "x", "limit": 2}) == ({"q": "x", "limit": 2}, [])
    kwargs, problems = t.bind({"limit": 0})
    assert kwargs is None
    assert "(arguments): 'q' is a required property" in problems
    assert "limit: 0 is less than the minimum of 1" in problems


def test_a_raw_schema_that_already_complies_is_marked_strict() -> None:
    closed = {**RAW, "required": ["q", "limit"], "additionalProperties": False}
    assert tool(parameters=closed, name="s")(lambda **kw: kw).strict is True
    with pytest.raises(ValueError, match="strict"):
        tool(parameters=RAW, name="s", strict=True)(lambda **kw: kw)


def test_a_broken_raw_schema_fails_at_definition_time() -> None:
    with pytest.raises(ValueError, match="tool 'bad'") as info:
        Tool.from_schema(lambda **kw: None, name="bad", parameters={"type": "object", "minProperties": "x"})
    assert isinstance(info.value.__cause__, jsonschema.SchemaError)
    with pytest.raises(ValueError, match="tool 'bad' must be a JSON schema of type 'object'"):
        Tool.from_schema(lambda **kw: None, name="bad", parameters={"type": "string"})


BROKEN_SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "limit": {"type": "integer", "minimum": "one"}},
}


def _short_and_to_the_point(error: ValueError) -> None:
    """The error names the tool, the offending part of the schema and jsonschema's short message,
    not its dump of the metaschema; jsonschema's own error is the cause."""
    text = str(error)
    assert text == (
        "the parameters of tool 'search' are not a valid JSON Schema: at properties/limit/minimum: "
        "'one' is not of type 'number'"
    )
    assert isinstance(error.__cause__, jsonschema.SchemaError)
    assert "metaschema" not in text.lower() and "\n" not in text


def test_a_bad_schema_names_the_tool_and_the_part_that_is_wrong() -> None:
    def search(**kwargs: Any) -> str:
        return ""

    with pytest.raises(ValueError) as info:
        tool(parameters=BROKEN_SCHEMA)(search)
    _short_and_to_the_point(info.value)

    definition = {"type": "function", "function": {"name": "search", "parameters": BROKEN_SCHEMA}}
    with pytest.raises(ValueError) as info:
        Tool.from_definition(definition, search)
    _short_and_to_the_point(info.value)
    with pytest.raises(ValueError) as info:
        Toolbox([(definition, search)])
    _short_and_to_the_point(info.value)
    with pytest.raises(ValueError) as info:
        Toolbox().add(definition, search)
    _short_and_to_the_point(info.value)


# ----------------------------------------------------------------------------- definition errors


def test_names_providers_reject_are_refused_at_definition_time() -> None:
    with pytest.raises(ValueError, match="must match"):
        tool(name="get weather")(get_weather.fn)
    with pytest.raises(ValueError, match="must match"):
        tool(name="x" * 65)(get_weather.fn)


def test_signatures_that_cannot_be_described_are_refused() -> None:
    def star(*items: str) -> None: ...

    with pytest.raises(TypeError, match=r"\*args"):
        tool(star)


def test_only_read_only_tools_without_confirmation_may_be_eager() -> None:
    with pytest.raises(ValueError, match="read_only"):
        tool(eager=True)(get_weather.fn)
    with pytest.raises(ValueError, match="read_only"):
        tool(eager=True, read_only=True, confirm=True)(get_weather.fn)
    assert tool(read_only=True)(get_weather.fn).eager is True
    assert tool(read_only=True, confirm=True)(get_weather.fn).eager is False
    with pytest.raises(ValueError, match="timeout"):
        tool(timeout=0)(get_weather.fn)


# ----------------------------------------------------------------------------- the toolbox


def test_toolbox_definitions_and_exact_lookup() -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    box = Toolbox([get_weather, ping])
    assert [d["function"]["name"] for d in box.definitions()] == ["get_weather", "ping"]
    assert box.definitions()[1]["function"]["parameters"] == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }
    assert box.get("ping") is not None and box.get("Ping") is None and box.get("get-weather") is None
    assert "ping" in box and len(box) == 2
    with pytest.raises(ValueError, match="two tools"):
        box.add(ping)


# ----------------------------------------------------------------------------- docstrings and strict


def test_docstring_styles() -> None:
    google = parse_docstring("Do it.\n\nArgs:\n    a (int): first\n      continued\n    b: second\n")
    sphinx = parse_docstring("Do it.\n\n:param int a: first\n:param b: second\n:returns: x\n")
    numpy = parse_docstring("Do it.\n\nParameters\n----------\na : int\n    first\nb\n    second\n")
    assert google == ("Do it.", {"a": "first continued", "b": "second"})
    assert sphinx == ("Do it.", {"a": "first", "b": "second"})
    assert numpy == ("Do it.", {"a": "first", "b": "second"})


def test_strict_rewrite_inlines_refs_with_siblings_and_refuses_what_it_cannot_express() -> None:
    with_ref = {
        "type": "object",
        "$defs": {"A": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        "properties": {"a": {"$ref": "#/$defs/A", "description": "an A"}},
        "required": ["a"],
    }
    out = strict_schema(with_ref)
    assert out is not None and is_strict_schema(out)
    assert out["properties"]["a"]["description"] == "an A" and "$ref" not in out["properties"]["a"]
    tuple_schema = {"type": "object", "properties": {"p": {"type": "array", "prefixItems": [{}]}}}
    assert strict_schema(tuple_schema) is None
    assert strict_schema({"type": "object", "properties": {"m": {"type": "object"}}}) is None
