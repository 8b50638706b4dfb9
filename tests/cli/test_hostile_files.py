"""Hostile files: the ``toolstitch`` command never shows a traceback.

The corpus is generated here (no committed binaries). A file the command cannot use gives exit 2
and exactly one line on stderr; a file it can use, however odd its content (lone surrogates, a
field nested 900 deep, NaN in usage), gives output that can be encoded and, with ``--json``,
strict JSON. The library's ``replay()`` raises only ``RecordingFormatError`` (or ``OSError`` for
a file that cannot be read) on the same corpus.

The whole corpus runs through :func:`toolstitch.cli.main` in this process, with stdout and stderr
replaced by strict UTF-8 text files over bytes (what a real process has: a lone surrogate that
reached them would raise). Each case then runs again as a real ``python -m toolstitch`` process:
on a machine shared by several test runs a process costs about two seconds (importing ``openai``),
so the subprocess pass takes one flag set per file.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolstitch
from tests.conftest import examples
from toolstitch.cli import main
from toolstitch.errors import IncompleteStreamError, RecordingFormatError
from toolstitch.recording._replay import replay
from toolstitch.recording._report_data import report_data
from toolstitch.recording._report_html import report_html
from toolstitch.recording._report_text import report_text

SRC = Path(toolstitch.__file__).resolve().parents[1]
HEADER = json.dumps(
    {
        "type": "header",
        "format": "toolstitch.recording",
        "version": 1,
        "request": {"model": "m", "tools": [{"type": "function", "function": {"name": "f"}}]},
    }
)


def envelope(delta: str, finish: str = "null", extra: str = "") -> str:
    """A chunk's JSON text around a raw ``delta`` text (so it can hold what json.dumps never writes)."""
    return (
        '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        f'"choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]{extra}}}'
    )


def call_delta(arguments: str) -> str:
    """A tool-call delta whose ``arguments`` JSON string literal is ``arguments`` (raw, escapes kept)."""
    return (
        '{"tool_calls":[{"index":0,"id":"call_1","type":"function",'
        f'"function":{{"name":"f","arguments":"{arguments}"}}}}]}}'
    )


def record(*chunks: tuple[str, str], footer: str | None = '"offset_ms":9') -> str:
    """A recording's text: the header, ``(offset_ms text, chunk text)`` lines, a footer."""
    lines = [HEADER]
    lines += [f'{{"type":"chunk","offset_ms":{offset},"chunk":{chunk}}}' for offset, chunk in chunks]
    if footer is not None:
        lines.append(
            f'{{"type":"footer",{footer},"outcome":"completed","chunks":{len(chunks)},"error":null}}'
        )
    return "\n".join(lines) + "\n"


FINISH = envelope("{}", '"tool_calls"')
DEEP = "[" * 900 + "]" * 900
TOO_DEEP = "[" * 100_000 + "]" * 100_000


# Files no command can use: exit 2, one line.
UNUSABLE_RECORDINGS: dict[str, Callable[[Path], None]] = {
    "nan-offset": lambda p: p.write_text(record(("NaN", envelope(call_delta("{}"))), ("1", FINISH))),
    "infinite-offset": lambda p: p.write_text(
        record(("Infinity", envelope(call_delta("{}"))), ("1", FINISH))
    ),
    "huge-offset": lambda p: p.write_text(record(("1e308", envelope(call_delta("{}"))), ("1e308", FINISH))),
    "negative-offset": lambda p: p.write_text(record(("-5", FINISH))),
    "string-offset": lambda p: p.write_text(record(('"soon"', FINISH))),
    "boolean-offset": lambda p: p.write_text(record(("true", FINISH))),
    "nan-footer-offset": lambda p: p.write_text(record(("1", FINISH), footer='"offset_ms":NaN')),
    "too-deep-to-read": lambda p: p.write_text(HEADER + "\n" + TOO_DEEP + "\n" + record(("1", FINISH))),
    "binary-garbage": lambda p: p.write_bytes(bytes(range(256)) * 64),
    "utf16-text": lambda p: p.write_bytes(HEADER.encode("utf-16")),
    "empty": lambda p: p.write_bytes(b""),
    "blank-lines": lambda p: p.write_text("\n \n\t\n"),
    "directory": lambda p: p.mkdir(),
    "missing": lambda p: None,
    "huge-garbage-line": lambda p: p.write_text(HEADER + "\n{" + "x" * 20_000_000 + "\n" + "{}\n"),
    "not-an-object": lambda p: p.write_text(HEADER + "\n[1, 2, 3]\n"),
    "null-line": lambda p: p.write_text("null\n"),
    "unknown-format": lambda p: p.write_text('{"type":"header","format":"other"}\n'),
    "prose": lambda p: p.write_text("hello, this is not a recording\n"),
}

# Files that are usable, with hostile content: exit 0 and output that encodes.
USABLE_RECORDINGS: dict[str, Callable[[Path], None]] = {
    "lone-surrogates": lambda p: p.write_text(
        record(
            ("1", envelope('{"content":"half \\ud83d and \\udc80 here"}')),
            ("2", envelope(call_delta('{\\"path\\": \\"/data/old\\udc80\\"}'))),
            ("3", envelope('{"reasoning_content":"\\udfff"}')),
            ("4", FINISH),
        )
    ),
    "nested-900-deep": lambda p: p.write_text(
        record(
            ("1", envelope('{"content":"hi","provider_field":' + DEEP + "}")),
            ("2", envelope(call_delta('{\\"a\\": 1}'))),
            ("3", envelope("{}", '"tool_calls"', ',"usage":{"deep":' + DEEP + "}")),
        )
    ),
    "non-finite-values": lambda p: p.write_text(
        record(
            ("1", envelope(call_delta('{\\"a\\": 1}'))),
            ("2", envelope("{}", '"tool_calls"', ',"usage":{"prompt_tokens":NaN,"total_tokens":Infinity}')),
        )
    ),
    "huge-content": lambda p: p.write_text(
        record(("1", envelope(json.dumps({"content": "東京 " * 2_000_000}))), ("2", FINISH))
    ),
    # The SDK fails on data it cannot decode: the replay shows that failure as the stream's error.
    "sse-too-deep": lambda p: p.write_text("data: " + TOO_DEEP + "\n\n"),
    "sse-surrogates": lambda p: p.write_text(
        "data: " + envelope('{"content":"\\udc80"}') + "\n\ndata: " + FINISH + "\n\ndata: [DONE]\n\n"
    ),
}


def run_process(*args: str) -> subprocess.CompletedProcess[bytes]:
    """The real command, in its own process, with strict UTF-8 output."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "PYTHONIOENCODING": "utf-8:strict"}
    return subprocess.run(
        [sys.executable, "-m", "toolstitch", *args], capture_output=True, env=env, timeout=120, check=False
    )


def run_cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    """:func:`main` in this process, its output written as a process writes it (strict UTF-8)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    out.flush()
    err.flush()
    stdout = out.buffer.getvalue()  # type: ignore[attr-defined]
    stderr = err.buffer.getvalue()  # type: ignore[attr-defined]
    return subprocess.CompletedProcess(list(args), code, stdout, stderr)


def assert_one_line_exit_2(result: subprocess.CompletedProcess[bytes], command: str) -> None:
    stderr = result.stderr.decode("utf-8")
    assert result.returncode == 2, (result.returncode, stderr[-2000:])
    assert "Traceback" not in stderr
    assert stderr.endswith("\n") and stderr.count("\n") == 1, stderr
    assert stderr.startswith(f"toolstitch {command}: ")
    assert "internal error" not in stderr, stderr  # foreseen, and said clearly
    assert len(stderr) < 600


def strict_json(data: bytes) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(data.decode("utf-8"), parse_constant=refuse)


@pytest.mark.parametrize("name", sorted(UNUSABLE_RECORDINGS))
def test_replay_of_an_unusable_file_is_one_line_and_exit_2(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.jsonl"
    UNUSABLE_RECORDINGS[name](path)
    # --timing and --html: the paths that slept on, and drew, the bad values.
    result = run_cli("replay", str(path), "--timing", "--html", str(tmp_path / "out.html"))
    assert_one_line_exit_2(result, "replay")
    assert result.stdout == b""


@pytest.mark.parametrize("flags", [[], ["--json"], ["--timing"], ["--html", "OUT"]], ids=str)
@pytest.mark.parametrize("name", sorted(USABLE_RECORDINGS))
def test_replay_of_hostile_content_prints_encodable_output(
    name: str, flags: list[str], tmp_path: Path
) -> None:
    path = tmp_path / f"{name}.jsonl"
    USABLE_RECORDINGS[name](path)
    out = tmp_path / "report.html"
    result = run_cli("replay", str(path), *[str(out) if f == "OUT" else f for f in flags])
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 0, stderr[-2000:]
    assert "Traceback" not in stderr
    text = result.stdout.decode("utf-8")  # strict: no lone surrogate reached the bytes
    if "--json" not in flags:
        assert len(text) < 200_000  # a 10 MB content is shown by its first lines
    if "--json" in flags:
        report = strict_json(result.stdout)
        assert report["format"] in ("recording", "sse")
    if "--html" in flags:
        page = out.read_bytes().decode("utf-8")
        assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")


def test_lone_surrogates_are_escaped_not_lost(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    USABLE_RECORDINGS["lone-surrogates"](path)
    result = run_cli("replay", str(path), "--json")
    report = strict_json(result.stdout)
    # The completion must serialise, so its content cannot hold them: each lone surrogate is U+FFFD
    # there (and noted); the call keeps its text exactly.
    assert report["content"]["0"] == "half \ufffd and \ufffd here"
    call = report["calls"][0]
    assert call["status"] != "ready"  # not valid Unicode: never executable
    assert call["arguments"] in ('{"path": "/data/old\udc80"}', "")  # kept exactly, or refused whole
    text = run_cli("replay", str(path)).stdout.decode("utf-8")
    assert "\\udc80" in text


@pytest.mark.parametrize("name", sorted([*UNUSABLE_RECORDINGS, *USABLE_RECORDINGS]))
def test_the_library_raises_only_recording_format_error_or_os_error(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.jsonl"
    {**UNUSABLE_RECORDINGS, **USABLE_RECORDINGS}[name](path)
    try:
        replayed = replay(path)
    except RecordingFormatError as exc:
        assert "\n" not in str(exc)
        assert name in UNUSABLE_RECORDINGS
        return
    except OSError:
        assert name in ("directory", "missing")
        return
    assert name in USABLE_RECORDINGS
    replayed.until_done()
    json.dumps(report_data(replayed), allow_nan=False)
    report_text(replayed)
    report_html(replayed)
    with contextlib.suppress(IncompleteStreamError):
        replayed.get_final_completion()


# ------------------------------------------------------------------------------ toolstitch check

UNUSABLE_HISTORIES: dict[str, Callable[[Path], None]] = {
    "invalid-json": lambda p: p.write_text('[{"role": "user", "content": '),
    "a-string": lambda p: p.write_text('"hello"'),
    "a-number": lambda p: p.write_text("42"),
    "null": lambda p: p.write_text("null"),
    "object-without-messages": lambda p: p.write_text('{"model": "m"}'),
    "messages-not-a-list": lambda p: p.write_text('{"messages": "hi"}'),
    "too-deep-to-read": lambda p: p.write_text(TOO_DEEP),
    "binary-garbage": lambda p: p.write_bytes(bytes(range(256)) * 64),
    "empty": lambda p: p.write_bytes(b""),
    "directory": lambda p: p.mkdir(),
    "missing": lambda p: None,
}

HOSTILE_HISTORIES: dict[str, Callable[[Path], None]] = {
    "message-nested-900-deep": lambda p: p.write_text('[{"role": "user", "content": ' + DEEP + "}]"),
    "request-nested-900-deep": lambda p: p.write_text(
        '{"messages": [{"role": "user", "content": "hi", "x": ' + DEEP + '}], "tools": ' + DEEP + "}"
    ),
    "history-lone-surrogates": lambda p: p.write_text('[{"role": "user\\udc80", "content": "\\ud83d"}]'),
    "non-finite": lambda p: p.write_text('[{"role": "user", "content": NaN, "weight": Infinity}]'),
    "list-of-junk": lambda p: p.write_text('[1, null, "x", [], {"role": 5}]'),
}


@pytest.mark.parametrize("name", sorted(UNUSABLE_HISTORIES))
def test_check_of_an_unusable_file_is_one_line_and_exit_2(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.json"
    UNUSABLE_HISTORIES[name](path)
    assert_one_line_exit_2(run_cli("check", str(path)), "check")


@pytest.mark.parametrize("flags", [[], ["--json"]], ids=str)
@pytest.mark.parametrize("name", sorted(HOSTILE_HISTORIES))
def test_check_of_a_hostile_history_never_shows_a_traceback(
    name: str, flags: list[str], tmp_path: Path
) -> None:
    path = tmp_path / f"{name}.json"
    HOSTILE_HISTORIES[name](path)
    result = run_cli("check", str(path), *flags)
    stderr = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr
    if result.returncode == 2:  # the validator could not take it apart: said in one line
        assert stderr.count("\n") == 1 and stderr.startswith("toolstitch check: ")
        return
    assert result.returncode in (0, 1), stderr
    result.stdout.decode("utf-8")
    if "--json" in flags:
        assert strict_json(result.stdout)["valid"] is (result.returncode == 0)


# ------------------------------------------------------------------------------ real processes


@pytest.mark.parametrize(
    ("command", "name", "flags", "code"),
    [
        ("replay", "nan-offset", ["--json"], 2),
        ("replay", "huge-offset", ["--timing"], 2),
        ("replay", "nested-900-deep", ["--html", "OUT"], 0),
        ("replay", "lone-surrogates", ["--json"], 0),
        ("check", "message-nested-900-deep", [], None),
    ],
)
def test_the_real_process_agrees(
    command: str, name: str, flags: list[str], code: int | None, tmp_path: Path
) -> None:
    corpus = {**UNUSABLE_RECORDINGS, **USABLE_RECORDINGS, **UNUSABLE_HISTORIES, **HOSTILE_HISTORIES}
    path = tmp_path / name
    corpus[name](path)
    result = run_process(command, str(path), *[str(tmp_path / "o.html") if f == "OUT" else f for f in flags])
    stderr = result.stderr.decode("utf-8")
    assert "Traceback" not in stderr
    if code is not None:
        assert result.returncode == code, stderr
    if result.returncode == 2:
        assert stderr.count("\n") == 1 and stderr.startswith(f"toolstitch {command}: ")
    else:
        assert result.returncode in (0, 1)
        result.stdout.decode("utf-8")
        if "--json" in flags:
            strict_json(result.stdout)


# ------------------------------------------------------------------------------ any file at all

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
RECORD_LINES = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["chunk", "footer", "header", "other"])},
        optional={
            "offset_ms": st.floats() | st.integers() | st.text(max_size=3) | st.booleans(),
            "chunk": JSON_VALUES,
            "choices": JSON_VALUES,
            "error": JSON_VALUES,
            "outcome": JSON_VALUES,
        },
    ),
    max_size=6,
)


def replay_everything(path: Path) -> None:
    """``replay()`` and every report: only ``RecordingFormatError`` may come out."""
    try:
        replayed = replay(path)
    except RecordingFormatError as exc:
        assert "\n" not in str(exc)
        return
    replayed.until_done()
    json.dumps(report_data(replayed), allow_nan=False)
    report_text(replayed)
    report_html(replayed)


@settings(max_examples=examples(60), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=RECORD_LINES)
def test_any_recording_shaped_file_replays_or_is_refused(lines: list[dict[str, Any]], tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([HEADER, *(json.dumps(line) for line in lines)]) + "\n")
    replay_everything(path)


@settings(max_examples=examples(60), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300) | st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_any_bytes_replay_or_are_refused(data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_bytes(data)
    replay_everything(path)


# ------------------------------------------------------------------------------ regressions from review


def test_check_of_deeply_nested_json_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000, encoding="utf-8")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("toolstitch check: ")


def test_replay_of_a_deeply_nested_chunk_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.jsonl"
    header = '{"type": "header", "format": "toolstitch.recording", "version": 1}'
    path.write_text(header + "\n" + '{"type": "chunk", "chunk": ' + "[" * 100_000 + "\n", encoding="utf-8")
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("toolstitch replay: ")
