"""bench/serve_bench.py's arithmetic (host python, no emulation, no timing): the K1
estimate of a counted serving window from the plugin's per-region, per-thread counters,
checked against an independent recomputation with the K1 constants written out here."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def sb():
    spec = importlib.util.spec_from_file_location("serve_bench", REPO / "bench" / "serve_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _thread(insns, vec, vsetvl, vbeats):
    return {"insns": insns, "vector_insns": vec, "vsetvl": vsetvl, "vbeats": vbeats}


def _region(threads, dram_r, dram_w):
    tot = {k: sum(t[k] for t in threads) for k in ("insns", "vector_insns", "vsetvl", "vbeats")}
    return dict(tot, dram_read_bytes=dram_r, dram_write_bytes=dram_w, threads_active=len(threads),
                max_thread={"insns": max(t["insns"] for t in threads)},
                threads={str(i): t for i, t in enumerate(threads)})


# The K1 numbers, written out (policy.py: 1.6 GHz, 8 cores, CPI 1, 10.66 GB/s peak, the
# achieved bandwidth fitted in calibration.py).
CLOCK, CORES, PEAK, ACHIEVED = 1.6e9, 8, 10.66e9, 3.325e9


def _expected(threads, dram, tokens, bw):
    cyc = [(t["insns"] - t["vector_insns"] + t["vsetvl"]) * 1.0 + t["vbeats"] for t in threads if t["insns"]]
    compute = max(max(cyc), sum(cyc) / CORES) / CLOCK
    return tokens / max(compute, dram / bw)


def test_constants_are_the_projects(sb):
    assert (sb.policy.K1_CLOCK_HZ, sb.policy.K1_CORES, sb.policy.K1_DRAM_BYTES_PER_S) == (CLOCK, CORES, PEAK)
    assert sb.policy.K1_DRAM_ACHIEVED_BYTES_PER_S == ACHIEVED
    assert sb.policy.CPI_SCALAR == 1.0


def test_compute_bound_window_busiest_thread(sb):
    # One busy thread (scalar Python work), one light one: compute = the busy thread.
    th = [_thread(3_000_000_000, 100_000_000, 1_000_000, 250_000_000), _thread(50_000_000, 0, 0, 0)]
    reg = _region(th, 400_000_000, 10_000_000)
    e = sb.window_estimate(reg, 16)
    busy = (3_000_000_000 - 100_000_000 + 1_000_000) + 250_000_000
    assert e["max_thread_cycles"] == pytest.approx(busy)
    assert e["compute_s"] == pytest.approx(busy / CLOCK)
    assert e["bound"] == "compute"
    assert e["est_tok_s"] == pytest.approx(_expected(th, 410_000_000, 16, ACHIEVED))
    assert e["est_tok_s"] == pytest.approx(16 / (busy / CLOCK))
    assert e["insns_per_token"] == pytest.approx((3_000_000_000 + 50_000_000) / 16)
    assert e["max_thread_insns_per_token"] == pytest.approx(3_000_000_000 / 16)
    assert e["dram_bytes_per_token"] == pytest.approx(410_000_000 / 16)


def test_memory_bound_and_even_split(sb):
    # Ten equal threads: all cycles / 8 cores exceeds one thread's; DRAM dominates.
    th = [_thread(100_000_000, 0, 0, 0) for _ in range(10)]
    reg = _region(th, 6_000_000_000, 0)
    e = sb.window_estimate(reg, 128)
    assert e["compute_s"] == pytest.approx(1e9 / CORES / CLOCK)
    assert e["bound"] == "memory"
    assert e["memory_s"] == pytest.approx(6e9 / ACHIEVED)
    assert e["est_tok_s"] == pytest.approx(128 * ACHIEVED / 6e9)
    assert e["est_tok_s_peak_bw"] == pytest.approx(_expected(th, 6e9, 128, PEAK))


def test_summarize_levels_and_ratio(sb, tmp_path):
    plugin = {"regions": {}}
    levels = {}
    for c in (1, 2, 4, 8):
        th = [_thread(1_000_000_000 + 200_000_000 * c, 10_000_000 * c, 1000, 40_000_000 * c)]
        plugin["regions"][str(c)] = _region(th, 50_000_000 + 5_000_000 * c, 0)
        levels[str(c)] = {"tokens": 16 * c, "requests": c, "emulated_wall_s": 1.0}
    # Through JSON, as the report reads it.
    plugin = json.loads(json.dumps(plugin))
    s = sb.summarize(plugin, levels)
    exp = {c: _expected([plugin["regions"][str(c)]["threads"]["0"]],
                        plugin["regions"][str(c)]["dram_read_bytes"], 16 * c, ACHIEVED) for c in (1, 2, 4, 8)}
    for c in (1, 2, 4, 8):
        assert s["levels"][str(c)]["est_tok_s"] == pytest.approx(exp[c])
        assert s["levels"][str(c)]["requests"] == c
    assert s["ratio_levels"] == [1, 8]
    assert s["ratio_first_last"] == pytest.approx(exp[8] / exp[1])


def test_time_to_first_token_windows(sb):
    """Region 8 + c holds the first-token window of level c: c requests, one token each;
    its estimated time is the last request's time to first token (c tokens / est tok/s)."""
    plugin = {"regions": {}}
    levels = {}
    for c in (1, 4):
        plugin["regions"][str(c)] = _region([_thread(2e9, 1e7, 1000, 4e7)], 6e7, 0)
        # the first tokens: compute-bound at c = 1 (2e8 cycles, 1e6 DRAM bytes), DRAM-bound at c = 4
        first = [_thread(2e8 * c, 0, 0, 0)] * 2
        plugin["regions"][str(sb.TTFT_REGION_BASE + c)] = _region(first, 1e6 if c == 1 else 4e9, 0)
        levels[str(c)] = {"tokens": 16 * c, "requests": c, "emulated_wall_s": 1.0}
    s = sb.summarize(json.loads(json.dumps(plugin)), levels)
    for c in (1, 4):
        dram = 1e6 if c == 1 else 4e9
        want = max(max(2e8 * c, 2 * 2e8 * c / CORES) / CLOCK, dram / ACHIEVED)
        assert s["levels"][str(c)]["est_ttft_s"] == pytest.approx(want)
        assert s["levels"][str(c)]["est_ttft_s_peak_bw"] == pytest.approx(max(2e8 * c / CLOCK, dram / PEAK))
    assert s["levels"]["1"]["ttft_bound"] == "compute" and s["levels"]["4"]["ttft_bound"] == "memory"
    # A run without first-token windows (older results) has no TTFT, and says so in the report.
    del plugin["regions"][str(sb.TTFT_REGION_BASE + 1)]
    assert "est_ttft_s" not in sb.summarize(plugin, levels)["levels"]["1"]


def test_missing_region_is_an_error(sb):
    with pytest.raises(ValueError, match="no region 4"):
        sb.summarize({"regions": {}}, {"4": {"tokens": 64}})


def _result(sb, fmt, servers):
    lv = {"tokens": 16, "requests": 1, "emulated_wall_s": 1.0}
    th = [_thread(100_000_000, 0, 0, 0)]
    plugin = {"regions": {"1": _region(th, 10_000_000, 0)}}
    return {"command": "bench/serve_bench.py", "source": "x", "qemu": "q", "plugin": "p", "format": fmt,
            "model_config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256},
            "config_name": "tiny", "linear_bf16_bytes": 4 * 2**20,
            "gguf": {"file_bytes": 2**20, "linear_weight_bytes": 2**20 - 4096, "format": fmt},
            "prompt_tokens": 32, "new_tokens": 16, "threads": 1,
            "calibration": {"bandwidth": ACHIEVED, "peak": PEAK, "reference": "r", "clock_hz": CLOCK, "cores": CORES},
            "servers": {k: dict({"argv": ["x"], "emulated_load_s": 1, "emulated_total_s": 2, "plugin_notes": {}},
                                **extra, **sb.summarize(plugin, {"1": lv})) for k, extra in servers.items()}}


def test_report_names_the_format_and_ggml_variant(sb):
    # A quantized run: both servers load the one GGUF; the report says so, with its sizes,
    # and names the ggml CPU variant llama-server loaded.
    md = sb.markdown(_result(sb, "q4_0", {"rvv-cb": {}, "llama": {"ggml_cpu": ["libggml-cpu-riscv64_v.so"]}}))
    assert "written as a Q4_0 GGUF (1.0 MiB file" in md and "against 4.0 MiB in BF16" in md
    assert "(the Q4_0 GGUF, INT4, RVV Linear)" in md and "the same weights as Q4_0 GGUF" in md
    assert "ggml CPU variant loaded: libggml-cpu-riscv64_v.so" in md
    md = sb.markdown(_result(sb, "bf16", {"rvv-cb": {}, "llama": {"ggml_cpu": []}}))
    assert "BF16; Linear weights 4.0 MiB per decode step" in md and "(BF16, RVV Linear)" in md
    assert "ggml CPU variant loaded: none found" in md
