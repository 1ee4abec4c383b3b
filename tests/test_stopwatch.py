"""Elapsed time measured one way (stopwatch.py): seconds for a sync's stages, milliseconds for a call's."""

import time

import pytest

from mcp_kb import stopwatch


def test_a_stopwatch_says_how_long_since_it_started_in_seconds_and_milliseconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = iter([10.0, 12.5, 13.0])
    monkeypatch.setattr(time, "perf_counter", lambda: next(now))
    watch = stopwatch.Stopwatch()
    assert watch.seconds == 2.5
    assert watch.milliseconds == 3000.0


def test_a_timed_block_is_heard_also_when_it_raises() -> None:
    took: list[float] = []
    with pytest.raises(ValueError), stopwatch.stopwatch(took.append):
        raise ValueError
    assert len(took) == 1 and took[0] >= 0
