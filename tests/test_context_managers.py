"""``_context_managers``: ``with`` and ``async with`` written once. Entering gives the object;
leaving closes (or stops) it exactly once, however the block ended, and the error goes on."""

from __future__ import annotations

import asyncio

import pytest

from toolstitch._context_managers import ClosedOnAsyncExit, ClosedOnExit, StoppedOnExit


class Closing(ClosedOnExit):
    __slots__ = ("closed",)

    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class AsyncClosing(ClosedOnAsyncExit):
    __slots__ = ("closed",)

    def __init__(self) -> None:
        self.closed = 0

    async def close(self) -> None:
        await asyncio.sleep(0)  # awaited, not merely called
        self.closed += 1


class Serving(StoppedOnExit):
    __slots__ = ("log",)

    def __init__(self) -> None:
        self.log: list[str] = []

    def start(self) -> None:
        self.log.append("start")

    def stop(self) -> None:
        self.log.append("stop")


def test_with_gives_the_object_and_closes_it_once() -> None:
    closing = Closing()
    with closing as entered:
        assert entered is closing and closing.closed == 0
    assert closing.closed == 1
    with pytest.raises(KeyError), Closing() as raised:
        raise KeyError("the block's own error")
    assert raised.closed == 1


def test_async_with_awaits_close_once() -> None:
    async def main() -> AsyncClosing:
        closing = AsyncClosing()
        async with closing as entered:
            assert entered is closing and closing.closed == 0
        assert closing.closed == 1
        with pytest.raises(KeyError):
            async with closing:
                raise KeyError("the block's own error")
        return closing

    assert asyncio.run(main()).closed == 2


def test_stopped_on_exit_starts_then_stops() -> None:
    serving = Serving()
    with pytest.raises(ValueError), serving as entered:
        assert entered is serving and serving.log == ["start"]
        raise ValueError
    assert serving.log == ["start", "stop"]


@pytest.mark.parametrize("mixin", [ClosedOnExit, ClosedOnAsyncExit, StoppedOnExit])
def test_a_mixin_adds_no_state(mixin: type) -> None:
    # A proxy with __slots__ (client/_responses.py's helper streams) must stay without a __dict__.
    slotted = type("Slotted", (mixin,), {"__slots__": ("x",)})
    assert not hasattr(slotted(), "__dict__")
