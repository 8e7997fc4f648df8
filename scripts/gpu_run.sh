#!/usr/bin/env bash
# The whole GPU pass in one command (see docs/gpu.md): environment facts, the quickstart on
# the cuda backend, the full test suite (sim + cuda), the backend numbers (replay costs, moved
# inputs) and the benchmarks. Logs go to $OUT (or ./gpu-out). Usage: bash scripts/gpu_run.sh [quick]
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
nvidia-smi -L | tee "$OUT/env.log"
python3 -c "import numba, numba.cuda, numpy, cuda.core, networkx; print('numba', numba.__version__, 'numpy', numpy.__version__, 'cuda.core', cuda.core.__version__, 'gpu', numba.cuda.is_available())" 2>&1 | tee -a "$OUT/env.log"
python3 examples/quickstart.py 2>&1 | tee "$OUT/quickstart.log"
timeout ${TEST_TIMEOUT:-330} python3 -m pytest -q ${PYTEST_FLAGS--x} -p no:cacheprovider ${PYTEST_ARGS:-tests} 2>&1 | tail -n 60 | tee "$OUT/pytest.log"
timeout 120 python3 scripts/measure_backend.py "$OUT/backend.json" 2>&1 | tee "$OUT/backend.log"
timeout 150 python3 scripts/measure_moved_inputs.py "$OUT/moved_inputs.json" 2>&1 | tee "$OUT/moved_inputs.log"
timeout 60 python3 scripts/probe_memcpy_node_effect.py none,both 2>&1 | tee "$OUT/probe.log"
if [ "$1" != "quick" ] && [ -f benchmarks/run.py ]; then
  timeout ${BENCH_TIMEOUT:-300} python3 benchmarks/run.py --out "$OUT/bench" ${BENCH_ARGS:---quick} 2>&1 | tail -n 40 | tee "$OUT/bench.log"
fi
