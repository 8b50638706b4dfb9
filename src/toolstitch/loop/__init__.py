"""The agent loop: ``run``/``arun`` stream, seal, gate, execute, append and ask again."""

from __future__ import annotations

from . import _run
from ._run import *  # noqa: F403 - the public names of the loop, listed once in _run.__all__

__all__ = list(_run.__all__)
