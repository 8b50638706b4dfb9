"""The shape of the package: layers one way (import-linter), no import cycles, a small, pinned surface,
each package used through its ``__init__``, and every file a comment or docstring cites present."""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import pkgutil
import re
import subprocess
import sys
import tokenize
import warnings
from pathlib import Path
from typing import Any

import grimp
import pytest

import toolstitch as ts

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "toolstitch"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the floor leg (pytest brings tomli there)
    import tomli as tomllib

PUBLIC = [
    "Accumulator",
    "AsyncStitchedResponseStream",
    "AsyncStitchedStream",
    "Deny",
    "HistoryError",
    "IncompleteStreamError",
    "Limits",
    "MemoryLedger",
    "PostgresLedger",
    "ResponseAccumulator",
    "RunResult",
    "SQLiteLedger",
    "StitchedResponseStream",
    "StitchedStream",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "Toolbox",
    "ToolstitchError",
    "aresume",
    "arun",
    "arun_events",
    "assistant_message",
    "call_error_text",
    "calls_of",
    "ensure_valid_history",
    "function_call_output",
    "function_call_outputs",
    "repair_history",
    "replay",
    "response_items",
    "resume",
    "run",
    "run_events",
    "stitch",
    "tool",
    "tool_message",
    "tool_messages",
    "trust_grammar",
    "validate_history",
    "validate_input",
    "validate_request",
    "wrap",
]


def test_public_surface_is_pinned() -> None:
    assert sorted(ts.__all__) == sorted(PUBLIC)
    assert len(ts.__all__) <= 44  # 44: trust_grammar (a custom tool's format, marked), issue 47
    for name in ts.__all__:
        assert getattr(ts, name) is not None


LAYERS = ("cli", "loop", "tools", "history", "client", "recording", "core", "text")
"""Every layer package, top to bottom."""


def _all_blocks(layer: str) -> tuple[list[str], list[str]]:
    """A layer ``__init__``'s two ``__all__`` lists: ``__all__ = [...]`` (the names users meet)
    and ``__all__ += [...]`` (the names for the layers above only), as written."""
    tree = ast.parse((SRC / layer / "__init__.py").read_text(encoding="utf-8"))
    users: list[str] = []
    layers: list[str] = []
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "__all__":
            assert isinstance(node.value, ast.List), f"{layer}: __all__ is written out, name by name"  # type: ignore[attr-defined]
            names = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]  # type: ignore[attr-defined]
            (users if isinstance(node, ast.Assign) else layers).extend(names)
    return users, layers


def test_each_layer_keeps_the_names_users_meet_apart_from_the_layers_names() -> None:
    """Issue 44: a layer's ``__all__`` says which of its names users meet (handed out by
    ``toolstitch`` or a public module) and which only the layers above use, in two lists."""
    public = set(ts.__all__)
    for name in ("events", "metrics", "errors", "mcp", "testing"):
        module = importlib.import_module(f"toolstitch.{name}")
        public |= set(module.__all__)
    for layer in LAYERS:
        users, layers = _all_blocks(layer)
        assert sorted(users + layers) == sorted(importlib.import_module(f"toolstitch.{layer}").__all__)
        assert [n for n in users if n not in public] == [], layer
        assert [n for n in layers if n in public] == [], layer


def test_resume_names_are_pinned() -> None:
    """A background stream by id: ``ts.resume`` / ``ts.aresume`` (as ``run`` / ``arun``), its
    policy and record in ``toolstitch.client``, its one error in ``toolstitch.errors``."""
    assert ts.resume is ts.client.resume and ts.aresume is ts.client.aresume
    assert {"Resume", "ResumePolicy", "resume", "aresume"} <= set(ts.client.__all__)
    assert "ResumeUnavailableError" in ts.errors.__all__
    assert issubclass(ts.errors.ResumeUnavailableError, ts.ToolstitchError)


def test_custom_tool_names_are_pinned() -> None:
    """Custom tools add no top-level name: ``@ts.tool(custom=True)`` / ``format=`` and
    ``Tool.from_custom`` make them, ``ToolCall.type == "custom"`` tells their calls apart, the
    anomaly ``grammar_unchecked`` marks an input not checked, and ``toolstitch.core`` shares the
    format check (``read_format``, ``InputFormat``) with the tools layer."""
    parameters = inspect.signature(ts.tool).parameters
    assert {"custom", "format"} <= set(parameters)
    assert parameters["custom"].default is False and parameters["format"].default is None
    assert callable(ts.Tool.from_custom)
    assert ts.core.AnomalyCode.GRAMMAR_UNCHECKED == "grammar_unchecked"
    assert {"InputFormat", "read_format"} <= set(ts.core.__all__)


def test_public_submodules_hold_the_rest() -> None:
    assert ts.events.ToolCallReady.__module__.startswith("toolstitch.")
    assert issubclass(ts.errors.SchemaViolation, ts.errors.ToolCallError)
    assert ts.metrics.CallMetrics is not None


@pytest.mark.parametrize("name", sorted(ts._MOVED))
def test_moved_names_resolve_with_a_deprecation_warning(name: str) -> None:
    home = ts._MOVED[name]
    with pytest.warns(DeprecationWarning, match=home.replace(".", r"\.")) as caught:
        value = getattr(ts, name)
    assert [w.filename for w in caught] == [__file__]  # the warning points at the caller's line
    module = sys.modules[home]
    assert value is getattr(module, name)


COMPLETION = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
        }
    ],
}


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        ("toolstitch", "Ledger", "MemoryLedger"),
        ("toolstitch.tools", "Ledger", "MemoryLedger"),
        ("toolstitch", "tool_calls", "calls_of"),
        ("toolstitch.client", "tool_calls", "calls_of"),
    ],
)
def test_renamed_names_resolve_for_one_release_with_a_deprecation_warning(
    module: str, old: str, new: str
) -> None:
    home = importlib.import_module(module)
    assert old not in home.__all__ and new in home.__all__
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is now {module}\.{new}") as caught:
        value = getattr(home, old)
    assert value is getattr(home, new)
    assert [w.filename for w in caught] == [__file__]  # the warning points at the caller's line
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is now"):
        exec(f"from {module} import {old}", {})


def test_the_deprecated_names_still_work() -> None:
    with pytest.warns(DeprecationWarning):
        ledger = ts.Ledger(scope="s")
    assert type(ledger) is ts.MemoryLedger and isinstance(ledger, ts.tools.ClaimLedger)
    tools = [{"type": "function", "function": {"name": "f"}}]
    with pytest.warns(DeprecationWarning):
        (old,) = ts.tool_calls(COMPLETION, tools=tools)
    (new,) = ts.calls_of(COMPLETION, tools=tools)
    assert (old.id, old.status, old.parsed) == (new.id, new.status, new.parsed) == ("call_1", "ready", {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ts.MemoryLedger is ts.tools.MemoryLedger and ts.calls_of is ts.client.calls_of


def test_unknown_name_is_an_attribute_error() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError):
            _ = ts.NoSuchName  # type: ignore[attr-defined]


def test_every_exception_lives_in_errors() -> None:
    """One module holds every exception class toolstitch defines (private helpers excepted)."""
    offenders = []
    for info in pkgutil.walk_packages(ts.__path__, "toolstitch."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and not name.startswith("_")
                and info.name != "toolstitch.errors"
            ):
                offenders.append(f"{info.name}.{name}")
    assert offenders == []


def test_import_linter_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_anywhere() -> None:
    """Lazy imports inside functions count; only ``if TYPE_CHECKING:`` imports are exempt."""
    graph = grimp.build_graph("toolstitch", exclude_type_checking_imports=True)
    assert _cycles(graph) == []


# ------------------------------------------------------------------ each package through its __init__


def _modules() -> dict[str, Path]:
    """Every module of the package, by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _owner_of_private(target: str) -> str | None:
    """The package whose underscore module ``target`` is, or sits in (None: no underscore part)."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if _is_private(part):
            return ".".join(parts[:i])
    return None


def private_imports(module: str, source: str, *, is_package: bool = False) -> list[tuple[int, str]]:
    """``(line, module)`` for each import in ``source`` (the text of ``module``) of an underscore
    module of a package that ``module`` is not inside. Every import counts: under ``TYPE_CHECKING``,
    inside functions, ``import a._b``, ``from a._b import c`` and ``from a import _b`` alike."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [target, *(f"{target}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        for name in targets:
            owner = _owner_of_private(name)
            if owner is None or not (name == "toolstitch" or name.startswith("toolstitch.")):
                continue
            if module != owner and not module.startswith(owner + "."):
                found.append((node.lineno, name))
                break  # one finding per import statement
    return found


def test_no_module_imports_another_packages_private_module() -> None:
    """``toolstitch.core._call`` is core's own: every other package reaches it through
    ``toolstitch.core`` (the ``__init__``'s ``__all__`` is the package's surface to the others)."""
    offenders = []
    for module, path in _modules().items():
        is_package = path.name == "__init__.py"
        for line, target in private_imports(module, path.read_text(), is_package=is_package):
            offenders.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert offenders == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("toolstitch.loop._run", "from ..core._call import now"),
        ("toolstitch.loop._run", "from ..core import _call"),
        ("toolstitch.loop._run", "import toolstitch.core._call"),
        ("toolstitch.loop._run", "from toolstitch.tools._twins import bound"),
        ("toolstitch.loop._run", "def f():\n    from ..recording._redact import x"),
        ("toolstitch.loop._run", "if TYPE_CHECKING:\n    from ..core._call import ToolCall"),
        ("toolstitch.events", "from .core._events import Event"),
        ("toolstitch.recording", "from ..core._limits import Limits"),
    ],
)
def test_the_private_import_check_sees_every_form(module: str, source: str) -> None:
    """The check above can fail: each way of spelling the import is caught."""
    assert len(private_imports(module, source, is_package=module == "toolstitch.recording")) == 1


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("toolstitch.loop._run", "from ._stream_event import StreamEvent"),
        ("toolstitch.loop", "from . import _pull, _run"),
        ("toolstitch.loop._run", "from ..core import now"),
        ("toolstitch.recording._recorder", "from .._version import __version__"),
        ("toolstitch.loop._run", "from openai._types import NOT_GIVEN"),
    ],
)
def test_a_package_may_use_its_own_private_modules(module: str, source: str) -> None:
    """A package's own modules, the root's ``_version`` (every module is inside the root) and other
    libraries' modules are not this rule's business."""
    assert private_imports(module, source, is_package=module == "toolstitch.loop") == []


def private_module_contracts() -> list[dict[str, Any]]:
    """The import-linter contracts that hold each package to its ``__init__``, from the module tree:
    for each subpackage, a ``forbidden`` contract from every other package and top-level module to
    its underscore modules (direct imports only: reaching them through the ``__init__`` is the point).
    import-linter has no "private module" contract, and its wildcards match whole names only, so the
    list is spelled out in pyproject.toml and this function keeps it complete."""
    modules = _modules()
    subpackages = sorted(m for m, p in modules.items() if p.name == "__init__.py" and m != "toolstitch")
    top_level = sorted(
        m for m in modules if m.count(".") == 1 and m not in subpackages and not _is_private(m.split(".")[1])
    )
    contracts = []
    for package in subpackages:
        private = sorted(
            m for m in modules if m.startswith(package + ".") and _owner_of_private(m) == package
        )
        if not private:
            continue
        contracts.append(
            {
                "name": f"{package} is used through its __init__: its underscore modules are its own",
                "type": "forbidden",
                "source_modules": [m for m in [*subpackages, *top_level] if m != package],
                "forbidden_modules": private,
                "allow_indirect_imports": True,
            }
        )
    return contracts


def _toml_contract(contract: dict[str, Any]) -> str:
    def listing(values: list[str]) -> str:
        return "[\n" + "".join(f'    "{v}",\n' for v in values) + "]"

    return (
        "[[tool.importlinter.contracts]]\n"
        f'name = "{contract["name"]}"\n'
        f'type = "{contract["type"]}"\n'
        f"source_modules = {listing(contract['source_modules'])}\n"
        f"forbidden_modules = {listing(contract['forbidden_modules'])}\n"
        "allow_indirect_imports = true\n"
    )


def test_the_import_linter_contracts_name_every_private_module() -> None:
    """A new module (or package) joins the contracts; the failure prints the TOML to paste."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    written = [
        c for c in config["tool"]["importlinter"]["contracts"] if "its underscore modules" in c["name"]
    ]
    expected = private_module_contracts()
    assert written == expected, "pyproject.toml should hold:\n\n" + "\n".join(map(_toml_contract, expected))


# ---------------------------------------------------------------------------------- cited files exist

CITATION = re.compile(
    r"(?<![\w./-])((?:\.\./|\./)?[A-Za-z0-9_][\w.-]*(?:/[\w.-]+)*"
    r"\.(?:py|md|html|toml|json|jsonl|sse|txt|ya?ml|cfg|ini|sh|csv))(?![\w/])"
)
# A name in capitals stands for the reader's own file (``FILE.json``, ``PROJECT/NAME.sse``).
PLACEHOLDER = re.compile(r"(?:^|/)[A-Z][A-Z_]+(?:\.[\w]+)+$|(?:^|/)[A-Z][A-Z_]+/")
# Files of other projects, cited for where a behaviour comes from.
ELSEWHERE = ("logfire/", "h11/")
# Stale citations inside src/toolstitch/core/, which is being rebuilt by its owner (issue 28): each is
# fixed there; this list only shrinks.
CORE_STALE: set[tuple[str, str]] = set()


def _commentary(source: str) -> list[tuple[int, str]]:
    """Each comment and docstring (module, class, function, attribute) of ``source``, by line."""
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found.append((node.lineno, node.value.value))
    return found


def cited_files_missing(path: Path, source: str) -> list[str]:
    """The files ``source`` (the text of ``path``) cites in comments and docstrings that do not exist,
    read from the repository's root, the package's root, ``src/`` or the citing file's folder."""
    missing = []
    for _line, text in _commentary(source):
        for match in CITATION.finditer(text):
            cited = match.group(1)
            if PLACEHOLDER.search(cited) or cited.startswith(ELSEWHERE):
                continue
            if not any((base / cited).exists() for base in (ROOT, SRC, ROOT / "src", path.parent)):
                missing.append(cited)
    return missing


def test_every_cited_file_exists() -> None:
    stale = set()
    for folder in ("src", "tests", "benchmarks", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for cited in cited_files_missing(path, path.read_text()):
                stale.add((str(path.relative_to(ROOT)), cited))
    assert stale - CORE_STALE == set()


def test_a_stale_citation_is_found() -> None:
    here = SRC / "core" / "_call.py"
    source = '"""Checked in ``core/_check.py``; see docs/nowhere.md."""\n# and ``_route.py`` (exists)\n'
    assert cited_files_missing(here, source) == ["core/_check.py", "docs/nowhere.md"]
    assert cited_files_missing(here, '"""See docs/design.md, FILE.json and ``_seal.py``."""') == []
