"""Hostile round 37 (against eb6cbec: the check that Python constants and host NumPy arrays a
kernel reads through globals, closures, defaults or attributes still hold, at the trace's
end, what they held at the kernel's first launch; baseline f2861f4). All five fixed: the
arrays' bytes compared; only names the code loads as globals; tuples of arrays and
classes compiled in too; one check per kernel and argument types (its specialization).

REGRESSIONS of ed192c4/eb6cbec (programs that worked at f2861f4, equal to eager Numba):
  1. A kernel reading a global structured (record) NumPy array (`SPECIES[i]["mass"]`, a
     constant Numba compiles in) makes EVERY trace fail with a bare TypeError ("ufunc
     'isnan' not supported") from HostArrayConstant.same's
     np.array_equal(..., equal_nan=True), even when nothing changes (eb6cbec).
  2. The names the check looks up are all of the kernel's co_names, attribute names
     included: a global that merely shares its name with an attribute the kernel reads
     (`y.size` and a host counter `size`; `cuda.threadIdx.x` and a host array `x`) and
     that the traced function updates after the launch is a TraceError "kernel ... reads
     size", though the kernel never reads it (ed192c4 for constants, eb6cbec for arrays).
     The same applies to attributes of the modules a kernel names (`cfg.size`).

OLDER GAPS (silent wrong answers, the same at f2861f4), of the family the check covers:
  3. A host array held in a global tuple (`T = (LUT, 2.0)`, read as `T[0][i] * T[1]`):
     writing LUT, or rebinding T, after the launch goes unseen (_is_constant refuses a
     tuple holding an array, and the HostArrayConstant branch wants a bare ndarray):
     the graph uses the new contents, eager Numba the ones at the first launch.
  4. A global NumPy type (`DT = np.float32`, read as `DT(1.0) / DT(3.0)`) rebound after
     the launch (to np.float64): Numba compiles it in like a constant; the graph computes
     in float64, eager in float32.
  5. One kernel launched with a second argument type while a constant is overridden and
     restored before the function returns: eagerly Numba compiles that type's
     specialization at its first launch, with the override; the check compares only the
     kernel's first launch with the end, both the restored value, and the graph runs
     both launches with it.
"""
from __future__ import annotations

import numpy as np
from eager_reference import eager_or_refused
from numba import cuda

import tracegraph as tg

N = 8


# -- 1. a global record array ------------------------------------------------------------

SPECIES = np.zeros(N, dtype=[("mass", np.float64), ("charge", np.int32)])
SPECIES["mass"] = np.arange(N)
SPECIES["charge"] = 1


@cuda.jit
def _weigh(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = SPECIES[i]["mass"] * 2 + SPECIES[i]["charge"]


def _weighs(y):
    _weigh[1, N](y)
    return y


def test_a_kernel_reading_a_global_record_array_traces(backend):
    """At f2861f4: equal to eager. Now: TypeError from np.array_equal(equal_nan=True) on
    a structured dtype, at every trace's end."""
    want = _weighs(np.zeros(N))
    got = tg.compile(_weighs, backend=backend)(np.zeros(N))
    np.testing.assert_array_equal(np.asarray(got), want)


# -- 2. a global named like an attribute the kernel reads ---------------------------------

size = 0  # a host-side count the traced function keeps; the kernel reads `y.size` only


@cuda.jit
def _bump(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] += 1.0


def _bumps_and_counts(y):
    global size
    _bump[1, N](y)
    size += 1
    return y


def test_a_global_sharing_its_name_with_an_attribute_the_kernel_reads_is_not_read(backend):
    """The kernel names the attribute `size` (y.size), not the global `size`: eager Numba
    never compiles the global in. Now: TraceError "kernel _bump reads size"."""
    global size
    size = 0
    try:
        want = _bumps_and_counts(np.zeros(N))
        got = tg.compile(_bumps_and_counts, backend=backend)(np.zeros(N))
        np.testing.assert_array_equal(np.asarray(got), want)
    finally:
        size = 0


x = np.arange(N, dtype=np.float64)  # host data; the kernel names cuda.threadIdx.x only


@cuda.jit
def _by_thread(a):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i < a.size:
        a[i] += 1.0


def _launches_then_updates_host_x(a):
    _by_thread[1, N](a)
    x[0] += 1.0
    return a


def test_a_host_array_sharing_its_name_with_threadidx_x_is_not_read(backend):
    """Now: TraceError "kernel _by_thread reads x ... held an array [...]"."""
    x[:] = np.arange(N)
    try:
        want = _launches_then_updates_host_x(np.zeros(N))
        got = tg.compile(_launches_then_updates_host_x, backend=backend)(np.zeros(N))
        np.testing.assert_array_equal(np.asarray(got), want)
    finally:
        x[:] = np.arange(N)


# -- 3. a host array held in a global tuple -----------------------------------------------

LUT = np.arange(N, dtype=np.float64)
TABLES = (LUT, 2.0)


@cuda.jit
def _lookup(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] += TABLES[0][i] * TABLES[1]


def _writes_the_tuples_array_after_the_launch(y):
    _lookup[1, N](y)
    LUT[:] = 100.0
    return y


def _rebinds_the_tuple_after_the_launch(y):
    global TABLES
    _lookup[1, N](y)
    TABLES = (LUT, 5.0)
    return y


def test_a_host_array_in_a_global_tuple_written_after_the_launch_is_refused(backend):
    """Eager: 0, 2, 4, ... (compiled at the launch); the graph: 200 everywhere."""
    LUT[:] = np.arange(N)
    try:
        eager_or_refused(_writes_the_tuples_array_after_the_launch, backend,
                          lambda: LUT.__setitem__(slice(None), np.arange(N)), np.zeros(N))
    finally:
        LUT[:] = np.arange(N)


def test_a_global_tuple_holding_an_array_rebound_after_the_launch_is_refused(backend):
    """Eager: 0, 2, 4, ...; the graph: 0, 5, 10, ..."""
    global TABLES
    TABLES = (LUT, 2.0)
    LUT[:] = np.arange(N)
    try:
        eager_or_refused(_rebinds_the_tuple_after_the_launch, backend,
                          lambda: globals().__setitem__("TABLES", (LUT, 2.0)), np.zeros(N))
    finally:
        TABLES = (LUT, 2.0)


# -- 4. a global NumPy type -----------------------------------------------------------------

DT = np.float32


@cuda.jit
def _third(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = DT(1.0) / DT(3.0)


def _rebinds_the_dtype_after_the_launch(y):
    global DT
    _third[1, N](y)
    DT = np.float64
    return y


def test_a_global_numpy_type_rebound_after_the_launch_is_refused(backend):
    """Eager: float32's 1/3 (0.3333333432674408); the graph: float64's."""
    global DT
    DT = np.float32
    try:
        eager_or_refused(_rebinds_the_dtype_after_the_launch, backend,
                          lambda: globals().__setitem__("DT", np.float32), np.zeros(N))
    finally:
        DT = np.float32


# -- 5. a second specialization compiled under a temporary override -------------------------

OFFSET = 2.0


@cuda.jit
def _offset(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = y[i] + OFFSET


def _overrides_for_the_float32_launch(a, b):
    global OFFSET
    _offset[1, N](a)          # float64[:]: compiled with 2.0
    OFFSET = 3.0
    _offset[1, N](b)          # float32[:]: eagerly a new specialization, compiled with 3.0
    OFFSET = 2.0
    return b


def test_a_specialization_first_launched_under_an_override_keeps_the_override(backend):
    """Eager: b == 3; the graph: b == 2 (both launches compiled with the restored 2.0)."""
    global OFFSET
    OFFSET = 2.0
    try:
        eager_or_refused(_overrides_for_the_float32_launch, backend,
                          lambda: globals().__setitem__("OFFSET", 2.0),
                          np.zeros(N), np.zeros(N, np.float32))
    finally:
        OFFSET = 2.0
