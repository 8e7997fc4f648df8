"""The graph of examples/decode_step.py as a GPU builds it (ops.linear as cuBLASLt nodes):
every edge is data flow (read after write), none an artefact of an over-wide access (a
layer's cache is its own bytes: layer l's attention never waits on layer l+1's, nor
writes what another layer reads); a layer is seven kernel and library nodes (plus the
memset of the attention's tickets where it splits the cache); a step's nodes are the same
for every position (pos is patched, one graph). Argmax's second launch comes where the
split sizes ask for it (the simulator's sizes here)."""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest
from numba import cuda

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples")


@pytest.fixture(scope="module")
def example():
    sys.path.insert(0, EXAMPLES)
    spec = importlib.util.spec_from_file_location("tracegraph_example_decode_graph",
                                                  os.path.join(EXAMPLES, "decode_step.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(EXAMPLES)


def test_decode_step_edges_are_data_flow(example, monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_MATMUL", "cublas")
    D = example
    cfg = D.Config(vocab=32, d_model=16, heads=2, layers=3, d_ff=32, max_len=8)
    params = D.params_map(cuda.to_device, D.init_params(cfg))
    k_cache, v_cache = D.new_cache(cfg, 4)
    tokens = cuda.to_device(np.zeros(4, np.int32))
    program = D.decode_step.trace(tokens, 0, k_cache, v_cache, params)
    names = [op.name.rstrip("0123456789").removesuffix("_warp")  # layer_norm's kernels
             for op in program.ops if op.kind in ("kernel", "library")]
    layer = ["layer_norm", "cublaslt_linear", "decode_attention_append", "cublaslt_linear",
             "layer_norm", "cublaslt_linear", "cublaslt_linear"]
    second = ("argmax_parts",)  # where the split sizes ask
    assert [n for n in names if n not in second] == \
        ["embed", *layer * cfg.layers, "layer_norm", "cublaslt_linear", "argmax_chunks"]
    hazards = {(program.ops[u].name, program.ops[v].name, d["hazard"])
               for u, v, d in program.graph.edges(data=True)}
    assert {h for *_, h in hazards} == {"RAW"}, hazards
    # the attention of each layer touches its own layer's cache bytes only
    cache = {leaf.buffer for leaf in program.inputs if leaf.path in ("k_cache", "v_cache")}
    assert len(cache) == 2
    spans = [sorted((a.start, a.stop) for a in op.accesses if a.buffer in cache)
             for op in program.ops if op.name == "decode_attention_append"]
    per_layer = k_cache.nbytes // cfg.layers
    for layer_index, span in enumerate(spans):
        assert all(layer_index * per_layer <= lo and hi <= (layer_index + 1) * per_layer
                   for lo, hi in span), (layer_index, span)
    assert D.decode_step.trace(tokens, 5, k_cache, v_cache, params).ops == program.ops
