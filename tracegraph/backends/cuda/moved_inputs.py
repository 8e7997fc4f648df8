"""How the cuda backend follows a caller's device array that moved between replays.

Two ways, chosen per input while the program runs:

- re-point ("repoint"): patch the new address into every graph node that uses the array.
  Costs nothing while the address stays put, and host time per node when it moves.
- copy ("copy"): the nodes use a static buffer of the graph's own; an in-graph memcpy
  copies the caller's array into it first (and back after the last user, if the graph
  writes it). A move patches one or two memcpy nodes, but every replay pays the copies'
  GPU time, moved or not.

Copying wins only for an input that keeps moving and is used by many nodes. Switching way
rebuilds the executable graph (copy nodes exist only while some input is copied: on an
H200 even a disabled memcpy node in front of a wide graph changed how the driver ran it,
from 2.3x faster to 2x slower), so a switch must also pay back its rebuild within
`horizon` replays. Pure Python: tested on the CPU.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir import EXTERNAL


@dataclass(frozen=True)
class Costs:
    """Microseconds, measured on an H200 (`python3 scripts/measure_moved_inputs.py` and
    `scripts/measure_backend.py`; docs/performance.md): host time to re-point one kernel
    node or one memcpy node (the quieter of two runs: 1.5 and 1.1; the other gave 3.0 and
    2.2), the step time an in-graph device-to-device copy adds (fixed part plus bytes /
    bandwidth, fitted: 1.3 us + 1 us per MB), and build + instantiate time per node (13.6 to
    14.4 ms for 1,000 nodes, rounded up)."""
    kernel_patch_us: float = 1.5
    memcpy_patch_us: float = 1.1
    copy_fixed_us: float = 1.3
    copy_bytes_per_us: float = 1.0e6
    build_us_per_node: float = 15.0

    def repoint(self, rate: float, fanout: int) -> float:
        """Expected cost per replay of re-pointing `fanout` nodes that move at `rate`."""
        return rate * fanout * self.kernel_patch_us

    def copy(self, rate: float, nbytes: int, written: bool) -> float:
        """Expected cost per replay of copying in (and out, if written) on every replay."""
        copies = 2 if written else 1
        return copies * (self.copy_fixed_us + nbytes / self.copy_bytes_per_us
                         + rate * self.memcpy_patch_us)


DEFAULT_COSTS = Costs()


def could_win(fanout: int, nbytes: int, written: bool, costs: Costs = DEFAULT_COSTS,
              margin: float = 1.25) -> bool:
    """Would copying beat re-pointing for this input if it moved on every replay? If not,
    auto never watches it."""
    return costs.repoint(1.0, fanout) > margin * costs.copy(1.0, nbytes, written)


class MovePolicy:
    """One input's choice between re-pointing and copying, from its move rate.

    `rate` is an exponential moving average of "moved on this replay" (weight `alpha` for
    the newest), snapped to 0 once negligible. Copying starts only once the input has moved
    on most recent replays (`rate` >= `min_rate`: six moves in a row from rest), saves more
    than `margin` times its cost, and pays back the rebuild of a `nodes`-node graph within
    `horizon` replays; going back needs the same, the other way round.
    """

    def __init__(self, fanout: int, nbytes: int, written: bool, nodes: int,
                 costs: Costs = DEFAULT_COSTS, alpha: float = 0.125, margin: float = 1.25,
                 min_rate: float = 0.5, horizon: int = 1024):
        self.fanout, self.nbytes, self.written = fanout, nbytes, written
        self.costs, self.alpha, self.margin, self.min_rate = costs, alpha, margin, min_rate
        self.rebuild_us = nodes * costs.build_us_per_node
        self.horizon = horizon
        self.mode = "repoint"
        self.rate = 0.0
        # at rest in copy mode, is going back ever worth a rebuild?
        self._back_pays = self._pays(costs.copy(0.0, nbytes, written), 0.0)

    def _pays(self, cost: float, other: float) -> bool:
        return cost > self.margin * other and (cost - other) * self.horizon > self.rebuild_us

    def observe(self, moved: bool) -> bool:
        """Record one replay; True when the input should switch to the other way now."""
        self.rate += ((1.0 if moved else 0.0) - self.rate) * self.alpha
        if self.rate < 1e-3:
            self.rate = 0.0
        repoint = self.costs.repoint(self.rate, self.fanout)
        copy = self.costs.copy(self.rate, self.nbytes, self.written)
        if self.mode == "repoint":
            if self.rate >= self.min_rate and self._pays(repoint, copy):
                self.mode = "copy"
                return True
        elif self._pays(copy, repoint):
            self.mode = "repoint"
            return True
        return False

    @property
    def idle(self) -> bool:
        """At rest and no switch possible without a move: an unchanged replay skips it."""
        return self.rate == 0.0 and (self.mode == "repoint" or not self._back_pays)


class WatchedInput:
    """A device input that may be copied instead of re-pointed: the nodes that use it, the
    policy that chooses (None when copying is forced), and, while copied, the cuda
    backend's static buffer and the copy-in (and copy-out, if written) node of its graph."""

    def __init__(self, buffer: int, nbytes: int, users: list[int], written: bool,
                 policy: MovePolicy | None):
        self.buffer, self.nbytes, self.users, self.written = buffer, nbytes, users, written
        self.policy = policy
        self.static: Any = None
        self.address = 0
        self.copy_in: Any = None
        self.copy_out: Any = None

    @property
    def mode(self) -> str:
        return "copy" if self.policy is None else self.policy.mode


def watched_inputs(plan: Any, base: dict[int, int], mode: str,
                   costs: Costs = DEFAULT_COSTS) -> dict[int, WatchedInput]:
    """buffer -> WatchedInput for the device inputs of `plan` that may be copied: under
    "auto" those where copying could win, under "copy" all, under "repoint" none.

    `base` gives the compiling call's address of each device input and captured array.
    Inputs that events or callbacks name always re-point (those nodes mean the caller's
    memory itself at their point in the graph), and so do inputs that overlap a captured
    array (one memory under two buffers: a copy of one would hide writes from the other).
    """
    if mode == "repoint":
        return {}
    named = {a.buffer for n in plan.nodes if n.kind not in ("kernel", "memcpy", "memset")
             for a in n.op.accesses}
    written = {i.buffer for i in plan.inputs if i.kind == "array" and i.written}
    captured = captured_extents(plan, base)
    watch = {}
    for b in plan.patchable_buffers:
        nbytes = plan.buffers[b].nbytes
        users = sorted({node for node, _, _ in plan.pointer_slots.get(b, ())})
        lo = base.get(b, 0)
        if b in named or not users or not nbytes or not lo or \
                any(x < lo + nbytes and lo < y for x, y in captured):
            continue
        if mode == "copy":
            policy = None
        elif could_win(len(users), nbytes, b in written, costs):
            policy = MovePolicy(len(users), nbytes, b in written, len(plan.nodes), costs)
        else:
            continue
        watch[b] = WatchedInput(b, nbytes, users, b in written, policy)
    return watch


def captured_extents(plan: Any, base: dict[int, int]) -> list[tuple[int, int]]:
    """The bytes of each array `plan` captures by address."""
    return [(base[e.id], base[e.id] + e.nbytes) for e in plan.buffers
            if e.kind == EXTERNAL and e.nbytes]


def overlaps(infos: list, captured: list[tuple[int, int]]) -> frozenset[tuple[int, int]]:
    """(argument, captured array) pairs of a call whose bytes overlap."""
    return frozenset((k, c) for k, i in enumerate(infos) if i is not None
                     for c, (lo, hi) in enumerate(captured)
                     if lo < i.extent[1] and i.extent[0] < hi)
