"""MCP tools with the same guarantees as Python functions (issue 45), against a real MCP server: the
``mcp`` package's own ``MCPServer`` (``tests/tools/_mcp_server.py``), as a stdio subprocess and over
streamable HTTP on 127.0.0.1. The model side is the real ``openai`` client against the local server.

What the server really ran is counted from its marks (one line per run, in ``$MARKS/<tool>``), so
"exactly once" and "never sent" are checked on the server's side, across sessions."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolstitch as ts
from tests.tools._support import calls_reply, sealed, text_reply, user
from toolstitch import mcp
from toolstitch.events import CallDispatched, RunEvent
from toolstitch.testing import LocalServer, StreamScript, response_events

pytest.importorskip("mcp")

SERVER = str(Path(__file__).with_name("_mcp_server.py"))
RESPONSES_API = pytest.mark.skipif(
    importlib.util.find_spec("openai.types.responses") is None,
    reason="this openai release has no Responses API",
)


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    path = tmp_path / "marks"
    path.mkdir()
    return path


def ran(marks: Path, name: str) -> list[str]:
    """What tool ``name`` marked on the server, in order."""
    path = marks / name
    return path.read_text().splitlines() if path.exists() else []


def on_stdio(marks: Path, env: dict[str, str] | None = None, **options: Any) -> mcp.MCPServer:
    options.setdefault("name", "notes")
    return mcp.stdio(sys.executable, [SERVER], env={"MARKS": str(marks), **(env or {})}, **options)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HTTPServer:
    """The test server over streamable HTTP on 127.0.0.1, as a subprocess that can be killed and
    started again on the same port."""

    def __init__(self, marks: Path) -> None:
        self.marks = marks
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "MARKS": str(self.marks)}
        self.process = subprocess.Popen(
            [sys.executable, SERVER, "--http", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError("the MCP test server exited at start") from None
                time.sleep(0.05)
        raise RuntimeError("the MCP test server did not listen within 30 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None


@pytest.fixture
def http_server(marks: Path) -> Iterator[HTTPServer]:
    server = HTTPServer(marks)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def model() -> Iterator[LocalServer]:
    with LocalServer(check_history=True) as srv:
        yield srv


def offered(body: dict[str, Any]) -> list[str]:
    """The tool names a request offered (chat or Responses shape)."""
    return [t.get("function", t).get("name") for t in body.get("tools") or []]


# ----------------------------------------------------------------------------- 1. the API


def test_a_servers_tools_are_offered_beside_the_functions(marks: Path) -> None:
    def get_time(city: str) -> str:
        """The time in a city."""
        return "noon"

    with ts.Toolbox([get_time], mcp=[on_stdio(marks)]) as box:
        definitions = {d["function"]["name"]: d["function"] for d in box.definitions()}
        assert box.names[0] == "get_time" and {"echo", "forecast", "add_note"} <= set(box.names)
        assert definitions["forecast"]["description"] == "The forecast for a city."
        assert definitions["forecast"]["parameters"]["properties"] == {
            "city": {"title": "City", "type": "string"}
        }
        assert definitions["forecast"]["parameters"]["required"] == ["city"]
        assert box.get("forecast") is not None and box.get("forecast").server == "notes"  # type: ignore[union-attr]
        assert box.get("get_time").server is None  # type: ignore[union-attr]


def test_a_name_clash_is_refused_when_the_toolbox_is_built(marks: Path) -> None:
    def echo(text: str) -> str:
        """A function named like the server's tool."""
        return text

    with pytest.raises(ValueError, match=r"two tools are named 'echo'.*MCP server 'notes'.*a function"):
        ts.Toolbox([echo], mcp=[on_stdio(marks)])
    with pytest.raises(ValueError, match="two tools are named 'echo'"):
        ts.Toolbox(mcp=[on_stdio(marks), on_stdio(marks, name="again")])


def test_an_override_naming_no_tool_of_the_server_is_refused(marks: Path) -> None:
    with pytest.raises(ValueError, match=r"no tool 'ecco' \(named in read_only=\)"):
        ts.Toolbox(mcp=[on_stdio(marks, read_only=["ecco"])])
    with pytest.raises(TypeError, match="list of tool names"):
        on_stdio(marks, confirm="delete_notes")


def test_a_server_that_cannot_start_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = mcp.stdio(str(tmp_path / "no-such-server"), name="ghost", start_timeout=10)
    with pytest.raises(mcp.MCPServerError, match="'ghost'"):
        ts.Toolbox(mcp=[missing])
    silent = mcp.stdio(sys.executable, ["-c", "import time; time.sleep(30)"], name="mute", start_timeout=1)
    t0 = time.monotonic()
    with pytest.raises(mcp.MCPServerError, match="'mute': no tool list within start_timeout"):
        ts.Toolbox(mcp=[silent])
    assert time.monotonic() - t0 < 20


def test_the_list_is_read_again_between_turns_when_the_server_says_it_changed(
    marks: Path, model: LocalServer
) -> None:
    model.enqueue(calls_reply([("c1", "grow", "{}")]), text_reply("done"))
    with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
        assert "added" not in box.names
        result = ts.run(model.client(), model="m", messages=user(), toolbox=box)
        assert result.results[0].ok
        assert "added" not in offered(model.requests[0])
        assert "added" in offered(model.requests[1])
        assert "added" in box.names


# ----------------------------------------------------------------------------- 2. the one door


def test_calls_pass_the_door_and_results_become_tool_messages(marks: Path, model: LocalServer) -> None:
    model.enqueue(
        calls_reply(
            [
                ("c1", "echo", '{"text": "hi"}'),
                ("c2", "forecast", '{"city": "Paris"}'),
                ("c3", "picture", "{}"),
            ]
        ),
        text_reply("done"),
    )
    with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
        result = ts.run(model.client(), model="m", messages=user(), toolbox=box)
    assert result.output_text == "done"
    _, forecast, picture = result.results
    assert forecast.value == {"city": "Paris", "celsius": 21.5}
    assert json.loads(forecast.content) == {"city": "Paris", "celsius": 21.5}  # structured: JSON
    assert picture.content == "a cat\n[image: image/png, 5 bytes]"  # parts: text, others described
    tool_messages = [m for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["c1", "c2", "c3"]
    assert tool_messages[1]["content"] == forecast.content
    assert ran(marks, "echo") == ["hi"] and ran(marks, "forecast") == ["Paris"]


def test_arguments_are_checked_against_the_servers_schema_before_anything_is_sent(marks: Path) -> None:
    with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
        bad = sealed(
            [("c1", "add_note", '{"text": 5}'), ("c2", "add_note", '{"txt": "x"}')], box.definitions()
        )
        results = box.execute(bad)
    assert [r.reason for r in results] == ["invalid_arguments", "invalid_arguments"]
    assert "5 is not of type 'string'" in results[0].content
    assert ran(marks, "add_note") == []  # never sent


def test_an_is_error_result_is_an_error_whose_text_the_model_reads(marks: Path) -> None:
    with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
        (result,) = box.execute(sealed([("c1", "refuse", '{"reason": "no access"}')], box.definitions()))
    assert result.status == "error" and result.reason == "raised"
    assert "cannot do that: no access" in result.content  # the server's words, verbatim
    assert "ToolError" not in result.content


def test_a_call_runs_once_with_a_ledger_across_runs(marks: Path, model: LocalServer) -> None:
    ledger = ts.MemoryLedger()
    for _ in range(2):
        model.enqueue(calls_reply([("c1", "add_note", '{"text": "milk"}')]), text_reply("done"))
        with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
            result = ts.run(model.client(), model="m", messages=user(), toolbox=box, ledger=ledger)
    assert result.results[0].reused and result.results[0].value == {"result": "note 1 added"}
    assert ran(marks, "add_note") == ["milk"]


def test_a_call_that_needs_confirmation_is_asked_first(marks: Path, model: LocalServer) -> None:
    asked: list[str] = []

    def confirm(call: ts.ToolCall, tool: Any) -> bool:
        asked.append(call.name or "")
        return False

    with ts.Toolbox(mcp=[on_stdio(marks, confirm=["delete_notes"])], confirm=confirm) as box:
        (result,) = box.execute(sealed([("c1", "delete_notes", "{}")], box.definitions()))
    assert asked == ["delete_notes"] and result.reason == "not_approved"
    assert ran(marks, "delete_notes") == []
    model.enqueue(calls_reply([("c1", "delete_notes", "{}")]))
    with ts.Toolbox(mcp=[on_stdio(marks, confirm=["delete_notes"])]) as box:
        stopped = ts.run(model.client(), model="m", messages=user(), toolbox=box)
    assert stopped.stop_reason == "awaiting_approval" and ran(marks, "delete_notes") == []


# ----------------------------------------------------------------------------- 3. sessions


def test_one_session_serves_every_call_and_turn_and_closes_with_the_toolbox(
    marks: Path, model: LocalServer
) -> None:
    model.enqueue(
        calls_reply([("c1", "pid", "{}")]),
        calls_reply([("c2", "pid", "{}"), ("c3", "echo", '{"text": "x"}')]),
        text_reply("done"),
    )
    box = ts.Toolbox(mcp=[on_stdio(marks)])
    result = ts.run(model.client(), model="m", messages=user(), toolbox=box)
    pids = [r.value["result"] for s in result.steps for r in s.results if r.call.name == "pid"]
    assert len(pids) == 2 and pids[0] == pids[1]  # the same server process across turns
    pid = int(pids[0])
    os.kill(pid, 0)  # still running between runs
    box.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the server outlived its toolbox")


def test_a_timeout_bounds_the_call_and_sends_mcps_cancellation(marks: Path) -> None:
    with ts.Toolbox(mcp=[on_stdio(marks, timeout=0.5)]) as box:
        t0 = time.monotonic()
        (result,) = box.execute(sealed([("c1", "slow", '{"seconds": 30}')], box.definitions()))
        assert result.status == "timeout" and time.monotonic() - t0 < 10
        deadline = time.monotonic() + 10
        while ran(marks, "slow") != ["started", "cancelled"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ran(marks, "slow") == ["started", "cancelled"]  # the server was told
        (after,) = box.execute(sealed([("c2", "echo", '{"text": "still here"}')], box.definitions()))
        assert after.ok


def test_a_server_that_dies_mid_call_leaves_its_outcome_unknown_and_is_never_rerun(
    marks: Path, model: LocalServer
) -> None:
    ledger = ts.MemoryLedger()
    model.enqueue(calls_reply([("c1", "die", "{}")]), text_reply("sorry"))
    with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
        result = ts.run(model.client(), model="m", messages=user(), toolbox=box, ledger=ledger)
        (died,) = result.results
        assert died.status == "error" and died.reason == "outcome_unknown"
        assert "Whether it took effect is unknown" in died.content
        # the same call again (a retried run) is answered from the ledger, never sent again
        model.enqueue(calls_reply([("c1", "die", "{}")]), text_reply("sorry"))
        again = ts.run(model.client(), model="m", messages=user(), toolbox=box, ledger=ledger)
        assert again.results[0].reused and again.results[0].content == died.content
        # the next call gets a new session
        (echo,) = box.execute(sealed([("c2", "echo", '{"text": "after"}')], box.definitions()))
        assert echo.ok and echo.value == {"result": "after"}
        assert box.warm_state("echo") is not None
    assert ran(marks, "die") == ["ran"]


def test_a_read_only_call_lost_with_its_session_is_sent_once_more(marks: Path) -> None:
    with ts.Toolbox(mcp=[on_stdio(marks, read_only=["flaky_read"])]) as box:
        (result,) = box.execute(sealed([("c1", "flaky_read", '{"key": "k"}')], box.definitions()))
    assert result.ok and result.value == {"result": "value of k"}
    assert ran(marks, "flaky_read") == ["k", "k"]


def test_a_server_that_died_between_calls_is_opened_again_before_the_next(marks: Path) -> None:
    with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
        (bye,) = box.execute(sealed([("c1", "exit_soon", "{}")], box.definitions()))
        assert bye.ok
        time.sleep(1.0)  # the server is gone; the session knows it (its transport ended)
        (note,) = box.execute(sealed([("c2", "add_note", '{"text": "x"}')], box.definitions()))
    assert note.ok and ran(marks, "add_note") == ["x"]


def test_the_next_request_warms_a_new_session_after_a_death(marks: Path, model: LocalServer) -> None:
    model.enqueue(
        calls_reply([("c1", "die", "{}")]),
        calls_reply([("c2", "echo", '{"text": "x"}')]),
        text_reply("done"),
    )
    with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
        result = ts.run(model.client(), model="m", messages=user(), toolbox=box)
        warm = box.warm_state("echo")
    assert result.steps[1].results[0].ok
    assert (
        warm is not None and warm.status == "ok" and warm.started_at >= result.results[0].timings.finished_at
    )  # type: ignore[operator]
    assert result.timeline is not None
    lanes = [lane for lane in result.timeline.calls if lane.name == "echo"]
    assert lanes and lanes[0].stage("warm_up") is not None


def test_a_list_the_server_lets_keep_builds_the_next_toolbox_without_waiting(
    marks: Path, model: LocalServer
) -> None:
    server = on_stdio(marks, env={"LIST_TTL_MS": "60000"})
    with ts.Toolbox(mcp=[server]) as first:
        assert first.warm_state("echo") is not None  # opened to read the list
    t0 = time.monotonic()
    with ts.Toolbox(mcp=[server]) as box:
        built = time.monotonic()
        assert "echo" in box.names and box.warm_state("echo") is None  # nothing opened yet
        model.enqueue(calls_reply([("c1", "echo", '{"text": "x"}')]), text_reply("done"))
        result = ts.run(model.client(), model="m", messages=user(), toolbox=box)
        warm = box.warm_state("echo")
    assert result.results[0].ok
    # the session opened when the request was sent, not when the toolbox was built
    assert warm is not None and warm.started_at >= built >= t0
    assert result.timeline is not None and result.timeline.calls[0].stage("warm_up") is not None
    other = on_stdio(marks, env={"LIST_TTL_MS": "60000", "OTHER": "1"})  # another server: read again
    with ts.Toolbox(mcp=[other]) as box:
        assert box.warm_state("echo") is not None


def test_a_list_the_server_does_not_let_keep_is_read_again(marks: Path) -> None:
    for _ in range(2):
        with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
            assert box.warm_state("echo") is not None


# ----------------------------------------------------------------------------- 4. trust


def test_by_default_annotations_are_hints_only(marks: Path) -> None:
    with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
        for name in ("echo", "forecast", "lying_reader", "delete_notes", "add_note"):
            t = box.get(name)
            assert t is not None and not t.read_only and not t.eager and not t.confirm, name


def test_an_untrusted_read_only_hint_gets_no_eager_start(marks: Path, model: LocalServer) -> None:
    events: list[RunEvent] = []
    model.enqueue(calls_reply([("c1", "lying_reader", '{"path": "/etc"}')]), text_reply("done"))
    with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
        ts.run(model.client(), model="m", messages=user(), toolbox=box, on_event=events.append)
    dispatched = [e for e in events if isinstance(e, CallDispatched)]
    assert [e.eager for e in dispatched] == [False]
    assert ran(marks, "lying_reader") == ["/etc"]


def test_trusted_annotations_decide_read_only_confirmation_and_retries(marks: Path) -> None:
    with ts.Toolbox(mcp=[on_stdio(marks, trust_annotations=True)]) as box:
        echo, forecast, add_note, delete_notes = (
            box.get(n) for n in ("echo", "forecast", "add_note", "delete_notes")
        )
        assert echo is not None and echo.read_only and echo.eager and not echo.confirm
        assert forecast is not None and forecast.read_only
        assert (
            add_note is not None and not add_note.read_only and not add_note.confirm
        )  # destructiveHint false
        assert (
            delete_notes is not None and delete_notes.confirm and not delete_notes.read_only
        )  # destructive by default
        (refused,) = box.execute(sealed([("c1", "delete_notes", "{}")], box.definitions()))
    assert refused.reason == "not_approved" and ran(marks, "delete_notes") == []


def test_a_trusted_read_only_tool_starts_while_the_model_writes(marks: Path, model: LocalServer) -> None:
    events: list[RunEvent] = []
    model.enqueue(
        calls_reply([("c1", "echo", '{"text": "early"}'), ("c2", "add_note", '{"text": "late"}')]),
        text_reply("done"),
    )
    with ts.Toolbox(mcp=[on_stdio(marks, trust_annotations=True)]) as box:
        result = ts.run(model.client(), model="m", messages=user(), toolbox=box, on_event=events.append)
    dispatched = {e.call.name: e.eager for e in events if isinstance(e, CallDispatched)}
    assert dispatched == {"echo": True, "add_note": False}
    assert [r.ok for r in result.results] == [True, True]
    assert ran(marks, "echo") == ["early"] and ran(marks, "add_note") == ["late"]


def test_a_read_only_tool_with_a_cache_is_answered_from_it(marks: Path, model: LocalServer) -> None:
    model.enqueue(
        calls_reply([("c1", "forecast", '{"city": "Oslo"}')]),
        calls_reply([("c2", "forecast", '{"city": "Oslo"}')]),
        text_reply("done"),
    )
    with ts.Toolbox(mcp=[on_stdio(marks, read_only=["forecast"], cache=60)]) as box:
        result = ts.run(model.client(), model="m", messages=user(), toolbox=box)
    assert [s.results[0].cached for s in result.steps[:2]] == [False, True]
    assert result.steps[1].results[0].value == {"city": "Oslo", "celsius": 21.5}
    assert ran(marks, "forecast") == ["Oslo"]


def test_per_tool_overrides_win_over_the_hints(marks: Path) -> None:
    server = on_stdio(marks, trust_annotations=True, read_only=["add_note"], confirm=["echo"])
    with ts.Toolbox(mcp=[server]) as box:
        add_note, echo = box.get("add_note"), box.get("echo")
        assert add_note is not None and add_note.read_only and not add_note.confirm
        assert echo is not None and echo.read_only and echo.confirm and not echo.eager


def test_an_untrusted_idempotent_call_is_not_sent_again_after_a_death(marks: Path) -> None:
    """flaky_read's hints say read-only; without trust its loss is an unknown outcome."""
    with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
        (result,) = box.execute(sealed([("c1", "flaky_read", '{"key": "k"}')], box.definitions()))
    assert result.reason == "outcome_unknown" and ran(marks, "flaky_read") == ["k"]


# ----------------------------------------------------------------------------- 5. everywhere


@RESPONSES_API
def test_the_responses_api_runs_mcp_tools(marks: Path, model: LocalServer) -> None:
    model.enqueue(
        StreamScript.responses(response_events([("call_1", "forecast", '{"city": "Rome"}')])),
        StreamScript.responses(response_events(text="sunny", id="resp_2")),
    )
    with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
        result = ts.run(model.client(), model="m", input="weather?", toolbox=box, api="responses")
    assert result.output_text == "sunny"
    assert "forecast" in offered(model.requests[0])
    outputs = [i for i in model.requests[1]["input"] if i.get("type") == "function_call_output"]
    assert json.loads(outputs[0]["output"]) == {"city": "Rome", "celsius": 21.5}


async def test_arun_runs_mcp_tools_from_its_own_loop(marks: Path, model: LocalServer) -> None:
    model.enqueue(
        calls_reply([("c1", "echo", '{"text": "a"}'), ("c2", "add_note", '{"text": "b"}')]),
        text_reply("done"),
    )
    events: list[RunEvent] = []
    with ts.Toolbox(mcp=[on_stdio(marks, trust_annotations=True)]) as box:
        result = await ts.arun(
            model.async_client(), model="m", messages=user(), toolbox=box, on_event=events.append
        )
        (again,) = await box.aexecute(sealed([("c3", "echo", '{"text": "c"}')], box.definitions()))
    assert [r.ok for r in result.results] == [True, True] and again.ok
    assert {e.call.name: e.eager for e in events if isinstance(e, CallDispatched)} == {
        "echo": True,
        "add_note": False,
    }
    assert ran(marks, "echo") == ["a", "c"] and ran(marks, "add_note") == ["b"]


async def test_a_timeout_from_arun_cancels_on_the_server(marks: Path) -> None:
    with ts.Toolbox(mcp=[on_stdio(marks, timeout=0.5)]) as box:
        (result,) = await box.aexecute(sealed([("c1", "slow", '{"seconds": 30}')], box.definitions()))
        assert result.status == "timeout"
        deadline = time.monotonic() + 10
        while "cancelled" not in ran(marks, "slow") and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    assert ran(marks, "slow") == ["started", "cancelled"]


def test_mcp_calls_are_execute_tool_spans(marks: Path) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from tests.loop.test_telemetry import EXPORTER, providers

    providers()
    EXPORTER.clear()
    with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
        box.execute(sealed([("c1", "echo", '{"text": "x"}')], box.definitions()))
    (span,) = [s for s in EXPORTER.get_finished_spans() if s.name == "execute_tool echo"]
    EXPORTER.clear()
    assert span.attributes is not None
    assert span.attributes["gen_ai.tool.call.id"] == "c1"
    assert span.attributes["mcp.method.name"] == "tools/call"
    assert span.attributes["toolstitch.mcp.server"] == "notes"


def test_a_run_with_mcp_tools_is_recorded_and_its_timeline_saved(
    marks: Path, model: LocalServer, tmp_path: Path
) -> None:
    model.enqueue(calls_reply([("c1", "forecast", '{"city": "Lima"}')]), text_reply("done"))
    with ts.Toolbox(mcp=[on_stdio(marks)]) as box:
        result = ts.run(
            ts.wrap(model.client(), record=tmp_path / "rec"), model="m", messages=user(), toolbox=box
        )
    first = sorted((tmp_path / "rec").iterdir())[0]
    (call,) = ts.replay(first).tool_calls
    assert (call.name, call.status, call.parsed) == ("forecast", "ready", {"city": "Lima"})
    assert result.timeline is not None
    saved = tmp_path / "run.json"
    result.timeline.save(saved)
    lanes = [c for s in json.loads(saved.read_text())["steps"] for c in s["calls"]]
    assert [(c["name"], c["result"]) for c in lanes] == [("forecast", "ok")]
    assert "execution" in [stage["name"] for stage in lanes[0]["stages"]]


# ----------------------------------------------------------------------------- 6. over HTTP


def test_over_http_tools_are_listed_called_and_sent_the_headers(http_server: HTTPServer, marks: Path) -> None:
    server = mcp.http(http_server.url, headers={"X-Team": "blue"})
    assert server.name == "127.0.0.1"
    with ts.Toolbox(mcp=[server]) as box:
        assert {"echo", "forecast"} <= set(box.names)
        results = box.execute(
            sealed(
                [("c1", "forecast", '{"city": "Oslo"}'), ("c2", "header", '{"name": "x-team"}')],
                box.definitions(),
            )
        )
    assert results[0].value == {"city": "Oslo", "celsius": 21.5}
    assert results[1].value == {"result": "blue"}


def test_over_http_a_death_mid_call_is_unknown_and_a_restarted_server_gets_a_new_session(
    http_server: HTTPServer, marks: Path
) -> None:
    with ts.Toolbox(mcp=[mcp.http(http_server.url, timeout=20)]) as box:
        (died,) = box.execute(sealed([("c1", "die", "{}")], box.definitions()))
        assert died.reason == "outcome_unknown"
        http_server.start()
        (note,) = box.execute(sealed([("c2", "add_note", '{"text": "y"}')], box.definitions()))
        assert note.ok
        http_server.stop()  # gone between calls: the POST cannot connect, so nothing was sent
        (gone,) = box.execute(sealed([("c3", "add_note", '{"text": "z"}')], box.definitions()))
    assert gone.status == "error" and gone.reason == "raised" and "could not be reached" in gone.content
    assert ran(marks, "die") == ["ran"] and ran(marks, "add_note") == ["y"]
