"""Direct tests of the dialect table (``toolstitch.history._dialects``): ids, rules, texts."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolstitch.history import DIALECT_NAMES, Dialect, get_dialect
from toolstitch.history._dialects import DIALECTS, NESTING_LIMIT, OPENAI_ID_WARN, RULES, Rule

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=80)  # surrogates too


def test_get_dialect_by_name_or_as_is() -> None:
    for name in DIALECT_NAMES:
        assert get_dialect(name).name == name
    custom = Dialect("mine", "Mine", empty_content="")
    assert get_dialect(custom) is custom
    with pytest.raises(ValueError, match="known dialects: openai, azure"):
        get_dialect("openai-ish")


def test_the_table_says_what_each_server_needs() -> None:
    assert [d.name for d in DIALECTS.values()] == list(DIALECT_NAMES)
    local = {"vllm", "llama.cpp", "ollama"}
    for d in DIALECTS.values():
        assert (d.empty_content == "") == (d.name in local)  # null elsewhere (H82, H84)
        assert d.pairs_by_position == (d.name in local)  # templates pair results by position (H05)
    mistral = DIALECTS["mistral"]
    assert not mistral.keep_provider_fields and mistral.strict_keys is not None
    assert "function" not in mistral.roles and "developer" not in mistral.roles
    assert DIALECTS["gemini-compat"].tool_message_name


@pytest.mark.parametrize(
    ("dialect", "good", "bad"),
    [
        ("mistral", ["abcDEF123", "000000000"], ["abcDEF12", "abcDEF1234", "call_0001", "abc-EF123", ""]),
        ("anthropic-compat", ["toolu_01A-b", "x"], ["functions.Bash:0", "a b", ""]),
        ("openai", ["call_1", "c" * OPENAI_ID_WARN], ["c" * (OPENAI_ID_WARN + 1), ""]),
        ("deepseek", ["anything goes: .:/", "x" * 500], [""]),
    ],
)
def test_id_ok_per_style(dialect: str, good: list[str], bad: list[str]) -> None:
    d = get_dialect(dialect)
    assert all(d.id_ok(x) for x in good)
    assert not any(d.id_ok(x) for x in bad)


@pytest.mark.parametrize("dialect", DIALECT_NAMES)
@given(call_id=ANY_TEXT)
def test_normalize_id_is_acceptable_deterministic_and_idempotent(dialect: str, call_id: str) -> None:
    d = get_dialect(dialect)
    new = d.normalize_id(call_id)
    if d.id_ok(call_id):
        assert new == call_id  # an acceptable id is never rewritten
    elif call_id:
        assert d.id_ok(new)
        assert new == d.normalize_id(call_id)  # builders rewrite both sides of a pair the same way
        assert d.normalize_id(new) == new


def test_rewritten_ids_keep_what_they_can() -> None:
    assert DIALECTS["mistral"].normalize_id("call_0fypS1hVX") == DIALECTS["mistral"].normalize_id(
        "call_0fypS1hVX"
    )
    assert len(DIALECTS["mistral"].normalize_id("call_0fypS1hVX")) == 9
    anthropic = DIALECTS["anthropic-compat"].normalize_id("functions.Bash:0")
    assert anthropic.startswith("functions_Bash_0_")
    assert DIALECTS["openai"].normalize_id("c" * 50).startswith("call_")
    assert DIALECTS["mistral"].normalize_id("x\udc80y") != DIALECTS["mistral"].normalize_id("x\udc81y")


@pytest.mark.parametrize("dialect", DIALECT_NAMES)
def test_fresh_ids_are_new_acceptable_and_repeatable(dialect: str) -> None:
    d = get_dialect(dialect)
    taken: set[str] = set()
    for k in range(200):
        made = d.fresh_id(f"seed:{k % 3}", taken)  # the same seed again must still give a new id
        assert made not in taken and d.id_ok(made)
        taken.add(made)
    assert d.fresh_id("seed", set()) == d.fresh_id("seed", set())


def test_rule_severity_and_texts() -> None:
    rule = Rule(
        "X1",
        "a title",
        errors=frozenset({"openai"}),
        warnings=frozenset({"vllm"}),
        text="generic {index} {missing}",
        texts={"mistral": "mistral {id}", "/variant": "variant {id}", "mistral/variant": None},
    )
    assert rule.severity("openai") == "error"
    assert rule.severity("vllm") == "warning"
    assert rule.severity("mistral") is None
    assert rule.server_text("openai", index=3) == "generic 3 {missing}"  # unknown fields stay visible
    assert rule.server_text("mistral", id="c1") == "mistral c1"
    assert rule.server_text("openai", "variant", id="c1") == "variant c1"
    assert rule.server_text("mistral", "variant", id="c1") is None  # a dialect's variant wins
    assert rule.server_text("openai", "other", index=1) == "generic 1 {missing}"


def test_every_rule_is_well_formed() -> None:
    assert all(rule_id == rule.id for rule_id, rule in RULES.items())
    for rule in RULES.values():
        assert rule.title and rule.source
        assert not rule.errors & rule.warnings, rule.id
        assert (rule.errors | rule.warnings) <= set(DIALECT_NAMES)
        assert rule.errors | rule.warnings, rule.id  # a rule that applies nowhere is dead
        for key in rule.texts:
            dialect, _, _ = key.partition("/")
            assert dialect == "" or dialect in DIALECT_NAMES, (rule.id, key)
        for dialect in DIALECT_NAMES:  # every template fills in without an error
            for variant in ("", *{k.partition("/")[2] for k in rule.texts}):
                rule.server_text(dialect, variant, index=0, id="c", param="p", length=1, name="f")


def test_toolstitch_contract_rules_are_errors_everywhere() -> None:
    for rule_id in ("H30", "H90", "H91", "H92", "H93"):
        assert RULES[rule_id].errors == frozenset(DIALECT_NAMES), rule_id
    assert str(NESTING_LIMIT) in RULES["H90"].title


def test_base62_alphabet_only() -> None:
    alphabet = set(string.ascii_letters + string.digits)
    made = DIALECTS["mistral"].normalize_id("#" * 30)
    assert set(made) <= alphabet
