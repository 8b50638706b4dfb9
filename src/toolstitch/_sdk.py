"""The ``openai`` SDK's moving parts that more than one layer needs, reached in one place.

The SDK changes every week, and some of what toolstitch needs from it is not its documented API
(docs/sdk-internals.md lists every such name, with the test that pins each; a test fails when the
code uses one the list lacks). The two helpers here are used below ``client`` (by ``errors``) as
well as in it, so they live at the package's root rather than in one layer.
"""

from __future__ import annotations

from typing import Any

import openai
from openai import _base_client

__all__ = ["http_module", "init_api_error", "stand_in_request"]


def http_module() -> Any:
    """The HTTP library this ``openai`` release is built on: ``httpx``, or ``httpx2`` from 3.x on.

    Its ``Request`` and ``Response`` are the types the SDK's streams and errors hold; a release
    built on another library would not run the SDK's own streams over ours either."""
    return getattr(_base_client, "httpx2", None) or getattr(_base_client, "httpx")  # noqa: B009


def stand_in_request(path: str = "") -> Any:
    """A request of the SDK's HTTP library that was never sent (to ``toolstitch.invalid``, a name
    that cannot resolve): what the SDK's constructors read where no request exists, such as the
    response of a body that came from no client, or an error built without one."""
    return http_module().Request("POST", "http://toolstitch.invalid/" + path)


def init_api_error(error: openai.APIError, message: str, request: Any, *, body: object) -> None:
    """Run ``openai.APIError.__init__`` on ``error`` (a toolstitch error that is also the SDK's).

    With an HTTP request, the SDK's own constructor handles it, so ``error.request`` is what the
    SDK would give for its own error there: openai 3.60 and newer keep a copy without the secret
    headers (``Authorization``, ``api-key``), older releases the request itself.

    Without one (``ts.stitch`` over chunks, a Responses stream with no HTTP response behind it),
    the SDK's constructor still runs (it sets ``code``, ``type`` and whatever a later release adds
    from ``body``), on a stand-in request of the SDK's own HTTP library, because releases from 3.60
    on read ``request.headers`` there; ``error.request`` is then None, as it always was for such a
    stream: no request was sent.
    """
    if request is not None:
        openai.APIError.__init__(error, message, request, body=body)
        return
    openai.APIError.__init__(error, message, stand_in_request(), body=body)
    error.request = None  # type: ignore[assignment]  # the SDK types it as always present
