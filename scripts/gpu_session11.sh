#!/usr/bin/env bash
# The ninth session's third lease: the whole cuda-backend suite after round 29 (type and
# absence checks, kinds 40/50 in the C entry), then where W5's first call goes on the GPU
# (scripts/profile_compile.py: phases and a cProfile).
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
start=$(date +%s)
TRACEGRAPH_TEST_BACKENDS=cuda timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q \
  -n ${WORKERS:-12} -p no:cacheprovider -rfE -m "not gpu_memory" tests > "$OUT/pytest.log" 2>&1
echo "pytest rc=$? in $(( $(date +%s) - start )) s" >> "$OUT/pytest.log"
timeout 150 python3 scripts/profile_compile.py "$OUT/profile_compile.txt" > /dev/null 2> "$OUT/profile_compile.err"
echo "profile rc=$?" >> "$OUT/profile_compile.err"
