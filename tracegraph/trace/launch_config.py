"""A kernel launch's configuration, checked where it is written: as eager Numba checks it
(one to three integer dimensions for the grid and the block), and against the device's
limits (_numba.launch_limits: CUDA's for compute capability 9.0 on the simulator), which
eagerly the driver enforces only when the kernel runs."""
from __future__ import annotations

import numbers
from typing import Any

from .. import _numba
from ..errors import TraceError

_AXES = "xyz"


def checked_dims(name: str, griddim: Any, blockdim: Any, sharedmem: Any, where: str, *,
                 opt_in: bool = False) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """(grid, block, dynamic shared memory bytes) of `name[griddim, blockdim, 0,
    sharedmem]`, or a TraceError naming the launch and the rule it breaks. `opt_in`: the
    kernel may have opted in to more shared memory (a foreign kernel): not checked."""
    # the common launch (Python ints within the limits) without building any message
    grid, block = _plain(griddim), _plain(blockdim)
    if grid is not None and block is not None and type(sharedmem) is int:
        limits = _numba.launch_limits()
        (gx, gy, gz), (bx, by, bz), (mx, my, mz), (tx, ty, tz) = \
            grid, block, limits.grid, limits.block
        if 0 < gx <= mx and 0 < gy <= my and 0 < gz <= mz and 0 < bx <= tx and \
                0 < by <= ty and 0 < bz <= tz and bx * by * bz <= limits.threads and \
                0 <= sharedmem and (opt_in or sharedmem <= limits.shared):
            return grid, block, sharedmem
    return _checked(name, griddim, blockdim, sharedmem, where, opt_in)


def _plain(given: Any) -> tuple[int, int, int] | None:
    """1 to 3 Python ints, padded with 1s; None for anything else (checked slowly)."""
    t = type(given)
    if t is int:
        return (given, 1, 1)
    if (t is tuple or t is list) and 1 <= len(given) <= 3 and \
            all(type(d) is int for d in given):
        full = (*given, 1, 1)
        return (full[0], full[1], full[2])
    return None


def _checked(name: str, griddim: Any, blockdim: Any, sharedmem: Any, where: str,
             opt_in: bool) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    said = f"{name}[{_shown(griddim)}, {_shown(blockdim)}]"
    grid = _dims(said, "grid", griddim, where)
    block = _dims(said, "block", blockdim, where)
    if isinstance(sharedmem, bool) or not isinstance(sharedmem, numbers.Integral) or \
            sharedmem < 0:
        raise TraceError(f"launch {said} asks for {sharedmem!r} bytes of dynamic shared "
                         "memory: that is a non-negative integer", where=where,
                         fix="pass the dynamic shared memory size in bytes as an int")
    shared = int(sharedmem)
    limits = _numba.launch_limits()
    for what, dims, most in (("grid", grid, limits.grid), ("block", block, limits.block)):
        for axis, n, limit in zip(_AXES, dims, most):
            if n < 1:
                raise TraceError(f"launch {said} has {what} {axis} = {n}: every dimension "
                                 "is at least 1 (the driver refuses the launch)",
                                 where=where, fix="launch at least one block of one thread "
                                                  "along every axis, or skip the launch")
            if n > limit:
                raise TraceError(f"launch {said} has {what} {axis} = {n}, over the limit of "
                                 f"{limit:,} for {what} {axis} ({limits.device})",
                                 where=where, fix=_fix(what, axis, limit))
    threads = block[0] * block[1] * block[2]
    if threads > limits.threads:
        raise TraceError(f"launch {said} has {threads} threads per block, over the limit of "
                         f"{limits.threads:,} ({limits.device})", where=where,
                         fix="use smaller blocks and more of them")
    if shared > limits.shared and not opt_in:
        raise TraceError(f"launch {said} asks for {shared:,} bytes of dynamic shared "
                         f"memory per block, over the limit of {limits.shared:,} "
                         f"({limits.device}; Numba launches without the opt-in to more)",
                         where=where, fix="use less shared memory per block (smaller tiles)")
    return grid, block, shared


def check_numba_form(name: str, griddim: Any, blockdim: Any, where: str) -> None:
    """What Numba's kernel[griddim, blockdim] itself refuses (TypeError, ValueError), as a
    TraceError at the launch's line."""
    said = f"{name}[{_shown(griddim)}, {_shown(blockdim)}]"
    _dims(said, "grid", griddim, where)
    _dims(said, "block", blockdim, where)


def _dims(said: str, what: str, given: Any, where: str) -> tuple[int, int, int]:
    """Numba's normalize_kernel_dimensions: an integer, or a tuple or list of one to three
    (numbers.Integral: NumPy's integers too), padded with 1s."""
    if given is None:
        raise TraceError(f"launch {said} has no {what} dimensions", where=where,
                         fix="launch as kernel[blocks_per_grid, threads_per_block](...)")
    dims = list(given) if isinstance(given, (tuple, list)) else [given]
    if len(dims) > 3:
        raise TraceError(f"launch {said}: the {what} has {len(dims)} dimensions, and CUDA "
                         "has three (eager Numba refuses it with ValueError)", where=where,
                         fix=f"give the {what} as 1 to 3 integers")
    bad = [d for d in dims if not isinstance(d, numbers.Integral)]
    if bad:
        raise TraceError(f"launch {said}: {what} dimensions are integers, and "
                         f"{bad[0]!r} is a {type(bad[0]).__name__} (eager Numba refuses it "
                         "with TypeError)", where=where,
                         fix=f"pass integers, e.g. {what} (n + 255) // 256 rather than "
                             "n / 256")
    full = [int(d) for d in dims] + [1] * (3 - len(dims))
    return (full[0], full[1], full[2])


def _fix(what: str, axis: str, limit: int) -> str:
    if what == "grid":
        return (f"launch at most {limit:,} blocks along {axis} (grid x allows far more: fold "
                "the others into it), or loop over the rest inside the kernel")
    return f"use at most {limit:,} threads along {axis}, and more blocks"


def _shown(dims: Any) -> str:
    return repr(dims) if not isinstance(dims, (tuple, list)) else \
        "(" + ", ".join(map(repr, dims)) + ("," if len(dims) == 1 else "") + ")"
