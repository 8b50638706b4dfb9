"""``python -m toolstitch`` and the ``toolstitch`` script (which calls :func:`main`)."""

from ._cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
