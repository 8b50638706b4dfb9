"""``isolation="process"`` (issue 41 item 6): a sync tool run in a worker process that is killed at
its timeout, so the timeout bounds its run. Real processes throughout.

The tools live in ``tests/tools/_isolated_tools.py``: a worker process imports them by name. A time
bound is asserted only where the bound is the point (a tool that would sleep 60 s is gone within
10), and generously.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolstitch as ts
from tests.tools import _isolated_tools as iso
from tests.tools._support import calls_reply, sealed, text_reply, user
from toolstitch.loop._run import RetryPolicy
from toolstitch.testing import LocalServer, StreamScript, tool_call_chunks
from toolstitch.tools import CancelToken, Tool, Toolbox, tool

ROOT = Path(__file__).resolve().parents[2]  # the exit script imports tests.tools._isolated_tools
BOUND = 10.0  # seconds: what happens at once unless the code is wrong


@pytest.fixture
def box() -> Iterator[Toolbox]:
    with Toolbox(
        [
            iso.add,
            iso.whoami,
            iso.price,
            iso.sleepy,
            iso.late_writer,
            iso.refuses,
            iso.breaks,
            iso.unpicklable,
            iso.exits,
        ]
    ) as b:
        yield b


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone_within(pid: int, seconds: float = BOUND) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _call(box: Toolbox, name: str, arguments: str, call_id: str = "call_1") -> ts.ToolResult:
    (result,) = box.execute(sealed([(call_id, name, arguments)]))
    return result


def _whoami(box: Toolbox, tmp_path: Path, name: str = "whoami") -> int:
    """Run the pid tool (which also warms a worker process) and return the pid it ran in."""
    pid_file = tmp_path / f"{name}.pid"
    result = _call(box, name, f'{{"pid_file": "{pid_file}"}}')
    assert result.status == "ok", result.error
    assert int(pid_file.read_text(encoding="utf-8")) == result.value
    return int(result.value)


# ----------------------------------------------------------------------------- results


def test_a_process_tool_returns_its_value_from_another_process(box: Toolbox, tmp_path: Path) -> None:
    result = _call(box, "add", '{"a": 2, "b": 3}')
    assert (result.status, result.value) == ("ok", 5)
    pid = _whoami(box, tmp_path)
    assert pid != os.getpid()
    assert pid in box.runtime().processes().pids
    assert _whoami(box, tmp_path) == pid  # the idle process is used again


def test_a_pydantic_model_argument_crosses_to_the_process(box: Toolbox) -> None:
    result = _call(box, "price", '{"item": "pen", "quantity": 2}')
    assert (result.status, result.value) == ("ok", "2 x pen = 6")


async def test_aexecute_runs_a_process_tool(box: Toolbox) -> None:
    (result,) = await box.aexecute(sealed([("call_1", "add", '{"a": 1, "b": 1}')]))
    assert (result.status, result.value) == ("ok", 2)


def test_a_tool_error_reaches_the_model_verbatim(box: Toolbox) -> None:
    result = _call(box, "refuses", '{"reason": "no order 42; ask for the receipt"}')
    assert result.status == "error"
    assert result.error == "no order 42; ask for the receipt"
    assert isinstance(result.exception, ts.ToolError)


def test_a_plain_exception_is_the_usual_error_result(box: Toolbox) -> None:
    result = _call(box, "breaks", '{"secret": "s3cr3t"}')
    assert result.status == "error" and result.reason == "raised"
    assert isinstance(result.exception, KeyError)
    assert result.error is not None and "KeyError" in result.error and "s3cr3t" not in result.error


def test_a_result_that_cannot_be_pickled_is_an_error_that_says_so(box: Toolbox) -> None:
    result = _call(box, "unpicklable", "{}")
    assert result.status == "error"
    assert isinstance(result.exception, RuntimeError)
    assert "could not be sent back from its process" in str(result.exception)
    assert (_call(box, "add", '{"a": 1, "b": 2}')).value == 3  # the process is fine


def test_a_process_that_dies_is_an_error_never_a_hang(box: Toolbox) -> None:
    t0 = time.monotonic()
    result = _call(box, "exits", '{"code": 3}')
    assert time.monotonic() - t0 < BOUND
    assert result.status == "error"
    assert "ended unexpectedly (exit code 3)" in str(result.exception)
    assert (_call(box, "add", '{"a": 1, "b": 2}')).value == 3  # a new process


# ----------------------------------------------------------------------------- the hard bound


def test_a_timeout_kills_the_process_and_the_next_call_gets_a_new_one(box: Toolbox, tmp_path: Path) -> None:
    first = _whoami(box, tmp_path)  # a worker is idle: the slow call begins at once
    pid_file = tmp_path / "sleepy.pid"
    t0 = time.monotonic()
    result = _call(box, "sleepy", f'{{"pid_file": "{pid_file}"}}')
    assert time.monotonic() - t0 < BOUND
    assert result.status == "timeout"
    assert result.error is not None and "stopped" in result.error
    pid = int(pid_file.read_text(encoding="utf-8"))
    assert pid == first
    assert _gone_within(pid)
    after = _whoami(box, tmp_path)
    assert after != pid


def test_a_timed_out_function_really_stops(box: Toolbox, tmp_path: Path) -> None:
    """The tool sleeps 3 s, then writes a file; its timeout is 0.5 s: the file never appears."""
    _whoami(box, tmp_path)
    sentinel = tmp_path / "written"
    t0 = time.monotonic()
    result = _call(box, "late_writer", f'{{"path": "{sentinel}"}}')
    assert result.status == "timeout"  # it began (a worker was idle), then it was stopped
    time.sleep(max(0.0, 4.0 - (time.monotonic() - t0)))
    assert not sentinel.exists()


def test_close_kills_the_worker_processes(tmp_path: Path) -> None:
    box = Toolbox([iso.whoami, iso.add])
    _whoami(box, tmp_path)
    results = box.execute(sealed([("c1", "add", '{"a": 1, "b": 1}'), ("c2", "add", '{"a": 2, "b": 2}')]))
    assert [r.value for r in results] == [2, 4]
    pids = box.runtime().processes().pids
    assert pids
    box.close()
    assert all(_gone_within(pid) for pid in pids)


def test_the_interpreter_exit_kills_a_process_tool_that_still_runs(tmp_path: Path) -> None:
    """Nobody closes the toolbox and the tool would run 60 s: the script still ends at once."""
    pid_file = tmp_path / "pid"
    script = textwrap.dedent(
        f"""
        import sys, threading, time
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from tests.tools._support import calls_reply, sealed, text_reply, user
        from tests.tools import _isolated_tools as iso
        from toolstitch.tools import Toolbox

        if __name__ == "__main__":
            box = Toolbox([iso.forever])
            calls = sealed([("c1", "forever", '{{"pid_file": "{pid_file}"}}')])
            threading.Thread(target=box.execute, args=(calls,), daemon=True).start()
            while not Path({str(pid_file)!r}).exists():
                time.sleep(0.02)
        """
    )
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60, cwd=tmp_path)
    assert time.monotonic() - t0 < 30  # the child imports toolstitch; the tool's 60 s never happen
    assert _gone_within(int(pid_file.read_text(encoding="utf-8")))


def test_ts_run_runs_a_process_tool_started_eagerly(tmp_path: Path) -> None:
    with LocalServer(check_history=True) as server, Toolbox([iso.lookup]) as box:
        server.enqueue(
            calls_reply([("call_a", "lookup", f'{{"q": "one", "pid_dir": "{tmp_path}"}}')]),
            text_reply("done"),
        )
        result = ts.run(server.client(), model="m", messages=user(), toolbox=box)
    assert result.stop_reason == "done"
    (call,) = result.steps[0].results
    assert (call.status, call.value, call.timings.eager) == ("ok", "found one", True)
    assert int((tmp_path / "one.pid").read_text(encoding="utf-8")) != os.getpid()


def test_a_discarded_eager_start_kills_its_process(tmp_path: Path) -> None:
    """The stream drops after the call's JSON closed (it started early); the retry brings other
    arguments, so the early start is discarded: its process is killed, not left to run a minute."""
    slow = f'{{"q": "slow", "pid_dir": "{tmp_path}"}}'
    chunks = tool_call_chunks([("call_a", "lookup", slow)], interleave=False)
    with LocalServer(check_history=True) as server, Toolbox([iso.lookup]) as box:
        warm = _call(box, "lookup", f'{{"q": "warm", "pid_dir": "{tmp_path}"}}')
        assert warm.status == "ok"  # a worker is idle: the early start begins at once
        server.enqueue(
            StreamScript(chunks, cut_after=len(chunks) - 1, delay=0.01),
            # the retry takes its time (about a second), so the early start surely began
            calls_reply([("call_a", "lookup", f'{{"q": "other", "pid_dir": "{tmp_path}"}}')], delay=0.1),
            text_reply("done"),
        )
        fast = RetryPolicy(attempts=3, initial=0.0, maximum=0.0, jitter=0.0)
        result = ts.run(server.client(), model="m", messages=user(), toolbox=box, retry=fast)
        assert [r.value for r in result.steps[0].results] == ["found other"]
        assert _gone_within(int((tmp_path / "slow.pid").read_text(encoding="utf-8")))


# ----------------------------------------------------------------------------- where tools run


def test_the_toolbox_default_applies_and_a_tool_s_own_isolation_wins(tmp_path: Path) -> None:
    with Toolbox([iso.plain_whoami, iso.thread_whoami], isolation="process") as b:
        assert b.isolation == "process"
        assert b.isolation_of(b.get("plain_whoami")) == "process"  # type: ignore[arg-type]
        assert b.isolation_of(b.get("thread_whoami")) == "thread"  # type: ignore[arg-type]
        assert _whoami(b, tmp_path, "plain_whoami") != os.getpid()
        assert _whoami(b, tmp_path, "thread_whoami") == os.getpid()
    with Toolbox([iso.plain_whoami]) as b:
        assert b.isolation == "thread"
        assert _whoami(b, tmp_path, "plain_whoami") == os.getpid()


def test_isolation_takes_thread_or_process_only() -> None:
    with pytest.raises(ValueError, match="isolation must be"):
        Toolbox(isolation="subprocess")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="isolation must be"):
        tool(isolation="none")(iso.plain_add)  # type: ignore[arg-type]
    assert tool(iso.plain_add).isolation is None
    assert Tool.from_function(iso.plain_add, isolation="process").isolation == "process"


# ----------------------------------------------------------------------------- refused at definition


def test_an_async_tool_cannot_run_in_a_process() -> None:
    async def lookup(q: str) -> str:
        return q

    with pytest.raises(ValueError, match="make it a sync function, or use isolation='thread'"):
        tool(isolation="process")(lookup)
    with pytest.raises(ValueError, match="make it a sync function, or use isolation='thread'"):
        Toolbox([tool(lookup)], isolation="process")
    with Toolbox([tool(isolation="thread")(lookup)], isolation="process") as b:  # its own wins
        assert b.isolation_of(b.get("lookup")) == "thread"  # type: ignore[arg-type]


def test_a_cancel_token_is_refused_with_process_isolation() -> None:
    def lookup(q: str, token: CancelToken) -> str:
        return q

    with pytest.raises(ValueError, match="drop the 'token' parameter"):
        tool(isolation="process")(lookup)
    with pytest.raises(ValueError, match="drop the 'token' parameter"):
        Toolbox([lookup], isolation="process")


def test_a_warm_up_is_refused_with_process_isolation() -> None:
    with pytest.raises(ValueError, match="warm= would prepare this process, not the worker"):
        tool(isolation="process", read_only=True, warm=lambda: None)(iso.plain_add)
    with pytest.raises(ValueError, match="warm= would prepare this process, not the worker"):
        Toolbox([tool(warm=lambda: None)(iso.plain_add)], isolation="process")


def test_a_tool_call_parameter_is_refused_with_process_isolation() -> None:
    def lookup(q: str, call: ts.ToolCall) -> str:
        return q

    with pytest.raises(ValueError, match="drop the 'call' parameter"):
        tool(isolation="process")(lookup)


def test_a_function_a_worker_cannot_import_is_refused_when_it_joins_the_toolbox() -> None:
    def nested(a: int) -> int:
        """Defined inside a function."""
        return a

    made = tool(isolation="process")(nested)  # made: its module is not finished at decoration time
    with pytest.raises(ValueError, match="define it at module level"):
        Toolbox([made])
    with pytest.raises(ValueError, match="define it at module level"):
        Toolbox([nested], isolation="process")
    with pytest.raises(ValueError, match="define it at module level"):
        Toolbox([Tool.from_function(lambda a: a, name="anon")], isolation="process")
    with Toolbox([nested]) as b:  # in a thread, it is fine
        assert b.isolation_of(b.get("nested")) == "thread"  # type: ignore[arg-type]


def test_a_name_that_resolves_to_another_function_is_refused() -> None:
    def impostor(a: int, b: int) -> int:
        return a - b

    impostor.__module__, impostor.__qualname__ = iso.plain_add.__module__, iso.plain_add.__qualname__
    with pytest.raises(ValueError, match="names something else there"):
        Toolbox([impostor], isolation="process")
    with Toolbox([Tool.from_function(iso.add, name="add_again", isolation="process")]) as b:  # the same
        assert b.isolation_of(b.get("add_again")) == "process"  # type: ignore[arg-type]


@pytest.mark.skipif(
    "forkserver" not in multiprocessing.get_all_start_methods(), reason="no forkserver on this platform"
)
def test_pin_the_forkserver_preload_list() -> None:
    """docs/sdk-internals.md: the forkserver's preload list is read to add toolstitch's worker
    module to it (the public setter can only replace it)."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    assert server is not None
    preload = getattr(server, "_preload_modules", None)
    assert isinstance(preload, list) and all(isinstance(m, str) for m in preload)
