"""Collectives between ranks, as graph nodes: tg.allreduce, tg.allgather,
tg.reduce_scatter and tg.broadcast inside a traced function.

Each is one tg.library call: on a GPU its function enqueues the NCCL collective (through
CuPy's bindings, `cupy.cuda.nccl`) on the stream it is given, so the cuda backend captures
it into a child graph ordered only by the arrays it reads and writes; on the simulator its
sim= function does the same on NumPy arrays, across the ranks of a `sim_group` (threads of
one process) or, with no communicator, for a single rank (the identity).

One process per GPU, as NCCL expects: `Communicator.from_env()` reads torchrun's RANK,
WORLD_SIZE and LOCAL_RANK. With comm=None a collective is over one rank (the identity;
on a GPU a one-rank NCCL communicator). Every rank must run the same collectives in the same order,
including the one uncaptured call the cuda backend makes when it builds a graph.
"""
from __future__ import annotations

import json
import os
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import TraceError
from .ir import View
from .location import user_location
from .trace import empty, library
from .trace.functions import _active

# nccl.h's enums (ncclDataType_t, ncclRedOp_t): fixed by NCCL's ABI, passed as ints
_NCCL_TYPES = {np.dtype(np.int8): 0, np.dtype(np.uint8): 1, np.dtype(np.int32): 2,
               np.dtype(np.uint32): 3, np.dtype(np.int64): 4, np.dtype(np.uint64): 5,
               np.dtype(np.float16): 6, np.dtype(np.float32): 7, np.dtype(np.float64): 8}
_NCCL_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
_REDUCE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sum": lambda s: np.sum(s, axis=0), "prod": lambda s: np.prod(s, axis=0),
    "max": lambda s: np.max(s, axis=0), "min": lambda s: np.min(s, axis=0),
    "avg": lambda s: np.sum(s, axis=0) / s.shape[0],
}

ID_FILE_ENV = "TRACEGRAPH_NCCL_ID_FILE"
SIM_TIMEOUT_S = 60.0  # a simulated rank waiting longer for the others raises


class SimGroup:
    """Simulated ranks in threads of one process: each collective is a rendezvous of all
    `world` ranks (a threading.Barrier), which exchange their contributions through shared
    slots. Made by `sim_group(world)`."""

    def __init__(self, world: int, timeout: float = SIM_TIMEOUT_S):
        self.world = world
        self._barrier = threading.Barrier(world, timeout=timeout)
        self._slots: list[Any] = [None] * world

    def exchange(self, rank: int, what: tuple, data: np.ndarray) -> list[np.ndarray]:
        """Every rank's `data` (copies), once all ranks have called it; `what` (the
        collective, its shape and dtype) must agree between ranks."""
        self._slots[rank] = (what, np.array(data, copy=True))
        self._wait(rank, what)
        slots = list(self._slots)
        self._wait(rank, what)  # all have read the slots before any rank writes again
        kinds = {s[0] for s in slots}
        if len(kinds) > 1:
            raise RuntimeError(f"rank {rank}: the ranks called different collectives at "
                               f"once: {sorted(map(str, kinds))} (every rank must run the "
                               "same collectives in the same order)")
        return [s[1] for s in slots]

    def _wait(self, rank: int, what: tuple) -> None:
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:
            raise RuntimeError(f"rank {rank} waited in vain for the other ranks of its "
                               f"sim_group at {what[0]} (a rank failed, timed out, or runs "
                               "other collectives)") from None


class Communicator:
    """A rank of a group of ranks: `rank`, `world_size`, and what runs its collectives,
    a CuPy `NcclCommunicator` (`nccl`, on GPUs) or a `SimGroup` (`group`, simulated).

    Compared by identity: passed to a compiled function as an argument, each rank's
    communicator is its own static argument, so each rank compiles its own graph."""

    def __init__(self, rank: int, world_size: int, *, nccl: Any = None,
                 group: SimGroup | None = None, device: int | None = None):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, {world_size})")
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.nccl = nccl
        self.group = group
        self.device = device

    def __repr__(self) -> str:
        kind = "nccl" if self.nccl is not None else "sim" if self.group is not None else "local"
        return f"<tg.Communicator rank {self.rank} of {self.world_size} ({kind})>"

    @classmethod
    def from_env(cls, unique_id: Any = None, id_file: str | None = None) -> Communicator:
        """This process's NCCL communicator, torchrun style: RANK, WORLD_SIZE and
        LOCAL_RANK from the environment (0, 1, 0 when unset), the GPU LOCAL_RANK made
        current. The NCCL unique id is `unique_id` when given (the same on every rank,
        e.g. sent with MPI), else rank 0 creates it and writes it to `id_file` (default:
        $TRACEGRAPH_NCCL_ID_FILE, else a file in the temp directory named by MASTER_PORT)
        and the other ranks wait for that file: a file system every rank sees (rank 0
        removes it once the communicator is made; a stale one from a run that failed
        must be removed by hand)."""
        from cupy.cuda import Device, nccl  # the NCCL bindings CuPy ships
        rank = int(os.environ.get("RANK", "0"))
        world = int(os.environ.get("WORLD_SIZE", "1"))
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
        Device(local).use()
        path = None
        if unique_id is None:
            path = id_file or os.environ.get(ID_FILE_ENV) or os.path.join(
                tempfile.gettempdir(),
                f"tracegraph-nccl-{os.environ.get('MASTER_PORT', 'default')}.json")
            unique_id = _share_unique_id(rank, path, nccl.get_unique_id)
        comm = nccl.NcclCommunicator(world, tuple(unique_id), rank)
        if path is not None and rank == 0:  # every rank has joined, so has read it
            os.remove(path)
        return cls(rank, world, nccl=comm, device=local)

    @classmethod
    def local(cls) -> Communicator:
        """A group of one rank on the current GPU (what comm=None stands for there): a
        one-rank NCCL communicator, made once per process."""
        global _local_nccl
        with _local_lock:
            if _local_nccl is None:
                from cupy.cuda import Device, nccl
                _local_nccl = cls(0, 1, nccl=nccl.NcclCommunicator(1, nccl.get_unique_id(), 0),
                                  device=Device().id)
            return _local_nccl

    # -- what the nodes run ---------------------------------------------------------
    def _gather(self, what: tuple, data: np.ndarray) -> list[np.ndarray]:
        if self.group is None:
            if self.world_size != 1:
                raise RuntimeError(f"{self!r} has no simulated group: on the simulator, "
                                   "make ranks with tg.sim_group(world)")
            return [np.array(data, copy=True)]
        return self.group.exchange(self.rank, what, data)

    def _nccl(self) -> Any:
        if self.nccl is None:
            raise RuntimeError(f"{self!r} has no NCCL communicator: on GPUs make it with "
                               "tg.Communicator.from_env()")
        return self.nccl


_local_nccl: Communicator | None = None
_local_lock = threading.Lock()
_LOCAL = Communicator(0, 1)  # comm=None on the simulator: one rank


def sim_group(world: int, timeout: float = SIM_TIMEOUT_S) -> list[Communicator]:
    """`world` simulated ranks: run the same compiled function (backend="sim") in `world`
    threads, thread r passing communicator r, and its collectives combine the ranks'
    data as NCCL would. A rank waiting more than `timeout` seconds raises."""
    if world < 1:
        raise ValueError(f"a group has at least one rank, got {world}")
    group = SimGroup(world, timeout)
    return [Communicator(r, world, group=group) for r in range(world)]


def _share_unique_id(rank: int, path: str, make: Callable[[], Any],
                     timeout: float = 300.0) -> tuple:
    if rank == 0:
        uid = tuple(int(b) for b in make())
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".")
        with os.fdopen(fd, "w") as f:
            json.dump(list(uid), f)
        os.replace(tmp, path)  # atomic: the others never read half a file
        return uid
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: no NCCL unique id in {path} after {timeout}s "
                               "(is rank 0 running, and is the file system shared?)")
        time.sleep(0.05)
    with open(path) as f:
        return tuple(json.load(f))


# ---------------------------------------------------------------------------
# the collectives

def allreduce(x: Any, op: str = "sum", comm: Communicator | None = None) -> Any:
    """x <- op over the ranks of every rank's x, in place (x is read and written).
    op: sum, prod, max, min or avg. Returns x."""
    where = user_location(2)
    view = _array(x, "allreduce", "x", where)
    red = _op(op, view, "allreduce", where)
    what = ("allreduce", op, view.shape, str(view.dtype))

    def gpu(stream: Any, a: Any, _token: Any) -> None:
        p = _ptr(a)
        _resolve(comm)._nccl().allReduce(p, p, view.size, _NCCL_TYPES[view.dtype],
                                         _NCCL_OPS[op], int(stream.handle))

    def sim(a: np.ndarray, _token: np.ndarray) -> None:
        a[...] = red(np.stack(_sim(comm)._gather(what, a))).astype(a.dtype, copy=False)

    token = _order_token(comm)
    library(gpu, x, token, reads=(), writes=[x, token], sim=sim, name=f"allreduce_{op}",
            may_be_empty=_world(comm) == 1)
    return x


def allgather(x: Any, out: Any, comm: Communicator | None = None) -> Any:
    """out <- every rank's x, rank after rank (out has world_size times x's elements, of
    x's dtype; x is read, out written). Returns out."""
    where = user_location(2)
    vx = _array(x, "allgather", "x", where)
    vo = _array(out, "allgather", "out", where)
    _same_dtype(vx, vo, "allgather", where)
    _sizes(vo.size, vx.size, comm, "allgather", "out", "x", where)
    what = ("allgather", vx.shape, str(vx.dtype))

    def gpu(stream: Any, a: Any, b: Any, _token: Any) -> None:
        _resolve(comm)._nccl().allGather(_ptr(a), _ptr(b), vx.size, _NCCL_TYPES[vx.dtype],
                                         int(stream.handle))

    def sim(a: np.ndarray, b: np.ndarray, _token: np.ndarray) -> None:
        b.reshape(-1)[...] = np.concatenate([s.reshape(-1)
                                             for s in _sim(comm)._gather(what, a)])

    token = _order_token(comm)
    library(gpu, x, out, token, reads=[x], writes=[out, token], sim=sim, name="allgather")
    return out


def reduce_scatter(x: Any, out: Any, op: str = "sum", comm: Communicator | None = None) -> Any:
    """out <- rank r's block of the op over the ranks of every rank's x (x has world_size
    times out's elements; block r is elements [r n, (r + 1) n) of x flattened, n =
    out.size; x is read, out written). Returns out."""
    where = user_location(2)
    vx = _array(x, "reduce_scatter", "x", where)
    vo = _array(out, "reduce_scatter", "out", where)
    _same_dtype(vx, vo, "reduce_scatter", where)
    red = _op(op, vx, "reduce_scatter", where)
    _sizes(vx.size, vo.size, comm, "reduce_scatter", "x", "out", where)
    what = ("reduce_scatter", op, vx.shape, str(vx.dtype))
    n = vo.size

    def gpu(stream: Any, a: Any, b: Any, _token: Any) -> None:
        _resolve(comm)._nccl().reduceScatter(_ptr(a), _ptr(b), n, _NCCL_TYPES[vx.dtype],
                                             _NCCL_OPS[op], int(stream.handle))

    def sim(a: np.ndarray, b: np.ndarray, _token: np.ndarray) -> None:
        c = _sim(comm)
        full = red(np.stack([s.reshape(-1) for s in c._gather(what, a)]))
        b.reshape(-1)[...] = full[c.rank * n:(c.rank + 1) * n].astype(b.dtype, copy=False)

    token = _order_token(comm)
    library(gpu, x, out, token, reads=[x], writes=[out, token], sim=sim,
            name=f"reduce_scatter_{op}")
    return out


def broadcast(x: Any, root: int = 0, comm: Communicator | None = None) -> Any:
    """x <- rank root's x, in place on every rank (x is read and written). Returns x."""
    where = user_location(2)
    view = _array(x, "broadcast", "x", where)
    world = 1 if comm is None else comm.world_size
    if not isinstance(root, (int, np.integer)) or not 0 <= root < world:
        raise TraceError(f"tg.broadcast: root {root!r} is not a rank of a group of {world}",
                         where=where, fix=f"pass root= an int in [0, {world})")
    root = int(root)
    what = ("broadcast", root, view.shape, str(view.dtype))

    def gpu(stream: Any, a: Any, _token: Any) -> None:
        p = _ptr(a)
        _resolve(comm)._nccl().broadcast(p, p, view.size, _NCCL_TYPES[view.dtype], root,
                                         int(stream.handle))

    def sim(a: np.ndarray, _token: np.ndarray) -> None:
        a[...] = _sim(comm)._gather(what, a)[root]

    token = _order_token(comm)
    library(gpu, x, token, reads=(), writes=[x, token], sim=sim, name="broadcast",
            may_be_empty=_world(comm) == 1)
    return x


# ---------------------------------------------------------------------------

def _order_token(comm: Communicator | None) -> Any:
    """A one-byte graph array every collective on `comm` in this trace writes: it orders
    them one after another in program order (NCCL runs a communicator's collectives in
    the order every rank issues them; two on parallel graph branches could deadlock)."""
    tracer = _active("collective")
    tokens = _tokens.setdefault(tracer, {})
    if comm not in tokens:
        tokens[comm] = empty(1, np.uint8)
    return tokens[comm]


_tokens: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


def _world(comm: Communicator | None) -> int:
    """Ranks in the group; in place on one rank, NCCL rightly enqueues nothing."""
    return 1 if comm is None else comm.world_size


def _resolve(comm: Communicator | None) -> Communicator:
    return comm if comm is not None else Communicator.local()


def _sim(comm: Communicator | None) -> Communicator:
    return comm if comm is not None else _LOCAL


def _ptr(a: Any) -> int:
    return int(a.__cuda_array_interface__["data"][0])


def _array(a: Any, what: str, name: str, where: str) -> View:
    view = _active(what).view_or_external(a)
    if view is None:
        raise TraceError(f"tg.{what}: {name} must be a traced or device array, got "
                         f"{type(a).__name__}", where=where,
                         fix="pass an argument of the traced function, or an array made "
                             "inside it (tg.empty)")
    if not view.is_c_contiguous():
        raise TraceError(f"tg.{what}: {name} is not contiguous (NCCL takes a pointer and a "
                         "count)", where=where, fix="pass a contiguous array (a copy)")
    if view.dtype not in _NCCL_TYPES:
        raise TraceError(f"tg.{what}: NCCL has no type for {name}'s dtype {view.dtype}",
                         where=where, fix="use int8/uint8/int32/uint32/int64/uint64 or "
                                          "float16/float32/float64 (view bools as uint8)")
    return view


def _op(op: Any, view: View, what: str, where: str) -> Callable[[np.ndarray], np.ndarray]:
    if op not in _REDUCE:
        raise TraceError(f"tg.{what}: unknown op {op!r}", where=where,
                         fix=f"pass one of {', '.join(_REDUCE)}")
    if op == "avg" and view.dtype.kind != "f":
        raise TraceError(f"tg.{what}: op='avg' of {view.dtype} (the average of integers "
                         "is not an integer)", where=where,
                         fix="reduce with op='sum' and divide, or use a float dtype")
    return _REDUCE[op]


def _same_dtype(a: View, b: View, what: str, where: str) -> None:
    if a.dtype != b.dtype:
        raise TraceError(f"tg.{what}: x is {a.dtype} but out is {b.dtype}", where=where,
                         fix="give out the dtype of x")


def _sizes(big: int, small: int, comm: Communicator | None, what: str, bname: str,
           sname: str, where: str) -> None:
    world = 1 if comm is None else comm.world_size
    if big != world * small:
        raise TraceError(f"tg.{what}: {bname} has {big} elements, not world_size ({world}) "
                         f"times the {small} of {sname}", where=where,
                         fix=f"make {bname} {world} x {small} elements")


__all__ = ["Communicator", "SimGroup", "allgather", "allreduce", "broadcast", "reduce_scatter",
           "sim_group"]
