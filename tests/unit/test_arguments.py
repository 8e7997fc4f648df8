"""What the caller passed: which arrays share memory (property-tested against a brute-force
union of overlapping byte ranges), and the simulator's poisoned fresh memory."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda

import tracegraph as tg
from tracegraph.signature import arguments
from tracegraph.signature.arguments import ArrayInfo


def _brute_force_groups(infos):
    """Connected components of "same placement and some byte in common"."""
    n = len(infos)
    parent = list(range(n))

    def find(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            a, b = infos[i], infos[j]
            if a is None or b is None or a.placement != b.placement:
                continue
            (alo, ahi), (blo, bhi) = a.extent, b.extent
            if max(alo, blo) < min(ahi, bhi):
                parent[find(j)] = find(i)
    return [find(i) if infos[i] is not None else None for i in range(n)]


_info = st.one_of(
    st.none(),
    st.builds(lambda place, start, n, step: ArrayInfo(place, 1024 + 8 * start, (n,), (8 * step,),
                                                      np.dtype(np.float64)),
              st.sampled_from([arguments.HOST, arguments.DEVICE]), st.integers(0, 40),
              st.integers(0, 12), st.sampled_from([1, 1, 2, -1, 3])))


@settings(max_examples=400, deadline=None)
@given(st.lists(_info, min_size=1, max_size=8))
def test_alias_groups_are_the_connected_overlaps(infos):
    got = arguments.alias_groups(infos)
    want = _brute_force_groups(infos)
    for i in range(len(infos)):
        for j in range(len(infos)):
            if infos[i] is None or infos[j] is None:
                assert got[i] is None if infos[i] is None else True
                continue
            assert (got[i][0] == got[j][0]) == (want[i] == want[j]), (infos, got)
    for i, info in enumerate(infos):
        if info is None:
            continue
        members = [k for k in range(len(infos)) if infos[k] is not None and want[k] == want[i]]
        assert got[i][0] == min(members)  # named by its first leaf
        lows = [infos[k].extent[0] for k in members if infos[k].extent[0] < infos[k].extent[1]]
        if info.extent[0] < info.extent[1]:
            assert got[i][1] == info.extent[0] - min(lows)  # offset from the group's start


def test_fresh_simulator_memory_is_poisoned():
    """Memory no kernel wrote reads as 0xFF bytes (NaN, -1) on sim, so a missing write or
    edge shows instead of reading zeros by luck."""
    @cuda.jit
    def read_only(src, dst):
        i = cuda.grid(1)
        if i < dst.size:
            dst[i] = src[i]

    @tg.compile(backend="sim")
    def step(x):
        never_written = tg.empty_like(x)
        out = tg.empty_like(x)
        read_only[1, 8](never_written, out)
        return out

    out = step(np.zeros(8))
    assert out.view(np.uint8).tolist() == [0xFF] * 64
