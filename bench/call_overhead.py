#!/usr/bin/env python3
"""What one decode call of a packed Linear costs on the user's path, level by level (the
guest side of bench/call_overhead.sh; runs in the riscv64 root filesystem under the
rvvcount plugin).

For each format (bf16, int8, int4) and shape, a one-layer model goes through
``compile_linears`` as a user's would; after a warm-up, ``--calls`` calls at M=1 are
counted in one marker region per level:

* ``module``: ``layer(x)``, the call every transformers model makes (nn.Module.__call__,
  forward, the op, the kernel);
* ``op``: the layer's operator called directly (what a compiled graph's extern call does);
* ``artifact`` (BF16): the compiled M=1 artifact of the regional runtime, the path a
  decode call took before it called the op directly;
* ``empty``: the same Python loop calling a no-op: the loop's own cost.

Region id = 1 + 4 * shape_index + level_index. Prints one JSON line per (format, shape)
with the region ids, the group size and which operator kernels ran (``ops.kernels()``);
bench/call_overhead.sh joins them with the plugin's counts and the kernel-only count of
bench/linear_bench.
"""
from __future__ import annotations

import argparse
import json

import torch

import rvv_inductor
from rvv_inductor import _native, ops

LEVELS = ("module", "op", "artifact", "empty")


def _noop(*_):
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--format", required=True, choices=("bf16", "int8", "int4"))
    ap.add_argument("--shapes", default="1536x1536b,1536x8960,8960x1536",
                    help="KxN[b] (b: with a bias), comma-separated")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--levels", default=",".join(LEVELS))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rvv_inductor.enable()
    mark = _native.lib().rvv_count_region
    levels = a.levels.split(",")
    for si, spec in enumerate(a.shapes.split(",")):
        bias = spec.endswith("b")
        k, n = (int(v) for v in spec.rstrip("b").split("x"))
        model = torch.nn.Sequential(torch.nn.Linear(k, n, bias=bias, dtype=torch.bfloat16))
        with torch.no_grad():
            model[0].weight.normal_(0, 0.02)
        report = rvv_inductor.compile_linears(model, weights=a.format)
        layer = model[0]
        x = torch.randn(1, 1, k, dtype=torch.bfloat16)
        op_call = _op_call(layer)
        art = _artifact_call(layer)
        calls = {"module": lambda: layer(x), "op": lambda: op_call(x), "empty": lambda: _noop(x),
                 "artifact": (lambda: art(x)) if art else None}
        ref = torch.nn.functional.linear(x.float(), layer.weight.float(), layer.bias.float() if bias else None)
        with torch.inference_mode():
            for _ in range(a.warmup):
                for lv in levels:
                    if calls[lv] is not None:
                        y = calls[lv]()
            err = float((layer(x).float() - ref).abs().max() / ref.abs().max())
            regions = {}
            for li, lv in enumerate(LEVELS):
                if lv not in levels or calls[lv] is None:
                    continue
                rid = 1 + len(LEVELS) * si + li
                fn = calls[lv]
                mark(rid, 1)
                for _ in range(a.calls):
                    y = fn()
                mark(rid, 0)
                regions[lv] = rid
            del y
        print(json.dumps({"format": a.format, "k": k, "n": n, "bias": bias, "calls": a.calls,
                          "threads": a.threads, "regions": regions, "rel_err": err,
                          "layer": type(layer).__name__, "taken": len(report.taken),
                          "group_size": getattr(layer, "group_size", 0), "kernels": ops.kernels()}), flush=True)


def _artifact_call(layer):
    """The compiled M=1 artifact of a BF16 layer (None for the quantized ones: they have none)."""
    from rvv_inductor import runtime

    if isinstance(layer, rvv_inductor.regional.RVVQuantLinear):
        return None
    n, k = layer.out_features, layer.in_features
    return lambda x: runtime._run_bucket(x.reshape(-1, k), layer.packed_weight, n, k, layer.bias)


def _op_call(layer):
    """The layer's operator with its arguments bound: what runs after forward's checks."""
    if isinstance(layer, rvv_inductor.regional.RVVQuantLinear):
        lay = layer._layout
        opts = layer._options()

        def call(x):
            return ops.linear_packed_q(x, layer.packed_weight, layer.bias, layer.out_features, lay.dtype,
                                       lay.group_size, lay.scale_dtype, lay.zero_points, lay.nb, opts)
        return call
    return lambda x: ops.linear_packed(x, layer.packed_weight, layer.bias, layer.out_features)


if __name__ == "__main__":
    main()
