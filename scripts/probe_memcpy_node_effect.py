"""Does one extra root node change how the driver runs a wide graph of independent kernels?

F kernels that all read one input, with nothing, an empty node, a memset node, or a 4-byte
memcpy node (enabled or disabled after instantiation) in front of them. The cuda backend's
copy nodes are such memcpy nodes, which is why it builds them only while an input is copied
(moved_inputs.py). Run: python3 scripts/probe_memcpy_node_effect.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import numpy as np
from numba import cuda
import tracegraph as tg
from tracegraph.backends import cuda as cb
from tracegraph.backends import cuda_handles as handles
from tracegraph import config
from measure_moved_inputs import fanout_program, step_us

os.environ[config.MOVED_INPUTS] = "repoint"
scratch = cuda.device_array(64, np.uint8)
saddr = scratch.device_ctypes_pointer.value
KIND = ["none"]


def add_entry(self):
    """Stands in for CudaExecutable._add_input_copies: adds the probed nodes instead
    ("-sink": a 4-byte memcpy after every sink; "both": a memcpy root and a memcpy sink)."""
    kind = KIND[0]
    roots = [self._gnodes[n.index] for n in self.plan.nodes if not n.deps]
    sinks = [self._gnodes[i] for i in
             sorted(set(self._gnodes) - {d for n in self.plan.nodes for d in n.deps})]
    e = None
    if kind == "empty":
        e = self.gdef.empty()
    elif kind.startswith(("memcpy", "both")):
        e = self.gdef.memcpy(saddr, saddr + 32, 4)
    elif kind.startswith("memset"):
        e = self.gdef.memset(saddr, 0, 4)
    self._probe_entry = e
    for r in roots if e is not None else ():
        r.pred.add(e)
    if kind in ("sink", "both"):
        last = sinks[0].memcpy(saddr + 16, saddr + 48, 4)
        for n in sinks[1:]:
            last.pred.add(n)


cb.CudaExecutable._add_input_copies = add_entry
cb.BRACKET = False  # "both" below is what the backend's bracket does

def gpu_us(f, args):
    start, stop = cuda.event(), cuda.event()
    start.record()
    for _ in range(200):
        f.replay(*args)
    stop.record(); stop.synchronize()
    return cuda.event_elapsed_time(start, stop) * 1e3 / 200

@cuda.jit
def axpb(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b


def forkjoin(a, b, c, d, e, f_, g_, h):
    for arr in (a, b, c, d, e, f_, g_, h):
        for _ in range(16):
            axpb[4, 256](arr, 1.0001, 0.5)


x = cuda.to_device(np.ones(1024, np.float32))
programs = [(f"fan {fan:3d}", fanout_program(fan), (x, cuda.device_array((fan, 1024), np.float32)))
            for fan in (4, 16, 32, 64, 128)]
programs.append(("forkjoin", forkjoin, [cuda.to_device(np.ones(1024, np.float32))
                                         for _ in range(8)]))
KINDS = sys.argv[1].split(",") if len(sys.argv) > 1 else \
    ["none", "empty", "memset", "memcpy", "memcpy-disabled", "sink", "both"]
for name, fn, args in programs:
    for kind in KINDS:
        KIND[0] = kind
        f = tg.compile(fn)
        f(*args)
        exe = f.latest.executable
        if kind.endswith("disabled"):
            err, = handles.driver().cuGraphNodeSetEnabled(exe._exec_handle,
                                                          exe._probe_entry.handle, 0)
            assert int(err) == 0, err
        for _ in range(20):
            f.replay(*args)
        cuda.synchronize()
        s = step_us(f.replay, lambda k: args, 200)
        g = gpu_us(f, args)
        print(f"{name} {kind:16s} step {s:7.1f} us  pipelined {g:7.1f} us", flush=True)
