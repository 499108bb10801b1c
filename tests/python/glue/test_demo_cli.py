"""The demo's command line and report arithmetic, without torch: every bad input gets one
clear message and a non-zero exit, never a traceback; the estimate and the count
extrapolation against hand-computed values; the modes a worker knows."""
from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rvv_inductor import policy
import rvv_inductor.demo as demo_pkg
from rvv_inductor.demo import estimate, llamacpp, progress, progress_line, report
from rvv_inductor.demo import modes  # the workers' torch-free tables (worker.py imports torch)

# Nothing here depends on the machine: the host tier runs it all. Under emulation (the
# torch tier runs the glue tests again for test_imports' torch half) each of its ~20 fresh
# interpreters costs seconds, ~3 min of CI in all, for the same result.
pytestmark = pytest.mark.skipif(os.environ.get("RV64_EMULATED") == "1",
                                reason="the demo driver's torch-free checks run in the host tier")


def demo(env: dict, *args, **extra_env):
    e = dict(env, **extra_env)
    return subprocess.run([sys.executable, "-m", "rvv_inductor", "demo", *args], capture_output=True, text=True,
                          env=e, timeout=600)


def assert_clean_error(r, code, *needles):
    out = r.stdout + r.stderr
    assert r.returncode == code, out
    assert "Traceback" not in out, out
    for n in needles:
        assert n in out, out


def write_config(d, **over):
    cfg = dict(model_type="qwen2", hidden_size=64, intermediate_size=128, num_hidden_layers=1,
               num_attention_heads=4, num_key_value_heads=2, vocab_size=256, torch_dtype="bfloat16")
    cfg.update(over)
    (d / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("case", ["nodir", "noconfig", "badjson", "arch", "quant", "dtype", "noweights",
                                  "truncated", "badheader"])
def test_bad_checkpoint(tmp_path, case, py_env):
    d = tmp_path / "ckpt"
    d.mkdir()
    good_tensor = {"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}
    if case != "noconfig":
        write_config(d, **{"arch": {"model_type": "mamba"}, "quant": {"quantization_config": {"bits": 4}},
                           "dtype": {"torch_dtype": "int8"}}.get(case, {}))
    if case == "badjson":
        (d / "config.json").write_text("{not json")
    if case not in ("noweights",):
        hdr = json.dumps(good_tensor).encode()
        body = len(hdr).to_bytes(8, "little") + hdr + b"\0\0\0\0"
        if case == "truncated":
            body = body[:-3]
        if case == "badheader":
            body = (10**9).to_bytes(8, "little") + b"{}"
        (d / "model.safetensors").write_bytes(body)
    path = str(tmp_path / "missing") if case == "nodir" else str(d)
    needle = {"nodir": "no such directory", "noconfig": "config.json is missing", "badjson": "not valid JSON",
              "arch": "'mamba' is not supported", "quant": "quantized checkpoints", "dtype": "'int8' are not",
              "noweights": "no *.safetensors", "truncated": "truncated or corrupt",
              "badheader": "truncated or corrupt"}[case]
    assert_clean_error(demo(py_env, "--model", path, "--out", str(tmp_path / "out")), 3, needle)


def test_too_little_memory(tmp_path, py_env):
    r = demo(py_env, "--config", "qwen2.5-1.5b", "--out", str(tmp_path), RVV_DEMO_MEMAVAILABLE=str(2**30))
    assert_clean_error(r, 3, "needs about", "GiB is available")


@pytest.mark.parametrize("args,code,needle", [
    (["--modes", "eager,turbo"], 3, "unknown mode"),
    (["--batch", "0"], 2, "positive integers"),
    (["--config", "qwen9"], 2, "invalid choice"),
    (["--steps", "0"], 3, "--steps"),
    (["--count-layers", "2,1"], 3, "A < B"),
    (["--count-layers", "1,2,3"], 3, "A < B"),
    (["--config", "tiny", "--count-layers", "1,3"], 3, "<= 2 (the model's depth)"),
    (["--quick", "--full"], 3, "contradict"),
    (["--modes", "eager,llama.cpp-q9"], 3, "unknown mode"),
])
def test_bad_arguments(tmp_path, args, code, needle, py_env):
    assert_clean_error(demo(py_env, *args, "--out", str(tmp_path)), code, needle)


def test_estimate_arithmetic():
    lin = {"insns": 1.6e9, "vector_insns": 1.0e9, "vsetvl": 0, "vbeats": 2.0e9,
           "dram_read_bytes": policy.K1_DRAM_BYTES_PER_S, "dram_write_bytes": 0}
    rest = {"insns": 1.6e9, "vector_insns": 0, "vsetvl": 0, "vbeats": 0, "dram_read_bytes": 0, "dram_write_bytes": 0}
    e = estimate.step_estimate(lin, rest, tokens=2, bandwidth=policy.K1_DRAM_BYTES_PER_S)
    # Linear: (0.6e9 scalar + 2e9 beats) / (1.6e9 * 8) = 0.203 s compute < 1 s memory.
    # Rest: 1.6e9 / 1.6e9 = 1 s on one core. Two tokens in 2 s.
    assert e["linear_bound"] == "memory"
    assert e["linear_s"] == pytest.approx(1.0)
    assert e["rest_s"] == pytest.approx(1.0)
    assert e["tok_s"] == pytest.approx(1.0)
    assert e["linear_split"].startswith("assumed even over 8")
    assert estimate.bandwidth_bound_tok_s(3.1e9, 1) == pytest.approx(policy.K1_DRAM_BYTES_PER_S / 3.1e9)
    # At the calibrated bandwidth the same DRAM bytes take 10.66 / 3.325 s.
    a = estimate.step_estimate(lin, rest, tokens=2)
    assert a["bandwidth"] == policy.K1_DRAM_ACHIEVED_BYTES_PER_S
    assert a["linear_s"] == pytest.approx(policy.K1_DRAM_BYTES_PER_S / policy.K1_DRAM_ACHIEVED_BYTES_PER_S)
    both = estimate.estimates(lin, rest, tokens=2)
    assert both["ceiling"]["tok_s"] == pytest.approx(1.0) and both["achieved"]["tok_s"] == pytest.approx(a["tok_s"])
    assert estimate.HEADLINE == "achieved"


def _thread(insns, vec, beats, dram):
    return {"insns": insns, "vector_insns": vec, "vsetvl": 0, "vbeats": beats, "bytes_read": 0,
            "bytes_written": 0, "dram_read_bytes": dram, "dram_write_bytes": 0}


def _raw_region(threads: list[dict]) -> dict:
    """A plugin region as the thread-counting plugin writes it: totals + threads.<vcpu>."""
    tot = {k: sum(t[k] for t in threads) for k in threads[0]}
    return dict(tot, calls=1, threads_active=len(threads), threads={str(i): t for i, t in enumerate(threads)},
                max_thread={"insns": max(t["insns"] for t in threads)})


def test_estimate_uses_the_busiest_thread():
    """A Linear region counted on 4 threads with an uneven split: its compute time is the
    busiest thread's cycles (by hand: scalar-like insns x CPI + beats), not total / 8."""
    ts = [_thread(1.0e6, 0.5e6, 4.0e6, 1e6), _thread(2.0e6, 1.0e6, 8.0e6, 1e6), _thread(0.5e6, 0, 0, 0),
          _thread(1.0e6, 0.5e6, 4.0e6, 1e6)]
    d = report.derive(_raw_region(ts))
    busiest = 1.0e6 * policy.CPI_SCALAR + 8.0e6
    assert d["max_thread_cycles"] == pytest.approx(busiest) and d["threads_active"] == 4
    rest = dict(_thread(1.6e6, 0, 0, 0), max_thread_cycles=1.6e6 * policy.CPI_SCALAR, threads_active=1)
    for bw in (policy.K1_DRAM_BYTES_PER_S, policy.K1_DRAM_ACHIEVED_BYTES_PER_S):
        e = estimate.step_estimate(d, rest, tokens=1, bandwidth=bw)
        lin_s = max(busiest / policy.K1_CLOCK_HZ, 3e6 / bw)
        assert e["linear_s"] == pytest.approx(lin_s)
        assert e["rest_s"] == pytest.approx(1.6e6 * policy.CPI_SCALAR / policy.K1_CLOCK_HZ)
        assert e["linear_split"] == "measured: serial on the opening thread + the busiest of 4 threads"
    # The same totals counted on one thread: the old assumption, total / 8.
    one = report.derive({k: v for k, v in _raw_region(ts).items() if k not in ("threads", "threads_active")})
    assert one["threads_active"] == 1
    tot_cycles = (4.5e6 - 2.0e6) * policy.CPI_SCALAR + 16e6
    e = estimate.step_estimate(one, rest, 1, bandwidth=1e30)
    assert e["linear_s"] == pytest.approx(tot_cycles / 8 / policy.K1_CLOCK_HZ)


def test_estimate_models_the_opening_threads_serial_work():
    """The opening thread (owner_vcpu) runs Python between kernel calls, while no weight
    streams: its cycles beyond the median other thread are serial, added to max(the busiest
    other thread, DRAM). By hand, CPI 1: owner 3e6 insns (1e6 vector, 2e6 beats) = 4e6
    cycles; others 2.5e6, 2e6, 1e6 cycles -> median 2e6, serial 2e6, parallel 2.5e6."""
    ts = [_thread(3.0e6, 1.0e6, 2.0e6, 1e6), _thread(1.5e6, 0.5e6, 1.5e6, 1e6), _thread(2.0e6, 0, 0, 0),
          _thread(1.0e6, 0, 0, 0)]
    raw = dict(_raw_region(ts), owner_vcpu=0)
    d = report.derive(raw)
    assert policy.CPI_SCALAR == 1.0
    assert d["serial_cycles"] == pytest.approx(4.0e6 - 2.0e6) and d["parallel_cycles"] == pytest.approx(2.5e6)
    assert d["max_thread_cycles"] == pytest.approx(4.0e6)
    rest = dict(_thread(1.6e6, 0, 0, 0), max_thread_cycles=1.6e6, serial_cycles=0, parallel_cycles=1.6e6,
                threads_active=1)
    for bw in (1e30, 1e9):  # compute-bound (no DRAM time), then DRAM-bound: 2e6 bytes / 1e9 = 2 ms
        e = estimate.step_estimate(d, rest, tokens=1, bandwidth=bw)
        want = 2.0e6 / policy.K1_CLOCK_HZ + max(2.5e6 / policy.K1_CLOCK_HZ, 2e6 / bw)
        assert e["linear_s"] == pytest.approx(want)
        assert e["serial_s"] == pytest.approx(2.0e6 / policy.K1_CLOCK_HZ)
        # the one-thread rest: its own DRAM traffic overlaps its work (none here)
        assert e["rest_s"] == pytest.approx(1.6e6 / policy.K1_CLOCK_HZ)
    # Only the opening thread ran: nothing beside it, nothing serial to add.
    solo = report.derive(dict(_raw_region(ts[:1]), owner_vcpu=0))
    assert solo["serial_cycles"] == 0 and solo["parallel_cycles"] == pytest.approx(4.0e6)


def test_counted_extrapolates_busiest_thread_and_gives_both_columns(tmp_path):
    """counts at 1 and 2 layers with 8 threads per Linear region -> 28 layers; the report's
    two columns against a recomputation by hand from the raw counts."""
    def linear(layers):  # per layer: 8 threads with 1e6 beats (one with 2e6), 1e7 DRAM bytes
        ts = [_thread(1e5 * layers, 5e4 * layers, (2e6 if i == 3 else 1e6) * layers, 1e7 * layers / 8)
              for i in range(8)]
        return _raw_region(ts)

    def rest(layers):
        return _raw_region([_thread(1e6 + 2e5 * layers, 0, 0, 1e5)])

    for n in (1, 2):  # regions 1..4: decode rest/linear, prefill rest/linear (batch index 0)
        regs = {"1": rest(n), "2": linear(n), "3": rest(n), "4": linear(n)}
        regs["1"]["calls"] = regs["2"]["calls"] = 2  # two decode steps
        (tmp_path / f"counts-regional-L{n}.json").write_text(json.dumps({"regions": regs}))
    cspec = {"runs": [{"tag": "-L1", "layers": 1}, {"tag": "-L2", "layers": 2}], "dims": {"num_hidden_layers": 28},
             "prompts": [8], "steps": 2, "batches": [1]}
    (c,) = report.counted(tmp_path, "regional", cspec)
    # By hand: at 28 layers the busiest Linear thread has 28 * (5e4 x CPI + 2e6) cycles per
    # region, DRAM 28 * 1e7 bytes; rest 1e6 + 5.6e6 insns, 1e5 bytes; decode = region / 2 steps.
    lin_cyc = 28 * (5e4 * policy.CPI_SCALAR + 2e6) / 2
    assert c["decode_linear"]["max_thread_cycles"] == pytest.approx(lin_cyc)
    assert c["decode_linear"]["threads_active"] == 8
    rest_cyc = (1e6 + 28 * 2e5) * policy.CPI_SCALAR / 2
    for key, bw in (("est_decode_tok_s_ceiling", policy.K1_DRAM_BYTES_PER_S),
                    ("est_decode_tok_s", policy.K1_DRAM_ACHIEVED_BYTES_PER_S)):
        step = (max(lin_cyc / policy.K1_CLOCK_HZ, 28 * 1e7 / 2 / bw)
                + max(rest_cyc / policy.K1_CLOCK_HZ, 1e5 / 2 / bw))
        assert c[key] == pytest.approx(1 / step), key
    # Prefill: the region is one prefill of 8 tokens.
    pstep = (max(2 * lin_cyc / policy.K1_CLOCK_HZ, 28 * 1e7 / policy.K1_DRAM_ACHIEVED_BYTES_PER_S)
             + max(2 * rest_cyc / policy.K1_CLOCK_HZ, 1e5 / policy.K1_DRAM_ACHIEVED_BYTES_PER_S))
    assert c["est_prefill_tok_s"] == pytest.approx(8 / pstep)


def test_count_extrapolation(tmp_path):
    """Counts at 1 and 3 layers give the counts at 28: fixed + 28 * per_layer, per counter."""
    def counts(layers):
        return {"regions": {"1": {"insns": 1000 + layers * 50, "dram_read_bytes": 7 + layers * 2, "calls": 3},
                            "2": {"insns": 5 * layers}}}
    runs = [{"spec": "spec-count-L1.json", "tag": "-L1", "layers": 1},
            {"spec": "spec-count-L3.json", "tag": "-L3", "layers": 3}]
    cspec = {"runs": runs, "dims": {"num_hidden_layers": 28}}
    assert report.load_regions(tmp_path, "eager", cspec) is None  # nothing counted yet
    (tmp_path / "counts-eager-L1.json").write_text(json.dumps(counts(1)))
    assert report.load_regions(tmp_path, "eager", cspec) is None  # one of the two runs is missing
    (tmp_path / "counts-eager-L3.json").write_text(json.dumps(counts(3)))
    got = report.load_regions(tmp_path, "eager", cspec)
    assert got["1"]["insns"] == pytest.approx(1000 + 28 * 50)
    assert got["1"]["dram_read_bytes"] == pytest.approx(7 + 28 * 2)
    assert got["2"]["insns"] == pytest.approx(5 * 28) and got["2"]["vbeats"] == 0
    # Without --count-layers the single run is used as counted.
    (tmp_path / "counts-eager.json").write_text(json.dumps(counts(28)))
    one = report.load_regions(tmp_path, "eager", {"dims": {"num_hidden_layers": 28}})
    assert one["1"]["insns"] == 1000 + 28 * 50


def test_modes_and_regions():
    assert list(modes.MODES) == ["eager", "regional", "regional-int8", "regional-int4", "layers-int4", "whole"]
    assert not modes.MODES["eager"].teacher_forced and modes.MODES["regional"].teacher_forced
    # Linear calls inside a compiled graph (whole model, compiled decoder layers) cannot be hooked.
    assert [m for m, c in modes.MODES.items() if not c.linear_separable] == ["layers-int4", "whole"]
    # BF16 modes must agree with eager; quantized ones hold other weights: reported only.
    assert [m for m, c in modes.MODES.items() if not c.asserted] == ["regional-int8", "regional-int4", "layers-int4"]
    assert modes.MODES["regional-int4"].weights == "int4" and modes.MODES["regional-int8"].weights == "int8"
    assert modes.MODES["layers-int4"].weights == "int4"
    assert [m for m, c in modes.MODES.items() if getattr(c, "compile_layers", False)] == ["layers-int4"]
    assert set(modes.LLAMACPP_MODES.values()) == {"bf16", "q8_0", "q4_0", "q4_k_m"}
    assert modes.PACKAGE_MODES == {"package": "bf16", "package-int4": "int4", "package-q4_k_m": "q4_k_m"}
    # The Q4_K_M pair runs the same llama-quantize file on both sides, in --full.
    assert set(modes.GGUF_PACKAGE_MIXES) <= set(modes.LLAMACPP_MODES.values())
    assert {"llama.cpp-q4_k_m", "package-q4_k_m"} <= set(demo_pkg.FULL_MODES) - set(demo_pkg.DEFAULT_MODES)
    assert set(modes.DRIVER_MODES) == set(modes.LLAMACPP_MODES) | set(modes.PACKAGE_MODES)
    assert not set(modes.PACKAGE_MODES) & set(modes.MODES) and set(modes.PACKAGE_MODES) <= set(demo_pkg.MODES)
    assert modes.EMPTY not in modes.MODES and modes.EMPTY not in demo_pkg.MODES
    ids = [modes.region_id(kind, b) for kind in (modes.DECODE_REST, modes.DECODE_LINEAR, modes.PREFILL_REST,
                                                  modes.PREFILL_LINEAR) for b in range(modes.MAX_COUNTED_BATCHES)]
    ids += [modes.PROMPT_REST, modes.PROMPT_LINEAR]  # the long prompt (batch 1)
    assert len(set(ids)) == len(ids) and set(ids) <= set(range(1, 17))  # rvv_count_region's ids, each used once


def spec_of(*args):
    return demo_pkg.make_spec(demo_pkg.parser().parse_args([*args, "--out", "/nonexistent/demo"]))


def test_presets():
    """The default run is the short one (the 20-minute budget), --full the long one, and
    explicit flags win over either."""
    d = spec_of()
    assert (d["config"]["hidden_size"], d["batches"], d["prompts"], d["steps"]) == (1024, [1], [16], 4)
    # The counting pass reuses the measuring pass's regional artifacts only with the same
    # threads (the K1's 8, which it counts on) and prompt (M buckets).
    assert (d["count_prompt"], d["count_steps"], d["threads"]) == (16, 1, 8)
    assert d["modes"] == list(demo_pkg.DEFAULT_MODES) and d["modes"][0] == "eager"
    f = spec_of("--full")
    assert (f["config"]["vocab_size"], f["batches"], f["prompts"], f["steps"]) == (8192, [1, 2, 4], [32, 128], 8)
    assert f["count_prompt"] == 32 and f["count_steps"] == 2 and f["threads"] == 8  # the shortest prompt
    assert spec_of("--full", "--batch", "2", "--steps", "3")["batches"] == [2]
    # The INT4 package is in the default (beside llama.cpp Q4_0); --full adds the BF16 one and
    # the Q4_K_M pair (llama.cpp and the package of the same llama-quantize file).
    assert f["modes"] == [m for m in demo_pkg.MODES if m in demo_pkg.DEFAULT_MODES
                          + ("package", "llama.cpp-q4_k_m", "package-q4_k_m")]
    assert "package" in f["modes"] and "package" not in d["modes"]
    assert "package-int4" in d["modes"] and "llama.cpp-q4_0" in d["modes"]
    assert spec_of("--modes", "package-int4")["modes"] == ["eager", "package-int4"]
    q = spec_of("--quick", "--batch", "4")  # the smoke test's workload is fixed
    assert (q["batches"], q["prompts"], q["steps"]) == ([1], [8], 3)
    assert q["modes"] == ["eager", "regional", "regional-int4", "whole", "llama.cpp-q4_0", "package"]
    assert spec_of("--quick", "--modes", "eager,regional-int8")["modes"] == ["eager", "regional-int8"]
    assert spec_of("--modes", "whole,regional-int4")["modes"] == ["eager", "regional-int4", "whole"]


def test_plan_stages():
    spec = spec_of()
    st = demo_pkg.plan_stages(spec, count_jobs=0, count_modes="")
    assert [n for n, _ in st] == ["measure:empty"] + [f"measure:{m}" for m in spec["modes"]]
    counted = {n for n, _ in demo_pkg.plan_stages(spec, count_jobs=2, count_modes="") if n.startswith("count:")}
    # A torch mode: one run (its long prompt inside); a driver (llama.cpp, the package): a
    # decode run and a long-prompt run at 8 and at 4 threads. whole: only with --full.
    drivers = {m for m in spec["modes"] if m.startswith(("llama.cpp", "package"))}
    assert spec["count_prefill"] == 512 and drivers
    # (the package at 8 only: its RVV calls are partitioned at export)
    assert counted == ({f"count:{m}" for m in spec["modes"] if m != "whole" and m not in drivers}
                       | {f"count:{m}{k}-t{t}" for m in drivers for k in ("", "-prompt")
                          for t in ((8,) if m.startswith("package") else (8, 4))})
    assert "count:whole" in dict(demo_pkg.plan_stages(spec_of("--full"), count_jobs=2, count_modes=""))
    assert "count:whole" in dict(demo_pkg.plan_stages(spec, count_jobs=2, count_modes="eager,whole"))
    # With --count-layers the drivers' long prompts (llama.cpp's, the package's) are counted
    # at the two depths, their decode at full depth.
    lay = spec_of("--config", "small", "--count-layers", "1,2", "--modes", "regional,package,llama.cpp-q4_0")
    cnt = [n for n, _ in demo_pkg.plan_stages(lay, count_jobs=2, count_modes="") if n.startswith("count:")]
    assert cnt == ["count:eager-L1", "count:eager-L2", "count:regional-L1", "count:regional-L2",
                   "count:llama.cpp-q4_0-t8", "count:llama.cpp-q4_0-prompt-t8-L1", "count:llama.cpp-q4_0-prompt-t8-L2",
                   "count:llama.cpp-q4_0-t4", "count:llama.cpp-q4_0-prompt-t4-L1", "count:llama.cpp-q4_0-prompt-t4-L2",
                   "count:package-t8", "count:package-prompt-t8-L1", "count:package-prompt-t8-L2"]
    st = dict(demo_pkg.plan_stages(spec, count_jobs=2, count_modes="regional,llama.cpp-q4_0"))
    assert {n for n in st if n.startswith("count:")} == {"count:regional"} | {
        f"count:llama.cpp-q4_0{k}-t{t}" for k in ("", "-prompt") for t in (8, 4)}
    # --count-prefill 0: no long prompt anywhere.
    none = spec_of("--count-prefill", "0")
    assert not [n for n, _ in demo_pkg.plan_stages(none, count_jobs=2, count_modes="") if "-prompt" in n]
    # The default workload is what EXPECTED_S was measured with: no scaling.
    assert st["measure:regional"] == progress.EXPECTED_S[("measure", "regional")]
    big = dict(demo_pkg.plan_stages(spec_of("--full"), count_jobs=1, count_modes=""))
    assert big["measure:regional"] > st["measure:regional"]


def test_plan_eta(tmp_path):
    """Time left: the unfinished stages' expected seconds, scaled by how the finished ones
    compared with their expectation; counting runs share count_jobs cores; a running stage
    counts what it has already spent."""
    plan = progress.Plan.create(tmp_path, [("measure:a", 100), ("measure:b", 200), ("count:a", 300),
                                           ("count:b", 300)], count_jobs=2)
    assert plan.seconds_left() == pytest.approx(100 + 200 + 600 / 2)
    plan.finish("measure:a", 200)  # twice as slow as expected
    assert plan.seconds_left() == pytest.approx(2 * 200 + 2 * 600 / 2)
    assert plan.seconds_left({"measure:b": 100}) == pytest.approx(2 * 200 - 100 + 600)
    # A stage far over its estimate keeps a floor of 10% of its (scaled) estimate.
    assert plan.seconds_left({"measure:b": 10_000}) == pytest.approx(0.1 * 400 + 600)
    plan.start("count:a")
    assert progress.Plan.find(tmp_path).running().keys() == {"count:a"}
    assert "stage 2/4" in plan.eta_text()
    assert progress.Plan.find(tmp_path / "none") is None
    r = subprocess.run([sys.executable, "-m", "rvv_inductor.demo.progress", str(tmp_path), "done", "count:a", "600"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "count:a finished in 10m00s" in r.stdout, r.stdout + r.stderr


def test_progress_lines_in_a_log():
    """Into a log (not a terminal) each redraw is one whole line: the stage's text, its
    bar when it names an item "i/n" (i in progress: (i-1)/n of 20 marks), the run's time
    left; one closing line with the whole time."""
    out = io.StringIO()
    p = progress_line.Progress("m: building the model", stream=out, eta=lambda: "stage 1/2, run ~1m00s left")
    p.stage("m: compiling, workload 2/4 (batch 1)")
    p.done()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    assert lines[0] == "  m: building the model  00:00  | stage 1/2, run ~1m00s left", lines
    assert lines[1] == "  " + "#" * 5 + "-" * 15 + " m: compiling, workload 2/4 (batch 1)  00:00  | stage 1/2, run ~1m00s left"
    assert lines[-1] == "  done in 0m00s (emulated wall time)" and len(lines) == 3, lines
    # An estimate that cannot be read this time (a plan file being rewritten) leaves it out.
    out = io.StringIO()

    def broken():
        raise ValueError("half-written plan")
    progress_line.Progress("m: x", stream=out, eta=broken).done()
    assert out.getvalue().splitlines()[0] == "  m: x  00:00"


def test_the_driver_needs_no_tqdm():
    """scripts/demo runs the plan (progress.py) and the driver with the host's python3,
    which may lack tqdm: only the workers' progress lines (progress_line.py) import it."""
    code = ("import sys; sys.modules['tqdm'] = None; import rvv_inductor.demo, rvv_inductor.demo.progress;"
            "from rvv_inductor.demo.progress import main; print('ok')")
    # 600 s as the file's other interpreters: a clean clone's first import under emulation,
    # beside two busy shards, once took over 120 s (the .pyc files are written then).
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_plan_eta_side_by_side(tmp_path):
    """Measuring workers run measure_jobs at a time: a stage's expected seconds are its
    wall time beside a neighbour, and that many run at once."""
    plan = progress.Plan.create(tmp_path, [("measure:a", 100), ("measure:b", 200), ("count:a", 300)],
                                count_jobs=1, measure_jobs=2)
    assert plan.seconds_left() == pytest.approx((100 + 200) / 2 + 300)
    plan.finish("measure:a", 100)  # exactly as expected: no correction
    assert plan.seconds_left() == pytest.approx(200 / 2 + 300)
    plan.finish("measure:b", 500)  # slower: the counting run is scaled too (factor 600/300)
    assert plan.seconds_left() == pytest.approx(300 * 600 / 300)


def test_measure_jobs():
    assert spec_of()["measure_jobs"] == 2  # the tiny default: two workers side by side
    assert spec_of("--measure-jobs", "1")["measure_jobs"] == 1
    assert spec_of("--config", "qwen2.5-0.5b", "--modes", "eager,regional-int4")["measure_jobs"] == 1  # a model copy per worker
    with pytest.raises(demo_pkg.models.DemoInputError, match="measure-jobs"):
        spec_of("--measure-jobs", "0")


def test_weight_bytes_and_memory_goals():
    m = {"weight_bytes_step": 4000}
    assert report.weight_bytes_per_token(m, 1) == 4000 and report.weight_bytes_per_token(m, 4) == 1000
    assert report.weight_bytes_per_token({"weight_bytes_step": None}, 1) is None
    g = report.memory_goals({"eager": {"rss_over_empty_kib": 1000}, "regional": {"rss_over_empty_kib": 1040},
                             "regional-int4": {"rss_over_empty_kib": 450}, "regional-int8": {"rss_over_empty_kib": 600}})
    assert g["regional_over_eager"] == pytest.approx(1.04) and g["regional_ok"]
    assert g["int4_over_eager"] == pytest.approx(0.45) and not g["int4_ok"]
    assert g["int8_over_eager"] == pytest.approx(0.6)
    assert report.memory_goals({"eager": {"rss_over_empty_kib": None}}) == {}


def test_llamacpp_counts(tmp_path):
    """llama.cpp's decode steps are one region: per token = the region's totals / steps; the
    counting run's JSON line names the ggml variant."""
    reg = {"insns": 3.0e6, "vector_insns": 1.0e6, "vsetvl": 0, "vbeats": 2.0e6, "bytes_read": 9e5,
           "bytes_written": 1e3, "dram_read_bytes": 8e5, "dram_write_bytes": 0, "calls": 3}
    assert report.counted_driver(tmp_path, "llama.cpp-q4_0", {}) is None
    (tmp_path / "count-argv-llama.cpp-q4_0.json").write_text(json.dumps({"runs": [
        {"tag": "-t1", "kind": "decode", "threads": 1, "argv": ["x"], "prompt": 8, "steps": 3,
         "region": modes.LLAMACPP_REGION}]}))
    (tmp_path / "counts-llama.cpp-q4_0-t1.json").write_text(json.dumps({"regions": {str(modes.LLAMACPP_REGION): reg}}))
    (tmp_path / "count-llama.cpp-q4_0-t1.stdout").write_text('noise\n{"ggml_cpu_so": "libggml-cpu-riscv64_v.so"}\n')
    (c,) = report.counted_driver(tmp_path, "llama.cpp-q4_0", {})
    assert c["decode_rest"]["insns"] == pytest.approx(1.0e6) and c["decode_linear"] is None
    assert c["backend"] == "libggml-cpu-riscv64_v.so"
    # One core: (2e6 - 1e6 scalar-like) / 3 * CPI + 2e6 / 3 beats, against DRAM 8e5 / 3 bytes.
    comp = ((2.0e6 * policy.CPI_SCALAR + 2.0e6) / 3) / policy.K1_CLOCK_HZ
    mem = 8e5 / 3 / policy.K1_DRAM_BYTES_PER_S
    assert c["est_decode_tok_s_ceiling"] == pytest.approx(1 / max(comp, mem))
    mem = 8e5 / 3 / policy.K1_DRAM_ACHIEVED_BYTES_PER_S
    assert c["est_decode_tok_s"] == pytest.approx(1 / max(comp, mem))  # the headline: calibrated


def test_llama_quantize_output_is_reused_only_for_the_same_source(tmp_path):
    """Two modes that quantize the same BF16 bytes with the same mix share llama-quantize's
    output (its sidecar names the source); another source, another mix, or a file without
    its sidecar is quantized again."""
    made = tmp_path / "package-model-q4_k_m.gguf"
    made.write_bytes(b"GGUF quantized bytes")
    source = {"bf16_sha256": "ab" * 32, "mix": "Q4_K_M", "tool": "/usr/bin/llama-quantize"}
    want = tmp_path / "model-q4_k_m.gguf"
    assert not llamacpp._reuse_quantized(str(want), source)  # no sidecar: made by someone else
    (tmp_path / (made.name + llamacpp.SOURCE_SUFFIX)).write_text(json.dumps(source))
    for other in ({**source, "bf16_sha256": "cd" * 32}, {**source, "mix": "Q5_K_M"}, {**source, "tool": "/x"}):
        assert not llamacpp._reuse_quantized(str(want), other) and not want.exists()
    assert llamacpp._reuse_quantized(str(want), source)
    assert want.read_bytes() == made.read_bytes()
    assert json.loads((tmp_path / (want.name + llamacpp.SOURCE_SUFFIX)).read_text()) == source
    made.unlink()  # a sidecar whose file is gone vouches for nothing
    (tmp_path / (want.name + llamacpp.SOURCE_SUFFIX)).unlink()
    want.unlink()
    assert not llamacpp._reuse_quantized(str(want), source)
    side = tmp_path / (made.name + llamacpp.SOURCE_SUFFIX)
    assert llamacpp._sha256(str(side)) == hashlib.sha256(json.dumps(source).encode()).hexdigest()


def test_runner_times():
    """rvv-generate's summary lines (tools/rvv_generate/main.cpp's printf) as the package mode reads them."""
    out = ("tokens: 5,17,0\nload_s: 1.250\nprefill_s: 3.500 (8 tokens)\n"
           "decode_s: 0.900 (2 steps, 0.450 s/token)\nthreads: 1\n"
           "ttft_s: 3.500 (8-token prompt, 2.29 prompt tok/s; wall clock of this run: ...)\n")
    assert modes.runner_times(out) == {"tokens": [5, 17, 0], "load_s": 1.25, "prefill_s": 3.5,
                                        "decode_s_per_token": 0.45, "ttft_s": 3.5}
    assert modes.runner_times("tokens: 4\ndecode_s: 0.000 (0 steps, 0.000 s/token)\n")["tokens"] == [4]


def test_package_counts_busiest_thread(tmp_path):
    """The package's decode steps run on 8 threads: per token = the region / steps, the
    compute at the busiest thread's cycles (not the total on one core)."""
    threads = [_thread(4.0e6, 1.0e6, 0.5e6, 4e5)] + [_thread(1.0e6, 0.5e6, 0.2e6, 1e5)] * 7
    reg = _raw_region(threads)
    (tmp_path / "count-argv-package.json").write_text(json.dumps({"runs": [
        {"tag": "-t8", "kind": "decode", "threads": 8, "argv": ["rvv-generate"], "prompt": 8, "steps": 2,
         "region": modes.LLAMACPP_REGION}]}))
    (tmp_path / "counts-package-t8.json").write_text(json.dumps({"regions": {str(modes.LLAMACPP_REGION): reg}}))
    (c,) = report.counted(tmp_path, "package", {"runs": [], "dims": {"num_hidden_layers": 2}})
    assert c["decode_linear"] is None and c["decode_rest"]["threads_active"] == 8
    assert c["decode_rest"]["insns"] == pytest.approx(reg["insns"] / 2)
    # Busiest thread: (4e6 - 1e6) scalar-like at CPI 1 + 0.5e6 beats over 2 steps; DRAM
    # (4e5 + 7 * 1e5) / 2 bytes is far below the compute time at either bandwidth.
    busiest = ((4.0e6 - 1.0e6) * policy.CPI_SCALAR + 0.5e6) / 2
    assert c["est_decode_tok_s"] == pytest.approx(policy.K1_CLOCK_HZ / busiest)
    assert c["est_decode_tok_s_ceiling"] == pytest.approx(policy.K1_CLOCK_HZ / busiest)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "demo"))
    import recompute

    want = recompute.estimates(tmp_path, "package", {}, 2)[8]
    assert c["est_decode_tok_s"] == pytest.approx(want["est_decode_tok_s"], rel=1e-9)
    assert c["est_decode_tok_s_ceiling"] == pytest.approx(want["est_decode_tok_s_ceiling"], rel=1e-9)


def test_check_report_recomputation_agrees(tmp_path):
    """tests/demo/check_report.py recomputes the two K1 columns from the raw counts with its
    own arithmetic (tests/demo/recompute.py): it must agree with the report's, for
    per-thread counts (extrapolated from 1 and 3 layers) and for one-thread counts."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "demo"))
    import recompute

    def linear(layers, nthreads):
        return _raw_region([_thread(3e5 * layers, 1e5 * layers, (1.5e6 + 1e5 * i) * layers, 4e6 * layers)
                            for i in range(nthreads)])

    def owned(region, owner=0):  # the thread that opened the region (serial work beyond the others)
        return dict(region, owner_vcpu=owner) if "threads" in region else region

    for nthreads in (1, 8):
        d = tmp_path / f"t{nthreads}"
        d.mkdir()
        for n in (1, 3):
            regs = {}
            for bi in range(2):  # two batch sizes
                regs[str(1 + 4 * bi)] = _raw_region([_thread(5e6 + 1e6 * n, 1e3, 4e3, 2e5)])
                regs[str(2 + 4 * bi)] = owned(linear(n, nthreads), owner=nthreads - 1)
                regs[str(3 + 4 * bi)] = owned(_raw_region([_thread(7e6 + 3e6 * n, 2e3, 8e3, 3e5)] * 2))
                regs[str(4 + 4 * bi)] = linear(3 * n, nthreads)
            regs["13"] = owned(_raw_region([_thread(9e6 + 2e6 * n, 1e3, 1e3, 1e5)] * 3))  # the long prompt
            regs["14"] = owned(linear(30 * n, nthreads), owner=nthreads // 2)
            if nthreads == 1:
                for r in regs.values():
                    del r["threads"]
            (d / f"counts-regional-L{n}.json").write_text(json.dumps({"regions": regs}))
        cspec = {"runs": [{"tag": "-L1", "layers": 1}, {"tag": "-L3", "layers": 3}],
                 "dims": {"num_hidden_layers": 28}, "prompts": [16], "steps": 3, "batches": [1, 4],
                 "count_prefill": 512}
        rows = report.counted(d, "regional", cspec)
        want = recompute.estimates(d, "regional", cspec, 28)
        assert [c["batch"] for c in rows] == sorted(want) == [1, 4]
        assert "est_prompt_tok_s" in want[1] and rows[0]["long_prompt"] == 512
        for c in rows:
            for key, v in want[c["batch"]].items():
                assert c[key] == pytest.approx(v, rel=1e-9), (nthreads, c["batch"], key)
    # layers-int4 (no Linear/rest split): its long prompt in region 13 alone, no region 14.
    d = tmp_path / "layers"
    d.mkdir()
    for n in (1, 3):
        regs = {"1": owned(linear(n, 8)), "3": owned(linear(2 * n, 8)), "13": owned(linear(40 * n, 8), owner=2)}
        (d / f"counts-layers-int4-L{n}.json").write_text(json.dumps({"regions": regs}))
    lspec = dict(cspec, batches=[1])
    rows = report.counted(d, "layers-int4", lspec)
    want = recompute.estimates(d, "layers-int4", lspec, 28)
    assert len(rows) == 1 and rows[0]["prompt_linear"] is None and rows[0]["long_prompt"] == 512
    assert "est_prompt_tok_s" in want[1]
    for key, v in want[1].items():
        assert rows[0][key] == pytest.approx(v, rel=1e-9), key
    # llama.cpp: per thread count, a decode run (one region: the decode steps) and the long
    # prompt at two depths (--count-layers), extrapolated.
    reg = owned(_raw_region([_thread(3.0e6, 1.0e6, 2.0e6, 8e5), _thread(1.0e6, 0.5e6, 1.0e6, 1e5),
                             _thread(1.2e6, 0.5e6, 1.0e6, 1e5)]))
    runs = []
    for t in (8, 4):
        runs.append({"tag": f"-t{t}", "kind": "decode", "threads": t, "argv": ["x"], "prompt": 8, "steps": 3,
                     "region": modes.LLAMACPP_REGION})
        (tmp_path / f"counts-llama.cpp-q8_0-t{t}.json").write_text(json.dumps({"regions": {"1": reg}}))
        for n in (1, 3):
            runs.append({"tag": f"-prompt-t{t}-L{n}", "kind": "prompt", "threads": t, "layers_tag": f"-L{n}",
                         "argv": ["x"], "prompt": 512, "steps": 0, "prefill_region": modes.PREFILL_REST})
            long = owned(_raw_region([_thread(4e8 * n / t + 1e7, 1e8 * n / t, 3e8 * n / t, 1e8 * n)] * t))
            (tmp_path / f"counts-llama.cpp-q8_0-prompt-t{t}-L{n}.json").write_text(json.dumps({"regions": {"3": long}}))
    (tmp_path / "count-argv-llama.cpp-q8_0.json").write_text(json.dumps({"runs": runs}))
    lspec = {"runs": [{"tag": "-L1", "layers": 1}, {"tag": "-L3", "layers": 3}], "dims": {"num_hidden_layers": 28}}
    rows = report.counted_driver(tmp_path, "llama.cpp-q8_0", lspec)
    want = recompute.estimates(tmp_path, "llama.cpp-q8_0", lspec, 28)
    assert [c["threads"] for c in rows] == [8, 4] and sorted(want) == [4, 8]
    for c in rows:
        assert c["long_prompt"] == 512 and "est_prompt_tok_s" in want[c["threads"]]
        for key, v in want[c["threads"]].items():
            assert c[key] == pytest.approx(v, rel=1e-9), (c["threads"], key)


def test_prompt_table_gives_eager_short_prompt_rate():
    """Eager's long prompt is not counted; the prompt table gives its counted short prompt's
    rate in the headline column and what a long prompt takes at that rate: the numbers are
    taken here from the report's own counted row (est_prefill_tok_s), not from the line."""
    rep = json.loads((Path(__file__).resolve().parents[3] / "bench/results/demo-default/report.json").read_text())
    eager = [c for c in rep["modes"]["eager"]["counts"] if c["batch"] == 1][0]
    rate, p = eager["est_prefill_tok_s"], rep["count_spec"]["count_prefill"]
    (line,) = [x for x in report._prompt_table(rep) if "eager and whole-model" in x]
    assert f"Eager's {eager['prompt']}-token prompt, counted: {rate:.2f} prompt tok/s" in line
    assert f"a {p}-token prompt would take ~{p / rate:.0f} s" in line
    del rep["modes"]["eager"]  # not counted: the line says only that
    (line,) = [x for x in report._prompt_table(rep) if "eager and whole-model" in x]
    assert "Eager's" not in line


def test_board_lines_only_beside_the_boards_model():
    """The board numbers were measured on Qwen2.5-1.5B: the plot draws them beside the 1.5B
    run's bars, not beside the tiny default demo's (where 1.3-3.8 tok/s lines sat at the axis
    under 200 tok/s bars). The dimensions are compared with the published model card's, not
    with the package's preset."""
    root = Path(__file__).resolve().parents[3] / "bench/results"
    qwen15 = {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28, "vocab_size": 151936}
    for run, want in (("demo-qwen2.5-1.5b", True), ("demo-default", False), ("demo-q4km", False)):
        rep = json.loads((root / run / "report.json").read_text())
        assert report._boards_model(rep) is want, run
        assert all(rep["spec"]["config"][k] == v for k, v in qwen15.items()) is want, run
    rep["spec"]["config"] = dict(rep["spec"]["config"], **qwen15)
    assert report._boards_model(rep)
    rep["spec"]["config"]["num_hidden_layers"] = 2  # a 2-layer cut of the 1.5B is not the boards' model
    assert not report._boards_model(rep)


def test_qwen3_config():
    """--config qwen3-0.6b: Qwen3-0.6B's dimensions (heads of 128: q_proj [2048, 1024]) and
    parameter count (tied embedding, q/k norms, no biases: 596M with the full vocabulary)."""
    s = spec_of("--config", "qwen3-0.6b")
    assert s["config"]["model_type"] == "qwen3" and s["config"]["head_dim"] == 128
    assert s["n_params_expected"] == 596049920
