"""Timing wrappers around the phases of a compiled function's first call, for the scripts
that split W5 (profile_compile.py, probe_compile_phases.py): trace,
passes, lower, the graph build (instantiate included) and instantiate, and the executable
(the build and the rest of the backend's setup)."""
from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Callable

PHASES = (("tracegraph.api", "trace_function", "trace"),
          ("tracegraph.api", "run_passes", "passes"),
          ("tracegraph.api", "lower", "lower"),
          ("tracegraph.backends.cuda.build", "GraphBuilder.build", "build"),
          ("tracegraph.backends.cuda.build", "GraphBuilder.instantiate", "instantiate"),
          ("tracegraph.backends.cuda.executable", "CudaExecutable.__init__", "executable"))


def time_phases(record: Callable[[str, float], None]) -> None:
    """Wrap each phase so that every call of it records (its label, its milliseconds)."""
    for module, path, label in PHASES:
        owner = importlib.import_module(module)
        *holders, name = path.split(".")
        for holder in holders:
            owner = getattr(owner, holder)

        def wrap(orig: Callable, label: str = label) -> Callable:
            @functools.wraps(orig)
            def timed(*args, **kwargs):
                t0 = time.perf_counter()
                try:
                    return orig(*args, **kwargs)
                finally:
                    record(label, (time.perf_counter() - t0) * 1e3)
            return timed
        setattr(owner, name, wrap(getattr(owner, name)))
