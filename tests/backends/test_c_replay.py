"""The C helper's replay of an armed call (backends/cuda/_graphlaunch.c): it launches only
when every argument is the very object the executable is armed with, and hands back what
the executable says. A graph exec of 0 checks without launching (no driver here)."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from armed_replay import Armed, Obj, dry_run, graphlaunch, replay


@dry_run
def test_the_armed_objects_replay_and_return_what_the_executable_says():
    a, b = Obj(), Obj()
    refs = (weakref.ref(a), (2.0,), weakref.ref(b))
    assert replay(Armed(refs, (0, 0, -1, None, ())), (a, 2.0, b)) is None
    assert replay(Armed(refs, (0, 0, 2, None, ())), (a, 2.0, b)) is b
    assert replay(Armed(refs, (0, 0, 0, None, ())), (a, 2.0, b)) is a


@pytest.mark.parametrize("case", ["other object", "equal scalar", "fewer", "more",
                                  "not armed", "no fast", "result out of range",
                                  "another stream", "a stream where armed without"])
def test_anything_else_is_not_replayed(case):
    a, b = Obj(), Obj()
    x = 2.0
    refs = (weakref.ref(a), (x,))
    ex = Armed(refs, (0, 0, -1, None, ()))
    args: tuple = (a, x)
    if case == "other object":
        args = (Obj(), x)
    elif case == "equal scalar":  # the same value in another object: not the armed call
        args = (a, float("2.0") + 0.0 * len(str(b)))
        assert args[1] == x
        if args[1] is x:
            pytest.skip("the interpreter shares the float")
    elif case == "fewer":
        args = (a,)
    elif case == "more":
        args = (a, x, b)
    elif case == "not armed":
        ex.armed = None
    elif case == "no fast":
        ex.fast = None
    elif case == "result out of range":
        ex.fast = (0, 0, 5, None, ())
    elif case == "another stream":
        ex.fast = (0, 0, -1, Obj(), ())
        assert replay(ex, args, Obj()) is NotImplemented
    assert replay(ex, args, Obj() if case == "a stream where armed without" else None) \
        is NotImplemented


@dry_run
def test_a_call_on_the_armed_stream_object_replays():
    a, s = Obj(), Obj()
    ex = Armed((weakref.ref(a),), (0, 0, 0, s, ()))
    assert replay(ex, (a,), s) is a
    assert replay(ex, (a,)) is NotImplemented


def test_a_collected_argument_is_not_replayed():
    a = Obj()
    ex = Armed((weakref.ref(a),), (0, 0, -1, None, ()))
    del a
    gc.collect()
    assert replay(ex, (Obj(),)) is NotImplemented


@dry_run
def test_a_numpy_argument_by_identity():
    x = np.zeros(3)
    ex = Armed(((x,),), (0, 0, 0, None, ()))
    assert replay(ex, (x,)) is x
    assert replay(ex, (x.copy(),)) is NotImplemented


def test_bad_calls_raise():
    with pytest.raises(TypeError):
        replay(Armed((), (0, 0, -1, None, ())), [])
    with pytest.raises(AttributeError):
        replay(object(), ())


def test_the_python_launcher_makes_its_handles_once_and_raises_on_an_error(monkeypatch):
    """Where the C helper is not built, replays launch through Executable.launcher."""
    from types import SimpleNamespace

    from tracegraph.backends.cuda import handles, rawnodes
    calls = []
    fake = SimpleNamespace(CUstream=lambda h: ("stream", h),
                           cuGraphLaunch=lambda g, s: (calls.append((g, s)) or (rc[0],)),
                           CUresult=SimpleNamespace(CUDA_SUCCESS=0))
    rc = [0]
    monkeypatch.setattr(rawnodes, "driver", lambda: fake)
    monkeypatch.setattr(handles, "driver", lambda: fake)
    ex = rawnodes.Executable.__new__(rawnodes.Executable)
    ex.handle, ex.is_closed = "exec", True
    go = ex.launcher(SimpleNamespace(handle=7))
    go()
    go()
    assert calls == [("exec", ("stream", 7))] * 2

    class Err(int):
        name = "CUDA_ERROR_LAUNCH_FAILED"
    rc[0] = Err(719)
    with pytest.raises(RuntimeError, match="CUDA_ERROR_LAUNCH_FAILED"):
        go()


# ---- the C entry of a compiled function's call (Entry): the Python frames it skips

Entry = graphlaunch.Entry


class Function:
    def __init__(self, hot):
        self._hot, self._hits = hot, {}


class Executable(Armed):
    def __init__(self, armed, fast, platform):
        super().__init__(armed, fast)
        self.platform = platform


def _entry(hot, tracing=None, current="P"):
    from types import SimpleNamespace
    slow_calls = []

    def slow(*args, **kwargs):
        slow_calls.append((args, kwargs))
        return "slow"
    local = SimpleNamespace() if current is None else SimpleNamespace(platform=current)
    f = Function(hot)
    return f, Entry(f, slow, tracing if tracing is not None else [0], local), slow_calls


@dry_run
def test_the_entry_replays_the_armed_call_and_counts_a_hit():
    a, s = Obj(), Obj()
    f, entry, slow = _entry(Executable((weakref.ref(a),), (0, 0, 0, None, ()), "P"))
    assert entry(a) is a and entry(a) is a
    assert f._hits == {0: 2} and slow == []
    f._hot.fast = (0, 0, -1, s, ())
    assert entry(a, stream=s) is None and slow == []


@pytest.mark.parametrize("case", ["tracing", "no hot", "other device", "thread's first",
                                  "other object", "other keyword", "another stream",
                                  "other backend"])
def test_the_entry_takes_the_slow_path_otherwise(case):
    a = Obj()
    hot = Executable((weakref.ref(a),), (0, 0, 0, None, ()), "P")
    f, entry, slow = _entry(hot, tracing=[1] if case == "tracing" else None,
                            current={"other device": "Q", "thread's first": None}.get(case, "P"))
    args, kwargs = (a,), {}
    if case == "no hot":
        f._hot = None
    elif case == "other object":
        args = (Obj(),)
    elif case == "other keyword":
        kwargs = {"n": 3}
    elif case == "another stream":
        kwargs = {"stream": Obj()}
    elif case == "other backend":
        del hot.platform
    assert entry(*args, **kwargs) == "slow"
    assert slow == [(args, kwargs)] and f._hits == {}


def test_the_entry_passes_errors_of_the_slow_path_through():
    def slow(*args, **kwargs):
        raise KeyError("from the slow path")
    entry = Entry(Function(None), slow, [0], object())
    with pytest.raises(KeyError, match="from the slow path"):
        entry(1)
    with pytest.raises(TypeError):
        Entry(1, 2)
