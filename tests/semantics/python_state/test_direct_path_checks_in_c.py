"""The C replay's checks of the Python-state contract (backends/cuda/_graphlaunch.c),
before it replays an armed call, agree with contract.holds: each root (a global, a closure
cell, an object, an argument, key=), attribute chains, identity, a method read again,
equality, absence, an array's layout; a check that lets the executable be re-armed is a
miss. A graph exec of 0 checks without launching (no driver here)."""
from __future__ import annotations

import weakref

import numpy as np
from armed_replay import Armed, Obj, dry_run, replay


def _both(checks, args, armed):
    """What the C replay and contract.holds say of the checks (they must agree)."""
    from tracegraph.contract import holds
    ex = Armed(tuple(weakref.ref(x) for x in armed), (0, 0, 0, None, checks))
    in_c = replay(ex, args) is not NotImplemented
    assert in_c == holds(checks, args)
    return in_c


@dry_run
def test_each_root_and_attribute_chain_is_checked_in_c_as_in_python():
    """Roots: a globals dict (0), a closure cell (1), an object (2), an argument (3), a
    key= call (4); attributes after it; compared by identity (0) or with == (20)."""
    a, kernel, other = Obj(), Obj(), Obj()
    scope = {"k": kernel}
    holder = Obj()
    holder.cfg = Obj()
    holder.cfg.act = kernel

    def closure():
        return kernel
    cell = closure.__closure__[0]
    state = {"v": (1, 2)}
    checks = ((0, scope, "k", (), kernel), (1, cell, None, (), kernel),
              (2, holder, None, ("cfg", "act"), kernel), (3, None, 0, ("tag",), "x"),
              (24, lambda: state["v"], None, (), (1, 2)))
    a.tag = "x"
    assert _both(checks, (a,), (a,))
    for undo, redo in ((lambda: scope.__setitem__("k", other),
                        lambda: scope.__setitem__("k", kernel)),
                       (lambda: scope.pop("k"), lambda: scope.__setitem__("k", kernel)),
                       (lambda: setattr(holder.cfg, "act", other),
                        lambda: setattr(holder.cfg, "act", kernel)),
                       (lambda: delattr(holder, "cfg"), lambda: setattr(holder, "cfg", Obj())
                        or setattr(holder.cfg, "act", kernel)),
                       (lambda: setattr(a, "tag", "y"), lambda: setattr(a, "tag", "x")),
                       (lambda: state.__setitem__("v", (1, 3)),
                        lambda: state.__setitem__("v", (1, 2)))):
        undo()
        assert not _both(checks, (a,), (a,))
        redo()
        assert _both(checks, (a,), (a,))
    kernel = other  # the closure's cell now holds another
    assert not _both(checks, (a,), (a,))


@dry_run
def test_absence_and_a_second_read_of_a_method_in_c_as_in_python():
    a = Obj()
    scope: dict = {}
    absent = ((30, scope, "LATER", (), None),)  # a global not set (yet)
    assert _both(absent, (a,), (a,))
    scope["LATER"] = 1
    assert not _both(absent, (a,), (a,))

    class Model:
        def helper(self):
            pass
    m = Model()
    method = ((2, m, None, ("helper",), m.helper),)  # a new bound method at every read
    assert _both(method, (a,), (a,))
    m.helper = lambda: None  # set on the instance: another function
    assert not _both(method, (a,), (a,))
    items = []
    builtin = ((2, items, None, ("append",), items.append),)
    assert _both(builtin, (a,), (a,))
    assert not _both(((2, [], None, ("append",), items.append),), (a,), (a,))


@dry_run
def test_an_arrays_layout_is_checked_in_c_and_in_python():
    """A NumPy array found by a chain: the very array, of the same shape, strides and
    dtype (a NumPy array can be reshaped in place)."""
    a, h = Obj(), np.zeros(4)
    scope = {"H": h}

    def checks():
        return ((10, scope, "H", (), (h, (4,), (8,), np.dtype(np.float64))),)
    assert _both(checks(), (a,), (a,))
    h[:] = 7.0  # refilled in place: the same layout
    assert _both(checks(), (a,), (a,))
    h.shape = (2, 2)
    assert not _both(checks(), (a,), (a,))
    h.shape = (4,)
    assert _both(checks(), (a,), (a,))
    scope["H"] = np.zeros(4)  # another array of the same layout
    assert not _both(checks(), (a,), (a,))


@dry_run
def test_a_check_that_lets_the_executable_be_rearmed_is_a_miss():
    """A check may run Python (a property), during which another thread may re-point or
    close the executable: what was armed before is not launched then."""
    a, kernel = Obj(), Obj()

    class Cfg:
        @property
        def act(self):
            ex.armed = (weakref.ref(Obj()),)  # what another thread's call would do
            return kernel
    cfg = Cfg()
    ex = Armed((weakref.ref(a),), (0, 0, 0, None, ((2, cfg, None, ("act",), kernel),)))
    assert replay(ex, (a,)) is NotImplemented

    class Steady:
        act = kernel
    ex = Armed((weakref.ref(a),), (0, 0, 0, None, ((2, Steady(), None, ("act",), kernel),)))
    assert replay(ex, (a,)) is a
