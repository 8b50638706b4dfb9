"""The I/O twins over the core: the stitched streams and :func:`wrap`.

* :mod:`._stream`  ``StitchedStream`` / ``AsyncStitchedStream``: the SDK's chunks, unchanged, fed
  through one :class:`~toolstitch.Accumulator`.
* :mod:`._wrap`    ``wrap(client)``: a proxy of the SDK client whose streaming paths return them
  (:mod:`._proxy` the proxy, :mod:`._responses` the raw, streaming-response and helper objects).
* :mod:`._stitch`  ``stitch(chunks)``: the same stream over any (async) iterable of chunks.
* :mod:`._completion` ``calls_of(completion)``: the same calls for a completion that was not streamed.
* :mod:`._responses_stream` the Responses API: ``StitchedResponseStream`` /
  ``AsyncStitchedResponseStream`` for ``responses.create(stream=True)`` and its other paths.
* :mod:`._websocket` the Responses API's WebSocket mode: ``responses.connect()`` enters the SDK's
  connection with ``create(...)``, one response's ``StitchedResponseStream``.
* :mod:`._resume` a background Responses stream that resumes itself when its connection drops;
  :mod:`._retrieve` ``resume(client, response_id, tools=...)``: such a stream from its id.
* :mod:`._types`   for type checkers only: ``wrap(OpenAI())`` is a ``StitchedOpenAI``, an ``OpenAI``
  whose streamed ``create`` returns a ``StitchedStream`` (and the async and Azure twins).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._renamed import renamed
from ._completion import calls_of
from ._responses_stream import AsyncStitchedResponseStream, StitchedResponseStream
from ._resume import Resume, ResumePolicy
from ._retrieve import aresume, resume
from ._stitch import stitch
from ._stream import AsyncStitchedStream, StitchedStream
from ._websocket import (
    AsyncStitchedConnection,
    StitchedConnection,
    aopen_connection,
    is_not_found,
    open_connection,
    socket_stream,
    stitched_connection,
)
from ._wrap import WrappedClient, wrap

if TYPE_CHECKING:  # what a type checker sees wrap() return; nothing at run time (see ._types)
    from ._types import AsyncStitchedAzureOpenAI as AsyncStitchedAzureOpenAI
    from ._types import AsyncStitchedOpenAI as AsyncStitchedOpenAI
    from ._types import StitchedAzureOpenAI as StitchedAzureOpenAI
    from ._types import StitchedOpenAI as StitchedOpenAI

    tool_calls = calls_of  # the old name, with its type; at run time __getattr__ warns

__all__ = [  # the names users meet (toolstitch or a public module hands them out)
    "AsyncStitchedResponseStream",
    "AsyncStitchedStream",
    "StitchedResponseStream",
    "StitchedStream",
    "aresume",
    "calls_of",
    "resume",
    "stitch",
    "wrap",
]
__all__ += [  # for the layers above only
    "AsyncStitchedConnection",
    "Resume",
    "ResumePolicy",
    "StitchedConnection",
    "WrappedClient",
    "aopen_connection",
    "is_not_found",
    "open_connection",
    "socket_stream",
    "stitched_connection",
]


__getattr__ = renamed("toolstitch.client", {"tool_calls": "calls_of"}, globals())
"""``tool_calls`` (the first name of ``calls_of``) resolves for one release, with a warning."""
