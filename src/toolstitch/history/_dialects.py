"""Dialects: what each OpenAI-compatible server accepts in a replayed history, as one table.

A *dialect* is a family of servers that share history rules: ``openai`` (default), ``azure``,
``anthropic-compat``, ``mistral``, ``gemini-compat``, ``deepseek``, ``vllm``, ``llama.cpp`` and
``ollama``. Two tables live here and nowhere else:

* :data:`DIALECTS` -- how the builders and ``repair_history`` shape messages for a dialect (empty
  content as ``null`` or ``""``, which tool-call ids are acceptable, whether provider fields such as
  ``reasoning_content`` go back).
* :data:`RULES` -- every check ``validate_history`` runs, by the rule id of
  ``docs/history-rules.md`` (H01-H63 plus a few from later sections), saying for which dialects a
  violation is an error and for which a warning, and the server's error text it prevents.
  H00 and H90-H93 are toolstitch's own: H00 a list or entry that is no chat message, H90 a message
  nested past :data:`NESTING_LIMIT`, H91 a tool whose ``parameters`` are not JSON Schema, H92 a tool
  without ``"type": "function"``, H93 a ``tool_choice`` that names no offered tool (with H30,
  duplicate tool names, they make sure a request is a contract calls can be checked against).

Why a table: a server's rules are facts about that server, and they change. Keeping them as data
makes "which dialect enforces what" readable in one place and testable rule by rule.

Error texts are quoted as reported in public issues (cited per rule). They are templates filled with
the message index, ids and names of the problem, so they read as the server would answer. Servers
reword their errors over time: treat them as a guide, not a byte-exact promise.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "DIALECTS",
    "DIALECT_NAMES",
    "NESTING_LIMIT",
    "RULES",
    "Dialect",
    "DialectName",
    "Rule",
    "Severity",
    "get_dialect",
]

Severity = Literal["error", "warning"]
DialectName = Literal[
    "openai",
    "azure",
    "anthropic-compat",
    "mistral",
    "gemini-compat",
    "deepseek",
    "vllm",
    "llama.cpp",
    "ollama",
]

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _base62(text: str, size: int) -> str:
    """``size`` base-62 characters derived from ``text``: deterministic, so that the assistant
    message and the tool message, built separately, rewrite one id to the same new id.
    ``surrogatepass``: an id holding a lone surrogate (a proxy that splits strings by UTF-16 code
    units) still hashes, rather than raising."""
    number = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest(), "big")
    out = []
    for _ in range(size):
        number, digit = divmod(number, 62)
        out.append(_ALPHABET[digit])
    return "".join(out)


_MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")
_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
_UNSAFE_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
#: OpenAI's documented limit is 40 characters; ids up to 64 were accepted in 2026 (H12).
OPENAI_ID_WARN = 40
#: How deeply a message may nest (H90): pydantic's JSON parser, under vLLM, SGLang and the LiteLLM
#: proxy, refuses input nested past about 200 levels (Rust's serde_json past 128).
NESTING_LIMIT = 200


@dataclass(frozen=True)
class Dialect:
    """How to shape a history for one family of servers.

    ``empty_content``: the ``content`` of an assistant message that has tool calls and no text.
    ``null`` is OpenAI's canonical shape (H08); llama.cpp and Ollama reject it (H82, H84), and
    several vLLM templates iterate over it, so local servers get ``""``.

    ``pairs_by_position``: the server's chat template renders tool results in list order, ignoring
    ids (H05, H77), so results out of declared order silently answer the wrong call.

    ``keep_provider_fields``: unknown fields the provider sent (``reasoning_content``, ``reasoning``,
    Gemini's ``extra_content``) go back in the history. Mistral's schema forbids extra fields (H70).

    ``id_style``: which tool-call ids the server accepts, and so how builders and repair rewrite
    them: ``"mistral"`` exactly 9 alphanumerics (H35), ``"anthropic"`` ``^[a-zA-Z0-9_-]+$`` (H29),
    ``"openai"`` at most 40 characters (H12), ``"any"`` unchanged.

    ``tool_message_name``: add the function name to tool messages (Gemini, H44; low confidence but
    harmless). ``strict_keys``: allowed keys per role, for servers that reject unknown ones (H70).
    ``roles``: the roles the server knows.
    """

    name: str
    label: str
    empty_content: str | None = None
    pairs_by_position: bool = False
    keep_provider_fields: bool = True
    id_style: Literal["openai", "mistral", "anthropic", "any"] = "any"
    tool_message_name: bool = False
    strict_keys: Mapping[str, frozenset[str]] | None = None
    roles: frozenset[str] = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

    def id_ok(self, call_id: str) -> bool:
        """True when the server accepts ``call_id`` as a tool-call id without a warning."""
        if self.id_style == "mistral":
            return _MISTRAL_ID.fullmatch(call_id) is not None
        if self.id_style == "anthropic":
            return _ANTHROPIC_ID.fullmatch(call_id) is not None
        if self.id_style == "openai":
            return 0 < len(call_id) <= OPENAI_ID_WARN
        return call_id != ""

    def normalize_id(self, call_id: str) -> str:
        """``call_id`` itself when acceptable, else a deterministic replacement.

        Deterministic (a hash of the original) so the builders, which see an assistant message and
        its tool messages in separate calls, rewrite both sides of a pair the same way (H29, H35).
        """
        if self.id_ok(call_id):
            return call_id
        if self.id_style == "mistral":
            return _base62(call_id, 9)
        if self.id_style == "anthropic" and call_id:
            safe = _UNSAFE_ID_CHARS.sub("_", call_id)[:40]
            return f"{safe}_{_base62(call_id, 8)}"
        return "call_" + _base62(call_id, 24)

    def fresh_id(self, seed: str, taken: set[str] | frozenset[str]) -> str:
        """A new acceptable id, not in ``taken``, derived from ``seed`` (so repair is repeatable)."""
        for attempt in range(1000):
            basis = f"{seed}#{attempt}"
            made = _base62(basis, 9) if self.id_style == "mistral" else "call_" + _base62(basis, 24)
            if made not in taken:
                return made
        raise RuntimeError("could not make a fresh tool-call id")  # pragma: no cover


_MISTRAL_KEYS: Mapping[str, frozenset[str]] = {
    "system": frozenset({"role", "content"}),
    "user": frozenset({"role", "content"}),
    "assistant": frozenset({"role", "content", "tool_calls", "prefix"}),
    "tool": frozenset({"role", "content", "tool_call_id", "name"}),
    "tool_call": frozenset({"id", "type", "function", "index"}),
    "function": frozenset({"name", "arguments"}),
}

DIALECTS: Mapping[str, Dialect] = {
    d.name: d
    for d in (
        Dialect("openai", "OpenAI", id_style="openai"),
        Dialect("azure", "Azure OpenAI", id_style="openai"),
        Dialect("anthropic-compat", "Anthropic (OpenAI compatibility)", id_style="anthropic"),
        Dialect(
            "mistral",
            "Mistral",
            keep_provider_fields=False,
            id_style="mistral",
            strict_keys=_MISTRAL_KEYS,
            roles=frozenset({"system", "user", "assistant", "tool"}),
        ),
        Dialect("gemini-compat", "Gemini (OpenAI compatibility)", tool_message_name=True),
        Dialect("deepseek", "DeepSeek"),
        Dialect("vllm", "vLLM", empty_content="", pairs_by_position=True),
        Dialect("llama.cpp", "llama.cpp", empty_content="", pairs_by_position=True),
        Dialect("ollama", "Ollama", empty_content="", pairs_by_position=True),
    )
}
DIALECT_NAMES: tuple[str, ...] = tuple(DIALECTS)


def get_dialect(dialect: str | Dialect) -> Dialect:
    """The :class:`Dialect` named ``dialect`` (a :class:`Dialect` is returned as is)."""
    if isinstance(dialect, Dialect):
        return dialect
    try:
        return DIALECTS[dialect]
    except KeyError:
        known = ", ".join(DIALECT_NAMES)
        raise ValueError(f"unknown dialect {dialect!r}; known dialects: {known}") from None


# ----------------------------------------------------------------------------------- rules

ALL = frozenset(DIALECT_NAMES)
LOCAL = frozenset({"vllm", "llama.cpp", "ollama"})


@dataclass(frozen=True)
class Rule:
    """One history rule: where it applies, how severe, and what the server says when it is broken.

    ``errors``/``warnings`` name the dialects where a violation is an error (the server answers
    400, or silently answers the wrong call) or a warning (accepted today, but fragile or
    disputed). ``text`` is the server's error text as a ``str.format`` template; ``texts`` holds
    per-dialect wordings, keyed ``"dialect"`` or ``"dialect/variant"`` (and ``"/variant"`` for a
    variant in OpenAI's wording). ``None`` means no error text is known: the server accepts the
    request and the harm is silent, or the wording was never captured.
    """

    id: str
    title: str
    errors: frozenset[str]
    warnings: frozenset[str] = frozenset()
    text: str | None = None
    texts: Mapping[str, str | None] = field(default_factory=dict)
    source: str = ""

    def severity(self, dialect: str) -> Severity | None:
        """The severity of a violation under ``dialect``; ``None`` when the rule does not apply."""
        if dialect in self.errors:
            return "error"
        if dialect in self.warnings:
            return "warning"
        return None

    def server_text(self, dialect: str, variant: str = "", **fields: Any) -> str | None:
        """The server's error text for this violation, filled in with ``fields``."""
        template: str | None
        for key in (f"{dialect}/{variant}", f"/{variant}") if variant else ():
            if key in self.texts:
                template = self.texts[key]
                break
        else:
            template = self.texts.get(dialect, self.text)
        return None if template is None else template.format_map(_Fields(fields))


class _Fields(dict[str, Any]):
    """Template fields; a field the caller did not supply stays visible as ``{name}``."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


_OPENAI_H03 = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each"
    " 'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
_ANTHROPIC_H26 = (
    "messages.{at}: `tool_use` ids were found without `tool_result` blocks immediately after:"
    " {ids}. Each `tool_use` block must have a corresponding `tool_result` block in the next"
    " message."
)
_ANTHROPIC_H27 = (
    "messages.{index}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: {id}."
    " Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
)
_MISTRAL_COUNT = "Not the same number of function calls and responses"
_NAME_PATTERN = (
    "Invalid '{param}': string does not match pattern. Expected a string that matches the"
    " pattern '^[a-zA-Z0-9_-]+$'."
)
_NAME_TOO_LONG = (
    "Invalid '{param}': string too long. Expected a string with maximum length 64, but got a"
    " string with length {length} instead."
)
_MISTRAL_NAME = (
    "Function name was {name} but must be a-z, A-Z, 0-9, or contain underscores and dashes, with a"
    " maximum length of 64."
)

# One row per rule. The rows look alike on purpose: they are data (who enforces what, and what the
# server answers), kept as one literal table so that a rule can be read, cited and changed alone.
_RULE_LIST = (
    Rule(
        "H00",
        "the list, or one of its entries, is not a chat message the server can read",
        errors=ALL,
        text=None,
        texts={
            "/empty": "Invalid 'messages': empty array. Expected an array with minimum length 1,"
            " but got an empty array instead.",
        },
        source="toolstitch's own structural check; wordings inferred from OpenAI's validator",
    ),
    Rule(
        "H01",
        "a tool message must directly follow an assistant message with tool_calls",
        errors=ALL,
        text="Invalid parameter: messages with role 'tool' must be a response to a preceeding"
        " message with 'tool_calls'.",
        texts={
            "deepseek": "Messages with role 'tool' must be a response to a preceding message"
            " with 'tool_calls'",
            "anthropic-compat": _ANTHROPIC_H27,
            "mistral/after_call": _MISTRAL_COUNT,
            "mistral": "Unexpected role 'tool' after role '{prev_role}'",
        },
        source="smarter-sh/smarter#264; run-llama/llama_index#10493; FoundationAgents/OpenManus#23",
    ),
    Rule(
        "H02",
        "a tool message's tool_call_id must be declared by the assistant message it answers",
        errors=ALL,
        text="Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message.",
        texts={
            "anthropic-compat": _ANTHROPIC_H27,
            "mistral": "Unexpected tool call id {id} in tool results",
            "gemini-compat": "* GenerateContentRequest.contents[{index}].parts[0]"
            ".function_response.name: Name cannot be empty.",
        },
        source="dapr/dapr-agents#145; anthropics/claude-code#13460; pydantic/pydantic-ai#1879",
    ),
    Rule(
        "H03",
        "every declared tool call needs a tool message before the next non-tool message",
        errors=ALL,
        text=_OPENAI_H03,
        texts={
            "deepseek": "An assistant message with 'tool_calls' must be followed by tool messages"
            " responding to each 'tool_call_id'. (insufficient tool messages following"
            " tool_calls message)",
            "anthropic-compat": _ANTHROPIC_H26,
            "mistral": _MISTRAL_COUNT,
            "gemini-compat": "Please ensure that the number of function response parts is equal"
            " to the number of function call parts of the function call turn.",
        },
        source="aliasrobotics/cai#111; BerriAI/litellm#10083; Effect-TS/effect#6702",
    ),
    Rule(
        "H04",
        "no other message may come between tool calls and their results",
        errors=ALL,
        text=_OPENAI_H03,
        texts={"anthropic-compat": _ANTHROPIC_H26, "mistral": _MISTRAL_COUNT},
        source="livekit/agents#1977; sdcb/chats#132",
    ),
    Rule(
        "H05",
        "tool results should come in the order the calls were declared",
        errors=LOCAL,
        warnings=ALL - LOCAL,
        text=None,
        source="JustVugg/colibri#118 (positional templates pair results with the wrong call)",
    ),
    Rule(
        "H06",
        "tool_call_ids must be unique",
        errors=ALL,
        text="Invalid parameter: Duplicate value for 'tool_call_id' of '{id}', in"
        " messages[{first}] and messages[{index}].",
        texts={
            "mistral": "Duplicate tool call id {id} in tool results",
            "mistral/in_calls": "Duplicate tool call id {id} in assistant message",
            "anthropic-compat/in_calls": "messages.{index}.content.{position}: `tool_use` ids must be unique",
            "/in_calls": None,
        },
        source="agno-agi/agno#5116; neuron-core/neuron-ai#46; trycua/cua#524",
    ),
    Rule(
        "H07",
        "a tool message needs a tool_call_id",
        errors=ALL,
        text="Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'.",
        texts={"mistral": "Tool call id has to be defined."},
        source="vercel/ai#2177",
    ),
    Rule(
        "H08",
        "an assistant message without tool_calls needs string content",
        errors=ALL - {"mistral"},
        text="Invalid value for 'content': expected a string, got null.",
        source="vercel/ai#13744; microsoft/semantic-kernel#6720",
    ),
    Rule(
        "H09",
        "tool_calls, when present, must be a non-empty list",
        errors=ALL,
        text="Invalid 'messages[{index}].tool_calls': empty array. Expected an array with minimum"
        " length 1, but got an empty array instead.",
        texts={"/not_list": None},
        source="openai/openai-node#1341; vllm-project/vllm#13978",
    ),
    Rule(
        "H10",
        "function.arguments must be a string",
        errors=ALL,
        text="Invalid type for 'messages[{index}].tool_calls[{position}].function.arguments':"
        " expected a string, but got {got} instead.",
        source="aaif-goose/goose-mobile#20",
    ),
    Rule(
        "H11",
        "each tool call needs an id, a type and a function (name and arguments)",
        errors=ALL,
        text="Missing required parameter: '{param}'.",
        texts={"/bad_type": None, "mistral/id": "Tool call id has to be defined."},
        source="langchain-ai/langchain-azure#35; openai/openai-cookbook#1248",
    ),
    Rule(
        "H12",
        "tool-call ids should be at most 40 characters (64 at most anywhere)",
        errors=frozenset({"azure"}),
        warnings=frozenset({"openai"}),
        text="Invalid '{param}': string too long. Expected a string with maximum length 40, but"
        " got a string with length {length} instead.",
        texts={
            "/over_max": "Invalid '{param}': string too long. Expected a string with maximum"
            " length 64, but got a string with length {length} instead.",
        },
        source="agno-agi/agno#5382; Portkey-AI/gateway#1062; vercel/ai#17233 (51 accepted)",
    ),
    Rule(
        "H13",
        "function names must match ^[a-zA-Z0-9_-]{1,64}$",
        errors=ALL - {"gemini-compat"},
        text=_NAME_PATTERN,
        texts={"/too_long": _NAME_TOO_LONG, "mistral": _MISTRAL_NAME},
        source="mcp-use/mcp-use#90; brekkylab/ailoy#109; ravitemer/mcphub.nvim#243",
    ),
    Rule(
        "H14",
        "a tool description must be at most 1024 characters",
        errors=frozenset({"openai", "azure", "deepseek"}),
        text="Invalid '{param}': string too long. Expected a string with maximum length 1024, but"
        " got a string with length {length} instead.",
        source="getsentry/sentry-mcp#106; langchain-ai/open_deep_research#80",
    ),
    Rule(
        "H15",
        "at most 128 tools",
        errors=frozenset({"openai", "azure"}),
        text="Invalid 'tools': array too long. Expected an array with maximum length 128, but got"
        " an array with length {length} instead.",
        source="vishalmysore/Tools4AI#16; zed-industries/zed#42393",
    ),
    Rule(
        "H16",
        "tools must not be an empty list (omit the key)",
        errors=frozenset({"openai", "azure", "deepseek", "vllm"}),
        warnings=ALL - {"openai", "azure", "deepseek", "vllm"},
        text="Invalid 'tools': empty array. Expected an array with minimum length 1, but got an"
        " empty array instead.",
        source="continuedev/continue#3370; vllm-project/vllm#39780; runebookai/tome#87",
    ),
    Rule(
        "H17",
        "tool_choice and parallel_tool_calls need tools",
        errors=frozenset({"openai", "azure", "vllm"}),
        warnings=ALL - {"openai", "azure", "vllm"},
        text="Invalid value for '{key}': '{key}' is only allowed when 'tools' are specified.",
        texts={"vllm/tool_choice": "When using `tool_choice`, `tools` must be set."},
        source="Upsonic/Upsonic#323; writer/writer-framework#1013; camel-ai/camel#1585",
    ),
    Rule(
        "H18",
        "tool and assistant content: a string or a list of text parts",
        errors=ALL,
        text="Invalid type for 'messages[{index}].content': expected one of a string or array of"
        " objects, but got {got} instead.",
        texts={
            "/image": "Invalid 'messages[{index}]'. Image URLs are only allowed for messages with"
            " role 'user', but this message with role '{role}' contains an image URL.",
            "/untyped": "Missing required parameter: 'messages[{index}].content[{position}].type'.",
            "/missing": "Missing required parameter: 'messages[{index}].content'.",
            "/part": None,
        },
        source="agno-agi/agno#4286; neuron-core/neuron-ai#76; coze-dev/coze-studio#2317",
    ),
    Rule(
        "H19",
        "legacy function messages: a name, and function_call only on assistant messages",
        errors=ALL,
        text="Missing parameter 'name': messages with role 'function' must have a 'name'.",
        texts={
            "/function_call": "Invalid parameter: only messages with role 'assistant' can have a"
            " function call.",
        },
        source="langchain-ai/langchainjs#6570; microsoft/autogen#113",
    ),
    Rule(
        "H20",
        "a message's name must match ^[a-zA-Z0-9_-]+$",
        errors=ALL - {"mistral"},
        text="Invalid 'messages[{index}].name': string does not match pattern. Expected a string"
        " that matches the pattern '^[a-zA-Z0-9_-]+$'.",
        source="microsoft/autogen#4157; FlowiseAI/Flowise#2948",
    ),
    Rule(
        "H23",
        "an assistant message with tool_calls should carry the content key (null or text)",
        errors=frozenset({"azure"}),
        warnings=ALL - {"azure"},
        text="{{'type': 'missing', 'loc': ['messages', {index}, 'assistant', 'content'], 'msg':"
        " 'Field required'}}",
        source="microsoft/autogen#6133 (Azure 2024-02-01); langchain4j/langchain4j#540",
    ),
    Rule(
        "H29",
        "tool-call ids must match ^[a-zA-Z0-9_-]+$",
        errors=frozenset({"anthropic-compat"}),
        text="messages.{index}.content.{position}.tool_use.id: String should match pattern"
        " '^[a-zA-Z0-9_-]+$'",
        source="CommandCodeAI/command-code#323; maximhq/bifrost#5097; anomalyco/opencode#1279",
    ),
    Rule(
        "H30",
        "tool names must be unique",
        errors=ALL,
        text=None,
        texts={"anthropic-compat": "tools: Tool names must be unique."},
        source="anthropics/claude-code#10687; everywhere else: toolstitch's contract (rule 10), since"
        " a call to a name offered twice could not be checked against one schema",
    ),
    Rule(
        "H31",
        "a request whose history has tool calls must define tools",
        errors=frozenset({"anthropic-compat"}),
        text="Requests which include `tool_use` or `tool_result` blocks must define tools.",
        source="BerriAI/litellm#4689; BerriAI/litellm#27620",
    ),
    Rule(
        "H32",
        "content must not be an empty string",
        errors=frozenset({"anthropic-compat"}),
        text="messages.{index}: all messages must have non-empty content except for the optional"
        " final assistant message",
        texts={"/tool_calls": "messages: text content blocks must be non-empty"},
        source="anthropics/claude-code#6774; aliasrobotics/cai#182; requestyai/ai-sdk-requesty#1",
    ),
    Rule(
        "H34",
        "n must be 1",
        errors=frozenset({"anthropic-compat"}),
        text=None,
        source="platform.claude.com/docs/en/api/openai-sdk",
    ),
    Rule(
        "H35",
        "tool-call ids must be exactly 9 letters or digits",
        errors=frozenset({"mistral"}),
        text="Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of 9.",
        source="nearai/ironclaw#1241; karthink/gptel#1203; langchain-ai/langchain#24668",
    ),
    Rule(
        "H37",
        "a user message may not directly follow a tool message",
        errors=frozenset({"mistral"}),
        text="Unexpected role 'user' after role 'tool'",
        source="BerriAI/litellm#17761; onyx-dot-app/onyx#6458",
    ),
    Rule(
        "H38",
        "the last message must be a user or tool message",
        errors=frozenset({"mistral"}),
        text="Expected last role User or Tool (or Assistant with prefix or continue_final_message"
        " set to True) for serving but got {role}",
        source="mistral-common validator; BerriAI/litellm#4931",
    ),
    Rule(
        "H39",
        "an assistant message needs content or tool_calls",
        errors=frozenset({"mistral"}),
        text="Assistant message must have either content or tool_calls, but not none.",
        source="OpenHands/OpenHands#8685",
    ),
    Rule(
        "H45",
        "a tool-call turn should follow a user turn or a tool-result turn",
        errors=frozenset(),
        warnings=frozenset({"gemini-compat"}),
        text="Please ensure that function call turn comes immediately after a user turn or after"
        " a function response turn.",
        source="pydantic/pydantic-ai#3692",
    ),
    Rule(
        "H46",
        "Gemini 3 thought signatures (extra_content) must go back on tool calls",
        errors=frozenset(),
        warnings=frozenset({"gemini-compat"}),
        text="Function call is missing a thought_signature in functionCall parts.",
        source="theopenco/llmgateway#1267; earendil-works/pi#3234",
    ),
    Rule(
        "H47",
        "function names must start with a letter or underscore; letters, digits, _ . - ; max 64",
        errors=frozenset({"gemini-compat"}),
        text="Invalid function name. Must start with a letter or an underscore. Must be alphameric"
        " (a-z, A-Z, 0-9), underscores (_), dots (.) or dashes (-), with a maximum length of 64.",
        source="google-gemini/gemini-cli#2966",
    ),
    Rule(
        "H62",
        "in thinking mode, reasoning_content must go back on assistant messages with tool_calls",
        errors=frozenset({"deepseek"}),
        text="Missing `reasoning_content` field in the assistant message at message index"
        " {index}. For more information, please refer to"
        " https://api-docs.deepseek.com/guides/thinking_mode#tool-calls",
        source="hotovo/aider-desk#529; continuedev/continue#9606",
    ),
    Rule(
        "H70",
        "unknown message fields are rejected (strict schema)",
        errors=frozenset({"mistral"}),
        text="{{'type': 'extra_forbidden', 'loc': ['body', 'messages', {index}, '{role}',"
        " '{key}'], 'msg': 'Extra inputs are not permitted'}}",
        source="charmbracelet/crush#1590; BerriAI/litellm#30835; Gage-Technologies/mistral-go#2",
    ),
    Rule(
        "H73",
        "replayed arguments must parse as a JSON object ('' is read as {})",
        errors=LOCAL,
        text=None,
        source="vllm-project/vllm#48922; sgl-project/sglang#28035; mudler/LocalAI#10256",
    ),
    Rule(
        "H82",
        "assistant content must not be null (use '')",
        errors=frozenset({"llama.cpp"}),
        warnings=frozenset({"vllm"}),
        text="Expected 'content' to be a string or an array",
        texts={"vllm": None},
        source="ggml-org/llama.cpp#13471; ml-explore/mlx-lm#185; Blaizzy/mlx-vlm#1864",
    ),
    Rule(
        "H84",
        "assistant content must not be null (use '')",
        errors=frozenset({"ollama"}),
        text="invalid message content type: <nil>",
        source="SAIL-Research-Lab/cheetahclaws#72",
    ),
)

#: toolstitch's own request rules (H90-H93). A request that breaks them has no contract a call can
#: be checked against, or cannot be read by the server, so they are errors for every dialect.
_CONTRACT_RULES = (
    Rule(
        "H90",
        f"a message must not be nested deeper than {NESTING_LIMIT} levels",
        errors=ALL,
        text=None,
        source="pydantic-core's JSON parser (vLLM, SGLang, LiteLLM proxy) refuses about 200 levels;"
        " serde_json 128; Python's json module about 1000",
    ),
    Rule(
        "H91",
        "a function tool's parameters must be a valid JSON Schema object",
        errors=ALL,
        text=None,
        source="toolstitch's contract: no call of the tool could be checked against it (rule 10)",
    ),
    Rule(
        "H92",
        'tools is a list of objects, each with "type": "function" (or "custom")',
        errors=ALL,
        text=None,
        source="OpenAI's tools schema; toolstitch's contract (rule 10)",
    ),
    Rule(
        "H93",
        'tool_choice is "none", "auto", "required" or names a tool the request offers',
        errors=ALL,
        text=None,
        source="OpenAI's tool_choice schema; toolstitch's contract (rule 10)",
    ),
)

RULES: Mapping[str, Rule] = {rule.id: rule for rule in (*_RULE_LIST, *_CONTRACT_RULES)}
