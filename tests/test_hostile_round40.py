"""Hostile round 40 (against 8ad7973: loaded_paths, the compiled-in snapshots, the record per
kernel and argument types; baseline f2861f4, which had no compiled-in check).

Probed and right on Python 3.11 and 3.12: `cfg.a.b` chains, `np.float32(S)`, `math.sqrt(S)`,
`DT(x)` with DT rebound, a global read in a lambda inside a device function, `global S`,
walrus, `cuda.local.array(cfg.N, cfg.DT)`, `cfg.sub.K` through a submodule, a host global
changed in place, `y.size` beside a rebound global `size` (not refused); the snapshots of
NaN (and NaN payloads), -0.0, datetime64 (units), float16, longdouble, non-contiguous,
0-d, read-only, Fortran, np.matrix, recarray, object, nested padded record arrays, void
scalars, Numba types, dtypes (byte order), tuples, complex -0j, 1 vs True; a new
specialization from a tuple of arrays of another dtype; a dynamic scalar (refused when the
value changes between its launches).

Trace time (sim, f.trace, best of 3; HEAD / f2861f4): 2,000 identical launches 40 / 43 ms;
200 distinct kernel objects (closures) 16 / 12 ms; 2,000 launches of views 108 / 124 ms;
200 distinct kernels reading one 8 MiB global host array 1,530 ms (first trace 9.6 s,
peak RSS 3.3 GiB) / 11 ms (first 0.3 s, 153 MiB).

REGRESSIONS:
  1. (994406f; e3484be refused it) A config module aliased to a local in the kernel
     (`c = cfg` then `c.S`) compiles `cfg.S` in, but loaded_paths records only ("cfg",)
     and ("<default>", "c", "S"): a rebinding of cfg.S after the launch is not refused,
     and the graph's kernel is compiled with the new value (eager: the old one).
  2. (e3484be, worse since 994406f) Every kernel specialization's record keeps its own
     copy and its own bytes of each host array it reads: n kernels reading one 8 MiB
     table copy 16n MiB per trace (200 kernels: 3.3 GiB peak, 1.5-9.6 s of trace).

OLDER (since the check exists, e3484be):
  3. A global `slice` is compiled in (numba-cuda's lower_constant(types.SliceType)) but
     compiled_in() treats it as not compiled in: `SL = slice(4, 8)` after the launch is
     not refused.
  4. The record's argument types are finer than Numba's specialization: 2-D arrays by
     strides (two C-contiguous float64 arrays of other widths are one specialization), a
     dynamic scalar apart from a static scalar of the same type. A global overridden
     between two launches of one specialization and restored before the return is
     refused, though eager and the graph both compile it with the restored value.
All four fixed: a root stored or passed on has every attribute the code names counted as
read; host arrays' snapshots shared while the array holds them, contents kept up to 1 MiB
(a bigger one by identity); slices compiled in; the record keyed as Numba specializes.
"""
from __future__ import annotations

import sys
import tracemalloc
import types

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from tracegraph.errors import TraceError

# -- 1. a config module aliased to a local in the kernel ------------------------------------

_cfg = types.ModuleType("round40_cfg")
_cfg.S = 2.0
sys.modules["round40_cfg"] = _cfg


@cuda.jit
def _add_aliased(out):
    c = _cfg
    i = cuda.grid(1)
    if i < out.size:
        out[i] += c.S


def _aliased_then_rebound(out):
    _add_aliased[1, 8](out)
    _cfg.S = 3.0
    _add_aliased[1, 8](out)
    return out


def test_a_module_attribute_read_through_a_local_alias_is_checked(backend):
    """Eager (GPU): compiled at the first launch with cfg.S == 2.0, out == 4. The graph's
    kernel would be compiled with 3.0 (out == 6). Now: no TraceError (e3484be: one)."""
    _cfg.S = 2.0
    try:
        with pytest.raises(TraceError, match="S"):
            tg.compile(_aliased_then_rebound, backend=backend)(np.zeros(8))
    finally:
        _cfg.S = 2.0


# -- 2. many kernels reading one big host global --------------------------------------------

_BIG = np.random.default_rng(40).random(1 << 20)  # 8 MiB


def _reads_big(c):
    @cuda.jit
    def add_big(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += _BIG[i] * c
    return add_big


_BIG_KERNELS = [_reads_big(float(c)) for c in range(40)]


def _many_kernels_one_table(x):
    for k in _BIG_KERNELS:
        k[1, 32](x)
    return x


def test_kernels_reading_one_host_table_do_not_each_copy_it(backend):
    """40 kernels reading one 8 MiB global: f2861f4 traced it with no extra memory. Now
    each record keeps a copy and the bytes: about 640 MiB at the trace's peak."""
    f = tg.compile(_many_kernels_one_table, backend=backend)
    tracemalloc.start()
    try:
        f.trace(np.zeros(64))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak >> 20} MiB at the trace's peak"


# -- 3. a global slice ------------------------------------------------------------------------

SL = slice(0, 4)


@cuda.jit
def _add_slice(x, out):
    v = x[SL]
    i = cuda.grid(1)
    if i < v.size:
        out[i] += v[i]


def _slice_then_rebound(x, out):
    global SL
    _add_slice[1, 8](x, out)
    SL = slice(4, 8)
    _add_slice[1, 8](x, out)
    return out


@pytest.mark.filterwarnings("ignore:the traced function")
def test_a_global_slice_rebound_after_the_launch_is_refused(backend):
    """Eager (GPU): slice(0, 4) compiled in, both launches add x[0:4]. The graph's kernel
    would be compiled with slice(4, 8). Now: no TraceError."""
    global SL
    SL = slice(0, 4)
    try:
        with pytest.raises(TraceError, match="SL"):
            tg.compile(_slice_then_rebound, backend=backend)(np.arange(8.0), np.zeros(8))
    finally:
        SL = slice(0, 4)


# -- 4. one Numba specialization, two records -------------------------------------------------

S = 2.0


@cuda.jit
def _add_s_2d(a):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        a[i, j] += S


def _override_and_restore_2d(a, b):
    global S
    _add_s_2d[(1, 1), (8, 8)](a)
    S = 3.0
    _add_s_2d[(1, 1), (8, 8)](b)  # float64, 2-D, C: the specialization compiled with 2.0
    S = 2.0
    return a, b


@pytest.mark.filterwarnings("ignore:the traced function")
def test_one_specialization_of_other_array_widths_is_one_record(backend):
    """Eager (GPU): one compile (S == 2.0) for both launches, b == 2; the graph compiles it
    with 2.0 too. Now: TraceError "held 3.0 at its first launch with these argument
    types" (the strides (32, 8) and (64, 8) make two records)."""
    global S
    S = 2.0
    try:
        a, b = tg.compile(_override_and_restore_2d, backend=backend)(
            np.zeros((4, 4)), np.zeros((4, 8)))
        np.testing.assert_array_equal(a, 2.0)
        np.testing.assert_array_equal(b, 2.0)
    finally:
        S = 2.0


@cuda.jit
def _add_scaled(a, s):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += s * S


def _override_and_restore_dynamic(a, s):
    global S
    _add_scaled[1, 8](a, s)
    S = 3.0
    _add_scaled[1, 8](a, 1.0)  # (float64[::1], float64): the specialization compiled with 2.0
    S = 2.0
    return a


@pytest.mark.filterwarnings("ignore:the traced function")
def test_a_dynamic_scalar_and_a_static_one_of_its_type_are_one_record(backend):
    """Eager (GPU): one compile (S == 2.0), a == 1*2 + 1*2 == 4; so does the graph. Now:
    TraceError (ScalarArg and float are two argument types)."""
    global S
    S = 2.0
    try:
        f = tg.compile(_override_and_restore_dynamic, backend=backend, dynamic={"s": "value"})
        np.testing.assert_array_equal(f(np.zeros(8), 1.0), 4.0)
    finally:
        S = 2.0
