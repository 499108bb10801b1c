#!/usr/bin/env python3
"""Checks a demo report directory (scripts/demo --quick) beyond the demo's own exit code:
every mode ran, the BF16 modes agreed with eager, the regional modes took the Linear
layers the gate admits, artifacts match distinct shapes, weight bytes per token and
memory against arithmetic of our own (the dims and each format's bytes per weight), the
llama.cpp rows either ran (with the ggml variant named) or say why not, and counts are
consistent with the model size.

usage: tests/demo/check_report.py DIR [--counted] [--subset]"""
import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from rvv_inductor import policy  # noqa: E402  (plain Python, no torch)
from rvv_inductor.policy import M_BUCKETS, m_bucket  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recompute  # noqa: E402  (the estimate columns, recomputed from the raw counts)

d = Path(sys.argv[1])
counted = "--counted" in sys.argv
subset = "--subset" in sys.argv  # a run with --modes: check the modes it ran (else all are required)
rep = json.loads((d / "report.json").read_text())
errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


modes = rep["modes"]
TORCH_MODES = {"eager", "regional", "regional-int8", "regional-int4", "layers-int4", "whole"}
OPTIONAL = {"regional-int8", "layers-int4"}  # not in --quick
LLAMA = {"llama.cpp-q8_0": "q8_0", "llama.cpp-q4_0": "q4_0", "llama.cpp-bf16": "bf16", "llama.cpp-q4_k_m": "q4_k_m"}
PACKAGE = {"package": "bf16", "package-int4": "int4", "package-q4_k_m": "q4_k_m"}
MIXES = {"q4_k_m"}  # llama-quantize's files: the weight bytes depend on its choice of types
check(set(modes) == set(rep["spec"]["modes"]), f"modes {sorted(modes)} != the run's {rep['spec']['modes']}")
check(set(modes) <= TORCH_MODES | set(LLAMA) | set(PACKAGE), f"modes {sorted(modes)}")
if not subset:  # --quick runs at least these (INT8 runs INT4's code in another format)
    check(TORCH_MODES - OPTIONAL <= set(modes), f"modes {sorted(modes)}")
    check(set(LLAMA) & set(modes), f"no llama.cpp mode in {sorted(modes)}")
    check(set(PACKAGE) & set(modes), f"no package mode in {sorted(modes)}")
# The newcomer's demo runs the C++ operator path (scripts/demo builds librvv_inductor_ops.so),
# not the ctypes fallback, in every mode that calls the operators, and the report says so.
# A report written before the demo recorded them (the committed ones of 2026-12-07 and
# earlier) has no "operator_kernels": said, not checked; every new report has it.
if "operator_kernels" not in rep:
    print(f"note: {d} predates the operator-kernel record; which kernels it ran is not checked")
else:
    kernels = rep["operator_kernels"]
    check(kernels, "the report does not say which operator kernels ran")
    for name, kind in kernels.items():
        check(kind == "c++", f"{name} ran the operators' {kind} kernels, not the C++ ones")
    check("operator kernels: C++" in (d / "report.txt").read_text(),
          "report.txt does not name the C++ operator kernels")
for name in [x for x in ("regional", "whole") if x in modes or not subset]:
    m = modes.get(name, {})
    for a in m.get("agreement", []):
        check(a["ok"], f"{name} batch {a['batch']} prompt {a['prompt']}: {a}")
        check(a["decisive"] > 0, f"{name}: no decisive positions, the comparison proves nothing")
    check(m.get("agreement"), f"{name}: no agreement rows")
    check(m.get("compile_s", 0) > 0, f"{name}: compile time {m.get('compile_s')}")

for name in [x for x in ("regional", "regional-int8", "regional-int4", "layers-int4") if x in modes]:
    r = modes[name]["routing"]
    taken = {x.split(" ")[0].rsplit(".", 1)[-1] for x in r["rvv"]}
    check(taken == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"},
          f"{name} took {taken}")
    check(not r["fallback"], f"{name} kept {r['fallback']}")
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
if spec.get("count_prefill"):  # the measuring pass compiles the long prompt's bucket beforehand
    buckets.add(m_bucket(min(spec["count_prefill"], M_BUCKETS[-1])))
if "regional" in modes:
    reg = modes["regional"]
    # Every artifact is one Dynamo graph, and one per distinct (N, K, M-bucket, bias).
    check(reg["artifacts"] == reg["graphs"], f"artifacts {reg['artifacts']} != graphs {reg['graphs']}")
    check(reg["artifacts"] <= len(shapes) * len(buckets),
          f"{reg['artifacts']} artifacts > {len(shapes)}x{len(buckets)}")
    check(reg["packed_bytes"] > 0 and reg["packed_bytes"] <= 1.01 * reg.get("param_bytes", 0), "packed bytes")
if "layers-int4" in modes:
    # Every decoder layer a compiled region, attention through the RVV kernel.
    m = modes["layers-int4"]
    check(m.get("compiled_layers") == dims["num_hidden_layers"] and m.get("rvv_attention"),
          f"layers-int4: {m.get('compiled_layers')} layers compiled, RVV attention {m.get('rvv_attention')}")
if "whole" in modes:
    # One decode graph per batch size and no recompile when generation moves on from the warm-up.
    check(modes["whole"]["graphs"] == len(spec["batches"]), f"whole-model graphs {modes['whole']['graphs']}")
    check(any("rvv" in x or "N=" in x for x in modes["whole"]["routing"]["rvv"]), "whole-model: no GEMM on RVV")

# Weight bytes per decode token, from the dims and each format's definition: one step
# reads every Linear weight once (a tied lm_head reads the embedding table).
# BF16: 2 bytes per weight. INT8 (per output channel, FP16 scale): 1 byte per weight + 2
# per row. INT4 (groups of 64 along K, FP16 scales, implicit zero point): 1/2 byte per weight
# + 2 per group. GGUF Q8_0: 34 bytes per 32 weights; Q4_0: 18 per 32. The packed RVV
# buffers may pad the last block of rows and align groups: at most 3% over.
mats = [(h, h), (kv, h), (kv, h), (h, h), (i, h), (i, h), (h, i)] * dims["num_hidden_layers"] + [(v, h)]
bpw = {"bf16": lambda n, k: 2 * n * k, "int8": lambda n, k: n * k + 2 * n,
       "int4": lambda n, k: n * k // 2 + 2 * n * (k // 64), "q8_0": lambda n, k: n * k // 32 * 34,
       "q4_0": lambda n, k: n * k // 32 * 18}
want = {fmt: sum(f(n, k) for n, k in mats) for fmt, f in bpw.items()}
fmt_of = {"eager": "bf16", "whole": "bf16", "regional": "bf16", "regional-int8": "int8", "regional-int4": "int4",
          "layers-int4": "int4",
          **LLAMA, **PACKAGE}
exact = {"eager", "whole", "package"} | set(LLAMA)
for name, m in modes.items():
    if m.get("unavailable") or fmt_of[name] in MIXES:
        continue
    got, w = m.get("weight_bytes_step"), want[fmt_of[name]]
    ok = got == w if name in exact else got is not None and w <= got <= 1.03 * w
    check(ok, f"{name}: weight bytes per step {got}, the {fmt_of[name]} arithmetic gives {w}")
# A llama-quantize mix (Q4_K_M): its Linears in types between Q4_K (144 bytes per 256
# weights) and Q8_0; llama.cpp and our package of it ran the same file (sha256), and the
# package reads the file's bytes of every Linear (at most 3% more for padded blocks).
mix_modes = [n for n, m in modes.items() if fmt_of[n] in MIXES and not m.get("unavailable")]
for name in mix_modes:
    m = modes[name]
    lo, hi = sum(n * k // 256 * 144 for n, k in mats), want["q8_0"]
    check(lo <= m.get("weight_bytes_step", 0) <= 1.03 * hi, f"{name}: weight bytes per step {m.get('weight_bytes_step')} "
          f"outside the Q4_K..Q8_0 arithmetic [{lo}, {hi}]")
    check(set(m.get("linear_types") or {}) >= {"Q4_K", "Q6_K"}, f"{name}: Linear types {m.get('linear_types')}")
if len({fmt_of[n] for n in mix_modes}) == 1 and len(mix_modes) == 2:
    a, b = (modes[n] for n in mix_modes)
    check(a["gguf_sha256"] == b["gguf_sha256"], f"{mix_modes}: not the same llama-quantize file")
    lw, pw = sorted((modes[n]["weight_bytes_step"] for n in mix_modes))
    check(lw <= pw <= 1.03 * lw, f"{mix_modes}: weight bytes per step {lw} and {pw} (the same file)")
for name, most in (("regional-int4", 0.3), ("layers-int4", 0.3), ("regional-int8", 0.55)):
    if name in modes:
        check(modes[name]["packed_bytes"] < most * modes["eager"]["weight_bytes_step"], f"{name} packed bytes")
# Quantized agreement is reported, not asserted: but it is measured, on real positions.
for name in [x for x in ("regional-int8", "regional-int4", "layers-int4") if x in modes]:
    check(modes[name].get("agreement"), f"{name}: no agreement rows")
    for a in modes[name].get("agreement") or []:
        check(a["positions"] > 0 and a["max_abs_diff"] == a["max_abs_diff"] and not a["asserted"], f"{name}: {a}")
# Memory: every torch mode's peak is above the empty worker's, and the goals are computed.
check(rep.get("empty_rss_peak_kib"), "no empty-worker baseline")
for name in TORCH_MODES & set(modes):
    check((modes[name].get("rss_over_empty_kib") or 0) > 0, f"{name}: peak RSS - empty {modes[name].get('rss_over_empty_kib')}")
g = rep["memory_goals"]
if "regional-int4" in modes:
    check(abs(g["int4_over_eager"] - modes["regional-int4"]["rss_over_empty_kib"] /
              modes["eager"]["rss_over_empty_kib"]) < 1e-9, f"memory goals {g}")
# llama.cpp: ran (named its ggml CPU variant, decoded teacher-forced, compared) or says why not.
for name in set(LLAMA) & set(modes):
    m = modes[name]
    if m.get("unavailable"):
        check(len(m["unavailable"]) > 10, f"{name}: unavailable without a reason")
        continue
    check(m.get("backend") and "ggml-cpu" in m["backend"], f"{name}: ggml variant {m.get('backend')}")
    check(m["workloads"] and all(len(wl["tokens"]) == spec["steps"] + 1 for wl in m["workloads"]), f"{name}: tokens")
    check(m.get("agreement") and all(a["positions"] == spec["steps"] + 1 for a in m["agreement"]),
          f"{name}: agreement {m.get('agreement')}")
# The AOTInductor package: exported (the decode graph, and the prefill graph unless the
# run left it out: --quick), every projection on RVV, run by rvv-generate teacher-forced;
# BF16 agrees with eager like the other BF16 modes.
for name in set(PACKAGE) & set(modes):
    m = modes[name]
    if m.get("unavailable"):
        check(len(m["unavailable"]) > 10, f"{name}: unavailable without a reason")
        continue
    graphs = 2 if m.get("prefill_chunk") else 1
    check(m["compile_s"] > 0 and m["artifacts"] == graphs and m.get("package_file_bytes", 0) > 0,
          f"{name}: compile {m['compile_s']} s, {m['artifacts']} graphs (expected {graphs})")
    check(bool(m.get("prefill_chunk")) != bool(spec.get("quick")), f"{name}: prefill chunk {m.get('prefill_chunk')}")
    check(m["routing"]["rvv"] and not m["routing"]["fallback"], f"{name}: routing {m['routing']}")
    check(m["workloads"] and all(len(wl["tokens"]) == spec["steps"] + 1 for wl in m["workloads"]), f"{name}: tokens")
    check(m.get("agreement") and all(a["positions"] == spec["steps"] + 1 and a["asserted"] == (PACKAGE[name] == "bf16")
                                     and a["ok"] for a in m["agreement"]), f"{name}: agreement {m.get('agreement')}")

if counted:
    for name, m in modes.items():
        if m.get("unavailable") or (name == "whole" and not spec.get("full") and not m["counts"]):
            continue  # scripts/demo counts the whole-model graph with --full (or when named)
        check(m["counts"], f"{name}: no counts")
        for c in m["counts"] or []:
            check(c["est_decode_tok_s"] > 0, f"{name}: estimate {c['est_decode_tok_s']}")
            if name in LLAMA or name in PACKAGE or name.startswith("regional-int") or name == "layers-int4":
                # Every weight byte of the format is read at least once per step.
                region = c["decode_linear"] or c["decode_rest"]
                check(region["bytes_read"] * c["batch"] >= 0.9 * m["weight_bytes_step"],
                      f"{name}: read {region['bytes_read']} bytes per token < weights {m['weight_bytes_step']}")
                if name in LLAMA:
                    check(c.get("backend") and "riscv64_v" in c["backend"], f"{name}: counted variant {c.get('backend')}")
            elif c["decode_linear"]:
                # A decode step must read every Linear weight byte at least once.
                kv = h // dims["num_attention_heads"] * dims["num_key_value_heads"]
                lin_bytes = 2 * ((2 * h * h + 2 * h * kv + 3 * h * i) * dims["num_hidden_layers"] + v * h)
                per_tok = c["decode_linear"]["bytes_read"] * c["batch"]
                check(per_tok >= 0.9 * lin_bytes, f"{name}: Linear read {per_tok} bytes per step < weights")
    # The two K1 columns against an independent recomputation from the raw plugin counts.
    cspec = dict(rep["count_spec"])
    drivers = set(LLAMA) | set(PACKAGE)
    long_p = cspec.get("count_prefill") or 0
    for name, m in modes.items():
        if not m["counts"]:
            continue
        want = recompute.estimates(d, name, cspec, dims["num_hidden_layers"])
        check(want is not None, f"{name}: counts in the report but no raw counts in {d}")
        for c in m["counts"] if want else []:
            key_of = c["threads"] if name in drivers else c["batch"]  # a driver: one row per thread count
            check(key_of in want, f"{name}: row {key_of} not recomputed")
            for key, v in want.get(key_of, {}).items():
                got = c.get(key)
                ok = (v is None and got is None) or (v is not None and got is not None and abs(got / v - 1) < 1e-6)
                check(ok, f"{name} {key_of}: {key} {got} != {v} recomputed from the raw counts")
            for kind in ("decode", "prompt"):
                if c.get(f"est_{kind}_tok_s") is not None:  # more bandwidth, never slower
                    check(c[f"est_{kind}_tok_s"] <= c[f"est_{kind}_tok_s_dram_fit"] * (1 + 1e-9)
                          <= c[f"est_{kind}_tok_s_ceiling"] * (1 + 1e-9) ** 2,
                          f"{name}: {kind} estimates not ordered by bandwidth")
        # Equal thread counts: llama.cpp at the K1's cores (as the torch modes and the
        # package) and at 4 (IME boards).
        threads = sorted(c.get("threads") for c in m["counts"])
        check(threads == ([4, policy.K1_CORES] if name in LLAMA else [policy.K1_CORES] * len(m["counts"])),
              f"{name}: counted at threads {threads}")
        # The long prompt (time to first token), where the run asked for it.
        if long_p and name not in ("eager", "whole") and LLAMA.get(name) != "bf16":
            rows = [c for c in m["counts"] if c["batch"] == 1]
            check(rows and all(c.get("long_prompt") == long_p and c["est_prompt_tok_s"] > 0 for c in rows),
                  f"{name}: no {long_p}-token prompt estimate")
            for c in rows:
                pr = (c.get("prompt_rest") or {})
                # A prompt reads every weight byte at least once (the Linear regions, or the driver's whole step).
                read = sum((x or {}).get("bytes_read", 0) for x in (c.get("prompt_linear"), pr)) * long_p
                check(read >= 0.9 * m["weight_bytes_step"], f"{name}: the prompt read {read} bytes < the weights "
                      f"{m['weight_bytes_step']}")
    k = rep["k1_model"]
    check(k["dram_bytes_s"] == policy.K1_DRAM_BYTES_PER_S and k["dram_achieved_bytes_s"] ==
          policy.K1_DRAM_ACHIEVED_BYTES_PER_S and k["headline"] == "achieved", f"k1 model {k}")
    # The calibration's error, printed: each published number's prediction at the fitted
    # bandwidth is bandwidth / weight bytes; the worst error over the non-reference rows.
    cal = rep["calibration"]
    errs = []
    for r in cal["rows"]:
        pred = cal["bandwidth"] / r["weight_bytes"]
        check(abs(r["predicted_tok_s"] / pred - 1) < 1e-9 and abs(r["error"] - (pred / r["published_tok_s"] - 1)) < 1e-9,
              f"calibration row {r}")
        if r["key"] != cal["reference"]:
            errs.append(abs(pred / r["published_tok_s"] - 1))
    check(errs and abs(cal["max_abs_error"] - max(errs)) < 1e-9, f"calibration worst error {cal['max_abs_error']}")
    # The DRAM-bound fit: the geometric mean of the BF16 programs' implied bandwidths, its
    # residuals on every row.
    db = cal["dram_bound"]
    keys = db["reference"].split(",")
    bf = [r for r in db["rows"] if r["key"] in keys]
    gm = 1.0
    for r in bf:
        gm *= (r["published_tok_s"] * r["weight_bytes"]) ** (1 / len(bf))
    check(len(bf) == len(keys) and abs(db["bandwidth"] / gm - 1) < 1e-3 and abs(k["dram_fit_bytes_s"] / gm - 1) < 1e-3,
          f"DRAM-bound fit {db['bandwidth']} != geometric mean {gm}")
    for r in db["rows"]:
        check(abs(r["error"] - (db["bandwidth"] / r["weight_bytes"] / r["published_tok_s"] - 1)) < 1e-9, f"dram row {r}")
    text = (d / "report.txt").read_text()
    for needle in ("K1 ceiling (10.66 GB/s peak)", f"K1 as achieved (calibrated {k['dram_achieved_bytes_s'] / 1e9:.2f} "
                   "GB/s) = HEADLINE", f"worst {cal['max_abs_error']:.0%}", f"DRAM-bound fit {db['bandwidth'] / 1e9:.3f}",
                   "serial ms"):
        check(needle in text, f"report.txt lacks {needle!r}")
    if long_p:
        check(f"Time to first token, one {long_p}-token prompt" in text, "report.txt lacks the time-to-first-token table")
    if "regional" in modes and modes["regional"]["counts"] and modes["eager"]["counts"]:
        rl = modes["regional"]["counts"][0]["decode_linear"]["insns"]
        el = modes["eager"]["counts"][0]["decode_linear"]["insns"]
        check(rl < el, f"regional Linear instructions {rl} not below eager's {el}")

rows = list(csv.DictReader(open(d / "report.csv")))
if counted and (rep["count_spec"].get("count_prefill") or 0):
    for r in rows:  # TTFT = prompt / prompt rate, in every bandwidth column
        if r["long_prompt"]:
            for sfx in ("achieved", "dram_fit", "ceiling"):
                want_t = int(r["long_prompt"]) / float(r[f"est_k1_prompt_tok_s_{sfx}"])
                check(abs(float(r[f"est_k1_ttft_s_{sfx}"]) - want_t) <= 1e-3 * want_t + 1e-3, f"csv TTFT {r}")
    check(any(r["long_prompt"] for r in rows), "csv: no time-to-first-token row")
check(len(rows) == sum(max(len(m["workloads"]), 1) for m in modes.values()), "csv rows")
for r in rows:
    m = modes[r["mode"]]
    if r["weight_bytes_per_token"]:
        check(abs(float(r["weight_bytes_per_token"]) - m["weight_bytes_step"] / int(r["batch"])) <= 1,
              f"csv weight bytes per token {r}")
check((d / "report.png").stat().st_size > 10000, "plot")
if errors:
    print("demo report check FAILED:\n  " + "\n  ".join(map(str, errors)))
    sys.exit(1)
print(f"demo report check passed ({d})")
