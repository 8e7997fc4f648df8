"""The only module that touches Numba internals.

- launch interception: while a tracer is active on this thread, `kernel[grid, block](...)`
  and `kernel.forall(n)(...)` are handed to it instead of launching;
- kernel facts: name, Python function, debug/device flags;
- read/write inference from a kernel's untyped Numba IR;
- argument typing and the flattened parameter layout Numba passes to the driver
  (each array is meminfo, parent, nitems, itemsize, data, shape..., strides...);
- turning any kernel into a simulator kernel, and the compiled overload for the driver.
"""
from __future__ import annotations

import ctypes
import sys
import threading
import types as pytypes
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from numba import cuda
from numba.cuda import config as _cuda_config

SIMULATOR = bool(_cuda_config.ENABLE_CUDASIM)

if SIMULATOR:
    from numba.cuda.simulator.kernel import FakeCUDAKernel as _KernelType
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray as _SimDeviceArray
else:
    from numba.cuda.dispatcher import CUDADispatcher as _KernelType
    _SimDeviceArray = None

_thread = threading.local()
_hooks_lock = threading.Lock()
_hooks_installed = False


# ---------------------------------------------------------------------------
# launch interception

def current_tracer() -> Any:
    return getattr(_thread, "tracer", None)


def set_tracer(tracer: Any) -> Any:
    """Make `tracer` receive this thread's launches; returns the previous one."""
    install_hooks()
    previous = getattr(_thread, "tracer", None)
    _thread.tracer = tracer
    return previous


def install_hooks() -> None:
    """Route launches through the active tracer. Idempotent; costs nothing when not tracing."""
    global _hooks_installed
    with _hooks_lock:
        if _hooks_installed:
            return
        if SIMULATOR:
            _install_simulator_hooks()
        else:
            _install_dispatcher_hooks()
        _hooks_installed = True


def _install_dispatcher_hooks() -> None:
    from numba.cuda import dispatcher as d

    original_call = d.CUDADispatcher.call

    def call(self, args, launch_config):
        tracer = current_tracer()
        if tracer is None:
            return original_call(self, args, launch_config)
        tracer.record_launch(self, launch_config.griddim, launch_config.blockdim,
                             launch_config.sharedmem, args,
                             stream=_stream_given(launch_config.stream))

    original_forall = d.ForAll.__call__

    def forall(self, *args):
        tracer = current_tracer()
        if tracer is None:
            return original_forall(self, *args)
        if self.ntasks == 0:
            return None
        # Numba asks the driver for a block size here; tracing must not need a GPU,
        # and forall kernels bound-check their index, so any block size is correct.
        tpb = self.thread_per_block or 256
        grid = (self.ntasks + tpb - 1) // tpb
        tracer.record_launch(self.dispatcher, (grid, 1, 1), (tpb, 1, 1), self.sharedmem, args,
                             stream=bool(self.stream))

    d.CUDADispatcher.call = call
    d.ForAll.__call__ = forall


def _stream_given(stream: Any) -> bool:
    if stream is None or (isinstance(stream, int) and stream == 0):
        return False
    try:
        return int(getattr(stream, "handle", 1) or 0) != 0
    except Exception:  # noqa: BLE001 - an exotic stream object: it was given
        return True


def _install_simulator_hooks() -> None:
    from numba.cuda.simulator import kernel as k

    original_call = k.FakeCUDAKernel.__call__
    original_getitem = k.FakeCUDAKernel.__getitem__

    def call(self, *args):
        tracer = current_tracer()
        # tracers are per thread and the simulator's CUDA threads have none
        if tracer is None or self._device:
            return original_call(self, *args)
        from numba.cuda.errors import normalize_kernel_dimensions
        grid, block = normalize_kernel_dimensions(self.grid_dim, self.block_dim)
        stream = getattr(self, "_tracegraph_stream", 0)
        tracer.record_launch(self, tuple(grid), tuple(block), self.dynshared_size, args,
                             stream=_stream_given(stream))

    def getitem(self, configuration):
        # The simulator keeps the last launch's shared memory size and drops the stream;
        # reset the one and remember the other so tracing can warn about it.
        self.dynshared_size = 0
        result = original_getitem(self, configuration)
        self._tracegraph_stream = configuration[2] if len(configuration) >= 3 else 0
        return result

    original_forall = k.FakeCUDAKernel.forall

    def forall(self, ntasks, tpb=0, stream=0, sharedmem=0):
        if ntasks == 0 and current_tracer() is not None:
            return lambda *args: None  # numba-cuda launches nothing for zero tasks
        return original_forall(self, ntasks, tpb, stream, sharedmem)

    k.FakeCUDAKernel.__call__ = call
    k.FakeCUDAKernel.__getitem__ = getitem
    k.FakeCUDAKernel.forall = forall


# ---------------------------------------------------------------------------
# kernel facts

def is_kernel(obj: Any) -> bool:
    return isinstance(obj, _KernelType)


def kernel_py_func(kernel: Any) -> Callable:
    return kernel.py_func


def kernel_name(kernel: Any) -> str:
    return getattr(kernel_py_func(kernel), "__name__", repr(kernel))


def kernel_is_debug(kernel: Any) -> bool:
    if SIMULATOR:
        return bool(getattr(kernel, "_debug", False))
    return bool(kernel.targetoptions.get("debug"))


def uses_grid_sync(kernel: Any) -> bool:
    """Does the kernel (or a device function it calls) synchronize the whole grid
    (`cuda.cg.this_grid().sync()`)? Such a kernel needs a cooperative launch."""
    func = kernel_py_func(kernel)
    found = _grid_sync.get(func)
    if found is None:
        found = _grid_sync[func] = _uses_grid_sync(func, set())
    return found


_grid_sync: "weakref.WeakKeyDictionary[Callable, bool]" = weakref.WeakKeyDictionary()


def _uses_grid_sync(func: Callable, seen: set) -> bool:
    if func in seen:
        return False
    seen.add(func)
    code = getattr(func, "__code__", None)
    if code is None:
        return False
    names = _referenced_names(code)
    if "this_grid" in names:
        return True
    namespace = getattr(func, "__globals__", {})
    return any(_uses_grid_sync(kernel_py_func(v), seen) for n in names
               if _is_device_function(v := namespace.get(n)))


def _is_device_function(obj: Any) -> bool:
    if SIMULATOR:
        return isinstance(obj, _KernelType) and obj._device
    return isinstance(obj, _KernelType) and bool(obj.targetoptions.get("device"))


# ---------------------------------------------------------------------------
# device arrays as Numba sees them

def is_simulated_device_array_type(t: type) -> bool:
    return _SimDeviceArray is not None and issubclass(t, _SimDeviceArray)


def is_device_array_type(t: type) -> bool:
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    return issubclass(t, DeviceNDArray)


def is_simulated_device_array(obj: Any) -> bool:
    return _SimDeviceArray is not None and isinstance(obj, _SimDeviceArray)


def simulated_device_array_host(obj: Any) -> np.ndarray:
    """The NumPy array holding a simulator 'device' array's data (shared, not copied)."""
    return obj._ary


def to_device(host: np.ndarray) -> Any:
    return cuda.to_device(host)


def device_address(array: Any) -> int:
    """Address of element 0 of a Numba device array (0 when it has no memory)."""
    gpu_data = array.gpu_data
    return gpu_data.device_ctypes_pointer.value or 0 if gpu_data is not None else 0


def device_view(owner: Any, offset: int, shape: tuple[int, ...], strides: tuple[int, ...],
                dtype: np.dtype) -> Any:
    """A device array over `owner`'s memory from byte `offset`; it keeps `owner` alive."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    return DeviceNDArray(shape, strides, dtype, gpu_data=owner.gpu_data.view(offset))


def allocation_refs(owner: Any) -> int:
    """How many Numba device arrays (views included) currently hold `owner`'s allocation.

    Numba counts owned references on the root allocation (`refct`); views made with
    `device_view`, slices, and objects wrapping them through __cuda_array_interface__
    all keep one.
    """
    mem = owner.gpu_data._mem
    return int(mem.refct)


# ---------------------------------------------------------------------------
# read/write inference

_META_ATTRS = frozenset({"shape", "size", "ndim", "dtype", "strides", "itemsize", "nbytes",
                         "layout"})
_NO_ACCESS_GLOBALS = frozenset({len})
_inference_cache: "weakref.WeakKeyDictionary[Callable, dict]" = weakref.WeakKeyDictionary()
_inference_lock = threading.Lock()


def infer_param_access(kernel: Any, ndims: tuple[int | None, ...]) -> tuple[str, ...]:
    """For each parameter: "" (untouched), "r", "w" or "rw", from the kernel's Numba IR.

    `ndims[i]` is the array rank of argument i, -1 for a tuple (its members share one
    answer), None for a scalar. A parameter passed to a call the analysis cannot see
    through counts as read and written.
    """
    func = kernel_py_func(kernel)
    with _inference_lock:
        per_func = _inference_cache.setdefault(func, {})
        if ndims not in per_func:
            per_func[ndims] = _infer(func, ndims, frozenset())
        return per_func[ndims]


def _infer(func: Callable, ndims: tuple[int | None, ...], active: frozenset) -> tuple[str, ...]:
    return _AccessInference(func, ndims, active).run()


class _AccessInference:
    """Walks untyped Numba IR: which parameters are stored to, read, or escape into calls."""

    def __init__(self, func: Callable, ndims: tuple[int | None, ...], active: frozenset):
        from numba.core.compiler import run_frontend
        self.func = func
        self.active = active | {func}
        self.fir = run_frontend(func)
        self.nparams = len(self.fir.arg_names)
        self.ndims = tuple(ndims[:self.nparams]) + (None,) * max(0, self.nparams - len(ndims))
        self.reads: set[int] = set()
        self.writes: set[int] = set()
        # var name -> {(param, rank)}; rank -1 means "unknown: maybe an array"
        self.alias: dict[str, set[tuple[int, int]]] = {}
        self.slices: set[str] = set()          # vars holding a slice object
        self.index_rank: dict[str, int] = {}   # tuple-index vars: how many dims they consume
        self.methods: dict[str, set[int]] = {}  # vars holding a bound method of an array
        self.globals: dict[str, Any] = {}

    def run(self) -> tuple[str, ...]:
        from numba.core import ir
        stmts = [s for block in self.fir.blocks.values() for s in block.body]
        for _ in range(10):  # fixed point: loops can use a var before its textual definition
            before = self._size()
            for stmt in stmts:
                if isinstance(stmt, ir.Assign):
                    self._assign(stmt.target.name, stmt.value)
                elif isinstance(stmt, (ir.SetItem, ir.StaticSetItem)):
                    self.writes.update(self._params(stmt.target))
                    self._read(stmt.value)
                    if isinstance(stmt, ir.SetItem):
                        self._read(stmt.index)
                else:
                    for var in stmt.list_vars():
                        self._read(var)
            if self._size() == before:
                break
        return tuple(("r" if i in self.reads else "") + ("w" if i in self.writes else "")
                     for i in range(self.nparams))

    def _size(self) -> tuple[int, ...]:
        return (len(self.reads), len(self.writes), sum(map(len, self.alias.values())),
                sum(map(len, self.methods.values())), len(self.slices), len(self.index_rank))

    def _params(self, var: Any) -> set[int]:
        return {p for p, _ in self.alias.get(var.name, ())}

    def _read(self, var: Any) -> None:
        if var is not None and hasattr(var, "name"):
            self.reads.update(self._params(var))
            self.reads.update(self.methods.get(var.name, ()))

    def _escape(self, var: Any) -> None:
        """`var` went somewhere we cannot follow: read and written."""
        ps = self._params(var)
        self.reads.update(ps)
        self.writes.update(ps)

    def _consumed(self, index: Any) -> int:
        from numba.core import ir
        if isinstance(index, ir.Var):
            if index.name in self.slices:
                return 0
            return self.index_rank.get(index.name, 1)
        if isinstance(index, slice):
            return 0
        if isinstance(index, tuple):
            return sum(0 if isinstance(i, slice) else 1 for i in index)
        return 1

    def _subview(self, target: str, base: Any, index: Any) -> None:
        used = self._consumed(index)
        out = self.alias.setdefault(target, set())
        for p, rank in self.alias.get(base.name, ()):
            if rank < 0:
                out.add((p, -1))
                self.reads.add(p)
            elif rank - used > 0:
                out.add((p, rank - used))  # a view: reading it is not reading data
            else:
                self.reads.add(p)  # an element

    def _assign(self, target: str, value: Any) -> None:
        from numba.core import ir
        if isinstance(value, ir.Arg):
            rank = self.ndims[value.index] if value.index < self.nparams else None
            if rank is not None:
                self.alias.setdefault(target, set()).add((value.index, rank))
        elif isinstance(value, ir.Var):
            self.alias.setdefault(target, set()).update(self.alias.get(value.name, ()))
            self.methods.setdefault(target, set()).update(self.methods.get(value.name, ()))
            if value.name in self.slices:
                self.slices.add(target)
        elif isinstance(value, (ir.Global, ir.FreeVar)):
            self.globals[target] = value.value
        elif isinstance(value, ir.Const):
            if isinstance(value.value, slice):
                self.slices.add(target)
        elif isinstance(value, ir.Expr):
            self._expr(target, value)

    def _expr(self, target: str, e: Any) -> None:
        op = e.op
        if op in ("getitem", "static_getitem"):
            if op == "getitem":
                self._read(e.index)
            self._subview(target, e.value, e.index)
        elif op == "getattr":
            if e.attr in _META_ATTRS:
                return
            if e.attr == "T":
                self.alias.setdefault(target, set()).update(self.alias.get(e.value.name, ()))
            elif e.value.name in self.globals:
                self.globals[target] = getattr(self.globals[e.value.name], e.attr, None)
            elif self._params(e.value):
                self.methods.setdefault(target, set()).update(self._params(e.value))
        elif op == "call":
            self._call(target, e)
        elif op == "build_tuple":
            ranks = 0
            for item in e.items:
                self.alias.setdefault(target, set()).update(
                    (p, -1) for p, _ in self.alias.get(item.name, ()))
                ranks += 0 if item.name in self.slices else 1
            self.index_rank[target] = ranks
        elif op in ("exhaust_iter", "getiter", "iternext", "pair_first"):
            self._read(e.value)
            self.alias.setdefault(target, set()).update(
                (p, -1) for p, _ in self.alias.get(e.value.name, ()))
        else:
            for var in e.list_vars():
                self._read(var)

    def _call(self, target: str, e: Any) -> None:
        fn = self.globals.get(e.func.name)
        if fn is slice:
            self.slices.add(target)
            return
        if fn in _NO_ACCESS_GLOBALS:
            return
        args = list(e.args) + [v for _, v in e.kws]
        if e.func.name in self.methods:
            ps = self.methods[e.func.name]
            self.reads.update(ps)
            self.writes.update(ps)
            self.alias.setdefault(target, set()).update((p, -1) for p in ps)
        if _is_device_function(fn) and not e.kws and e.vararg is None and \
                kernel_py_func(fn) not in self.active:
            self._device_call(target, fn, args)
            return
        for a in args:
            self._escape(a)
            # a call may hand back a view of what it was given
            self.alias.setdefault(target, set()).update(
                (p, -1) for p, _ in self.alias.get(a.name, ()))

    def _device_call(self, target: str, fn: Any, args: list) -> None:
        """See through a device function: map its parameters' accesses back to ours."""
        ranks = []
        for a in args:
            known = [r for _, r in self.alias.get(a.name, ())]
            ranks.append(known[0] if len(set(known)) == 1 else (-1 if known else None))
        try:
            inner = _infer(kernel_py_func(fn), tuple(ranks), self.active)
        except Exception:  # noqa: BLE001 - unreadable callee: be conservative
            inner = ("rw",) * len(args)
        for a, mode in zip(args, inner):
            ps = self._params(a)
            if "r" in mode:
                self.reads.update(ps)
            if "w" in mode:
                self.writes.update(ps)
            self.alias.setdefault(target, set()).update(
                (p, -1) for p, _ in self.alias.get(a.name, ()))


# ---------------------------------------------------------------------------
# argument typing and Numba's flattened parameter layout

@dataclass(frozen=True, slots=True)
class Ptr:
    """A data-pointer parameter: a byte offset into an IR buffer, resolved by the backend."""
    buffer: int
    offset: int


@dataclass(frozen=True, slots=True)
class CScalar:
    """A scalar parameter passed by value as a ctypes type (e.g. "c_float")."""
    ctype: str
    value: Any

    def as_ctype(self) -> Any:
        return getattr(ctypes, self.ctype)(self.value)


_array_types: dict[tuple, Any] = {}


def array_type(dtype: np.dtype, ndim: int, layout: str) -> Any:
    key = (dtype, ndim, layout)
    ty = _array_types.get(key)
    if ty is None:
        from numba import from_dtype, types
        ty = _array_types[key] = types.Array(from_dtype(dtype), ndim, layout)
    return ty


def layout_of(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> str:
    """Numba's layout letter for an array of this shape and strides."""
    def contiguous(dims: Any) -> bool:
        expected = itemsize
        for n, s in dims:
            if n != 1 and s != expected:
                return False
            expected *= n
        return True
    pairs = list(zip(shape, strides))
    if contiguous(reversed(pairs)):
        return "C"
    if contiguous(pairs):
        return "F"
    return "A"


_scalar_types: dict[type, Any] = {}


def scalar_type(value: Any) -> Any:
    """Numba's type for a scalar argument, or None when Numba cannot pass it to a kernel."""
    t = type(value)
    ty = _scalar_types.get(t)
    if ty is not None and not (t is int and not -2**63 <= value < 2**63):
        return ty
    from numba import typeof, types
    try:
        ty = typeof(value)
    except Exception:  # noqa: BLE001
        return None
    if isinstance(ty, (types.Integer, types.Float, types.Complex, types.Boolean,
                       types.NPDatetime, types.NPTimedelta)):
        if t in (bool, float, complex) or issubclass(t, np.number) or (
                t is int and ty == types.int64):
            _scalar_types[t] = ty  # these types always map to the same Numba type
        return ty
    return None


def tuple_type(item_types: list) -> Any:
    from numba import types
    return types.BaseTuple.from_types(item_types)


def flatten_params(argtypes: tuple, values: tuple, view_fields: Callable) -> tuple:
    """Numba's kernel parameter list for these argument types and values.

    Mirrors numba-cuda's `_Kernel._prepare_args`: arrays become meminfo, parent, nitems,
    itemsize, data, shape..., strides...; scalars become ctypes values. `view_fields(v)`
    gives (nitems, itemsize, Ptr, shape, strides) for a traced array value.
    """
    from numba import types
    out: list = []

    def add(ty: Any, val: Any) -> None:
        if isinstance(ty, types.Array):
            nitems, itemsize, ptr, shape, strides = view_fields(val)
            out.extend((0, 0, nitems, itemsize, ptr))
            out.extend(shape)
            out.extend(strides)
        elif isinstance(ty, types.Boolean):
            out.append(bool(val))
        elif isinstance(ty, types.Integer):
            out.append(CScalar(f"c_{ty}", int(val)))
        elif isinstance(ty, types.Float):
            if ty.bitwidth == 16:
                out.append(CScalar("c_uint16", int(np.float16(val).view(np.uint16))))
            else:
                out.append(CScalar("c_float" if ty.bitwidth == 32 else "c_double", float(val)))
        elif isinstance(ty, types.Complex):
            part = "c_float" if ty.bitwidth == 64 else "c_double"
            out.extend((CScalar(part, val.real), CScalar(part, val.imag)))
        elif isinstance(ty, (types.NPDatetime, types.NPTimedelta)):
            out.append(CScalar("c_int64", int(np.asarray(val).view(np.int64))))
        elif isinstance(ty, types.BaseTuple):
            for t, v in zip(ty, val):
                add(t, v)
        else:
            raise TypeError(f"no kernel parameter layout for Numba type {ty}")

    for ty, val in zip(argtypes, values):
        add(ty, val)
    return tuple(out)


# ---------------------------------------------------------------------------
# executing kernels: the simulator (CPU reference) and the compiled overload (driver)

_sim_kernels: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
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
    if SIMULATOR:
        return kernel
    with _sim_lock:
        return _simulated(kernel)


def _simulated(dispatcher: Any) -> Any:
    from numba.cuda.simulator.kernel import FakeCUDAKernel
    cached = _sim_kernels.get(dispatcher)
    if cached is not None:
        return cached
    func = dispatcher.py_func
    namespace = dict(func.__globals__)
    cells = _new_cells(func)
    clone = pytypes.FunctionType(func.__code__, namespace, func.__name__, func.__defaults__,
                                 cells)
    fake = FakeCUDAKernel(clone, device=_is_device_function(dispatcher),
                          fastmath=bool(dispatcher.targetoptions.get("fastmath")))
    _sim_kernels[dispatcher] = fake
    _rebind(func, namespace, cells)
    return fake


def _sim_value(value: Any) -> Any:
    """What a kernel's global or closure variable becomes for the simulator: kernels and
    device functions simulator kernels, @numba.jit functions (numba.cuda.random's) plain
    Python, tuples of these tuples of their replacements."""
    from numba.core.registry import CPUDispatcher
    if isinstance(value, _KernelType):
        return _simulated(value)
    if isinstance(value, CPUDispatcher):
        return _python_clone(value)
    if type(value) is tuple and any(isinstance(v, (_KernelType, CPUDispatcher)) for v in value):
        return tuple(_sim_value(v) for v in value)
    return value


def _python_clone(dispatcher: Any) -> Any:
    cached = _sim_kernels.get(dispatcher)
    if cached is not None:
        return cached
    func = dispatcher.py_func
    namespace = dict(func.__globals__)
    cells = _new_cells(func)
    clone = pytypes.FunctionType(func.__code__, namespace, func.__name__, func.__defaults__,
                                 cells)
    _sim_kernels[dispatcher] = clone
    _rebind(func, namespace, cells)
    return clone


def _new_cells(func: Callable) -> tuple | None:
    return tuple(pytypes.CellType() for _ in func.__closure__) if func.__closure__ else None


def _rebind(func: Callable, namespace: dict, cells: tuple | None) -> None:
    """Point the clone's globals and closure cells at simulator versions (filled after the
    clone is registered, so recursion terminates)."""
    for name in _referenced_names(func.__code__):
        if name in namespace:
            namespace[name] = _sim_value(namespace[name])
    for new, old in zip(cells or (), func.__closure__ or ()):
        try:
            new.cell_contents = _sim_value(old.cell_contents)
        except ValueError:  # an empty cell stays empty
            pass


def _referenced_names(code: pytypes.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            names |= _referenced_names(const)
    return names


def compiled_kernel(kernel: Any, argtypes: tuple) -> tuple[Any, bool]:
    """(cuda.core Kernel, is_cooperative) of the overload Numba picks for `argtypes`."""
    overload = kernel.compile(tuple(argtypes))
    cufunc = overload._codelibrary.get_cufunc()
    return cufunc.kernel, bool(getattr(overload, "cooperative", False))


def ptx_for(kernel: Any, argtypes: tuple, cc: tuple[int, int] = (9, 0)) -> str:
    """PTX of the kernel for these argument types, without a GPU (not under the simulator)."""
    from numba.cuda import compile_ptx
    ptx, _ = compile_ptx(kernel_py_func(kernel), tuple(argtypes), cc=cc)
    return ptx


def simulator_array(host: np.ndarray) -> Any:
    """Wrap a NumPy view so a simulator kernel works on its memory in place (no copy)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    return FakeCUDAArray(host)


def run_simulated(kernel: Any, griddim: tuple, blockdim: tuple, sharedmem: int,
                  args: list) -> None:
    """Run one launch on the CPU simulator."""
    fake = simulator_kernel(kernel)
    with _sim_lock:
        # The simulator runs a Python thread per CUDA thread and polls them at every
        # syncthreads(); a short switch interval makes shared-memory kernels ~20x faster.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-4)
        try:
            fake[griddim, blockdim, 0, sharedmem](*args)
        finally:
            sys.setswitchinterval(interval)


def device_bytes(ptr: int, nbytes: int) -> Any:
    """A uint8 Numba device array over raw device memory (no copy, not owned)."""
    desc = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3,
            "strides": None}
    return cuda.from_cuda_array_interface(desc, owner=None, sync=False)
