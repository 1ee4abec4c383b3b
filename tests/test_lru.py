"""The one bounded cache: least recently used entries go first, and threads may share it."""

from helpers import in_threads

from mcp_kb.lru import BoundedLRU


def test_the_least_recently_used_entry_is_forgotten_first() -> None:
    cache: BoundedLRU[str, int] = BoundedLRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3 and len(cache) == 2
    cache.put("a", 10)  # replacing counts as a use
    cache.put("d", 4)
    assert cache.get("c") is None and cache.get("a") == 10


def test_threads_looking_up_and_evicting_at_once_never_fail_and_stay_bounded() -> None:
    cache: BoundedLRU[int, int] = BoundedLRU(3)

    def work(seed: int) -> None:
        for n in range(20_000):
            key = (n * 7 + seed) % 5
            if cache.get(key) is None:
                cache.put(key, n)

    assert in_threads(work, 4, switch_interval=1e-6) == [] and len(cache) <= 3


def test_a_weighed_cache_keeps_what_fits_its_size_and_nothing_heavier() -> None:
    cache: BoundedLRU[str, str] = BoundedLRU(10, weigh=len)
    cache.put("a", "xxxx")
    cache.put("b", "yyyy")
    cache.put("c", "zzzz")  # 12 > 10: the least recently used goes
    assert cache.get("a") is None and cache.get("b") == "yyyy" and cache.get("c") == "zzzz"
    cache.put("b", "y")  # replaced: its new weight counts
    cache.put("d", "wwww")
    assert len(cache) == 3
    cache.put("e", "v" * 11)  # heavier than the whole cache: not kept, nothing else lost
    assert cache.get("e") is None and len(cache) == 3
