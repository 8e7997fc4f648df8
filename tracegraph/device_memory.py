"""Running out of memory at build or replay: the backends raise MemoryExhausted where an
allocation fails (the bytes asked, what for, the device's free and total bytes where
known); a compiled function's call turns it into tg.OutOfMemoryError, which adds what
holds memory (the graphs each compiled function keeps and their bytes, its arena) and
the fix. A driver error CUDA_ERROR_OUT_OF_MEMORY elsewhere (instantiating a graph)
becomes the same error."""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import CudaError, OutOfMemoryError
from .location import user_location

_FUNCTIONS: weakref.WeakSet = weakref.WeakSet()  # every CompiledFunction: what holds memory


class MemoryExhausted(Exception):
    """An allocation a backend asked for failed. `place`: "device", "page-locked host" or
    "host" (the simulator's memory); `free`/`total`: that memory's, where known."""

    def __init__(self, nbytes: int, place: str = "device", free: int | None = None,
                 total: int | None = None, purpose: str = ""):
        self.nbytes, self.place, self.free, self.total = nbytes, place, free, total
        self.purpose = purpose
        super().__init__(f"{nbytes} bytes of {place} memory could not be allocated")


def host_memory(nbytes: int, fill: int, purpose: str) -> np.ndarray:
    """`nbytes` of host memory set to `fill` (the simulator's graph memory), or
    MemoryExhausted where there is none."""
    try:
        return np.full(nbytes, fill, np.uint8)
    except MemoryError:
        raise MemoryExhausted(nbytes, "host", purpose=purpose) from None


def asked_for(purpose: str) -> Any:
    """A context manager saying what an allocation inside it was for, should it fail."""
    return _Purpose(purpose)


class _Purpose:
    def __init__(self, purpose: str):
        self.purpose = purpose

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: Any, _: Any) -> None:
        if isinstance(exc, MemoryExhausted) and not exc.purpose:
            exc.purpose = self.purpose


def register(fn: Any) -> None:
    """A compiled function whose graphs count as holding memory in the message."""
    _FUNCTIONS.add(fn)


def said_out_of_memory(method: Callable) -> Callable:
    """A CompiledFunction method whose allocations failing is an OutOfMemoryError."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except MemoryExhausted as exc:
            raise out_of_memory(self, exc.nbytes, exc.place, exc.purpose, exc.free,
                                exc.total) from None
        except OutOfMemoryError:
            raise
        except CudaError as exc:
            if exc.error_name != "CUDA_ERROR_OUT_OF_MEMORY":
                raise
            raise out_of_memory(self, None, "device", exc.what, None, None) from exc
    return wrapper


def out_of_memory(fn: Any, nbytes: int | None, place: str, purpose: str,
                  free: int | None, total: int | None) -> OutOfMemoryError:
    name = fn.__qualname__
    asked = (f"{nbytes:,} bytes ({_size(nbytes)}) of {place} memory" if nbytes is not None
             else f"{place} memory")
    room = f"; the {place} memory has {_size(free)} free of {_size(total)}" \
        if free is not None and total is not None else ""
    return OutOfMemoryError(
        f"{name}: out of memory: tracegraph asked for {asked}"
        f"{f' for {purpose}' if purpose else ''}{room}. Held now: {holders(fn)}",
        nbytes=nbytes, where=user_location(3),
        fix=f"call {name}.clear() (or another compiled function's .clear()) to release the "
            "graphs no longer needed, bound how many a function keeps with "
            "tg.compile(max_graphs=N), or use smaller arrays")


def holders(fn: Any) -> str:
    """What compiled functions hold: graphs, their bytes, their arenas (`fn` first)."""
    said = []
    others = sorted((f for f in list(_FUNCTIONS) if f is not fn),
                    key=lambda f: -f.cache_info().device_bytes)
    for f in [fn, *others]:
        info = f.cache_info()
        if f is not fn and not info.graphs:
            continue
        arenas = sum(getattr(a, "nbytes", 0) for a in f._arenas.values() if a is not None)
        said.append(f"{f.__qualname__}: {info.graphs} graph(s), {_size(info.device_bytes)} "
                    f"of graph memory (its arena: {_size(arenas)})")
    return "; ".join(said[:6]) + ("; ..." if len(said) > 6 else "")


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20),
                        ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
