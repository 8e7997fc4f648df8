"""The hand-built CUDA C++ graph contender (W1, W2): compiled with nvcc into a
temporary directory at run time, run once, its JSON parsed into rows."""
import json
import os
import subprocess
import tempfile

from benchmarks.common import row

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpp", "graphs.cu")


class Native:
    def __init__(self, env, w1_ns, w1_size, w1_block, w2_chains, w2_len):
        self.error = None     # the build or the run failed
        self.skip = None      # not attempted (no GPU, no nvcc)
        self.data = None
        self.cmd = None
        if env.nvcc is None:
            self.skip = env.notes.get("nvcc", "nvcc not found")
            return
        cfg = env.cfg
        arch = f"sm_{env.cc[0]}{env.cc[1]}" if env.cc else "sm_90"
        try:
            with tempfile.TemporaryDirectory(prefix="tg_bench_") as tmp:
                exe = os.path.join(tmp, "graphs")
                build = [env.nvcc, "-O3", f"-arch={arch}", "-o", exe, SRC]
                subprocess.run(build, check=True, capture_output=True, text=True, timeout=300)
                self.cmd = [exe, "--n", ",".join(map(str, w1_ns)), "--size", str(w1_size),
                            "--block", str(w1_block), "--chains", str(w2_chains),
                            "--len", str(w2_len), "--warmup", str(cfg.warmup),
                            "--iters", str(cfg.iters_max), "--pk", str(cfg.pipelined_k),
                            "--reps", str(max(cfg.pipelined_reps_min, cfg.iters_max // cfg.pipelined_k))]
                out = subprocess.run(self.cmd, check=True, capture_output=True, text=True,
                                     timeout=300)
                self.data = json.loads(out.stdout)
                self.cmd = " ".join(build) + " && graphs " + " ".join(self.cmd[1:])
        except subprocess.CalledProcessError as e:
            self.error = f"{' '.join(map(str, e.cmd))[:200]} failed ({e.returncode}): {e.stderr[-800:]}"
        except Exception as e:  # noqa: BLE001
            self.error = f"{type(e).__name__}: {e}"

    def _skip(self, wl, case, names):
        if self.skip:
            return [row(wl, case, n, status="skipped", note=self.skip) for n in names]
        return [row(wl, case, n, status="error", note=self.error) for n in names]

    def w1_rows(self, env, wl, case, n):
        names = ["cpp_eager", "cpp_graph"]
        if self.data is None:
            return self._skip(wl, case, names)
        hit = [d for d in self.data["w1"] if d["n"] == n]
        if not hit:
            return [row(wl, case, nm, status="error", note=f"no C++ result for N={n}") for nm in names]
        d = hit[0]
        rows = []
        for nm, key in (("cpp_eager", "eager"), ("cpp_graph", "graph")):
            m = dict(d[key])
            m["per_node_us"] = _scaled(m["step_pipelined_us"], 1 / n)
            rows.append(row(wl, case, nm, metrics=m, check="n/a",
                            note="CUDA C++ <<<>>> launches" if key == "eager" else
                            f"cudaGraphAddKernelNode chain; instantiate {d['instantiate_us']:.0f} us",
                            build_us=d["build_us"], instantiate_us=d["instantiate_us"]))
        return rows

    def w2_rows(self, env, wl, case, nodes):
        names = ["cpp_eager", "cpp_graph_serial", "cpp_graph_dag"]
        if self.data is None:
            return self._skip(wl, case, names)
        d = self.data["w2"]
        rows = []
        for nm, key, note in (("cpp_eager", "eager", "CUDA C++ launches on one stream"),
                              ("cpp_graph_serial", "serial", "explicit graph, chains serialized"),
                              ("cpp_graph_dag", "dag", "explicit graph, 8 parallel chains + join")):
            m = dict(d[key])
            m["per_node_us"] = _scaled(m["step_pipelined_us"], 1 / nodes)
            rows.append(row(wl, case, nm, metrics=m, check="n/a", note=note))
        return rows


def _scaled(m, f):
    return {k: (v * f if k != "n" else v) for k, v in m.items()}
