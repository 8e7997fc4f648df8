"""RK4 integration of an ensemble of Lorenz-96 systems: many small kernels per step.

    dx_i/dt = (x_{i+1} - x_{i-2}) x_{i-1} - x_i + F        (i cyclic, per ensemble member)

The right-hand side is a user's @cuda.jit kernel; the RK4 stage combinations are
tracegraph.ops (`x + (dt / 2) * k1`, ...). One RK4 step launches 17 kernels; a graph
holds `steps` of them, so eager Python pays the launch overhead 17 * steps times where
the graph pays it once.

    python examples/rk4.py
"""
from __future__ import annotations

import _support  # first: picks the GPU, or Numba's simulator before Numba loads
import numpy as np
from numba import cuda

import tracegraph as tg


@cuda.jit
def lorenz96(x, forcing, dxdt):
    """dxdt[e, i] for every ensemble member e and variable i (grid-stride loop)."""
    members, n = x.shape
    for k in range(cuda.grid(1), members * n, cuda.gridsize(1)):
        e = k // n
        i = k - e * n
        dxdt[e, i] = ((x[e, (i + 1) % n] - x[e, (i + n - 2) % n]) * x[e, (i + n - 1) % n]
                      - x[e, i] + forcing)


def rhs(x, forcing):
    dxdt = tg.empty_like(x)
    threads = 128 if _support.GPU else 8
    blocks = min(-(-x.size // threads), 1024 if _support.GPU else 2)
    lorenz96[blocks, threads](x, forcing, dxdt)
    return dxdt


def rk4_step(x, dt, forcing):
    k1 = rhs(x, forcing)
    k2 = rhs(x + (dt / 2) * k1, forcing)
    k3 = rhs(x + (dt / 2) * k2, forcing)
    k4 = rhs(x + dt * k3, forcing)
    return x + (dt / 6) * (k1 + 2 * k2 + 2 * k3 + k4)


@tg.compile
def integrate(x, dt, steps, forcing):
    for _ in range(steps):
        x = rk4_step(x, dt, forcing)
    return x


def reference(x, dt, steps, forcing):
    def f(x):
        return (np.roll(x, -1, 1) - np.roll(x, 2, 1)) * np.roll(x, 1, 1) - x + forcing
    for _ in range(steps):
        k1 = f(x)
        k2 = f(x + (dt / 2) * k1)
        k3 = f(x + (dt / 2) * k2)
        k4 = f(x + dt * k3)
        x = x + (dt / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
    return x


def main(small: bool | None = None) -> None:
    """Run the example; `small` (the default without a GPU) uses simulator-sized inputs."""
    small = not _support.GPU if small is None else small
    members, n, steps = (2, 8, 2) if small else (256, 40, 20)
    dt, forcing = 0.01, 8.0
    print(f"rk4 on the {_support.where()}: {members} Lorenz-96 systems of {n} variables, "
          f"{steps} RK4 steps per graph")
    rng = np.random.default_rng(0)
    x0 = forcing + 0.5 * rng.standard_normal((members, n))
    (d_x,) = _support.device(x0)
    x = integrate(d_x, dt, steps, forcing)
    program = integrate.latest.program
    kernels = sum(1 for op in program.ops if op.kind == "kernel")
    print(f"  one graph: {kernels} kernels ({kernels // steps} per RK4 step)")
    _support.check(f"rk4 {steps} steps", x, reference(x0, dt, steps, forcing),
                   rtol=1e-10, atol=1e-10)
    # replaying on the result continues the trajectory
    x = integrate.replay(x, dt, steps, forcing)
    _support.check(f"rk4 {2 * steps} steps (replayed on its own result)", x,
                   reference(x0, dt, 2 * steps, forcing), rtol=1e-9, atol=1e-9)
    _support.report_timing(f"{steps} RK4 steps", integrate, (d_x, dt, steps, forcing))


if __name__ == "__main__":
    main()
