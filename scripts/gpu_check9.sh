#!/usr/bin/env bash
# The ninth session's last lease: the cuda-backend suite after rounds 30 and 31, and W5
# after the build changes made since the full run, default and with the C node batch
# (TRACEGRAPH_BATCH_NODES=1) alternated, three times each.
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
start=$(date +%s)
TRACEGRAPH_TEST_BACKENDS=cuda timeout ${TEST_TIMEOUT:-130} python3 -m pytest -q \
  -n ${WORKERS:-12} -p no:cacheprovider -rfE -m "not gpu_memory" tests > "$OUT/pytest.log" 2>&1
echo "pytest rc=$? in $(( $(date +%s) - start )) s" >> "$OUT/pytest.log"
for i in 1 2 3; do
  for batch in 0 1; do
    echo "run $i batch=$batch" >> "$OUT/w5.log"
    TRACEGRAPH_BATCH_NODES=$batch timeout 60 python3 benchmarks/run.py --out /tmp/w5-$i-$batch \
      --only W5 2>&1 | grep "1000 launches" >> "$OUT/w5.log"
  done
done
