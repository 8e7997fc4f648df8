"""Ops: what the traced function did, in program order, each with the data of its kind."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .kinds import CopyRole, OpKind
from .memory import Access, View
from .records import fast_init


@dataclass(frozen=True, slots=True)
class ScalarArg:
    """A kernel argument that is the dynamic scalar input leaf `leaf` (its value changes
    from call to call without a new graph)."""
    leaf: int


def args_key(args: tuple) -> tuple:
    """Launch arguments as a key that tells apart what compares equal but launches
    differently: 1, 1.0 and True; 0.0 and -0.0 (typed, and by their exact text); tuples of
    equal items but other types (two namedtuples). Views and dynamic scalars are keys."""
    return tuple(a if isinstance(a, (View, ScalarArg)) else
                 (type(a), args_key(a)) if isinstance(a, tuple) else
                 (type(a), repr(a)) for a in args)


@dataclass(frozen=True, slots=True)
class Launch:
    """A kernel launch: the user's dispatcher and its arguments, traced arrays as Views
    (tuples stay tuples, namedtuples namedtuples)."""
    kernel: Any = field(compare=False)
    griddim: tuple[int, int, int] = (1, 1, 1)
    blockdim: tuple[int, int, int] = (1, 1, 1)
    sharedmem: int = 0
    args: tuple = ()
    cooperative: bool = False  # it synchronizes the grid: a cooperative launch
    attributes: NodeAttributes | None = None


@dataclass(frozen=True, eq=False)
class ForeignKernel:
    """A kernel tracegraph did not compile: `handle` is a cuda.core Kernel or an object
    with a `kernel.ptr` CUfunction (CuPy's RawKernel); `sim(*args)` does its work on NumPy
    arrays for the simulator."""
    handle: Any
    name: str
    sim: Any


@dataclass(frozen=True, slots=True)
class NodeAttributes:
    """Kernel-node attributes asked for with tg.node_attributes: a scheduling priority
    (lower is more urgent, as CUDA stream priorities), and an L2 access-policy window
    over `persist` (a view kept in L2 with probability `hit_ratio`)."""
    priority: int | None = None
    persist: View | None = None
    hit_ratio: float = 1.0


@dataclass(frozen=True, slots=True)
class LibraryCall:
    """Stream-capturable work: `fn(stream, *args)` enqueues it (arrays as device arrays over
    graph memory), captured once into a child graph; on the simulator `sim(*args)` does the
    same on NumPy arrays. Views in `args` are the arrays. `may_be_empty`: capturing no
    work at all is right for these arguments (else it is refused: the work went elsewhere)."""
    fn: Any = field(compare=False)
    args: tuple = ()
    sim: Any = field(default=None, compare=False)
    may_be_empty: bool = False


@dataclass(frozen=True, slots=True)
class Copy:
    """dst <- src: the same number of bytes, both contiguous."""
    dst: View
    src: View
    role: CopyRole = CopyRole.USER


@dataclass(frozen=True, slots=True)
class Fill:
    """Every byte of dst set to `value`."""
    dst: View
    value: int = 0


@dataclass(frozen=True, slots=True)
class EventUse:
    """A caller's event recorded or waited on (OpKind says which)."""
    event: Any = field(compare=False)


@dataclass(frozen=True, slots=True)
class HostCall:
    """A Python callable run on the host at this point of the graph."""
    fn: Any = field(compare=False)


@dataclass(frozen=True, slots=True)
class Conditional:
    """Device-side control flow: `kind` "while" (repeat bodies[0] while flag[0] != 0, at
    most `max_iterations` times, counting iterations in `counter`), "if" (bodies[0] when
    flag[0] != 0, else bodies[1] if given), or "switch" (bodies[flag[0]], none when out
    of range). Each body is a Program over the same buffers (its own dependency graph)."""
    kind: str
    flag: View
    bodies: tuple[Any, ...]
    max_iterations: int = 0
    counter: View | None = None
    raise_at_limit: bool = False


OpData = Launch | Copy | Fill | EventUse | HostCall | Conditional | LibraryCall


@fast_init
@dataclass(frozen=True, slots=True)
class Op:
    """One recorded operation. `data` holds what its kind needs; a `barrier` op is ordered
    after every earlier op and before every later one."""
    kind: OpKind
    name: str
    accesses: tuple[Access, ...] = ()
    location: str = ""
    data: OpData | None = field(default=None, compare=False)
    barrier: bool = False

    # the data of each kind, typed (an op of another kind raises)
    @property
    def launch(self) -> Launch:
        return _of(self, Launch)

    @property
    def copy(self) -> Copy:
        return _of(self, Copy)

    @property
    def fill(self) -> Fill:
        return _of(self, Fill)

    @property
    def event(self) -> EventUse:
        return _of(self, EventUse)

    @property
    def host_call(self) -> HostCall:
        return _of(self, HostCall)

    @property
    def conditional(self) -> Conditional:
        return _of(self, Conditional)

    @property
    def library(self) -> LibraryCall:
        return _of(self, LibraryCall)

    def describe(self) -> str:
        if isinstance(self.data, Launch):
            coop = ", cooperative" if self.data.cooperative else ""
            return f"{self.name}[{_dims(self.data.griddim)}, {_dims(self.data.blockdim)}{coop}]"
        return self.name


def _of(op: Op, kind: type) -> Any:
    data = op.data
    if type(data) is kind:  # (every compile asks each launch op several times)
        return data
    if not isinstance(data, kind):
        raise TypeError(f"{op.kind} op {op.name} has no {kind.__name__} data")
    return op.data


def _dims(d: tuple[int, int, int]) -> str:
    trimmed = list(d)
    while len(trimmed) > 1 and trimmed[-1] == 1:
        trimmed.pop()
    return "x".join(str(x) for x in trimmed)
