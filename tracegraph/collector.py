"""The cyclic garbage collector's automatic collections, paused while a graph compiles."""
from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

# compiles running with collections paused, and the thresholds to put back after them
_paused: list = [0, None]
_paused_lock = threading.Lock()


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """No automatic collection while a graph compiles: a trace makes thousands of small
    objects and nothing of it is garbage yet, so collections there only cost (up to a third
    of a 1,000-launch compile, measured on W5). Threshold 0 pauses them without touching
    gc.isenabled(), which other code saves and restores around its own work; the thresholds
    come back when the last compile ends."""
    with _paused_lock:
        if _paused[0] == 0:
            _paused[1] = gc.get_threshold()
            gc.set_threshold(0)
        _paused[0] += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused[0] -= 1
            if _paused[0] == 0:
                gc.set_threshold(*_paused[1])
