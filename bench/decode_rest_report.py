#!/usr/bin/env python3
"""The table of bench/decode_rest.sh: per decode token, the Linear kernels' instructions
(librvv_inductor_core.so in the profile) and everything else, per mode and layer count,
and the rest fitted as a + b * layers and given at the model's layer count.

    bench/decode_rest_report.py OUT --modes eager,layers --layers 1,2 --weights int4 --model-layers 28
"""
from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

CORE = "librvv_inductor_core.so"
TARGET = 40e6  # issue 28: per token outside the Linear kernels


def load(raw: Path, tag: str) -> dict:
    regions = json.loads((raw / f"{tag}.json").read_text())["regions"]
    run = json.loads((raw / f"{tag}.stdout").read_text().splitlines()[-1])
    prof = json.loads((raw / f"{tag}.profile.json").read_text())
    steps = run["counted"]
    total = regions["1"]["insns"] / steps
    # The profile holds region instructions only (the counted steps): its library split
    # is exact, and its total must be the region's.
    if abs(prof["total_insns"] / steps - total) > 1e-6 * total + 1:
        raise SystemExit(f"decode_rest_report: {tag}: profile total {prof['total_insns']} != region total")
    core = sum(x["insns"] for x in prof["libraries"] if x["library"] == CORE) / steps
    return {"total": total, "linear": core, "rest": total - core, "run": run,
            "threads_active": regions["1"]["threads_active"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--modes", default="eager,layers")
    ap.add_argument("--layers", default="1,2")
    ap.add_argument("--weights", default="int4")
    ap.add_argument("--model-layers", type=int, default=28)
    a = ap.parse_args()
    raw = a.out / "raw"
    layers = [int(x) for x in a.layers.split(",")]
    if len(layers) < 2:
        raise SystemExit("decode_rest_report: two layer counts are needed for the fit")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    rows, fits = [], {}
    for mode in a.modes.split(","):
        got = {L: load(raw, f"{mode}-{a.weights}-L{L}") for L in layers}
        l0, l1 = layers[0], layers[-1]
        fit = {}
        for key in ("rest", "linear", "total"):
            b = (got[l1][key] - got[l0][key]) / (l1 - l0)
            fit[key] = {"per_layer": b, "fixed": got[l0][key] - b * l0, "model": got[l0][key] + b * (a.model_layers - l0)}
        fits[mode] = fit
        for L in layers:
            rows.append({"mode": mode, "layers": L, **{k: got[L][k] for k in ("total", "linear", "rest")},
                         "threads_active": got[L]["threads_active"], "graphs": got[L]["run"]["graphs"],
                         "rvv_attention": got[L]["run"]["rvv_attention"]})
    m = lambda v: f"{v / 1e6:,.1f} M"  # noqa: E731
    md = ["# Decode: instructions per token outside the Linear kernels (issue 28)", "",
          f"Regional path, {a.weights.upper()} weights, Qwen2.5-1.5B dimensions with 1 and 2 layers (random weights), "
          "StaticCache, 16-token prompt, 3 counted decode steps; rvvcount plugin, VLEN 256, 8 threads, every thread "
          f"counted. Linear kernels = instructions in {CORE} (profile); the rest is everything else. "
          f"Commit {commit}, command `bench/decode_rest.sh`.", "",
          "- **eager**: `compile_linears(model, weights=...)`: transformers' Python and ATen between the kernels;",
          "- **layers**: `compile_linears(model, weights=..., compile_layers=True)`: each decoder layer one compiled",
          "  region, attention through the RVV kernel.", "",
          "| mode | layers | per token | Linear kernels | rest |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['mode']} | {r['layers']} | {m(r['total'])} | {m(r['linear'])} | {m(r['rest'])} |")
    md += ["", f"Fitted rest = fixed + per layer x layers, at {a.model_layers} layers (goal: <= {TARGET / 1e6:.0f} M):", "",
           "| mode | fixed | per layer | rest at the model's layers | goal met |", "|---|---:|---:|---:|:---:|"]
    for mode, fit in fits.items():
        f = fit["rest"]
        md.append(f"| {mode} | {m(f['fixed'])} | {m(f['per_layer'])} | {m(f['model'])} | "
                  f"{'yes' if f['model'] <= TARGET else 'no'} |")
    md.append("")
    text = "\n".join(md)
    (a.out / "report.md").write_text(text)
    (a.out / "decode_rest.json").write_text(json.dumps({"commit": commit, "rows": rows, "fits": fits}, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
