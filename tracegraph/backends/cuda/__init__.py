"""The cuda backend: a Plan as an explicit CUDA graph, built once and replayed with one
launch. The only code that calls the CUDA driver, in parts with one job each:

- platform.py: what the backend asks of CUDA (cuda.core, cuda.bindings, Numba), behind one
  interface; fake.py implements it on the CPU for tests;
- memory.py: allocations, the address of every buffer, the ring of result allocations;
- build.py: one builder per node kind, in-graph copies of moved inputs, the bracket;
- replay.py: the steps of a replay (follow inputs, free held results, stage, write back);
- moved_inputs.py: re-point a moved input or copy it into a static buffer (pure);
- handles.py: streams, events, page-locked memory, direct kernel-node re-pointing;
- executable.py: one compiled signature, tying them together.
"""
from __future__ import annotations

from .executable import CudaExecutable, build

__all__ = ["CudaExecutable", "build"]
