"""Small kernels shared by the tests. Keep them tiny: the simulator runs one Python
thread per CUDA thread."""
from __future__ import annotations

from numba import cuda


@cuda.jit
def scale(x, a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]


@cuda.jit
def add(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit
def mul(x, w, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * w[i]


@cuda.jit
def copy(src, dst):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]


@cuda.jit
def iscale(x, a):
    """x *= a, in place (augmented assignment)."""
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= a


@cuda.jit
def iadd(x, y):
    """x += y, in place."""
    i = cuda.grid(1)
    if i < x.size:
        x[i] += y[i]


@cuda.jit
def increment(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


@cuda.jit
def fill(out, value):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = value


@cuda.jit
def boom(x):
    """Raises if it ever runs: tracing must not execute it."""
    i = cuda.grid(1)
    if i < x.size:
        raise RuntimeError("boom: a traced kernel was executed")


def launch_1d(n: int, tpb: int = 16) -> tuple[int, int]:
    return ((n + tpb - 1) // tpb, tpb)


@cuda.jit
def add_to(x, v):
    """x += v, a scalar, in place."""
    i = cuda.grid(1)
    if i < x.size:
        x[i] += v


@cuda.jit
def mul_by(x, v):
    """x *= v, a scalar, in place."""
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= v


@cuda.jit
def axpy(x, w, a):
    """x = x * w + a, w an array, in place."""
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * w[i] + a


@cuda.jit
def axpb(x, a, b):
    """x = a * x + b, a and b scalars, in place."""
    i = cuda.grid(1)
    if i < x.size:
        x[i] = a * x[i] + b


@cuda.jit
def double(x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] = 2 * x[i]


@cuda.jit
def total(buf, out):
    """out[0] = the sum of buf, by one thread."""
    if cuda.grid(1) == 0:
        s = 0.0
        for i in range(buf.shape[0]):
            s += buf[i]
        out[0] = s


@cuda.jit
def relu_plus_one(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = max(x[i], 0.0) + 1


@cuda.jit
def negate(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = -x[i]
