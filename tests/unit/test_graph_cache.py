"""The graphs of one function (cache.py): the least recently used one goes first at the
bound, hits are counted per bucket, and the entry used last is found again by its key's
identity without hashing the key (a signature memo hands back the very same key), never
after it was dropped, evicted, taken over or cleared."""
from __future__ import annotations

from types import SimpleNamespace

from tracegraph.cache import Compiled, GraphCache


class Key(tuple):
    """A signature key that counts how often it is hashed."""
    hashed = 0

    def __hash__(self) -> int:
        Key.hashed += 1
        return tuple.__hash__(self)


class Executable:
    backend, device = "cuda", 0

    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def entry(name: str, bucket: int = 0) -> Compiled:
    return Compiled(Key((name,)), None, SimpleNamespace(nodes=()),  # type: ignore[arg-type]
                    Executable(), bucket)


def test_the_last_entry_is_found_by_identity_and_counted():
    cache = GraphCache(None)
    a, b = entry("a", 1), entry("b", 2)
    cache.put(a, updated=False)
    cache.put(b, updated=False)
    assert cache.get(a.key) is a
    Key.hashed = 0
    for _ in range(5):
        assert cache.get(a.key) is a
    assert Key.hashed == 0
    assert cache.get(Key(("a",))) is a  # an equal key, not the same: looked up
    assert Key.hashed > 0
    assert cache.info().hits == {1: 7}
    assert cache.get(Key(("c",))) is None


def test_the_least_recently_used_goes_first_with_repeated_hits():
    cache = GraphCache(2)
    a, b, c = entry("a"), entry("b"), entry("c")
    cache.put(a, updated=False)
    cache.put(b, updated=False)
    for _ in range(3):
        cache.get(a.key)  # a is the most recent: b goes at the bound
    cache.put(c, updated=False)
    assert list(cache.entries) == [a.key, c.key]
    assert b.executable.closed and cache.info().evictions == 1


def test_a_dropped_evicted_taken_or_cleared_entry_is_not_found_again():
    cache = GraphCache(1)
    a = entry("a")
    cache.put(a, updated=False)
    assert cache.get(a.key) is a
    cache.drop(a.key)
    assert cache.get(a.key) is None

    cache.put(a, updated=False)
    assert cache.get(a.key) is a
    cache.put(entry("b"), updated=False)  # evicts a
    assert cache.get(a.key) is None

    b = next(iter(cache.entries.values()))
    assert cache.get(b.key) is b
    assert cache.take_over(b.topology) is b
    assert cache.get(b.key) is None

    cache.put(a, updated=False)
    assert cache.get(a.key) is a
    cache.clear()
    assert cache.get(a.key) is None
