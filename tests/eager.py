"""Run a function both ways: eagerly (Numba launches each kernel) and through tracegraph,
on fresh copies of the same inputs, and compare everything the caller can see: the
results and every input array afterwards. Bodies allocate with cuda.device_array_like /
cuda.device_array, which inside a traced function are graph-owned arrays."""
from __future__ import annotations

import copy
from typing import Any, Callable

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from tracegraph import pytree

SEEDS = (0, 1, 2, 3)  # random valid orders the simulator also runs in


def host(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "copy_to_host"):
        return x.copy_to_host()
    if hasattr(x, "__cuda_array_interface__"):
        return cuda.as_cuda_array(x).copy_to_host()
    return x


def snapshot(tree: Any) -> list[Any]:
    leaves, _, _ = pytree.flatten(tree)
    return [np.array(host(v), copy=True) if hasattr(v, "shape") else v for v in leaves]


def assert_same(got: list[Any], want: list[Any], what: str) -> None:
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, np.ndarray):
            assert g.dtype == w.dtype and g.shape == w.shape, (what, k, g, w)
            assert g.tobytes() == w.tobytes(), f"{what} [{k}]: got {g!r}, eager {w!r}"
        else:
            assert g == w, (what, k, g, w)


def to_device(tree: Any) -> Any:
    """The same arguments with every NumPy array as a device array."""
    leaves, _, spec = pytree.flatten(tree)
    return pytree.unflatten(spec, [cuda.to_device(v) if isinstance(v, np.ndarray) else v
                                   for v in leaves])


def matches_eager(fn: Callable, make_args: Callable[[], tuple], backend: str, *,
                  calls: int = 2, seeds: tuple = SEEDS, monkeypatch: Any = None) -> tg.CompiledFunction:
    """Compile `fn` on `backend` and check `calls` calls against eager Numba on fresh
    arguments from `make_args()`; on sim also in random valid orders (`seeds`, which needs
    `monkeypatch`). Returns the compiled function of the default order."""
    want_args = make_args()
    try:
        want = [snapshot(fn(*want_args)) for _ in range(calls)]
    except Exception:  # what eager Numba on a GPU refuses to compile, we refuse too
        if tg._numba.SIMULATOR:
            raise
        if backend == "sim":  # Numba's simulator runs Python: it types nothing to refuse
            pytest.skip("eager Numba on the GPU refuses this kernel; the simulator cannot")
        with pytest.raises(tg.TracegraphError):
            tg.compile(fn, backend=backend)(*make_args())
        return None
    want_after = snapshot(want_args)
    orders = [None] + (list(seeds) if backend == "sim" and monkeypatch is not None else [])
    first = None
    for seed in orders:
        if monkeypatch is not None:
            if seed is None:
                monkeypatch.delenv("TRACEGRAPH_SIM_ORDER", raising=False)
            else:
                monkeypatch.setenv("TRACEGRAPH_SIM_ORDER", str(seed))
        f = tg.compile(fn, backend=backend)
        args = make_args()
        for k in range(calls):
            assert_same(snapshot(f(*args)), want[k], f"result of call {k} (order {seed})")
        assert_same(snapshot(args), want_after, f"arguments after the calls (order {seed})")
        first = first or f
    return first


def fresh(*arrays: Any) -> Callable[[], tuple]:
    """make_args for these arrays: deep copies each time."""
    return lambda: tuple(copy.deepcopy(a) if isinstance(a, np.ndarray) else a for a in arrays)


def with_state_change(backend: str, make: Callable, fn_of: Callable, change: Callable,
                      calls: int = 3) -> Any:
    """Run fn_of(state) compiled and eagerly, each on its own state from make() and its own
    array of ones, for `calls` calls; apply change(state) to both before call 1; the
    arrays must end the same. Returns the compiled function."""
    mine, theirs = make(), make()
    f = tg.compile(fn_of(mine), backend=backend)
    xt, xe = cuda.to_device(np.ones(4)), cuda.to_device(np.ones(4))
    for k in range(calls):
        if k == 1:
            change(mine)
            change(theirs)
        f(xt)
        fn_of(theirs)(xe)
    np.testing.assert_allclose(xt.copy_to_host(), xe.copy_to_host())
    return f


def against_eager(step: Callable, backend: str, changes: list, calls: int = 2) -> Any:
    """Call compiled and eager `step` (one device array of N ones each) `calls` times
    first and after each (tag, change): a callable, or a context manager entered for its
    calls; compare what they leave. Returns the compiled function."""
    f = tg.compile(step, backend=backend)
    n = 8

    def both(tag: str) -> None:
        for _ in range(calls):
            x, xe = cuda.to_device(np.ones(n)), cuda.to_device(np.ones(n))
            f(x)
            step(xe)
            np.testing.assert_allclose(x.copy_to_host(), xe.copy_to_host(), err_msg=tag)
    both("first")
    for tag, change in changes:
        if hasattr(change, "__enter__"):
            with change:
                both(tag)
        else:
            change()
            both(tag)
    return f
