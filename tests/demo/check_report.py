#!/usr/bin/env python3
"""Checks a demo report directory (scripts/demo --quick) beyond the demo's own exit code:
every mode ran, agreed with eager, the regional mode took the Linear layers the gate
admits, artifacts match distinct shapes, and counts are consistent with the model size.

usage: tests/demo/check_report.py DIR [--counted]"""
import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from rvv_inductor.policy import M_BUCKETS, m_bucket  # noqa: E402  (plain Python, no torch)

d = Path(sys.argv[1])
counted = "--counted" in sys.argv
rep = json.loads((d / "report.json").read_text())
errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


modes = rep["modes"]
check(set(modes) == {"eager", "regional", "whole"}, f"modes {sorted(modes)}")
for name in ("regional", "whole"):
    m = modes.get(name, {})
    for a in m.get("agreement", []):
        check(a["ok"], f"{name} batch {a['batch']} prompt {a['prompt']}: {a}")
        check(a["decisive"] > 0, f"{name}: no decisive positions, the comparison proves nothing")
    check(m.get("agreement"), f"{name}: no agreement rows")
    check(m.get("compile_s", 0) > 0, f"{name}: compile time {m.get('compile_s')}")

reg = modes["regional"]
taken = {x.split(" ")[0].rsplit(".", 1)[-1] for x in reg["routing"]["rvv"]}
check(taken == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"},
      f"regional took {taken}")
check(not reg["routing"]["fallback"], f"regional kept {reg['routing']['fallback']}")
# Every artifact is one Dynamo graph, and one per distinct (N, K, M-bucket, bias).
check(reg["artifacts"] == reg["graphs"], f"artifacts {reg['artifacts']} != graphs {reg['graphs']}")
spec = rep["spec"]
dims = spec["dims"]
h, i, v = dims["hidden_size"], dims["intermediate_size"], dims["vocab_size"]
kv = h // dims["num_attention_heads"] * dims["num_key_value_heads"]
shapes = {(h, h, True), (kv, h, True), (h, h, False), (i, h, False), (h, i, False), (v, h, False)}
buckets = set()
for b in spec["batches"]:
    buckets.add(m_bucket(b))  # decode and prefill's lm_head
    for p in spec["prompts"]:
        buckets.add(m_bucket(min(b * p, M_BUCKETS[-1])))
check(reg["artifacts"] <= len(shapes) * len(buckets), f"{reg['artifacts']} artifacts > {len(shapes)}x{len(buckets)}")
# One decode graph per batch size and no recompile when generation moves on from the warm-up.
check(modes["whole"]["graphs"] == len(spec["batches"]), f"whole-model graphs {modes['whole']['graphs']}")
check(any("rvv" in x or "N=" in x for x in modes["whole"]["routing"]["rvv"]), "whole-model: no GEMM on RVV")
check(reg["packed_bytes"] > 0 and reg["packed_bytes"] <= 1.01 * reg.get("param_bytes", 0), "packed bytes")

if counted:
    for name, m in modes.items():
        check(m["counts"], f"{name}: no counts")
        for c in m["counts"] or []:
            check(c["est_decode_tok_s"] > 0, f"{name}: estimate {c['est_decode_tok_s']}")
            if c["decode_linear"]:
                # A decode step must read every Linear weight byte at least once.
                kv = h // dims["num_attention_heads"] * dims["num_key_value_heads"]
                lin_bytes = 2 * ((2 * h * h + 2 * h * kv + 3 * h * i) * dims["num_hidden_layers"] + v * h)
                per_tok = c["decode_linear"]["bytes_read"] * c["batch"]
                check(per_tok >= 0.9 * lin_bytes, f"{name}: Linear read {per_tok} bytes per step < weights")
    rl = modes["regional"]["counts"][0]["decode_linear"]["insns"]
    el = modes["eager"]["counts"][0]["decode_linear"]["insns"]
    check(rl < el, f"regional Linear instructions {rl} not below eager's {el}")

rows = list(csv.DictReader(open(d / "report.csv")))
check(len(rows) == sum(len(m["workloads"]) for m in modes.values()), "csv rows")
check((d / "report.png").stat().st_size > 10000, "plot")
if errors:
    print("demo report check FAILED:\n  " + "\n  ".join(map(str, errors)))
    sys.exit(1)
print(f"demo report check passed ({d})")
