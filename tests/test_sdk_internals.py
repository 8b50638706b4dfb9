"""The SDK internals toolstitch relies on: listed (docs/sdk-internals.md), pinned, and watched.

* The inventory is complete: the package's source is read, and every SDK private module or name it
  imports, every private attribute or non-standard dunder it reaches that is not its own, and every
  SDK constructor it calls beyond the clients must have an entry. The check is shown to fail on
  each form.
* Every entry names tests that exist, and is still used.
* The pins: what each entry without a test elsewhere relies on, on the installed release (the
  matrix runs these on the floor, the first Responses release and the newest).
* A changed SDK: the fast decoder's self-check finds a release whose decoding moved, and such a
  release keeps the SDK's own decoding with one ``FastDecodeWarning``.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterator, Set
from pathlib import Path
from typing import Any

import openai
import pytest
from openai import _base_client as openai_base
from openai.types.chat import ChatCompletionChunk

import toolstitch as ts
from tests.client.test_dropin import needs_helper
from toolstitch._sdk import http_module
from toolstitch.client import _fast
from toolstitch.errors import FastDecodeWarning
from toolstitch.history._common import to_plain
from toolstitch.testing import LocalServer, StreamScript, tool_call_chunks

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "toolstitch"
INVENTORY = ROOT / "docs" / "sdk-internals.md"

#: Constructors of the SDK's documented API (its README builds these); any other SDK class
#: toolstitch builds is in the inventory with the signature it relies on.
DOCUMENTED_CONSTRUCTORS = frozenset(
    {
        "OpenAI",
        "AsyncOpenAI",
        "AzureOpenAI",
        "AsyncAzureOpenAI",
        "DefaultHttpxClient",
        "DefaultAsyncHttpxClient",
        "DefaultAioHttpClient",
    }
)

#: Python's own dunders (the data model, the import system, functions, exceptions): not the SDK's.
PYTHON_DUNDERS = frozenset(
    {
        "__init__", "__new__", "__call__", "__enter__", "__exit__", "__aenter__", "__aexit__",
        "__iter__", "__aiter__", "__next__", "__anext__", "__getattr__", "__getattribute__",
        "__setattr__", "__delattr__", "__get__", "__set__", "__name__", "__qualname__", "__module__",
        "__dict__", "__class__", "__doc__", "__all__", "__version__", "__code__", "__wrapped__",
        "__slots__", "__mro__", "__bases__", "__annotations__", "__path__", "__file__", "__func__",
        "__self__", "__traceback__", "__cause__", "__context__", "__suppress_context__",
        "__signature__", "__defaults__", "__kwdefaults__", "__globals__", "__closure__",
        "__orig_bases__", "__origin__", "__args__", "__parameters__",
    }
)  # fmt: skip


# ------------------------------------------------------------------------------------ the inventory


class Entry:
    """One row of the inventory: the names it covers and the tests that pin them."""

    def __init__(self, names: list[str], tests: list[str], line: int) -> None:
        self.names = names
        self.tests = tests
        self.line = line

    def __repr__(self) -> str:
        return f"docs/sdk-internals.md:{self.line} {self.names}"


def inventory() -> list[Entry]:
    entries = []
    for number, line in enumerate(INVENTORY.read_text().splitlines(), 1):
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        names = re.findall(r"`([^`]+)`", cells[0])
        tests = re.findall(r"`(tests/[^`]+::[^`]+)`", cells[-1])
        entries.append(Entry(names, tests, number))
    return entries


def _bare(name: str) -> str:
    """``openai.Stream(cast_to, response, client)`` → ``openai.Stream``."""
    return name.split("(", 1)[0]


def covered() -> set[str]:
    """Every key the inventory answers for: each name, each module it lies in, each private
    attribute or dunder it names (its last part), and each constructor (``ctor:`` + name)."""
    keys: set[str] = set()
    for entry in inventory():
        for name in entry.names:
            bare = _bare(name)
            parts = bare.split(".")
            keys.update(".".join(parts[:k]) for k in range(2, len(parts) + 1))
            keys.add(parts[-1])
            if "(" in name:
                keys.add("ctor:" + bare.removesuffix(".__init__"))
    return keys


# --------------------------------------------------------------------------------- the source check


def _is_private_module(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split(".")[1:])


def _reached_name(node: ast.AST) -> str | None:
    """The private attribute or non-standard dunder ``node`` reaches on another object: ``x._y``,
    ``getattr(x, "_y")`` (and ``setattr``/``hasattr``/``delattr``), ``vars(x).get("_y")``."""
    name: str | None = None
    if isinstance(node, ast.Attribute):
        receiver = node.value
        if not (isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")):
            name = node.attr
    elif isinstance(node, ast.Call):
        func, args = node.func, node.args
        if isinstance(func, ast.Name) and func.id in ("getattr", "setattr", "hasattr", "delattr"):
            if len(args) > 1 and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
                name = args[1].value
        elif (
            isinstance(func, ast.Attribute)
            and func.attr == "get"
            and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "vars"
            and args
            and isinstance(args[0], ast.Constant)
            and isinstance(args[0].value, str)
        ):
            name = args[0].value
    if name is None or not name.startswith("_") or name in PYTHON_DUNDERS:
        return None
    return name


def _own_names(tree: ast.AST) -> set[str]:
    """The private names a module defines itself: functions, classes, assignments (on ``self`` or
    anything else), ``__slots__`` entries and ``object.__setattr__(self, "_x", ...)``."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                own.add(node.attr)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
        ):
            for item in ast.walk(node.value):
                if isinstance(item, ast.Constant) and isinstance(item.value, str):
                    own.add(item.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "__setattr__"
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            own.add(node.args[1].value)
    return own


def sdk_uses(source: str, own: Set[str] = frozenset(), sdk: Set[str] = frozenset()) -> dict[str, int]:
    """What ``source`` uses of the SDK beyond its documented API, each with its first line:
    ``openai._models.construct_type`` (a private module or a name in one), ``_client`` (a private
    attribute or dunder reached on another object, unless toolstitch defines it: ``own``, or the
    module itself, except the names ``sdk`` says are the SDK's), and ``ctor:openai.APIError`` (an
    SDK class built, other than the documented clients)."""
    tree = ast.parse(source)
    own = (set(own) | _own_names(tree)) - sdk
    found: dict[str, int] = {}
    private_aliases: dict[str, str] = {}  # a local name bound to an SDK private module, or a name in one

    def add(key: str, line: int) -> None:
        found.setdefault(key, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "openai":
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if _is_private_module(dotted):
                    add(dotted, node.lineno)
                    private_aliases[alias.asname or alias.name] = dotted
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "openai" and _is_private_module(alias.name):
                    add(alias.name, node.lineno)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in private_aliases
        ):
            add(f"{private_aliases[node.value.id]}.{node.attr}", node.lineno)
        reached = _reached_name(node)
        if reached is not None and reached not in own:
            add(reached, node.lineno)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "__init__":
                func = func.value
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                public_class = func.value.id == "openai" and func.attr[:1].isupper()
                if public_class and func.attr not in DOCUMENTED_CONSTRUCTORS:
                    add(f"ctor:openai.{func.attr}", node.lineno)
            elif isinstance(func, ast.Name) and func.id in private_aliases and func.id[:1].isupper():
                add(f"ctor:{private_aliases[func.id]}", node.lineno)
    return found


def _sources() -> Iterator[tuple[Path, str]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, path.read_text()


def _package_own_names() -> set[str]:
    own: set[str] = set()
    for _path, source in _sources():
        own |= _own_names(ast.parse(source))
    return own


def test_every_sdk_private_name_the_code_uses_is_in_the_inventory() -> None:
    keys = covered()  # a name the inventory lists is the SDK's, even where toolstitch sets it too
    own = _package_own_names()
    missing = [
        f"{path.relative_to(ROOT)}:{line} uses {key}"
        for path, source in _sources()
        for key, line in sdk_uses(source, own, keys).items()
        if key not in keys
    ]
    assert missing == [], "add each to docs/sdk-internals.md, with the test that pins it"


@pytest.mark.parametrize(
    ("source", "key"),
    [
        ("from openai._utils import is_given", "openai._utils.is_given"),
        ("from openai import _legacy_response as lr\nlr.to_raw_response_wrapper", "openai._legacy_response"),
        ("from openai import _files as f\nf.read_file_content(x)", "openai._files.read_file_content"),
        ("import openai._exceptions", "openai._exceptions"),
        ("def f(stream):\n    return stream._new_internal", "_new_internal"),
        ("def f(stream):\n    return getattr(stream, '_new_internal', None)", "_new_internal"),
        ("def f(stream):\n    setattr(stream, '_new_internal', 1)", "_new_internal"),
        ("def f(stream):\n    return vars(stream).get('_new_internal')", "_new_internal"),
        ("def f(model):\n    return model.__new_dunder__", "__new_dunder__"),
        ("import openai\nopenai.BadRequestError('m', response=r, body=None)", "ctor:openai.BadRequestError"),
        ("import openai\nopenai.APIStatusError.__init__(e, 'm')", "ctor:openai.APIStatusError"),
        ("from openai._streaming import ServerSentEvent as E\nE()", "ctor:openai._streaming.ServerSentEvent"),
    ],
)  # fmt: skip
def test_the_source_check_sees_every_form(source: str, key: str) -> None:
    """The check above can fail: each way of reaching the SDK is found."""
    assert key in sdk_uses(source)


@pytest.mark.parametrize(
    "source",
    [
        "import openai\nclient = openai.OpenAI(api_key='k')",
        "from openai.types.chat import ChatCompletionChunk",
        "class A:\n    def __init__(self):\n        self._mine = 1\n\ndef f(o):\n    return o._mine",
        "class A:\n    __slots__ = ('_x',)\ndef f(a):\n    return a._x",
        "def f(self):\n    return self._anything",
        "def f(x):\n    return x.__dict__, x.__class__.__name__",
    ],
)
def test_toolstitchs_own_names_and_the_documented_api_are_not_the_inventorys(source: str) -> None:
    assert sdk_uses(source) == {}


def test_every_entry_names_tests_that_exist() -> None:
    problems = []
    for entry in inventory():
        if not entry.names or not entry.tests:
            problems.append(f"{entry}: no names or no test")
        for test in entry.tests:
            file, _, name = test.partition("::")
            path = ROOT / file
            if not path.exists() or not re.search(
                rf"^(async )?def {re.escape(name)}\(", path.read_text(), re.M
            ):
                problems.append(f"{entry}: {test} does not exist")
    assert problems == []


def test_every_entry_is_still_used() -> None:
    """An entry the code no longer uses goes: the list is what the code needs, no more."""
    text = "\n".join(source for _path, source in _sources())
    unused = [
        f"{entry}: {name}"
        for entry in inventory()
        for name in entry.names
        if _bare(name).removesuffix(".__init__").rsplit(".", 1)[-1] not in text
    ]
    assert unused == []


# ------------------------------------------------------------------------------------------ the pins


def test_pin_the_http_library() -> None:
    """The SDK's own HTTP library: its requests and responses are what the SDK's streams hold."""
    http = http_module()
    assert http.__name__ in ("httpx", "httpx2")
    with openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1") as client:
        assert isinstance(client._client, http.Client)
    request = http.Request("POST", "http://toolstitch.invalid/")
    assert isinstance(http.Response(200, request=request).request, http.Request)


def test_pin_construct_parameters() -> None:
    """``construct``'s own keyword parameters are keys a chunk may carry that it does not take as
    fields: the fast builder leaves every chunk holding one to the SDK."""
    assert "_fields_set" in _fast._construct_keywords()
    chunk = tool_call_chunks([("call_1", "f", "{}")])[0]
    assert _fast.build_chunk({**chunk, "_fields_set": ["id"]}) is None
    assert _fast.build_chunk(chunk) is not None


def test_pin_the_stream_attributes(server: LocalServer) -> None:
    """``Stream.__init__`` sets what ``install`` swaps and ``StitchedStream`` mirrors."""
    server.enqueue(StreamScript(tool_call_chunks([("call_1", "f", "{}")])))
    with server.client() as client:
        stream = client.chat.completions.create(model="m", messages=[], stream=True)
        for name in ("_client", "_cast_to", "_decoder", "_iterator"):
            assert name in vars(stream), name
        assert stream._client is client and stream._cast_to is ChatCompletionChunk
        assert getattr(stream, "_options", None) is None or hasattr(stream._options, "stream_mode")
        assert _fast.install(stream) and _fast.real_client(stream._client) is client
        assert len(list(stream)) == 5


def test_pin_prepare_url() -> None:
    """``_prepare_url`` joins a relative path to ``base_url`` keeping the base's own segments."""
    with openai.OpenAI(api_key="k", base_url="http://proxy.invalid/openai/v1/") as client:
        joined = client._prepare_url("chat/completions")
        assert joined.raw_path.decode() == "/openai/v1/chat/completions"


@needs_helper
def test_pin_the_helpers_raw_stream(server: LocalServer) -> None:
    """The ``stream()`` helper's ``ChatCompletionStream`` reads chunks from ``_raw_stream``; a
    wrapped client's helper reads them through toolstitch."""
    chunks = tool_call_chunks([("call_1", "f", "{}")])
    server.enqueue(StreamScript(chunks), StreamScript(chunks))
    tools: Any = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with server.client().chat.completions.stream(model="m", messages=[], tools=tools) as plain:
        assert isinstance(vars(plain).get("_raw_stream"), openai.Stream)
    client = ts.wrap(server.client())
    with client.chat.completions.stream(model="m", messages=[], tools=tools) as stream:
        assert isinstance(vars(stream).get("_raw_stream"), ts.StitchedStream)
        list(stream)
        assert [c.status for c in stream.toolstitch.tool_calls] == ["ready"]


def test_pin_api_exclude() -> None:
    """The SDK leaves ``__api_exclude__`` fields out when it sends a model back; so do history
    turns (a parsed response's ``parsed`` text)."""
    parsed = pytest.importorskip("openai.types.responses.parsed_response")
    text = parsed.ParsedResponseOutputText(
        type="output_text", text='{"a": 1}', annotations=[], parsed={"a": 1}
    )
    if not getattr(text, "__api_exclude__", None):
        pytest.skip("this openai release's parsed text has no __api_exclude__")
    data, _depth = to_plain(text)
    assert data["text"] == '{"a": 1}' and "parsed" not in data


# ------------------------------------------------------------------------------------- a changed SDK


@pytest.fixture
def fresh_self_check(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """The self-check run anew against whatever the test changes in the SDK, and again after."""
    _fast.fast_decode_status.cache_clear()
    _fast._responses_status.cache_clear()
    _fast._warn_once.cache_clear()
    try:
        yield monkeypatch
    finally:
        monkeypatch.undo()
        _fast.fast_decode_status.cache_clear()
        _fast._responses_status.cache_clear()
        _fast._warn_once.cache_clear()


def _streams(server: LocalServer, client: Any, n: int) -> list[list[Any]]:
    script = StreamScript(tool_call_chunks([("call_1", "f", '{"a": 1}')]))
    server.enqueue(*[script] * n)
    out = []
    for _ in range(n):
        with client.chat.completions.create(model="m", messages=[], stream=True) as stream:
            out.append([c.model_dump() for c in stream])
    return out


def test_a_changed_sdk_construction_keeps_the_sdk_decoding_and_warns_once(
    server: LocalServer, fresh_self_check: pytest.MonkeyPatch
) -> None:
    """A release whose chunks differ from what the fast builder makes (simulated: the SDK's step
    now marks every chunk's ``model``) keeps the SDK's decoding, so a wrapped stream yields exactly
    the objects this SDK makes, and says so once."""
    real = openai_base.BaseClient._process_response_data

    def changed(self: Any, *, data: object, cast_to: Any, response: Any) -> Any:
        value = real(self, data=data, cast_to=cast_to, response=response)
        if isinstance(value, ChatCompletionChunk):
            value.model = f"{value.model} (as this release builds it)"
        return value

    fresh_self_check.setattr(openai_base.BaseClient, "_process_response_data", changed)
    status = _fast.fast_decode_status()
    assert not status.builder and "differ" in status.reason
    plain = _streams(server, server.client(), 1)[0]
    client = ts.wrap(server.client())
    with pytest.warns(FastDecodeWarning, match="differ") as caught:
        first = _streams(server, client, 1)[0]
    assert len([w for w in caught if w.category is FastDecodeWarning]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = _streams(server, client, 1)[0]
    assert first == second == plain
    assert all(c["model"].endswith("(as this release builds it)") for c in first)


def test_a_changed_processing_signature_keeps_the_sdk_decoding(
    server: LocalServer, fresh_self_check: pytest.MonkeyPatch
) -> None:
    """A release whose ``_process_response_data`` takes another parameter (its loops might pass
    it; the stand-in would not take it) keeps the SDK's decoding, for chat and Responses alike."""
    real = openai_base.BaseClient._process_response_data

    def changed(self: Any, *, data: object, cast_to: Any, response: Any, options: Any = None) -> Any:
        return real(self, data=data, cast_to=cast_to, response=response)

    fresh_self_check.setattr(openai_base.BaseClient, "_process_response_data", changed)
    status = _fast.fast_decode_status()
    assert not status.builder and "parameters" in status.reason
    if hasattr(openai.types, "responses"):
        assert not status.events and "parameters" in status.events_reason
    client = ts.wrap(server.client())
    with pytest.warns(FastDecodeWarning, match="parameters"):
        got = _streams(server, client, 1)[0]
    assert got == _streams(server, server.client(), 1)[0]


def test_a_loop_that_calls_the_client_differently_keeps_the_sdk_decoding(
    server: LocalServer, fresh_self_check: pytest.MonkeyPatch
) -> None:
    """A release whose chat stream loop hands the client's method something the stand-in does not
    take (simulated: one more keyword per payload, which this release's method ignores) is found
    by running the SDK's own loop both ways, and keeps the SDK's decoding."""
    real_loop = openai.Stream.__stream__
    real_method = openai_base.BaseClient._process_response_data

    def loop(self: Any) -> Any:
        process = self._client._process_response_data
        try:
            for sse in self._iter_events():
                if sse.data.startswith("[DONE]"):
                    break
                yield process(data=sse.json(), cast_to=self._cast_to, response=self.response, hint=None)
        finally:
            self.response.close()

    def method(self: Any, *, data: object, cast_to: Any, response: Any, **_: Any) -> Any:
        return real_method(self, data=data, cast_to=cast_to, response=response)

    assert _fast._chat_loop_agrees()
    fresh_self_check.setattr(openai.Stream, "__stream__", loop)
    fresh_self_check.setattr(openai_base.BaseClient, "_process_response_data", method)
    fresh_self_check.setattr(_fast, "_processing_known", lambda: True)  # the loop check alone
    assert not _fast._chat_loop_agrees()
    status = _fast.fast_decode_status()
    assert not status.builder and "stream loop" in status.reason
    client = ts.wrap(server.client())
    with pytest.warns(FastDecodeWarning, match="stream loop"):
        got = _streams(server, client, 1)[0]
    assert got == _streams(server, server.client(), 1)[0]
    assert real_loop is not loop


@pytest.mark.parametrize(
    "replacement", [None, 42, next, print], ids=["gone", "not callable", "no signature", "other parameters"]
)
def test_a_processing_method_that_cannot_be_read_proves_nothing(
    fresh_self_check: pytest.MonkeyPatch, replacement: Any
) -> None:
    """A release whose ``_process_response_data`` is gone or unreadable keeps the SDK's decoding;
    the self-check says why and raises nothing."""
    fresh_self_check.setattr(openai_base.BaseClient, "_process_response_data", replacement)
    assert not _fast._processing_known()
    status = _fast.fast_decode_status()
    assert not status.builder and "parameters" in status.reason
