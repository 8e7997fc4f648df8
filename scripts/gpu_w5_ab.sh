#!/usr/bin/env bash
# W5's first call, default against the C node batch (TRACEGRAPH_BATCH_NODES=1), alternated
# in one lease (single runs differed by 1.5x between processes): $OUT/w5-ab.log.
source "$(dirname "$0")/_gpu_env.sh"
for i in 1 2 3; do
  for batch in 0 1; do
    TRACEGRAPH_BATCH_NODES=$batch timeout 60 python3 benchmarks/run.py --out /tmp/w5-$batch-$i \
      --only W5 > /dev/null 2>&1
    python3 - "$batch" "$i" "/tmp/w5-$batch-$i/results.json" <<'PY' >> "$OUT/w5-ab.log" 2>&1
import json, sys
batch, i, path = sys.argv[1:]
rows = json.load(open(path))["rows"]
got = {r["contender"]: r.get("metrics", {}) for r in rows}
med = lambda c, m: (got.get(c, {}).get(m) or {}).get("median")
print(f"run {i} batch={batch}: tracegraph first {med('tracegraph', 'first_call_ms')} "
      f"trace {med('tracegraph', 'trace_ms')} lower {med('tracegraph', 'lower_ms')} | "
      f"capture {med('numba_capture', 'first_call_ms')} eager {med('numba_eager', 'first_call_ms')}")
PY
  done
done
