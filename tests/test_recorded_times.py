"""Times one way (records.py): as records carry them (RFC 3339, UTC), by the hour, and as a person reads them."""

import pytest
from pathlib import Path
import time
from datetime import UTC, datetime, tzinfo

from mcp_kb import records
from mcp_kb.models import quantize


def test_the_hour_a_search_is_counted_in_is_a_recorded_time_to_the_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    class Clock(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> "Clock":
            return cls(2026, 12, 1, 19, 14, 2, 5, tzinfo=UTC)

    monkeypatch.setattr(records, "datetime", Clock)
    assert records.recorded_hour() == "2026-12-01T19:00Z"  # metrics.py wrote it with its own strftime


def test_a_recorded_time_reads_to_the_minute_in_utc() -> None:
    assert records.readable_time("2026-12-01T19:14:02Z") == "2026-12-01 19:14 UTC"
    assert records.readable_time("2026-12-01T19:00Z", short=True) == "12-01 19:00"
    assert records.readable_time("") == ""


def test_a_failed_int8_copy_says_when_as_it_did_with_its_own_strftime(tmp_path: Path) -> None:
    unkept = tmp_path / "unkept.json"
    at = time.time()
    unkept.write_text(f'{{"why": "no space", "at": {at}}}')
    said = quantize._failed_recently(unkept)
    assert said is not None and f"no space, at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(at))};" in said
