#!/usr/bin/env bash
# The tenth session's W5 lease: where the first call goes against capture (phases, the C
# node batch against the default, interleaved in one process), the W5 benchmark, and the
# whole cuda-backend suite on the changed compile path. Logs under $OUT.
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
nvidia-smi -L > "$OUT/w5.log"
timeout 120 python3 scripts/probe_w5_parts.py "$OUT/w5_parts.json" >> "$OUT/w5.log" 2>&1
echo "probe rc=$?" >> "$OUT/w5.log"
timeout 120 python3 benchmarks/run.py --out /tmp/bench5 --only W5 >> "$OUT/w5.log" 2>&1
echo "bench rc=$?" >> "$OUT/w5.log"
grep -A8 "^## W5" /tmp/bench5/results.md >> "$OUT/w5.log"
if [ "$1" != "nosuite" ]; then
  start=$(date +%s)
  TRACEGRAPH_TEST_BACKENDS=cuda timeout ${TEST_TIMEOUT:-130} python3 -m pytest -q \
    -n ${WORKERS:-12} -p no:cacheprovider -rfE -m "not gpu_memory" tests > "$OUT/pytest.log" 2>&1
  echo "pytest rc=$? in $(( $(date +%s) - start )) s" >> "$OUT/pytest.log"
fi
