"""A case's handlers in turn on one worker (streams/turns.py, used by the letters and appeal stages)."""

from __future__ import annotations

import asyncio

from cyberjurors.streams.turns import CaseTurns


async def test_one_case_waits_its_turn_another_does_not_and_the_lock_is_dropped_after():
    turns, order = CaseTurns(), []
    release = asyncio.Event()

    async def work(case_id: str, name: str, wait: bool = False) -> None:
        async with turns.one_at_a_time(case_id):
            order.append(f"{name} in")
            if wait:
                await release.wait()
            order.append(f"{name} out")

    first = asyncio.create_task(work("c-1", "a", wait=True))
    await asyncio.sleep(0)
    second = asyncio.create_task(work("c-1", "b"))
    other = asyncio.create_task(work("c-2", "x"))
    await asyncio.sleep(0)
    await other  # another case passes while c-1 is held
    assert order == ["a in", "x in", "x out"] and turns.locks["c-1"][1] == [2]
    release.set()
    await asyncio.gather(first, second)
    assert order[3:] == ["a out", "b in", "b out"]
    assert turns.locks == {}  # no one holds or waits: nothing kept


async def test_a_failing_holder_still_hands_on_the_turn_and_drops_the_lock():
    turns = CaseTurns()
    try:
        async with turns.one_at_a_time("c-1"):
            raise RuntimeError("a bug")
    except RuntimeError:
        pass
    assert turns.locks == {}
    async with turns.one_at_a_time("c-1"):
        assert turns.locks["c-1"][1] == [1]
