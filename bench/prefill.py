#!/usr/bin/env python3
"""Prefill GEMMs of Qwen2.5-1.5B through the code Inductor generates (run by bench/prefill.sh).

Runs inside riscv64 (scripts/rv64). Each projection is one frozen ``nn.Linear`` compiled
with ``torch.compile`` after ``rvv_inductor.enable()`` and ``freezing=True``: the path a
whole-model compile takes for that GEMM (``routing.py``: ``CppGemmTemplate`` with our
micro-GEMM, the weight a prepacked constant), one graph per (shape, M) so that each call
can be its own rvvcount region. Every shape is compiled and run once outside any region,
then called once inside region ``id`` (``rvv_count_region``: a no-op without the plugin).

    python3 bench/prefill.py --threads T --m 64,128 [--shapes q_proj,down_proj] [--path whole|regional]

``--path regional`` runs ``compile_linears`` on the Linear instead (the packed weight an
input of the region compiled per shape and M bucket, lowered to the same template), so the
region also holds the regional runtime's per-call Python.

prints one JSON line: the regions (id -> shape, M, N, K, bias), the routing Inductor
logged, and (``--blocks``) the cache blocking the template chose, read from the generated
C++ (``Mc_blocks``/``Nc_blocks``/``Kc_blocks`` etc.).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

# Qwen2.5-1.5B: hidden 1536, intermediate 8960, 2 KV heads x 128. (name, N, K, bias).
# lm_head is left out: a prefill computes logits for its last position only
# (logits_to_keep=1, as the demo and transformers' generate do), so lm_head is M = 1 there.
SHAPES = [("q_proj", 1536, 1536, True), ("k_proj", 256, 1536, True), ("o_proj", 1536, 1536, False),
          ("gate_proj", 8960, 1536, False), ("down_proj", 1536, 8960, False)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--m", default="64,128")
    ap.add_argument("--shapes", default=",".join(s[0] for s in SHAPES))
    ap.add_argument("--path", choices=("whole", "regional"), default="whole",
                    help="whole: torch.compile of the frozen nn.Linear (the whole-model path); regional: "
                         "compile_linears on it (packed weight, one compiled region per shape and M bucket)")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    import rvv_inductor
    from rvv_inductor import _native, reasons
    from rvv_inductor import paths

    mark = _native.lib().rvv_count_region
    rvv_inductor.enable()
    ms = [int(x) for x in args.m.split(",")]
    wanted = args.shapes.split(",")
    regions, rid = {}, 0
    with torch.no_grad(), torch._inductor.config.patch(freezing=True):
        for name, n, k, bias in SHAPES:
            if name not in wanted:
                continue
            torch.manual_seed(n * 7 + k)
            lin = torch.nn.Linear(k, n, bias=bias).to(torch.bfloat16).eval()
            if args.path == "regional":
                ref_w = lin.weight.detach().clone()
                f = torch.nn.Sequential(lin)
                rvv_inductor.compile_linears(f)
            for m in ms:
                rid += 1
                if args.path == "whole":
                    torch._dynamo.reset()
                    f = torch.compile(lin, dynamic=False)
                x = torch.randn(m, k, dtype=torch.bfloat16)
                y = f(x)  # compile + a first run, outside the region
                # Spot check of up to 4 rows (a full FP32 reference costs minutes under QEMU).
                rows = sorted({0, min(1, m - 1), m // 2, m - 1})
                wt = ref_w if args.path == "regional" else lin.weight
                ref = torch.nn.functional.linear(x[rows].float(), wt.float(),
                                                 lin.bias.float() if bias else None)
                err = (y[rows].float() - ref).abs().max().item() / ref.abs().max().item()
                mark(rid, 1)
                f(x)
                mark(rid, 0)
                regions[str(rid)] = {"shape": name, "M": m, "N": n, "K": k, "bias": bias,
                                     "weight_bytes": n * k * 2, "x_bytes": m * k * 2, "y_bytes": m * n * 2,
                                     "rel_err": err}
    routing = [{"op": e.op, "M": e.M, "N": e.N, "K": e.K, "route": e.route, "reason": e.reason}
               for e in reasons.read_log(paths.state_dir() / reasons.LOG_NAME, pid=os.getpid())]
    print(json.dumps({"threads": torch.get_num_threads(), "torch": torch.__version__, "path": args.path, "regions": regions,
                      "routing": routing, "blocking": blocking(Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")))}))
    return 0


BLOCK_KEYS = ("num_threads", "Mr", "Nr", "Kr", "Mt_blocks", "Nt_blocks", "Kt_blocks", "Mc_blocks", "Nc_blocks", "Kc_blocks",
              "num_Mt_blocks", "num_Nt_blocks", "num_Kt_blocks", "M", "N", "K")


def blocking(cache: Path) -> list[dict]:
    """The constants of every generated CppGemmTemplate kernel in the Inductor cache."""
    out = []
    if not cache or not cache.is_dir():
        return out
    for p in sorted(cache.rglob("*.cpp")):
        src = p.read_text(errors="replace")
        if "Mc_blocks" not in src:
            continue
        d = {}
        for key in BLOCK_KEYS:
            mm = re.search(rf"constexpr\s+int64_t\s+{key}\s*=\s*([^;]+);", src)
            if mm:
                d[key] = mm.group(1).strip()
        d["file"] = p.name
        out.append(d)
    return out


if __name__ == "__main__":
    sys.exit(main())
