#!/usr/bin/env bash
# The ninth session's one full lease (under the 600 s a command may run, at most 8 files
# back): the whole cuda-backend suite, the full benchmark run (issue 15's table), then where
# W5's first call goes on the GPU (profile_compile.py).
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
start=$(date +%s)
TRACEGRAPH_TEST_BACKENDS=cuda timeout ${TEST_TIMEOUT:-130} python3 -m pytest -q \
  -n ${WORKERS:-12} -p no:cacheprovider -rfE -m "not gpu_memory" tests > "$OUT/pytest.log" 2>&1
echo "pytest rc=$? in $(( $(date +%s) - start )) s" >> "$OUT/pytest.log"
start=$(date +%s)
timeout ${BENCH_TIMEOUT:-330} python3 benchmarks/run.py --out /tmp/bench > "$OUT/bench.log" 2>&1
echo "bench rc=$? in $(( $(date +%s) - start )) s" >> "$OUT/bench.log"
cp /tmp/bench/results.md /tmp/bench/results.json /tmp/bench/chart.png "$OUT/" 2>/dev/null
timeout 60 python3 scripts/profile_compile.py "$OUT/profile_compile.txt" > /dev/null 2>> "$OUT/bench.log"
echo "profile rc=$?" >> "$OUT/bench.log"
