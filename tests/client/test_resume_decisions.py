"""The decisions of a resume, sans I/O: ``_resume._ResumingBase``, which both twins share.

``test_resume.py`` proves them over real HTTP, sync and async; here they are read without a
connection: whether a broken stream is resumed, when a cut is given up, what each retrieve
request is sent with, and what a resume ends in. The twins only read, wait, retrieve and close.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from toolstitch._sdk import stand_in_request
from toolstitch.client import ResumePolicy
from toolstitch.client._resume import AsyncResumingSource, ResumingSource, Resumption
from toolstitch.core import ResponseAccumulator

POLICY = ResumePolicy(attempts=2, initial=0.0, timeout=None, deadline=60.0)
CUT = openai.APIConnectionError(request=stand_in_request())  # a dropped connection, as the SDK says it


def source(policy: ResumePolicy | None = POLICY, twin: type = ResumingSource, **state: Any) -> Any:
    numbers = {"response_id": "resp_1", "last": 4, **state}
    return twin(iter(()), lambda *a, **k: None, Resumption(ResponseAccumulator(), **numbers), policy)


@pytest.mark.parametrize("twin", [ResumingSource, AsyncResumingSource])
def test_the_twins_share_one_decision(twin: type) -> None:
    assert source(twin=twin)._policy_after(CUT) is POLICY
    assert source(None, twin)._policy_after(CUT) is None  # wrap(resume=False): never resumed


def test_a_cut_is_resumed_and_an_error_that_is_not_a_cut_is_not() -> None:
    assert source()._policy_after(CUT) is POLICY
    assert source()._policy_after(ValueError("not a cut")) is None
    assert source(response_id=None)._policy_after(CUT) is None  # no id: nothing to retrieve
    assert source(stopped=True)._policy_after(CUT) is None


def test_a_stream_that_ended_early_is_resumed_unless_it_finished() -> None:
    assert source()._policy_after(None) is POLICY
    assert source(final_seen=True)._policy_after(None) is None
    assert source(finished=True)._policy_after(None) is None


def test_a_cut_without_progress_is_given_up() -> None:
    resuming = source()
    record = resuming._cut(CUT, POLICY, quiet=False)
    assert record is not None and record.after == 4 and resuming.resumes == [record]
    assert resuming.state.deadline_at is not None  # the clock starts at the first cut
    resuming.state.idle = POLICY.attempts  # every attempt spent, no new event since
    assert resuming._cut(CUT, POLICY, quiet=True) is None
    with pytest.raises(openai.APIConnectionError) as raised:
        resuming._cut(CUT, POLICY, quiet=False)
    assert raised.value is CUT  # the error that cut the stream, as without resume


def test_each_attempt_is_counted_and_sent_from_the_last_event() -> None:
    resuming = source()
    record = resuming._cut(CUT, POLICY, quiet=False)
    assert record is not None
    assert resuming._attempt(record, POLICY) == {"stream": True, "starting_after": 4}
    assert (record.requests, resuming.state.idle) == (1, 1)
    timed = ResumePolicy(timeout=3.0)
    assert resuming._attempt(record, timed)["timeout"] == 3.0


def test_what_a_resume_ends_in() -> None:
    resuming = source()
    record = resuming._cut(CUT, POLICY, quiet=False)
    assert record is not None
    assert resuming._outcome(record, CUT, False, ("stream", "first")) == ("stream", "first")
    assert record.resumed
    record.failure = TimeoutError()
    assert resuming._outcome(record, CUT, True, None) is None
    with pytest.raises(openai.APIConnectionError):
        resuming._outcome(record, CUT, False, None)
