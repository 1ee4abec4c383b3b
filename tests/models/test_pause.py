"""The pause after a failure (models/pause.py): one request meets the failure, the next ones hear of it at once."""

from mcp_kb.models.pause import PauseAfterFailure


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_failure_is_remembered_for_the_pause_then_tried_again() -> None:
    clock = _Clock()
    pause = PauseAfterFailure[str](30, clock=clock)
    assert pause.recent() is None
    pause.failed("service down")
    clock.now += 29.9
    assert pause.recent() == "service down"
    clock.now += 0.2
    assert pause.recent() is None


def test_a_success_forgets_the_failure_and_a_failure_recorded_elsewhere_counts_from_its_own_time() -> None:
    clock = _Clock()
    pause = PauseAfterFailure[str](30, clock=clock)
    pause.failed("down")
    pause.succeeded()
    assert pause.recent() is None
    pause.failed("could not write the copy", at=clock.now - 40)  # read from another process's record
    assert pause.recent() is None
    pause.failed("could not write the copy", at=clock.now - 10)
    assert pause.recent() == "could not write the copy"
