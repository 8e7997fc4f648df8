"""Kernels whose accesses the analysis must get right with Numba in real (GPU) mode, where
`cuda.threadIdx`, `cuda.grid` and `cuda.atomic` are stubs (under the simulator they are
missing from the module). Imported by tests/test_access_real_mode.py in a process of its
own without NUMBA_ENABLE_CUDASIM; it needs no GPU: the analysis reads Python code only."""
import math

from numba import cuda


@cuda.jit(device=True)
def global_id():
    return cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x


@cuda.jit(device=True)
def row_sum(row):
    s = 0.0
    for j in range(row.shape[0]):
        s += row[j]
    return s


@cuda.jit
def exp_by_global_id(a, out):
    i = global_id()
    if i < out.size:
        out[i] = math.exp(a[i])


@cuda.jit
def sum_rows_by_global_id(m, out):
    i = global_id()
    if i < out.size:
        out[i] = row_sum(m[i])


@cuda.jit
def atomic_total(a, out):
    i = cuda.grid(1)
    if i < a.size:
        cuda.atomic.add(out, 0, a[i])


@cuda.jit
def grid_2d(a, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = abs(a[i, j]) + cuda.blockDim.y


EXPECTED = {  # kernel -> (argument ranks, modes)
    "exp_by_global_id": ((1, 1), ("r", "w")),
    "sum_rows_by_global_id": ((2, 1), ("r", "w")),
    "atomic_total": ((1, 1), ("r", "rw")),
    "grid_2d": ((2, 2), ("r", "w")),
}


def sweep() -> dict[str, tuple[str, ...]]:
    """The analysis of every kernel of tracegraph's ops, examples and benchmarks (all
    arguments taken as 1-d and as 2-d arrays): in real and in simulator mode it must agree."""
    import importlib
    import os
    import pkgutil
    import sys

    import tracegraph.ops as ops
    from tracegraph._numba import infer_kernel_access, is_device_function, is_kernel
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [root, os.path.join(root, "examples")]
    names = [f"tracegraph.ops.{m.name}" for m in pkgutil.iter_modules(ops.__path__)]
    names += [f"benchmarks.{n}" for n in ("w1_chain", "w2_forkjoin", "w3_mlp", "w4_cartpole",
                                          "w6_numpy", "w7_overhead")]
    names += sorted(f[:-3] for f in os.listdir(os.path.join(root, "examples"))
                    if f.endswith(".py"))
    found = {}
    for module_name in names:
        module = importlib.import_module(module_name)
        for name, value in sorted(vars(module).items()):
            if is_kernel(value) and not is_device_function(value):
                n = value.py_func.__code__.co_argcount
                for rank in (1, 2):
                    found[f"{module_name}.{name}/{rank}"] = infer_kernel_access(
                        value, (rank,) * n).params
    return found


def main() -> None:
    import json
    import sys

    from tracegraph._numba import SIMULATOR, infer_kernel_access
    assert not SIMULATOR
    if sys.argv[1:] == ["--sweep"]:
        print(json.dumps(sweep()))
        return
    for name, (ranks, want) in EXPECTED.items():
        got = infer_kernel_access(globals()[name], ranks).params
        print(name, got, "ok" if got == want else f"WANT {want}")


if __name__ == "__main__":
    main()
