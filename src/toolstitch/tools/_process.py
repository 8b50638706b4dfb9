"""Worker processes for tools declared ``isolation="process"``: a timeout that bounds the run.

A sync tool runs in a thread, and a thread cannot be stopped: past its timeout the executor stops
waiting and abandons the thread (``_workers.py``), while the function runs on until it returns. A
tool declared ``isolation="process"`` runs in a worker process instead, and the executor kills that
process (SIGKILL) when nobody waits for the result any more (its timeout, the batch's, a cancelled
run, a discarded eager start): the run ends when the wait does.

How one call runs (:meth:`ProcessWorkers.run`, on a thread of the toolbox's pool, which waits for it):

* it takes an idle worker process, or starts one (at most ``max_workers`` exist; later calls wait
  for one to be free, in no promised order);
* it passes the call's start gate (``begin``: a call given up while it waited never starts), sends
  the function's reference (its module and qualified name: the worker imports the function, it is
  never pickled) and the arguments (pickled) over a pipe, and waits for the reply: the value, or the
  exception the function raised (a value or an exception that cannot cross becomes a
  ``RuntimeError`` that says so);
* the process stays for the next call. A process that was killed, or that died on its own (a
  segfault, ``os._exit``: the call's result is an error that says so, never a hang), is replaced by
  a new one when a call needs it.

Processes are started with the ``"forkserver"`` method where there is one (Linux), else
``"spawn"``; never ``"fork"`` (the parent has threads). Either way the worker imports the tool's
module itself, ``__main__`` included: a script is imported again under the name ``__mp_main__``, so
what it does outside its ``if __name__ == "__main__":`` block happens again in the worker.
Importing toolstitch takes about a second (openai, pydantic), so toolstitch asks the forkserver to
import it once (it adds this module to the forkserver's preload list, keeping what is there, when
the server is not running yet): a worker forked from it then starts in milliseconds. A process that
was killed is replaced at once by the thread that waited for it (nobody waits for that thread any
more), and :meth:`ProcessWorkers.spare` starts one in the background before the first call
(``Toolbox.warm_up``, which ``ts.run`` calls when it sends a request offering the tool).
:meth:`ProcessWorkers.close` (``Toolbox.close()``) kills every worker process, and so does the
interpreter's exit.

:class:`Reference` is how a tool's function is named for a worker: :func:`reference_of` records it
when the tool is made, :func:`importable_problem` checks that it resolves to that very function when
the tool joins a toolbox that runs it in a process.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib
import inspect
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import traceback
import weakref
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, Final, NamedTuple

from . import _workers  # noqa: F401 - imported first, so that its exit hook runs after ours (LIFO)

__all__ = [
    "ENDED",
    "ISOLATIONS",
    "NOT_BEGUN",
    "NoResult",
    "ProcessCall",
    "ProcessWorkers",
    "Reference",
    "importable_problem",
    "reference_of",
]

ISOLATIONS = ("thread", "process")
"""The values of ``isolation=`` (a tool's, a toolbox's)."""

START_METHOD = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
"""How worker processes are started (never ``"fork``: the parent has threads)."""

_PROTOCOL = pickle.HIGHEST_PROTOCOL
_REAP = 1.0  # seconds to wait for a killed process to be gone (it takes milliseconds)


class NoResult(Enum):
    """What :meth:`ProcessWorkers.run` returns, instead of the function's value, for a call whose
    function did not finish: :data:`NOT_BEGUN` or :data:`ENDED`. Only ever compared with ``is``, in
    the parent: neither crosses to a worker process."""

    NOT_BEGUN = "not_begun"
    ENDED = "ended"


NOT_BEGUN: Final = NoResult.NOT_BEGUN
"""What :meth:`ProcessWorkers.run` returns for a call whose function never began (given up first)."""


def _preload() -> None:
    """Have the forkserver (if it is not running yet) import this module, so toolstitch is imported
    once there rather than in every worker; the modules it was asked to preload stay. Only a matter
    of speed: whatever fails here changes nothing else."""
    if START_METHOD != "forkserver":
        return
    with contextlib.suppress(Exception):
        from multiprocessing import forkserver

        server = getattr(forkserver, "_forkserver", None)
        asked = getattr(server, "_preload_modules", None)  # private; its default is ["__main__"]
        modules = ["__main__"] if asked is None else list(asked)
        if __name__ not in modules:
            forkserver.set_forkserver_preload([*modules, __name__])


ENDED: Final = NoResult.ENDED
"""What :meth:`ProcessWorkers.run` returns when the call's process was killed because nobody waits
for its result any more (or the toolbox was closed): the function did not finish, it has no result.
(A value, not an exception: nobody would retrieve it.)"""


# ----------------------------------------------------------------------------- references


class Reference(NamedTuple):
    """How a worker process finds a tool's function: ``module`` and ``qualname`` (None when the
    function has none), and ``ident``, the ``id`` of the function itself (only compared, in this
    process, with what the name resolves to)."""

    module: str | None
    qualname: str | None
    ident: int


def reference_of(fn: Callable[..., Any]) -> Reference:
    """``fn``'s reference (see :class:`Reference`); nothing is imported or checked here."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    return Reference(
        module if isinstance(module, str) else None,
        qualname if isinstance(qualname, str) else None,
        id(fn),
    )


def _resolve(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def importable_problem(name: str, reference: Reference, tool: object) -> str | None:
    """Why a worker process could not import the function of tool ``tool`` (named ``name``, made
    from the function ``reference`` names), or None. The name must resolve, in a module a fresh
    process can import, to the function itself or to ``tool`` (or another tool made from it)."""
    fix = "define it at module level (not inside a function, not a lambda)"
    module, qualname = reference.module, reference.qualname
    if module is None or qualname is None:
        return (
            f"{name}: isolation='process' runs the tool's function in a worker process, which imports "
            f"it by its module and name, and this callable has none: make the tool from a function and {fix}"
        )
    where = f"{module}.{qualname}"
    if "<locals>" in qualname or "<lambda>" in qualname:
        return (
            f"{name}: isolation='process' runs the tool's function in a worker process, which imports "
            f"it by name, and {where} cannot be imported: {fix}"
        )
    if module == "__main__" and not getattr(sys.modules.get("__main__"), "__file__", None):
        return (
            f"{name}: isolation='process' runs the tool's function in a worker process, which imports "
            "its module, and this __main__ is no file (an interactive session, a notebook, python -c): "
            "define the tool in a module"
        )
    try:
        found = _resolve(module, qualname)
    except Exception as exc:
        return (
            f"{name}: isolation='process' runs the tool's function in a worker process, which imports "
            f"it by name, and {where} does not resolve ({type(exc).__name__}): {fix}, under its own name"
        )
    if found is tool or id(found) == reference.ident or getattr(found, "reference", None) == reference:
        return None
    return (
        f"{name}: isolation='process' runs the tool's function in a worker process, which imports it by "
        f"name, and {where} names something else there (a redefinition, a wrapper, a bound method): "
        f"{fix}, under its own name"
    )


# ----------------------------------------------------------------------------- the worker side


def _serve(conn: multiprocessing.connection.Connection) -> None:
    """A worker process: run calls until the parent closes the pipe (or kills the process)."""
    with contextlib.suppress(ValueError, OSError):  # Ctrl-C reaches the parent: it ends us
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            request = conn.recv_bytes()
        except (EOFError, OSError):
            return
        conn.send_bytes(_answer(request))


def _answer(request: bytes) -> bytes:
    """The reply to one request: ``(status, type name, pickled payload)``, pickled; the status is
    ``"ok"`` (the payload is the value) or ``"error"`` (the payload is the exception)."""
    try:
        module, qualname, kwargs = pickle.loads(request)
    except BaseException as exc:
        return _error(RuntimeError(f"the tool's arguments could not be read in its process: {_what(exc)}"))
    try:
        fn = _resolve(module, qualname)
    except BaseException as exc:
        return _error(
            RuntimeError(
                f"the tool's function {module}.{qualname} could not be imported in its process: {_what(exc)}"
            )
        )
    try:
        value = fn(**kwargs)
        if inspect.isawaitable(value):  # a sync def that returned a coroutine: run it here
            value = asyncio.run(_await(value))
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the worker goes on
        _note_traceback(exc)
        return _error(exc)
    try:
        payload = pickle.dumps(value, _PROTOCOL)
    except BaseException as exc:
        return _error(
            RuntimeError(
                f"the tool's result could not be sent back from its process: {type(value).__name__} "
                f"cannot be pickled ({_what(exc)})"
            )
        )
    return pickle.dumps(("ok", type(value).__name__, payload), _PROTOCOL)


async def _await(value: Any) -> Any:
    return await value


def _note_traceback(exc: BaseException) -> None:
    """Keep the worker's traceback with the exception (as a note: a traceback does not pickle), so
    that the parent's log shows where in the tool it was raised."""
    add_note = getattr(exc, "add_note", None)  # Python 3.11+
    if add_note is None:
        return
    with contextlib.suppress(Exception):
        text = "".join(traceback.format_exception(exc)).rstrip()
        add_note(f"in the tool's process (pid {os.getpid()}):\n{text}")


def _error(exc: BaseException) -> bytes:
    """An exception as a reply; one that cannot cross (it does not pickle, or does not unpickle: a
    custom ``__init__``) becomes a ``RuntimeError`` naming its type (a ``ToolError`` keeps its text,
    which is what the model reads)."""
    name = type(exc).__name__
    try:
        payload = pickle.dumps(exc, _PROTOCOL)
        pickle.loads(payload)
    except BaseException as why:
        from ..errors import ToolError

        stand_in: BaseException = (
            ToolError(str(exc))
            if isinstance(exc, ToolError)
            else RuntimeError(
                f"the tool raised {name}, which could not be sent back from its process ({_what(why)})"
            )
        )
        payload = pickle.dumps(stand_in, _PROTOCOL)
    return pickle.dumps(("error", name, payload), _PROTOCOL)


def _what(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# ----------------------------------------------------------------------------- the parent side


class _Worker:
    """One worker process and the parent's end of its pipe."""

    __slots__ = ("conn", "process")

    def __init__(self, process: Any, conn: multiprocessing.connection.Connection) -> None:
        self.process = process
        self.conn = conn

    def kill(self) -> None:
        with contextlib.suppress(Exception):  # gone already
            self.process.kill()

    def reap(self, timeout: float = _REAP) -> int | None:
        """Wait (at most ``timeout``) for the process to be gone and release it; its exit code (None:
        still there)."""
        code: int | None = None
        with contextlib.suppress(Exception):
            self.process.join(timeout)
            code = self.process.exitcode
        with contextlib.suppress(Exception):
            self.conn.close()
        if code is not None:
            with contextlib.suppress(Exception):
                self.process.close()
        return code


class ProcessCall:
    """One call's hold on a worker process (the executor keeps it on the call's job): :meth:`end`
    kills the process running the call, or keeps the call from ever starting one."""

    __slots__ = ("_ended", "_worker", "_workers")

    def __init__(self, workers: ProcessWorkers) -> None:
        self._workers = workers
        self._ended = False
        self._worker: _Worker | None = None

    def end(self) -> None:
        """Nobody waits for the call's result: kill its process (from any thread, any number of times)."""
        workers = self._workers
        with workers._lock:
            self._ended = True
            worker, self._worker = self._worker, None
            workers._free.notify_all()  # a call still waiting for a process stops waiting
        if worker is not None:
            worker.kill()


_LIVE: weakref.WeakSet[ProcessWorkers] = weakref.WeakSet()  # what the exit hook kills


class ProcessWorkers:
    """At most ``max_workers`` worker processes, kept for the next call while idle (see the module)."""

    def __init__(self, max_workers: int) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.max_workers = max_workers
        self._context: Any = multiprocessing.get_context(START_METHOD)  # its Process: typeshed has none
        self._lock = threading.Lock()
        self._free = threading.Condition(self._lock)  # calls wait here for a process
        self._idle: list[_Worker] = []
        self._live: set[_Worker] = set()  # every process not yet reaped, idle or busy
        self._starting = 0
        self._closed = False
        _preload()
        _LIVE.add(self)

    @property
    def pids(self) -> list[int]:
        """The process ids of the live worker processes (idle or running a call)."""
        with self._lock:
            return [w.process.pid for w in self._live if w.process.pid is not None]

    def call(self) -> ProcessCall:
        """A new call's handle (see :class:`ProcessCall`)."""
        return ProcessCall(self)

    def run(
        self, call: ProcessCall, fn: Callable[..., Any], kwargs: Mapping[str, Any], begin: Callable[[], bool]
    ) -> Any:
        """Run ``fn(**kwargs)`` in a worker process (see the module): its value, or the exception it
        raised, raised here. :data:`NOT_BEGUN` when the call was given up before its function began
        (``begin()`` said no, or ``call`` was ended while it waited); :data:`ENDED` when ``call`` was
        ended after (or the toolbox closed)."""
        reference = reference_of(fn)
        try:
            request = pickle.dumps((reference.module, reference.qualname, dict(kwargs)), _PROTOCOL)
        except Exception as exc:
            what = f"the tool's arguments could not be sent to its process: {_what(exc)}"
            raise RuntimeError(what) from None
        worker = self._take(call)
        if worker is None:
            return NOT_BEGUN
        if not begin():
            self._give_back(worker)
            return NOT_BEGUN
        with self._lock:
            if call._ended:
                ended = True
            else:
                ended, call._worker = False, worker
        if ended:  # ended between the gate and here: the function never reached the process
            self._give_back(worker)
            return ENDED
        try:
            worker.conn.send_bytes(request)
            reply = worker.conn.recv_bytes()
        except (EOFError, OSError):
            reply = None
        with self._lock:
            ended, call._worker = call._ended, None
            closed = self._closed
        if reply is None or ended:
            code = self._drop(worker)
            if ended:  # nobody waits for this thread: it starts the process the next call needs
                self.spare()
                return ENDED
            if closed:
                return ENDED
            raise RuntimeError(f"the tool's process ended unexpectedly ({_how_it_ended(code)})")
        self._give_back(worker)
        return _unpack(reply)

    def spare(self) -> None:
        """Start a worker process now (in this thread) unless one is idle or starting, or
        ``max_workers`` exist: the next call then need not wait for one."""
        with self._lock:
            if self._closed or self._idle or self._starting:
                return
            if len(self._live) >= self.max_workers:
                return
            self._starting += 1
        try:
            worker = self._launch()
        except Exception:  # the next call will try again, and say why
            return
        self._give_back(worker)

    def spare_soon(self) -> None:
        """:meth:`spare` on a daemon thread of its own, when it would start one (the caller does
        not wait for a process start)."""
        with self._lock:
            if self._closed or self._idle or self._starting or len(self._live) >= self.max_workers:
                return
        threading.Thread(target=self.spare, name="toolstitch-spare-process", daemon=True).start()

    def close(self) -> None:
        """Kill every worker process (idle, or running a call: that call returns :data:`ENDED`) and
        start no more. Idle ones are reaped here (a killed process is gone in milliseconds), busy
        ones by the thread that waits for them."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live.difference_update(idle)
            busy = list(self._live)
            self._free.notify_all()
        for worker in (*idle, *busy):
            worker.kill()
        for worker in idle:
            worker.reap()

    # -- internals ----------------------------------------------------------------------------

    def _take(self, call: ProcessCall) -> _Worker | None:
        """An idle process, else a new one when fewer than ``max_workers`` exist, else wait for one.
        None: ``call`` was ended while it waited."""
        dead: list[_Worker] = []
        try:
            with self._lock:
                while True:
                    if call._ended:
                        return None
                    if self._closed:
                        raise RuntimeError("the toolbox was closed: its tool processes are gone")
                    while self._idle:
                        worker = self._idle.pop()
                        if worker.process.is_alive():
                            return worker
                        self._live.discard(worker)  # killed or died while idle
                        dead.append(worker)
                    if len(self._live) + self._starting < self.max_workers:
                        self._starting += 1
                        break
                    self._free.wait()
        finally:
            for worker in dead:
                worker.reap(0)
        return self._launch()

    def _launch(self) -> _Worker:
        """Start the process whose place the caller reserved (``_starting``) and count it live. A
        start that fails frees the place; a process started after ``close`` is killed at once."""
        try:
            worker = self._start()
        except BaseException:
            with self._lock:
                self._starting -= 1
                self._free.notify()
            raise
        with self._lock:
            self._starting -= 1
            self._live.add(worker)
            closed = self._closed
        if closed:
            self._drop(worker)
            raise RuntimeError("the toolbox was closed: its tool processes are gone")
        return worker

    def _start(self) -> _Worker:
        parent, child = self._context.Pipe(duplex=True)
        process = self._context.Process(target=_serve, args=(child,), name="toolstitch-tool-process")
        try:
            process.start()
        except BaseException:
            parent.close()
            child.close()
            raise
        child.close()  # the worker holds its end; ours must go, so that its death reads as EOF
        return _Worker(process, parent)

    def _give_back(self, worker: _Worker) -> None:
        """The process finished a call (or never got one): idle again, for the next call."""
        with self._lock:
            if not self._closed:
                self._idle.append(worker)
                self._free.notify()
                return
        self._drop(worker)

    def _drop(self, worker: _Worker) -> int | None:
        """Kill and reap a process that is no longer of use; its exit code. Its place is free."""
        with self._lock:
            self._live.discard(worker)
        worker.kill()
        code = worker.reap()
        with self._lock:
            self._free.notify()
        return code


def _how_it_ended(code: int | None) -> str:
    if code is None:
        return "it did not exit"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _unpack(reply: bytes) -> Any:
    """A worker's reply: the value, or the exception raised (see :func:`_answer`)."""
    status, name, payload = pickle.loads(reply)
    try:
        obj = pickle.loads(payload)
    except Exception as exc:
        if status == "ok":
            raise RuntimeError(
                f"the tool's result ({name}) could not be read back from its process: {_what(exc)}"
            ) from None
        raise RuntimeError(f"the tool raised {name}, which could not be read back from its process") from None
    if status == "ok":
        return obj
    raise obj


@atexit.register
def _kill_at_exit() -> None:
    """Kill every worker process left, before the exit waits for the threads that wait for them."""
    for workers in list(_LIVE):
        workers.close()
