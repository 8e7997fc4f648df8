"""Backends execute a Plan: `sim` (CPU reference) and `cuda` (explicit CUDA graph)."""
from __future__ import annotations

from typing import Any, Protocol

from .. import _numba, config
from ..errors import TracegraphError

BACKENDS = ("auto", "cuda", "sim")
MISS = object()  # an executable's replay_same: not that case, take the full path


class Executable(Protocol):
    """What every backend builds from a Plan: `run` replays it for one call's flattened
    arguments (`leaves`, and `infos` describing the arrays among them) and returns the
    results; `plan` is what it runs. A backend may also offer `run(..., arm=True)` and
    `replay_same(args, stream)`: the next call with the very same argument objects
    replays without describing them again (MISS where that does not apply)."""
    backend: str
    plan: Any

    def run(self, leaves: list[Any], infos: list[Any], stream: Any = None) -> Any: ...


def fast_entry(function: Any, slow: Any) -> Any:
    """`slow` (a compiled function's call or replay) behind the C helper's entry, which
    replays a call of the very objects of the last armed one without Python frames
    (backends/cuda/_graphlaunch.c); `slow` itself where the helper is not built or not
    wanted (TRACEGRAPH_C_LAUNCH=0)."""
    if not config.c_launch():
        return slow
    try:
        from .cuda import _graphlaunch  # type: ignore[attr-defined, unused-ignore]
        from .cuda.executable import _thread
    except ImportError:
        return slow
    entry = getattr(_graphlaunch, "Entry", None)
    if entry is None:
        return slow
    return entry(function, slow, _numba.hooks.TRACING, _thread)


def argument_view(leaf: Any, out: Any) -> Any:
    """An INPUT_VIEW result: the view of the caller's array `leaf` that it stands for (its
    element 0 `out.value` bytes from leaf's), sharing the caller's memory as in eager."""
    from ..signature import describe
    info = describe(leaf)
    assert info is not None, "an input view's argument is an array"
    v = out.view
    return _numba.view_at(leaf, info.ptr + out.value, v.shape, v.strides, v.dtype,
                          info.readonly)


def gpu_usable() -> bool:
    """A GPU that Numba can use, and Numba not in simulator mode."""
    if _numba.SIMULATOR:
        return False
    try:
        from numba import cuda
        return bool(cuda.is_available())
    except Exception:
        return False


def resolve(name: str) -> str:
    """The backend a name stands for: TRACEGRAPH_BACKEND wins over "auto"."""
    if name == "auto":
        name = config.backend_override() or "auto"
    if name == "auto":
        return "cuda" if gpu_usable() else "sim"  # the fake platform is only ever asked for
    if name not in BACKENDS:
        raise TracegraphError(f"unknown backend {name!r}", fix=f"use one of {BACKENDS}")
    if name == "cuda" and not gpu_usable() and config.cuda_platform() != "fake":
        why = ("Numba runs in simulator mode (NUMBA_ENABLE_CUDASIM=1)" if _numba.SIMULATOR
               else "no CUDA GPU is usable on this machine")
        raise TracegraphError(f"backend 'cuda' was asked for but {why}",
                              fix="use backend='sim' (or 'auto'), or run on a machine with an "
                                  "NVIDIA GPU and driver")
    return name


def device_for(backend: str, device: int | None) -> int | None:
    """The GPU a cuda executable runs on: `device`, or the current one for None (no
    device on sim)."""
    if backend != "cuda":
        return None
    from .cuda.platform import platform
    return platform(device).device_id


def new_arena(backend: str) -> Any:
    """The memory one function's graphs share for their planned intermediates (None: each
    executable has its own, as on sim)."""
    if backend == "cuda":
        from .cuda.memory import Arena
        return Arena()
    return None


def build(plan: Any, backend: str, infos: list | None = None, take_over: Any = None,
          arena: Any = None, device: int | None = None) -> Any:
    """An executable for `plan`: `.run(leaves, infos, stream)` returns the results.

    `infos` describe the arguments of the call that compiled it; the cuda backend builds
    its nodes on their addresses, so that call patches nothing. `take_over`: an executable
    of the same graph topology no longer needed, whose instantiated graph the cuda backend
    updates in place instead of instantiating a new one (`.updated` says if it did).
    `device`: the GPU it runs on (None: the current one).
    """
    if backend == "sim":
        from . import sim
        return sim.build(plan, config.sim_order_seed())
    from . import cuda
    return cuda.build(plan, infos, take_over, arena, device)
