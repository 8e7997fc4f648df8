"""Values Numba compiles into a kernel (Python constants, host NumPy arrays, record arrays,
NumPy and Numba types and dtypes, slices, tuples of these, device arrays on a GPU) read
through globals, closures, module attributes and attribute chains: changed after the
kernel's first launch with those argument types, the trace is refused (or gives eager's
answer); names that only share a name with what the kernel reads are not read; one
record per specialization, host tables not copied per kernel."""
from __future__ import annotations

import sys
import tracemalloc
import types

import numba
import numpy as np
import pytest
from eager_reference import eager_or_refused
from numba import cuda

import tracegraph as tg
from tracegraph.errors import TraceError

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
    the graph compiles after the trace, when the closure holds the last one (unchecked:
    60 on both backends). A TraceError names the value at the launch and now."""
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
    """A global NumPy array, which Numba compiles in too, written after the launch. Eager:
    0, 1, 2, ...; unchecked, the graph would give 100 everywhere."""
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
    """A record array compiled in is compared as bytes at the trace's end
    (np.array_equal(equal_nan=True) raises TypeError on a structured dtype): eager's
    answer."""
    want = _weighs(np.zeros(N))
    got = tg.compile(_weighs, backend=backend)(np.zeros(N))
    np.testing.assert_array_equal(np.asarray(got), want)


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
    never compiles the global in: changing it after the launch is no TraceError."""
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
    """`cuda.threadIdx.x` names an attribute `x`, not the host array `x` the traced function
    changes after the launch: no TraceError."""
    x[:] = np.arange(N)
    try:
        want = _launches_then_updates_host_x(np.zeros(N))
        got = tg.compile(_launches_then_updates_host_x, backend=backend)(np.zeros(N))
        np.testing.assert_array_equal(np.asarray(got), want)
    finally:
        x[:] = np.arange(N)


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
    """Eager Numba compiles cfg.SCALE in, never cfg.size: changing cfg.size after the
    launch is no TraceError."""
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
    """The kernel reads m.SCALE of the module its closure holds, never m.size: changing
    m.size after the launch is no TraceError."""
    cfg.size = 0
    try:
        want = _closure_scales_and_counts(np.ones(N))
        cfg.size = 0
        got = tg.compile(_closure_scales_and_counts, backend=backend)(np.ones(N))
        np.testing.assert_array_equal(np.asarray(got), want)
    finally:
        cfg.size = 0


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
    """Numba compiles the bytes in, which are unchanged: a new array of the same bytes is
    no TraceError."""
    _load_coefficients()
    want = _evaluates_then_reloads(np.zeros(N))
    got = tg.compile(_evaluates_then_reloads, backend=backend)(np.zeros(N))
    np.testing.assert_array_equal(np.asarray(got), want)


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
    """The TraceError itself, whose message shows the object array (np.frombuffer cannot
    make an OBJECT array from memory)."""
    WORDS[0] = "ab"
    try:
        with pytest.raises(tg.TraceError):
            tg.compile(_measures_then_edits, backend=backend)(np.zeros(N))
    finally:
        WORDS[0] = "ab"


REAL = numba.float32


@cuda.jit
def _third_numba(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = REAL(1.0) / REAL(3.0)


def _rebinds_real_after_the_launch(y):
    global REAL
    _third_numba[1, N](y)
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


STATE = np.zeros(N)


@cuda.jit
def _bump_state(s):
    i = cuda.grid(1)
    if i < s.size:
        s[i] += 1.0


@cuda.jit
def _use_state(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = STATE[i] * 2.0


def _bumps_then_uses(s, y):
    _bump_state[1, N](s)       # eagerly: STATE copied back here (1.0)
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


_ALIGNED = np.dtype([("a", np.uint8), ("y", np.uint32)], align=True)  # 3 padding bytes


PADDED_TABLE = np.zeros(64, _ALIGNED)


PADDED_TABLE.view(np.uint8).reshape(64, 8)[:, 1:4] = 0xAB  # padding as np.array(...) leaves it


PADDED_TABLE["a"] = np.arange(64) % 7


PADDED_TABLE["y"] = np.arange(64) * 3


@cuda.jit
def _lookup_padded(idx, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = PADDED_TABLE[idx[i]]["y"] + PADDED_TABLE[idx[i]]["a"]


def _looks_up(idx, out):
    _lookup_padded[1, 16](idx, out)
    return out


def test_a_global_record_array_with_padding_is_not_refused(backend):
    """Eager reads PADDED_TABLE as it is; nothing changes it: no TraceError, though a copy
    kept for the comparison may have other padding bytes."""
    idx = np.arange(16, dtype=np.int64) * 3
    want = _looks_up(idx, np.zeros(16, np.int64))
    f = tg.compile(_looks_up, backend=backend)
    for _ in range(2):
        got = f(idx, np.zeros(16, np.int64))
        np.testing.assert_array_equal(got, want)


PARAMS = np.zeros((8, 9))


PARAMS[:, 0] = np.arange(8) * 0.5


COLUMN_LUT = PARAMS[:, 0]       # a strided global lookup (column 0)


ROW_STATE = PARAMS[3, 1:9]   # contiguous, inside LUT's address range, no byte of column 0


@cuda.jit
def _bump_row(s):
    i = cuda.grid(1)
    if i < s.size:
        s[i] += 1.0


@cuda.jit
def _use_lut(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * COLUMN_LUT[i]


def _bumps_then_looks_up(s, x, out):
    _bump_row[1, 8](s)
    _use_lut[1, 8](x, out)
    return out


def test_a_global_sharing_no_byte_with_a_written_argument_is_not_refused(backend):
    """Eager: _use_lut reads column 0, which _bump_row never touches: no TraceError, though
    argument s lies inside the global's address range."""
    x = np.arange(8.0)
    try:
        ROW_STATE[:] = 0
        want = _bumps_then_looks_up(ROW_STATE, x, np.zeros(8))
        state_after = ROW_STATE.copy()
        ROW_STATE[:] = 0
        got = tg.compile(_bumps_then_looks_up, backend=backend)(ROW_STATE, x, np.zeros(8))
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(ROW_STATE, state_after)
    finally:
        ROW_STATE[:] = 0


_cfg = types.ModuleType("aliased_cfg")


_cfg.S = 2.0


sys.modules["aliased_cfg"] = _cfg


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
    kernel would be compiled with 3.0 (out == 6): a TraceError."""
    _cfg.S = 2.0
    try:
        with pytest.raises(TraceError, match="S"):
            tg.compile(_aliased_then_rebound, backend=backend)(np.zeros(8))
    finally:
        _cfg.S = 2.0


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
    """40 kernels reading one 8 MiB global share one snapshot of it (a copy and the bytes
    per record would take about 640 MiB at the trace's peak)."""
    f = tg.compile(_many_kernels_one_table, backend=backend)
    tracemalloc.start()
    try:
        f.trace(np.zeros(64))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak >> 20} MiB at the trace's peak"


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
    would be compiled with slice(4, 8): a TraceError."""
    global SL
    SL = slice(0, 4)
    try:
        with pytest.raises(TraceError, match="SL"):
            tg.compile(_slice_then_rebound, backend=backend)(np.arange(8.0), np.zeros(8))
    finally:
        SL = slice(0, 4)


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
    with 2.0 too: no TraceError (a record per strides, (32, 8) and (64, 8), would say
    "held 3.0 at its first launch with these argument types")."""
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
    """Eager (GPU): one compile (S == 2.0), a == 1*2 + 1*2 == 4; so does the graph: no
    TraceError (a dynamic scalar and a float are one argument type)."""
    global S
    S = 2.0
    try:
        f = tg.compile(_override_and_restore_dynamic, backend=backend, dynamic={"s": "value"})
        np.testing.assert_array_equal(f(np.zeros(8), 1.0), 4.0)
    finally:
        S = 2.0


_chained_cfg = types.ModuleType("chained_cfg")


_chained_cfg.S = 2.0


_chained_cfg.sub = types.ModuleType("chained_cfg.sub")


_chained_cfg.sub.X = 2.0


sys.modules["chained_cfg"] = _chained_cfg


sys.modules["chained_cfg.sub"] = _chained_cfg.sub


@cuda.jit
def _add_chain_alias(out):
    c = _chained_cfg.sub
    i = cuda.grid(1)
    if i < out.size:
        out[i] += c.X


def _chain_alias_then_rebound(out):
    _add_chain_alias[1, 8](out)
    _chained_cfg.sub.X = 3.0
    _add_chain_alias[1, 8](out)
    return out


@pytest.mark.filterwarnings("ignore:the traced function")
def test_an_attribute_chain_aliased_to_a_local_is_checked(backend):
    """Eager (GPU): compiled with cfg.sub.X == 2.0, out == 4. The graph would give 6: a
    TraceError."""
    _chained_cfg.sub.X = 2.0
    try:
        with pytest.raises(TraceError, match="X"):
            tg.compile(_chain_alias_then_rebound, backend=backend)(np.zeros(8))
    finally:
        _chained_cfg.sub.X = 2.0


@cuda.jit
def _add_nested_alias(out):
    def get():
        c = _chained_cfg
        return c.S
    i = cuda.grid(1)
    if i < out.size:
        out[i] += get()


def _nested_alias_then_rebound(out):
    _add_nested_alias[1, 8](out)
    _chained_cfg.S = 3.0
    _add_nested_alias[1, 8](out)
    return out


@pytest.mark.filterwarnings("ignore:the traced function")
def test_a_root_aliased_in_an_inner_function_is_checked(backend):
    """Eager (GPU): compiled with cfg.S == 2.0, out == 4. The graph would give 6: a
    TraceError, though `S` is named only in the inner function's code, not the kernel's
    co_names."""
    _chained_cfg.S = 2.0
    try:
        with pytest.raises(TraceError, match="S"):
            tg.compile(_nested_alias_then_rebound, backend=backend)(np.zeros(8))
    finally:
        _chained_cfg.S = 2.0


@cuda.jit(device=True)
def _scale_of(m):
    return m.S


@cuda.jit
def _add_passed_module(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += _scale_of(_chained_cfg)


def _passed_module_then_rebound(out):
    _add_passed_module[1, 8](out)
    _chained_cfg.S = 3.0
    _add_passed_module[1, 8](out)
    return out


@pytest.mark.filterwarnings("ignore:the traced function")
def test_a_module_passed_to_a_device_function_is_checked(backend):
    """Eager (GPU): compiled with cfg.S == 2.0 (Numba passes the module as types.Module,
    m.S a constant), out == 4. The graph would give 6: a TraceError."""
    _chained_cfg.S = 2.0
    try:
        with pytest.raises(TraceError, match="S"):
            tg.compile(_passed_module_then_rebound, backend=backend)(np.zeros(8))
    finally:
        _chained_cfg.S = 2.0


N40 = 40


_BAKED_GLOBAL = cuda.to_device(np.zeros(N40))


@cuda.jit
def _read_baked_global(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _BAKED_GLOBAL[i]


@pytest.mark.fake_platform
def test_a_kernel_compiled_with_another_array_in_a_global_it_names_is_refused(monkeypatch):
    """Numba compiles the array a global holds at a kernel's first compile into it (eager
    launches keep using it after the name is rebound). The graph must not order the launch
    for the array the name holds now: a LoweringError. The arrays compiled in come from
    Numba's code library on a GPU; here the stand-in is told them."""
    from tracegraph.backends.cuda.fake import FakePlatform
    stale = cuda.to_device(np.zeros(N40))

    def step(out):
        _read_baked_global[1, N40](out)

    for baked, ok in (([_BAKED_GLOBAL], True), ([_BAKED_GLOBAL[2:6]], True), ([stale], False)):
        monkeypatch.setattr(FakePlatform, "baked_arrays", lambda self, k, t, b=baked: b)
        f = tg.compile(step, backend="cuda")
        if ok:
            f(cuda.to_device(np.ones(N40)))
        else:
            with pytest.raises(tg.LoweringError, match="held another device array") as e:
                f(cuda.to_device(np.ones(N40)))
            assert "as an argument" in e.value.fix


_STALE = cuda.to_device(np.zeros(N40))


@cuda.jit
def _read_stale(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _STALE[i]


def test_a_global_rebound_after_the_kernel_s_first_compile_is_refused_on_the_gpu(gpu):
    """On a GPU, Numba keeps the array _STALE held at the first launch compiled into
    _read_stale; a trace after `_STALE = other` would order the launch for `other`."""
    global _STALE
    first = _STALE
    _read_stale[1, N40](cuda.device_array(N40))  # compiled with `first` in it
    cuda.synchronize()
    _STALE = cuda.to_device(np.ones(N40))
    try:
        with pytest.raises(tg.LoweringError, match="held another device array"):
            tg.compile(lambda out: _read_stale[1, N40](out), backend="cuda")(
                cuda.device_array(N40))
    finally:
        _STALE = first
