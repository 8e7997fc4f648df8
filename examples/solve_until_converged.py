"""Jacobi iterations for Laplace's equation on a plate, repeated ON THE DEVICE until the
residual drops below a tolerance: one graph launch per solve, no host round trip per check.

    with tg.while_(flag, max_iterations=limit) as loop:
        jacobi_sweep[grid, block](u, v)          # u -> v
        jacobi_sweep[grid, block](v, u)          # v -> u: the result is back in u
        residual_flag[1, threads](u, v, tol, res, flag)   # res = max |u - v|, flag = res >= tol

The residual is the largest change of the last sweep (a one-block reduction kernel writes it
into a one-element array), and the same kernel sets the loop's flag while it is >= tol. The
loop counts its iterations (`loop.iterations`, two sweeps each) and stops at
`max_iterations`. Everything is checked against the same iteration in NumPy: the number of
iterations, the plate and the residual.

On a GPU it also times the solve for several tolerances against the host-driven loop that a
graph without device-side control flow needs: replay a graph of k iterations, copy the
residual back, compare on the host, repeat (k = 1 and k = 10; with k > 1 it overshoots by up
to k - 1 iterations).

    python examples/solve_until_converged.py
"""
from __future__ import annotations

import statistics
import time

import _support  # first: picks the GPU, or Numba's simulator before Numba loads
import numpy as np
from numba import cuda, float64

import tracegraph as tg
from tracegraph import ops

# one block reduces the residual; its size is a compile-time constant of the kernel
RES_THREADS = 1024 if _support.GPU else 16


@cuda.jit
def jacobi_sweep(u, out):
    """out[i, j] = mean of u's four neighbours, for interior points (2-D grid-stride)."""
    n, m = u.shape
    i0, j0 = cuda.grid(2)
    si, sj = cuda.gridsize(2)
    for i in range(i0 + 1, n - 1, si):
        for j in range(j0 + 1, m - 1, sj):
            out[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])


@cuda.jit
def residual_flag(u, v, tol, res, flag):
    """res[0] = max |u - v| over the interior; flag[0] = 1 while res[0] >= tol, else 0.
    Launched as one block of RES_THREADS threads."""
    part = cuda.shared.array(RES_THREADS, float64)
    t = cuda.threadIdx.x
    n, m = u.shape
    inner = m - 2
    best = 0.0
    for k in range(t, (n - 2) * inner, cuda.blockDim.x):
        i = 1 + k // inner
        j = 1 + k % inner
        best = max(best, abs(u[i, j] - v[i, j]))
    part[t] = best
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            part[t] = max(part[t], part[t + s])
        cuda.syncthreads()
        s //= 2
    if t == 0:
        res[0] = part[0]
        flag[0] = 1 if part[0] >= tol else 0


@cuda.jit
def set_flag(flag, value):
    if cuda.grid(1) == 0:
        flag[0] = value


def _launch(n: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Grid and block of a sweep over an n x n plate."""
    if _support.GPU:
        return ((n + 15) // 16, (n + 15) // 16), (16, 16)
    return (1, 1), (8, 8)


def _iteration(u, v, res, flag, tol, grid, block):
    """One iteration: two sweeps (u -> v -> u), then the residual and the flag."""
    jacobi_sweep[grid, block](u, v)
    jacobi_sweep[grid, block](v, u)
    residual_flag[1, RES_THREADS](u, v, tol, res, flag)


def make_solver(limit: int, raise_at_limit: bool = False):
    """solve(u, tol): iterate on u in place until max |change| < tol, or `limit` times;
    returns (u, the last residual, the number of iterations)."""
    @tg.compile
    def solve(u, tol):
        grid, block = _launch(u.shape[0])
        v = ops.copy(u)                      # same edges; the interior is overwritten
        res = tg.zeros(1, np.float64)
        flag = tg.zeros(1, np.int32)
        set_flag[1, 1](flag, 1)              # the first check happens after one iteration
        with tg.while_(flag, max_iterations=limit, raise_at_limit=raise_at_limit) as loop:
            _iteration(u, v, res, flag, tol, grid, block)
        return u, res, loop.iterations
    return solve


@tg.compile
def iterate(u, v, res, flag, tol, k):
    """The host-driven baseline's graph: k iterations, no device-side control flow."""
    grid, block = _launch(u.shape[0])
    for _ in range(k):
        _iteration(u, v, res, flag, tol, grid, block)
    return res


def host_driven(u, v, res, flag, tol: float, k: int, limit: int) -> int:
    """Replay k iterations, copy the residual back, check it on the host; repeat."""
    done = 0
    residual = np.zeros(1)
    while done < limit:
        iterate.replay(u, v, res, flag, tol, k)
        done += k
        res.copy_to_host(residual)           # waits for the graph
        if residual[0] < tol:
            break
    return done


def initial(n: int) -> np.ndarray:
    u = np.zeros((n, n))
    u[0, :] = 100.0        # hot top edge
    u[:, 0] = u[:, -1] = np.linspace(100.0, 0.0, n)  # sides cool linearly
    return u


def reference(u: np.ndarray, tol: float, limit: int) -> tuple[np.ndarray, float, int]:
    """The same loop in NumPy: (plate, last residual, iterations)."""
    u, v = u.copy(), u.copy()
    res, it = 0.0, 0
    flag = True
    while flag and it < limit:
        v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        u[1:-1, 1:-1] = 0.25 * (v[:-2, 1:-1] + v[2:, 1:-1] + v[1:-1, :-2] + v[1:-1, 2:])
        res = float(np.max(np.abs(u[1:-1, 1:-1] - v[1:-1, 1:-1])))
        flag = res >= tol
        it += 1
    return u, res, it


def _check_solve(solve, u0: np.ndarray, tol: float, limit: int, label: str) -> int:
    (d_u,) = _support.device(u0)
    out, res, iterations = solve(d_u, tol)
    want_u, want_res, want_it = reference(u0, tol, limit)
    got_it = int(_support.host(iterations)[0])
    assert got_it == want_it, f"{label}: {got_it} iterations, NumPy needs {want_it}"
    _support.check(f"{label}: plate after {want_it} iterations", out, want_u,
                   rtol=1e-12, atol=1e-12)
    _support.check(f"{label}: residual {want_res:.3g}", _support.host(res)[0], want_res,
                   rtol=1e-12, atol=1e-12)
    return got_it


def _time_to_solution(run, reset, repeats: int) -> float:
    """Median seconds of run() from a reset plate to the answer (device synchronized)."""
    samples = []
    for _ in range(repeats + 1):
        reset()
        cuda.synchronize()
        t0 = time.perf_counter()
        run()
        cuda.synchronize()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples[1:])  # the first run warms up


def compare(n: int, tolerances: tuple[float, ...], ks: tuple[int, ...], limit: int,
            repeats: int) -> list[dict]:
    """Time to solution: the tg.while_ graph against the host-driven loop, per tolerance."""
    u0 = initial(n)
    d_u0, d_u = _support.device(u0, u0)
    v, res, flag = cuda.to_device(u0), cuda.device_array(1), cuda.device_array(1, np.int32)
    solve = make_solver(limit)

    def reset() -> None:
        d_u.copy_to_device(d_u0)
        v.copy_to_device(d_u0)

    rows = []
    for tol in tolerances:
        row = {"tol": tol}
        reset()
        _, _, its = solve(d_u, tol)          # trace and build outside the timing
        row["iterations"] = int(_support.host(its)[0])
        plate = d_u.copy_to_host()
        row["while_s"] = _time_to_solution(lambda tol=tol: solve.replay(d_u, tol), reset,
                                           repeats)
        for k in ks:
            reset()
            iterate(d_u, v, res, flag, tol, k)  # trace and build outside the timing
            reset()
            row[f"host_k{k}_iterations"] = host_driven(d_u, v, res, flag, tol, k, limit)
            if k == 1:  # the same kernels, checked at the same points: the same answer
                assert row["host_k1_iterations"] == row["iterations"]
                assert np.array_equal(d_u.copy_to_host(), plate), "host loop k=1 differs"
            row[f"host_k{k}_s"] = _time_to_solution(
                lambda k=k, tol=tol: host_driven(d_u, v, res, flag, tol, k, limit), reset,
                repeats)
        rows.append(row)
    return rows


def print_table(n: int, rows: list[dict], ks: tuple[int, ...]) -> None:
    head = f"  {'tol':>7} {'iters':>6} {'tg.while_':>11}"
    for k in ks:
        head += f" {f'host k={k}':>12} {'iters':>6} {'x':>6}"
    print(f"  time to solution, {n}x{n} plate (median, device synchronized):")
    print(head)
    for r in rows:
        line = f"  {r['tol']:>7.0e} {r['iterations']:>6} {r['while_s'] * 1e3:>8.2f} ms"
        for k in ks:
            t = r[f"host_k{k}_s"]
            line += (f" {t * 1e3:>9.2f} ms {r[f'host_k{k}_iterations']:>6}"
                     f" {t / r['while_s']:>5.1f}x")
        print(line)


def main(small: bool | None = None) -> dict:
    """Run the example; `small` (the default without a GPU) uses simulator-sized inputs.
    Returns the checked iteration counts and, on a GPU at full size, the timing rows."""
    small = not _support.GPU if small is None else small
    n, tol, limit = (10, 1e-2, 200) if small else (64, 1e-4, 100_000)
    print(f"solve_until_converged on the {_support.where()}: {n}x{n} plate, "
          f"Jacobi until max |change| < {tol:g}")
    u0 = initial(n)
    solve = make_solver(limit)
    iterations = _check_solve(solve, u0, tol, limit, f"tol {tol:g}")
    plan = solve.latest.plan
    loop = next(node for node in plan.nodes if node.kind == "conditional")
    print(f"  one graph of {len(plan.nodes)} nodes; the loop body holds "
          f"{len(loop.bodies[0])}; {iterations} iterations ({2 * iterations} sweeps)")
    result: dict = {"n": n, "tol": tol, "iterations": iterations}

    # a replay on a fresh plate loops again from the start
    (d_u,) = _support.device(u0)
    _, _, again = solve.replay(d_u, tol)
    assert int(_support.host(again)[0]) == iterations, "a replay ran another number of steps"
    _support.check(f"replay on a fresh plate: {iterations} iterations again", d_u,
                   reference(u0, tol, limit)[0], rtol=1e-12, atol=1e-12)

    # max_iterations stops the loop early (and can raise)
    short = 3
    _check_solve(make_solver(short), u0, tol, short, f"max_iterations={short}")
    strict = make_solver(short, raise_at_limit=True)
    try:
        strict(*_support.device(u0), tol)
    except tg.TracegraphError as exc:
        assert f"limit of {short}" in str(exc), exc
        print(f"PASS raise_at_limit: a loop stopped at {short} iterations raises")
    else:
        raise AssertionError("raise_at_limit=True did not raise at the limit")

    if _support.GPU and not small:
        ks = (1, 10)
        rows = compare(n, (1e-2, 1e-3, 1e-4), ks, limit, repeats=20)
        print_table(n, rows, ks)
        result["timing"] = rows
    return result


if __name__ == "__main__":
    main()
