"""The Python-state contract's cost (tracegraph/contract/): a model of L layers, each an
object holding a scalar and a kernel, stepped by a compiled method that walks
`self.layers`. Measures, for L = 1 and L = 100:

- the first call's compile (trace, passes, lowering, graph build: `warmup`), with the
  checks and with them disabled (an empty contract): the checks' share of compiling;
- the host time of a call with unchanged state and the very same arguments (the direct
  replay, checks included), and of a call with new argument objects (the full Python
  path: signature, checks, cache, replay); on the CPU stand-in, whose launches simulate
  the kernels, the checks' part of each alone.

Targets (the contract's issue): first call within 1.2x of the unchecked one; a replay at
L = 100 within 1.5x of L = 1.

    python benchmarks/python_state.py [out.json]

Runs on a GPU (cuda backend) or, without one, on the simulator with the cuda backend's
CPU stand-in (NUMBA_ENABLE_CUDASIM=1 TRACEGRAPH_CUDA_PLATFORM=fake): the CPU figures
time tracegraph's host work only.
"""
from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time

if "NUMBA_ENABLE_CUDASIM" not in os.environ:
    try:
        from cuda.bindings import driver
        if driver.cuInit(0)[0] != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError
    except Exception:  # no GPU: the CPU stand-in
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    os.environ.setdefault("TRACEGRAPH_CUDA_PLATFORM", "fake")

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

import tracegraph as tg  # noqa: E402
from tracegraph.contract import Contract, holds  # noqa: E402

N = 32


@cuda.jit
def axpb(x, a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + 1.0


class Layer:
    def __init__(self, scale: float):
        self.kernel = axpb
        self.scale = scale


def make_model(layers: int, checked: bool):
    class Model:
        def __init__(self):
            self.layers = [Layer(1.0 + i / layers) for i in range(layers)]

        @tg.compile(backend="cuda")
        def step(self, x, out):
            for layer in self.layers:
                layer.kernel[1, N](x, layer.scale, out)

    model = Model()
    if not checked:
        Model.step._contract = Contract(lambda: None, None, "unchecked")
    return model


def _sync() -> None:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        cuda.synchronize()


def first_call_ms(layers: int, repeats: int) -> tuple[float, float]:
    """Medians of the first call's compile with the checks and without, alternated (so
    neither pays the process's first compiles alone)."""
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeats):
        for checked in (True, False):
            model = make_model(layers, checked)
            x, out = cuda.to_device(np.ones(N)), cuda.device_array(N)
            _sync()
            t0 = time.perf_counter()
            model.step.warmup(x, out)
            _sync()
            times[checked].append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times[True]), statistics.median(times[False])


def call_us(layers: int, same_objects: bool) -> float | None:
    """Host time of a call (on the CPU stand-in, whose launch simulates the kernels: of
    the checks alone, the direct path's or the full path's)."""
    model = make_model(layers, True)
    xs = [cuda.to_device(np.ones(N)) for _ in range(2)]
    out = cuda.device_array(N)
    simulated = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    for i in range(4):
        model.step(xs[0 if same_objects else i % 2], out)
    _sync()
    contract = model.step._contract
    checks = contract.fast_checks((model, xs[0], out))
    calls, samples = 2000, []
    gc.disable()
    try:
        for _ in range(15):
            spent = 0.0
            for i in range(calls if simulated else calls // 10):
                x = xs[0 if same_objects else i % 2]
                if not simulated:  # (host time: the GPU idle before each call)
                    _sync()
                    t0 = time.perf_counter()
                    model.step(x, out)
                    spent += time.perf_counter() - t0
                    continue
                t0 = time.perf_counter()
                if same_objects:
                    holds(checks, (model, x, out))
                else:
                    contract.state((model, x, out), {}, [model, x, out])
                spent += time.perf_counter() - t0
            samples.append(spent * 1e6 / (calls if simulated else calls // 10))
            _sync()
    finally:
        gc.enable()
    return statistics.median(samples)


def main(argv: list[str]) -> None:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        # the simulator's device arrays as of fixed metadata, as Numba's are on a GPU: a
        # call of the very same objects takes the direct path (as tests/conftest.py does)
        from tracegraph.signature import arguments
        arguments._FIXED.add(type(cuda.device_array(1)))
    on = "cpu stand-in" if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else \
        cuda.get_current_device().name.decode() if hasattr(
            cuda.get_current_device().name, "decode") else str(cuda.get_current_device().name)
    repeats = 9
    result = {"device": on, "layers": {}}
    for layers in (1, 100):
        first_call_ms(layers, 1)  # (the process's first compiles of this size)
        checked, unchecked = first_call_ms(layers, repeats)
        result["layers"][layers] = {
            "first_call_ms": checked, "first_call_unchecked_ms": unchecked,
            "first_call_ratio": checked / unchecked,
            "replay_same_objects_us": call_us(layers, True),
            "replay_new_objects_us": call_us(layers, False),
        }
    one, hundred = result["layers"][1], result["layers"][100]
    result["replay_ratio_100_to_1"] = hundred["replay_same_objects_us"] / \
        one["replay_same_objects_us"]
    print(f"python_state on {on}")
    for layers, r in result["layers"].items():
        print(f"  L={layers:3d}: first call {r['first_call_ms']:.2f} ms (unchecked "
              f"{r['first_call_unchecked_ms']:.2f}, {r['first_call_ratio']:.2f}x); call "
              f"same objects {r['replay_same_objects_us']:.2f} us, new objects "
              f"{r['replay_new_objects_us'] or float('nan'):.2f} us")
    print(f"  replay, L=100 / L=1: {result['replay_ratio_100_to_1']:.2f}x")
    if len(argv) > 1:
        with open(argv[1], "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv)
