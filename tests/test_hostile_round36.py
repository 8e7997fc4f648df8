"""Hostile round 36 (against a91384c, the W5 compile-path shortcuts; baseline f2861f4).

No regression was found in the shortcuts themselves (the same-launch memo, lowering's kept
pointer/scalar positions, find_lanes' shared edges, the builder's id keys, fast_init).
OLDER GAPS (same at f2861f4), both fixed: (1) is now a TraceError naming the value at the
launch and now, (2) a LoweringError at lowering on both backends:
  1. A kernel defined inside the traced function that reads a closure variable the
     function rebinds after the launch (a loop variable: `for k in ...: c = k;
     @cuda.jit def addc(...): ... c ...; addc[...](...)`) runs with the variable's LAST
     value in every launch of the graph, on both backends: eagerly each launch uses the
     value at its launch (Numba compiles the kernel then). Silent wrong answer.
  2. A dynamic float scalar (`dynamic={"a": "value"}`) passed to a kernel whose explicit
     signature declares int64: `sim` truncates it silently, `cuda` fails building the
     graph with a CudaError blaming a driver call ("add kernel node returned TypeError");
     the same value passed statically is a LoweringError at the launch's line (on a
     GPU eager Numba's ctypes conversion raises TypeError; the simulator ignores the
     signature), so the test asks for that LoweringError here too.
"""
from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg

N = 8


def _closure_loop(x, y):
    for k in range(4):
        c = float(k + 1)

        @cuda.jit
        def addc(x, y):
            i = cuda.grid(1)
            if i < y.size:
                y[i] = y[i] * 2 + c * x[i]

        addc[1, N](x, y)
    return y


def test_kernel_defined_in_a_loop_reading_a_rebound_closure_value_is_refused(backend):
    """Eagerly each launch compiles its kernel with the value of its time (1, 4, 11, 26);
    the graph compiles after the trace, when the closure holds the last one (before the
    fix: 60 on both backends). A TraceError names the value at the launch and now."""
    want = _closure_loop(np.ones(N), np.zeros(N))
    np.testing.assert_array_equal(want, np.full(N, 26.0))
    with pytest.raises(tg.TraceError, match=r"reads c .*held 1\.0 at its first launch"):
        tg.compile(_closure_loop, backend=backend)(np.ones(N), np.zeros(N))


def _closure_factory_loop(x, y):
    def make(c):
        @cuda.jit
        def addc(x, y):
            i = cuda.grid(1)
            if i < y.size:
                y[i] = y[i] * 2 + c * x[i]
        return addc

    for k in range(4):
        make(float(k + 1))[1, N](x, y)
    return y


def test_kernels_made_by_a_factory_keep_their_own_closure_values(backend):
    want = _closure_factory_loop(np.ones(N), np.zeros(N))
    got = tg.compile(_closure_factory_loop, backend=backend)(np.ones(N), np.zeros(N))
    np.testing.assert_array_equal(got, want)


SCALE = 2.0


@cuda.jit
def _scaled(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= SCALE


def _rebinds_scale_after_the_launch(x):
    global SCALE
    _scaled[1, N](x)
    SCALE = 3.0 if SCALE == 2.0 else 2.0


def test_a_global_constant_rebound_after_the_launch_is_refused(backend):
    global SCALE
    SCALE = 2.0
    try:
        with pytest.raises(tg.TraceError, match="reads SCALE"):
            tg.compile(_rebinds_scale_after_the_launch, backend=backend)(np.ones(N))
    finally:
        SCALE = 2.0


@cuda.jit("void(float64[:], int64, float64[:])")
def _axpy_int(x, a, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = y[i] + a * x[i]


def _int_param(x, y, a):
    _axpy_int[1, N](x, a, y)
    return y


def test_dynamic_float_to_an_int64_parameter_is_a_lowering_error(backend):
    f = tg.compile(_int_param, backend=backend, dynamic={"a": "value"})
    # sim: no error, a truncated to 2 (y == 2); cuda: CudaError "add kernel node
    # returned TypeError" from the graph build
    with pytest.raises(tg.LoweringError):
        f(np.ones(N), np.zeros(N), 2.7)


TABLE = np.arange(N, dtype=np.float64)


@cuda.jit
def _add_table(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] += TABLE[i]


def _writes_table_after_the_launch(y):
    _add_table[1, N](y)
    TABLE[:] = 100.0
    return y


def _writes_table_before_the_launch(y):
    TABLE[:] = 5.0
    _add_table[1, N](y)
    return y


def test_a_host_array_a_kernel_reads_written_after_its_launch_is_refused(backend):
    """(Found beside round 36's closure values: the same gap for a global NumPy array,
    which Numba compiles in too. Eager: 0, 1, 2, ...; the graph gave 100 everywhere.)"""
    TABLE[:] = np.arange(N)
    try:
        with pytest.raises(tg.TraceError, match=r"reads TABLE .*held an array \[0\. 1\."):
            tg.compile(_writes_table_after_the_launch, backend=backend)(np.zeros(N))
    finally:
        TABLE[:] = np.arange(N)


def test_a_host_array_written_before_the_kernels_first_launch_is_what_it_reads(backend):
    TABLE[:] = np.arange(N)
    try:
        got = tg.compile(_writes_table_before_the_launch, backend=backend)(np.zeros(N))
        np.testing.assert_array_equal(got, np.full(N, 5.0))
    finally:
        TABLE[:] = np.arange(N)
