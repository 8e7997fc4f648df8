#!/usr/bin/env bash
# The performance measurements in one command (about 7 minutes on the H200): the full benchmark
# run (benchmarks/run.py, every workload), where a replay's host time goes
# (scripts/profile_replay.py) and why a Numba kernel node costs more than a C++ one
# (scripts/probe_kernel_params.py). Logs and JSON in $OUT.
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
timeout ${PROBE_TIMEOUT:-90} python3 scripts/probe_kernel_params.py "$OUT/params.json" > "$OUT/probe.log" 2>&1
echo "probe rc=$?" >> "$OUT/probe.log"
timeout ${PROFILE_TIMEOUT:-90} python3 scripts/profile_replay.py "$OUT/profile.json" >> "$OUT/probe.log" 2>&1
echo "profile rc=$?" >> "$OUT/probe.log"
timeout ${BENCH_TIMEOUT:-420} python3 benchmarks/run.py --out /tmp/bench ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
echo "bench rc=$?" >> "$OUT/bench.log"
cp /tmp/bench/results.json "$OUT/bench.json"; cp /tmp/bench/results.md "$OUT/bench.md"
cp /tmp/bench/chart.png "$OUT/chart.png" 2>/dev/null
