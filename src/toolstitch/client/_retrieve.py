"""``ts.resume`` / ``ts.aresume``: a background response's stream, stitched from its id.

``responses.retrieve(id, stream=True)`` streams a background response again (from the start, or
from the event after ``starting_after``); what it streams can be checked only against the request
that created the response (rule 10). That request is known when this process's wrapped client
created the response, or when the caller gives its contract (``tools=``, ``tool_choice=``,
``parallel_tool_calls=``); otherwise there is nothing to hold the calls to and :func:`resume`
refuses to guess. The stream is a ``StitchedResponseStream`` that resumes itself again if its own
connection drops (``_resume``).

Streaming from a given ``starting_after``: the calls whose item opened at or before that number
are not whole here (their first events were read elsewhere): their deltas reach no call, and such a
call is read from the final response alone (``item_not_streamed``), held to the same checks, as a
call a server never streamed; from the start (``starting_after=None``) every call is read whole.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import openai

from ..core import now
from ..errors import ResumeUnavailableError
from ..recording import given_responses_contract
from ._responses_stream import AsyncStitchedResponseStream, StitchedResponseStream, stitched_responses
from ._resume import can_resume
from ._wrap import WrappedClient, wrap

__all__ = ["aresume", "resume"]

_PATH = "ts.resume(client, response_id)"


def _prepared(
    client: Any,
    response_id: str,
    tools: Iterable[Any] | None,
    tool_choice: Any,
    parallel_tool_calls: Any,
    starting_after: int | None,
    is_async: bool,
) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
    """The SDK's ``responses.retrieve`` call to make (what both twins share, the checks included),
    and what stitches the stream it returns: under the request's contract (given, or the request
    this client sent), resuming itself through the same ``retrieve``."""
    if type(response_id) is not str or not response_id:
        raise TypeError("response_id must be a non-empty str")
    if starting_after is not None and (type(starting_after) is not int or starting_after < 0):
        raise TypeError("starting_after must be a sequence number (an int >= 0) or None")
    wrapped = client if isinstance(client, WrappedClient) else wrap(client)
    opts = wrapped._opts
    if opts.is_async != is_async:
        raise TypeError("ts.resume takes an OpenAI client; ts.aresume an AsyncOpenAI one")
    sdk = getattr(wrapped.unwrapped, "responses", None)  # the 1.55.3 floor has no Responses API
    if sdk is None or not can_resume(sdk.retrieve):
        raise ResumeUnavailableError(
            f"openai {openai.__version__}'s responses.retrieve cannot stream from a sequence number "
            "(openai 1.84 and newer can)"
        )
    contract = None
    if tools is not None or tool_choice is not None or parallel_tool_calls is not None:
        request: Mapping[str, Any] = {
            "tools": tools,
            "tool_choice": tool_choice,
            "parallel_tool_calls": parallel_tool_calls,
            "background": True,
        }
        contract = given_responses_contract(tools, tool_choice, parallel_tool_calls)
    else:
        known = opts.requests.get(response_id)
        if known is None:
            raise TypeError(
                f"the request of {response_id!r} is not known here (this client did not create it): "
                "pass its contract, tools=... (tools=[] if it offered none)"
            )
        request = known
    kwargs: dict[str, Any] = {"stream": True}
    if starting_after is not None:
        kwargs["starting_after"] = starting_after
    retrieve = sdk.retrieve
    started = now()

    def stitched(sdk_stream: Any) -> Any:
        return stitched_responses(
            opts,
            sdk_stream,
            request,
            started,
            _PATH,
            retrieve,
            contract=contract,
            response_id=response_id,
            after=starting_after,
        )

    return functools.partial(retrieve, response_id, **kwargs), stitched


def resume(
    client: Any,
    response_id: str,
    *,
    tools: Iterable[Any] | None = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool | None = None,
    starting_after: int | None = None,
) -> StitchedResponseStream:
    """Stream the background response ``response_id`` again, stitched: from the start, or from
    the event after ``starting_after``, under the contract of its request (the one this wrapped
    client sent, or ``tools=`` / ``tool_choice=`` / ``parallel_tool_calls=`` as given). The stream
    resumes itself if its connection drops. Raises ``TypeError`` when the contract is unknown and
    :class:`~toolstitch.errors.ResumeUnavailableError` on an ``openai`` release whose
    ``responses.retrieve`` cannot stream."""
    retrieve, stitched = _prepared(
        client, response_id, tools, tool_choice, parallel_tool_calls, starting_after, False
    )
    stream: StitchedResponseStream = stitched(retrieve())
    return stream


async def aresume(
    client: Any,
    response_id: str,
    *,
    tools: Iterable[Any] | None = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool | None = None,
    starting_after: int | None = None,
) -> AsyncStitchedResponseStream:
    """The async twin of :func:`resume` (an ``AsyncOpenAI`` client): ``await ts.aresume(...)``."""
    retrieve, stitched = _prepared(
        client, response_id, tools, tool_choice, parallel_tool_calls, starting_after, True
    )
    stream: AsyncStitchedResponseStream = stitched(await retrieve())
    return stream
