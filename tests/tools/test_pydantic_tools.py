"""Tools and calls in pydantic terms: model instances in, ``call.parsed_as(Model)``, and definitions
made by ``openai.pydantic_function_tool(Model)``."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import openai
import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

import toolstitch as ts
from tests.tools._support import calls_reply, sealed, text_reply, tool_messages_of, user
from toolstitch.errors import CallNotReadyError, SchemaViolation
from toolstitch.testing import LocalServer, StreamScript
from toolstitch.tools import Tool, Toolbox


class Item(BaseModel):
    sku: str
    qty: int = Field(ge=1)


class Order(BaseModel):
    """An order to place."""

    items: list[Item]
    note: str | None = None


received: list[Any] = []


def place_order(order: Order) -> str:
    received.append(order)
    return f"{len(order.items)} item(s)"


@pytest.fixture(autouse=True)
def _reset() -> None:
    received.clear()


GOOD = '{"items": [{"sku": "a1", "qty": 2}], "note": null}'


def test_a_pydantic_parameter_receives_the_model_instance() -> None:
    @ts.tool
    def ship(order: Order, express: bool) -> str:
        received.append(order)
        return "ok"

    with Toolbox([ts.tool(place_order), ship]) as box:
        results = box.execute(
            sealed(
                [
                    ("c1", "place_order", GOOD),
                    ("c2", "ship", json.dumps({"order": json.loads(GOOD), "express": True})),
                ]
            )
        )
    assert [r.status for r in results] == ["ok", "ok"]
    assert [type(o) for o in received] == [Order, Order]
    assert received[0].items == [Item(sku="a1", qty=2)]


def test_pydantic_function_tool_definitions_are_accepted() -> None:
    definition = openai.pydantic_function_tool(Order, name="place_order", description="Place an order.")
    with Toolbox([(definition, place_order)]) as box:
        # The definition is sent exactly as the SDK made it.
        assert box.definitions() == [dict(definition)]
        [ok, bad, extra] = box.execute(
            sealed(
                [
                    ("c1", "place_order", GOOD),
                    ("c2", "place_order", '{"items": [{"sku": "a1", "qty": 0}], "note": null}'),
                    ("c3", "place_order", '{"items": [], "note": null, "coupon": "FREE"}'),
                ]
            )
        )
    assert ok.ok and ok.value == "1 item(s)" and received == [Order(items=[Item(sku="a1", qty=2)])]
    assert bad.reason == "invalid_arguments" and any("items.0.qty" in p for p in bad.problems)
    assert extra.reason == "invalid_arguments" and any("coupon" in p for p in extra.problems)
    assert len(received) == 1  # invalid arguments never reached the function


def test_definition_tools_with_the_call_and_plain_dict_definitions() -> None:
    seen: list[tuple[Any, str | None]] = []

    def with_call(order: Order, call: ts.ToolCall) -> str:
        seen.append((order, call.id))
        return "ok"

    plain = {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        },
    }
    box = Toolbox()
    box.add(openai.pydantic_function_tool(Order), with_call)
    box.add(plain, lambda q: f"found {q}")
    with box:
        [a, b] = box.execute(sealed([("c1", "Order", GOOD), ("c2", "lookup", '{"q": "x"}')]))
    assert a.ok and seen == [(Order(items=[Item(sku="a1", qty=2)]), "c1")]
    assert b.value == "found x"


def test_definitions_without_a_function_or_with_the_wrong_one_are_refused() -> None:
    definition = openai.pydantic_function_tool(Order)
    with pytest.raises(TypeError, match="needs the function"):
        Toolbox().add(definition)
    with pytest.raises(TypeError, match="takes one parameter"):
        Tool.from_definition(definition, lambda order, extra: None)
    with pytest.raises(TypeError, match="definition"):
        Tool.from_definition({"type": "web_search"}, place_order)
    with pytest.raises(TypeError, match="fn is only"):
        Toolbox().add(place_order, place_order)


def order_then_answer(body: dict[str, Any]) -> StreamScript:
    if not tool_messages_of(body):
        return calls_reply([("call_o", "place_order", GOOD)])
    return text_reply("placed")


def test_a_pydantic_function_tool_through_run(server: LocalServer) -> None:
    server.handler = order_then_answer
    definition = openai.pydantic_function_tool(Order, name="place_order")
    with server.client() as client, Toolbox([(definition, place_order)]) as box:
        result = ts.run(client, model="m", messages=user(), toolbox=box)
    assert result.stop_reason == "done" and server.requests[0]["tools"] == [dict(definition)]
    assert received == [Order(items=[Item(sku="a1", qty=2)])]
    [call] = result.steps[0].calls
    assert call.parsed_as(Order) == received[0] and call.parsed_as(Order) is not received[0]


# ----------------------------------------------------------------------------- parsed_as


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Span(TypedDict):
    start: int
    end: int


def test_parsed_as_gives_a_validated_instance_or_a_clear_error() -> None:
    [good, bad] = sealed([("c1", "place_order", GOOD), ("c2", "place_order", '{"items": [{"sku": 5}]}')])
    assert good.parsed_as(Order) == Order(items=[Item(sku="a1", qty=2)])
    with pytest.raises(SchemaViolation) as info:
        bad.parsed_as(Order)
    assert "not a valid Order" in str(info.value) and info.value.raw == bad.arguments
    assert info.value.errors == ["items.0.sku: Input should be a valid string", "items.0.qty: Field required"]
    [p] = sealed([("c3", "point", '{"x": 1, "y": 2}')])
    assert p.parsed_as(Point) == Point(1, 2) and p.parsed_as(dict) == {"x": 1, "y": 2}
    [s] = sealed([("c4", "span", '{"start": 1, "end": 2}')])
    assert s.parsed_as(Span) == {"start": 1, "end": 2}


@pytest.mark.parametrize(
    ("arguments", "finish_reason"),
    [('{"items": [', None), ("[1, 2]", "tool_calls"), ("not json", "tool_calls"), ("", "tool_calls")],
)
def test_parsed_as_refuses_calls_without_an_arguments_object(
    arguments: str, finish_reason: str | None
) -> None:
    [call] = sealed([("c1", "place_order", arguments)], finish_reason=finish_reason)
    with pytest.raises(CallNotReadyError, match="no arguments object") as info:
        call.parsed_as(Order)
    assert info.value.status == call.status != "ready"
