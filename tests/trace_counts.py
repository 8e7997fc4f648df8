"""What a compiled function's cache holds: how many calls traced, and the guards (the
Python-state checks) of its first graph."""
from __future__ import annotations

from typing import Any


def misses(f: Any) -> int:
    """The calls of `f` that traced (every signature's misses)."""
    return sum(f.cache_info().misses.values())


def guards_of(f: Any, kind: str | None = None) -> list[Any]:
    """The guards of `f`'s first graph, of one kind (a class name) or all."""
    gs = list(f.compiled[0].program.guards)
    return [g for g in gs if kind is None or type(g).__name__ == kind]
