"""Hostile round 39 (against 994406f: the compiled-in check and the refusal of a global host
array read after a kernel wrote a NumPy argument sharing its memory; baseline f2861f4).
Whole programs (an RL rollout over many envs with a config module, class constants and a
host-bumped episode counter; an autoregressive decode loop with a KV cache, a global
temperature, a host position table, kernel factories and tg.ops; CG and Jacobi solvers with
global tolerances; a particle simulation with a host force table and DT; every example;
numba-cuda's own constmem/globals/freevar/enum kernels) matched eager Numba, except:

REGRESSIONS of 994406f (both pass at f2861f4 and at e3484be, equal to eager):
  1. A global host record array whose dtype has padding (an aligned struct, as numba-cuda's
     own tests/cudapy/test_constmem.py CONST_RECORD_ALIGN, read with
     cuda.const.array_like or directly) is refused on every trace: "kernel ... reads TABLE,
     which held an array [...] ... and holds an array [...] now" showing equal arrays.
     HostArrayConstant keeps `array.copy()` and compares `copy.tobytes()` with
     `now.tobytes()`, but NumPy's copy of a structured array copies field by field and
     leaves the padding bytes uninitialized, so the bytes differ (e3484be kept
     `array.tobytes()` of the original itself).
  2. A strided global host array (`LUT = PARAMS[:, 0]`) and a contiguous NumPy argument
     carved from the same parent without sharing a byte (`PARAMS[3, 1:9]`), written by one
     kernel before another reads LUT, is a TraceError "kernel use_lut reads, as a global,
     host memory that argument s shares": _refuse_compiled_in_after_host_writes compares
     address extents, not the bytes the two views touch.
Both fixed: a record array's values compared with its fields packed (no padding); the
sharing told by np.shares_memory.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

import tracegraph as tg

# -- 1. a global aligned record array (padding bytes) -------------------------------------

_ALIGNED = np.dtype([("a", np.uint8), ("y", np.uint32)], align=True)  # 3 padding bytes
TABLE = np.zeros(64, _ALIGNED)
TABLE.view(np.uint8).reshape(64, 8)[:, 1:4] = 0xAB  # padding as np.array(...) leaves it
TABLE["a"] = np.arange(64) % 7
TABLE["y"] = np.arange(64) * 3


@cuda.jit
def _lookup(idx, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = TABLE[idx[i]]["y"] + TABLE[idx[i]]["a"]


def _looks_up(idx, out):
    _lookup[1, 16](idx, out)
    return out


def test_a_global_record_array_with_padding_is_not_refused(backend):
    """Eager reads TABLE as it is; nothing changes it. Now: TraceError showing two equal
    arrays (the copy kept for the comparison has other padding bytes)."""
    idx = np.arange(16, dtype=np.int64) * 3
    want = _looks_up(idx, np.zeros(16, np.int64))
    f = tg.compile(_looks_up, backend=backend)
    for _ in range(2):
        got = f(idx, np.zeros(16, np.int64))
        np.testing.assert_array_equal(got, want)


# -- 2. a strided global and an argument inside its extent, sharing no byte ----------------

PARAMS = np.zeros((8, 9))
PARAMS[:, 0] = np.arange(8) * 0.5
LUT = PARAMS[:, 0]       # a strided global lookup (column 0)
STATE = PARAMS[3, 1:9]   # contiguous, inside LUT's address range, no byte of column 0


@cuda.jit
def _bump(s):
    i = cuda.grid(1)
    if i < s.size:
        s[i] += 1.0


@cuda.jit
def _use_lut(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * LUT[i]


def _bumps_then_looks_up(s, x, out):
    _bump[1, 8](s)
    _use_lut[1, 8](x, out)
    return out


def test_a_global_sharing_no_byte_with_a_written_argument_is_not_refused(backend):
    """Eager: _use_lut reads column 0, which _bump never touches. Now: TraceError "kernel
    _use_lut reads, as a global, host memory that argument s shares"."""
    x = np.arange(8.0)
    try:
        STATE[:] = 0
        want = _bumps_then_looks_up(STATE, x, np.zeros(8))
        state_after = STATE.copy()
        STATE[:] = 0
        got = tg.compile(_bumps_then_looks_up, backend=backend)(STATE, x, np.zeros(8))
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(STATE, state_after)
    finally:
        STATE[:] = 0
