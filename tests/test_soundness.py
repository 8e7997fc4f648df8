"""No silent wrong answer: each defect found by trying tracegraph as a user would (captured
arrays, records, *args, explicit signatures, strided write-back, read-only memory,
unsupported dtypes, huge shapes, containers, nesting, Numba's host API), each checked
against eager Numba on every backend, in random valid orders on the simulator."""
from __future__ import annotations

import collections
import dataclasses
import threading

import networkx as nx
import numpy as np
import pytest
import captured_state
from eager import fresh, host, matches_eager, to_device
from numba import cuda
from small_kernels import copy, fill, increment, iscale, scale

import tracegraph as tg

pytestmark = pytest.mark.filterwarnings("ignore:the traced function .*:UserWarning")

N = 8
GRID, BLOCK = 1, N


def _ordered(program, first: str, then: str) -> bool:
    a = next(i for i, op in enumerate(program.ops) if op.name == first)
    b = next(i for i, op in enumerate(program.ops) if op.name == then)
    return nx.has_path(program.graph, a, b)


# ---------------------------------------------------------------------------
# 1-2. device arrays a kernel names as globals or closure variables (captured by address)

GLOBAL = cuda.to_device(np.zeros(N))
GLOBAL_VIEW = GLOBAL[2:6]


@cuda.jit
def write_global(x):
    i = cuda.grid(1)
    if i < GLOBAL.size:
        GLOBAL[i] = 2.0 * x[i]


@cuda.jit
def read_global(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = GLOBAL[i] + 1.0


@cuda.jit(device=True)
def _global_at(i):
    return GLOBAL[i]


@cuda.jit
def read_global_in_device_function(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _global_at(i) * 3.0


@cuda.jit
def bump_global_view():
    i = cuda.grid(1)
    if i < GLOBAL_VIEW.size:
        GLOBAL_VIEW[i] += 10.0


def _poisoned_global(*arrays):
    def make():
        GLOBAL.copy_to_device(np.full(N, -7.0))
        return fresh(*arrays)()
    return make


def test_a_kernel_writing_a_global_is_ordered_before_one_reading_it(backend, monkeypatch):
    def step(x):
        a, b = cuda.device_array_like(x), cuda.device_array_like(x)
        write_global[GRID, BLOCK](x)
        read_global[GRID, BLOCK](a)
        read_global_in_device_function[GRID, BLOCK](b)
        return a, b

    f = matches_eager(step, _poisoned_global(np.arange(N, dtype=np.float64)), backend,
                      monkeypatch=monkeypatch)
    p = f.latest.program
    assert _ordered(p, "write_global", "read_global")
    assert _ordered(p, "write_global", "read_global_in_device_function")
    assert [b.kind for b in p.buffers].count("external") == 1


@cuda.jit(device=True)
def _the_global():
    return GLOBAL


@cuda.jit(device=True)
def _put_global(i, v):
    GLOBAL[i] = v


@cuda.jit(device=True)
def _put_through(i, v):
    _put_global(i, v)  # two device functions deep


@cuda.jit
def write_global_returned_by_a_device_function(x):
    i = cuda.grid(1)
    if i < x.size:
        g = _the_global()
        g[i] = 2.0 * x[i]


@cuda.jit
def write_global_through_star_args(x):
    i = cuda.grid(1)
    if i < x.size:
        args = (i, 2.0 * x[i])
        _put_through(*args)


@cuda.jit(device=True)
def _put_module_attribute(i, v):
    captured_state.ARRAY[i] = v


@cuda.jit
def write_module_attribute_through_star_args(x):
    i = cuda.grid(1)
    if i < x.size:
        args = (i, 2.0 * x[i])
        _put_module_attribute(*args)


@cuda.jit
def read_module_attribute(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = captured_state.ARRAY[i] + 1.0


def test_a_module_attribute_written_by_an_unfollowed_device_call_is_ordered(backend,
                                                                           monkeypatch):
    def step(x):
        a, b = cuda.device_array_like(x), cuda.device_array_like(x)
        read_module_attribute[GRID, BLOCK](a)
        write_module_attribute_through_star_args[GRID, BLOCK](x)
        read_module_attribute[GRID, BLOCK](b)
        return a, b

    def make():
        captured_state.ARRAY.copy_to_device(np.full(16, -7.0))
        return fresh(np.arange(N, dtype=np.float64))()
    f = matches_eager(step, make, backend, monkeypatch=monkeypatch)
    if f is not None:
        assert _ordered(f.latest.program, "read_module_attribute",
                        "write_module_attribute_through_star_args")


@pytest.mark.parametrize("writer", [write_global_returned_by_a_device_function,
                                    write_global_through_star_args])
def test_a_global_written_inside_device_functions_is_ordered(backend, monkeypatch, writer):
    def step(x):
        a, b = cuda.device_array_like(x), cuda.device_array_like(x)
        read_global[GRID, BLOCK](a)
        writer[GRID, BLOCK](x)
        read_global[GRID, BLOCK](b)
        return a, b

    f = matches_eager(step, _poisoned_global(np.arange(N, dtype=np.float64)), backend,
                      monkeypatch=monkeypatch)
    if f is None:  # Numba on a GPU cannot return a global array from a device function,
        return     # and tracegraph refused it as well (matches_eager checked)
    p = f.latest.program
    (w,) = [i for i, op in enumerate(p.ops) if op.name == writer.__name__]
    assert any("w" in a.mode for a in p.ops[w].accesses
               if p.buffers[a.buffer].kind == "external")
    assert _ordered(p, "read_global", writer.__name__)


def test_a_closure_device_array_is_captured_and_ordered(backend, monkeypatch):
    table = cuda.to_device(np.zeros(N))

    @cuda.jit
    def fill_table(x):
        i = cuda.grid(1)
        if i < table.size:
            table[i] = x[i] - 1.0

    @cuda.jit
    def use_table(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = table[i] * table[i]

    def step(x):
        out = cuda.device_array_like(x)
        fill_table[GRID, BLOCK](x)
        use_table[GRID, BLOCK](out)
        return out

    def make():
        table.copy_to_device(np.full(N, 5.0))
        return (np.arange(N, dtype=np.float64),)

    f = matches_eager(step, make, backend, monkeypatch=monkeypatch)
    assert _ordered(f.latest.program, "fill_table", "use_table")


def test_a_captured_view_and_its_base_are_one_memory(backend, monkeypatch):
    def step(x):
        out = cuda.device_array_like(x)
        write_global[GRID, BLOCK](x)
        bump_global_view[1, 4]()
        read_global[GRID, BLOCK](out)
        return out

    f = matches_eager(step, _poisoned_global(np.arange(N, dtype=np.float64)), backend,
                      monkeypatch=monkeypatch)
    p = f.latest.program
    assert _ordered(p, "write_global", "bump_global_view")
    assert _ordered(p, "bump_global_view", "read_global")


def test_a_global_passed_as_an_argument_too_is_ordered(backend, monkeypatch):
    def step(x, g):
        out = cuda.device_array_like(x)
        copy[GRID, BLOCK](x, g)           # writes the argument: GLOBAL's memory
        read_global[GRID, BLOCK](out)     # reads GLOBAL by name
        return out

    def make():
        GLOBAL.copy_to_device(np.full(N, -7.0))
        return (np.arange(N, dtype=np.float64), GLOBAL)

    f = matches_eager(step, make, backend, monkeypatch=monkeypatch)
    assert _ordered(f.latest.program, "copy", "read_global")


def test_an_input_that_starts_overlapping_a_global_compiles_again(backend):
    def step(x, g):
        out = cuda.device_array_like(x)
        copy[GRID, BLOCK](x, g)
        read_global[GRID, BLOCK](out)
        return out

    f = tg.compile(step, backend=backend)
    x = np.arange(N, dtype=np.float64)
    elsewhere = cuda.to_device(np.zeros(N))
    GLOBAL.copy_to_device(np.full(N, 4.0))
    np.testing.assert_array_equal(host(f(x, elsewhere)), np.full(N, 5.0))
    assert f.latest.program.aliased_inputs == frozenset()
    GLOBAL.copy_to_device(np.full(N, -7.0))
    np.testing.assert_array_equal(host(f(x, GLOBAL)), x + 1.0)
    assert len(f.compiled) == 2 and f.latest.program.aliased_inputs
    with pytest.raises(tg.SignatureError):  # replay never compiles the new overlap
        tg.compile(step, backend=backend).replay(x, GLOBAL)


# ---------------------------------------------------------------------------
# 3. record field stores and *args

REC = np.dtype([("x", np.float64), ("y", np.float64)])


@cuda.jit
def set_fields(a, v):
    i = cuda.grid(1)
    if i < a.size:
        a[i].x = v + i
        a[i]["y"] = 2.0 * v


@cuda.jit
def sum_fields(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i].x + a[i].y


@cuda.jit
def star_copy(*args):
    i = cuda.grid(1)
    if i < args[1].size:
        args[1][i] = args[0][i] + 1.0


@pytest.mark.parametrize("place", ["host", "device"])
def test_record_field_stores_are_writes(backend, monkeypatch, place):
    def step(a):
        out = cuda.device_array(N, np.float64)
        set_fields[GRID, BLOCK](a, 3.0)
        sum_fields[GRID, BLOCK](a, out)
        return out

    def make():
        a = np.zeros(N, REC)
        return (a,) if place == "host" else (cuda.to_device(a),)

    f = matches_eager(step, make, backend, monkeypatch=monkeypatch)
    (op,) = [o for o in f.latest.program.ops if o.name == "set_fields"]
    assert [a.mode for a in op.accesses] == ["w"]


def test_star_args_kernels_write_their_arguments(backend, monkeypatch):
    if not tg._numba.SIMULATOR:  # numba-cuda cannot compile *args kernels: nor can we
        with pytest.raises(TypeError, match="Signature mismatch"):
            star_copy[GRID, BLOCK](cuda.to_device(np.zeros(N)), cuda.to_device(np.zeros(N)))
        if backend == "cuda":  # tracegraph packs the star arguments as Numba's typing does
            x, y = cuda.to_device(np.arange(N, dtype=np.float64)), cuda.to_device(np.zeros(N))
            tg.compile(lambda x, y: star_copy[GRID, BLOCK](x, y), backend=backend)(x, y)
            np.testing.assert_array_equal(y.copy_to_host(), np.arange(N) + 1.0)
        return

    def step(x):
        y, z = cuda.device_array_like(x), cuda.device_array_like(x)
        star_copy[GRID, BLOCK](x, y)
        star_copy[GRID, BLOCK](y, z)
        return z

    f = matches_eager(step, fresh(np.arange(N, dtype=np.float64)), backend,
                      monkeypatch=monkeypatch)
    p = f.latest.program
    first, second = [i for i, o in enumerate(p.ops) if o.name == "star_copy"]
    # the members of *args share one answer: read and written
    assert ["w" in a.mode for a in p.ops[first].accesses] == [True, True]
    assert nx.has_path(p.graph, first, second)


# ---------------------------------------------------------------------------
# 4. explicit signatures: the overload eager Numba picks, scalars converted to it

@cuda.jit("void(float32[:], float32)")
def scale32(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= a


@cuda.jit(["void(float32[:], int32)", "void(float64[:], float64)"])
def shift_two_ways(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += a


@pytest.mark.parametrize("place", ["host", "device"])
def test_explicit_signature_converts_scalars_as_eager(backend, monkeypatch, place):
    def step(x, y):
        scale32[GRID, BLOCK](x, 2.0)       # a Python float reaches a float32 parameter
        shift_two_ways[GRID, BLOCK](x, 3)  # float32[:] and an int: the int32 overload
        shift_two_ways[GRID, BLOCK](y, 1)  # float64[:]: the float64 overload, 1 -> 1.0
        return x, y

    def make():
        args = (np.arange(N, dtype=np.float32), np.arange(N, dtype=np.float64))
        return args if place == "host" else to_device(args)

    f = matches_eager(step, make, backend, monkeypatch=monkeypatch)
    kinds = [tuple(str(t) for t in n.argtypes) for n in f.latest.plan.nodes
             if n.kind == "kernel"]
    assert kinds[0][1] == "float32" and kinds[1][1] == "int32" and kinds[2][1] == "float64"


def test_no_matching_signature_is_a_lowering_error_like_eager(backend):
    def step(x):
        scale32[GRID, BLOCK](x, 2.0)
        return x

    x = np.arange(N, dtype=np.int8)
    with pytest.raises(tg.LoweringError, match="No matching definition"):
        tg.compile(step, backend=backend)(x)


# ---------------------------------------------------------------------------
# 5. a written strided NumPy view: only its own elements are copied back

@cuda.jit
def fill_column(col, value):
    i = cuda.grid(1)
    if i < col.size:
        col[i] = value


def test_write_back_of_a_column_leaves_the_other_columns_alone(backend):
    """Two functions write two columns of one array from two threads at once; each copies
    back only its column (copying the whole span back would undo the other's writes)."""
    a = np.zeros((N, 2))
    first_ran, second_done = threading.Event(), threading.Event()

    @tg.compile(backend=backend)
    def first(col):
        fill_column[GRID, BLOCK](col, 1.0)
        tg.callback(lambda: (first_ran.set(), second_done.wait(30)), col)
        return None

    @tg.compile(backend=backend)
    def second(col):
        fill_column[GRID, BLOCK](col, 2.0)
        return None

    streams = (None, None) if backend == "sim" else (cuda.stream(), cuda.stream())

    def run_first():
        first(a[:, 0], stream=streams[0])

    def run_second():
        first_ran.wait(30)
        second(a[:, 1], stream=streams[1])
        second_done.set()

    threads = [threading.Thread(target=run_first), threading.Thread(target=run_second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    np.testing.assert_array_equal(a[:, 0], np.ones(N))
    np.testing.assert_array_equal(a[:, 1], np.full(N, 2.0))


@pytest.mark.parametrize("view", ["column", "reversed", "transposed", "every_other"])
def test_written_host_views_match_eager(backend, monkeypatch, view):
    base = np.arange(4 * N, dtype=np.float64).reshape(N, 4)
    take = {"column": lambda b: b[:, 1], "reversed": lambda b: b[::-1, 2],
            "transposed": lambda b: b.T[1], "every_other": lambda b: b.reshape(-1)[::2]}[view]

    def step(v):
        iscale[(v.size + 7) // 8, 8](v, 3.0)
        return None

    # eager Numba cannot take a strided NumPy array: the reference runs on a device copy
    def reference(v):
        d = cuda.to_device(np.ascontiguousarray(v))
        iscale[(v.size + 7) // 8, 8](d, 3.0)
        v[...] = d.copy_to_host()

    for _ in range(2):
        mine, want = base.copy(), base.copy()
        f = tg.compile(step, backend=backend)
        f(take(mine))
        f(take(mine))
        reference(take(want))
        reference(take(want))
        np.testing.assert_array_equal(mine, want)


def test_a_transposed_host_array_written_in_place_matches_eager(backend, monkeypatch):
    @cuda.jit
    def scale_2d(m, a):
        i, j = cuda.grid(2)
        if i < m.shape[0] and j < m.shape[1]:
            m[i, j] = m[i, j] * a + i

    def step(m):
        scale_2d[(1, 1), (4, 8)](m, 2.0)
        return None

    base = np.arange(32, dtype=np.float64).reshape(8, 4)
    matches_eager(step, lambda: (base.copy().T,), backend, monkeypatch=monkeypatch)


# ---------------------------------------------------------------------------
# 6. read-only memory is never written

@cuda.jit(device=True)
def _opaque_store(a, i):
    a[i] = -1.0


_OPAQUE = (_opaque_store,)


@cuda.jit
def store_through_opaque_call(a):
    i = cuda.grid(1)
    if i < a.size:
        _OPAQUE[0](a, i)


def _read_only(kind, tmp_path):
    data = np.arange(N, dtype=np.float64)
    if kind == "flag":
        data.setflags(write=False)
        return data
    if kind == "frombuffer":
        return np.frombuffer(data.tobytes(), np.float64)
    path = tmp_path / "data.bin"
    data.tofile(path)
    return np.memmap(path, np.float64, mode="r", shape=(N,))


@pytest.mark.parametrize("kind", ["flag", "frombuffer", "memmap"])
def test_a_kernel_storing_to_a_read_only_input_is_refused_before_running(backend, kind,
                                                                         tmp_path):
    x = _read_only(kind, tmp_path)
    before = np.array(x)

    def step(x):
        iscale[GRID, BLOCK](x, 2.0)
        return x

    with pytest.raises(tg.TraceError, match="read-only") as e:
        tg.compile(step, backend=backend)(x)
    assert e.value.where.startswith(__file__) and e.value.fix
    np.testing.assert_array_equal(np.asarray(x), before)


@pytest.mark.parametrize("kind", ["flag", "frombuffer", "memmap"])
def test_read_only_inputs_are_read_correctly(backend, kind, tmp_path):
    x = _read_only(kind, tmp_path)

    @tg.compile(backend=backend)
    def step(x):
        out = tg.empty_like(x)
        scale[GRID, BLOCK](x, 2.0, out)
        return out

    np.testing.assert_array_equal(host(step(x)), 2.0 * np.arange(N))
    np.testing.assert_array_equal(host(step(x)), 2.0 * np.arange(N))
    assert not step.latest.program.inputs[0].writes_back


def test_a_store_the_analysis_cannot_see_into_read_only_memory_fails_cleanly(backend,
                                                                             tmp_path):
    x = _read_only("memmap", tmp_path)

    @tg.compile(backend=backend)
    def step(x):
        store_through_opaque_call[GRID, BLOCK](x)
        return None

    with pytest.raises(tg.TracegraphError, match="read-only|readonly|Cannot modify"):
        step(x)
    np.testing.assert_array_equal(np.asarray(x), np.arange(N))


# ---------------------------------------------------------------------------
# 7-8. dtypes a kernel cannot take; shapes that overflow

@pytest.mark.parametrize("dtype", [object, np.longdouble, "V8"])
def test_unsupported_input_dtypes_name_the_argument(backend, dtype):
    x = np.zeros(N, dtype=dtype)

    def step(x):
        iscale[GRID, BLOCK](x, 2.0)
        return x

    with pytest.raises(tg.TraceError, match="argument x is an array of dtype") as e:
        tg.compile(step, backend=backend)(x)
    assert e.value.fix


@pytest.mark.parametrize("shape, match", [((2**62, 4), "bytes"), ((2**40, 2**40), "bytes"),
                                          (2.5, "integers"), ((4, "a"), "integers")])
def test_impossible_shapes_are_errors_at_the_call(backend, shape, match):
    def step(x):
        tg.empty(shape)
        iscale[GRID, BLOCK](x, 2.0)
        return x

    with pytest.raises(tg.TraceError, match=match) as e:
        tg.compile(step, backend=backend)(np.zeros(N))
    assert e.value.where.startswith(__file__)


def test_an_object_dtype_graph_array_is_refused(backend):
    def step(x):
        tg.empty(4, dtype=object)
        return x

    with pytest.raises(tg.TraceError, match="object"):
        tg.compile(step, backend=backend)(np.zeros(N))


# ---------------------------------------------------------------------------
# 9. containers: namedtuples and dataclasses in and out

Pair = collections.namedtuple("Pair", "scaled shifted")


@dataclasses.dataclass
class State:
    x: object
    gain: float


def test_namedtuple_and_dataclass_arguments_and_results(backend):
    @tg.compile(backend=backend)
    def step(state):
        a, b = tg.empty_like(state.x), tg.empty_like(state.x)
        scale[GRID, BLOCK](state.x, state.gain, a)
        scale[GRID, BLOCK](a, 0.5, b)
        return Pair(a, b), State(b, state.gain)

    x = np.arange(N, dtype=np.float64)
    for gain in (2.0, 2.0, 4.0):
        pair, state = step(State(x, gain))
        assert isinstance(pair, Pair) and isinstance(state, State)
        np.testing.assert_array_equal(host(pair.scaled), gain * x)
        np.testing.assert_array_equal(host(pair.shifted), gain * x / 2)
        np.testing.assert_array_equal(host(state.x), gain * x / 2)
        assert state.gain == gain
    assert len(step.compiled) == 2  # the gain is a static field: one graph per value
    with pytest.raises(tg.SignatureError, match=r"state\.gain"):
        step.replay(State(x, 8.0))


# ---------------------------------------------------------------------------
# 10. a compiled function called inside another's trace is inlined

def test_a_compiled_function_inside_another_is_inlined(backend, monkeypatch):
    @tg.compile(backend=backend)
    def inner(x):
        out = cuda.device_array_like(x)
        scale[GRID, BLOCK](x, 3.0, out)
        return out

    @tg.compile(backend=backend)
    def outer(x):
        y = inner(x)
        z = cuda.device_array_like(x)
        scale[GRID, BLOCK](y, 2.0, z)
        return inner.replay(z)

    x = np.arange(N, dtype=np.float64)
    for _ in range(2):
        np.testing.assert_array_equal(host(outer(x)), 18.0 * x)
    assert [op.name for op in outer.latest.program.ops if op.kind == "kernel"] == ["scale"] * 3
    assert not inner.compiled  # nothing of its own was compiled
    np.testing.assert_array_equal(host(inner(np.ones(N))), np.full(N, 3.0))


# ---------------------------------------------------------------------------
# 11. Numba's host API inside a traced function

def test_to_device_of_host_data_copies_it_on_every_replay(backend):
    table = np.arange(N, dtype=np.float64)

    @tg.compile(backend=backend)
    def step(x):
        t = cuda.to_device(table)
        out = cuda.device_array_like(x)
        scale[GRID, BLOCK](t, 2.0, out)
        return out

    x = np.zeros(N)
    np.testing.assert_array_equal(host(step(x)), 2.0 * table)
    table[:] = 10.0  # eager Numba would copy the new values on the next call: so do we
    np.testing.assert_array_equal(host(step(x)), np.full(N, 20.0))
    assert [op.data.role for op in step.latest.program.ops if op.kind == "memcpy"].count(
        "constant") == 1


def test_copy_to_device_into_a_captured_array_is_a_graph_copy(backend):
    target = cuda.to_device(np.zeros(N))
    values = np.arange(N, dtype=np.float64)

    @tg.compile(backend=backend)
    def step(x):
        target.copy_to_device(values)
        out = cuda.device_array_like(x)
        scale[GRID, BLOCK](target, 1.0, out)
        return out

    np.testing.assert_array_equal(host(step(np.zeros(N))), values)
    target.copy_to_device(np.zeros(N))
    np.testing.assert_array_equal(host(step(np.zeros(N))), values)
    np.testing.assert_array_equal(target.copy_to_host(), values)


def test_random_states_made_inside_the_trace_match_eager(backend, monkeypatch):
    from numba.cuda.random import create_xoroshiro128p_states, xoroshiro128p_uniform_float32

    @cuda.jit
    def draw(states, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = xoroshiro128p_uniform_float32(states, i)

    def step(x):
        states = create_xoroshiro128p_states(N, seed=7)
        out = cuda.device_array(N, np.float32)
        draw[GRID, BLOCK](states, out)
        return out

    matches_eager(step, fresh(np.zeros(N)), backend, monkeypatch=monkeypatch)


@pytest.mark.parametrize("call", ["copy_to_host", "reduce", "pinned", "element"])
def test_host_side_numba_calls_that_cannot_be_graphed_are_trace_errors(backend, call):
    captured = cuda.to_device(np.ones(N))
    total = cuda.reduce(lambda a, b: a + b)

    def step(x):
        if call == "copy_to_host":
            captured.copy_to_host()
        elif call == "reduce":
            total(x)
        elif call == "pinned":
            cuda.pinned_array(N)
        else:
            float(captured[0])
        iscale[GRID, BLOCK](x, 2.0)
        return x

    with pytest.raises(tg.TraceError) as e:
        tg.compile(step, backend=backend)(cuda.to_device(np.zeros(N)))
    assert e.value.where.startswith(__file__) and e.value.fix


# ---------------------------------------------------------------------------
# 12. the smaller ones

def test_comparing_a_traced_array_refuses_to_branch(backend):
    def step(x):
        if x == 0:
            iscale[GRID, BLOCK](x, 2.0)
        return x

    with pytest.raises(tg.TraceError, match="Python control flow"):
        tg.compile(step, backend=backend)(np.zeros(N))


def test_a_compiled_method(backend):
    class Model:
        def __init__(self, gain):
            self.gain = gain

        @tg.compile(backend=backend)
        def step(self, x):
            out = tg.empty_like(x)
            scale[GRID, BLOCK](x, self.gain, out)
            return out

    a, b = Model(2.0), Model(3.0)
    x = np.arange(N, dtype=np.float64)
    np.testing.assert_array_equal(host(a.step(x)), 2.0 * x)
    np.testing.assert_array_equal(host(b.step(x)), 3.0 * x)
    np.testing.assert_array_equal(host(a.step.replay(x)), 2.0 * x)
    assert len(Model.step.compiled) == 2


def test_a_raising_callback_is_a_tracegraph_error(backend):
    def boom():
        raise ValueError("from the callback")

    @tg.compile(backend=backend)
    def step(x):
        iscale[GRID, BLOCK](x, 2.0)
        tg.callback(boom, x)
        return x

    with pytest.raises(tg.TracegraphError, match="from the callback"):
        step(np.zeros(N))
        step(np.zeros(N))  # cuda reports a callback's error by the next call at the latest


# ---------------------------------------------------------------------------
# 13. what the GPU backend did differently from sim

def test_replay_with_a_strided_device_view_is_a_signature_error(backend):
    # Not m.T: Numba's DeviceNDArray.T runs a transpose kernel into a new C-contiguous
    # array (same signature), where the simulator's returns a view.
    @tg.compile(backend=backend)
    def step(m):
        out = tg.empty_like(m)
        scale[GRID, BLOCK](m.reshape(-1), 2.0, out.reshape(-1))
        return out

    m = cuda.to_device(np.arange(16.0).reshape(4, 4))
    wide = cuda.to_device(np.arange(32.0).reshape(4, 8))
    step(m)
    assert wide[:, ::2].shape == m.shape
    with pytest.raises(tg.SignatureError, match="strides"):
        step.replay(wide[:, ::2])


@pytest.mark.parametrize("place", ["host", "device"])
def test_zero_size_inputs_replay(backend, place):
    @tg.compile(backend=backend)
    def step(x, y):
        iscale[GRID, BLOCK](y, 2.0)
        return x, y

    for _ in range(3):
        x, y = np.zeros(0), np.arange(N, dtype=np.float64)
        if place == "device":
            x, y = cuda.to_device(x), cuda.to_device(y)
        a, b = step(x, y)
        assert host(a).shape == (0,)
        np.testing.assert_array_equal(host(b), 2.0 * np.arange(N))


@pytest.mark.parametrize("place", ["host", "device"])
def test_several_views_of_one_array_written_and_read_in_one_step(backend, monkeypatch, place):
    def step(a):
        lo, hi, mid = a[:4], a[4:], a[2:6]
        iscale[1, 4](lo, 2.0)
        iscale[1, 4](hi, 3.0)
        out = cuda.device_array(4, np.float64)
        scale[1, 4](mid, 1.0, out)
        # eager Numba takes strided views of device arrays only
        copy[1, 4](out, a[::-2] if place == "device" else a[1:5])
        return out, a[1:7]

    def make():
        a = np.arange(N, dtype=np.float64)
        return (a,) if place == "host" else (cuda.to_device(a),)

    matches_eager(step, make, backend, monkeypatch=monkeypatch)


# ---------------------------------------------------------------------------
# further cases found by trying numba-cuda's own test kernels and other constructs

Point = collections.namedtuple("Point", "x y")


@cuda.jit
def set_from_point(r, p):
    r[0] = p.x
    r[1] = p.y


@cuda.jit
def add_pair(pair, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = pair.x[i] + pair.y[i]


def test_namedtuples_as_kernel_arguments(backend, monkeypatch):
    def step(r, a, b):
        set_from_point[1, 1](r, Point(1, 2))
        out = cuda.device_array_like(a)
        add_pair[1, 8](Point(a, b), out)
        return out

    matches_eager(step, fresh(np.zeros(2, np.int64), np.arange(8.0), np.ones(8)), backend,
                  monkeypatch=monkeypatch)


@cuda.jit
def set_parts(a):
    i = cuda.grid(1)
    if i < a.size:
        a.real[i] = 100 + i
        a.imag[i] = -i


@cuda.jit
def bump_real(values):
    i = cuda.grid(1)
    if i < values.size:
        cuda.atomic.add(values.real, i, 1)


@cuda.jit
def set_flat(a):
    i = cuda.grid(1)
    if i < a.size:
        a.flat[i] = i


@cuda.jit
def set_last_column(a):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[..., 1][i] = 7.0


@cuda.jit(device=True)
def _store_second(*arrays):
    arrays[1][0] = 42.0


@cuda.jit
def store_through_star_device_function(a, b):
    _store_second(a, b)


ROWS = slice(0, 2)


@cuda.jit
def set_rows(a):
    a[ROWS][0] = 5.0


@cuda.jit
def long_alias_chain(a, out, n):
    v0 = a; v1 = a; v2 = a; v3 = a; v4 = a; v5 = a  # noqa: E702
    v6 = a; v7 = a; v8 = a; v9 = a; v10 = a; v11 = a  # noqa: E702
    for _ in range(n):
        v0[0] = 1.0
        v0 = v1; v1 = v2; v2 = v3; v3 = v4; v4 = v5; v5 = v6  # noqa: E702
        v6 = v7; v7 = v8; v8 = v9; v9 = v10; v10 = v11; v11 = out  # noqa: E702


@pytest.mark.parametrize("case", ["real_imag", "atomic_real", "flat", "ellipsis",
                                  "star_device_function", "global_slice", "alias_chain"])
def test_stores_through_views_the_analysis_must_see(backend, monkeypatch, case):
    def step(a, b):
        if case == "real_imag":
            set_parts[1, 8](a)
        elif case == "atomic_real":
            bump_real[1, 8](a)
        elif case == "flat":
            set_flat[1, 8](b)
        elif case == "ellipsis":
            set_last_column[1, 4](b.reshape(4, 2))
        elif case == "star_device_function":
            store_through_star_device_function[1, 1](b, b[4:])
        elif case == "global_slice":
            set_rows[1, 1](b.reshape(4, 2))
        else:
            long_alias_chain[1, 1](b, b[4:], 14)
        return a, b

    matches_eager(step, fresh(np.arange(8) + 1j * np.arange(8), np.zeros(8)), backend,
                  monkeypatch=monkeypatch)


def test_augmented_assignment_on_a_traced_array_is_in_place(backend, monkeypatch):
    def step(x):
        x += 1.0
        iscale[GRID, BLOCK](x, 2.0)
        x *= 3.0
        return None

    @tg.compile(backend=backend)
    def traced(x):
        return step(x)

    x = np.arange(N, dtype=np.float64)
    traced(x)
    np.testing.assert_array_equal(x, (np.arange(N) + 1.0) * 6.0)


def test_numpy_scalars_and_ufuncs_on_traced_arrays(backend):
    @tg.compile(backend=backend)
    def step(x):
        return np.float64(2.0) * x, np.float32(1.0) + x, np.float64(3.5) < x, np.exp(x)

    x = np.arange(N, dtype=np.float64)
    got = [host(r) for r in step(x)]
    want = [2.0 * x, 1.0 + x, 3.5 < x, np.exp(x)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w)


def test_an_empty_slice_of_a_reversed_view(backend):
    @tg.compile(backend=backend)
    def step(x):
        iscale[GRID, BLOCK](x, 2.0)
        iscale[GRID, BLOCK](x[::-1][x.shape[0]:], 3.0)
        return x

    np.testing.assert_array_equal(host(step(np.ones(N))), np.full(N, 2.0))


def test_declared_writes_through_star_args(backend):
    @cuda.jit
    def k(a, *rest):
        i = cuda.grid(1)
        if i < a.size:
            rest[1][i] = a[i] + rest[0][i]

    tg.access(k, reads=("a",), writes=("rest",))

    @tg.compile(backend=backend)
    def step(a, b, c):
        k[GRID, BLOCK](a, b, c)

    a, b, c = np.arange(N, dtype=np.float64), np.ones(N), np.zeros(N)
    step(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    tg.access(k, reads=(0, 1), writes=(2,))  # by position, past the named parameters


def test_size_zero_batches_launch_nothing_and_work(backend):
    @tg.compile(backend=backend)
    def with_ops(x):
        return 2.0 * x + 1.0

    @tg.compile(backend=backend)
    def with_forall(x):
        iscale.forall(x.size)(x, 2.0)
        return x

    for f in (with_ops, with_forall):
        assert host(f(np.ones(4))).tolist() in ([3.0] * 4, [2.0] * 4)
        assert host(f(np.zeros(0))).shape == (0,)


def test_grid_sync_in_a_closure_device_function_is_found_at_trace_time(backend):
    def make():
        @cuda.jit(device=True)
        def barrier():
            cuda.cg.this_grid().sync()

        @cuda.jit
        def k(a):
            a[cuda.grid(1)] = 1
            barrier()
        return k

    k = make()
    assert tg._numba.uses_grid_sync(k)


def test_a_callback_calling_cuda_is_refused_on_every_backend(backend):
    side = np.zeros(N)

    def calls_cuda():
        iscale[GRID, BLOCK](side, 2.0)

    @tg.compile(backend=backend)
    def step(x):
        iscale[GRID, BLOCK](x, 2.0)
        tg.callback(calls_cuda, x)
        return x

    with pytest.raises(tg.TracegraphError, match="CUDA"):
        step(np.zeros(N))
        step(np.zeros(N))


@pytest.mark.parametrize("case", ["extensions", "device_function", "bool_index"])
def test_launches_a_graph_cannot_replay_are_refused(backend, case):
    @cuda.jit
    def with_extension(a):
        a[0] = 3

    class KeepOnDevice:
        def prepare_args(self, ty, val, **kwargs):
            return ty, val

    with_extension.extensions.append(KeepOnDevice())

    def step(x):
        if case == "extensions":
            with_extension[1, 1](x)
        elif case == "device_function":
            _store_second[1, 1](x, x)
        else:
            iscale[GRID, BLOCK](x[True], 2.0)
        return x

    with pytest.raises(tg.TraceError) as e:
        tg.compile(step, backend=backend)(np.zeros(N))
    assert e.value.where.startswith(__file__) and e.value.fix


class Colour(__import__("enum").IntEnum):
    RED = 1
    BLUE = 3


@cuda.jit
def fill_enum(a, c):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = c


def test_enum_kernel_arguments(backend, monkeypatch):
    def step(a):
        fill_enum[GRID, BLOCK](a, Colour.BLUE)
        return a

    matches_eager(step, fresh(np.zeros(N, np.int64)), backend, monkeypatch=monkeypatch)


def test_replay_mismatch_names_read_only_and_captured_overlap(backend):
    def step(x):
        a = cuda.device_array_like(x) if not isinstance(x, np.ndarray) else tg.empty_like(x)
        read_global[GRID, BLOCK](a)
        scale[GRID, BLOCK](x, 2.0, a)
        return a

    f = tg.compile(step, backend=backend)
    f(np.zeros(N))
    ro = np.zeros(N)
    ro.setflags(write=False)
    with pytest.raises(tg.SignatureError, match="argument x: read-only here"):
        f.replay(ro)
    g = tg.compile(step, backend=backend)
    g(cuda.to_device(np.zeros(N)))
    with pytest.raises(tg.SignatureError, match="argument x overlaps the device array"):
        g.replay(GLOBAL)


@pytest.mark.parametrize("place", ["host", "device"])
def test_a_returned_view_of_an_argument_is_a_view_of_the_callers_array(backend, place):
    def step(x):
        increment[1, 16](x)
        return x[2:], x.reshape(2, 4)[:, ::2]

    for _ in range(2):
        x = np.arange(8.0)
        x = cuda.to_device(x) if place == "device" else x
        f = tg.compile(step, backend=backend)
        v, w = f(x)
        f(x)  # eager: the views see the second call's update
        if place == "device":
            v[0:1].copy_to_device(np.array([-7.0]))
        else:
            v[0] = -7.0
        np.testing.assert_array_equal(host(v), [-7.0, 5, 6, 7, 8, 9])
        np.testing.assert_array_equal(host(x)[:4], [2.0, 3, -7, 5])
        np.testing.assert_array_equal(host(w), [[2.0, -7], [6, 8]])
        if place == "host":
            assert np.shares_memory(v, x) and np.shares_memory(w, x)


@pytest.mark.parametrize("place", ["device", "host"])
def test_an_array_returned_twice_is_one_object_twice_and_views_of_a_result_share_it(
        backend, place):
    """As eagerly (`return o, o` hands back one array twice): on both backends; views of
    one result share its memory on both backends, NumPy results too (sim made a copy each,
    and NumPy results were a copy each on both)."""
    @cuda.jit
    def plus_one(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + 1

    @tg.compile(backend=backend)
    def f(x):
        o = tg.empty_like(x)
        plus_one[1, 32](x, o)
        return o, o, o[1:]

    x = np.arange(4.0)
    for call in range(2):
        a, b, tail = f(x if place == "host" else cuda.to_device(x))
        assert a is b, call
        np.testing.assert_array_equal(host(tail), x[1:] + 1)
        if place == "device":
            a.copy_to_device(np.zeros(4))
        else:  # NumPy results over one buffer are views of one array, as in NumPy
            a[:] = 0
        np.testing.assert_array_equal(host(tail), [0.0] * 3)


_REBOUND = None


@cuda.jit
def _add_rebound(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += _REBOUND[i]


def test_a_global_a_kernel_names_rebound_inside_the_traced_function_is_refused(backend):
    """Numba compiles one array into the kernel (on a GPU the first binding, on the
    simulator the last): the graph cannot give each launch its own. Eager on the simulator
    adds A then B; the graph added B twice."""
    a, b = cuda.to_device(np.full(4, 1.0)), cuda.to_device(np.full(4, 100.0))

    def step(out):
        global _REBOUND
        _REBOUND = a
        _add_rebound[1, 4](out)
        _REBOUND = b
        _add_rebound[1, 4](out)

    with pytest.warns(UserWarning), pytest.raises(tg.TraceError, match="bound to another array"):
        tg.compile(step, backend=backend)(cuda.to_device(np.zeros(4)))


def test_a_closure_variable_a_kernel_names_rebound_inside_the_traced_function_is_refused(
        backend):
    a, b = cuda.to_device(np.full(4, 1.0)), cuda.to_device(np.full(4, 100.0))
    g = a

    @cuda.jit
    def add_g(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] += g[i]

    def step(out):
        nonlocal g
        g = a
        add_g[1, 4](out)
        g = b
        add_g[1, 4](out)

    with pytest.raises(tg.TraceError, match="bound to another array") as e:
        tg.compile(step, backend=backend)(cuda.to_device(np.zeros(4)))
    assert "as arguments" in e.value.fix


_HIDDEN = cuda.to_device(np.zeros(N))


@cuda.jit(device=True)
def _get_hidden(i):
    return _HIDDEN[i]


@cuda.jit(device=True)
def _apply(f, i):
    return f(i)


_GETTERS = (_get_hidden,)


@cuda.jit
def _read_hidden_through_a_value(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _apply(_get_hidden, i) * 2


@cuda.jit
def _read_hidden_through_a_tuple(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _GETTERS[0](i) * 2


@pytest.mark.parametrize("reader", [_read_hidden_through_a_value, _read_hidden_through_a_tuple])
def test_a_global_read_by_a_device_function_passed_as_a_value_is_ordered(backend, monkeypatch,
                                                                         reader):
    """The reader reaches _HIDDEN only through a device function it hands to another, or
    holds in a tuple: calls the analysis cannot follow, so all it can reach counts."""
    def step(a):
        out = cuda.device_array_like(a)
        fill[GRID, BLOCK](a, 3.0)  # a is _HIDDEN: written through the argument
        reader[GRID, BLOCK](out)
        return out

    def make():
        _HIDDEN.copy_to_device(np.zeros(N))
        return (_HIDDEN,)
    f = matches_eager(step, make, backend, monkeypatch=monkeypatch)
    if f is not None:
        reads = [op for op in f.trace(_HIDDEN).ops if op.kind == "kernel"][1]
        assert any(a.writes for a in reads.accesses)  # the captured array: read+write


@pytest.mark.parametrize("when", ["rebound before the launch, then back", "after the launch"])
def test_a_global_a_kernel_names_rebound_around_its_launch_is_refused(backend, when):
    """The graph runs the kernel on one array: the name must hold at the end of the trace
    what it held at the launch (a rebinding undone, or made after, changes what runs)."""
    a, b = cuda.to_device(np.full(4, 1.0)), cuda.to_device(np.full(4, 100.0))

    def step(out):
        global _REBOUND
        _REBOUND = a
        if when.startswith("rebound before"):
            _REBOUND = b
            _add_rebound[1, 4](out)
            _REBOUND = a
        else:
            _add_rebound[1, 4](out)
            _REBOUND = b

    with pytest.warns(UserWarning), pytest.raises(tg.TraceError, match="after its launch"):
        tg.compile(step, backend=backend)(cuda.to_device(np.zeros(4)))


def test_a_global_rebound_between_calls_is_refused_on_sim():
    """The simulator reads a kernel's globals when it runs: the graph, ordered for the
    traced array, would race with the new one. (On a GPU the compiled kernel keeps the
    traced array, as eager Numba's does, so cuda replays as eager; the CPU stand-in of
    cuda reads globals as the simulator does, and does not model that.)"""
    global _REBOUND
    first = _REBOUND = cuda.to_device(np.full(4, 1.0))
    f = tg.compile(lambda out: _add_rebound[1, 4](out), backend="sim")
    f(cuda.to_device(np.zeros(4)))
    try:
        _REBOUND = cuda.to_device(np.full(4, 100.0))
        with pytest.raises(tg.TracegraphError, match="bound to another array") as e:
            f(cuda.to_device(np.zeros(4)))
        assert "f.clear()" in e.value.fix
        f.clear()
        out = cuda.to_device(np.zeros(4))
        f(out)
        np.testing.assert_array_equal(out.copy_to_host(), 100.0)
    finally:
        _REBOUND = first
