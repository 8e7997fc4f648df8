"""Hostile round 38 (against e3484be: the check that what Numba compiles into a kernel --
Python constants, host NumPy arrays, classes, tuples of these -- read through a global,
closure variable, default or attribute, still holds at the trace's end what it held at the
kernel's first launch with those argument types; baseline f2861f4). All six fixed: name
paths as the code reads them (a global and the attributes read on it in a row); arrays by
bytes up to 16 MiB; object arrays shown from a copy; Numba types and NumPy dtypes compiled
in by equality; (6) a TraceError at the reading kernel's launch.

REGRESSIONS of ed192c4/eb6cbec/e3484be (programs that worked at f2861f4, equal to eager):
  1. An attribute of a module the kernel names (`cfg.SCALE`), where the module has another
     attribute sharing its name with an attribute the kernel reads of something else
     (`y.size` and a host counter `cfg.size`), counts as read: updating `cfg.size` after
     the launch is a TraceError "kernel ... reads cfg.size". Round 37 only fixed the root
     name (only globals the code LOADS); the attribute walk of _named_values still takes
     every co_name as an attribute of every object on the way. Also through a closure
     variable holding the module (`m.SCALE`, "reads m.size") (ed192c4).
  2. A host array rebound, after the launch, to a new array with the same bytes (a config
     reload: `COEF = np.array([1., 2., 3.])` again) is a TraceError "held an array
     [1. 2. 3.] ... and holds an array [1. 2. 3.] now": HostArrayConstant.same wants the
     very object even under 16 MiB, where sharp-edges says the bytes are compared and
     Numba compiles only the bytes in (eb6cbec).
  3. A global object-dtype NumPy array (simulator only: Numba on a GPU cannot compile one)
     written after the launch fails with a bare ValueError "cannot create an OBJECT array
     from memory buffer" from HostArrayConstant.__repr__ (np.frombuffer) while the
     TraceError's message is built, instead of the TraceError (e3484be; at f2861f4 a
     silent difference from eager).

OLDER GAPS (silent wrong answers, the same at f2861f4), of the family the check covers:
  4. A global Numba type (`REAL = numba.float32`, read as `REAL(1.0) / REAL(3.0)`) rebound
     after the launch (to numba.float64): Numba compiles it in as it does `np.float32`
     (checked since e3484be), but compiled_in refuses a numba `types.Type` instance: the
     graph computes in float64, eager (GPU and simulator) in float32.
  5. The same for a global NumPy dtype object (`DTYPE = np.dtype(np.float32)` in
     `cuda.local.array(1, DTYPE)`): an np.dtype instance is not compiled in either.
  6. A kernel reading a global host array that an earlier kernel of the same trace writes
     as a host NumPy argument of the traced function (`step(STATE, y)`: `bump(s)` then
     `use(y)` reading STATE): eagerly Numba copies `s` back after `bump`, and `use` is
     compiled (GPU) or runs (simulator) with the new contents; the graph writes STATE back
     only at the end, so `use` sees the old contents. Neither refused nor right (the same
     family as sharp-edges' `cuda.to_device(H)` of an argument written before: a
     TraceError there).
"""
from __future__ import annotations

import types

import numba
import numpy as np
import pytest
from eager_reference import eager_or_refused
from numba import cuda

import tracegraph as tg

N = 8


# -- 1. an attribute of a named module sharing its name with one the kernel reads ------------

cfg = types.ModuleType("cfg")  # as `import cfg`: a config module
cfg.SCALE = 2.0
cfg.size = 0                   # a host-side count the traced function keeps


@cuda.jit
def _scale(y):
    i = cuda.grid(1)
    if i < y.size:             # `size` of y, not of cfg
        y[i] = y[i] * cfg.SCALE


def _scales_and_counts(y):
    _scale[1, N](y)
    cfg.size += 1
    return y


def test_a_module_attribute_sharing_its_name_with_an_attribute_the_kernel_reads_is_not_read(
        backend):
    """Eager Numba compiles cfg.SCALE in, never cfg.size. Now: TraceError "kernel _scale
    reads cfg.size (named in _scale), which held 0 ... and holds 1 now"."""
    cfg.size = 0
    try:
        want = _scales_and_counts(np.ones(N))
        cfg.size = 0
        got = tg.compile(_scales_and_counts, backend=backend)(np.ones(N))
        np.testing.assert_array_equal(np.asarray(got), want)
    finally:
        cfg.size = 0


def _make_scaler(m):
    @cuda.jit
    def scaler(y):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = y[i] * m.SCALE
    return scaler


_scaler = _make_scaler(cfg)


def _closure_scales_and_counts(y):
    _scaler[1, N](y)
    cfg.size += 1
    return y


def test_an_attribute_of_a_closure_module_the_kernel_does_not_read_may_change(backend):
    """Now: TraceError "kernel scaler reads m.size"."""
    cfg.size = 0
    try:
        want = _closure_scales_and_counts(np.ones(N))
        cfg.size = 0
        got = tg.compile(_closure_scales_and_counts, backend=backend)(np.ones(N))
        np.testing.assert_array_equal(np.asarray(got), want)
    finally:
        cfg.size = 0


# -- 2. a host array rebound to the same bytes ---------------------------------------------

COEF = np.array([1.0, 2.0, 3.0])


def _load_coefficients():
    global COEF
    COEF = np.array([1.0, 2.0, 3.0])  # read again from a config: the same values


@cuda.jit
def _poly(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = COEF[0] + COEF[1] * i + COEF[2] * i * i


def _evaluates_then_reloads(y):
    _poly[1, N](y)
    _load_coefficients()
    return y


def test_a_host_array_rebound_to_the_same_bytes_is_not_refused(backend):
    """Numba compiles the bytes in, which are unchanged. Now: TraceError "held an array
    [1. 2. 3.] ... and holds an array [1. 2. 3.] now"."""
    _load_coefficients()
    want = _evaluates_then_reloads(np.zeros(N))
    got = tg.compile(_evaluates_then_reloads, backend=backend)(np.zeros(N))
    np.testing.assert_array_equal(np.asarray(got), want)


# -- 3. an object array written after the launch (simulator) --------------------------------

WORDS = np.array(["ab", "cd", "ef", "gh", "ij", "kl", "mn", "op"], dtype=object)


@cuda.jit
def _lengths(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = len(WORDS[i])


def _measures_then_edits(y):
    _lengths[1, N](y)
    WORDS[0] = "abcdef"
    return y


def test_an_object_array_written_after_the_launch_is_a_trace_error(backend):
    """Now: ValueError "cannot create an OBJECT array from memory buffer" while the
    TraceError's message is built."""
    WORDS[0] = "ab"
    try:
        with pytest.raises(tg.TraceError):
            tg.compile(_measures_then_edits, backend=backend)(np.zeros(N))
    finally:
        WORDS[0] = "ab"


# -- 4. a global Numba type ---------------------------------------------------------------

REAL = numba.float32


@cuda.jit
def _third(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = REAL(1.0) / REAL(3.0)


def _rebinds_real_after_the_launch(y):
    global REAL
    _third[1, N](y)
    REAL = numba.float64
    return y


def test_a_global_numba_type_rebound_after_the_launch_is_refused(backend):
    """Eager: float32's 1/3 (0.3333333432674408); the graph: float64's."""
    global REAL
    try:
        eager_or_refused(_rebinds_real_after_the_launch, backend,
                          lambda: globals().__setitem__("REAL", numba.float32), np.zeros(N))
    finally:
        REAL = numba.float32


# -- 5. a global NumPy dtype ----------------------------------------------------------------

DTYPE = np.dtype(np.float32)


@cuda.jit
def _third_local(y):
    i = cuda.grid(1)
    tmp = cuda.local.array(1, DTYPE)
    tmp[0] = 1.0
    tmp[0] = tmp[0] / 3.0
    if i < y.size:
        y[i] = tmp[0]


def _rebinds_dtype_after_the_launch(y):
    global DTYPE
    _third_local[1, N](y)
    DTYPE = np.dtype(np.float64)
    return y


def test_a_global_numpy_dtype_rebound_after_the_launch_is_refused(backend):
    """Eager: float32's 1/3; the graph: float64's."""
    global DTYPE
    try:
        eager_or_refused(_rebinds_dtype_after_the_launch, backend,
                          lambda: globals().__setitem__("DTYPE", np.dtype(np.float32)),
                          np.zeros(N))
    finally:
        DTYPE = np.dtype(np.float32)


# -- 6. a global host array an earlier launch writes as an argument -------------------------

STATE = np.zeros(N)


@cuda.jit
def _bump(s):
    i = cuda.grid(1)
    if i < s.size:
        s[i] += 1.0


@cuda.jit
def _use_state(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = STATE[i] * 2.0


def _bumps_then_uses(s, y):
    _bump[1, N](s)       # eagerly: STATE copied back here (1.0)
    _use_state[1, N](y)  # eagerly compiled (or run) with STATE == 1.0: y == 2.0
    return y


def test_a_global_host_array_written_as_an_argument_before_a_kernel_reads_it(backend):
    """Eager: y == 2 everywhere; the graph: y == 0 (STATE written back only at the end)."""
    STATE[:] = 0.0
    try:
        want = _bumps_then_uses(STATE, np.zeros(N))
        STATE[:] = 0.0
        try:
            got = tg.compile(_bumps_then_uses, backend=backend)(STATE, np.zeros(N))
        except tg.TraceError:
            return
        np.testing.assert_array_equal(np.asarray(got), want)
    finally:
        STATE[:] = 0.0
