"""Device memory used while 80 graphs are compiled and dropped with moved inputs copied
(TRACEGRAPH_MOVED_INPUTS=copy): a flat line means the static copies are freed with their
graph. On a GPU, from the repository root:

    python scripts/probe_copy_memory.py
"""
import gc
import os
import sys

sys.path.insert(0, "tests")
os.environ["TRACEGRAPH_MOVED_INPUTS"] = "copy"
import numpy as np
from numba import cuda
from test_moved_inputs import wide_reader, watched
def free():
    gc.collect(); cuda.synchronize()
    c = cuda.current_context(); c.memory_manager.deallocations.clear()
    return c.get_memory_info()[0]
x = cuda.to_device(np.ones(1 << 18))
f = wide_reader("cuda"); f(x)
f0 = free(); print("start", f0)
for k in range(80):
    g = wide_reader("cuda"); g(x); assert watched(g); del g
    if k % 5 == 4:
        print(k + 1, (f0 - free()) / 2**20, "MiB used since start", flush=True)
