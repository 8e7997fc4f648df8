"""Pure passes Program -> Program, run in this order by `run_passes`."""
from __future__ import annotations

from ..ir import Program, verify
from .branches import find_lanes
from .dependencies import add_dependencies, primary_hazard, transitive_reduction
from .memory import plan_memory

PASSES = (add_dependencies, transitive_reduction, find_lanes, plan_memory)


def run_passes(program: Program, *, check: bool = False) -> Program:
    """All passes in order; with `check`, verify() after each (tests turn this on)."""
    for p in PASSES:
        program = p(program)
        if check:
            verify(program, check_order=True)
    return program


__all__ = [
    "PASSES",
    "add_dependencies",
    "find_lanes",
    "plan_memory",
    "primary_hazard",
    "run_passes",
    "transitive_reduction",
]
