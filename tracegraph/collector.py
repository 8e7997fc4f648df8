"""The cyclic garbage collector, paused while a graph compiles."""
from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_paused = [0, False]  # compiles running with the collector paused; was it enabled before
_paused_lock = threading.Lock()


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """The cyclic garbage collector waits while a graph compiles: a trace makes thousands of
    small objects and nothing of it is garbage yet, so collections there only cost (a third
    of a 1,000-launch compile's time, measured on W5). It runs again after, as before."""
    with _paused_lock:
        if _paused[0] == 0:
            _paused[1] = gc.isenabled()
            gc.disable()
        _paused[0] += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused[0] -= 1
            if _paused[0] == 0 and _paused[1]:
                gc.enable()
