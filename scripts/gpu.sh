#!/usr/bin/env bash
# The GPU check in one command, from the repository root (docs/gpu.md):
#
#   OUT=gpu-out bash scripts/gpu.sh
#
# 1. env.log        the GPU, the versions, the quickstart on the cuda backend
# 2. pytest-sim.log the whole suite with the `backend` fixture on sim only
# 3. pytest-cuda.log the whole suite with the `backend` fixture on cuda only, then the tests
#                   that read the GPU's free memory (alone), then the GPU profile of the
#                   random programs
# 4. bench.log, results.json, results.md, chart.png
#                   benchmarks/run.py in full mode (every workload)
#
# Seven files under $OUT (default gpu-out/). The benchmark run also rewrites
# benchmarks/results-<kind>.md/.json and its table in docs/performance.md in this tree;
# on a machine whose tree does not come back, publish from the copy of results.json:
# `python benchmarks/run.py --publish $OUT/results.json`.
#
# Switches: SKIP_TESTS=1, SKIP_BENCH=1; BENCH_ARGS (e.g. "--quick", "--only W1,W7": such runs
# do not publish); WORKERS (pytest-xdist processes, default 12 where xdist is installed);
# TEST_TIMEOUT, FUZZ_EXAMPLES, FUZZ_TIMEOUT, BENCH_TIMEOUT.
set -o pipefail
cd "$(dirname "$0")/.."
source scripts/_gpu_env.sh

{
  nvidia-smi -L
  python3 -c "import numba, numba.cuda, numpy, cuda.core, tracegraph; print('numba', numba.__version__, 'numpy', numpy.__version__, 'cuda.core', cuda.core.__version__, 'tracegraph', tracegraph.__version__, 'gpu', numba.cuda.is_available())"
  timeout 90 python3 examples/quickstart.py
  echo "quickstart rc=$?"
} > "$OUT/env.log" 2>&1

# A kernel fault poisons the process it happened in: spread over processes, a fault fails
# only its own worker's later tests (look for the worker's first failure).
PARALLEL=""
if python3 -c "import xdist" 2>/dev/null; then PARALLEL="-n ${WORKERS:-12}"; fi

suite() {  # $1: the backend the `backend` fixture runs; the log
  local start=$(date +%s)
  TRACEGRAPH_TEST_BACKENDS=$1 timeout ${TEST_TIMEOUT:-420} python3 -m pytest -q $PARALLEL \
    -p no:cacheprovider -rfE -m "not gpu_memory and not slow" tests benchmarks > "$2" 2>&1
  echo "pytest ($1) rc=$? in $(( $(date +%s) - start )) s" >> "$2"
}

if [ -z "$SKIP_TESTS" ]; then
  suite sim "$OUT/pytest-sim.log"
  suite cuda "$OUT/pytest-cuda.log"
  # other processes' allocations move the GPU's free memory: these tests run alone
  timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu_memory tests \
    >> "$OUT/pytest-cuda.log" 2>&1
  echo "gpu_memory rc=$?" >> "$OUT/pytest-cuda.log"
  TRACEGRAPH_FUZZ=gpu TRACEGRAPH_FUZZ_GPU_EXAMPLES=${FUZZ_EXAMPLES:-300} TRACEGRAPH_TEST_BACKENDS=cuda \
    timeout ${FUZZ_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider -rfE -m slow tests \
    >> "$OUT/pytest-cuda.log" 2>&1
  echo "random programs (GPU profile) rc=$?" >> "$OUT/pytest-cuda.log"
fi

if [ -z "$SKIP_BENCH" ]; then
  timeout ${BENCH_TIMEOUT:-480} python3 benchmarks/run.py --out /tmp/tracegraph-bench \
    ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
  echo "bench rc=$?" >> "$OUT/bench.log"
  for f in results.json results.md chart.png; do
    cp "/tmp/tracegraph-bench/$f" "$OUT/$f" 2>/dev/null
  done
fi
