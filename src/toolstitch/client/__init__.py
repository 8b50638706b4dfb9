"""The I/O twins over the core: the stitched streams and :func:`wrap`.

* :mod:`._stream`  ``StitchedStream`` / ``AsyncStitchedStream``: the SDK's chunks, unchanged, fed
  through one :class:`~toolstitch.Accumulator`.
* :mod:`._wrap`    ``wrap(client)``: a proxy of the SDK client whose streaming ``create`` returns them.
"""

from __future__ import annotations

from ._stream import AsyncStitchedStream, StitchedStream
from ._wrap import WrappedClient, wrap

__all__ = ["AsyncStitchedStream", "StitchedStream", "WrappedClient", "wrap"]
