"""The access analysis through Numba's extension points: a store made by an @overload
implementation, an @overload_method (on arrays and on records), a function given typing
and lowering (type_callable + lower_builtin), and cuda.stcs is recorded as a write.
The real-mode cases compile with numba.cuda.compile_ptx (cc 8.0, no GPU: the device query
of overload compilation is stubbed) in a process without NUMBA_ENABLE_CUDASIM (the
simulator never runs a lowering or an @overload_method)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import networkx as nx
import numpy as np
from access_checks import writes
from numba import cuda
from numba.cuda import types as _cuda_types
from numba.cuda.extending import overload_method
from numba.extending import overload
from small_kernels import copy

import tracegraph as tg

MAIN = str(Path(__file__).resolve().parents[2])  # the repository: tracegraph importable

_PRELUDE = """
import json, sys
from types import SimpleNamespace as _NS
import numba.cuda.dispatcher as _d
_d.get_current_device = lambda: _NS(compute_capability=(8, 0))
import numpy as np
from numba import cuda, types, from_dtype
from tracegraph._numba import infer_kernel_access
"""


def _real_mode(tmp_path: Path, body: str) -> dict:
    script = tmp_path / "probe.py"
    script.write_text(_PRELUDE + textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.pathsep.join([MAIN, str(tmp_path), env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_type_callable_lower_builtin_store_is_recorded(tmp_path):
    """A function given typing and lowering (type_callable + lower_builtin) that stores to
    its array argument: its empty Python stub was walked and the store lost."""
    found = _real_mode(tmp_path, """
        from numba.cuda.extending import type_callable, lower_builtin
        from numba.cuda import cgutils

        def store_at(arr, i, v):
            pass  # the lowering below is what runs in a kernel

        @type_callable(store_at)
        def _type_store_at(context):
            def typer(arr, i, v):
                if isinstance(arr, types.Array) and isinstance(i, types.Integer):
                    return types.none
            return typer

        @lower_builtin(store_at, types.Array, types.Integer, types.Any)
        def _lower_store_at(context, builder, sig, args):
            aryty, _, valty = sig.args
            ary, idx, val = args
            ary = context.make_array(aryty)(context, builder, ary)
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [idx])
            context.pack_value(builder, aryty.dtype,
                               context.cast(builder, val, valty, aryty.dtype), ptr)
            return context.get_dummy_value()

        @cuda.jit
        def k(a, out):
            i = cuda.grid(1)
            if i < out.size:
                store_at(out, i, a[i])

        cuda.compile_ptx(k.py_func, (types.float64[:], types.float64[:]), cc=(8, 0))
        print(json.dumps(list(infer_kernel_access(k, (1, 1)).params)))
    """)
    assert "w" in found[1], found  # found: ['r', '']


def test_overload_method_on_record_element_store_is_recorded(tmp_path):
    """x[i].bump(), an @overload_method on records storing a field: the record array was
    recorded as read only."""
    found = _real_mode(tmp_path, """
        from numba.cuda.extending import overload_method
        REC = np.dtype([("v", np.float64), ("w", np.float64)])

        @overload_method(types.Record, "bump")
        def _ol_bump(rec):
            def impl(rec):
                rec.v += 1.0
            return impl

        @cuda.jit
        def k(x):
            i = cuda.grid(1)
            if i < x.size:
                x[i].bump()

        cuda.compile_ptx(k.py_func, (from_dtype(REC)[:],), cc=(8, 0))
        print(json.dumps(list(infer_kernel_access(k, (1,), frozenset({0})).params)))
    """)
    assert "w" in found[0], found  # found: ['r']


N = 8


def _mode_of(prog, kernel, buffer_pred):
    op = next(op for op in prog.ops if op.name == kernel.py_func.__name__)
    return "".join(("r" if a.reads else "") + ("w" if a.writes else "")
                   for a in op.accesses if buffer_pred(prog.buffers[a.buffer]))


MARKS = cuda.to_device(np.zeros(N))


def mark(i):
    """Python stub; the CUDA implementation is the overload below."""
    raise NotImplementedError("only in CUDA kernels")


@overload(mark, target="cuda")
def _mark_cuda(i):
    def impl(i):
        MARKS[i] = 1.0
    return impl


@cuda.jit
def marks_through_an_overload(out):
    i = cuda.grid(1)
    if i < out.size:
        mark(i)


def test_overload_implementation_store_to_a_captured_array_is_recorded(backend):
    """An @overload(target='cuda') implementation that stores to a captured global."""
    def step(out):
        marks_through_an_overload[1, N](out)
        copy[1, N](MARKS, out)
        return out

    prog = tg.compile(step, backend=backend).trace(cuda.to_device(np.zeros(N)))
    assert "w" in _mode_of(prog, marks_through_an_overload,
                           lambda b: b.external is MARKS), \
        "the overload's store to MARKS is not recorded (the stub was analysed instead)"


def _modes(prog, kernel_name, pred=lambda _: True):
    return ["".join(("r" if a.reads else "", "w" if a.writes else ""))
            for op in prog.ops if op.name == kernel_name
            for a in op.accesses if pred(prog.buffers[a.buffer])]


SEEN = cuda.to_device(np.zeros(N))


@overload_method(_cuda_types.Array, "mark_seen")
def _array_mark_seen(arr, i):
    def impl(arr, i):
        SEEN[i] = arr[i]
    return impl


@cuda.jit
def marks_through_an_overload_method(x):
    i = cuda.grid(1)
    if i < x.size:
        x.mark_seen(i)


def test_overload_method_store_to_a_captured_array_is_recorded():
    """x.mark_seen(i), an @overload_method whose implementation stores to global SEEN."""
    def step(x, out):
        marks_through_an_overload_method[1, N](x)
        copy[1, N](SEEN, out)

    prog = tg.compile(step, backend="sim").trace(cuda.to_device(np.ones(N)),
                                                 cuda.to_device(np.zeros(N)))
    assert "w" in "".join(_modes(prog, "marks_through_an_overload_method",
                                 lambda b: b.external is SEEN)), \
        "the overload_method implementation's store to SEEN is not recorded"


@cuda.jit
def store_cache_hinted(x, out):
    i = cuda.grid(1)
    if i < out.size:
        cuda.stcs(out, i, x[i])


def test_cuda_stcs_store_is_recorded():
    """cuda.stcs(out, i, v) stores into out: recorded as a read only."""
    def step(x, out, y):
        store_cache_hinted[1, N](x, out)
        copy[1, N](out, y)

    args = [cuda.to_device(np.zeros(N)) for _ in range(3)]
    prog = tg.compile(step, backend="sim").trace(*args)
    assert writes(prog, 0, 1), "cuda.stcs's store into out is not recorded"
    assert nx.has_path(prog.graph, 0, 1)
