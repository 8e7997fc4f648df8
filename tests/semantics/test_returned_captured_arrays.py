"""A device array the traced function returns without having received or made it (a
global, a closure's, an attribute of an argument) is handed back itself, as eagerly: the
same object, with what the graph wrote into it; the name it was found by is checked on
every call, so rebinding it returns the new array after a new trace. A NumPy array made or
named while tracing cannot be made again by a replay: a TraceError in words the docs use
(no simulator class)."""
from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from small_kernels import scale

N = 16
G = cuda.to_device(np.zeros(N, np.float32))
HOST = np.zeros(N, np.float32)


def _writes_global(x):
    scale[1, N](x, 2.0, G)
    return G


def test_a_global_device_array_returned_is_that_array(backend):
    global G
    f = tg.compile(_writes_global, backend=backend)
    x = cuda.to_device(np.arange(N, dtype=np.float32))
    assert f(x) is G
    np.testing.assert_array_equal(G.copy_to_host(), 2 * np.arange(N))
    x2 = cuda.to_device(np.ones(N, np.float32))
    assert f.replay(x2) is G
    np.testing.assert_array_equal(G.copy_to_host(), np.full(N, 2.0))
    old, G = G, cuda.to_device(np.zeros(N, np.float32))
    try:
        with pytest.raises(tg.TracegraphError):
            f.replay(x2)  # the name G finds another array: the graph is stale
        assert f(x2) is G  # a call traces again, as eager Numba would use the new G
        np.testing.assert_array_equal(G.copy_to_host(), np.full(N, 2.0))
        np.testing.assert_array_equal(old.copy_to_host(), np.full(N, 2.0))
    finally:
        G = old


class Model:
    def __init__(self):
        self.state = cuda.to_device(np.full(N, 5.0, np.float32))


@pytest.mark.parametrize("view", [False, True], ids=["attribute", "view of it"])
def test_an_attribute_or_a_view_of_it_is_returned_as_eagerly(backend, view):
    def step(m, x, out):
        scale[1, N](x, 3.0, out)
        return (m.state[4:] if view else m.state), out

    m = Model()
    x, out = cuda.to_device(np.ones(N, np.float32)), cuda.device_array(N, np.float32)
    eager = step(m, x, out)
    f = tg.compile(step, backend=backend)
    for got in (f(m, x, out), f.replay(m, x, out)):
        assert view or got[0] is m.state
        for g, e in zip(got, eager):
            np.testing.assert_array_equal(g.copy_to_host(), e.copy_to_host())


def test_a_host_array_made_or_named_while_tracing_is_refused_in_plain_words(backend):
    def step(x):
        scale[1, N](x, 2.0, x)
        return HOST

    f = tg.compile(step, backend=backend)
    with pytest.raises(tg.TraceError, match="returned a host array at result that is neither "
                                            "one of its arguments nor made by the graph") as e:
        f(cuda.to_device(np.ones(N, np.float32)))
    assert "Fake" not in str(e.value) and "make host arrays outside it" in e.value.fix
