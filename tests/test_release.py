"""The release installs anywhere: ``python -m build`` makes an sdist and one pure wheel, ``twine check``
passes, and the wheel, installed in a fresh virtual environment that cannot see the checkout, runs
``toolstitch demo`` and the README's first example.

``python -m build`` builds the sdist first and the wheel from it, so the sdist is known to hold what
a wheel needs. The fresh environment is ``python -m venv`` with the wheel installed by ``uv pip``
(the test extra brings uv; pip when it is missing): uv takes the dependencies from its cache, offline
first, and from the index only when the cache lacks them, in a fraction of a second where pip takes
about fifteen. Everything there runs with its working directory outside the checkout and with
``PYTHONPATH``, ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` unset (the example under ``python -I``),
so the demo and the example use the embedded local server.
"""

from __future__ import annotations

import email.parser
import importlib.util
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Sequence
from email.message import Message
from pathlib import Path

import pytest

import toolstitch
from tests.conftest import ROOT

pytestmark = pytest.mark.release

URL = "https://github.com/toolstitch/toolstitch"
HAS_UV = importlib.util.find_spec("uv") is not None
#: What must not leak from the machine that builds into what it builds.
LOCAL = (
    ".venv/",
    "__pycache__/",
    ".pyc",
    ".mypy_cache/",
    ".ruff_cache/",
    ".pytest_cache/",
    ".grimp_cache/",
    ".import_linter_cache/",
    ".hypothesis/",
    "dist/",
    "build/",
    ".egg-info",
)


def _run(command: Sequence[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _offline_first(command: Sequence[str], *, cwd: Path) -> None:
    """Run a command that installs with uv from uv's cache alone, and with the index when the cache
    lacks something."""
    if HAS_UV:
        offline = subprocess.run(
            command, cwd=cwd, env={**os.environ, "UV_OFFLINE": "1"}, capture_output=True, check=False
        )
        if offline.returncode == 0:
            return
    _run(command, cwd=cwd)


def test_the_release_builds_passes_twine_check_installs_anywhere_and_runs(tmp_path: Path) -> None:
    """One test, so that the build happens once in whichever ``./dev test`` process draws it."""
    sdist, wheel = _build(tmp_path / "dist")
    _check_files(sdist, wheel)
    _check_metadata(wheel)
    _twine_check(sdist, wheel)
    _install_and_run(wheel, tmp_path)


def _build(out: Path) -> tuple[Path, Path]:
    """The sdist and the wheel, built from the checkout as a release is."""
    out.mkdir()
    installer = ["--installer", "uv"] if HAS_UV else []
    _offline_first([sys.executable, "-m", "build", *installer, "--outdir", str(out), str(ROOT)], cwd=out)
    sdists, wheels = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in out.iterdir())
    assert {p.name for p in out.iterdir()} == {sdists[0].name, wheels[0].name}  # nothing else
    return sdists[0], wheels[0]


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as z:
        text = z.read(f"toolstitch-{toolstitch.__version__}.dist-info/METADATA").decode()
    return email.parser.Parser().parsestr(text)


def _check_files(sdist: Path, wheel: Path) -> None:
    version = toolstitch.__version__
    assert wheel.name == f"toolstitch-{version}-py3-none-any.whl"
    assert sdist.name == f"toolstitch-{version}.tar.gz"
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        wheel_file = z.read(f"toolstitch-{version}.dist-info/WHEEL").decode()
    assert "Root-Is-Purelib: true" in wheel_file
    assert re.findall(r"^Tag: (.*)$", wheel_file, re.M) == ["py3-none-any"]
    # The package and its data, its metadata and license; no tests, cassettes, compiled code or caches.
    assert {"toolstitch/py.typed", "toolstitch/cli/_web_page.html", "toolstitch/testing.py"} <= set(names)
    assert f"toolstitch-{version}.dist-info/licenses/LICENSE" in names
    assert all(n.startswith(("toolstitch/", f"toolstitch-{version}.dist-info/")) for n in names)
    assert [n for n in names if not n.endswith((".py", ".html", ".typed")) and "dist-info" not in n] == []
    assert [n for n in names if any(bit in n for bit in LOCAL)] == []
    # The sdist holds the project: sources, tests, cassettes, docs; no caches or environments.
    with tarfile.open(sdist) as t:
        files = {name.split("/", 1)[1] for name in t.getnames() if "/" in name}
    for needed in (
        "pyproject.toml",
        "README.md",
        "LICENSE",
        "CHANGELOG.md",
        "src/toolstitch/py.typed",
        "src/toolstitch/cli/_web_page.html",
        "tests/conftest.py",
        "cassettes/README.md",
        "docs/design.md",
    ):
        assert needed in files, needed
    assert any(f.startswith("cassettes/providers/") for f in files)
    assert [f for f in files if any(bit in f for bit in LOCAL)] == []


def _check_metadata(wheel: Path) -> None:
    meta = _metadata(wheel)
    assert meta["Name"] == "toolstitch" and meta["Version"] == toolstitch.__version__
    assert meta["Requires-Python"] == ">=3.10"
    assert meta["License-Expression"] == "Apache-2.0" and meta["License-File"] == "LICENSE"
    urls = dict(value.split(", ", 1) for value in meta.get_all("Project-URL", []))
    assert urls["Homepage"] == URL
    assert urls["Documentation"].startswith(URL + "/") and urls["Changelog"].startswith(URL + "/")
    assert urls["Issues"] == URL + "/issues"
    classifiers = meta.get_all("Classifier", [])
    for python in ("3.10", "3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {python}" in classifiers
    assert {"Typing :: Typed", "Operating System :: OS Independent"} <= set(classifiers)
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    # The license is the SPDX expression; PyPI refuses an upload with a License :: classifier beside it.
    assert not any(c.startswith("License ::") for c in classifiers)
    assert {"postgres", "otel"} <= set(meta.get_all("Provides-Extra", []))
    requires = meta.get_all("Requires-Dist", [])
    assert any(r.startswith("openai>=") and "extra" not in r for r in requires)
    assert any(r.startswith("psycopg") and "extra == 'postgres'" in r for r in requires)
    assert any(r.startswith("opentelemetry-api") and "extra == 'otel'" in r for r in requires)
    assert meta["Description-Content-Type"] == "text/markdown"
    assert meta.get_payload().startswith("# toolstitch")  # the README is the long description


def _twine_check(sdist: Path, wheel: Path) -> None:
    output = _run(
        [sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)], cwd=sdist.parent
    )
    assert output.count("PASSED") == 2


def _first_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^```python\n(.*?)^```$", readme, re.M | re.S)
    assert found is not None, "the README has no python block"
    return found.group(1)


def _install_and_run(wheel: Path, tmp_path: Path) -> None:
    """The wheel in a fresh environment, away from the checkout: the demo and the README's first example."""
    venv, away = tmp_path / "venv", tmp_path / "elsewhere"
    away.mkdir()
    if HAS_UV:
        _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=away)
        uv = [sys.executable, "-m", "uv", "pip", "install", "--no-config", "--quiet"]
        _offline_first([*uv, "--python", str(venv / "bin" / "python"), str(wheel)], cwd=away)
    else:
        _run([sys.executable, "-m", "venv", str(venv)], cwd=away)
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], cwd=away)

    unset = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "OPENAI_API_KEY", "OPENAI_BASE_URL", "VIRTUAL_ENV"}
    env = {k: v for k, v in os.environ.items() if k not in unset and not k.startswith("TOOLSTITCH_")}
    example = _first_example()
    (away / "first_example.py").write_text(example, encoding="utf-8")
    # The example as a user runs it, then where toolstitch was imported from.
    runner = (
        "import runpy; runpy.run_path('first_example.py', run_name='__main__'); "
        "import toolstitch, sys; print('imported from', toolstitch.__file__); print('path', sys.path)"
    )
    python = str(venv / "bin" / "python")
    # Both at once: each spends most of its time importing openai.
    demo = subprocess.Popen(
        [str(venv / "bin" / "toolstitch"), "demo"],
        cwd=away,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = subprocess.Popen(
        [python, "-I", "-c", runner],
        cwd=away,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    demo_out, demo_err = demo.communicate(timeout=120)
    first_out, first_err = first.communicate(timeout=120)

    assert demo.returncode == 0, demo_out + demo_err
    assert "validate_history: no problems" in demo_out
    assert first.returncode == 0, first_out + first_err
    imported_from = Path(re.findall(r"^imported from (.*)$", first_out, re.M)[0])
    assert imported_from.is_relative_to(venv), imported_from
    assert str(ROOT) not in first_out.split("\nimported from", 1)[1]  # the checkout is not on sys.path
    # What the example promises in its comments (`print(...)  # ready get_weather {...}`) it prints.
    promised = re.findall(r"^\s*print\(.*\)\s+#\s*(.+)$", example, re.M)
    assert promised, "the first example promises no output"
    for line in promised:
        assert line.strip() in first_out, (line, first_out)
