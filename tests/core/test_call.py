"""``core._call``: the call buffer and its state machine, and what users may do with a call."""

from __future__ import annotations

import pytest

import toolstitch as ts
from toolstitch.core._call import ToolCall, has_lone_surrogate, parse_arguments, text_size
from toolstitch.core._limits import Limits


def new(limits: Limits | None = None, clock: float = 0.0) -> ToolCall:
    call = ToolCall(0, 0, 0, limits or Limits(), lambda: clock)
    call._name = "f"
    return call


def test_open_then_ready() -> None:
    call = new(clock=2.0)
    assert call._append('{"a": ', 6) and call._append("1}", 2)
    assert call.status == "open" and not call.sealed
    # Scanned when asked (rule 2), and timed then: the clock the call was given says 2.0.
    assert call.scanner.complete and call.metrics.arguments_complete_at == 2.0
    call._seal(3.0, empty_as_object=False)
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
    call = new()
    call._append(text, text_size(text))
    call._seal(0.0, empty_as_object=False)
    assert call.status == "invalid" and isinstance(call.error, error)
    assert call.arguments == text


def test_sealing_without_a_name_is_invalid() -> None:
    call = ToolCall(0, 0, 0, Limits())
    call._append("{}", text_size("{}"))
    call._seal(0.0, False)
    assert isinstance(call.error, ts.errors.MissingName)


def test_open_then_incomplete_and_sealed_calls_are_frozen() -> None:
    call = new()
    call._append('{"a": 1', text_size('{"a": 1'))
    call._mark_incomplete("cut")
    assert call.status == "incomplete" and isinstance(call.error, ts.errors.CallIncomplete)
    call._seal(0.0, False)
    assert call.status == "incomplete"


def test_a_late_fragment_refuses_a_ready_call_and_keeps_its_text() -> None:
    call = new()
    call._append("{}", text_size("{}"))
    call._seal(0.0, False)
    assert not call._append("x", text_size("x"))
    assert call.arguments == "{}" and isinstance(call.error, ts.errors.LateFragment)


def test_the_byte_limit_keeps_a_sample_only() -> None:
    call = new(Limits(max_argument_bytes=10, sample_chars=4))
    assert not call._append('{"a": "' + "x" * 100 + '"}', text_size('{"a": "' + "x" * 100 + '"}'))
    assert call.status == "invalid" and call.arguments == '{"a"'
    assert not call._append("more", text_size("more"))
    assert call.arguments == '{"a"' and call.metrics.bytes > 100


def test_a_pending_error_refuses_at_seal_even_when_the_text_parses() -> None:
    call = new()
    call._append("{}", text_size("{}"))
    call._pending_error = ts.errors.MalformedArguments("contradicted")
    call._seal(0.0, False)
    assert call.error is call._pending_error


def test_byte_accounting_never_raises() -> None:
    assert text_size("abc") == 3
    assert text_size("é") == 2
    assert text_size("\udc80") == 3
    assert has_lone_surrogate("a\ud83d") and not has_lone_surrogate("😀") and not has_lone_surrogate("abc")
    assert parse_arguments('{"a": "\ud83d"}')[1] is not None


def test_split_surrogate_pairs_rejoin_in_the_joined_text() -> None:
    call = new()
    call._append('{"e": "\ud83d', text_size('{"e": "\ud83d'))
    call._append('\ude00"}', text_size('\ude00"}'))
    # The pieces are kept as received (``chars`` counts them); the text handed out rejoins the pair.
    assert call.arguments == '{"e": "😀"}' and call.chars == len(call.arguments) + 1
    call._seal(0.0, False)
    assert call.ready


def test_users_cannot_write_a_call() -> None:
    call = new()
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
