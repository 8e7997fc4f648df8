"""Each example runs at its small size (the simulator's, or on the GPU) and checks itself
against NumPy: a failed check raises AssertionError."""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
NAMES = ["mlp_inference", "rk4", "rl_env_step", "heat_jacobi", "branches", "decode_step",
         "solve_until_converged", "rl_rollout", "data_parallel_step"]


@pytest.fixture(scope="module")
def load():
    sys.path.insert(0, EXAMPLES)  # the examples import their _support module
    old = sys.getswitchinterval()
    modules = {}

    def load(name):
        if name not in modules:
            spec = importlib.util.spec_from_file_location(f"tracegraph_example_{name}",
                                                          os.path.join(EXAMPLES, name + ".py"))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            modules[name] = module
        return modules[name]
    yield load
    sys.path.remove(EXAMPLES)
    sys.setswitchinterval(old)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "branches"])
def test_example_runs_and_checks_itself(load, name, capsys):
    load(name).main(small=True)
    out = capsys.readouterr().out
    assert "PASS" in out and "FAIL" not in out


def test_branches_example_writes_the_dag(load, tmp_path, capsys):
    paths = load("branches").main(small=True, out_dir=str(tmp_path))
    out = capsys.readouterr().out
    assert "PASS four chains joined" in out and "4 can start at once" in out
    with open(paths["dot"]) as f:
        dot = f.read()
    assert dot.startswith('digraph "four_chains"')
    for lane in range(4):
        assert f"lane {lane}" in dot
    assert dot.count("smooth3[") == 4 and dot.count("tanh[") == 4
    if "svg" in paths:
        with open(paths["svg"]) as f:
            assert "<svg" in f.read()


def test_device_loops_count_numpys_iterations(load):
    """The tg.while_ loops of the two control-flow examples, at sizes main() does not use:
    the device counter (loop.iterations) is NumPy's iteration count, the results NumPy's."""
    solver = load("solve_until_converged")
    u0 = solver.initial(8)
    for tol, limit in ((5e-2, 500), (1e-9, 7)):  # converges / stops at max_iterations
        want_u, want_res, want_it = solver.reference(u0, tol, limit)
        u = solver.cuda.to_device(u0)
        _, res, iterations = solver.make_solver(limit)(u, tol)
        assert solver._support.host(iterations).tolist() == [want_it]
        assert solver._support.host(res).tolist() == [want_res]
        assert want_it == limit or want_res < tol <= solver.reference(u0, tol, want_it - 1)[1]
        np.testing.assert_allclose(u.copy_to_host(), want_u, rtol=1e-12, atol=1e-12)

    rl = load("rl_rollout")
    start = rl.environments(10, 6)
    want, want_it = rl.reference(start, 6, 25, 26)
    arrays = rl._support.device(*start)
    iterations = rl.make_rollout(26)(*arrays, 6, 25)
    assert rl._support.host(iterations).tolist() == [want_it] and want_it == want[3].max()
    for got, ref in zip(arrays, want):
        np.testing.assert_array_equal(got.copy_to_host(), ref)


def test_examples_have_a_main_and_a_script_entry():
    for name in NAMES:
        with open(os.path.join(EXAMPLES, name + ".py")) as f:
            source = f.read()
        assert "def main(small" in source and 'if __name__ == "__main__":' in source
        # _support must come first: it picks the simulator before Numba is imported
        assert source.index("import _support") < source.index("import numpy")
