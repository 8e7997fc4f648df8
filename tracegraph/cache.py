"""The compiled graphs of one function: a least-recently-used cache with an optional bound,
counters per bucket, and the choice between instantiating a new executable and updating
one whose graph has the same topology (cudaGraphExecUpdate) when the bound is reached."""
from __future__ import annotations

import functools
import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from .ir import Program
from .plan import Plan

log = logging.getLogger("tracegraph.cache")


@dataclass(frozen=True)
class Compiled:
    """One signature's compiled graph. `bucket`: its dynamic length (0 if none);
    `dynamic_axes`: per result leaf, its axes (axis, a, b) of a * length + b elements."""
    key: tuple
    program: Program
    plan: Plan
    executable: Any
    bucket: int = 0
    dynamic_axes: tuple[tuple[tuple[int, int, int], ...], ...] = ()

    @functools.cached_property
    def captured(self) -> bool:
        """Does the graph use device arrays captured by address (whose overlap with the
        inputs is part of what was compiled)?"""
        return any(b.kind == "external" for b in self.program.buffers)

    @property
    def topology(self) -> tuple:
        """What cudaGraphExecUpdate needs to be equal: the device, node kinds and edges."""
        return (getattr(self.executable, "device", None),
                tuple((n.kind, n.deps) for n in self.plan.nodes))


@dataclass
class CacheInfo:
    """What `fn.cache_info()` reports."""
    graphs: int                    # executables held
    max_graphs: int | None
    hits: dict[int, int] = field(default_factory=dict)    # per bucket (0: not dynamic)
    misses: dict[int, int] = field(default_factory=dict)  # per bucket: compiles
    instantiations: int = 0
    updates: int = 0               # executables updated in place instead
    evictions: int = 0
    device_bytes: int = 0          # graph-owned device memory held (arena included)


class GraphCache:
    def __init__(self, max_graphs: int | None):
        if max_graphs is not None and max_graphs < 1:
            raise ValueError("max_graphs must be at least 1")
        self.entries: OrderedDict[tuple, Compiled] = OrderedDict()
        self.stats = CacheInfo(0, max_graphs)
        # the most recently used entry, found again by its key's identity: a signature
        # memo hands back the very same key, whose hash walks every argument's part
        self._recent: Compiled | None = None

    def get(self, key: tuple) -> Compiled | None:
        entry = self._recent
        if entry is None or entry.key is not key:
            entry = self.entries.get(key)
            if entry is None:
                return None
            self.entries.move_to_end(key)  # (the recent one is at the end already)
            self._recent = entry
        hits = self.stats.hits
        hits[entry.bucket] = hits.get(entry.bucket, 0) + 1
        return entry

    def __len__(self) -> int:
        return len(self.entries)

    def full(self) -> bool:
        bound = self.stats.max_graphs
        return bound is not None and len(self.entries) >= bound

    def take_over(self, topology: tuple) -> Compiled | None:
        """At the bound: the least recently used entry whose graph has this topology,
        removed from the cache, so its executable can be updated into the new signature."""
        if not self.full():
            return None
        for key, entry in self.entries.items():
            if getattr(entry.executable, "backend", "") == "cuda" and \
                    entry.topology == topology:
                del self.entries[key]
                self._recent = None
                return entry
        return None

    def drop(self, key: tuple) -> None:
        """Forget one entry (verify= found its graph stale) and release its executable."""
        entry = self.entries.pop(key, None)
        self._recent = None
        close = getattr(entry.executable, "close", None) if entry is not None else None
        if close is not None:
            close()

    def put(self, entry: Compiled, updated: bool) -> None:
        misses = self.stats.misses
        misses[entry.bucket] = misses.get(entry.bucket, 0) + 1
        if updated:
            self.stats.updates += 1
        else:
            self.stats.instantiations += 1
        self._recent = None
        while self.full():
            _, old = self.entries.popitem(last=False)
            self.stats.evictions += 1
            log.info("evicted the least recently used graph (bucket %d)", old.bucket)
            close = getattr(old.executable, "close", None)
            if close is not None:
                close()
        self.entries[entry.key] = entry

    def clear(self) -> None:
        self.entries.clear()
        self._recent = None

    def info(self) -> CacheInfo:
        s = self.stats
        held = sum(getattr(e.executable, "device_bytes", 0) for e in self.entries.values())
        return CacheInfo(len(self.entries), s.max_graphs, dict(s.hits), dict(s.misses),
                         s.instantiations, s.updates, s.evictions, held)
