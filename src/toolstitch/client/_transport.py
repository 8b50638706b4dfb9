"""A connection that fails mid-stream surfaces as the SDK's own ``openai.APIConnectionError``.

Why: from openai 3.14.0 on, the SDK catches transport errors raised while a stream's body is read and
re-raises them as ``openai.APITimeoutError`` / ``openai.APIConnectionError`` (the transport error as
``__cause__``). Older releases let the transport's exception through unchanged: ``httpx``'s
``RemoteProtocolError`` (openai 1.x and 2.x) or ``httpx2``'s (openai 3.0-3.13). Code that catches
the documented SDK errors, ``ts.run``'s retry policy and the recordings would then behave differently
per release. The wrapped streams pass every error through :func:`as_sdk_error`, which does what the
newer SDK does, and nothing else: errors that are not transport errors (the SDK's own, the caller's,
``GeneratorExit``) come back unchanged, as the same object.

Only transport modules that are already imported are consulted: an exception cannot come from a
module nobody loaded, and importing one here (``httpx`` beside ``httpx2``) would cost start-up time.
"""

from __future__ import annotations

import sys
from typing import Any

import openai

__all__ = ["as_sdk_error"]

# The transport libraries the supported openai releases stream over (1.x/2.x: httpx; 3.x: httpx2).
_TRANSPORTS = ("httpx", "httpx2")


def _loaded_errors(name: str) -> tuple[type[BaseException], ...]:
    """``name`` (an exception class name) from every transport module already imported."""
    found: list[type[BaseException]] = []
    for module_name in _TRANSPORTS:
        error = getattr(sys.modules.get(module_name), name, None)
        if isinstance(error, type) and issubclass(error, BaseException):
            found.append(error)
    return tuple(found)


def _request_of(error: BaseException, sdk_stream: Any) -> Any:
    """The HTTP request the failed stream answers (the SDK's error types require one), or None."""
    request = getattr(getattr(sdk_stream, "response", None), "request", None)
    if request is not None:
        return request
    try:  # httpx's RequestError.request raises RuntimeError when the request was never attached
        return getattr(error, "request", None)
    except RuntimeError:
        return None


def as_sdk_error(error: BaseException, sdk_stream: Any = None) -> BaseException:
    """The error the caller should see for ``error``, raised while ``sdk_stream`` was read.

    A transport timeout becomes ``openai.APITimeoutError``, any other transport request error
    ``openai.APIConnectionError``, each with ``error`` as ``__cause__``; everything else (including
    the SDK's own errors, already translated by openai >= 3.14) is returned unchanged. When no request
    can be found to attach, the error is returned unchanged too: an SDK error without its request
    would break code that reads ``error.request``.
    """
    if isinstance(error, openai.APIError) or not isinstance(error, Exception):
        return error
    timeouts, requests = _loaded_errors("TimeoutException"), _loaded_errors("RequestError")
    if not isinstance(error, timeouts + requests):
        return error
    request = _request_of(error, sdk_stream)
    if request is None:
        return error
    translated: openai.APIConnectionError
    if isinstance(error, timeouts):
        translated = openai.APITimeoutError(request=request)
    else:
        translated = openai.APIConnectionError(request=request)
    translated.__cause__ = error
    return translated
