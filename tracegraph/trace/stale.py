"""What a call says when a guard no longer holds (trace/checks.py): the error of a
replay that cannot take a graph, the warning of a function traced again and again, and
how a device argument's overlap with a captured array changed."""
from __future__ import annotations

from typing import Any

from ..errors import SignatureError
from ..location import warn
from .checks import (
    VARIANTS,
    AbsentGuard,
    ContentsGuard,
    KernelGuard,
    LayoutGuard,
    ShapeGuard,
    TypeGuard,
    ValueGuard,
    guarded_now,
    stale_guard,
)

__all__ = ["VARIANTS", "closest_stale", "guarded_now", "overlap_said", "retraced",
           "stale_error", "stale_guard"]

_RETRACES = 8     # traces for moved captured arrays before a warning says what to do


def stale_error(stale: Any, qualname: str) -> SignatureError:
    what = ("another value than when {q} was traced, which the graph holds (passed to a "
            "kernel, or picking what it launches)" if isinstance(stale, ValueGuard) else
            "another kernel, function or host array than when {q} was traced, and the graph "
            "holds what the old one gave"
            if isinstance(stale, KernelGuard) else
            "another length or other keys than when {q} was traced, and the graph keeps the "
            "launches its trace made" if isinstance(stale, ShapeGuard) else
            "other contents than when {q} was traced, and the graph holds what the trace "
            "read of them" if isinstance(stale, ContentsGuard) else
            "another array or layout than when {q} was traced, and the graph keeps what the "
            "trace made of it" if isinstance(stale, LayoutGuard) else
            "an object of another type (or None) than when {q} was traced, and the graph "
            "keeps what the trace did with the old one" if isinstance(stale, TypeGuard) else
            "an attribute that was absent when {q} was traced, and the graph keeps what "
            "the trace did without it" if isinstance(stale, AbsentGuard) else
            "another device array than when {q} was traced, and the graph holds the old "
            "one by address").format(q=qualname)
    return SignatureError(f"{stale.ref.describe()} holds {what}",
                          fix="call the function (not .replay) to trace it again")


def retraced(qualname: str, stale: Any, count: int) -> int:
    """Say once, at _RETRACES, that moved captured arrays keep tracing the function;
    returns the count. `stale`: the guard that no longer holds, or what finds the one to
    name (closest_stale, against the graph that differs least)."""
    if count == _RETRACES:
        stale = stale() if callable(stale) else stale
        warn(f"tracegraph: {qualname} was traced again {count} times because "
             f"{stale.ref.describe()} (and the like) found another array, value, "
             "kernel, length or set of keys than its graphs were traced with: each "
             "trace builds a graph. Pass "
             "arrays that change between calls as arguments (a moved argument "
             "costs a re-point, not a trace), and values as arguments or "
             "dynamic={...: 'value'}")
    return count


def overlap_said(program: Any, call: Any) -> str:
    """How the call's device inputs overlap the captured arrays unlike the compiled call's."""
    from .bind import aliased_inputs  # bind imports this module
    pairs = aliased_inputs(program.buffers, list(program.inputs), call.infos)
    changed = sorted(pairs ^ program.aliased_inputs)
    said = []
    for device_input, captured in changed:
        arg = next((i.path for i in program.inputs if i.kind == "array"
                    and i.buffer == device_input), "?")
        now = (device_input, captured) in pairs
        said.append(f"argument {arg} {'overlaps' if now else 'no longer overlaps'} the "
                    f"device array {program.buffers[captured].name} that a kernel captures "
                    "(a global or closure variable), unlike in the compiled call")
    return "; ".join(said) or "a device argument overlaps a captured array differently"


def closest_stale(cache: Any, entry: Any, fn: Any, leaves: list) -> Any:
    """The first guard that no longer holds of the graph kept for this signature (the
    first one or a variant) that has the fewest such: what a replay's error names."""
    kept = [entry] + [cache.entries[k] for k in cache.variants.get(entry.key, ())
                      if k in cache.entries]
    best = min(kept, key=lambda c: sum(not g.holds(fn, leaves) for g in c.program.guards))
    return stale_guard(best.program, fn, leaves)
