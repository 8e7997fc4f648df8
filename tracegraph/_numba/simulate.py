"""Running any kernel on Numba's CPU simulator (the sim backend), also where Numba is
not in simulator mode: the kernel's function is re-bound to a copy of its globals (and
closure) in which the device functions it calls are simulator kernels too."""
from __future__ import annotations

import functools
import sys
import threading
import time
import types as pytypes
from collections.abc import Callable
from typing import Any

import numpy as np

from .kernels import SIMULATOR
from .reduction import stand_in
from .simclone import clone_scopes, follow_rebound_names, rebuilt, simulated
from .simshared import shared_array

_sim_lock = threading.RLock()


def simulator_lock() -> threading.RLock:
    """The simulator runs one kernel at a time in a process; hold this around each one."""
    return _sim_lock


def simulator_kernel(kernel: Any) -> Any:
    """A kernel the CPU simulator can run, for any kernel (simulated or compiled).

    Under NUMBA_ENABLE_CUDASIM the kernel already is one. Otherwise its Python function
    is re-bound to a copy of its globals in which the device functions it calls are
    simulator kernels too, so the user's modules are never modified.
    """
    found = stand_in(kernel)  # one of Numba's reduction kernels (reduction.py)
    if found is not None:
        return found
    if SIMULATOR:
        return kernel
    with _sim_lock:
        return simulated(kernel)


def simulator_array(host: np.ndarray) -> Any:
    """Wrap a NumPy view so a simulator kernel works on its memory in place (no copy)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    return FakeCUDAArray(host)


def _swap_captured(captured: dict[int, Any]) -> list[tuple[Any, Any, Any]]:
    """Point clones' globals and closure cells that hold a captured device array (or a
    tuple of them) at its simulator stand-in; returns what to put back."""
    def swapped(value: Any) -> Any:
        if id(value) in captured:
            return captured[id(value)]
        if isinstance(value, tuple) and any(id(v) in captured for v in value):
            return rebuilt(value, [captured.get(id(v), v) for v in value])
        if isinstance(value, pytypes.ModuleType):  # kernels may name `module.ARRAY`
            attrs = {k: captured[id(v)] for k, v in vars(value).items() if id(v) in captured}
            if attrs:
                proxy = pytypes.ModuleType(value.__name__)
                proxy.__dict__.update(vars(value))
                proxy.__dict__.update(attrs)
                return proxy
        return value

    undo = []
    for namespace, cells in clone_scopes:
        for name, value in list(namespace.items()):
            new = swapped(value)
            if new is not value:
                undo.append((namespace, name, value))
                namespace[name] = new
        for cell in cells:
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            new = swapped(value)
            if new is not value:
                undo.append((cell, None, value))
                cell.cell_contents = new
    return undo


def run_simulated(kernel: Any, griddim: tuple, blockdim: tuple, sharedmem: int,
                  args: list, captured: dict[int, Any] | None = None,
                  cooperative: bool = False) -> None:
    """Run one launch on the CPU simulator; `captured` maps id() of device arrays the
    kernels name as globals to the simulator arrays they stand for in this run.

    A `cooperative` launch runs all its blocks at once, so `cuda.cg.this_grid().sync()`
    waits for every thread of the grid (Numba's simulator runs blocks one after another
    and only supports a grid sync in a one-block grid). A grid sync in a launch that is
    not cooperative raises, as the device would fail it."""
    fake = simulator_kernel(kernel)
    with _sim_lock:
        if not SIMULATOR:
            follow_rebound_names()
        undo = _swap_captured(captured) if captured else []
        # The simulator runs a Python thread per CUDA thread and polls them at every
        # syncthreads(); a short switch interval makes shared-memory kernels ~20x faster.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-4)
        from numba.cuda.simulator import kernel as simkernel
        manager = simkernel.BlockManager
        simkernel.BlockManager = _grid_manager(manager, cooperative)
        try:
            fake[griddim, blockdim, 0, sharedmem](*args)
        finally:
            simkernel.BlockManager = manager
            sys.setswitchinterval(interval)
            for where, name, value in undo:
                if name is None:
                    where.cell_contents = value
                else:
                    where[name] = value


class GridSyncError(RuntimeError):
    """A kernel synchronized the grid in a launch that was not cooperative."""


@functools.cache  # classes made once: a class made per launch costs memory for good
def _grid_manager(block_manager: type, cooperative: bool) -> type:
    """A stand-in for the simulator's BlockManager for one launch. The simulator makes
    one per block and runs them in order; a cooperative launch's first one runs every
    block concurrently instead (and the rest do nothing)."""
    from numba.cuda.simulator.kernel import BlockThread, _get_kernel_context
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    class _Thread(BlockThread):
        grid_blocked = False
        block_state: np.ndarray  # this block's votes (Numba's is one per manager)

        def syncthreads_count(self, value: Any) -> int:
            return int(np.count_nonzero(self._vote(value)))

        def syncthreads_and(self, value: Any) -> int:
            return 1 if np.all(self._vote(value)) else 0

        def syncthreads_or(self, value: Any) -> int:
            return 1 if np.any(self._vote(value)) else 0

        def _vote(self, value: Any) -> np.ndarray:
            self.block_state[tuple(self.threadIdx)] = value
            self.syncthreads()
            votes = self.block_state.copy()
            self.syncthreads()
            return votes

        def grid_sync(self) -> None:
            if self.abort:
                raise RuntimeError("abort flag set on grid sync")
            self.grid_blocked = True
            self.syncthreads_blocked = True
            self.syncthreads_event.wait()
            self.syncthreads_event.clear()
            if self.abort:
                raise RuntimeError("abort flag set on grid sync clear")

    class _Grid:
        def __init__(self, several_blocks: bool) -> None:
            self._several = several_blocks

        def sync(self) -> None:
            thread = threading.current_thread()
            if self._several and not cooperative:
                raise GridSyncError(
                    "cuda.cg.this_grid().sync() in a launch of several blocks that is "
                    "not cooperative (the device refuses it)")
            if isinstance(thread, _Thread):
                thread.grid_sync()
            else:
                thread.syncthreads()  # type: ignore[attr-defined]

    class _Cg:
        def __init__(self, several_blocks: bool) -> None:
            self._grid = _Grid(several_blocks)

        def this_grid(self) -> _Grid:
            return self._grid

    class _BlockShared(FakeCUDAShared):
        """One block's shared memory, allocated atomically (see `shared_array`)."""
        array = shared_array

    class _PerBlockShared:
        """cuda.shared for blocks that may run at once: each block its own allocations.
        `array` is the block's own FakeCUDAShared.array, so it still keys them by the
        caller's line."""
        def __init__(self, dynshared_size: int) -> None:
            self.size = dynshared_size

        @property
        def array(self) -> Callable:
            thread = threading.current_thread()
            return thread.shared.array  # type: ignore[attr-defined]

    class _Manager(block_manager):
        """Runs the blocks of one grid point (all of them for a cooperative launch) and,
        unlike Numba's, never returns while one of their threads still runs: a thread left
        running after a kernel raised would keep the kernel's module swapped into the
        module's globals, and the next kernel of that module would run with the old
        launch's gridDim, blockDim and shared memory."""

        def run(self, grid_point: tuple, *args: Any) -> None:
            module = _get_kernel_context()
            blocks = int(np.prod(self._grid_dim))
            if not isinstance(module._shared, _PerBlockShared):
                module._cg = _Cg(blocks > 1)
                module._shared = _PerBlockShared(module._shared._dynshared_size)
            if cooperative and blocks > 1:
                if any(grid_point):
                    return None  # the first block's manager ran the whole grid
                points = list(np.ndindex(*self._grid_dim))
            else:
                points = [grid_point]
            self._run_blocks(module, args, points)
            return None

        def _run_blocks(self, module: Any, args: tuple, points: list) -> None:
            threads = []
            for block_point in points:
                shared = _BlockShared(module._shared.size)
                votes = np.zeros(self._block_dim, dtype=np.bool_)
                for thread_point in np.ndindex(*self._block_dim):
                    t = _Thread(lambda: self._f(*args), self, block_point, thread_point,
                                self._debug)
                    t.shared, t.block_state = shared, votes
                    threads.append(t)
            for t in threads:
                t.start()
            live = list(threads)
            while live:
                for t in live:
                    if t.exception:
                        _abort(threads)
                        raise t.exception[0].with_traceback(t.exception[1])
                live = [t for t in live if t.is_alive()]
                self._release(live)
            for t in threads:
                if t.exception:
                    raise t.exception[0].with_traceback(t.exception[1])

        @staticmethod
        def _release(live: list) -> None:
            """Let a block through its syncthreads when all its live threads wait there,
            and the grid through a grid sync when every live thread waits there."""
            if live and all(t.grid_blocked for t in live):
                for t in live:
                    t.grid_blocked = t.syncthreads_blocked = False
                    t.syncthreads_event.set()
                return
            blocks: dict[tuple, list] = {}
            for t in live:
                blocks.setdefault(tuple(t.blockIdx), []).append(t)
            for members in blocks.values():
                if all(t.syncthreads_blocked and not t.grid_blocked for t in members):
                    for t in members:
                        t.syncthreads_blocked = False
                        t.syncthreads_event.set()

    return _Manager


def _abort(threads: list) -> None:
    """Stop every thread of a launch that raised: wake those waiting at a barrier (they
    raise there) and wait for all of them to end (a thread that loops forever is left
    after a few seconds)."""
    for t in threads:
        t.abort = True
        t.syncthreads_blocked = False
        t.syncthreads_event.set()
    deadline = time.monotonic() + 5.0
    for t in threads:
        while t.is_alive() and time.monotonic() < deadline:
            t.syncthreads_blocked = False
            t.syncthreads_event.set()
            t.join(0.01)
