"""Docs that run: every ```python block in README.md and docs/*.md runs as written on
Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1), each as a script of its own in a fresh
namespace. A block that is part of a program rather than one (it needs a GPU or NCCL, or
continues an example above it) says so on its first line, `# fragment: <why>`, and is
only compiled, as the body of a function."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent>[ \t]*)```python[ \t]*\n(?P<code>.*?)^(?P=indent)```[ \t]*$",
                   re.M | re.S)
FRAGMENT = "# fragment:"


def _blocks() -> list[tuple[str, str]]:
    """(file:line, code) of every python block, the code dedented to its fence."""
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        for m in FENCE.finditer(text):
            indent = len(m.group("indent"))
            code = "".join(line[indent:] if line[:indent].isspace() else line
                           for line in m.group("code").splitlines(keepends=True))
            line = text.count("\n", 0, m.start()) + 1
            out.append((f"{path.relative_to(ROOT)}:{line}", code))
    return out


BLOCKS = _blocks()
RUN = [(where, code) for where, code in BLOCKS if not code.startswith(FRAGMENT)]

# One process runs every block, each from a file of its own (so that inspect, linecache
# and tracegraph's file:line see real source) with runpy: a fresh module namespace each.
RUNNER = r"""
import contextlib, io, json, runpy, sys, traceback
sys.setswitchinterval(1e-4)  # the simulator polls its threads: shared-memory kernels run faster
results = {}
for where, path in json.load(sys.stdin):
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        results[where] = None
    except BaseException:
        results[where] = traceback.format_exc()[-4000:] + "\nstdout:\n" + out.getvalue()[-2000:]
print("RESULTS " + json.dumps(results))
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("docs_examples")
    jobs = []
    for i, (where, code) in enumerate(RUN):
        path = folder / f"block{i:02d}_{re.sub(r'[^A-Za-z0-9]+', '_', where)}.py"
        path.write_text(code)
        jobs.append((where, str(path)))
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    for name in ("TRACEGRAPH_BACKEND", "TRACEGRAPH_CUDA_PLATFORM"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(jobs), cwd=folder,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULTS ")), None)
    assert line is not None, f"the runner failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(line[len("RESULTS "):])


def test_the_docs_have_python_blocks():
    assert len(RUN) >= 10 and any(w.startswith("README.md") for w, _ in RUN)


@pytest.mark.parametrize("where, code", RUN, ids=[w for w, _ in RUN])
def test_block_runs_on_the_simulator(ran, where, code):
    assert ran[where] is None, f"{where} failed:\n{ran[where]}"


@pytest.mark.parametrize("where, code", [b for b in BLOCKS if b not in RUN],
                         ids=[w for w, c in BLOCKS if (w, c) not in RUN])
def test_fragment_says_why_and_compiles(where, code):
    why = code.splitlines()[0][len(FRAGMENT):].strip()
    assert why, f"{where}: a fragment's first line says why it is one"
    body = "".join("    " + line for line in code.splitlines(keepends=True))
    compile("def fragment():\n" + body, where, "exec")  # (it may `return`, as a body does)
