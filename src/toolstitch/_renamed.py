"""A public name that was renamed still resolves for one release, with a warning: written once.

The package (``toolstitch``) and two layers (``toolstitch.client``, ``toolstitch.tools``) each keep
an old name alive the same way, as the module's ``__getattr__``, which Python asks only for a name
the module lacks. The old name gives the new name's object, and the ``DeprecationWarning`` points at
the line that used it (``stacklevel=2``) and names both, so the fix is in the message.

It lives at the top of the package and imports nothing of toolstitch, so every layer may use it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["renamed"]


def renamed(
    module: str,
    names: Mapping[str, str],
    namespace: Mapping[str, Any],
    otherwise: Callable[[str], Any] | None = None,
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that resolves each old name in ``names`` to ``namespace[new]``
    (read when asked, so ``globals()`` of a module still loading will do) with a warning; any other
    name goes to ``otherwise``, or is the usual ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        new = names.get(name)
        if new is not None:
            warnings.warn(
                f"{module}.{name} is now {module}.{new}; the old name goes away in the next release",
                DeprecationWarning,
                stacklevel=2,
            )
            return namespace[new]
        if otherwise is not None:
            return otherwise(name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
