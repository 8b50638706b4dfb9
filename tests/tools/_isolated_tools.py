"""Module-level tools for tests/tools/test_isolation.py: a worker process imports them by name."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from pydantic import BaseModel

import toolstitch as ts
from toolstitch.tools import tool


class Order(BaseModel):
    """An order to price."""

    item: str
    quantity: int


def _mark(pid_file: str) -> None:
    # Written aside, then renamed: whoever sees the file sees the whole pid (never an empty file).
    aside = Path(f"{pid_file}.{os.getpid()}.tmp")
    aside.write_text(str(os.getpid()), encoding="utf-8")
    aside.replace(pid_file)


@tool(isolation="process")
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool(isolation="process")
def whoami(pid_file: str) -> int:
    """This process's id (also written to pid_file)."""
    _mark(pid_file)
    return os.getpid()


@tool(isolation="process")
def price(order: Order) -> str:
    """Price an order (a pydantic-model argument)."""
    return f"{order.quantity} x {order.item} = {order.quantity * 3}"


@tool(isolation="process", timeout=1)
def sleepy(pid_file: str) -> str:
    """Sleep far past its timeout."""
    _mark(pid_file)
    time.sleep(60)
    return "woke up"


@tool(isolation="process")
def forever(pid_file: str) -> str:
    """Sleep a minute, with no timeout."""
    _mark(pid_file)
    time.sleep(60)
    return "woke up"


@tool(isolation="process", timeout=0.5)
def late_writer(path: str) -> str:
    """Sleep 3 s, then write a file (it must never get there)."""
    time.sleep(3)
    Path(path).write_text("written", encoding="utf-8")
    return "written"


@tool(isolation="process")
def refuses(reason: str) -> str:
    """Raise a ToolError."""
    raise ts.ToolError(reason)


@tool(isolation="process")
def breaks(secret: str) -> str:
    """Raise a plain exception whose text must not reach the model."""
    raise KeyError(f"connection string {secret}")


@tool(isolation="process")
def unpicklable() -> object:
    """Return what cannot cross a process boundary."""
    return threading.Lock()


@tool(isolation="process")
def exits(code: int) -> str:
    """End its process at once."""
    os._exit(code)


@tool(isolation="process", read_only=True)
def lookup(q: str, pid_dir: str) -> str:
    """Look something up; "slow" takes a minute (eager starts begin it before the stream ends)."""
    Path(pid_dir, f"{q}.pid").write_text(str(os.getpid()), encoding="utf-8")
    if q == "slow":
        time.sleep(60)
    return f"found {q}"


def plain_add(a: int, b: int) -> int:
    """Add two numbers (a plain function: the toolbox decides its isolation)."""
    return a + b


def plain_whoami(pid_file: str) -> int:
    """This process's id (also written to pid_file)."""
    _mark(pid_file)
    return os.getpid()


@tool(isolation="thread")
def thread_whoami(pid_file: str) -> int:
    """This process's id: a tool that asks for a thread."""
    _mark(pid_file)
    return os.getpid()
