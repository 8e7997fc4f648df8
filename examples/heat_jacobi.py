"""Jacobi iterations for the steady 2-D heat equation (Laplace's equation), several
sweeps per graph.

The plate's edges are held at fixed temperatures (hot top edge); each Jacobi sweep
sets every interior point to the mean of its four neighbours. One graph does `sweeps`
sweeps, ping-ponging between the caller's array and a graph-owned copy so the result
lands back in the caller's array, then measures the last sweep's largest change with
tracegraph.ops (subtract, abs, max). The host replays the graph until that change is
small: one launch per `sweeps` sweeps.

    python examples/heat_jacobi.py
"""
from __future__ import annotations

import _support  # first: picks the GPU, or Numba's simulator before Numba loads
import numpy as np
from numba import cuda

import tracegraph as tg
from tracegraph import ops


@cuda.jit
def jacobi_sweep(u, out):
    """out[i, j] = mean of u's four neighbours, for interior points (2-D grid-stride)."""
    n, m = u.shape
    i0, j0 = cuda.grid(2)
    si, sj = cuda.gridsize(2)
    for i in range(i0 + 1, n - 1, si):
        for j in range(j0 + 1, m - 1, sj):
            out[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])


@tg.compile
def relax(u, sweeps):
    """`sweeps` (even) Jacobi sweeps on u in place; returns the last sweep's max change."""
    n, m = u.shape
    block = (16, 16) if _support.GPU else (4, 4)
    grid = ((n + 15) // 16, (m + 15) // 16) if _support.GPU else (2, 2)
    v = ops.copy(u)  # same edges; the interior is overwritten
    for _ in range(sweeps // 2):
        jacobi_sweep[grid, block](u, v)
        jacobi_sweep[grid, block](v, u)
    return ops.max(ops.abs(u[1:-1, 1:-1] - v[1:-1, 1:-1]))


def initial(n: int) -> np.ndarray:
    u = np.zeros((n, n))
    u[0, :] = 100.0        # hot top edge
    u[:, 0] = u[:, -1] = np.linspace(100.0, 0.0, n)  # sides cool linearly
    return u


def reference(u: np.ndarray, sweeps: int) -> tuple[np.ndarray, float]:
    u = u.copy()
    change = 0.0
    for _ in range(sweeps):
        new = u.copy()
        new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        change = float(np.max(np.abs(new[1:-1, 1:-1] - u[1:-1, 1:-1])))
        u = new
    return u, change


def main(small: bool | None = None) -> None:
    """Run the example; `small` (the default without a GPU) uses simulator-sized inputs."""
    small = not _support.GPU if small is None else small
    n, sweeps, replays = (10, 4, 3) if small else (256, 50, 40)
    print(f"heat_jacobi on the {_support.where()}: {n}x{n} plate, {sweeps} sweeps per graph")
    u0 = initial(n)
    (d_u,) = _support.device(u0)
    change = relax(d_u, sweeps)
    program = relax.latest.program
    print(f"  one graph: {sum(op.kind == 'kernel' for op in program.ops)} kernels")
    want, want_change = reference(u0, sweeps)
    _support.check(f"{sweeps} sweeps", d_u, want, rtol=1e-12, atol=1e-12)
    _support.check(f"max change of sweep {sweeps}", change, want_change, rtol=1e-12, atol=1e-12)
    for _ in range(replays - 1):
        change = relax.replay(d_u, sweeps)
    want, want_change = reference(u0, sweeps * replays)
    _support.check(f"{sweeps * replays} sweeps ({replays} replays)", d_u, want,
                   rtol=1e-12, atol=1e-12)
    _support.check(f"max change of sweep {sweeps * replays}", change, want_change,
                   rtol=1e-12, atol=1e-12)
    print(f"  centre temperature {_support.host(d_u)[n // 2, n // 2]:.3f}, "
          f"last sweep changed it by at most {float(_support.host(change)):.2e}")
    _support.report_timing(f"{sweeps} sweeps", relax, (d_u, sweeps), repeats=100)


if __name__ == "__main__":
    main()
