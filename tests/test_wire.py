"""Reading what services on the network answer: JSON within a depth bound, bodies within a size bound
and one deadline for the whole answer."""

import json
import time

import pytest

from mcp_kb.wire import MAX_DEPTH, parse_json, read_within


def test_json_nested_past_the_bound_is_refused_by_name_and_brackets_in_strings_do_not_count() -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    with pytest.raises(ValueError, match=f"svc sent JSON nested deeper than {MAX_DEPTH} levels"):
        parse_json(deep, "svc")
    text = {"a": "[[[[" * 1000 + '\\"{{', "b": [[[1]]]}
    assert parse_json(json.dumps(text).encode(), "svc") == text
    nested = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json(nested.encode(), "svc") is not None


@pytest.mark.parametrize(
    "body, message",
    [(b"\xff\xfe{", "not UTF-8"), (b"{'a': 1}", "not JSON"), (b"1" * 5000, "not JSON"), (b"", "not JSON")],
)
def test_what_is_not_json_is_a_value_error_naming_the_source(body: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=f"svc sent an answer that is {message}"):
        parse_json(body, "svc")


def test_a_body_is_cut_past_its_size_or_its_deadline() -> None:
    with pytest.raises(ValueError, match="more than 10 bytes"):
        read_within(iter([b"12345", b"678901"]), 10, float("inf"), "svc")
    clock_passed = time.monotonic() - 1
    pieces = iter([b"a"] * 1000)
    with pytest.raises(TimeoutError, match="svc did not finish its answer in time"):
        read_within(pieces, 10_000, clock_passed, "svc")
    assert len(list(pieces)) == 999  # it stopped at the first piece past the deadline
    assert read_within(iter([b"ab", b"c"]), 3, float("inf"), "svc") == b"abc"
