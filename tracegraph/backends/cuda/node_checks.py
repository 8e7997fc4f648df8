"""What a kernel node must satisfy before the builder makes it (backends/cuda/build.py):
arrays Numba compiled into the kernel are ones the trace ordered it for, and a cooperative
grid fits on the device."""
from __future__ import annotations

from typing import Any

from ...errors import LoweringError
from ...ir import BufferKind
from ...plan import PlanNode


def check_baked(node: PlanNode, baked: list[tuple[int, int]], buffers: tuple) -> None:
    """Every array Numba compiled into the kernel is one the trace ordered the launch
    for: a kernel first compiled while a global it names held another array keeps that
    array (eagerly too), and the graph would order the launch for the wrong memory."""
    if not baked:
        return
    captured = [(b.address, b.address + b.nbytes) for b in
                (buffers[a.buffer] for a in node.op.accesses)
                if b.kind == BufferKind.EXTERNAL]
    for lo, hi in baked:
        if not any(c_lo <= lo and hi <= c_hi for c_lo, c_hi in captured):
            raise LoweringError(f"kernel {node.name} was compiled by Numba while a global "
                                "or closure variable it names held another device array "
                                f"(at {lo:#x}), which it keeps; the trace ordered it for "
                                "the array the name holds now", where=node.location,
                                fix="pass the array to the kernel as an argument, or do "
                                    "not rebind a name a kernel uses after its first "
                                    "launch")


def check_co_resident(node: PlanNode, platform: Any) -> None:
    """A cooperative grid must fit on the device at once, or the launch fails."""
    launch = node.op.launch
    limit = platform.cooperative_grid_limit(launch.kernel, node.argtypes,
                                                 launch.blockdim, launch.sharedmem)
    blocks = launch.griddim[0] * launch.griddim[1] * launch.griddim[2]
    if blocks > limit:
        raise LoweringError(f"kernel {node.name} synchronizes the grid "
                            f"(cuda.cg.this_grid().sync()), so all {blocks} blocks of "
                            f"its grid {launch.griddim} must be resident at once, but "
                            f"this device holds at most {limit} blocks of "
                            f"{launch.blockdim} of it", where=node.location,
                            fix=f"launch at most {limit} blocks and loop over the work "
                                "inside the kernel (a grid-stride loop), or use "
                                f"{node.name}.max_cooperative_grid_blocks(blockdim) to "
                                "size the grid")
