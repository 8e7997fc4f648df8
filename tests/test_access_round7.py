"""A seventh hostile round (each case failed before its fix): silent missed writes in Numba's
real (GPU) mode.
Each kernel compiles with numba.cuda.compile_ptx (cc 8.0, no GPU: the device query of
overload compilation is stubbed); the analysis runs in a process without
NUMBA_ENABLE_CUDASIM (both constructs are GPU-only: the simulator never runs a lowering or
an @overload_method)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

MAIN = str(Path(__file__).resolve().parent.parent)

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
