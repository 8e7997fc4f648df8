"""Each example runs at its small size (the simulator's, or on the GPU) and checks itself
against NumPy: a failed check raises AssertionError."""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
NAMES = ["mlp_inference", "rk4", "rl_env_step", "heat_jacobi", "branches", "decode_step"]


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


def test_examples_have_a_main_and_a_script_entry():
    for name in NAMES:
        with open(os.path.join(EXAMPLES, name + ".py")) as f:
            source = f.read()
        assert "def main(small" in source and 'if __name__ == "__main__":' in source
        # _support must come first: it picks the simulator before Numba is imported
        assert source.index("import _support") < source.index("import numpy")
