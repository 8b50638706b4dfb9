"""The ``toolstitch`` command: ``demo``, ``replay`` and ``check``. Every argparse line lives here."""

from __future__ import annotations

from ._main import main

__all__ = ["main"]
