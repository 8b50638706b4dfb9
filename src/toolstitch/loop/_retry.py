"""Which failed requests the loop sends again, and how long it waits first (tenacity)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import openai
import tenacity

from ..errors import IncompleteStreamError

__all__ = ["Backoff", "RetryPolicy", "is_retryable"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How failed requests are retried (exponential backoff with jitter, via tenacity).

    ``attempts`` counts the first try (1 disables retrying). Waits grow from ``initial`` by
    ``multiplier`` up to ``maximum`` seconds, plus up to ``jitter`` seconds; a ``Retry-After`` header
    on a 429/503 is honoured up to ``maximum``.
    """

    attempts: int = 4
    initial: float = 0.5
    maximum: float = 8.0
    multiplier: float = 2.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("RetryPolicy.attempts must be at least 1")
        if min(self.initial, self.maximum, self.jitter) < 0 or self.multiplier < 1:
            raise ValueError("RetryPolicy waits must be >= 0 and multiplier >= 1")


def is_retryable(exc: BaseException) -> bool:
    """Connection errors, 408/409/429/5xx, in-band stream errors, streams that ended unfinished."""
    if isinstance(exc, IncompleteStreamError | openai.APIConnectionError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return isinstance(exc, openai.APIError)  # an error event inside the stream


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class Backoff(tenacity.wait.wait_base):
    """Exponential backoff with jitter, stretched to a server's Retry-After (up to ``maximum``).

    The formula is written out rather than taken from ``tenacity.wait_exponential_jitter``, whose
    parameters changed between tenacity releases.
    """

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        p = self.policy
        exponent = max(0, retry_state.attempt_number - 1)
        try:
            backoff = min(p.maximum, p.initial * p.multiplier**exponent)
        except OverflowError:
            backoff = p.maximum
        wait = backoff + random.uniform(0, p.jitter)
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None else None
        hinted = _retry_after(error) if error is not None else None
        if hinted is not None:
            wait = max(wait, min(hinted, p.maximum))
        return wait
